// libzip behind io/zip.h: opens the archive once, reads members whole (npz members are arrays that
// are loaded entirely anyway), writes members stored or deflated. Compiled without libzip when the
// build did not find it; then it only throws.
#include "io/zip.h"

#include <fmt/format.h>

#include <filesystem>
#include <set>

#include "core/sizes.h"
#include "core/error.h"
#include "core/files.h"

#if RNNTRAIN_HAVE_LIBZIP
#include <zip.h>
#endif

namespace rnntrain {

#if RNNTRAIN_HAVE_LIBZIP

bool zip_supported() { return true; }

// What writes an archive of this name, for "re-create it" hints.
static std::string writer_of(const std::string& path) {
  auto ends = [&](const char* suffix) {
    const std::string s(suffix);
    return path.size() >= s.size() && path.compare(path.size() - s.size(), s.size(), s) == 0;
  };
  if (ends(".keras")) return "a .keras file is written by Keras' model.save";
  if (ends(".npz")) return "an .npz file is written by numpy.savez or numpy.savez_compressed";
  return "re-create it with the program that wrote it";
}

static std::string zip_error_text(int code) {
  zip_error_t e;
  zip_error_init_with_code(&e, code);
  std::string s = zip_error_strerror(&e);
  zip_error_fini(&e);
  return s;
}

struct ZipReader::Impl {
  zip_t* z = nullptr;
  ~Impl() {
    if (z) zip_discard(z);  // read-only: nothing to write back
  }
};

ZipReader::ZipReader(const std::string& path) : impl_(std::make_unique<Impl>()), path_(path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw DataError(fmt::format("{}: no such file. Check the path (relative paths in a config are relative to the "
                                "config file's folder).", path));
  if (const std::string kind = special_file(path); !kind.empty())  // a FIFO would block the open forever
    throw DataError(fmt::format("{}: is {}, not a zip archive; {}.", path, kind, writer_of(path)));
  int err = 0;
  impl_->z = zip_open(path.c_str(), ZIP_RDONLY, &err);
  if (!impl_->z) {
    std::string hint = err == ZIP_ER_NOZIP ? fmt::format("It is not a zip archive, or it is truncated: {}.", writer_of(path))
                                           : fmt::format("It is damaged or truncated: {}.", writer_of(path));
    throw DataError(fmt::format("{}: cannot open as a zip archive ({}). {}", path, zip_error_text(err), hint));
  }
  check_members();
}

// Every member, before any is read: a name given twice (which one a reader takes is up to it), a
// name that is not a plain path inside the archive (absolute, or with a '..' part), and a member
// compressed other than stored or deflated (what numpy and Keras write) or encrypted are refused by
// name.
void ZipReader::check_members() const {
  const zip_int64_t n = zip_get_num_entries(impl_->z, 0);
  std::set<std::string> seen;
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(impl_->z, static_cast<zip_uint64_t>(i), 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME))
      throw DataError(fmt::format("{}: member {} of the archive cannot be read ({}); {}.", path_, i,
                                  zip_strerror(impl_->z), writer_of(path_)));
    const std::string name = st.name;
    const std::string shown = name.substr(0, 80);
    if (!seen.insert(name).second)
      throw DataError(fmt::format("{}: member '{}' is in the archive twice, so which one is meant is not defined; {}.",
                                  path_, shown, writer_of(path_)));
    bool unsafe = name.empty() || name[0] == '/' || name.find('\\') != std::string::npos;
    for (size_t at = 0; !unsafe && at <= name.size();) {
      const size_t end = std::min(name.find('/', at), name.size());
      unsafe = name.compare(at, end - at, "..") == 0;
      at = end + 1;
    }
    if (unsafe)
      throw DataError(fmt::format("{}: member '{}' is not a plain name inside the archive (absolute, or with a '..' "
                                  "part); {}.", path_, shown, writer_of(path_)));
    if ((st.valid & ZIP_STAT_COMP_METHOD) && st.comp_method != ZIP_CM_STORE && st.comp_method != ZIP_CM_DEFLATE)
      throw DataError(fmt::format("{}: member '{}' is compressed with zip method {}; rnntrain reads members stored or "
                                  "deflated, as Keras and numpy write them; {}.", path_, shown, st.comp_method,
                                  writer_of(path_)));
    if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE)
      throw DataError(fmt::format("{}: member '{}' is encrypted; {}.", path_, shown, writer_of(path_)));
  }
}

ZipReader::~ZipReader() = default;
ZipReader::ZipReader(ZipReader&&) noexcept = default;
ZipReader& ZipReader::operator=(ZipReader&&) noexcept = default;

std::vector<std::string> ZipReader::names() const {
  std::vector<std::string> out;
  const zip_int64_t n = zip_get_num_entries(impl_->z, 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    const char* name = zip_get_name(impl_->z, static_cast<zip_uint64_t>(i), 0);
    if (name) out.emplace_back(name);
  }
  return out;
}

bool ZipReader::has(const std::string& member) const { return zip_name_locate(impl_->z, member.c_str(), 0) >= 0; }

uint64_t ZipReader::size(const std::string& member) const {
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat(impl_->z, member.c_str(), 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
    throw DataError(fmt::format("{}: no member '{}' in this archive.", path_, member));
  return st.size;
}

// A member's declared size, checked before anything is allocated for it: a stored member cannot be
// larger than the archive, deflate cannot compress better than about 1032:1, and the bytes must fit
// in memory.
static void check_declared_size(const std::string& path, const std::string& member, const zip_stat_t& st) {
  std::error_code ec;
  const uint64_t archive = std::filesystem::file_size(path, ec);
  const uint64_t ratio = (st.valid & ZIP_STAT_COMP_METHOD) && st.comp_method == ZIP_CM_STORE ? 1 : 1032;
  const std::string size = bytes_str(static_cast<double>(st.size));
  if (!ec && st.size / ratio > archive + 1024)
    throw DataError(fmt::format("{}: member '{}' declares {} uncompressed in an archive of {}: {}, so the archive "
                                "is damaged or forged; {}.", path, member, size, bytes_str(static_cast<double>(archive)),
                                ratio == 1 ? "a stored member cannot be larger than its archive"
                                           : "no compression is that good", writer_of(path)));
  if (st.size > memory_limit_bytes())
    throw DataError(fmt::format("{}: member '{}' declares {} uncompressed, more than this machine's memory ({}); "
                                "re-create the archive with smaller members.", path, member, size,
                                bytes_str(static_cast<double>(memory_limit_bytes()))));
}

std::string ZipReader::read(const std::string& member) const {
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat(impl_->z, member.c_str(), 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE)) {
    std::string list;
    for (const auto& n : names()) list += (list.empty() ? "" : ", ") + n;
    throw DataError(fmt::format("{}: no member '{}' in this archive (members: {}).", path_, member,
                                list.empty() ? "none" : list));
  }
  check_declared_size(path_, member, st);
  zip_file_t* f = zip_fopen(impl_->z, member.c_str(), 0);
  if (!f)
    throw DataError(fmt::format("{}: cannot read member '{}' ({}); {}.", path_, member, zip_strerror(impl_->z),
                                writer_of(path_)));
  std::string bytes(static_cast<size_t>(st.size), '\0');
  zip_uint64_t got = 0;
  while (got < st.size) {
    const zip_int64_t r = zip_fread(f, bytes.data() + got, st.size - got);
    if (r <= 0) {
      std::string why = r < 0 ? zip_file_strerror(f) : "unexpected end of data";
      zip_fclose(f);
      throw DataError(fmt::format("{}: member '{}' is damaged ({}); {}.", path_, member, why, writer_of(path_)));
    }
    got += static_cast<zip_uint64_t>(r);
  }
  const int rc = zip_fclose(f);  // reports a CRC mismatch found at the end
  if (rc != 0)
    throw DataError(fmt::format("{}: member '{}' is damaged ({}); {}.", path_, member, zip_error_text(rc),
                                writer_of(path_)));
  return bytes;
}

void write_zip(const std::string& path, const std::vector<std::pair<std::string, std::string>>& members,
               bool deflate) {
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  if (!z)
    throw DataError(fmt::format("{}: cannot create zip archive ({}). Check that its folder exists and is writable.",
                                path, zip_error_text(err)));
  for (const auto& [name, bytes] : members) {
    // The buffers live in `members` until zip_close below, which is when libzip reads them.
    zip_source_t* src = zip_source_buffer(z, bytes.data(), bytes.size(), 0);
    zip_int64_t idx = src ? zip_file_add(z, name.c_str(), src, ZIP_FL_OVERWRITE | ZIP_FL_ENC_UTF_8) : -1;
    if (idx < 0 || zip_set_file_compression(z, static_cast<zip_uint64_t>(idx),
                                            deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0) != 0) {
      std::string why = zip_strerror(z);
      if (src && idx < 0) zip_source_free(src);
      zip_discard(z);
      throw DataError(fmt::format("{}: cannot add member '{}' ({}).", path, name, why));
    }
  }
  if (zip_close(z) != 0) {
    std::string why = zip_strerror(z);
    zip_discard(z);
    throw DataError(fmt::format("{}: cannot write zip archive ({}). Check free space and permissions.", path, why));
  }
}

#else  // no libzip

bool zip_supported() { return false; }

[[noreturn]] static void no_libzip(const std::string& path) {
  throw DataError(fmt::format("{}: reading or writing .npz and .keras needs libzip, and this rnntrain was built without it. "
                              "Install libzip (Debian: apt-get install libzip-dev) and rebuild, or save the arrays "
                              "as .npy files or HDF5.", path));
}

struct ZipReader::Impl {};
ZipReader::ZipReader(const std::string& path) : path_(path) { no_libzip(path); }
ZipReader::~ZipReader() = default;
ZipReader::ZipReader(ZipReader&&) noexcept = default;
ZipReader& ZipReader::operator=(ZipReader&&) noexcept = default;
std::vector<std::string> ZipReader::names() const { no_libzip(path_); }
bool ZipReader::has(const std::string&) const { no_libzip(path_); }
uint64_t ZipReader::size(const std::string&) const { no_libzip(path_); }
std::string ZipReader::read(const std::string&) const { no_libzip(path_); }
void write_zip(const std::string& path, const std::vector<std::pair<std::string, std::string>>&, bool) {
  no_libzip(path);
}

#endif

}  // namespace rnntrain

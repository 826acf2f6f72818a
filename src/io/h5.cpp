// The HDF5 layer's ids, errors, files and groups; datasets are in h5_dataset.cpp, attributes in
// h5_attr.cpp. Every HDF5 call goes through H5_CALL, which throws DataError naming the file, the
// object and the call. Not thread-safe beyond what the HDF5 build is.
#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/files.h"
#include "core/log.h"
#include "io/h5_detail.h"

namespace rnntrain::h5 {

namespace fs = std::filesystem;
using namespace detail;

// ---- Handle ------------------------------------------------------------------------------------

Handle::Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    Handle old(std::move(*this));
    id_ = o.id_;
    close_ = o.close_;
    o.id_ = -1;
  }
  return *this;
}

Handle::~Handle() {
  // An object of a file closed with H5F_CLOSE_STRONG is already closed: nothing to do.
  if (id_ >= 0 && close_ && H5Iis_valid(id_) > 0 && close_(id_) < 0)
    log_warn("HDF5: closing id {} failed ({}); the file may not be complete", id_, hdf5_reason());
}

// ---- errors ------------------------------------------------------------------------------------

namespace detail {

void init() {
  thread_local bool done = false;
  if (!done) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    done = true;
  }
}

static herr_t collect(unsigned, const H5E_error2_t* e, void* data) {
  auto* out = static_cast<std::vector<std::string>*>(data);
  if (e->desc && *e->desc) out->emplace_back(e->desc);
  return 0;
}

std::string hdf5_reason() {
  std::vector<std::string> descs;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect, &descs);
  H5Eclear2(H5E_DEFAULT);
  if (descs.empty()) return "";
  // The outermost (what the API call could not do) and the innermost (why).
  if (descs.size() == 1 || descs.front() == descs.back()) return descs.front();
  return descs.front() + ": " + descs.back();
}

void fail(const char* call, const std::string& file, const std::string& object, const char* hint,
          const char* src_file, int src_line) {
  std::string reason = hdf5_reason();
  std::string where = fs::path(src_file).filename().string();
  throw DataError(fmt::format(
      "{}: HDF5 call {} failed on '{}'{} [{}:{}]. {}", file, call, object,
      reason.empty() ? "" : " (" + reason + ")", where, src_line,
      hint ? hint : "The file may be damaged, incomplete or not of the expected layout: check it with "
                    "`h5dump -H` and re-create it if needed."));
}

std::string join(const std::string& path, const std::string& name) {
  if (name.empty()) return path;
  if (name.front() == '/') return name;
  return path == "/" ? "/" + name : path + "/" + name;
}

std::string list_or_none(const std::vector<std::string>& names) {
  if (names.empty()) return "none";
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

Handle intermediate_lcpl(const std::string& file, const std::string& object) {
  Handle lcpl = own_plist(H5_CALL(H5Pcreate(H5P_LINK_CREATE), file, object));
  H5_CALL(H5Pset_create_intermediate_group(lcpl.id(), 1), file, object);
  return lcpl;
}

}  // namespace detail

// ---- File --------------------------------------------------------------------------------------

// Writes bytes to path (truncating it); returns 0 or the errno of the failure.
static int write_whole(const std::string& path, const std::vector<char>& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  for (size_t off = 0; off < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      return err;
    }
    off += static_cast<size_t>(n);
  }
  return ::close(fd) == 0 ? 0 : errno;
}

bool is_hdf5(const std::string& path) {
  static const char sig[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  if (!special_file(path).empty()) return false;
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  // The superblock sits at 0, or after a user block of 512, 1024, 2048, ... bytes.
  for (std::streamoff off = 0; off + 8 <= size; off = off ? off * 2 : 512) {
    char buf[8];
    in.seekg(off);
    if (!in.read(buf, 8)) return false;
    if (std::equal(buf, buf + 8, sig)) return true;
  }
  return false;
}

File File::create(const std::string& path) {
  init();
  {  // fail early, before anything is built, when the file cannot be written at all
    std::ofstream probe(path, std::ios::binary | std::ios::trunc);
    if (!probe)
      throw DataError(fmt::format("{}: cannot create this file ({}). Check that its folder exists and is writable.",
                                  path, std::strerror(errno)));
  }
  // The core driver without a backing store: HDF5 builds the file in memory and flush() writes its
  // image. Written by HDF5 itself, a disk that fills up mid-file leaves a file HDF5 cannot close,
  // and its exit handler then crashes on it. Strong close degree: closing the file closes every
  // object still open in it.
  Handle fapl(H5_CALL(H5Pcreate(H5P_FILE_ACCESS), path, "/"), H5Pclose);
  H5_CALL(H5Pset_fapl_core(fapl.id(), 1 << 20, 0), path, "/");
  H5_CALL(H5Pset_fclose_degree(fapl.id(), H5F_CLOSE_STRONG), path, "/");
  hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.id());
  if (id < 0) {
    std::string reason = hdf5_reason();
    throw DataError(fmt::format("{}: cannot create this HDF5 file ({}).", path, reason.empty() ? "unknown reason" : reason));
  }
  File f;
  f.h_ = Handle(id, H5Fclose);
  f.path_ = path;
  f.in_memory_ = true;
  return f;
}

File File::open(const std::string& path, bool writable) {
  init();
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw DataError(fmt::format("{}: no such file. Check the path (relative paths in a config are relative to the "
                                "config file's folder).", path));
  if (fs::is_directory(path, ec))
    throw DataError(fmt::format("{}: is a folder, not an HDF5 file. Give the path of a .h5 file.", path));
  if (const std::string kind = special_file(path); !kind.empty())  // a FIFO would block the open forever
    throw DataError(fmt::format("{}: is {}, not an HDF5 file. Give the path of a .h5 file.", path, kind));
  if (!std::ifstream(path, std::ios::binary))
    throw DataError(fmt::format("{}: cannot be read (permissions?). Check that the file is readable.", path));
  if (!is_hdf5(path))
    throw DataError(fmt::format("{}: is not an HDF5 file (no HDF5 signature in it). Give a .h5 file written by "
                                "rnntrain, Keras or h5py; for .npy, .npz, .csv or text data set the data source's "
                                "`format`.", path));
  probe_structure(path);
  hid_t id = H5Fopen(path.c_str(), writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) {
    std::string reason = hdf5_reason();
    if (reason.find("lock") != std::string::npos)
      throw DataError(fmt::format("{}: cannot open this HDF5 file ({}). Another program may have it open for "
                                  "writing; on file systems without locking (some NFS mounts) set "
                                  "HDF5_USE_FILE_LOCKING=FALSE.", path, reason));
    throw DataError(fmt::format("{}: cannot open this HDF5 file ({}). It is probably truncated or damaged, for "
                                "example cut short while being written: re-create it (for a checkpoint, use the "
                                "previous one).", path, reason.empty() ? "unknown reason" : reason));
  }
  File f;
  f.h_ = Handle(id, H5Fclose);
  f.path_ = path;
  return f;
}

Group File::root() const {
  return Group(own_group(H5_CALL(H5Gopen2(h_.id(), "/", H5P_DEFAULT), path_, "/")), path_, "/");
}

void File::flush() const {
  H5_CALL(H5Fflush(h_.id(), H5F_SCOPE_GLOBAL), path_, "/");
  if (!in_memory_) return;
  const ssize_t size = H5_CALL(H5Fget_file_image(h_.id(), nullptr, 0), path_, "/");
  std::vector<char> image(static_cast<size_t>(size));
  H5_CALL(H5Fget_file_image(h_.id(), image.data(), image.size()), path_, "/");
  if (const int err = write_whole(path_, image))
    throw DataError(fmt::format("{}: cannot write this file ({}; {} bytes to write). Is the disk full, or the folder "
                                "not writable? Free some space and run again.", path_, std::strerror(err),
                                image.size()));
}

File::~File() {
  if (!in_memory_ || !h_.valid()) return;
  try {
    flush();
  } catch (const std::exception& e) {
    log_warn("{}", e.what());
  }
}

void File::close() {
  if (!h_.valid()) return;
  try {
    flush();
  } catch (...) {
    h_ = Handle();  // an in-memory file closes without I/O
    throw;
  }
  h_ = Handle();
}

// ---- Group: navigation -------------------------------------------------------------------------

// True when every component of the relative path exists, each but the last being a group, and
// none is an external link: rnntrain reads only what is inside the file it was given.
static bool path_exists(hid_t g, const std::string& name) {
  if (name.empty()) return false;
  for (size_t pos = 0;;) {
    const size_t slash = name.find('/', pos);
    const std::string prefix = name.substr(0, slash);
    H5L_info_t link;
    if (!prefix.empty() && prefix.back() != '/' &&
        (H5Lexists(g, prefix.c_str(), H5P_DEFAULT) <= 0 || H5Lget_info(g, prefix.c_str(), &link, H5P_DEFAULT) < 0 ||
         link.type == H5L_TYPE_EXTERNAL)) {
      H5Eclear2(H5E_DEFAULT);
      return false;
    }
    if (slash == std::string::npos) return true;
    pos = slash + 1;
  }
}

// H5I_GROUP, H5I_DATASET, ..., or H5I_BADID when there is nothing at that path.
static H5I_type_t object_type(hid_t g, const std::string& name) {
  if (!path_exists(g, name)) return H5I_BADID;
  hid_t o = H5Oopen(g, name.c_str(), H5P_DEFAULT);
  if (o < 0) {
    H5Eclear2(H5E_DEFAULT);
    return H5I_BADID;
  }
  H5I_type_t t = H5Iget_type(o);
  H5Oclose(o);
  return t;
}

bool Group::has(const std::string& name) const { return object_type(id(), name) != H5I_BADID; }
bool Group::has_group(const std::string& name) const { return object_type(id(), name) == H5I_GROUP; }
bool Group::has_dataset(const std::string& name) const { return object_type(id(), name) == H5I_DATASET; }

std::vector<std::string> Group::children() const {
  H5G_info_t info;
  H5_CALL(H5Gget_info(id(), &info), file_, path_);
  std::vector<std::string> out;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    ssize_t n = H5_CALL(H5Lget_name_by_idx(id(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT),
                        file_, path_);
    std::string name(static_cast<size_t>(n) + 1, '\0');
    H5_CALL(H5Lget_name_by_idx(id(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(), H5P_DEFAULT),
            file_, path_);
    name.resize(static_cast<size_t>(n));
    out.push_back(std::move(name));
  }
  return out;
}


Group Group::group(const std::string& name) const {
  if (const std::string note = link_note(name); !note.empty()) throw DataError(fmt::format("{}: {}.", file_, note));
  if (!has_group(name))
    throw DataError(fmt::format("{}: no group '{}' (children of '{}': {}). The file does not have the expected "
                                "layout: check that it is the right file.", file_, join(path_, name), path_,
                                list_or_none(children())));
  hid_t g = H5_CALL(H5Gopen2(id(), name.c_str(), H5P_DEFAULT), file_, join(path_, name));
  return Group(own_group(g), file_, join(path_, name));
}

Group Group::create_group(const std::string& name) const {
  const std::string full = join(path_, name);
  Handle lcpl = intermediate_lcpl(file_, full);
  hid_t g = H5_CALL_HINT(H5Gcreate2(id(), name.c_str(), lcpl.id(), H5P_DEFAULT, H5P_DEFAULT), file_, full,
                         "Check that no object of that name exists yet and that the file is open for writing.");
  return Group(own_group(g), file_, full);
}

Group Group::require_group(const std::string& name) const {
  return has_group(name) ? group(name) : create_group(name);
}

}  // namespace rnntrain::h5

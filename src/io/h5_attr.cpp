// The HDF5 layer's attributes and string codec. Writes fixed-length ASCII NUL-padded strings (numpy
// 'S<n>', readable by every Keras) and empty lists as float64 (0,), as Keras/h5py do; reads fixed or
// variable length, ASCII or UTF-8, scalar or 1-D.
#include <fmt/format.h>

#include <algorithm>

#include "core/sizes.h"
#include "core/error.h"
#include "io/h5_detail.h"

namespace rnntrain::h5 {

using namespace detail;

// ---- string codec ------------------------------------------------------------------------------

namespace detail {

const char* class_name(H5T_class_t c) {
  switch (c) {
    case H5T_INTEGER: return "integer";
    case H5T_FLOAT: return "float";
    case H5T_STRING: return "string";
    case H5T_BITFIELD: return "bitfield";
    case H5T_OPAQUE: return "opaque";
    case H5T_COMPOUND: return "compound";
    case H5T_REFERENCE: return "reference";
    case H5T_ENUM: return "enum (e.g. numpy bool)";
    case H5T_VLEN: return "variable-length sequence";
    case H5T_ARRAY: return "array";
    default: return "unknown";
  }
}

Handle fixed_string_type(size_t size, const std::string& file, const std::string& object) {
  Handle t = own_type(H5_CALL(H5Tcopy(H5T_C_S1), file, object));
  H5_CALL(H5Tset_size(t.id(), std::max<size_t>(size, 1)), file, object);
  H5_CALL(H5Tset_strpad(t.id(), H5T_STR_NULLPAD), file, object);
  H5_CALL(H5Tset_cset(t.id(), H5T_CSET_ASCII), file, object);
  return t;
}

size_t fixed_size(const std::vector<std::string>& v) {
  size_t size = 1;
  for (const auto& s : v) size = std::max(size, s.size());
  return size;
}

std::vector<char> pack_fixed(const std::vector<std::string>& v, size_t size) {
  std::vector<char> buf(std::max<size_t>(v.size() * size, 1), '\0');
  for (size_t i = 0; i < v.size(); ++i) std::copy(v[i].begin(), v[i].end(), buf.begin() + i * size);
  return buf;
}

std::vector<std::string> read_strings(hid_t ftype, int64_t n, const std::function<herr_t(hid_t, void*)>& read,
                                      const std::string& file, const std::string& object) {
  const htri_t variable = H5_CALL(H5Tis_variable_str(ftype), file, object);
  const H5T_cset_t cset = H5_CALL(H5Tget_cset(ftype), file, object);
  Handle mt = own_type(H5_CALL(H5Tcopy(H5T_C_S1), file, object));
  H5_CALL(H5Tset_cset(mt.id(), cset), file, object);  // HDF5 does not convert between character sets
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(n));
  if (n == 0) return out;
  if (variable) {
    H5_CALL(H5Tset_size(mt.id(), H5T_VARIABLE), file, object);
    std::vector<char*> ptrs(static_cast<size_t>(n), nullptr);
    H5_CALL(read(mt.id(), ptrs.data()), file, object);
    for (char* p : ptrs) {
      out.emplace_back(p ? p : "");
      if (p) H5free_memory(p);
    }
    return out;
  }
  const size_t size = H5Tget_size(ftype);
  if (size == 0) fail("H5Tget_size(ftype)", file, object, nullptr, __FILE__, __LINE__);
  const H5T_str_t pad = H5Tget_strpad(ftype);
  H5_CALL(H5Tset_size(mt.id(), size), file, object);
  H5_CALL(H5Tset_strpad(mt.id(), pad == H5T_STR_ERROR ? H5T_STR_NULLPAD : pad), file, object);
  std::vector<char> buf(static_cast<size_t>(n) * size, '\0');
  H5_CALL(read(mt.id(), buf.data()), file, object);
  for (int64_t i = 0; i < n; ++i) {
    std::string s(buf.data() + i * size, size);
    const char padding = pad == H5T_STR_SPACEPAD ? ' ' : '\0';
    while (!s.empty() && (s.back() == '\0' || s.back() == padding)) s.pop_back();
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace detail

// ---- attributes: writing -----------------------------------------------------------------------

bool Group::has_attr(const std::string& name) const {
  return H5_CALL(H5Aexists(id(), name.c_str()), file_, path_) > 0;
}

// Creates (replacing an existing one) and writes an attribute.
static void write_attr(const Group& g, const std::string& name, hid_t filetype, hid_t memtype, bool scalar,
                       hsize_t n, const void* data) {
  const std::string what = g.path() + " @" + name;
  if (g.has_attr(name)) H5_CALL(H5Adelete(g.id(), name.c_str()), g.file(), what);
  Handle space = own_space(scalar ? H5_CALL(H5Screate(H5S_SCALAR), g.file(), what)
                                  : H5_CALL(H5Screate_simple(1, &n, nullptr), g.file(), what));
  Handle attr = own_attr(H5_CALL_HINT(
      H5Acreate2(g.id(), name.c_str(), filetype, space.id(), H5P_DEFAULT, H5P_DEFAULT), g.file(), what,
      "Check that the file is open for writing; attributes are limited to about 64 KB each (store large "
      "values as a dataset with write_strings)."));
  H5_CALL(H5Awrite(attr.id(), memtype, data), g.file(), what);
}

void Group::set_attr(const std::string& name, const std::string& value) const {
  Handle type = fixed_string_type(value.size(), file_, path_);
  std::vector<char> buf = pack_fixed({value}, std::max<size_t>(value.size(), 1));
  write_attr(*this, name, type.id(), type.id(), true, 1, buf.data());
}

void Group::set_attr(const std::string& name, const std::vector<std::string>& values) const {
  if (values.empty()) {
    const double none = 0.0;  // not written: the array has no elements
    write_attr(*this, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, false, 0, &none);
    return;
  }
  const size_t size = fixed_size(values);
  Handle type = fixed_string_type(size, file_, path_);
  std::vector<char> buf = pack_fixed(values, size);
  write_attr(*this, name, type.id(), type.id(), false, values.size(), buf.data());
}

void Group::set_attr(const std::string& name, int64_t value) const {
  write_attr(*this, name, H5T_STD_I64LE, H5T_NATIVE_INT64, true, 1, &value);
}

void Group::set_attr(const std::string& name, double value) const {
  write_attr(*this, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, true, 1, &value);
}

void Group::set_attr(const std::string& name, const std::vector<double>& values) const {
  const double none = 0.0;
  write_attr(*this, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, false, values.size(),
             values.empty() ? &none : values.data());
}

void Group::set_attr_u64(const std::string& name, const std::vector<uint64_t>& values) const {
  const uint64_t none = 0;
  write_attr(*this, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, false, values.size(),
             values.empty() ? &none : values.data());
}

// ---- attributes: reading -----------------------------------------------------------------------

struct OpenAttr {
  Handle attr, type;
  H5T_class_t cls;
  int64_t n;  // element count (1 for a scalar)
  std::string what;
};

static herr_t collect_attr(hid_t, const char* name, const H5A_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->emplace_back(name);
  return 0;
}

static OpenAttr open_attr(const Group& g, const std::string& name) {
  OpenAttr a;
  a.what = g.path() + " @" + name;
  if (!g.has_attr(name)) {
    std::vector<std::string> names;
    hsize_t idx = 0;
    H5Aiterate2(g.id(), H5_INDEX_NAME, H5_ITER_INC, &idx, collect_attr, &names);
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    throw DataError(fmt::format("{}: '{}' has no attribute '{}' (its attributes: {}). The file does not have the "
                                "expected layout: check that it is the right file.",
                                g.file(), g.path(), name, list.empty() ? "none" : list));
  }
  a.attr = own_attr(H5_CALL(H5Aopen(g.id(), name.c_str(), H5P_DEFAULT), g.file(), a.what));
  a.type = own_type(H5_CALL(H5Aget_type(a.attr.id()), g.file(), a.what));
  a.cls = H5_CALL(H5Tget_class(a.type.id()), g.file(), a.what);
  Handle space = own_space(H5_CALL(H5Aget_space(a.attr.id()), g.file(), a.what));
  a.n = H5_CALL(H5Sget_simple_extent_npoints(space.id()), g.file(), a.what);
  // Attribute values are stored uncompressed in the file: a declared size beyond the file's own is
  // damage, refused before anything is allocated for it. (HDF5's size: the file may be in memory.)
  Handle file = Handle(H5_CALL(H5Iget_file_id(g.id()), g.file(), a.what), H5Fclose);
  hsize_t file_size = 0;
  H5_CALL(H5Fget_filesize(file.id(), &file_size), g.file(), a.what);
  const double declared = static_cast<double>(a.n) * static_cast<double>(H5Tget_size(a.type.id()));
  if (declared > static_cast<double>(file_size))
    throw DataError(fmt::format("{}: attribute '{}' declares {} values ({}) in a file of {}: the file is damaged. "
                                "Re-create it.", g.file(), a.what, a.n, bytes_str(declared),
                                bytes_str(static_cast<double>(file_size))));
  return a;
}

template <typename T>
static std::vector<T> read_attr_numbers(const Group& g, const std::string& name, hid_t memtype) {
  OpenAttr a = open_attr(g, name);
  if (a.cls != H5T_INTEGER && a.cls != H5T_FLOAT)
    throw DataError(fmt::format("{}: attribute '{}' holds {} values, expected numbers.", g.file(), a.what,
                                class_name(a.cls)));
  std::vector<T> v(static_cast<size_t>(a.n));
  if (!v.empty()) H5_CALL(H5Aread(a.attr.id(), memtype, v.data()), g.file(), a.what);
  return v;
}

template <typename T>
static T read_attr_one(const Group& g, const std::string& name, hid_t memtype) {
  std::vector<T> v = read_attr_numbers<T>(g, name, memtype);
  if (v.size() != 1)
    throw DataError(fmt::format("{}: attribute '{} @{}' holds {} values, expected one.", g.file(), g.path(), name,
                                v.size()));
  return v[0];
}

std::vector<std::string> Group::attr_strings(const std::string& name) const {
  OpenAttr a = open_attr(*this, name);
  if (a.cls != H5T_STRING) {
    if (a.n == 0 && (a.cls == H5T_INTEGER || a.cls == H5T_FLOAT)) return {};  // Keras' "[]"
    throw DataError(fmt::format("{}: attribute '{}' holds {} values, expected strings.", file_, a.what,
                                class_name(a.cls)));
  }
  hid_t aid = a.attr.id();
  return detail::read_strings(
      a.type.id(), a.n, [aid](hid_t mt, void* buf) { return H5Aread(aid, mt, buf); }, file_, a.what);
}

std::string Group::attr_string(const std::string& name) const {
  std::vector<std::string> v = attr_strings(name);
  if (v.size() != 1)
    throw DataError(fmt::format("{}: attribute '{} @{}' holds {} strings, expected one.", file_, path_, name,
                                v.size()));
  return v[0];
}

int64_t Group::attr_int64(const std::string& name) const {
  return read_attr_one<int64_t>(*this, name, H5T_NATIVE_INT64);
}

double Group::attr_double(const std::string& name) const {
  return read_attr_one<double>(*this, name, H5T_NATIVE_DOUBLE);
}

std::vector<double> Group::attr_doubles(const std::string& name) const {
  return read_attr_numbers<double>(*this, name, H5T_NATIVE_DOUBLE);
}

std::vector<uint64_t> Group::attr_u64(const std::string& name) const {
  return read_attr_numbers<uint64_t>(*this, name, H5T_NATIVE_UINT64);
}

}  // namespace rnntrain::h5

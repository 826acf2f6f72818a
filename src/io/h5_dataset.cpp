// The HDF5 layer's datasets: numeric reads of any integer, float or integer-enum type converted to
// the caller's type, float32/int64/float64 writes (replacing an existing dataset of that name), and
// fixed-length string datasets. Contiguous layout, no compression: what Keras files need.
#include <fmt/format.h>

#include <cstring>
#include <optional>

#include "core/sizes.h"
#include "core/error.h"
#include "io/h5_detail.h"

namespace rnntrain::h5 {

using namespace detail;

std::string Group::link_note(const std::string& name) const {
  const htri_t exists = H5Lexists(id(), name.c_str(), H5P_DEFAULT);
  H5L_info_t info;
  if (exists <= 0 || H5Lget_info(id(), name.c_str(), &info, H5P_DEFAULT) < 0) {
    hdf5_reason();  // clears the error stack
    return "";
  }
  if (info.type != H5L_TYPE_SOFT && info.type != H5L_TYPE_EXTERNAL) return "";
  std::string target;
  std::vector<char> val(info.u.val_size);
  if (info.u.val_size > 0 && info.u.val_size <= 4096 &&
      H5Lget_val(id(), name.c_str(), val.data(), val.size(), H5P_DEFAULT) >= 0) {
    const char *file = nullptr, *object = nullptr;
    if (info.type == H5L_TYPE_SOFT) target = std::string(val.data(), strnlen(val.data(), val.size()));
    else if (H5Lunpack_elink_val(val.data(), val.size(), nullptr, &file, &object) >= 0 && file && object)
      target = fmt::format("{}:{}", file, object);
  }
  hdf5_reason();
  const std::string full = join(path_, name);
  if (info.type == H5L_TYPE_EXTERNAL)
    return fmt::format("'{}' is an external link to {}; rnntrain reads only data stored inside the file. Copy the "
                       "data in (h5py: f2['{}'] = f1['...'][()]) or name another dataset", full,
                       target.empty() ? "another file" : target, name);
  if (has(name)) return "";  // a soft link inside the file that resolves: followed like the object itself
  return fmt::format("'{}' is a soft link to '{}', which does not exist in the file; rnntrain needs the data inside "
                     "the file. Fix the link or name another dataset", full, target.empty() ? "?" : target);
}

static Handle open_dataset(const Group& g, const std::string& name) {
  const std::string full = join(g.path(), name);
  if (const std::string note = g.link_note(name); !note.empty()) throw DataError(fmt::format("{}: {}.", g.file(), note));
  if (!g.has_dataset(name))
    throw DataError(fmt::format("{}: no dataset '{}' (children of '{}': {}). Check the dataset name.", g.file(),
                                full, g.path(), list_or_none(g.children())));
  return own_dataset(H5_CALL(H5Dopen2(g.id(), name.c_str(), H5P_DEFAULT), g.file(), full));
}

static Shape space_shape(hid_t space, const std::string& file, const std::string& object) {
  const int rank = H5_CALL(H5Sget_simple_extent_ndims(space), file, object);
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0) H5_CALL(H5Sget_simple_extent_dims(space, dims.data(), nullptr), file, object);
  return Shape(dims.begin(), dims.end());
}

Shape Group::shape(const std::string& name) const {
  Handle ds = open_dataset(*this, name);
  Handle space = own_space(H5_CALL(H5Dget_space(ds.id()), file_, join(path_, name)));
  return space_shape(space.id(), file_, join(path_, name));
}

// out[i] = the i-th integer of type I in raw (native byte order).
template <typename I, typename T>
static void widen(const unsigned char* raw, std::vector<T>& out) {
  for (size_t i = 0; i < out.size(); ++i) {
    I v;
    std::memcpy(&v, raw + i * sizeof(I), sizeof(I));
    out[i] = static_cast<T>(v);
  }
}

// Reads an enum dataset with an integer base (numpy bool, which h5py stores as an int8 enum
// FALSE = 0, TRUE = 1) as its integer values: HDF5 converts enums only to other enums, so the values
// are read in the native enum type and widened here.
template <typename T>
static void read_enum(hid_t ds, hid_t ftype, std::vector<T>& out, const std::string& file, const std::string& obj) {
  Handle native = own_type(H5_CALL(H5Tget_native_type(ftype, H5T_DIR_ASCEND), file, obj));
  Handle base = own_type(H5_CALL(H5Tget_super(native.id()), file, obj));
  const size_t size = H5Tget_size(base.id());
  const bool is_signed = H5Tget_sign(base.id()) == H5T_SGN_2;
  if (H5Tget_class(base.id()) != H5T_INTEGER || (size != 1 && size != 2 && size != 4 && size != 8))
    throw DataError(fmt::format("{}: dataset '{}' holds enum values without an integer base. Store it as an integer "
                                "or float array.", file, obj));
  std::vector<unsigned char> raw(out.size() * size);
  if (!out.empty()) H5_CALL(H5Dread(ds, native.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.data()), file, obj);
  const unsigned char* r = raw.data();
  switch (is_signed ? static_cast<int>(size) : -static_cast<int>(size)) {
    case 1: widen<int8_t>(r, out); break;
    case 2: widen<int16_t>(r, out); break;
    case 4: widen<int32_t>(r, out); break;
    case 8: widen<int64_t>(r, out); break;
    case -1: widen<uint8_t>(r, out); break;
    case -2: widen<uint16_t>(r, out); break;
    case -4: widen<uint32_t>(r, out); break;
    default: widen<uint64_t>(r, out); break;
  }
}

// Checks a dataset's declared shape before anything is allocated for it: the count fits in 64 bits,
// the data lives inside the file (no external storage or virtual dataset), the file stores enough
// bytes for it (allowing deflate's best ratio, about 1032:1, when it is compressed), and `item`
// bytes per value fit in memory. DataError naming the file and the dataset otherwise.
static void check_stored(const Group& g, hid_t ds, hid_t ftype, const Shape& shape, size_t item,
                         const std::string& full) {
  const std::optional<int64_t> n = checked_numel(shape);
  if (!n)
    throw DataError(fmt::format("{}: dataset '{}' declares shape {}, more values than 64 bits can count: the file is "
                                "damaged.", g.file(), full, shape_str(shape)));
  Handle dcpl = own_plist(H5_CALL(H5Dget_create_plist(ds), g.file(), full));
  const int external = H5_CALL(H5Pget_external_count(dcpl.id()), g.file(), full);
  if (external > 0 || H5Pget_layout(dcpl.id()) == H5D_VIRTUAL)
    throw DataError(fmt::format("{}: dataset '{}' keeps its values in other files ({}); rnntrain reads only data "
                                "stored inside the file. Re-save it as an ordinary dataset.", g.file(), full,
                                external > 0 ? "external storage" : "a virtual dataset"));
  const int filters = H5_CALL(H5Pget_nfilters(dcpl.id()), g.file(), full);
  const size_t fsize = H5Tget_size(ftype);
  const uint64_t stored = H5Dget_storage_size(ds);
  const double declared = static_cast<double>(*n) * static_cast<double>(fsize);
  if (*n > 0 && declared > static_cast<double>(stored) * (filters > 0 ? 1032.0 : 1.0))
    throw DataError(fmt::format("{}: dataset '{}' declares shape {} ({}) but the file stores {} for it: the file is "
                                "truncated, damaged or was never fully written. Re-create it.", g.file(), full,
                                shape_str(shape), bytes_str(declared), bytes_str(static_cast<double>(stored))));
  const double need = static_cast<double>(*n) * static_cast<double>(item);
  if (need > static_cast<double>(memory_limit_bytes()))
    throw DataError(fmt::format("{}: dataset '{}' declares shape {}: {} in memory, more than this machine has ({}).",
                                g.file(), full, shape_str(shape), bytes_str(need),
                                bytes_str(static_cast<double>(memory_limit_bytes()))));
}

// Whether the dataset carries Keras' attribute dtype = "bfloat16" (its .weights.h5 writer marks the
// 2-byte opaque values it stores bfloat16 weights as).
static bool marked_bfloat16(hid_t ds, const std::string& file, const std::string& obj) {
  if (H5Aexists(ds, "dtype") <= 0) return false;
  Handle a = own_attr(H5_CALL(H5Aopen(ds, "dtype", H5P_DEFAULT), file, obj + "@dtype"));
  Handle t = own_type(H5_CALL(H5Aget_type(a.id()), file, obj + "@dtype"));
  Handle sp = own_space(H5_CALL(H5Aget_space(a.id()), file, obj + "@dtype"));
  if (H5Tget_class(t.id()) != H5T_STRING || H5Sget_simple_extent_npoints(sp.id()) != 1) return false;
  const auto v = read_strings(t.id(), 1, [&](hid_t mt, void* buf) { return H5Aread(a.id(), mt, buf); }, file,
                              obj + "@dtype");
  return v[0] == "bfloat16";
}

// Reads 2-byte bfloat16 values (the upper half of a float32) as T.
// (little-endian bytes as h5py writes them: opaque values are read as stored, in the file's type)
template <typename T>
static void read_bfloat16(hid_t ds, hid_t ftype, std::vector<T>& out, const std::string& file, const std::string& obj) {
  std::vector<uint16_t> raw(out.size());
  if (!out.empty()) H5_CALL(H5Dread(ds, ftype, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.data()), file, obj);
  for (size_t i = 0; i < raw.size(); ++i) {
    const uint32_t bits = static_cast<uint32_t>(raw[i]) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    out[i] = static_cast<T>(f);
  }
}

// Reads a numeric dataset into `out` (resized to its element count) as `memtype`. 2-byte opaque
// values are read as bfloat16 when marked so, or (bf16_opaque: Keras' legacy .h5 weights, which
// h5py stores unmarked) always.
template <typename T>
static Shape read_numeric(const Group& g, const std::string& name, hid_t memtype, std::vector<T>& out,
                          bool bf16_opaque = false) {
  const std::string full = join(g.path(), name);
  Handle ds = open_dataset(g, name);
  Handle type = own_type(H5_CALL(H5Dget_type(ds.id()), g.file(), full));
  const H5T_class_t cls = H5_CALL(H5Tget_class(type.id()), g.file(), full);
  Handle space = own_space(H5_CALL(H5Dget_space(ds.id()), g.file(), full));
  Shape shape = space_shape(space.id(), g.file(), full);
  check_stored(g, ds.id(), type.id(), shape, sizeof(T), full);
  out.assign(static_cast<size_t>(shape_numel(shape)), T{});
  if (cls == H5T_ENUM) {
    read_enum(ds.id(), type.id(), out, g.file(), full);
    return shape;
  }
  if (cls == H5T_OPAQUE && H5Tget_size(type.id()) == 2 && (bf16_opaque || marked_bfloat16(ds.id(), g.file(), full))) {
    read_bfloat16(ds.id(), type.id(), out, g.file(), full);
    return shape;
  }
  if (cls != H5T_INTEGER && cls != H5T_FLOAT)
    throw DataError(fmt::format("{}: dataset '{}' holds {} values, not numbers. Store it as an integer or float "
                                "array.", g.file(), full, class_name(cls)));
  if (!out.empty()) H5_CALL(H5Dread(ds.id(), memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), g.file(), full);
  return shape;
}

Tensor Group::read(const std::string& name) const {
  Tensor t;
  t.shape = read_numeric(*this, name, H5T_NATIVE_FLOAT, t.data);
  return t;
}

Tensor Group::read_weight(const std::string& name) const {
  Tensor t;
  t.shape = read_numeric(*this, name, H5T_NATIVE_FLOAT, t.data, true);
  return t;
}

std::vector<int64_t> Group::read_int64(const std::string& name) const {
  std::vector<int64_t> v;
  read_numeric(*this, name, H5T_NATIVE_INT64, v);
  return v;
}

std::vector<double> Group::read_double(const std::string& name) const {
  std::vector<double> v;
  read_numeric(*this, name, H5T_NATIVE_DOUBLE, v);
  return v;
}

// Creates (replacing an existing dataset of that name) and fills a dataset.
static void write_dataset(const Group& g, const std::string& name, hid_t filetype, hid_t memtype, const Shape& shape,
                          bool scalar, const void* data) {
  const std::string full = join(g.path(), name);
  for (int64_t d : shape)
    if (d < 0) throw RuntimeError(fmt::format("{}: cannot write '{}' with shape {}", g.file(), full, shape_str(shape)));
  if (g.has_dataset(name)) H5_CALL(H5Ldelete(g.id(), name.c_str(), H5P_DEFAULT), g.file(), full);
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle space = own_space(scalar ? H5_CALL(H5Screate(H5S_SCALAR), g.file(), full)
                                  : H5_CALL(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                                            g.file(), full));
  Handle lcpl = intermediate_lcpl(g.file(), full);
  Handle ds = own_dataset(H5_CALL_HINT(H5Dcreate2(g.id(), name.c_str(), filetype, space.id(), lcpl.id(), H5P_DEFAULT,
                                                  H5P_DEFAULT),
                                       g.file(), full,
                                       "Check that no group of that name exists and that the file is open for "
                                       "writing."));
  if (scalar || shape_numel(shape) > 0)
    H5_CALL(H5Dwrite(ds.id(), memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), g.file(), full);
}

void Group::write(const std::string& name, const Tensor& t) const {
  if (t.numel() != shape_numel(t.shape))
    throw RuntimeError(fmt::format("{}: tensor for '{}' has {} values but shape {}", file_, join(path_, name),
                                   t.numel(), shape_str(t.shape)));
  write_dataset(*this, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, t.shape, t.shape.empty(), t.ptr());
}

void Group::write_int64(const std::string& name, const std::vector<int64_t>& v, bool scalar) const {
  if (scalar && v.size() != 1)
    throw RuntimeError(fmt::format("{}: scalar dataset '{}' needs exactly one value, got {}", file_,
                                   join(path_, name), v.size()));
  write_dataset(*this, name, H5T_STD_I64LE, H5T_NATIVE_INT64, Shape{static_cast<int64_t>(v.size())}, scalar,
                v.data());
}

void Group::write_double(const std::string& name, const std::vector<double>& v, const Shape& shape) const {
  if (static_cast<int64_t>(v.size()) != shape_numel(shape))
    throw RuntimeError(fmt::format("{}: '{}' has {} values but shape {}", file_, join(path_, name), v.size(),
                                   shape_str(shape)));
  write_dataset(*this, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, shape, shape.empty(), v.data());
}

void Group::write_strings(const std::string& name, const std::vector<std::string>& v) const {
  const std::string full = join(path_, name);
  const size_t size = fixed_size(v);
  Handle type = fixed_string_type(size, file_, full);
  std::vector<char> buf = pack_fixed(v, size);
  write_dataset(*this, name, type.id(), type.id(), Shape{static_cast<int64_t>(v.size())}, false, buf.data());
}

std::vector<std::string> Group::read_strings(const std::string& name) const {
  const std::string full = join(path_, name);
  Handle ds = open_dataset(*this, name);
  Handle type = own_type(H5_CALL(H5Dget_type(ds.id()), file_, full));
  Handle space = own_space(H5_CALL(H5Dget_space(ds.id()), file_, full));
  const int64_t n = H5_CALL(H5Sget_simple_extent_npoints(space.id()), file_, full);
  const H5T_class_t cls = H5_CALL(H5Tget_class(type.id()), file_, full);
  if (cls != H5T_STRING) {
    if (n == 0) return {};  // an empty numeric array stands for "no strings", as in Keras attributes
    throw DataError(fmt::format("{}: dataset '{}' holds {} values, not strings.", file_, full, class_name(cls)));
  }
  check_stored(*this, ds.id(), type.id(), Shape{n}, sizeof(std::string) + H5Tget_size(type.id()), full);
  hid_t dsid = ds.id();
  return detail::read_strings(
      type.id(), n, [&](hid_t mt, void* buf) { return H5Dread(dsid, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf); }, file_,
      full);
}

}  // namespace rnntrain::h5

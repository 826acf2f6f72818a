// A small RAII layer over the HDF5 C API: files, groups, datasets and attributes, with every call
// checked (the message names the file, the object path and the HDF5 call). Strings are written as
// fixed-length ASCII (NUL-padded) as Keras' h5py does for numpy bytes; the reader accepts fixed or
// variable length, ASCII or UTF-8, scalar or 1-D. Not a general HDF5 binding: just what Keras
// files, checkpoints and datasets need.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace rnntrain::h5 {

// An owned hid_t with its close function.
class Handle {
 public:
  Handle() = default;
  Handle(int64_t id, int (*close)(int64_t)) : id_(id), close_(close) {}
  Handle(Handle&& o) noexcept;
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle();
  int64_t id() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  int64_t id_ = -1;
  int (*close_)(int64_t) = nullptr;
};

class Group {
 public:
  Group(Handle h, std::string file, std::string path) : h_(std::move(h)), file_(std::move(file)), path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  const std::string& file() const { return file_; }
  int64_t id() const { return h_.id(); }

  // Children. Names may contain '/', creating or walking intermediate groups.
  bool has(const std::string& name) const;  // a group or dataset at that relative path
  bool has_group(const std::string& name) const;
  bool has_dataset(const std::string& name) const;
  Group group(const std::string& name) const;         // DataError if missing
  Group create_group(const std::string& name) const;  // creates intermediate groups
  Group require_group(const std::string& name) const; // open or create
  std::vector<std::string> children() const;          // direct children, in name order
  // Why `name` cannot be read although a link of that name exists ("'x' is an external link to
  // other.h5:/x; ..."), or "" when it is not an external or dangling soft link.
  std::string link_note(const std::string& name) const;

  // Datasets. read() converts any integer or float type to float32; shape() gives the dims.
  Shape shape(const std::string& name) const;
  Tensor read(const std::string& name) const;
  // read(), and 2-byte opaque values as bfloat16 (Keras' bfloat16 weights: h5py stores them opaque,
  // marked dtype=bfloat16 in .weights.h5 and unmarked in legacy .h5); float16 converts as any float.
  Tensor read_weight(const std::string& name) const;
  std::vector<int64_t> read_int64(const std::string& name) const;
  std::vector<double> read_double(const std::string& name) const;
  void write(const std::string& name, const Tensor& t) const;  // float32 little-endian, contiguous
  void write_int64(const std::string& name, const std::vector<int64_t>& v, bool scalar = false) const;
  void write_double(const std::string& name, const std::vector<double>& v, const Shape& shape) const;
  void write_strings(const std::string& name, const std::vector<std::string>& v) const;  // fixed-length ASCII 1-D
  std::vector<std::string> read_strings(const std::string& name) const;

  // Attributes.
  bool has_attr(const std::string& name) const;
  void set_attr(const std::string& name, const std::string& value) const;               // fixed-length ASCII scalar
  void set_attr(const std::string& name, const std::vector<std::string>& values) const;  // fixed-length ASCII 1-D; empty -> float64 (0,)
  void set_attr(const std::string& name, int64_t value) const;
  void set_attr(const std::string& name, double value) const;
  void set_attr(const std::string& name, const std::vector<double>& values) const;
  void set_attr_u64(const std::string& name, const std::vector<uint64_t>& values) const;
  std::string attr_string(const std::string& name) const;               // DataError if missing
  std::vector<std::string> attr_strings(const std::string& name) const;  // empty numeric array -> {}
  int64_t attr_int64(const std::string& name) const;
  double attr_double(const std::string& name) const;
  std::vector<double> attr_doubles(const std::string& name) const;
  std::vector<uint64_t> attr_u64(const std::string& name) const;

 private:
  Handle h_;
  std::string file_, path_;
};

class File {
 public:
  // A new file, built in memory: nothing reaches the disk until flush() or close() writes it whole
  // to `path` (truncated), so a failed write (disk full) is one clean DataError and HDF5 never holds
  // a half-written file. Write to a temporary name and rename.
  static File create(const std::string& path);
  static File open(const std::string& path, bool writable = false);  // DataError: missing, not HDF5, truncated
  File() = default;
  File(File&&) = default;
  File& operator=(File&&) = default;
  ~File();  // a created file not closed yet is written now, as HDF5 writes its own files at close
  Group root() const;
  const std::string& path() const { return path_; }
  void flush() const;  // a created file: writes it to its path now
  void close();        // flushes and closes; DataError (disk full, ...) if the data could not be written

 private:
  Handle h_;
  std::string path_;
  bool in_memory_ = false;
};

// True when the file starts with the HDF5 signature.
bool is_hdf5(const std::string& path);

}  // namespace rnntrain::h5

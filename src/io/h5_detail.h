// Internals of the HDF5 layer shared by h5.cpp and h5_attr.cpp: the checked-call macro, owned ids
// and the string codec. Not for use outside src/io (everything else goes through io/h5.h).
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/h5.h"

namespace rnntrain::h5::detail {

// Silences HDF5's own error-stack printing (once per thread); our messages replace it.
void init();

// The description HDF5 left on its error stack ("unable to open file; file signature not found"),
// then clears the stack. Empty when there is none.
std::string hdf5_reason();

// Throws DataError: "<file>: HDF5 call <call> failed on '<object>' (<reason>). <hint>".
[[noreturn]] void fail(const char* call, const std::string& file, const std::string& object, const char* hint,
                       const char* src_file, int src_line);

template <typename T>
T checked(T r, const char* call, const std::string& file, const std::string& object, const char* hint,
          const char* src_file, int src_line) {
  if (r < 0) fail(call, file, object, hint, src_file, src_line);
  return r;
}

// Owns ids of each kind (the close functions take hid_t = int64_t and return herr_t = int).
inline Handle own_type(hid_t id) { return Handle(id, H5Tclose); }
inline Handle own_space(hid_t id) { return Handle(id, H5Sclose); }
inline Handle own_plist(hid_t id) { return Handle(id, H5Pclose); }
inline Handle own_attr(hid_t id) { return Handle(id, H5Aclose); }
inline Handle own_dataset(hid_t id) { return Handle(id, H5Dclose); }
inline Handle own_group(hid_t id) { return Handle(id, H5Gclose); }

// Joins a group path and a relative name: ("/", "a") -> "/a", ("/a", "b/c") -> "/a/b/c".
std::string join(const std::string& path, const std::string& name);

// A fixed-length ASCII NUL-padded string type of `size` bytes (size >= 1).
Handle fixed_string_type(size_t size, const std::string& file, const std::string& object);
// The longest string's length, at least 1.
size_t fixed_size(const std::vector<std::string>& v);
// n * size bytes, each string NUL-padded to size.
std::vector<char> pack_fixed(const std::vector<std::string>& v, size_t size);

// Reads the strings of a dataset or attribute whose file type is `ftype` and that has n elements:
// fixed or variable length, ASCII or UTF-8. `read(memtype, buffer)` calls H5Dread or H5Aread.
std::vector<std::string> read_strings(hid_t ftype, int64_t n, const std::function<herr_t(hid_t, void*)>& read,
                                      const std::string& file, const std::string& object);

// "integer", "float", "string", ... for messages.
const char* class_name(H5T_class_t c);

// "a, b, c", or "none", for messages.
std::string list_or_none(const std::vector<std::string>& names);

// Walks the file's links, object headers and attributes in a child process (h5_probe.cpp): a
// DataError when that crashes HDF5 or takes over 120 s (RNNTRAIN_H5_PROBE_SECONDS).
void probe_structure(const std::string& path);

// A link-creation property list that creates missing intermediate groups.
Handle intermediate_lcpl(const std::string& file, const std::string& object);

}  // namespace rnntrain::h5::detail

// Checks an HDF5 call that returns a negative value on failure, inside a Group or File method
// where `file` and `object` name what is being worked on.
#define H5_CALL(call, file, object) \
  ::rnntrain::h5::detail::checked((call), #call, (file), (object), nullptr, __FILE__, __LINE__)
#define H5_CALL_HINT(call, file, object, hint) \
  ::rnntrain::h5::detail::checked((call), #call, (file), (object), (hint), __FILE__, __LINE__)

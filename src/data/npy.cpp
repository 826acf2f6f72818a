// The .npy format (numpy.lib.format): a magic string, a version, a little-endian header length and
// a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }, then the data.
#include "data/npy.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>

#include "core/error.h"
#include "data/loaders.h"

namespace rnntrain {

namespace {

struct Header {
  std::string descr;
  bool fortran = false;
  Shape shape;
};

// The value text after 'key': in the header dict, or "" when the key is absent.
size_t find_value(const std::string& h, const std::string& key) {
  for (const char* q : {"'", "\""}) {
    const size_t k = h.find(q + key + q);
    if (k == std::string::npos) continue;
    size_t p = h.find(':', k);
    if (p == std::string::npos) return std::string::npos;
    ++p;
    while (p < h.size() && h[p] == ' ') ++p;
    return p;
  }
  return std::string::npos;
}

[[noreturn]] void bad_header(const std::string& source, const std::string& what) {
  throw DataError(fmt::format("{}: not a valid .npy file: {}. Save it with numpy.save.", source, what));
}

Header parse_header(const std::string& h, const std::string& source) {
  Header out;
  size_t p = find_value(h, "descr");
  if (p == std::string::npos || p >= h.size()) bad_header(source, "the header has no 'descr'");
  if (h[p] != '\'' && h[p] != '"')
    throw DataError(fmt::format("{}: structured numpy arrays (dtype {}) are not supported. Save a plain numeric "
                                "array, e.g. x.astype('float32').", source, h.substr(p, h.find(']', p) + 1 - p)));
  const size_t e = h.find(h[p], p + 1);
  if (e == std::string::npos) bad_header(source, "the 'descr' string is not closed");
  out.descr = h.substr(p + 1, e - p - 1);

  p = find_value(h, "fortran_order");
  if (p == std::string::npos) bad_header(source, "the header has no 'fortran_order'");
  out.fortran = h.compare(p, 4, "True") == 0;

  p = find_value(h, "shape");
  if (p == std::string::npos || h[p] != '(') bad_header(source, "the header has no 'shape' tuple");
  const size_t close = h.find(')', p);
  if (close == std::string::npos) bad_header(source, "the 'shape' tuple is not closed");
  std::string dims = h.substr(p + 1, close - p - 1);
  size_t i = 0;
  while (i < dims.size()) {
    while (i < dims.size() && (dims[i] == ' ' || dims[i] == ',')) ++i;
    if (i >= dims.size()) break;
    size_t j = i;
    while (j < dims.size() && std::isdigit(static_cast<unsigned char>(dims[j]))) ++j;
    if (j == i) bad_header(source, fmt::format("bad shape '({})'", dims));
    int64_t dim = 0;
    const auto [end, ec] = std::from_chars(dims.data() + i, dims.data() + j, dim);
    if (ec != std::errc() || end != dims.data() + j)
      bad_header(source, fmt::format("dimension {} of shape '({})' is too large", dims.substr(i, j - i), dims));
    out.shape.push_back(dim);
    i = j;
    if (i < dims.size() && dims[i] == 'L') ++i;  // Python 2 longs
  }
  return out;
}

float half_to_float(uint16_t h) {
  const int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31) v = mant ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
  return sign ? -v : v;
}

// Bytes per element of a supported dtype code ("f4", "i8", "b1", ...), or 0.
int item_size(const std::string& code) {
  static const struct {
    const char* code;
    int size;
  } kCodes[] = {{"f2", 2}, {"f4", 4}, {"f8", 8}, {"i1", 1}, {"i2", 2}, {"i4", 4}, {"i8", 8},
                {"u1", 1}, {"u2", 2}, {"u4", 4}, {"u8", 8}, {"b1", 1}};
  for (const auto& c : kCodes)
    if (code == c.code) return c.size;
  return 0;
}

template <typename T>
void convert(const char* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, src + i * sizeof(T), sizeof(T));
    dst[i] = static_cast<float>(v);
  }
}

}  // namespace

Tensor parse_npy(const std::string& bytes, const std::string& source) {
  static const char magic[] = "\x93NUMPY";
  if (bytes.size() < 10 || bytes.compare(0, 6, magic, 6) != 0)
    throw DataError(fmt::format("{}: not a .npy file (no \\x93NUMPY magic at its start). Save arrays with "
                                "numpy.save, or set the data source's `format`.", source));
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t hlen, hstart;
  if (major == 1) {
    hlen = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) bad_header(source, "the file ends inside the header");
    hlen = 0;
    for (int k = 3; k >= 0; --k) hlen = hlen << 8 | static_cast<unsigned char>(bytes[8 + k]);
    hstart = 12;
  } else {
    bad_header(source, fmt::format("unknown format version {}", major));
  }
  if (hstart + hlen > bytes.size()) bad_header(source, "the file ends inside the header");
  Header h = parse_header(bytes.substr(hstart, hlen), source);

  if (h.fortran)
    throw DataError(fmt::format("{}: the array is stored in Fortran order; save a C-order copy: "
                                "numpy.save(path, numpy.ascontiguousarray(x)).", source));
  const std::string& d = h.descr;
  if (d.size() < 3 || (d[0] != '<' && d[0] != '>' && d[0] != '|' && d[0] != '='))
    throw DataError(fmt::format("{}: dtype '{}' is not supported. Save a numeric array, e.g. x.astype('float32').",
                                source, d));
  const std::string code = d.substr(1);  // "f4", "i8", "b1", ...
  const int size = item_size(code);
  if (size == 0)
    throw DataError(fmt::format("{}: dtype '{}' is not supported (float16/32/64, int8-64, uint8-64 and bool are). "
                                "Save a numeric array, e.g. x.astype('float32').", source, d));
  if (d[0] == '>' && size > 1)
    throw DataError(fmt::format("{}: the array is big-endian (dtype '{}'); save a little-endian copy: "
                                "x.astype(x.dtype.newbyteorder('<')).", source, d));

  // The header's size must fit in 64 bits and in the bytes after the header, before anything is
  // allocated: a damaged or crafted header must not wrap around or ask for terabytes.
  const std::optional<int64_t> count = checked_numel(h.shape);
  if (!count)
    bad_header(source, fmt::format("shape {} has more elements than a 64-bit count can hold: the header is damaged",
                                   shape_str(h.shape)));
  const int64_t n = *count;
  const uint64_t held = bytes.size() - (hstart + hlen);
  if (static_cast<uint64_t>(n) > held / static_cast<uint64_t>(size))
    throw DataError(fmt::format("{}: the header declares shape {} of '{}', {} of data, but the file holds only {} "
                                "after the header: it is truncated or its header is damaged. Re-create it with "
                                "numpy.save.", source, shape_str(h.shape), d,
                                bytes_str(static_cast<double>(n) * size), bytes_str(static_cast<double>(held))));

  Tensor t(h.shape);
  const char* src = bytes.data() + (hstart + hlen);
  float* dst = t.ptr();
  if (code == "f4") convert<float>(src, dst, n);
  else if (code == "f8") convert<double>(src, dst, n);
  else if (code == "f2") {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t v;
      std::memcpy(&v, src + 2 * i, 2);
      dst[i] = half_to_float(v);
    }
  } else if (code == "i1") convert<int8_t>(src, dst, n);
  else if (code == "i2") convert<int16_t>(src, dst, n);
  else if (code == "i4") convert<int32_t>(src, dst, n);
  else if (code == "i8") convert<int64_t>(src, dst, n);
  else if (code == "u1" || code == "b1") convert<uint8_t>(src, dst, n);
  else if (code == "u2") convert<uint16_t>(src, dst, n);
  else if (code == "u4") convert<uint32_t>(src, dst, n);
  else convert<uint64_t>(src, dst, n);  // "u8", the last code item_size knows
  return t;
}

std::string npy_bytes(const Tensor& t) {
  std::string shape = "(";
  for (size_t i = 0; i < t.shape.size(); ++i) shape += fmt::format("{}, ", t.shape[i]);
  if (t.shape.size() > 1) shape.resize(shape.size() - 2);  // numpy writes (3,) but (3, 4)
  else if (t.shape.size() == 1) shape.resize(shape.size() - 1);
  shape += ")";
  std::string header = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': {}, }}", shape);
  // Pad with spaces so that magic + version + length + header + '\n' is a multiple of 64.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  const size_t off = out.size();
  out.resize(off + t.data.size() * sizeof(float));
  if (!t.data.empty()) std::memcpy(out.data() + off, t.data.data(), t.data.size() * sizeof(float));
  return out;
}

}  // namespace rnntrain

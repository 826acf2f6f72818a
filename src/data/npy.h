// NumPy .npy arrays: parsing (format versions 1-3; little-endian or single-byte numeric dtypes, C
// order) into float32 host tensors, and writing float32 arrays. Not a general numpy reader: no
// Fortran order, no big-endian, no structured, string or object arrays.
#pragma once
#include <string>

#include "core/tensor.h"

namespace rnntrain {

// Parses the bytes of a .npy file. `source` names it in messages ("data/x.npy", "data/d.npz:x.npy").
// Supported dtypes: <f2 <f4 <f8, |i1 <i2 <i4 <i8, |u1 <u2 <u4 <u8, |b1; integers are converted to
// float32 (exact up to 2^24). Throws DataError for anything else.
Tensor parse_npy(const std::string& bytes, const std::string& source);

// The bytes of a version 1.0 .npy file holding t as '<f4' in C order.
std::string npy_bytes(const Tensor& t);

}  // namespace rnntrain

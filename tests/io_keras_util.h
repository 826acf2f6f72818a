// Shared by the Keras format tests: which formats this build can write.
#pragma once
#include <cstdio>
#include <vector>

#include "io/zip.h"

// The file names of every format this build writes: .keras needs libzip (absent on some machines).
inline std::vector<const char*> keras_formats() {
  if (rnntrain::zip_supported()) return {"m.h5", "m.keras", "m.weights.h5"};
  std::printf("note: this build has no libzip; the .keras format is not tested here\n");
  return {"m.h5", "m.weights.h5"};
}

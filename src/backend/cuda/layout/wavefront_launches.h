// How rnntrain's own kernels (second design, sm90a/kernels_wavefront2*.cu) cut a stack into launches:
// pure host logic, built without CUDA so that its tests run anywhere (tests/gpu_wavefront_test.cpp).
#pragma once
#include <cstdint>
#include <vector>

namespace rnntrain::cuda {

// Clusters a launch of n layers takes for one batch slice: a recurrent row per (layer, direction), an
// input row per layer above the first (unidirectional stacks: a bidirectional layer's input needs the
// layer below at every step, so such launches hold one layer).
int64_t launch_rows2(int64_t dirs, int64_t n);

// A launch: layers [first, first + layers) as launch_rows2 clusters for each batch slice of 64
// sequences, `slices` slices side by side (the rest in rounds one after the other).
struct Launch2 {
  int64_t first = 0, layers = 0, slices = 0;
};

// The stack of `layers` (at most max_layers a launch) split into launches when `most_clusters` can be
// resident at once and the batch is B; empty where not even one layer's clusters fit.
std::vector<Launch2> split_launches2(int64_t layers, int64_t dirs, int64_t max_layers, int64_t most_clusters,
                                     int64_t B);

}  // namespace rnntrain::cuda

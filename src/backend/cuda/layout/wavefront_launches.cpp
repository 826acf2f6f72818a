#include "backend/cuda/layout/wavefront_launches.h"

#include <algorithm>
#include <climits>
#include <utility>

namespace rnntrain::cuda {

int64_t launch_rows2(int64_t dirs, int64_t n) { return n * dirs + (dirs == 1 ? n - 1 : 0); }

// A launch of n layers runs as many slices side by side as the resident clusters hold, the rest in
// further rounds (a round: T + n - 1 wave steps). The split takes the fewest rounds in all, then the
// fewest launches (each above the first needs an input projection GEMM), then the largest first
// launch. With one slice that is as many layers a launch as fit; with four (B = 256) a 2-layer and a
// 1-layer launch take 3 rounds where one 3-layer launch of 5 clusters a slice takes 4.
std::vector<Launch2> split_launches2(int64_t layers, int64_t dirs, int64_t max_layers, int64_t most_clusters,
                                     int64_t B) {
  const int64_t L = layers, slices = std::max<int64_t>((B + 63) / 64, 1);
  auto side = [&](int64_t n) { return std::min(slices, most_clusters / launch_rows2(dirs, n)); };
  std::vector<std::pair<int64_t, int64_t>> best(L + 1, {0, 0});  // layers l..: {rounds, launches}
  std::vector<int64_t> take(L + 1, 0);                          // the layers of that split's first launch
  for (int64_t l = L - 1; l >= 0; --l) {
    best[l] = {INT64_MAX, INT64_MAX};
    for (int64_t n = dirs == 2 ? 1 : std::min(L - l, max_layers); n >= 1; --n) {
      if (side(n) < 1) continue;
      const int64_t rounds = (slices + side(n) - 1) / side(n);
      const std::pair<int64_t, int64_t> c{rounds + best[l + n].first, 1 + best[l + n].second};
      if (c < best[l]) best[l] = c, take[l] = n;
    }
    if (!take[l]) return {};
  }
  std::vector<Launch2> launches;
  for (int64_t l = 0; l < L; l += take[l]) launches.push_back({l, take[l], side(take[l])});
  return launches;
}

}  // namespace rnntrain::cuda

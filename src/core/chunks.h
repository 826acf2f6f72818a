// Loops of the model (the loss over positions, the optimizer over parameter elements) cut into
// chunks that a backend may run on several threads: a ChunkRunner calls fn over ranges [first, last)
// of the chunks 0..chunks-1, in any order and on any threads (the CPU backend passes
// cpu::parallel_rows). The loops sum in fixed chunks, in order, so their results are the same bits
// however the chunks ran.
#pragma once
#include <cstdint>
#include <functional>

namespace rnntrain {

using ChunkRunner = std::function<void(int64_t chunks, const std::function<void(int64_t, int64_t)>& fn)>;

// fn over all chunks: through *run, or here in order when run is null.
inline void run_chunks(const ChunkRunner* run, int64_t chunks, const std::function<void(int64_t, int64_t)>& fn) {
  if (run) (*run)(chunks, fn);
  else fn(0, chunks);
}

}  // namespace rnntrain

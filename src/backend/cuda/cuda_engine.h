// The CUDA engine: the Engine interface (backend/engine.h) over a CUDA session (session.h), built by
// make_engine (backend/engine_registry.cpp) where a GPU is usable.
#pragma once
#include <memory>

#include "backend/engine.h"

namespace rnntrain::cuda {

std::unique_ptr<Engine> make_cuda_engine(const Config& cfg, Params params, Rng& dropout_rng, Comm* ranks);

}  // namespace rnntrain::cuda

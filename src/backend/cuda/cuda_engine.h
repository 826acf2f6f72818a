// The CUDA engine: the Engine interface (backend/engine.h) over a CUDA session (session.h), built by
// make_engine (backend/engine_registry.cpp) where a GPU is usable.
#pragma once
#include <memory>

#include "backend/engine.h"

namespace rnntrain::cuda {

std::unique_ptr<Engine> make_cuda_engine(const Config& cfg, Params params, Rng& dropout_rng, Comm* ranks);

// The first layer of the model that the CUDA engine has no stage for ("" when it runs them all): make_engine
// trains such a model on the CPU (device auto) or refuses it (device cuda).
std::string unsupported_layer(const ModelSpec& model);

}  // namespace rnntrain::cuda

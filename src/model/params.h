// Parameters in the canonical per-layer Keras layout, on the host, with their gradients.
// kernel [I, G*H], recurrent_kernel [H, G*H], bias [G*H] (GRU reset_after: [2, 3H]); gate blocks
// are contiguous column blocks in Keras order (LSTM i,f,c,o; GRU z,r,h). Dense kernel [I, K],
// bias [K]; Embedding embeddings [V, E]. Bidirectional holds the forward layer's three, then the
// backward layer's three. Not device memory: backends copy from and to this at load and save.
#pragma once
#include <string>
#include <vector>

#include "core/rng.h"
#include "spec/config.h"
#include "spec/constraint_rule.h"
#include "spec/shapes.h"

namespace rnntrain {

struct Param {
  std::string name;  // "kernel", "recurrent_kernel", "bias", "embeddings"; "forward/kernel", "backward/bias" in Bidirectional
  Tensor value;
  Tensor grad;  // same shape as value
};

struct LayerParams {
  std::string layer;  // LayerSpec::name
  std::vector<Param> params;  // in Keras weight order
};

struct Params {
  std::vector<LayerParams> layers;  // one entry per model layer (layers without weights have none)
  std::vector<Param*> all();        // flat, in order: the optimizer's view
  int64_t count() const;
  void zero_grad();
  // The first parameter holding an inf or NaN, as "layer/name" ("" when every value is finite).
  std::string first_nonfinite() const;
};

// Creates every layer's parameters with their Keras shapes and initialises them with Keras'
// initialisers (glorot_uniform, orthogonal, zeros, unit_forget_bias, ...), drawing from `rng`
// in layer order, weight order.
Params init_params(const ModelSpec& model, Rng& rng);
// Throws RuntimeError unless params holds, per layer, the weights `shapes` (infer_shapes of the
// model) count: parameters made for another model (a weights file or init_from).
void check_params_fit(const Params& params, const std::vector<LayerShape>& shapes);

// Keras' weight regularizer of each parameter, in Params::all() order (inactive where it has none):
// kernel, recurrent_kernel, bias and embeddings by name, a Bidirectional's for both directions.
std::vector<Regularizer> weight_regularizers(const ModelSpec& model, const Params& params);
// Keras 3's variable path of each parameter, in Params::all() order: "sequential/lstm/lstm_cell/kernel",
// "sequential/bidirectional/forward_lstm/lstm_cell/bias", "sequential/time_distributed/dense/kernel".
std::vector<std::string> keras_variable_paths(const ModelSpec& model, const Params& params);
// Their penalty at the current values, summed in double; with add_grads, each regularized
// parameter's grad += l1 * sign(w) + l2 * (2 * w) in float32, as the CUDA kernel adds it.
double weight_penalty(const std::vector<Regularizer>& regs, const std::vector<Param*>& params, bool add_grads);

// Keras' weight constraint of each parameter, in Params::all() order (inactive where it has none),
// applied after each optimizer step. Throws ConfigError naming the layer and weight for an axis
// outside the weight's dimensions.
std::vector<Constraint> weight_constraints(const ModelSpec& model, const Params& params);
// The slice of each entry of a weight of `shape` whose norm constraint c takes (a group index per
// entry, row-major); returns the number of slices. `what` names the weight in errors.
int64_t constraint_groups(const Constraint& c, const Shape& shape, std::vector<int32_t>& group, const std::string& what);
ConstraintRule constraint_rule(const Constraint& c);
// Applies them in place: each slice's norm summed in double, the rule (spec/constraint_rule.h) in float32.
void apply_constraints(const std::vector<Constraint>& cs, const std::vector<Param*>& params);

// Throws a UsageError naming the first layer with an activity regularizer, for `who` (data-parallel
// ranks): each rank sees only its share of the batch that Keras' penalty divides by.
void refuse_activity_regularizers(const ModelSpec& model, const std::string& who);

// Fills one tensor with an initialiser; fan_in/fan_out are Keras' (rows, cols for a 2-D kernel).
void fill_init(Tensor& t, const Initializer& init, Rng& rng);

}  // namespace rnntrain

// Sparse categorical cross-entropy (keras.losses.SparseCategoricalCrossentropy): categorical
// cross-entropy against class labels (one integer per position) instead of one-hot rows. Keras' class
// has no label_smoothing; rnntrain takes it (as towards 1/K) and leaves it out of Keras files.
// Included by spec/losses.h, after categorical_crossentropy.h.
#pragma once

namespace rnntrain {

struct SparseCategoricalCrossentropy : CategoricalCrossentropy {
  static constexpr LossKey keys[] = {
      loss_flag("from_logits", &LossSpec::from_logits, false),
      loss_number("label_smoothing", &LossSpec::label_smoothing, 0.0, KeyRange::UnitOpen, /*keras=*/false)};
  static constexpr LossInfo info = make_info(LossKind::SparseCategoricalCrossentropy, "sparse_categorical_crossentropy",
                                             nullptr, "SparseCategoricalCrossentropy",
                                             "sparse_categorical_crossentropy", keys, Targets::Labels,
                                             AccuracyOf::Sparse);
};

}  // namespace rnntrain

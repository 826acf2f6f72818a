// How a training epoch is cut into batches: the shuffled order, or with train.bucketing (as tf.data's
// bucket_by_sequence_length, Marian's maxi-batches and fairseq do it) batches of sequences of similar
// length, each trimmed to its longest sequence. A function of the RNG state at the epoch's start, so a
// resumed run draws the same batches.
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include "core/rng.h"
#include "data/dataset.h"
#include "spec/config.h"

namespace rnntrain {

struct EpochBatch {
  std::vector<int64_t> rows;  // the dataset's rows, in batch order
  int64_t steps = 0;          // time steps to keep (the longest sequence's length); 0 = all
};

// Each sample's valid steps as the model sees them: the dataset's lengths; else, under an Embedding
// with mask_zero or a Masking layer right after the Input, one past the last unmasked step. Empty
// when neither applies (every step counts).
std::vector<int32_t> sample_lengths(const Dataset& d, const ModelSpec& model);

// Why train.bucketing cannot run on this data and model ("" when it can): no lengths to group by.
std::string bucketing_blocker(const Config& cfg, const std::vector<int32_t>& lengths);

// The steps a bucketed batch keeps: its longest length, from 16 on rounded up to one of 8 lengths per
// doubling (at most 1/8 more steps): a GPU replays one CUDA graph per batch shape, so few shapes are
// wanted (T = 400: 53 at most, 36 for lengths from 20 on). The added steps are masked.
int64_t bucket_steps(int64_t longest);

// The epoch's batches of at most batch_size rows covering rows 0..n-1 once each. Without bucketing,
// the (train.shuffle: shuffled) order cut in turn. With it: the order cut into windows of
// bucket_window batches' worth of samples, each sorted by length (stably: equal lengths keep their
// shuffled order) and cut into batches, then the batches shuffled (train.shuffle); when `trim`, each
// batch keeps bucket_steps(its longest length) steps (gather_batch: at most all), and the batch with
// the most rows x steps goes first. lengths: sample_lengths (bucketing needs them).
std::vector<EpochBatch> plan_epoch(const TrainSpec& t, int64_t n, const std::vector<int32_t>& lengths, bool trim,
                                   Rng& rng);

// A stopped epoch to go on with: `drawn` is the epoch as plan_epoch drew it, of which the first
// `samples` rows (in batch order) were trained. With `same` (the batch size unchanged) and `samples`
// at a batch boundary the batches stay as drawn; otherwise the rows not trained yet are cut anew
// into batches of batch_size (trimmed as plan_epoch trims when `trim`), so that no sample is skipped
// or trained twice. `done`: the batches of the result that hold the trained rows.
struct ResumedEpoch {
  std::vector<EpochBatch> batches;
  int64_t done = 0;
  bool recut = false;  // the batches after the trained rows were cut anew
};
ResumedEpoch resume_epoch(std::vector<EpochBatch> drawn, int64_t samples, int64_t batch_size, bool same,
                          const std::vector<int32_t>& lengths, bool trim);

// The rows of the first `steps` batches.
int64_t rows_of(const std::vector<EpochBatch>& batches, int64_t steps);

// A 64-bit fingerprint (FNV-1a over 8-byte words) of a dataset's inputs, targets and lengths: whether
// a resumed run trains on the data it stopped on.
uint64_t data_fingerprint(const Dataset& d);

// The share of the computed steps that are padding: 1 - sum of lengths / sum over batches of rows x
// steps (steps = T where a batch keeps all). 0 without lengths.
double padding_share(const std::vector<EpochBatch>& batches, const std::vector<int32_t>& lengths, int64_t T);

// The batch's rows, trimmed to b.steps time steps when b.steps > 0: the inputs, and the targets too
// when the model outputs a sequence (y_has_time).
Batch gather_batch(const Dataset& d, const EpochBatch& b, bool y_has_time);

// Keras' class_weight as b.w, one weight per output position: the class of a position is its label
// (sparse targets), the argmax of its target row (units > 1) or its rounded target (one unit);
// classes not in `weights` weigh 1.
void weigh_classes(Batch& b, const std::map<int64_t, double>& weights, bool sparse, int64_t units);

}  // namespace rnntrain

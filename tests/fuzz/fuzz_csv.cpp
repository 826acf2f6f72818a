// libFuzzer target: the CSV loaders (through load_source): time-series windows, and labelled
// sequences (csv_sequences, by an id column or one row per sequence). The first byte picks the
// options (window, horizon, stride, scaling, which columns by header name); the rest is the file.
#include "data/dataset.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::quiet();
  if (size < 1) return 0;
  const uint8_t o = data[0];
  rnntrain::DataSource src;
  src.format = rnntrain::DataFormat::Csv;
  src.window = 1 + (o & 7);
  src.horizon = 1 + ((o >> 3) & 1);
  src.stride = 1 + ((o >> 4) & 1);
  src.scaling = static_cast<rnntrain::Scaling>(((o >> 5) & 3) % 3);
  if (o & 0x80) {  // named columns, as in configs/sunspots.yaml; otherwise a single-column file's default
    src.features = {"a", "b"};
    src.target_columns = {"b"};
  }
  src.path = fuzz::scratch_file(data + 1, size - 1, ".csv");
  fuzz::expect_typed_errors([&] {
    rnntrain::DataMeta meta;
    rnntrain::load_source(src, "", meta, (o & 0x40) ? 0.25 : 0.0);
  });
  rnntrain::DataSource seq;
  seq.format = rnntrain::DataFormat::CsvSequences;
  seq.path = src.path;
  seq.scaling = src.scaling;
  seq.target_columns = {"b"};
  if (o & 0x80) seq.sequence_id = "a";
  seq.forecast = (o & 0x08) != 0;  // predict: the label column may be absent
  fuzz::expect_typed_errors([&] {
    rnntrain::DataMeta meta;
    rnntrain::load_source(seq, "", meta, (o & 0x40) ? 0.25 : 0.0);
  });
  return 0;
}

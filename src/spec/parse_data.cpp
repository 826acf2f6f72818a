// The `data:` section: train/validation/test sources with per-format keys, the format inferred from
// the path's suffix, and validation_split. Paths stay as written; the loaders resolve and open them.
#include <fmt/format.h>

#include <set>

#include "spec/sections.h"

namespace rnntrain::spec {

namespace {

using Keys = std::span<const char* const>;

Keys keys_of(DataFormat f) {
  const char* const* k = data_format_info(f).keys;
  size_t n = 0;
  while (k[n]) ++n;
  return {k, n};
}

std::string lower_suffix(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string s = path.substr(dot);
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

std::string format_hint() {
  std::string names;
  for (const DataFormatInfo& f : kDataFormats) names += (names.empty() ? "" : ", ") + std::string(f.name);
  return "add format: " + names;
}

// The format: given, or from the suffix of `path` (data_suffixes()), or npy when the inputs are .npy
// files.
DataFormat infer_format(const Value& v) {
  if (auto f = v.get("format")) return read_enum(*f, data_formats(), "data format");
  if (auto p = v.get("path")) {
    if (auto f = data_format_from_path(p->as_string())) return *f;
    const std::string suffix = lower_suffix(p->as_string());
    p->fail(fmt::format("cannot tell the data format from {}; {}",
                        suffix.empty() ? "a path without a suffix" : "the suffix '" + suffix + "'", format_hint()));
  }
  if (auto in = v.get("inputs"))
    if (in->is_scalar() && data_format_takes(DataFormat::Npy, in->as_string())) return DataFormat::Npy;
  if (v.has("task")) v.fail("synthetic data needs format: synthetic");
  v.fail(fmt::format("cannot tell the data format: give path: with a file ending in one of {}, or {}", data_suffixes(),
                     format_hint()));
}

// csv `features` and `targets`: column names, a single name allowed for one column.
std::vector<std::string> read_columns(const Value& v) {
  std::vector<std::string> cols = v.is_scalar() ? std::vector<std::string>{v.as_string()} : v.as_string_list();
  if (cols.empty()) v.fail("expected at least one column name, got an empty list");
  std::set<std::string> seen;
  for (const std::string& c : cols)
    if (!seen.insert(c).second) v.fail(fmt::format("the column '{}' is listed twice", c));
  return cols;
}

DataSource read_source(const Value& v) {
  v.require_map(" like {path: data/train.h5} or {format: synthetic, task: adding, samples: 1000, timesteps: 20}");
  DataSource s;
  s.format = infer_format(v);
  s.loc = v.loc();
  const char* fname = enum_name(data_formats(), s.format);
  std::vector<Value::Sibling> others;
  for (const DataFormatInfo& f : kDataFormats) others.push_back({fmt::format("{} data", f.name), keys_of(f.kind)});
  v.check_keys(keys_of(s.format), fmt::format("{} data", fname), others);
  auto count = [&](const char* key, int64_t lo, int64_t hi, const char* example) {
    return v.need(key, fmt::format("; {} data needs {}, e.g. {}", fname, key, example)).as_int(lo, hi);
  };
  switch (s.format) {
    case DataFormat::Hdf5:
    case DataFormat::Npz:
      s.path = v.need("path", fmt::format("; {} data needs the file, e.g. path: data/train.{}", fname,
                                          s.format == DataFormat::Npz ? "npz" : "h5")).as_string();
      if (auto x = v.get("inputs")) s.inputs = x->as_string();
      if (auto x = v.get("targets")) s.targets = x->as_string();
      if (auto x = v.get("lengths")) s.lengths = x->as_string(true);
      if (auto x = v.get("sample_weight")) s.sample_weight = x->as_string(true);
      break;
    case DataFormat::Npy:  // `path` is another name for `inputs` (the one file of predict-only data)
      if (v.has("path") && v.has("inputs")) v.get("path")->fail("npy data takes inputs: (or path:), not both");
      s.inputs = (v.has("path") ? *v.get("path") : v.need("inputs", "; npy data needs inputs: path/to/x.npy")).as_string();
      s.targets.clear();  // optional: predict-only data has none
      if (auto x = v.get("targets")) s.targets = x->as_string(true);
      if (auto x = v.get("lengths")) s.lengths = x->as_string(true);
      if (auto x = v.get("sample_weight")) s.sample_weight = x->as_string(true);
      break;
    case DataFormat::Csv:
      s.path = v.need("path", "; csv data needs the file, e.g. path: data/series.csv").as_string();
      s.window = count("window", 1, kMaxDim, "window: 24 (rows per input sequence)");
      if (auto x = v.get("horizon")) s.horizon = x->as_int(1, kMaxDim);
      if (auto x = v.get("stride")) s.stride = x->as_int(1, kMaxDim);
      // Either list may be left out: the loader then uses the other one (or the only column).
      if (auto x = v.get("features")) s.features = read_columns(*x);
      if (auto x = v.get("targets")) s.target_columns = read_columns(*x);
      if (auto x = v.get("scaling")) s.scaling = read_enum(*x, scalings(), "scaling");
      break;
    case DataFormat::CsvSequences:
      s.path = v.need("path", "; csv_sequences data needs the file, e.g. path: data/sequences.csv").as_string();
      if (auto x = v.get("id")) s.sequence_id = x->as_string();
      if (auto x = v.get("features")) s.features = read_columns(*x);
      if (auto x = v.get("targets")) {
        s.target_columns = read_columns(*x);
        if (s.target_columns.size() != 1) x->fail("csv_sequences data takes one label column in `targets`");
      }
      if (auto x = v.get("scaling")) s.scaling = read_enum(*x, scalings(), "scaling");
      break;
    case DataFormat::Text:
      s.path = v.need("path", "; text data needs the file, e.g. path: data/text.txt").as_string();
      s.seq_len = count("seq_len", 1, kMaxDim, "seq_len: 100");
      break;
    case DataFormat::Synthetic:  // the task names and their defaults belong to the generator (data/synthetic.h)
      s.task = v.need("task", "; synthetic data needs a task, e.g. task: adding (see data/README.md)").as_string();
      if (auto x = v.get("samples")) s.samples = x->as_int(0, kMaxCount);
      if (auto x = v.get("timesteps")) s.timesteps = x->as_int(0, kMaxDim);
      if (auto x = v.get("seed")) s.seed = x->as_uint64();
      break;
  }
  return s;
}

}  // namespace

DataSpec read_data(const Value& v) {
  v.require_map(" like {train: {path: data/train.h5}, validation_split: 0.1}");
  constexpr const char* keys[] = {"train", "validation", "validation_split", "test"};
  v.check_keys(keys, "data");
  DataSpec d;
  if (auto x = v.get("train")) d.train = read_source(*x);
  if (auto x = v.get("validation")) d.validation = read_source(*x);
  if (auto x = v.get("test")) d.test = read_source(*x);
  if (auto x = v.get("validation_split")) {
    d.validation_split = x->as_double(0.0, 1.0, false, true);
    if (d.validation_split > 0 && d.validation)
      x->fail("data.validation is given too; use either separate validation data or validation_split, not both");
  }
  return d;
}

}  // namespace rnntrain::spec

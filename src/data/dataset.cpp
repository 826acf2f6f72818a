// Dataset row access, DataMeta's JSON form, and load_source: the dispatch to one loader per
// format plus the helpers the loaders share. The loaders themselves live in arrays.cpp (hdf5,
// npy, npz), csv.cpp, text.cpp and synthetic.cpp; the checks in check.cpp.
#include "data/dataset.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <new>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "core/error.h"
#include "core/log.h"
#include "data/loaders.h"
#include "data/synthetic.h"

namespace rnntrain {

namespace fs = std::filesystem;

// ---- rows --------------------------------------------------------------------------------------

// Copies rows of t ([N, ...]) into a new tensor [rows.size(), ...].
static Tensor take_rows(const Tensor& t, const std::vector<int64_t>& rows, const std::string& source) {
  if (t.empty()) return {};
  const int64_t n = t.shape[0], row = n ? t.numel() / n : 0;
  Tensor out;
  out.shape = t.shape;
  out.shape[0] = static_cast<int64_t>(rows.size());
  out.data.resize(rows.size() * static_cast<size_t>(row));
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= n)
      throw RuntimeError(fmt::format("{}: row {} is out of range [0, {})", source, rows[i], n));
    std::copy(t.data.begin() + rows[i] * row, t.data.begin() + (rows[i] + 1) * row, out.data.begin() + i * row);
  }
  return out;
}

Batch Dataset::gather(const std::vector<int64_t>& rows) const {
  Batch b;
  b.x = take_rows(x, rows, source);
  b.y = take_rows(y, rows, source);
  b.w = take_rows(w, rows, source);
  if (!lengths.empty()) {
    b.lengths.reserve(rows.size());
    for (int64_t r : rows) b.lengths.push_back(lengths.at(static_cast<size_t>(r)));
  }
  return b;
}

Dataset Dataset::slice(int64_t begin, int64_t end) const {
  if (begin < 0 || end < begin || end > size())
    throw RuntimeError(fmt::format("{}: slice [{}, {}) is out of range [0, {}]", source, begin, end, size()));
  std::vector<int64_t> rows;
  for (int64_t i = begin; i < end; ++i) rows.push_back(i);
  Batch b = gather(rows);
  Dataset d;
  d.x = std::move(b.x);
  d.y = std::move(b.y);
  d.lengths = std::move(b.lengths);
  d.w = std::move(b.w);
  d.source = fmt::format("{} [rows {}:{}]", source, begin, end);
  d.x_name = x_name;
  d.y_name = y_name;
  d.w_name = w_name;
  return d;
}

// ---- DataMeta ----------------------------------------------------------------------------------

std::string DataMeta::to_json() const {
  nlohmann::json j;
  j["vocab"] = vocab;
  j["shift"] = shift;
  j["scale"] = scale;
  j["target_shift"] = target_shift;
  j["target_scale"] = target_scale;
  if (!columns.empty()) j["columns"] = columns;
  if (!target_columns.empty()) j["target_columns"] = target_columns;
  return j.dump(2) + "\n";
}

// nlohmann's message without its "[json.exception.parse_error.101] " prefix.
static std::string json_reason(const nlohmann::json::exception& e) {
  std::string what = e.what();
  if (what.rfind("[json.exception.", 0) == 0) {
    const size_t close = what.find("] ");
    if (close != std::string::npos) what.erase(0, close + 2);
  }
  return what;
}

DataMeta DataMeta::from_json(const std::string& text, const std::string& source) {
  static const char* kFix = "rnntrain writes it as data_meta.json in the run folder: use that file unchanged, or "
                            "re-run training to write it again.";
  DataMeta m;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(fmt::format("{}: not a valid data meta file: the JSON does not parse ({}). {}", source,
                                json_reason(e), kFix));
  }
  if (!j.is_object())
    throw DataError(fmt::format("{}: not a valid data meta file: it must be a JSON object, not {}. {}", source,
                                j.type_name(), kFix));
  auto get = [&](const char* key, auto& out) {
    if (!j.contains(key)) return;
    try {
      j.at(key).get_to(out);
    } catch (const nlohmann::json::exception& e) {
      throw DataError(fmt::format("{}: not a valid data meta file: key '{}' has the wrong type ({}). {}", source, key,
                                  json_reason(e), kFix));
    }
  };
  get("vocab", m.vocab);
  get("shift", m.shift);
  get("scale", m.scale);
  get("target_shift", m.target_shift);
  get("target_scale", m.target_scale);
  get("columns", m.columns);
  get("target_columns", m.target_columns);
  if ((!m.columns.empty() && m.columns.size() != m.shift.size()) ||
      (!m.target_columns.empty() && m.target_columns.size() != m.target_shift.size()))
    throw DataError(fmt::format("{}: not a valid data meta file: {} column names for {} feature scalings, {} for {} "
                                "target scalings. {}", source, m.columns.size(), m.shift.size(),
                                m.target_columns.size(), m.target_shift.size(), kFix));
  if (m.scale.size() != m.shift.size() || m.target_scale.size() != m.target_shift.size())
    throw DataError(fmt::format("{}: 'shift' and 'scale' (and 'target_shift' and 'target_scale') must have the same "
                                "length ({} and {}, {} and {}). {}", source, m.shift.size(), m.scale.size(),
                                m.target_shift.size(), m.target_scale.size(), kFix));
  auto check_scaling = [&](const char* shift_key, const std::vector<double>& shift, const char* scale_key,
                           const std::vector<double>& scale) {
    for (size_t i = 0; i < shift.size(); ++i)
      if (!std::isfinite(shift[i]) || !std::isfinite(scale[i]) || !(scale[i] > 0.0))
        throw DataError(fmt::format("{}: not a valid data meta file: column {} has {} {} and {} {}; a shift must be "
                                    "finite and a scale finite and positive. {}", source, i, shift_key, shift[i],
                                    scale_key, scale[i], kFix));
  };
  check_scaling("shift", m.shift, "scale", m.scale);
  check_scaling("target_shift", m.target_shift, "target_scale", m.target_scale);
  return m;
}

// ---- shared helpers ----------------------------------------------------------------------------

std::string resolve_path(const std::string& base_dir, const std::string& path) {
  if (path.empty() || base_dir.empty() || fs::path(path).is_absolute()) return path;
  return (fs::path(base_dir) / path).lexically_normal().string();
}

std::string source_path(const DataSource& src, const std::string& base_dir, const char* format) {
  if (src.path.empty())
    throw ConfigError(fmt::format("{}: a {} data source needs `path`: the file to read.", src.loc.str(), format));
  return resolve_path(base_dir, src.path);
}

std::string config_at(const DataSource& src) {
  return src.loc.file.empty() ? "" : fmt::format(" (config entry at {})", src.loc.str());
}

void require_file(const std::string& path, const DataSource& src) {
  std::error_code ec;
  const std::string from = config_at(src);
  const bool exists = fs::exists(path, ec);
  if (ec)  // not "no such file" but e.g. permission denied on a folder, or a name too long
    throw DataError(fmt::format("{}: cannot be opened ({}){}. Check the path and the permissions of its folders.",
                                path, ec.message(), from));
  if (!exists)
    throw DataError(fmt::format("{}: no such file{}. Check the path: relative paths are relative to the config "
                                "file's folder.", path, from));
  if (fs::is_directory(path, ec))
    throw DataError(fmt::format("{}: is a folder, not a data file{}. Give the path of a file.", path, from));
  if (!fs::is_regular_file(path, ec))  // a device (/dev/zero), pipe or socket could be read forever
    throw DataError(fmt::format("{}: is not a regular file (a device, pipe or socket){}. rnntrain reads data from "
                                "files: save the data to one and give its path.", path, from));
  if (!std::ifstream(path, std::ios::binary))
    throw DataError(fmt::format("{}: cannot be read{}. Check its permissions.", path, from));
}

std::string read_file(const std::string& path, const DataSource& src) {
  require_file(path, src);
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (!ec && size > memory_limit_bytes())
    throw DataError(fmt::format("{}: the file is {}, more than this machine's memory ({}){}. Use a smaller file.", path,
                                bytes_str(static_cast<double>(size)), bytes_str(static_cast<double>(memory_limit_bytes())),
                                config_at(src)));
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string join_names(const std::vector<std::string>& names) {
  if (names.empty()) return "none";
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

std::vector<int32_t> lengths_from(const Tensor& t, const std::string& what) {
  if (t.rank() != 1)
    throw DataError(fmt::format("{}: sequence lengths must be a 1-D array of N integers, but the shape is {}.", what,
                                shape_str(t.shape)));
  std::vector<int32_t> out;
  out.reserve(t.data.size());
  for (size_t i = 0; i < t.data.size(); ++i) {
    const float v = t.data[i];
    if (!std::isfinite(v) || v != std::floor(v) || std::fabs(v) > 2e9f)
      throw DataError(fmt::format("{}: sequence length {} at row {} is not an integer.", what, v, i));
    out.push_back(static_cast<int32_t>(v));
  }
  return out;
}

// ---- dispatch ----------------------------------------------------------------------------------

// What a source reads, for messages that cannot be more precise: its file, or its task.
static std::string source_name(const DataSource& src, const std::string& base_dir) {
  const DataFiles files = data_format_info(src.format).files;
  if (files == DataFiles::None) return fmt::format("{}:{}", data_format_info(src.format).name, src.task);
  if (files == DataFiles::PerArray) {
    const std::string& x = (src.inputs.empty() || src.inputs == "x") && !src.path.empty() ? src.path : src.inputs;
    return resolve_path(base_dir, x);
  }
  return resolve_path(base_dir, src.path);
}

Dataset load_source(const DataSource& src, const std::string& base_dir, DataMeta& meta, double holdout_fraction) {
  if (!(holdout_fraction >= 0.0 && holdout_fraction < 1.0))
    throw ConfigError(fmt::format("{}: the fraction of samples held out for validation must be in [0, 1) (got {}); "
                                  "check data.validation_split.", src.loc.str(), holdout_fraction));
  Dataset d;
  // The loaders throw our typed errors; anything else (the C++ library's out-of-memory, a parser's
  // or the filesystem's own exceptions) is turned into a DataError naming the source here.
  try {
    switch (src.format) {
      case DataFormat::Hdf5: d = load_hdf5(src, base_dir); break;
      case DataFormat::Npy: d = load_npy(src, base_dir); break;
      case DataFormat::Npz: d = load_npz(src, base_dir); break;
      case DataFormat::Csv: d = load_csv(src, base_dir, meta, holdout_fraction); break;
      case DataFormat::CsvSequences: d = load_csv_sequences(src, base_dir, meta, holdout_fraction); break;
      case DataFormat::Text: d = load_text(src, base_dir, meta); break;
      case DataFormat::Synthetic: d = make_synthetic(src); break;
    }
  } catch (const UsageError&) {
    throw;
  } catch (const DataError&) {
    throw;
  } catch (const RuntimeError&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw DataError(fmt::format("{}: not enough memory to load this data source{} (this machine has {}). Use a "
                                "smaller dataset, or a machine with more memory.", source_name(src, base_dir),
                                config_at(src), bytes_str(static_cast<double>(memory_limit_bytes()))));
  } catch (const std::length_error&) {
    throw DataError(fmt::format("{}: this data source{} is too large to hold in memory. Use a smaller dataset.",
                                source_name(src, base_dir), config_at(src)));
  } catch (const std::exception& e) {
    throw DataError(fmt::format("{}: cannot load this data source{}: {}. Check that the file is complete and in the "
                                "format the config names.", source_name(src, base_dir), config_at(src), e.what()));
  }
  check_counts(d);
  log_info("data source={} format={} samples={} x={} y={} lengths={}", d.source, data_format_info(src.format).name, d.size(),
           shape_str(d.x.shape), d.y.empty() ? "none" : shape_str(d.y.shape), d.lengths.empty() ? "no" : "yes");
  return d;
}

}  // namespace rnntrain

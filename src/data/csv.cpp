// CSV time series -> windows: `window` rows of the `features` columns predict the next `horizon` rows
// of the target columns; scaling is fitted on the training source (DataMeta), on the rows of the
// windows kept for training (not those validation_split holds out), and reused later. Only the used
// columns are parsed. Not a general CSV reader: no newlines inside quoted fields.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <utility>

#include "core/sizes.h"
#include "core/error.h"
#include "data/loaders.h"

namespace rnntrain {

namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\r')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r')) --e;
  return s.substr(b, e - b);
}

// Text from the file inside a message: at most 80 bytes, then "...".
std::string clip(const std::string& s) { return s.size() > 80 ? s.substr(0, 80) + "..." : s; }

// The longest line a CSV row may be: far beyond any real table, short of a binary file read as text.
constexpr size_t kMaxLine = size_t{16} << 20;

// Splits one line on `delim`; a field in double quotes may hold the delimiter ("" is a quote).
// DataError at path:line when a quote is not closed (fields cannot hold newlines).
std::vector<std::string> split_fields(const std::string& line, char delim, const std::string& path, int64_t lineno) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') cur += '"', ++i;
      else if (c == '"') quoted = false;
      else cur += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == delim) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (quoted)
    throw DataError(fmt::format("{}:{}: a quoted field is not closed on this line (fields cannot hold newlines). Close "
                                "the quote or remove it.", path, lineno));
  out.push_back(trim(cur));
  return out;
}

// The header's delimiter: the most frequent of ',', ';' and tab (',' when none occurs).
char detect_delimiter(const std::string& header) {
  char best = ',';
  size_t most = 0;
  for (char c : {',', ';', '\t'}) {
    const size_t n = static_cast<size_t>(std::count(header.begin(), header.end(), c));
    if (n > most) most = n, best = c;
  }
  return best;
}

// Per-column shift and scale over the first `rows` rows of a row-major [R, C] matrix.
void fit_scaling(Scaling s, const std::vector<double>& v, size_t cols, size_t rows, std::vector<double>& shift,
                 std::vector<double>& scale) {
  shift.assign(cols, 0.0);
  scale.assign(cols, 1.0);
  if (s == Scaling::None || rows == 0) return;
  for (size_t c = 0; c < cols; ++c) {
    double lo = v[c], hi = v[c], sum = 0.0;
    for (size_t r = 0; r < rows; ++r) {
      const double x = v[r * cols + c];
      lo = std::min(lo, x), hi = std::max(hi, x), sum += x;
    }
    const double mean = sum / static_cast<double>(rows);
    if (s == Scaling::MinMax) {
      shift[c] = lo;
      scale[c] = hi - lo;
    } else {
      double ss = 0.0;
      for (size_t r = 0; r < rows; ++r) ss += (v[r * cols + c] - mean) * (v[r * cols + c] - mean);
      shift[c] = mean;
      scale[c] = std::sqrt(ss / static_cast<double>(rows));  // population std, as sklearn's StandardScaler
    }
    if (!(scale[c] > 1e-12)) scale[c] = 1.0;  // a constant column: only shifted
  }
}

// A CSV file's header and data lines (their 1-based numbers kept for messages), and its cells as
// numbers.
struct CsvTable {
  std::string path;
  char delim = ',';
  std::vector<std::string> names;
  std::vector<std::pair<int64_t, std::string>> lines;  // the data lines (the header excluded)
  const DataSource* src = nullptr;

  std::vector<std::string> fields(size_t row) const {
    return split_fields(lines[row].second, delim, path, lines[row].first);
  }
  // The column's index; DataError naming the config key when the header has no such column.
  size_t index_of(const std::string& col, const char* key) const {
    auto it = std::find(names.begin(), names.end(), col);
    if (it == names.end())
      throw DataError(fmt::format("{}: no column '{}' (named in `{}`{}). The header has: {}.", path, col, key,
                                  config_at(*src), clip(join_names(names))));
    return static_cast<size_t>(it - names.begin());
  }
  double number(const std::vector<std::string>& f, size_t col, int64_t line) const {
    if (col >= f.size())
      throw DataError(fmt::format("{}:{}: the row has {} fields, but column '{}' is field {} of the header's {}. "
                                  "Fix that row.", path, line, f.size(), clip(names[col]), col + 1, names.size()));
    const std::string& s = f[col];
    double v = 0.0;
    const char* b = s.data();
    const char* e = s.data() + s.size();
    if (!s.empty() && *b == '+') ++b;
    auto [p, ec] = std::from_chars(b, e, v);
    if (s.empty() || ec != std::errc() || p != e || !std::isfinite(v))
      throw DataError(fmt::format("{}:{}: column '{}' holds '{}', which is not a number. Every used cell must be a "
                                  "finite number: fix or drop that row (fill missing values first).", path, line,
                                  clip(names[col]), clip(s)));
    return v;
  }
};

CsvTable read_table(const DataSource& src, const std::string& base_dir, const char* format) {
  CsvTable t;
  t.src = &src;
  t.path = source_path(src, base_dir, format);
  std::string text = read_file(t.path, src);
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);  // UTF-8 byte order mark
  int64_t lineno = 0;
  for (size_t pos = 0; pos <= text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    ++lineno;
    if (nl - pos > kMaxLine)
      throw DataError(fmt::format("{}:{}: the line is longer than 16 MiB; no CSV row is that long, so this is not a CSV "
                                  "file (or its line ends are not \\n). Check the path and the `format`.", t.path,
                                  lineno));
    std::string line = text.substr(pos, nl - pos);
    if (!trim(line).empty()) t.lines.emplace_back(lineno, std::move(line));
    pos = nl + 1;
  }
  if (t.lines.empty())
    throw DataError(fmt::format("{}: the file is empty; a CSV needs a header row of column names.", t.path));
  t.delim = detect_delimiter(t.lines[0].second);
  t.names = split_fields(t.lines[0].second, t.delim, t.path, t.lines[0].first);
  for (size_t i = 0; i < t.names.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (t.names[i] == t.names[j])
        throw DataError(fmt::format("{}:{}: column '{}' appears twice in the header (fields {} and {}); column names "
                                    "must be unique. Rename one.", t.path, t.lines[0].first, clip(t.names[i]), j + 1,
                                    i + 1));
  t.lines.erase(t.lines.begin());
  return t;
}

}  // namespace

Dataset load_csv(const DataSource& src, const std::string& base_dir, DataMeta& meta, double holdout_fraction) {
  if (src.window < 1 || src.horizon < 1 || src.stride < 1)
    throw ConfigError(fmt::format("{}: a csv data source needs window >= 1, horizon >= 1 and stride >= 1 (got "
                                  "window {}, horizon {}, stride {}).", src.loc.str(), src.window, src.horizon,
                                  src.stride));
  const CsvTable table = read_table(src, base_dir, "csv");
  const std::string& path = table.path;
  const std::vector<std::string>& names = table.names;

  std::vector<std::string> fcols = src.features, tcols = src.target_columns;
  if (fcols.empty() && tcols.empty() && names.size() == 1) fcols = tcols = names;
  if (fcols.empty()) fcols = tcols;
  if (tcols.empty() && fcols.size() == 1) tcols = fcols;
  if (fcols.empty() || tcols.empty())
    throw ConfigError(fmt::format("{}: a csv data source needs `features` (input columns) and `targets` "
                                  "(columns to predict); the columns of {} are: {}.", src.loc.str(), path,
                                  clip(join_names(names))));
  std::vector<size_t> fidx, tidx;
  for (const auto& c : fcols) fidx.push_back(table.index_of(c, "features"));
  for (const auto& c : tcols) tidx.push_back(table.index_of(c, "targets"));

  // Values of the used columns: feat [R, F], targ [R, Tc].
  const size_t F = fidx.size(), Tc = tidx.size();
  std::vector<double> feat, targ;
  for (size_t i = 0; i < table.lines.size(); ++i) {
    const std::vector<std::string> fields = table.fields(i);
    for (size_t c : fidx) feat.push_back(table.number(fields, c, table.lines[i].first));
    for (size_t c : tidx) targ.push_back(table.number(fields, c, table.lines[i].first));
  }
  const int64_t R = static_cast<int64_t>(table.lines.size()), W = src.window, H = src.horizon;
  if (R < W + (src.forecast ? 0 : H))
    throw DataError(fmt::format("{}: {} data rows are too few for one window: window {}{} rows are needed. Use a "
                                "smaller window or more data.", path, R, W,
                                src.forecast ? "" : fmt::format(" + horizon {}", H)));
  // Window starts: every stride-th row while the window and its horizon fit; forecasting, while the
  // window fits, and the window of the last rows always (it forecasts past the end).
  std::vector<int64_t> starts;
  for (int64_t s = 0; s + W + (src.forecast ? 0 : H) <= R; s += src.stride) starts.push_back(s);
  if (src.forecast && starts.back() != R - W) starts.push_back(R - W);
  const auto N = static_cast<int64_t>(starts.size());

  if (meta.shift.empty()) {
    // The trainer holds out the last floor(N * holdout_fraction) windows (data.validation_split);
    // the statistics come from the rows of the windows it keeps, so nothing of the held-out targets
    // leaks into the scaling. Without a hold-out every row is used.
    size_t fit_rows = static_cast<size_t>(R);
    const int64_t held = static_cast<int64_t>(std::floor(static_cast<double>(N) * holdout_fraction));
    if (held > 0) {
      const int64_t kept = std::max<int64_t>(1, N - held);
      fit_rows = static_cast<size_t>((kept - 1) * src.stride + W + H);
    }
    fit_scaling(src.scaling, feat, F, fit_rows, meta.shift, meta.scale);
    fit_scaling(src.scaling, targ, Tc, fit_rows, meta.target_shift, meta.target_scale);
    if (!meta.shift.empty()) meta.columns = fcols, meta.target_columns = tcols;
  } else if (meta.shift.size() != F || meta.target_shift.size() != Tc) {
    throw DataError(fmt::format("{}: the training data had {} feature and {} target columns, this file has {} and "
                                "{}. Validation and test CSVs must use the same `features` and `targets` as "
                                "the training one.", path, meta.shift.size(), meta.target_shift.size(), F, Tc));
  }

  Dataset d;
  d.source = path;
  d.x_name = "columns " + join_names(fcols);
  d.y_name = "columns " + join_names(tcols);
  d.x = Tensor({N, W, static_cast<int64_t>(F)});  // x: [N, window, F]
  if (!src.forecast) d.y = Tensor({N, H * static_cast<int64_t>(Tc)});  // y: [N, horizon * Tc], over (horizon, target)
  for (int64_t n = 0; n < N; ++n) {
    const int64_t s = starts[n];
    for (int64_t t = 0; t < W; ++t)
      for (size_t f = 0; f < F; ++f)
        d.x[(n * W + t) * F + f] = static_cast<float>((feat[(s + t) * F + f] - meta.shift[f]) / meta.scale[f]);
    for (int64_t h = 0; h < H && !src.forecast; ++h)
      for (size_t j = 0; j < Tc; ++j)
        d.y[(n * H + h) * Tc + j] =
            static_cast<float>((targ[(s + W + h) * Tc + j] - meta.target_shift[j]) / meta.target_scale[j]);
  }
  return d;
}

namespace {

// The columns of a csv_sequences file: the id (-1: one row per sequence), the label (-1: none, as
// predict reads files), and the features (per time step by id, or the time steps of one feature).
struct SequenceColumns {
  int64_t id = -1, label = -1;
  std::vector<size_t> features;
};

SequenceColumns sequence_columns(const CsvTable& table, const DataSource& src) {
  SequenceColumns c;
  if (!src.sequence_id.empty()) c.id = static_cast<int64_t>(table.index_of(src.sequence_id, "id"));
  // The label column: required to train and evaluate; predict reads files without it.
  if (!src.target_columns.empty()) {
    const auto it = std::find(table.names.begin(), table.names.end(), src.target_columns[0]);
    if (it != table.names.end()) c.label = it - table.names.begin();
    else if (!src.forecast) c.label = static_cast<int64_t>(table.index_of(src.target_columns[0], "targets"));
  } else if (!src.forecast) {
    throw ConfigError(fmt::format("{}: csv_sequences data needs `targets`: the column of the sequences' class labels "
                                  "(the columns of {}: {}).", src.loc.str(), table.path, clip(join_names(table.names))));
  }
  if (!src.features.empty()) {
    for (const auto& name : src.features) c.features.push_back(table.index_of(name, "features"));
  } else {
    for (size_t i = 0; i < table.names.size(); ++i)
      if (static_cast<int64_t>(i) != c.id && (src.target_columns.empty() || table.names[i] != src.target_columns[0]))
        c.features.push_back(i);
  }
  if (c.features.empty())
    throw ConfigError(fmt::format("{}: {} has no feature columns besides the id and the label.", src.loc.str(), table.path));
  return c;
}

// The sequences of a csv_sequences file, in file order: each one's values (steps x F) and label, and
// the line its first row is on.
struct Sequences {
  std::vector<std::vector<double>> values;
  std::vector<float> labels;
  std::vector<int64_t> first_lines;
};

Sequences read_sequences(const CsvTable& table, const DataSource& src, const SequenceColumns& c) {
  const std::string& path = table.path;
  const bool by_id = c.id >= 0;
  Sequences out;
  std::map<std::string, int64_t> seen;  // id -> the line its sequence started on
  std::string current;                  // the id of the sequence being read
  for (size_t i = 0; i < table.lines.size(); ++i) {
    const std::vector<std::string> f = table.fields(i);
    const int64_t line = table.lines[i].first;
    if (by_id && f.size() <= static_cast<size_t>(c.id))
      throw DataError(fmt::format("{}:{}: the row has {} fields, but the id column '{}' is field {}. Fix that row.", path,
                                  line, f.size(), clip(src.sequence_id), c.id + 1));
    if (!by_id || i == 0 || f[c.id] != current) {
      if (by_id) {
        current = f[c.id];
        if (auto [it, fresh] = seen.emplace(current, line); !fresh)
          throw DataError(fmt::format("{}:{}: the rows of sequence '{}' are not together (it started on line {}); sort "
                                      "the file by the `id` column.", path, line, clip(current), it->second));
      }
      out.values.emplace_back();
      out.first_lines.push_back(line);
      if (c.label >= 0) out.labels.push_back(static_cast<float>(table.number(f, static_cast<size_t>(c.label), line)));
    }
    for (size_t col : c.features) out.values.back().push_back(table.number(f, col, line));
    if (c.label >= 0 && static_cast<float>(table.number(f, static_cast<size_t>(c.label), line)) != out.labels.back())
      throw DataError(fmt::format("{}:{}: label {} differs from the sequence's label {} (line {}); a sequence has one "
                                  "label.", path, line, table.number(f, static_cast<size_t>(c.label), line),
                                  out.labels.back(), out.first_lines.back()));
  }
  return out;
}

}  // namespace

Dataset load_csv_sequences(const DataSource& src, const std::string& base_dir, DataMeta& meta,
                           double holdout_fraction) {
  const CsvTable table = read_table(src, base_dir, "csv_sequences");
  const std::string& path = table.path;
  const SequenceColumns cols = sequence_columns(table, src);
  const bool by_id = cols.id >= 0;
  const int64_t label = cols.label;
  const std::vector<size_t>& fidx = cols.features;
  const size_t F = by_id ? fidx.size() : 1;
  Sequences seqs = read_sequences(table, src, cols);
  std::vector<std::vector<double>>& values = seqs.values;
  if (values.empty()) throw DataError(fmt::format("{}: no data rows: the file has only its header.", path));
  const auto N = static_cast<int64_t>(values.size());
  int64_t T = 0;
  for (const auto& v : values) T = std::max<int64_t>(T, static_cast<int64_t>(v.size() / F));

  if (meta.shift.empty()) {  // fitted on the sequences kept for training (not those validation_split holds out)
    const int64_t held = static_cast<int64_t>(std::floor(static_cast<double>(N) * holdout_fraction));
    std::vector<double> rows;
    for (int64_t n = 0; n < std::max<int64_t>(1, N - held); ++n) rows.insert(rows.end(), values[n].begin(), values[n].end());
    fit_scaling(src.scaling, rows, F, rows.size() / F, meta.shift, meta.scale);
    if (by_id && !meta.shift.empty())
      for (size_t c : fidx) meta.columns.push_back(table.names[c]);
  } else if (meta.shift.size() != F) {
    throw DataError(fmt::format("{}: the training data had {} feature columns, this file has {}. Validation and test "
                                "files must have the training file's `features`.", path, meta.shift.size(), F));
  }

  // Padding to the longest sequence can ask for far more than the file holds: check it fits first.
  const double bytes = 4.0 * static_cast<double>(N) * static_cast<double>(T) * static_cast<double>(F);
  if (bytes > static_cast<double>(memory_limit_bytes()))
    throw DataError(fmt::format("{}: {} sequences padded to the longest ({} steps) take {} in memory, more than this "
                                "machine has ({}); split the longest sequences or drop them.", path, N, T,
                                bytes_str(bytes), bytes_str(static_cast<double>(memory_limit_bytes()))));
  Dataset d;
  d.source = path;
  d.x_name = by_id ? "columns " + join_names(src.features.empty() ? std::vector<std::string>{"(all)"} : src.features)
                   : "the time-step columns";
  d.y_name = label >= 0 ? "column " + table.names[label] : "";
  d.x = Tensor({N, T, static_cast<int64_t>(F)});  // zero padding after each sequence's steps
  bool ragged = false;
  for (int64_t n = 0; n < N; ++n) {
    const auto steps = static_cast<int64_t>(values[n].size() / F);
    for (int64_t i = 0; i < steps * static_cast<int64_t>(F); ++i) {
      const size_t f = static_cast<size_t>(i) % F;
      d.x[n * T * static_cast<int64_t>(F) + i] = static_cast<float>((values[n][i] - meta.shift[f]) / meta.scale[f]);
    }
    d.lengths.push_back(static_cast<int32_t>(steps));
    ragged |= steps != T;
  }
  if (!ragged) d.lengths.clear();
  if (label >= 0) {
    d.y = Tensor({N});
    d.y.data = std::move(seqs.labels);
  }
  return d;
}

}  // namespace rnntrain

// Typed reading of YAML nodes with file:line:col and key-path errors, did-you-mean suggestions, and
// the guards that keep yaml-cpp away from inputs it would recurse on deeply. No schema here.
#include "spec/reader.h"

#include <yaml-cpp/eventhandler.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/error.h"

namespace rnntrain::spec {

namespace {

// Optimal string alignment distance (Levenshtein plus adjacent transpositions), case-insensitive.
size_t edit_distance(const std::string& a, const std::string& b) {
  auto low = [](char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c); };
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = low(a[i - 1]) == low(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && low(a[i - 1]) == low(b[j - 2]) && low(a[i - 2]) == low(b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

bool quoted(const YAML::Node& n) { return n.Tag() == "!" || n.Tag() == "tag:yaml.org,2002:str"; }

// Whole-string numeric parses (std::from_chars, with an optional leading '+').
template <class T>
bool parse_number(std::string s, T& out) {
  if (!s.empty() && s[0] == '+') s.erase(0, 1);
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

std::string number_str(double x) { return fmt::format("{}", x); }

// User text inside a message: control bytes replaced, at most `max` bytes.
std::string printable(const std::string& text, size_t max) {
  std::string s = text.size() > max ? text.substr(0, max) + "..." : text;
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return s;
}

std::string interval(double lo, double hi, bool lo_open, bool hi_open) {
  const double inf = std::numeric_limits<double>::infinity();
  if (lo == -inf && hi == inf) return "a number";
  if (hi == inf && lo == 0) return lo_open ? "a positive number" : "a non-negative number";
  if (hi == std::numeric_limits<float>::max() && lo == 0)  // values the float32 updates use
    return lo_open ? "a positive number up to 3.4e38 (float32's largest)" : "a non-negative number up to 3.4e38 (float32's largest)";
  if (hi == inf) return fmt::format("a number {} {}", lo_open ? ">" : ">=", number_str(lo));
  return fmt::format("a number in {}{}, {}{}", lo_open ? "(" : "[", number_str(lo), number_str(hi), hi_open ? ")" : "]");
}

}  // namespace

std::string join(const std::vector<std::string>& words, const char* sep) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) out += (i ? sep : "") + words[i];
  return out;
}

std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
  if (word.size() > 64) return "";
  const size_t limit = word.size() <= 4 ? 1 : word.size() <= 8 ? 2 : 3;
  std::string best;
  size_t best_d = limit + 1;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  if (!best.empty() || word.size() < 3) return best;
  // Otherwise the longest shared start, if it is most of a candidate: "val_acc" -> "val_accuracy",
  // "fusion" -> "fuse".
  size_t best_common = 0;
  for (const std::string& c : candidates) {
    size_t n = 0;
    while (n < c.size() && n < word.size() && c[n] == word[n]) ++n;
    if (n >= 3 && 2 * n >= c.size() && n > best_common) best_common = n, best = c;
  }
  return best;
}

SourceLoc Value::loc() const {
  // The last override whose subtree holds this path wins.
  for (auto it = ctx_->owners.rbegin(); it != ctx_->owners.rend(); ++it) {
    const std::string& p = it->path;
    if (path_.compare(0, p.size(), p) == 0 &&
        (path_.size() == p.size() || path_[p.size()] == '.' || path_[p.size()] == '['))
      return SourceLoc{fmt::format("override '{}'", it->text), 0, 0};
  }
  YAML::Mark m = YAML::Mark::null_mark();
  if (node_.IsDefined()) m = node_.Mark();
  if (m.line < 0) return SourceLoc{ctx_->file, 0, 0};
  return SourceLoc{ctx_->file, m.line + 1, m.column + 1};
}

void Value::fail(const std::string& msg) const {
  throw ConfigError(fmt::format("{}: {}: {}", loc().str(), path_.empty() ? "(top level)" : printable(path_, 160), msg));
}

std::string Value::describe() const {
  if (is_null()) return "nothing (null)";
  if (is_map()) return "a map";
  if (is_seq()) return "a list";
  const std::string s = printable(node_.Scalar(), 40);
  double d;
  if (!quoted(node_) && parse_number(s, d)) return s;
  return fmt::format("\"{}\"", s);
}

int64_t Value::as_int(int64_t lo, int64_t hi) const {
  const std::string what = lo == 1 ? "a positive integer"
                           : lo == 0 ? "a non-negative integer"
                                     : fmt::format("an integer >= {}", lo);
  int64_t v = 0;
  bool ok = is_scalar() && !quoted(node_) && parse_number(node_.Scalar(), v);
  if (!ok && is_scalar() && !quoted(node_)) {  // 1e4 is an integer too
    double d;
    if (parse_number(node_.Scalar(), d) && std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) {
      v = static_cast<int64_t>(d);
      ok = true;
    }
  }
  if (!ok || v < lo) fail(fmt::format("expected {}, got {}", what, describe()));
  if (v > hi) fail(fmt::format("expected {} no larger than {}, got {}", what, hi, describe()));
  return v;
}

uint64_t Value::as_uint64() const {
  uint64_t v = 0;
  if (!is_scalar() || quoted(node_) || !parse_number(node_.Scalar(), v))
    fail(fmt::format("expected a non-negative integer below 2^64, got {}", describe()));
  return v;
}

double Value::as_double(double lo, double hi, bool lo_open, bool hi_open) const {
  double v = 0;
  const bool ok = is_scalar() && !quoted(node_) && parse_number(node_.Scalar(), v) && std::isfinite(v);
  if (!ok || v < lo || v > hi || (lo_open && v == lo) || (hi_open && v == hi))
    fail(fmt::format("expected {}, got {}", interval(lo, hi, lo_open, hi_open), describe()));
  return v;
}

double Value::as_finite() const {
  const double inf = std::numeric_limits<double>::infinity();
  return as_double(-inf, inf, false, false);
}

bool Value::as_bool() const {
  bool b = false;
  if (!is_scalar() || quoted(node_) || !YAML::convert<bool>::decode(node_, b))
    fail(fmt::format("expected true or false, got {}", describe()));
  return b;
}

std::string Value::as_string(bool allow_empty) const {
  if (!is_scalar()) fail(fmt::format("expected a string, got {}", describe()));
  if (!allow_empty && node_.Scalar().empty()) fail("expected a non-empty string, got \"\"");
  return node_.Scalar();
}

std::vector<std::string> Value::as_string_list() const {
  require_seq(" of strings, e.g. [a, b]");
  std::vector<std::string> out;
  for (const Value& v : items()) out.push_back(v.as_string());
  return out;
}

void Value::require_map(const std::string& hint) const {
  if (!is_map()) fail(fmt::format("expected a map{}, got {}", hint, describe()));
}

void Value::require_seq(const std::string& hint) const {
  if (!is_seq()) fail(fmt::format("expected a list{}, got {}", hint, describe()));
}

std::optional<Value> Value::get(const std::string& key) const {
  const YAML::Node& n = node_;
  for (auto it = n.begin(); it != n.end(); ++it)
    if (it->first.IsScalar() && it->first.Scalar() == key) {
      if (!it->second.IsDefined() || it->second.IsNull()) return std::nullopt;
      return Value(ctx_, it->second, path_.empty() ? key : path_ + "." + key);
    }
  return std::nullopt;
}

Value Value::need(const std::string& key, const std::string& hint) const {
  std::optional<Value> v = get(key);
  if (!v) fail(fmt::format("missing key '{}'{}", key, hint));
  return *v;
}

std::vector<Value> Value::items() const {
  std::vector<Value> out;
  const YAML::Node& n = node_;
  for (size_t i = 0; i < n.size(); ++i) out.emplace_back(ctx_, n[i], fmt::format("{}[{}]", path_, i));
  return out;
}

void Value::check_keys(std::span<const char* const> allowed, const std::string& owner,
                       std::span<const Sibling> others) const {
  std::vector<std::string> names(allowed.begin(), allowed.end());
  std::vector<std::string> seen;
  const YAML::Node& n = node_;
  for (auto it = n.begin(); it != n.end(); ++it) {
    Value key(ctx_, it->first, path_);
    if (!it->first.IsScalar()) key.fail(fmt::format("keys must be plain names, got {}", key.describe()));
    const std::string k = it->first.Scalar();
    Value at(ctx_, it->first, path_.empty() ? k : path_ + "." + k);
    if (std::find(seen.begin(), seen.end(), k) != seen.end())
      at.fail(fmt::format("duplicate key '{}': {} sets it twice; keep one", printable(k, 40), owner));
    seen.push_back(k);
    if (std::find(names.begin(), names.end(), k) != names.end()) continue;

    std::string msg = fmt::format("{} has no key '{}'", owner, printable(k, 40));
    std::vector<std::string> holders;
    for (const Sibling& s : others)
      if (std::find_if(s.keys.begin(), s.keys.end(), [&](const char* x) { return k == x; }) != s.keys.end())
        holders.push_back(s.owner);
    if (!holders.empty()) msg += fmt::format(" (it is a key of {})", join(holders, ", "));
    std::string guess = holders.empty() ? closest(k, names) : "";
    if (k == "lr" && std::find(names.begin(), names.end(), "learning_rate") != names.end()) guess = "learning_rate";
    if (!guess.empty())
      msg += fmt::format("; did you mean '{}'?", guess);
    else
      msg += fmt::format("; valid keys: {}", join(names));
    at.fail(msg);
  }
}

std::string squashed(const std::string& name) {
  std::string out;
  for (char c : name)
    if (c != '_') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

void fail_choice(const Value& v, const std::string& got, const char* what, const std::vector<std::string>& choices,
                 const std::vector<std::string>& aliases) {
  std::vector<std::string> all = choices;
  all.insert(all.end(), aliases.begin(), aliases.end());
  const std::string guess = closest(got, all);
  v.fail(fmt::format("unknown {} '{}';{} choices: {}", what, printable(got, 40),
                     guess.empty() ? "" : fmt::format(" did you mean '{}'?", guess), join(choices)));
}

// The limits are far above any real config and far below what yaml-cpp or the stack can take.
constexpr size_t kMaxBytes = 4u << 20;
constexpr int kMaxFlowDepth = 64;
constexpr int kMaxBlockDepth = 256;

std::string located(const std::string& origin, bool in_file, int line, int col, const std::string& msg) {
  if (line <= 0) return fmt::format("{}: {}", origin, msg);
  if (in_file) return fmt::format("{}:{}:{}: {}", origin, line, col, msg);
  return fmt::format("{}: {} (at line {}, column {} of the value)", origin, msg, line, col);
}

void check_yaml_text(const std::string& text, const std::string& origin, const std::string& what, bool in_file) {
  auto fail = [&](int line, int col, const std::string& msg) { throw ConfigError(located(origin, in_file, line, col, msg)); };
  if (text.size() > kMaxBytes)
    fail(0, 0, fmt::format("{} is {} bytes; a config is a few kilobytes (is this the right file?)", what, text.size()));
  int line = 1, col = 0, depth = 0, block = 0;
  bool line_start = true;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char prev = i ? text[i - 1] : '\n';
    ++col;
    if (c == '\n') {
      ++line, col = 0, line_start = true, block = 0;
      continue;
    }
    if (quote) {  // inside a quoted scalar: brackets do not count
      if (quote == '"' && c == '\\') ++i, ++col;
      else if (c == quote) quote = 0;
      continue;
    }
    if (line_start) {  // indentation and compact "- " / "? " indicators nest block collections
      if (c == ' ' || ((c == '-' || c == '?') && i + 1 < text.size() && text[i + 1] == ' ')) {
        if (++block > kMaxBlockDepth)
          fail(line, col, fmt::format("{} is indented or nested deeper than {} levels; a config never needs this", what, kMaxBlockDepth));
        continue;
      }
      line_start = false;
    }
    if (c == '#' && (prev == ' ' || prev == '\t' || prev == '\n')) {  // a comment: skip the line
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    const bool token_start = prev == ' ' || prev == '\t' || prev == '\n' || prev == '[' || prev == '{' || prev == ',';
    if ((c == '"' || c == '\'') && token_start) quote = c;
    if (c == '[' || c == '{') {
      if (++depth > kMaxFlowDepth)
        fail(line, col, fmt::format("{} nests '[' or '{{' deeper than {} levels; a config never needs this", what, kMaxFlowDepth));
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

namespace {

// Records where each document starts. yaml-cpp (0.7, 0.8) returns an endless run of empty documents
// for a stray ',' at the top level (jbeder/yaml-cpp#1040), so LoadAll would never return; counting
// the documents ourselves lets us stop when the parser makes no progress.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> marks;
  void OnDocumentStart(const YAML::Mark& m) override { marks.push_back(m); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};


}  // namespace

YAML::Node load_yaml(const std::string& text, const std::string& origin, const std::string& what, bool in_file) {
  check_yaml_text(text, origin, what, in_file);
  auto fail = [&](const YAML::Mark& m, const std::string& msg) {
    throw ConfigError(located(origin, in_file, m.line + 1, m.column + 1, msg));
  };
  DocumentStarts docs;
  YAML::Node root;
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    while (docs.marks.size() < 3 && parser.HandleNextDocument(docs)) {
      const size_t n = docs.marks.size();
      if (n >= 2 && docs.marks[n - 1].pos == docs.marks[n - 2].pos) {
        const YAML::Mark& m = docs.marks[n - 1];
        const char c = m.pos >= 0 && static_cast<size_t>(m.pos) < text.size() ? text[m.pos] : '?';
        fail(m, fmt::format("{} is not valid YAML: unexpected '{}'", what, static_cast<unsigned char>(c) >= 0x20 && c != 0x7f ? c : '?'));
      }
    }
    if (docs.marks.size() > 1)
      fail(docs.marks[1], fmt::format("{} holds more than one YAML document; keep one (remove the second '---')", what));
    if (!docs.marks.empty()) root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    std::string msg = e.msg;  // may quote a byte of a binary file
    for (char& c : msg)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    fail(e.mark, fmt::format("{} is not valid YAML: {}", what, msg));
  }
  return root;
}

}  // namespace rnntrain::spec

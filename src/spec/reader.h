// Typed reading of a YAML tree for the config parser (internal to spec/): values that know their key
// path and file position, checked scalars, unknown-key and enum checks with did-you-mean. Not the
// schema itself (parse_*.cpp) and not the override syntax (overrides.cpp).
#pragma once
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "spec/config.h"

namespace rnntrain::spec {

// A subtree written by a command-line override: errors under `path` name the override.
struct OverrideOwner {
  std::string path;  // "model.layers[1].units"
  std::string text;  // "model.layers.1.units=64"
};

struct Context {
  std::string file;
  std::vector<OverrideOwner> owners;
};

// Keys and values are checked against these limits (and kMaxDim, spec/config.h) so that no later
// arithmetic can overflow.
constexpr int64_t kMaxCount = int64_t{1} << 40;  // epochs, steps, samples

// One node of the tree with its key path ("train.optimizer.learning_rate").
class Value {
 public:
  Value(const Context* ctx, YAML::Node node, std::string path)
      : ctx_(ctx), node_(std::move(node)), path_(std::move(path)) {}

  const std::string& path() const { return path_; }
  const YAML::Node& node() const { return node_; }
  SourceLoc loc() const;
  [[noreturn]] void fail(const std::string& msg) const;  // "file:line:col: path: msg"

  bool is_null() const { return !node_.IsDefined() || node_.IsNull(); }
  bool is_map() const { return node_.IsMap(); }
  bool is_seq() const { return node_.IsSequence(); }
  bool is_scalar() const { return node_.IsScalar(); }
  std::string describe() const;  // for "got ...": `"sixty"`, `64`, `a map`, `a list`, `nothing`

  // Scalars, checked. `what` completes "expected ...": "a positive integer", "a number in [0, 1)".
  int64_t as_int(int64_t lo, int64_t hi) const;
  uint64_t as_uint64() const;
  double as_double(double lo, double hi, bool lo_open, bool hi_open) const;
  double as_finite() const;
  bool as_bool() const;
  std::string as_string(bool allow_empty = false) const;
  std::vector<std::string> as_string_list() const;  // a list of non-empty strings

  // Maps: require_map() first; then get() is empty for a missing or null key.
  void require_map(const std::string& hint) const;
  std::optional<Value> get(const std::string& key) const;
  bool has(const std::string& key) const { return get(key).has_value(); }
  Value need(const std::string& key, const std::string& hint) const;  // error if missing
  // Sequences: require_seq() first.
  void require_seq(const std::string& hint) const;
  std::vector<Value> items() const;

  // Rejects unknown and duplicate keys. `owner` names the map in messages ("LSTM", "train").
  // `others` lists keys of sibling kinds (other layer types, optimizers, ...) for a better hint.
  struct Sibling {
    std::string owner;
    std::span<const char* const> keys;
  };
  void check_keys(std::span<const char* const> allowed, const std::string& owner,
                  std::span<const Sibling> others = {}) const;

 private:
  const Context* ctx_;
  YAML::Node node_;
  std::string path_;
};

// Enum spellings. Aliases are accepted but not listed among the choices and never emitted.
template <class E>
struct Choice {
  const char* name;
  E value;
  bool alias = false;
};

// The closest candidate within a small edit distance (case-insensitive), or "".
std::string closest(const std::string& word, const std::vector<std::string>& candidates);
std::string join(const std::vector<std::string>& words, const char* sep = ", ");

// "unknown <what> 'x'; did you mean 'y'? choices: ..." (aliases are suggested but not listed).
[[noreturn]] void fail_choice(const Value& v, const std::string& got, const char* what,
                              const std::vector<std::string>& choices, const std::vector<std::string>& aliases = {});

// A name in lower case without underscores: "BinaryCrossentropy", "binary_crossentropy" and
// "binarycrossentropy" are one name, so Keras' class names read as the config's snake_case ones.
std::string squashed(const std::string& name);

// The value a name means: its spelling in the table, else the one entry that matches it squashed
// (Keras' class names: AUC, Adam, BinaryCrossentropy, LSTM), else a ConfigError with a did-you-mean.
template <class E>
E read_enum(const Value& v, std::span<const Choice<E>> table, const char* what) {
  const std::string s = v.as_string();
  std::vector<std::string> names, aliases;
  for (const Choice<E>& c : table) {
    if (s == c.name) return c.value;
    (c.alias ? aliases : names).push_back(c.name);
  }
  const std::string key = squashed(s);
  const Choice<E>* found = nullptr;
  for (const Choice<E>& c : table)
    if (squashed(c.name) == key) {
      if (found && found->value != c.value) fail_choice(v, s, what, names, aliases);
      found = &c;
    }
  if (found) return found->value;
  fail_choice(v, s, what, names, aliases);
}

template <class E>
const char* enum_name(std::span<const Choice<E>> table, E value) {
  for (const Choice<E>& c : table)
    if (!c.alias && c.value == value) return c.name;
  return "?";
}

// Rejects inputs that would make yaml-cpp recurse deeply or take long: too large, or nested deeper
// than any config needs. Throws ConfigError with origin:line:col (in_file) or "origin: ... (at
// line L, column C of the value)" for an override's value. `what` names the text: "the config".
void check_yaml_text(const std::string& text, const std::string& origin, const std::string& what, bool in_file);

// Parses YAML text (one document) into a node; syntax errors become ConfigError as above.
YAML::Node load_yaml(const std::string& text, const std::string& origin, const std::string& what, bool in_file);

}  // namespace rnntrain::spec

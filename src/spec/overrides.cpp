// Command-line overrides, "key.path=value": applied to the YAML tree before typing, so overridden
// values get the same checks as the file's. Not the typing itself (parse_*.cpp).
#include <fmt/format.h>

#include <charconv>

#include "core/error.h"
#include "spec/sections.h"

namespace rnntrain::spec {

namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// "model.layers[1].units" and "model.layers.1.units" both split into model, layers, 1, units.
std::vector<std::string> split_path(std::string key) {
  for (char& c : key)
    if (c == '[') c = '.';
  std::erase(key, ']');
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = key.find('.', start);
    parts.push_back(key.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

// Keys whose value may be a plain name or a map with `type`: a path through `optimizer: adam`
// turns it into {type: adam} first, so train.optimizer.learning_rate=3e-4 works either way.
bool typed_slot(const std::string& key) {
  return key == "optimizer" || key == "loss" || key == "schedule" ||
         (key.size() > 12 && key.compare(key.size() - 12, 12, "_initializer") == 0);
}

}  // namespace

void apply_override(YAML::Node& root, const std::string& text, Context& ctx) {
  const std::string where = fmt::format("override '{}'", text);
  auto fail = [&](const std::string& msg) -> void { throw ConfigError(fmt::format("{}: {}", where, msg)); };

  const size_t eq = text.find('=');
  if (eq == std::string::npos) fail("expected key.path=value, e.g. train.epochs=3 or model.layers.1.units=64");
  const std::string key = trim(text.substr(0, eq));
  if (key.empty()) fail("the key path before '=' is empty; expected e.g. train.epochs=3");
  const std::vector<std::string> parts = split_path(key);
  for (const std::string& p : parts)
    if (p.empty()) fail(fmt::format("the key path '{}' has an empty part; write it like model.layers.1.units", key));
  YAML::Node value = load_yaml(text.substr(eq + 1), where, "the value", false);

  if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) fail("the config file is not a map of sections, so nothing can be set in it");

  YAML::Node cur = root;
  std::string path, created;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    const bool last = i + 1 == parts.size();
    if (cur.IsSequence()) {
      size_t idx = 0;
      const auto r = std::from_chars(part.data(), part.data() + part.size(), idx);
      if (r.ec != std::errc() || r.ptr != part.data() + part.size())
        fail(fmt::format("{} is a list; select an entry by its index (0 to {}), not '{}'", path, cur.size() - 1, part));
      if (idx >= cur.size())
        fail(fmt::format("index {} is out of range: {} has {} entries (0 to {})", idx, path, cur.size(),
                         static_cast<int64_t>(cur.size()) - 1));
      path += fmt::format("[{}]", idx);
      if (last) {
        cur[idx] = value;
      } else {
        YAML::Node next = cur[idx];
        cur.reset(next);
      }
      continue;
    }
    if (!cur.IsMap())
      fail(fmt::format("{} is a single value ({}), so it has no '{}' inside it", path,
                       cur.IsScalar() ? cur.Scalar() : "null", part));
    path += (path.empty() ? "" : ".") + part;
    if (last) {
      cur[part] = value;
      break;
    }
    const YAML::Node& ccur = cur;
    const YAML::Node child = ccur[part];
    if (!child.IsDefined() || child.IsNull()) {
      cur[part] = YAML::Node(YAML::NodeType::Map);
      if (created.empty()) created = path;
    } else if (child.IsScalar() && typed_slot(part)) {
      YAML::Node typed(YAML::NodeType::Map);
      typed["type"] = child.Scalar();
      cur[part] = typed;
    } else if (child.IsScalar()) {
      fail(fmt::format("{} is a single value ({}), so it has no '{}' inside it", path, child.Scalar(), parts[i + 1]));
    }
    YAML::Node next = cur[part];
    cur.reset(next);
  }
  ctx.owners.push_back({created.empty() ? path : created, text});
}

}  // namespace rnntrain::spec

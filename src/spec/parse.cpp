// load_config / parse_config: YAML text -> overrides -> typed Config -> shape check. The sections are
// typed in parse_model.cpp, parse_data.cpp and parse_train.cpp; emit_config is in emit.cpp.
#include "spec/parse.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "core/files.h"
#include "spec/sections.h"
#include "spec/shapes.h"

namespace rnntrain {

namespace {

Config type_config(const spec::Value& root, const std::string& filename) {
  if (root.is_null())
    throw ConfigError(fmt::format("{}: the config is empty; it needs at least a model: section with layers", filename));
  root.require_map(" of sections (model, data, train, plan, device, output)");
  constexpr const char* keys[] = {"model", "data", "train", "plan", "device", "output"};
  root.check_keys(keys, "the config");
  Config c;
  c.path = filename;
  c.model = spec::read_model(root.need("model", "; every config needs model: {layers: [...]}"));
  if (auto x = root.get("data")) c.data = spec::read_data(*x);
  if (auto x = root.get("train")) c.train = spec::read_train(*x);
  if (auto x = root.get("plan")) {
    x->require_map(" like {fuse: auto}");
    constexpr const char* plan_keys[] = {"fuse", "precision", "algo", "autotune", "cache", "graphs", "cpu"};
    x->check_keys(plan_keys, "plan");
    if (auto f = x->get("fuse")) c.plan.fuse = spec::read_enum(*f, spec::fuse_modes(), "fuse mode");
    if (auto f = x->get("precision")) c.plan.precision = spec::read_enum(*f, spec::precisions(), "precision");
    if (auto f = x->get("algo")) c.plan.algo = spec::read_enum(*f, spec::rnn_algos(), "RNN algorithm");
    if (auto f = x->get("autotune")) c.plan.autotune = f->as_bool();
    if (auto f = x->get("cache")) c.plan.cache = f->as_string();
    if (auto f = x->get("graphs")) c.plan.graphs = f->as_bool();
    if (auto f = x->get("cpu")) c.plan.cpu = spec::read_enum(*f, spec::cpu_rnns(), "CPU path");
    for (const char* k : {"precision", "algo"}) {
      auto f = x->get(k);
      if (f && f->as_string() == "auto" && !c.plan.autotune)
        f->fail("auto means measured: set plan.autotune: true, or name one");
    }
  }
  if (auto x = root.get("device")) c.device = spec::read_enum(*x, spec::devices(), "device");
  if (auto x = root.get("output")) {
    x->require_map(" like {dir: runs/quickstart}");
    constexpr const char* output_keys[] = {"dir", "tensorboard"};
    x->check_keys(output_keys, "output");
    if (auto d = x->get("dir")) c.output.dir = d->as_string();
    if (auto t = x->get("tensorboard")) {
      const std::string s = t->as_string();
      if (s == "epoch") c.output.tensorboard = 0;
      else if (s == "off" || s == "false") c.output.tensorboard = -1;
      else if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos) c.output.tensorboard = t->as_int(1, int64_t{1} << 40);
      else t->fail("must be epoch (event files per epoch), a number of steps N (also every N steps) or off");
    }
  }
  return c;
}

}  // namespace

Config parse_config(const std::string& yaml_text, const std::string& filename,
                    const std::vector<std::string>& overrides) {
  spec::Context ctx{filename, {}};
  YAML::Node root = spec::load_yaml(yaml_text, filename, "the config", true);
  for (const std::string& o : overrides) {
    try {
      spec::apply_override(root, o, ctx);
    } catch (const YAML::Exception& e) {  // a safety net: apply_override checks node types first
      throw ConfigError(fmt::format("override '{}': cannot apply it: {}", o, e.msg));
    }
  }
  Config c;
  try {
    c = type_config(spec::Value(&ctx, root, ""), filename);
  } catch (const YAML::Exception& e) {  // a safety net: the readers check types before converting
    throw ConfigError(fmt::format("{}:{}:{}: cannot read the config: {}", filename, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  try {
    infer_shapes(c.model);
  } catch (const ConfigError& e) {  // name the key path too: "q.yaml:5:7: model.layers[2]: layer 'lstm_1' ..."
    const std::string msg = e.what();
    for (size_t i = 0; i < c.model.layers.size(); ++i) {
      const std::string where = c.model.layers[i].loc.str();
      if (msg.rfind(where + ": layer '" + c.model.layers[i].name + "'", 0) == 0)
        throw ConfigError(fmt::format("{}: model.layers[{}]: {}", where, i, msg.substr(where.size() + 2)));
    }
    throw;
  }
  return c;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError(fmt::format("{}: is a directory; give the config file (a .yaml) instead", path));
  if (const std::string kind = special_file(path); !kind.empty())  // a FIFO would block the open forever
    throw ConfigError(fmt::format("{}: is {}, not a config file; save the config to a file and give its path", path,
                                  kind));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("{}: cannot open the config file: {}", path, std::strerror(errno)));
  // Read at most a little more than the size limit that load_yaml enforces (no endless /dev/zero).
  std::string text;
  std::vector<char> buf(1 << 16);
  while (text.size() <= (8u << 20) && (in.read(buf.data(), buf.size()) || in.gcount() > 0))
    text.append(buf.data(), static_cast<size_t>(in.gcount()));
  if (in.bad()) throw ConfigError(fmt::format("{}: cannot read the config file: {}", path, std::strerror(errno)));
  return parse_config(text, path, overrides);
}

}  // namespace rnntrain

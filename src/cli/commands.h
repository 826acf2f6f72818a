// One function per subcommand; cli.cpp parses the command line into CommandArgs and calls them.
#pragma once
#include <string>
#include <vector>

#include "spec/config.h"

namespace rnntrain {

struct CommandArgs {
  std::vector<std::string> args;  // CONFIG then KEY=VALUE overrides
  std::string resume, weights, data, output, meta;
  bool json = false, progress = true;
};

int cmd_train(const CommandArgs& a);
int cmd_eval(const CommandArgs& a);
int cmd_predict(const CommandArgs& a);
int cmd_plan(const CommandArgs& a);
int cmd_export(const CommandArgs& a);  // keras_commands.cpp
int cmd_import(const CommandArgs& a);

// Splits args into the config path and the overrides, and loads the config. With resume_dir and
// no config path, the run directory's config.yaml is used.
Config load_config_args(const std::vector<std::string>& args, const std::string& resume_dir = "");

}  // namespace rnntrain

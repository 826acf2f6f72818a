// One function per subcommand; cli.cpp parses the command line into CommandArgs and calls them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "spec/config.h"

namespace rnntrain {

class Comm;

struct CommandArgs {
  std::vector<std::string> args;  // CONFIG then KEY=VALUE overrides
  std::string resume, weights, data, targets, output, meta;
  bool json = false, progress = true;
  bool allow_nonfinite = false;  // eval, predict: use weights holding inf or NaN
  bool overwrite = false;        // train: replace the run in output.dir
  bool scaled = false;           // predict: CSV forecasts in the model's scaled units, not the data's
  Comm* world = nullptr;         // the processes of this run (mpirun's, or this one alone): read once by cli.cpp
};

int cmd_train(const CommandArgs& a);
int cmd_eval(const CommandArgs& a);
int cmd_predict(const CommandArgs& a);
int cmd_plan(const CommandArgs& a);
int cmd_export(const CommandArgs& a);  // keras_commands.cpp
int cmd_import(const CommandArgs& a);
int cmd_plot(const CommandArgs& a);    // plot.cpp

// `rnntrain bench` (bench.cpp): times training steps of the config's model on a synthetic batch.
struct BenchArgs {
  std::vector<std::string> args;  // CONFIG then KEY=VALUE overrides
  int64_t steps = 10, repeats = 5, warmup = 3;  // timed steps per repeat, repeats (>= 3), untimed steps first
  int64_t timesteps = 0;          // for an Input shape with None timesteps
  int64_t min_length = 0;         // > 0: sequence lengths uniform in [min_length, T] (masked steps)
  std::string lognormal;          // "MEDIAN,SIGMA": log-normal lengths instead, clamped to [min_length or 1, T]
  bool stream = false;            // a new batch each step, drawn from a pool (train.bucketing applies)
  bool inference = false;         // time evaluation steps (forward and loss) instead of training steps
  std::string precisions, algos;  // comma lists of candidate precisions / algorithms ("" = defaults)
  std::string cpu_paths;           // comma list of plan.cpu values to time on the CPU ("" = the configured one)
  std::string json_file;          // --json FILE
  Comm* world = nullptr;          // as CommandArgs::world
};
int cmd_bench(const BenchArgs& a);

// Splits args into the config path and the overrides, and loads the config. With resume_dir and
// no config path, the run directory's config.yaml is used.
Config load_config_args(const std::vector<std::string>& args, const std::string& resume_dir = "");
// The weights eval, predict and export read: --weights; else, when CONFIG is a run directory, its
// best.h5; else the config's model.init_from. UsageError naming the three ways when there is none.
std::string weights_to_use(const CommandArgs& a, const Config& cfg);

}  // namespace rnntrain

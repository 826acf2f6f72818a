// The command line: subcommands train, eval, predict, plan. Parses with CLI11, runs one
// subcommand, and maps errors to exit codes: 0 success, 1 runtime failure, 2 usage or config error.
#include "cli/cli.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"
#include "dist/comm.h"
#include "spec/reader.h"

namespace rnntrain {

static const char* kExamples = R"(Examples:
  rnntrain train configs/quickstart.yaml
  rnntrain train configs/quickstart.yaml train.epochs=3 model.layers.1.units=64
  rnntrain train --resume runs/quickstart train.epochs=20
  rnntrain eval configs/quickstart.yaml --weights runs/quickstart/best.h5 --json
  rnntrain predict configs/quickstart.yaml --weights runs/quickstart/best.h5 --data x.h5 -o pred.npy
  rnntrain plan configs/quickstart.yaml
  rnntrain plot runs/quickstart -o curves.png
  rnntrain bench configs/charlm.yaml --steps 10 --repeats 5 --json bench.json
Overrides (KEY.PATH=VALUE, after the config file) change any config key; see docs/config.md.)";

namespace {

// train, eval and predict: the commands that run a model on data.
void add_run_commands(CLI::App& app, CommandArgs& a) {
  auto* train = app.add_subcommand("train", "Train a model; writes a run directory (checkpoints, history)");
  train->footer("Example: rnntrain train configs/quickstart.yaml train.epochs=3\n"
                "         rnntrain train --resume runs/quickstart train.epochs=20");
  train->add_option("args", a.args, "CONFIG [KEY=VALUE ...]; the config may be left out with --resume");
  train->add_option("--resume", a.resume, "Continue the run in this directory from its last.h5");
  train->add_option("--weights", a.weights, "Start from these weights (a checkpoint or Keras .h5)");
  train->add_flag("--overwrite", a.overwrite,
                  "Replace the run already in output.dir (its checkpoints, history and config); without it such a "
                  "directory is refused");

  auto* eval = app.add_subcommand("eval", "Evaluate weights on a dataset: loss and metrics");
  eval->footer("Example: rnntrain eval configs/quickstart.yaml --weights runs/quickstart/best.h5 --json");
  eval->add_option("args", a.args, "CONFIG or RUN_DIR [KEY=VALUE ...]")->required();
  eval->add_option("--weights", a.weights, "Weights to evaluate (a checkpoint or Keras .h5); default: a run directory's best.h5, "
                    "else model.init_from");
  eval->add_option("--data", a.data, "Data file (default: data.test, else data.validation, else data.train)");
  eval->add_option("--targets", a.targets, "The targets of an .npy --data, as an .npy file");
  eval->add_option("--meta", a.meta, "The training run's data_meta.json (CSV scaling, text vocabulary); default: next to --weights");
  eval->add_flag("--scaled", a.scaled, "For a model trained on CSV data: array --data and --targets are scaled "
                 "already (default: in the data's units, scaled with the run's CSV scaling)");
  eval->add_flag("--json", a.json, "Print {\"loss\", \"metrics\", \"samples\"} as JSON on stdout");
  eval->add_flag("--allow-nonfinite", a.allow_nonfinite, "Evaluate weights that hold inf or NaN (refused otherwise)");

  auto* predict = app.add_subcommand("predict", "Write the model's predictions for a dataset");
  predict->footer("Example: rnntrain predict configs/quickstart.yaml --weights runs/quickstart/best.h5 --data x.h5 -o pred.npy");
  predict->add_option("args", a.args, "CONFIG or RUN_DIR [KEY=VALUE ...]")->required();
  predict->add_option("--weights", a.weights, "Weights (a checkpoint or Keras .h5); default: a run directory's best.h5, "
                    "else model.init_from");
  predict->add_option("--data", a.data, "Data file (default: data.test, else data.validation, else data.train)");
  predict->add_option("--meta", a.meta, "The training run's data_meta.json (CSV scaling, text vocabulary); default: next to --weights");
  predict->add_option("-o,--output", a.output, "Predictions file: .npy, .h5 or .csv")->required();
  predict->add_flag("--allow-nonfinite", a.allow_nonfinite, "Predict with weights that hold inf or NaN (refused otherwise)");
  predict->add_flag("--scaled", a.scaled, "For a model trained on CSV data: write the forecasts in the scaled units "
                    "the model works in, and take array --data (.npy/.npz/.h5) as scaled already (default: the "
                    "data's units both ways)");
}

// plan, export, import and plot: the commands about a model and its files.
void add_model_commands(CLI::App& app, CommandArgs& a) {
  auto* plan = app.add_subcommand("plan", "Print the model's layers, output shapes and parameter counts");
  plan->footer("Example: rnntrain plan configs/quickstart.yaml model.layers.1.units=128");
  plan->add_option("args", a.args, "CONFIG [KEY=VALUE ...]")->required();

  auto* exp = app.add_subcommand("export", "Write a config's model and weights as a Keras file (.h5, .keras, .weights.h5)");
  exp->footer("Example: rnntrain export configs/quickstart.yaml --weights runs/quickstart/best.h5 -o model.keras");
  exp->add_option("args", a.args, "CONFIG or RUN_DIR [KEY=VALUE ...]")->required();
  exp->add_option("--weights", a.weights, "Weights to export (a checkpoint or any Keras file); default: a run directory's best.h5, "
                    "else model.init_from");
  exp->add_option("-o,--output", a.output, "Keras file: .h5 (legacy full model), .keras or .weights.h5")->required();
  exp->add_option("--meta", a.meta, "The training run's data_meta.json, whose CSV scaling is written beside the export "
                  "as NAME.scaling.json; default: next to --weights");

  auto* imp = app.add_subcommand("import", "Turn a Keras model (.h5 or .keras) into a config plus a weights file");
  imp->footer("Example: rnntrain import model.keras -o model.yaml   # writes model.yaml and model_weights.h5");
  imp->add_option("args", a.args, "KERAS_FILE (.h5 full model or .keras)")->required();
  imp->add_option("-o,--output", a.output, "Config to write (default: the Keras file's name with .yaml)");

  auto* plot = app.add_subcommand("plot", "Draw a run's loss, metric and learning-rate curves (SVG or PNG)");
  plot->footer("Example: rnntrain plot runs/quickstart -o curves.png   # default: RUN_DIR/curves.svg");
  plot->add_option("args", a.args, "RUN_DIR (the run directory of `train`)")->required();
  plot->add_option("-o,--output", a.output, "Picture to write: .svg or .png (default RUN_DIR/curves.svg)");
}

void add_bench_command(CLI::App& app, BenchArgs& ba) {
  auto* bench = app.add_subcommand("bench", "Time training steps (forward, loss, backward, optimizer) on a synthetic batch");
  bench->footer("Example: rnntrain bench configs/charlm.yaml --steps 10 --repeats 5 --json bench.json\n"
                "         rnntrain bench configs/tokens.yaml --timesteps 50 train.batch_size=128");
  bench->add_option("args", ba.args, "CONFIG [KEY=VALUE ...]")->required();
  bench->add_option("--steps", ba.steps, "Timed training steps per repeat")->capture_default_str();
  bench->add_option("--repeats", ba.repeats, "Repeats; the median ms/step is reported (at least 3)")->capture_default_str();
  bench->add_option("--warmup", ba.warmup, "Untimed training steps before the first repeat")->capture_default_str();
  bench->add_option("--timesteps", ba.timesteps, "Timesteps of the synthetic batch when the Input shape has None");
  bench->add_option("--min-length", ba.min_length,
                    "Give the batch sequence lengths uniform in [N, timesteps] (padded, masked steps)");
  bench->add_option("--lognormal", ba.lognormal,
                    "MEDIAN,SIGMA: log-normal sequence lengths instead, clamped to [--min-length or 1, timesteps]");
  bench->add_flag("--stream", ba.stream,
                  "A new batch every step, from a pool of 32 batches' worth of sequences with fresh lengths, batched "
                  "as training would (train.bucketing applies); needs --min-length or --lognormal");
  bench->add_flag("--inference", ba.inference,
                  "Time evaluation steps (forward and loss, each read back, as eval and predict run them) instead "
                  "of training steps");
  bench->add_option("--precision", ba.precisions, "Candidates' precisions, comma-separated (fp32,tf32,fp16,bf16; the CPU times fp32 and bf16, bf16 alone when only bf16 is given)");
  bench->add_option("--cpu", ba.cpu_paths,
                    "On the CPU, the plan.cpu paths to time, comma-separated (onednn,reference,own,auto; default: the configured one)");
  bench->add_option("--algo", ba.algos,
                    "GPU candidates' RNN algorithms, comma-separated (standard, persist_static, persist_dynamic, "
                    "wavefront; default: standard, plus persist_static and wavefront for fp16/bf16)");
  bench->add_option("--json", ba.json_file, "Also write the results as JSON to this file");
}

// CLI11 only says that a subcommand is required; name the word it did not know, and the closest
// command (false). Every command's help lists the options that go before or after it.
bool known_command(CLI::App& app, int argc, char** argv) {
  std::string names;
  std::vector<std::string> commands;
  for (CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
    commands.push_back(sub->get_name());
    sub->footer(sub->get_footer() + "\nGlobal options (before or after the command): -v,--verbose debug logging; "
                "-q,--quiet only warnings and errors");
  }
  const std::string first = argc > 1 ? argv[1] : "";
  const bool known = std::find(commands.begin(), commands.end(), first) != commands.end();
  if (!first.empty() && first[0] != '-' && !known) {
    // Keras' words for two of them, else the nearest spelling.
    const std::string near = first == "fit" ? "train" : first == "evaluate" ? "eval" : spec::closest(first, commands);
    std::fprintf(stderr, "'%s' is not a command of rnntrain%s; the commands are %s (rnntrain --help)\n", first.c_str(),
                 near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near).c_str(), names.c_str());
    return false;
  }
  return true;
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"rnntrain: train stacked recurrent networks (LSTM, GRU, SimpleRNN) from a YAML config"};
  app.footer(kExamples);
  app.set_version_flag("--version", std::string("rnntrain ") + RNNTRAIN_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // -v and -q also after the subcommand
  CommandArgs a;
  bool verbose = false, quiet = false;
  app.add_flag("-v,--verbose", verbose, "Debug logging");
  app.add_flag("-q,--quiet", quiet, "Only warnings and errors on stderr (no progress)");

  add_run_commands(app, a);
  add_model_commands(app, a);
  BenchArgs ba;
  add_bench_command(app, ba);
  if (!known_command(app, argc, argv)) return 2;
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  set_log_level(verbose ? LogLevel::Debug : quiet ? LogLevel::Warn : LogLevel::Info);
  a.progress = !quiet;

  // Under mpirun a failing rank ends the whole run (the others would wait in the next collective);
  // only rank 0 logs progress.
  int rc = 2;
  bool distributed = false;
  try {
    Comm& comm = Comm::world();
    a.world = ba.world = &comm;
    distributed = comm.distributed();
    if (comm.distributed() && !comm.root()) set_log_level(verbose ? LogLevel::Debug : LogLevel::Warn);
    if (app.got_subcommand("train")) {
      if (comm.distributed()) log_info("data-parallel training: {}", comm.describe());
      return cmd_train(a);
    }
    if (app.got_subcommand("eval")) return cmd_eval(a);
    if (app.got_subcommand("predict")) return cmd_predict(a);
    if (app.got_subcommand("plan")) return cmd_plan(a);
    if (app.got_subcommand("export")) return cmd_export(a);
    if (app.got_subcommand("import")) return cmd_import(a);
    if (app.got_subcommand("plot")) return cmd_plot(a);
    if (app.got_subcommand("bench")) return cmd_bench(ba);
  } catch (const UsageError& e) {  // ConfigError too
    log_error("{}", e.what());
    rc = 2;
  } catch (const std::exception& e) {
    log_error("{}", e.what());
    rc = 1;
  }
  if (distributed) {
    log_error("{}: ending every rank of the run", Comm::world().describe());
    Comm::world().abort(rc);
  }
  return rc;
}

}  // namespace rnntrain

// The command line: parses arguments with CLI11, runs one subcommand, maps errors to exit codes
// (0 success, 1 runtime failure, 2 usage or config error).
#pragma once

namespace rnntrain {
int run_cli(int argc, char** argv);
}

// Placeholder until the subcommands land.
#include "cli/cli.h"
namespace rnntrain {
int run_cli(int, char**) { return 0; }
}

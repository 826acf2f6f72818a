// rnntrain's entry point: everything happens in cli/.
#include "cli/cli.h"

int main(int argc, char** argv) { return rnntrain::run_cli(argc, argv); }

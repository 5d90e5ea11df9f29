// The `ichido` executable: the command line, linked with the server for `ichido serve`.
#include "cli/app.h"
#include "server/config.h"

int main(int argc, char** argv) {
  return ichido::cli::run_main(argc, argv, {.serve = &ichido::server::run_server});
}

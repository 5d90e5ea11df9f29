// `ichido serve`: runs the server in this process. The flags fill a server::ServeConfig, one flag
// per field, and the action hands it to `serve` (server::run_server in the real binary; tests
// pass a fake, so this file does not depend on the server library).
#pragma once

#include <functional>

#include "cli/command.h"
#include "server/config.h"

namespace ichido::cli {

using ServeFunction = std::function<int(const server::ServeConfig&)>;

void add_serve_command(CommandTree& tree, ServeFunction serve);

}  // namespace ichido::cli

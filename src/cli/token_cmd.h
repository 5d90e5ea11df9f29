// `ichido token create|list|revoke --data DIR`: token administration on a data directory (works
// while a server runs on it; the server picks changes up within a second). The admin API
// (POST/GET/DELETE /v1/admin/tokens) does the same over HTTP.
#pragma once

#include "cli/command.h"

namespace ichido::cli {

void add_token_commands(CommandTree& tree);

}  // namespace ichido::cli

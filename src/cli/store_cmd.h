// `ichido check|backup|restore --data DIR`: the embedded store's operator tools
// (store/sqlite/maintenance.h). They work on the directory, not through a server: check and
// backup while a server runs on it, restore only while none does.
#pragma once

#include "cli/command.h"

namespace ichido::cli {

void add_store_commands(CommandTree& tree);

}  // namespace ichido::cli

// The configuration file of `ichido serve --config FILE`: a small subset of TOML.
//
//   # comment                       blank lines and comments are ignored
//   [serve]                         optional; no other section exists
//   listen = "0.0.0.0:7878"         a key is a `serve` flag without its dashes (listen, data,
//   data = '/var/lib/ichido'        tls-cert, once-retention…; tls_cert also works); the value is
//   once-retention = "90d"          a "string" (\" and \\ escapes), a 'literal string', or a bare
//   max-connections = 20000         word or number; flags take true or false
//   metrics-open = true             # a comment may follow a value
//
// A flag given on the command line wins over the file. An unknown key, a key given twice, a
// malformed line or a value a flag refuses is an error naming the file, the line and the key.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ichido/result.h"

namespace CLI {
class App;
}

namespace ichido::cli {

struct ConfigEntry {
  std::string key;    // normalized: '_' -> '-'
  std::string value;  // unquoted
  int line = 0;       // 1-based
};

// Parses the text of a configuration file (`file` names it in errors). Errors: invalid_request
// with "FILE:LINE: what is wrong".
Result<std::vector<ConfigEntry>> parse_config(std::string_view text, std::string_view file);

// Reads FILE and applies its entries to the options of `serve` that the command line left
// unset. Throws CLI::ValidationError (a usage error, exit 2) naming file, line and key.
void apply_config_file(CLI::App& serve, const std::string& file);

}  // namespace ichido::cli

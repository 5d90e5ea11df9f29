#include "cli/serve_config.h"

#include <CLI/CLI.hpp>
#include <fstream>
#include <set>
#include <sstream>

namespace ichido::cli {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// After a value: only blanks or a comment may follow.
bool only_comment(std::string_view rest) {
  rest = trim(rest);
  return rest.empty() || rest.front() == '#';
}

}  // namespace

Result<std::vector<ConfigEntry>> parse_config(std::string_view text, std::string_view file) {
  std::vector<ConfigEntry> out;
  std::set<std::string> seen;
  int line_no = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = trim(text.substr(pos, end - pos));
    pos = end + 1;
    ++line_no;
    const auto fail = [&](const std::string& what) {
      return Error(errc::invalid_request,
                   std::string(file) + ":" + std::to_string(line_no) + ": " + what);
    };
    if (line.empty() || line.front() == '#') {
      if (end == text.size()) break;
      continue;
    }
    if (line.front() == '[') {
      const auto close = line.find(']');
      if (close == std::string_view::npos || !only_comment(line.substr(close + 1))) {
        return fail("a section header looks like [serve]");
      }
      if (trim(line.substr(1, close - 1)) != "serve") {
        return fail("unknown section [" + std::string(line.substr(1, close - 1)) +
                    "]; the only section is [serve]");
      }
      continue;
    }
    const auto eq = line.find('=');
    if (eq == std::string_view::npos) return fail("expected key = value");
    std::string key(trim(line.substr(0, eq)));
    if (key.empty()) return fail("a key is missing before '='");
    for (char& c : key) {
      if (c == '_') c = '-';
      const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
      if (!ok) return fail("'" + key + "' is not a key (lower-case letters, digits and '-')");
    }
    std::string_view raw = trim(line.substr(eq + 1));
    std::string value;
    if (raw.empty()) return fail("the value of '" + key + "' is missing");
    if (raw.front() == '"') {
      std::size_t i = 1;
      bool closed = false;
      for (; i < raw.size(); ++i) {
        const char c = raw[i];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c == '\\') {
          if (i + 1 >= raw.size()) break;
          const char n = raw[++i];
          if (n == '"' || n == '\\') {
            value += n;
          } else if (n == 't') {
            value += '\t';
          } else {
            return fail("unknown escape \\" + std::string(1, n) + " in the value of '" + key +
                        "' (use \\\" or \\\\, or a 'literal string')");
          }
          continue;
        }
        value += c;
      }
      if (!closed) return fail("the string value of '" + key + "' has no closing \"");
      if (!only_comment(raw.substr(i + 1)))
        return fail("unexpected text after the value of '" + key + "'");
    } else if (raw.front() == '\'') {
      const auto close = raw.find('\'', 1);
      if (close == std::string_view::npos) {
        return fail("the string value of '" + key + "' has no closing '");
      }
      value = std::string(raw.substr(1, close - 1));
      if (!only_comment(raw.substr(close + 1)))
        return fail("unexpected text after the value of '" + key + "'");
    } else {
      const auto hash = raw.find('#');
      value = std::string(trim(raw.substr(0, hash)));
      if (value.find_first_of(" \t") != std::string::npos) {
        return fail("the value of '" + key + "' has a space; put it in \"quotes\"");
      }
    }
    if (!seen.insert(key).second) return fail("'" + key + "' is given twice");
    out.push_back({key, std::move(value), line_no});
    if (end == text.size()) break;
  }
  return out;
}

void apply_config_file(CLI::App& serve, const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw CLI::ValidationError("--config", "cannot read the configuration file " + file);
  std::stringstream ss;
  ss << in.rdbuf();
  auto entries = parse_config(ss.str(), file);
  if (!entries.ok()) throw CLI::ValidationError("--config", entries.error().message);
  for (const auto& e : *entries) {
    const std::string where = file + ":" + std::to_string(e.line) + ": ";
    CLI::Option* opt =
        e.key == "config" || e.key == "help" ? nullptr : serve.get_option_no_throw("--" + e.key);
    if (!opt) {
      throw CLI::ValidationError("--config", where + "unknown key '" + e.key +
                                                 "' (the keys are the flags of `ichido serve "
                                                 "--help` without their dashes)");
    }
    if (opt->count() > 0) continue;  // the command line wins
    try {
      if (opt->get_expected_min() == 0) {  // a flag
        if (e.value != "true" && e.value != "false") {
          throw CLI::ValidationError(e.key, "'" + e.value + "' is not true or false");
        }
        if (e.value == "false") continue;
        opt->add_result(std::string("true"));
      } else {
        opt->add_result(e.value);
      }
      opt->run_callback();
    } catch (const CLI::Error& err) {
      throw CLI::ValidationError("--config", where + "'" + e.key + "': " + err.what());
    }
  }
}

}  // namespace ichido::cli

#include "cli/command.h"

#include <CLI/CLI.hpp>
#include <boost/json/parse.hpp>
#include <cstdlib>
#include <ostream>
#include <utility>

#include "cli/output.h"
#include "cli/retry.h"

namespace ichido::cli {
namespace {

namespace json = boost::json;

std::string env_or(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::string(v) : std::move(fallback);
}

std::string example_footer(const std::string& example) {
  return example.empty() ? std::string() : "\nExample:\n  " + example + "\n";
}

}  // namespace

ConnectionOptions default_connection_options() {
  ConnectionOptions c;
  c.url = env_or("ICHIDO_URL", "http://127.0.0.1:7878");
  c.ns = env_or("ICHIDO_NS", "default");
  c.cacert = env_or("ICHIDO_CACERT", "");
  return c;
}

ClientOptions client_options(const ConnectionOptions& c) {
  ClientOptions o;
  if (!c.cacert.empty()) o.cacert = c.cacert;
  return o;
}

std::string shell_quote(std::string_view text) {
  const bool plain = !text.empty() && text.find_first_not_of(
                                          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                          "0123456789._/:@%+=,-") == std::string_view::npos;
  if (plain) return std::string(text);
  std::string out = "'";
  for (char ch : text) {
    if (ch == '\'') {
      out += "'\\''";
    } else {
      out += ch;
    }
  }
  return out + "'";
}

std::string ns_hint(std::string_view ns) { return " --ns " + shell_quote(ns); }

CLI::App* CommandTree::add_group(CLI::App& parent, std::string name, std::string description,
                                 std::string example) {
  CLI::App* group = parent.add_subcommand(std::move(name), std::move(description));
  group->require_subcommand(1);
  group->footer(example_footer(example));
  return group;
}

CLI::App* CommandTree::add_http_command(CLI::App& parent, std::string name, std::string description,
                                        std::string example, std::function<HttpCall()> make_call) {
  CLI::App* cmd = parent.add_subcommand(std::move(name), std::move(description));
  cmd->footer(example_footer(example));
  add_connection_options(*cmd);
  Plan& plan = plan_;
  cmd->callback([&plan, make_call = std::move(make_call)] { plan.http = make_call(); });
  return cmd;
}

CLI::App* CommandTree::add_local_command(CLI::App& parent, std::string name,
                                         std::string description, std::string example,
                                         std::function<int()> action) {
  CLI::App* cmd = parent.add_subcommand(std::move(name), std::move(description));
  cmd->footer(example_footer(example));
  Plan& plan = plan_;
  cmd->callback([&plan, action = std::move(action)] { plan.local = action; });
  return cmd;
}

void CommandTree::add_connection_options(CLI::App& app) {
  const CLI::Validator url_check(
      [](std::string& text) {
        BaseUrlResult r = parse_base_url(text);
        return r.ok() ? std::string() : r.error;
      },
      "URL");
  app.add_option("--url", connection_.url,
                 "Server base URL, http[s]://HOST:PORT[/prefix] (default: $ICHIDO_URL, else "
                 "http://127.0.0.1:7878)")
      ->check(url_check)
      ->capture_default_str()
      ->group("Connection");
  app.add_option("--cacert", connection_.cacert,
                 "https: trust the CAs in this PEM file instead of the system's (default: "
                 "$ICHIDO_CACERT)")
      ->check(CLI::ExistingFile)
      ->type_name("FILE")
      ->group("Connection");
  app.add_option("--ns", connection_.ns, "Namespace (default: $ICHIDO_NS, else default)")
      ->capture_default_str()
      ->group("Connection");
  app.add_flag("--json", connection_.json,
               "Print the server's JSON answer verbatim on one line (errors too, on stdout)")
      ->group("Connection");
}

std::string ns_path(std::string_view ns) { return "/v1/ns/" + percent_encode(ns); }

int execute(const HttpCall& call, bool json_mode, const Transport& transport, Output& o,
            const std::function<void(std::chrono::milliseconds)>& sleep) {
  HttpResult result =
      call.retry ? send_with_retry(transport, call.request, RetryPolicy{}, o.err,
                                   sleep ? Sleeper(sleep) : Sleeper(real_sleep), call.adjust)
                 : transport(call.request);
  if (!result.ok()) {
    print_error("unreachable", result.error, o.err);
    return kExitUnreachable;
  }
  const HttpResponse& res = *result.response;
  json::value body;  // null when empty or not JSON
  bool body_is_json = true;
  if (!trim_trailing_space(res.body).empty()) {
    boost::system::error_code ec;
    body = json::parse(res.body, ec);
    if (ec) {
      body = nullptr;
      body_is_json = false;
    }
  }
  if (json_mode) {
    const std::string_view line = trim_trailing_space(res.body);
    if (!line.empty()) o.out << line << '\n';
  }
  if (res.status < 200 || res.status > 299) {
    print_error_answer(res.status, res.body, body, o.err, call.explain);
    return kExitServerError;
  }
  const int code = call.exit_code ? call.exit_code(body) : kExitOk;
  if (json_mode) return code;
  if (!body_is_json) {
    print_error("bad_answer",
                "the server answered HTTP " + std::to_string(res.status) +
                    " with a body that is not JSON; is --url an ichido server?",
                o.err);
    return kExitServerError;
  }
  if (call.render) call.render(res, body, o);
  return code;
}

}  // namespace ichido::cli

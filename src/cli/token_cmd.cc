#include "cli/token_cmd.h"

#include <CLI/CLI.hpp>
#include <boost/json.hpp>
#include <iostream>
#include <memory>

#include "cli/duration.h"
#include "cli/output.h"
#include "core/auth.h"
#include "store/sqlite/token_admin.h"

namespace ichido::cli {
namespace {

namespace json = boost::json;

json::value opt_time(const std::optional<TimeMs>& t) {
  return t ? json::value(format_rfc3339(*t)) : json::value(nullptr);
}

json::object token_json(const core::TokenInfo& t) {
  return json::object{{"id", t.id},
                      {"role", core::to_string(t.role)},
                      {"ns", t.scope},
                      {"label", t.label},
                      {"created_at", format_rfc3339(t.created_at)},
                      {"expires_at", opt_time(t.expires_at)},
                      {"revoked_at", opt_time(t.revoked_at)}};
}

int fail(const Error& e) {
  std::cerr << "error: " << to_string(e.code) << ": " << e.message << "\n";
  return e.code == errc::invalid_request ? kExitUsage : kExitServerError;
}

struct TokenOptions {
  std::string data = "./ichido-data";
  std::string ns;
  std::string role;
  std::string expires;
  std::string label;
  std::string id;
  bool json = false;
  bool init = false;
};

}  // namespace

void add_token_commands(CommandTree& tree) {
  CLI::App* group =
      tree.add_group(tree.root(), "token", "API tokens on a data directory (create, list, revoke)",
                     "ichido token create --data ./ichido-data --ns shop --role writer");
  auto o = std::make_shared<TokenOptions>();
  const ConnectionOptions* conn = &tree.connection();  // read after parsing

  CLI::App* create = tree.add_local_command(
      *group, "create",
      "Create a token and print it (only the token, on stdout; it is shown this once)",
      "export ICHIDO_TOKEN=$(ichido token create --data ./ichido-data --ns shop --role writer)",
      [o]() -> int {
        auto role = core::parse_role(o->role);
        if (!role.ok()) return fail(role.error());
        std::optional<TimeMs> expires_at;
        const TimeMs now = SystemClock::instance().now_ms();
        if (!o->expires.empty()) {
          auto ms = parse_duration_ms(o->expires);
          if (!ms) {
            return fail(
                invalid_field("expires", "--expires wants a duration such as 90d, 12h or 30m."));
          }
          expires_at = now + *ms;
        }
        auto made = store::sqlite::create_token_in_dir(o->data, *role, o->ns, o->label, expires_at,
                                                       now, o->init);
        if (!made.ok()) return fail(made.error());
        std::cout << made->secret << "\n";
        return kExitOk;
      });
  create->add_option("--data", o->data, "Data directory of the server")->capture_default_str();
  create->add_option("--ns", o->ns, "Namespace the token may use, or '*' for all (and admin calls)")
      ->required();
  create->add_option("--role", o->role, "reader (GET only), writer (all but admin) or admin")
      ->required();
  create->add_option("--expires", o->expires, "Lifetime, e.g. 90d, 12h (default: never expires)");
  create->add_option("--label", o->label, "Free text shown in lists, e.g. who uses it");
  create->add_flag("--init", o->init,
                   "Create a new store in --data when there is none (without it, a directory "
                   "without a store is refused, so a typo cannot create one)");

  CLI::App* list = tree.add_local_command(
      *group, "list", "List tokens (ids, roles, scopes, expiry; never the secrets)",
      "ichido token list --data ./ichido-data", [o, conn]() -> int {
        auto tokens = store::sqlite::list_tokens_in_dir(o->data);
        if (!tokens.ok()) return fail(tokens.error());
        if (o->json || conn->json) {
          json::array items;
          for (const auto& t : *tokens) items.push_back(token_json(t));
          std::cout << json::serialize(json::object{{"items", std::move(items)}}) << "\n";
          return kExitOk;
        }
        std::cout << "ID                ROLE    NS            EXPIRES                   REVOKED    "
                     "               LABEL\n";
        for (const auto& t : *tokens) {
          char line[512];
          std::snprintf(line, sizeof line, "%-17s %-7s %-13s %-25s %-25s %s\n", t.id.c_str(),
                        std::string(core::to_string(t.role)).c_str(), t.scope.c_str(),
                        t.expires_at ? format_rfc3339(*t.expires_at).c_str() : "-",
                        t.revoked_at ? format_rfc3339(*t.revoked_at).c_str() : "-",
                        t.label.c_str());
          std::cout << line;
        }
        return kExitOk;
      });
  list->add_option("--data", o->data, "Data directory of the server")->capture_default_str();
  list->add_flag("--json", o->json, "Print JSON");

  CLI::App* revoke = tree.add_local_command(
      *group, "revoke", "Revoke a token by id (effective within a second on a running server)",
      "ichido token revoke 3f9a0c1d2e4b5a6f --data ./ichido-data", [o]() -> int {
        auto t =
            store::sqlite::revoke_token_in_dir(o->data, o->id, SystemClock::instance().now_ms());
        if (!t.ok()) return fail(t.error());
        std::cout << "revoked " << t->id << "\n";
        return kExitOk;
      });
  revoke->add_option("id", o->id, "The token's id (from `ichido token list`)")->required();
  revoke->add_option("--data", o->data, "Data directory of the server")->capture_default_str();
}

}  // namespace ichido::cli

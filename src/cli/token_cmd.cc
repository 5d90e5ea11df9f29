#include "cli/token_cmd.h"

#include <CLI/CLI.hpp>
#include <boost/json.hpp>
#include <iostream>
#include <memory>

#include "cli/duration.h"
#include "cli/output.h"
#include "core/auth.h"
#include "store/postgres/token_admin.h"
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
  std::string store;  // PostgreSQL URL: the store of several nodes instead of --data
  std::string schema = "ichido";
  std::string ns;
  std::string role;
  std::string expires;
  std::string label;
  std::string id;
  bool json = false;
  bool init = false;
};

store::postgres::StoreAddress address(const TokenOptions& o) {
  return store::postgres::StoreAddress{o.store, o.schema};
}

// --data DIR or --store URL (the same choice as `ichido serve`), on each subcommand.
void add_location_options(CLI::App* cmd, TokenOptions* o) {
  auto* data = cmd->add_option("--data", o->data, "Data directory of the server (embedded store)")
                   ->capture_default_str();
  auto* store = cmd->add_option("--store", o->store,
                                "PostgreSQL store of the nodes instead (libpq URI or conninfo, as "
                                "given to ichido serve --store; env ICHIDO_STORE)")
                    ->envname("ICHIDO_STORE");
  data->excludes(store);
  cmd->add_option("--store-schema", o->schema, "PostgreSQL schema of ichido's tables")
      ->capture_default_str();
}

}  // namespace

void add_token_commands(CommandTree& tree) {
  CLI::App* group =
      tree.add_group(tree.root(), "token",
                     "API tokens on a data directory or PostgreSQL store (create, list, revoke)",
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
        std::optional<std::int64_t> expires_in;
        if (!o->expires.empty()) {
          auto ms = parse_duration_ms(o->expires);
          if (!ms) {
            return fail(
                invalid_field("expires", "--expires wants a duration such as 90d, 12h or 30m."));
          }
          expires_in = *ms;
        }
        if (!o->store.empty()) {
          // The database's clock decides created_at and expires_at, as on every node.
          auto made = store::postgres::create_token_in_store(address(*o), *role, o->ns, o->label,
                                                             expires_in);
          if (!made.ok()) return fail(made.error());
          std::cout << made->secret << "\n";
          return kExitOk;
        }
        const TimeMs now = SystemClock::instance().now_ms();
        std::optional<TimeMs> expires_at;
        if (expires_in) expires_at = now + *expires_in;
        auto made = store::sqlite::create_token_in_dir(o->data, *role, o->ns, o->label, expires_at,
                                                       now, o->init);
        if (!made.ok()) return fail(made.error());
        std::cout << made->secret << "\n";
        return kExitOk;
      });
  add_location_options(create, o.get());
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
        auto tokens = o->store.empty() ? store::sqlite::list_tokens_in_dir(o->data)
                                       : store::postgres::list_tokens_in_store(address(*o));
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
  add_location_options(list, o.get());
  list->add_flag("--json", o->json, "Print JSON");

  CLI::App* revoke = tree.add_local_command(
      *group, "revoke", "Revoke a token by id (effective within a second on a running server)",
      "ichido token revoke 3f9a0c1d2e4b5a6f --data ./ichido-data", [o]() -> int {
        std::vector<std::string> unconfirmed;
        auto t = o->store.empty()
                     ? store::sqlite::revoke_token_in_dir(o->data, o->id,
                                                          SystemClock::instance().now_ms())
                     : store::postgres::revoke_token_in_store(address(*o), o->id, &unconfirmed);
        if (!t.ok()) return fail(t.error());
        for (const auto& node : unconfirmed) {
          std::cerr << "ichido token revoke: warning: node " << node
                    << " did not confirm within 3 s (it has lost its database connection; it "
                       "reloads its tokens when it reconnects)\n";
        }
        std::cout << "revoked " << t->id << "\n";
        return kExitOk;
      });
  revoke->add_option("id", o->id, "The token's id (from `ichido token list`)")->required();
  add_location_options(revoke, o.get());
}

}  // namespace ichido::cli

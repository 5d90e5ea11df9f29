#include "cli/once_cmd.h"

#include <CLI/CLI.hpp>
#include <array>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <iostream>
#include <memory>
#include <ostream>

#include "cli/duration.h"
#include "cli/duration_option.h"
#include "cli/output.h"
#include "cli/retry.h"

namespace ichido::cli {
namespace {

namespace json = boost::json;

constexpr std::array<Column, 7> kOnceColumns = {{
    {"key", "KEY"},
    {"state", "STATE"},
    {"owner", "OWNER"},
    {"attempt", "ATTEMPT"},
    {"lease_expires_at", "LEASE_EXPIRES_AT"},
    {"updated_at", "UPDATED_AT"},
    {"last_error", "LAST_ERROR"},
}};

void render_fields(const HttpResponse&, const json::value& body, Output& o) {
  if (const json::object* obj = body.if_object()) {
    print_fields(*obj, o.out);
  } else {
    o.out << display(body) << '\n';
  }
}

std::string add_query(std::string target, std::string_view name, std::string_view value) {
  target += (target.find('?') == std::string::npos) ? '?' : '&';
  target += name;
  target += '=';
  target += percent_encode(value);
  return target;
}

// The CLI's words for the errors of calls on one once record.
Explainer once_explainer(std::string ns, std::string key) {
  return [ns = std::move(ns), key = std::move(key)](std::string_view code,
                                                    const json::value& details) -> std::string {
    if (code == "once_not_found") {
      return "no once record for KEY " + key + " in namespace " + ns +
             " (never begun, reset, or purged after its retention); claim it with: ichido once "
             "begin " +
             shell_quote(key) + ns_hint(ns);
    }
    if (code == "stale_token") {
      return "this --token no longer holds " + key +
             " (its lease lapsed and another run took over, or it was already completed or "
             "failed; now " +
             display_field(details, "state") +
             "); do not treat your work as recorded: see ichido once get " + shell_quote(key) +
             ns_hint(ns);
    }
    if (code == "result_mismatch") {
      return key +
             " was already completed with another --result (the stored result never "
             "changes); see it with: ichido once get " +
             shell_quote(key) + ns_hint(ns);
    }
    if (code == "fingerprint_mismatch") {
      return key +
             " was first begun with another --fingerprint: the same KEY names different "
             "content; use a new KEY for new content";
    }
    return {};
  };
}

void add_key(CLI::App& cmd, std::string& key) {
  cmd.add_option("key", key, "The item's key: any UTF-8 text of 1-512 bytes (e.g. a Message-ID)")
      ->required();
}

}  // namespace

std::string once_path(std::string_view ns) { return ns_path(ns) + "/once"; }

int once_begin_exit_code(const json::value& answer) {
  const std::string outcome = display_field(answer, "outcome");
  if (outcome == "acquired") return kExitOk;
  if (outcome == "completed") return kExitCompleted;
  if (outcome == "in_progress") return kExitTempFail;
  if (outcome == "dead") return kExitDead;
  return kExitServerError;
}

HttpCall once_begin_call(std::string_view ns, const OnceBeginArgs& a) {
  json::object body;
  body["key"] = a.key;
  if (a.owner) body["owner"] = *a.owner;
  if (a.lease_ms) body["lease_ms"] = *a.lease_ms;
  if (a.fingerprint) body["fingerprint"] = *a.fingerprint;
  if (a.wait_ms) body["wait_ms"] = *a.wait_ms;
  if (a.max_attempts) body["max_attempts"] = *a.max_attempts;
  if (!a.request_id.empty()) body["request_id"] = a.request_id;
  Request req{"POST", once_path(ns) + "/begin", json::serialize(body), {}};
  // The server may hold the answer for wait_ms: allow that on top of the usual timeout.
  if (a.wait_ms) req.read_timeout = std::chrono::milliseconds(*a.wait_ms + 30000);
  const std::string key = a.key, space = std::string(ns);
  HttpCall call{
      std::move(req), [key, space](const HttpResponse&, const json::value& answer, Output& o) {
        // stdout: the token when acquired, the stored result when completed; nothing
        // else, so that TOKEN=$(ichido once begin ...) is safe.
        const std::string outcome = display_field(answer, "outcome");
        if (outcome == "acquired") {
          o.out << display_field(answer, "token") << '\n';
          o.err << "acquired (attempt " << display_field(answer, "attempt") << ") until "
                << display_field(answer, "lease_expires_at")
                << (display_field(answer, "replayed") == "true" ? " (replayed)" : "") << '\n';
        } else if (outcome == "completed") {
          const json::object* obj = answer.if_object();
          const json::value* result = obj ? obj->if_contains("result") : nullptr;
          o.out << (result ? json::serialize(*result) : std::string("null")) << '\n';
          o.err << "already completed at " << display_field(answer, "completed_at")
                << "; its stored result is above\n";
        } else if (outcome == "in_progress") {
          o.err << "in progress elsewhere: owner " << display_field(answer, "owner")
                << ", lease until " << display_field(answer, "lease_expires_at")
                << "; try again later (or pass --wait)\n";
        } else if (outcome == "dead") {
          o.err << "dead after " << display_field(answer, "attempts")
                << " attempts (last error: " << display_field(answer, "last_error")
                << "); an admin makes it runnable again with: ichido once reset "
                << shell_quote(key) << ns_hint(space) << '\n';
        } else {
          render_fields(HttpResponse{}, answer, o);
        }
      }};
  call.exit_code = once_begin_exit_code;
  call.explain = once_explainer(std::string(ns), a.key);
  call.retry = !a.request_id.empty();
  call.adjust = shrink_wait(a.wait_ms.value_or(0));
  return call;
}

std::string once_complete_check(const OnceCompleteArgs& a) {
  if (!a.result) return {};
  boost::system::error_code ec;
  (void)json::parse(*a.result, ec);
  return ec ? "--result must be JSON (quote text as \"\\\"done\\\"\")" : std::string();
}

HttpCall once_complete_call(std::string_view ns, const OnceCompleteArgs& a) {
  json::object body;
  body["key"] = a.key;
  body["token"] = a.token;
  if (a.result) {
    boost::system::error_code ec;
    json::value v = json::parse(*a.result, ec);
    body["result"] = ec ? json::value(*a.result) : v;
  }
  HttpCall call{{"POST", once_path(ns) + "/complete", json::serialize(body), {}}, render_fields};
  call.explain = once_explainer(std::string(ns), a.key);
  call.retry = true;  // the same token and result again: 200 again
  return call;
}

HttpCall once_fail_call(std::string_view ns, const OnceFailArgs& a) {
  json::object body;
  body["key"] = a.key;
  body["token"] = a.token;
  if (a.error) body["error"] = *a.error;
  if (a.no_retry) body["retry"] = false;
  HttpCall call{{"POST", once_path(ns) + "/fail", json::serialize(body), {}}, render_fields};
  call.explain = once_explainer(std::string(ns), a.key);
  return call;
}

HttpCall once_renew_call(std::string_view ns, const OnceRenewArgs& a) {
  json::object body;
  body["key"] = a.key;
  body["token"] = a.token;
  if (a.lease_ms) body["lease_ms"] = *a.lease_ms;
  HttpCall call{{"POST", once_path(ns) + "/renew", json::serialize(body), {}}, render_fields};
  call.explain = once_explainer(std::string(ns), a.key);
  call.retry = true;
  return call;
}

HttpCall once_get_call(std::string_view ns, std::string_view key) {
  HttpCall call{{"GET", add_query(once_path(ns), "key", key), {}, {}}, render_fields};
  call.explain = once_explainer(std::string(ns), std::string(key));
  call.retry = true;
  return call;
}

HttpCall once_list_call(std::string_view ns, const OnceListArgs& a) {
  std::string target = once_path(ns);
  if (a.state) target = add_query(target, "state", *a.state);
  if (a.limit) target = add_query(target, "limit", std::to_string(*a.limit));
  if (a.after) target = add_query(target, "after", *a.after);
  HttpCall call{{"GET", std::move(target), {}, {}},
                [](const HttpResponse&, const json::value& body, Output& o) {
                  const json::object* obj = body.if_object();
                  const json::value* items = obj ? obj->if_contains("items") : nullptr;
                  if (items == nullptr || !items->is_array() || items->as_array().empty()) {
                    o.err << "(none)\n";
                    return;
                  }
                  print_table(items->as_array(), kOnceColumns, o.out);
                  const std::string next = display_field(body, "next_after");
                  if (next != "-") o.err << "more: --after " << shell_quote(next) << '\n';
                }};
  call.retry = true;
  return call;
}

HttpCall once_reset_call(std::string_view ns, std::string_view key) {
  json::object body;
  body["key"] = key;
  HttpCall call{{"POST", once_path(ns) + "/reset", json::serialize(body), {}},
                [](const HttpResponse&, const json::value& body, Output& o) {
                  o.out << "reset " << display_field(body, "key") << '\n';
                }};
  call.explain = once_explainer(std::string(ns), std::string(key));
  return call;
}

void add_once_commands(CommandTree& tree) {
  CLI::App* group = tree.add_group(
      tree.root(), "once",
      "Process each item exactly once (begin, complete, fail, renew, get, list, reset, run)",
      "ichido once run invoice-2026-0042 --lease 60s -- ./send-invoice.sh 2026-0042");
  const ConnectionOptions& conn = tree.connection();
  {
    auto a = std::make_shared<OnceBeginArgs>();
    CLI::App* cmd = tree.add_http_command(
        *group, "begin",
        "Claim KEY. Exit 0 acquired: the token on stdout (then complete or fail with it). Exit "
        "10 completed already: its stored result on stdout. Exit 75 in progress elsewhere. Exit "
        "65 dead (an admin must reset it). Details on stderr; --json prints the answer",
        "TOKEN=$(ichido once begin '<msg-1@example.com>' --owner outlook-A --lease 60s)",
        [a, &conn] {
          OnceBeginArgs args = *a;
          if (args.request_id.empty()) args.request_id = new_request_id();
          return once_begin_call(conn.ns, args);
        });
    add_key(*cmd, a->key);
    cmd->add_option("--owner", a->owner, "Who claims it (shown to others)");
    add_duration(*cmd, "--lease", a->lease_ms, "Lease, 1s..1h (server default: 60s)",
                 /*allow_zero=*/false, kLeaseMinMs, kLeaseMaxMs);
    cmd->add_option("--fingerprint", a->fingerprint, "Digest of the item's content");
    add_duration(*cmd, "--wait", a->wait_ms,
                 "Wait up to this long (<= 300s) for a holder to finish", /*allow_zero=*/false, 1,
                 kWaitMaxMs);
    cmd->add_option("--max-attempts", a->max_attempts,
                    "Attempts before dead, when the record is created (server default: 5)");
    cmd->add_option("--request-id", a->request_id,
                    "Sent with the request and on each of its retries, so that a claim whose "
                    "answer was lost is answered again (default: a new random one); pass the "
                    "same value when a script repeats a lost begin");
  }
  {
    auto a = std::make_shared<OnceCompleteArgs>();
    CLI::App* cmd = tree.add_http_command(
        *group, "complete", "Report success of the holder of --token and store --result (JSON)",
        "ichido once complete inv-42 --token 17 --result '{\"sent\":true}'",
        [a, &conn] { return once_complete_call(conn.ns, *a); });
    add_key(*cmd, a->key);
    cmd->add_option("--token", a->token, "The token begin answered")->required();
    cmd->add_option("--result", a->result, "Any JSON of at most 32 KiB (default: null)")
        ->check(CLI::Validator(
            [a](std::string& text) {
              OnceCompleteArgs probe;
              probe.result = text;
              return once_complete_check(probe);
            },
            "JSON"));
  }
  {
    auto a = std::make_shared<OnceFailArgs>();
    CLI::App* cmd = tree.add_http_command(
        *group, "fail", "Report failure: the item becomes pending (retryable) or dead",
        "ichido once fail inv-42 --token 17 --error 'smtp timeout'",
        [a, &conn] { return once_fail_call(conn.ns, *a); });
    add_key(*cmd, a->key);
    cmd->add_option("--token", a->token, "The token begin answered")->required();
    cmd->add_option("--error", a->error, "What went wrong (stored as last_error)");
    cmd->add_flag("--no-retry", a->no_retry, "Make the item dead now (do not retry)");
  }
  {
    auto a = std::make_shared<OnceRenewArgs>();
    CLI::App* cmd =
        tree.add_http_command(*group, "renew", "Extend the lease of the holder of --token",
                              "ichido once renew inv-42 --token 17 --lease 2m",
                              [a, &conn] { return once_renew_call(conn.ns, *a); });
    add_key(*cmd, a->key);
    cmd->add_option("--token", a->token, "The token begin answered")->required();
    add_duration(*cmd, "--lease", a->lease_ms, "New lease from now (server default: 60s)",
                 /*allow_zero=*/false, kLeaseMinMs, kLeaseMaxMs);
  }
  {
    auto key = std::make_shared<std::string>();
    CLI::App* cmd =
        tree.add_http_command(*group, "get", "Show the record of KEY", "ichido once get inv-42",
                              [key, &conn] { return once_get_call(conn.ns, *key); });
    add_key(*cmd, *key);
  }
  {
    auto a = std::make_shared<OnceListArgs>();
    CLI::App* cmd = tree.add_http_command(*group, "list", "List records, optionally by state",
                                          "ichido once list --state expired",
                                          [a, &conn] { return once_list_call(conn.ns, *a); });
    cmd->add_option("--state", a->state, "processing|expired|pending|completed|dead")
        ->check(CLI::IsMember({"processing", "expired", "pending", "completed", "dead"}));
    cmd->add_option("--limit", a->limit, "At most this many (1-1000, server default: 100)");
    cmd->add_option("--after", a->after, "Continue after this key (from 'more: --after')");
  }
  {
    auto key = std::make_shared<std::string>();
    CLI::App* cmd = tree.add_http_command(
        *group, "reset", "Forget KEY so it can be processed again (admin)",
        "ichido once reset inv-42", [key, &conn] { return once_reset_call(conn.ns, *key); });
    add_key(*cmd, *key);
  }
  {
    auto a = std::make_shared<OnceRunArgs>();
    CLI::App* cmd = tree.add_local_command(
        *group, "run",
        "Run CMD only if KEY was never completed: renews the lease while CMD runs, completes with "
        "{exit_code, stdout_tail} on exit 0 (retrying until the lease ends if the server cannot "
        "be reached), fails and exits with CMD's code otherwise. Exits 0 without running CMD "
        "when already completed, 75 when in progress elsewhere (after --wait), 65 when dead, "
        "126/127 when CMD cannot be run (checked before KEY is claimed)",
        "ichido once run nightly-2026-04-01 --lease 60s -- ./nightly.sh", [a, &conn] {
          Output o{std::cout, std::cerr};
          return once_run(conn, *a, o);
        });
    tree.add_connection_options(*cmd);
    add_key(*cmd, a->key);
    cmd->add_option("command", a->command, "The command and its arguments, after --")->required();
    add_duration(*cmd, "--lease", a->lease_ms, "Lease, renewed every third of it (default 60s)",
                 /*allow_zero=*/false, kLeaseMinMs, kLeaseMaxMs);
    add_duration(*cmd, "--wait", a->wait_ms,
                 "If another run holds KEY, wait up to this long (<= 300s) for it (default 0)",
                 /*allow_zero=*/true, 0, kWaitMaxMs);
    cmd->add_option("--owner", a->owner, "Owner shown to others (default: HOST:PID)");
    cmd->add_option("--fingerprint", a->fingerprint, "Digest of the item's content");
  }
}

}  // namespace ichido::cli

#include "cli/lock_cmd.h"

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <array>
#include <atomic>
#include <boost/json.hpp>
#include <cerrno>
#include <condition_variable>
#include <iostream>
#include <memory>
#include <mutex>
#include <ostream>
#include <thread>

#include "cli/child.h"
#include "cli/duration.h"
#include "cli/duration_option.h"
#include "cli/output.h"
#include "cli/retry.h"

namespace ichido::cli {
namespace {

namespace json = boost::json;
using steady = std::chrono::steady_clock;

constexpr std::array<Column, 4> kLockColumns = {{
    {"name", "NAME"},
    {"owner", "OWNER"},
    {"token", "TOKEN"},
    {"lease_expires_at", "LEASE_EXPIRES_AT"},
}};

void render_fields(const HttpResponse&, const json::value& body, Output& o) {
  if (const json::object* obj = body.if_object()) {
    print_fields(*obj, o.out);
  } else {
    o.out << display(body) << '\n';
  }
}

// The CLI's words for the errors of calls on one lock.
Explainer lock_explainer(std::string ns, std::string name) {
  return [ns = std::move(ns), name = std::move(name)](std::string_view code,
                                                      const json::value&) -> std::string {
    if (code == "not_holder") {
      return "this --token does not hold lock " + name + " in namespace " + ns +
             " (its lease lapsed and someone else took it, or it was released); acquire it "
             "again: ichido lock acquire " +
             shell_quote(name) + ns_hint(ns);
    }
    return {};
  };
}

bool is_true(const json::value& body, std::string_view field) {
  const json::object* obj = body.if_object();
  const json::value* v = obj ? obj->if_contains(field) : nullptr;
  return v != nullptr && v->is_bool() && v->get_bool();
}

void add_name(CLI::App& cmd, std::string& name) {
  cmd.add_option("name", name, "Lock name: [A-Za-z0-9._-], 1-128 bytes")->required();
}

std::string error_code_of(const HttpResult& r) {
  if (!r.ok()) return "unreachable";
  boost::system::error_code ec;
  auto v = json::parse(r.response->body, ec);
  if (ec || !v.is_object()) return "";
  const auto* e = v.as_object().if_contains("error");
  if (!e || !e->is_object()) return "";
  const auto* c = e->as_object().if_contains("code");
  return c && c->is_string() ? std::string(c->as_string()) : "";
}

std::atomic<pid_t> g_child{0};

void forward_signal(int sig) {
  const pid_t c = g_child.load();
  if (c > 0) ::kill(c, sig);
}

}  // namespace

std::string lock_path(std::string_view ns, std::string_view name) {
  std::string path = ns_path(ns) + "/locks";
  if (!name.empty()) path += "/" + percent_encode(name);
  return path;
}

HttpCall lock_acquire_call(std::string_view ns, const LockAcquireArgs& a) {
  json::object body;
  if (!a.owner.empty()) body["owner"] = a.owner;
  body["wait_ms"] = a.wait_ms;
  if (a.lease_ms) body["lease_ms"] = *a.lease_ms;
  if (!a.request_id.empty()) body["request_id"] = a.request_id;
  Request req{"POST", lock_path(ns, a.name) + "/acquire", json::serialize(body), {}};
  req.read_timeout = std::chrono::milliseconds(a.wait_ms + 30000);
  HttpCall call{std::move(req), [](const HttpResponse&, const json::value& answer, Output& o) {
                  // stdout carries the token and nothing else, so that TOKEN=$(...) is safe.
                  if (is_true(answer, "acquired")) {
                    o.out << display_field(answer, "token") << '\n';
                    o.err << "acquired until " << display_field(answer, "lease_expires_at")
                          << (is_true(answer, "replayed") ? " (replayed)" : "") << '\n';
                    return;
                  }
                  const json::object* obj = answer.if_object();
                  const json::value* h = obj ? obj->if_contains("holder") : nullptr;
                  o.err << "not acquired";
                  if (h && h->is_object()) {
                    o.err << ": held by " << display_field(*h, "owner") << " until "
                          << display_field(*h, "lease_expires_at");
                  }
                  o.err << '\n';
                }};
  call.exit_code = [](const json::value& answer) {
    return is_true(answer, "acquired") ? kExitOk : kExitTempFail;
  };
  call.explain = lock_explainer(std::string(ns), a.name);
  call.retry = !a.request_id.empty();
  call.adjust = shrink_wait(a.wait_ms);
  return call;
}

HttpCall lock_release_call(std::string_view ns, std::string_view name, std::int64_t token) {
  json::object body{{"token", token}};
  HttpCall call{{"POST", lock_path(ns, name) + "/release", json::serialize(body), {}},
                [](const HttpResponse&, const json::value&, Output& o) { o.out << "released\n"; }};
  call.explain = lock_explainer(std::string(ns), std::string(name));
  return call;
}

HttpCall lock_renew_call(std::string_view ns, std::string_view name, std::int64_t token,
                         std::optional<std::int64_t> lease_ms) {
  json::object body{{"token", token}};
  if (lease_ms) body["lease_ms"] = *lease_ms;
  HttpCall call{{"POST", lock_path(ns, name) + "/renew", json::serialize(body), {}}, render_fields};
  call.explain = lock_explainer(std::string(ns), std::string(name));
  call.retry = true;  // a renewal sent twice renews twice: the same lease, from later
  return call;
}

HttpCall lock_get_call(std::string_view ns, std::string_view name,
                       std::optional<std::int64_t> token) {
  std::string target = lock_path(ns, name);
  if (token) target += "?token=" + std::to_string(*token);
  HttpCall call{{"GET", std::move(target), {}, {}}, render_fields};
  call.retry = true;
  return call;
}

HttpCall lock_list_call(std::string_view ns) {
  HttpCall call{{"GET", lock_path(ns), {}, {}},
                [](const HttpResponse&, const json::value& body, Output& o) {
                  const json::object* obj = body.if_object();
                  const json::value* items = obj ? obj->if_contains("items") : nullptr;
                  if (!items || !items->is_array() || items->as_array().empty()) {
                    o.err << "(none)\n";
                    return;
                  }
                  print_table(items->as_array(), kLockColumns, o.out);
                }};
  call.retry = true;
  return call;
}

HttpCall lock_force_release_call(std::string_view ns, std::string_view name) {
  return {{"POST", lock_path(ns, name) + "/force-release", "{}", {}}, render_fields};
}

int lock_run(const ConnectionOptions& conn, const LockRunArgs& a, Output& o) {
  const std::optional<BaseUrl> url = run_target(conn, a.command, o);
  if (!url) return kExitUsage;
  if (const int bad = check_command(a.command, o); bad != 0) return bad;
  const std::string owner = a.owner.empty() ? default_owner() : a.owner;

  // 1. Wait for the lock. A retry (no answer, 503, 429) re-sends the same request_id, so a grant
  //    whose answer was lost is answered again instead of waiting for itself.
  HttpClient client(*url, client_options(conn));
  LockAcquireArgs acq{a.name, owner, a.wait_ms, a.lease_ms,
                      a.request_id.empty() ? new_request_id() : a.request_id};
  HttpCall call = lock_acquire_call(conn.ns, acq);
  auto sent_at = steady::now();
  HttpResult r = send_with_retry(
      [&](const Request& req) {
        sent_at = steady::now();
        return client.send(req);
      },
      call.request, RetryPolicy{}, o.err, real_sleep, call.adjust);
  if (!r.ok()) {
    print_error("unreachable", r.error, o.err);
    return kExitUnreachable;
  }
  boost::system::error_code ec;
  json::value answer = json::parse(r.response->body, ec);
  if (r.response->status != 200 || ec || !answer.is_object()) {
    print_error_answer(r.response->status, r.response->body, ec ? json::value() : answer, o.err,
                       call.explain);
    return kExitServerError;
  }
  const json::object& obj = answer.as_object();
  if (!is_true(answer, "acquired")) {
    o.err << "ichido lock run: lock " << a.name << " not acquired within the wait";
    if (const auto* h = obj.if_contains("holder"); h && h->is_object()) {
      o.err << " (held by " << display_field(*h, "owner") << " until "
            << display_field(*h, "lease_expires_at") << ")";
    }
    o.err << '\n';
    return kExitTempFail;
  }
  const std::int64_t token = obj.at("token").to_number<std::int64_t>();
  // The lease is measured locally from before the request was sent: never later than the server's.
  auto lease_end = sent_at + std::chrono::milliseconds(a.lease_ms);

  // 2. Run the command with the fencing token in its environment.
  o.out.flush();
  o.err.flush();
  const pid_t child = ::fork();
  if (child < 0) {
    print_error("internal", "fork failed", o.err);
    HttpResult rel = client.send(lock_release_call(conn.ns, a.name, token).request);
    (void)rel;
    return kExitServerError;
  }
  if (child == 0) {
    ::setenv("ICHIDO_FENCING_TOKEN", std::to_string(token).c_str(), 1);
    exec_command(a.command);
  }
  g_child.store(child);
  struct sigaction sa{};
  sa.sa_handler = forward_signal;
  ::sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGHUP, &sa, nullptr);

  // 3. Renew every third of the lease until the command exits; a failed renewal past the lease
  //    end (or a not_holder answer) means the lease is lost: stop the command.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::atomic<bool> lost{false};
  std::thread renewer([&] {
    HttpClient rc(*url, client_options(conn));
    const auto every = std::chrono::milliseconds(std::max<std::int64_t>(200, a.lease_ms / 3));
    auto next = steady::now() + every;
    std::string why;
    for (;;) {
      {
        std::unique_lock lk(mu);
        if (cv.wait_until(lk, next, [&] { return done; })) return;
      }
      HttpCall renew = lock_renew_call(conn.ns, a.name, token, a.lease_ms);
      renew.request.read_timeout = every;
      const auto at = steady::now();
      HttpResult res = rc.send(renew.request);
      if (res.ok() && res.response->status == 200) {
        lease_end = at + std::chrono::milliseconds(a.lease_ms);
        next = at + every;
        continue;
      }
      const std::string code = error_code_of(res);
      if (code == "not_holder") {
        why = "the server says this process no longer holds it (not_holder)";
      } else if (steady::now() >= lease_end) {
        why = "renewals failed until the lease ran out (" +
              (res.ok() ? "HTTP " + std::to_string(res.response->status) : res.error) + ")";
      } else {
        rc.close();
        next = std::min(steady::now() + std::chrono::milliseconds(250), lease_end);
        continue;
      }
      lost.store(true);
      o.err << "ichido lock run: lost the lease on lock " << a.name << ": " << why
            << "; stopping the command (SIGTERM, then SIGKILL after " << a.grace_ms << " ms)"
            << std::endl;
      ::kill(child, SIGTERM);
      std::unique_lock lk(mu);
      if (!cv.wait_for(lk, std::chrono::milliseconds(a.grace_ms), [&] { return done; })) {
        ::kill(child, SIGKILL);
      }
      return;
    }
  });

  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  g_child.store(0);
  {
    std::lock_guard lk(mu);
    done = true;
  }
  cv.notify_all();
  renewer.join();
  if (lost.load()) return kExitLockLost;

  // 4. Release (best effort: if it fails the lease simply lapses).
  HttpResult rel = client.send(lock_release_call(conn.ns, a.name, token).request);
  if (!rel.ok() || rel.response->status != 200) {
    o.err << "ichido lock run: could not release lock " << a.name << " ("
          << (rel.ok() ? error_code_of(rel) : rel.error) << "); its lease will lapse\n";
  }
  return exit_code_of(status, kExitServerError);
}

void add_lock_commands(CommandTree& tree) {
  CLI::App* group = tree.add_group(
      tree.root(), "lock",
      "Named locks with leases and fencing tokens (acquire, release, renew, get, list, "
      "force-release, run)",
      "ichido lock run nightly-export --wait 30s -- ./export.sh");
  const ConnectionOptions& conn = tree.connection();
  {
    auto a = std::make_shared<LockAcquireArgs>();
    CLI::App* cmd = tree.add_http_command(
        *group, "acquire",
        "Acquire a lock, waiting up to --wait. Acquired: prints the fencing token on stdout and "
        "exits 0. Not acquired within the wait: prints the holder on stderr and exits 75",
        "TOKEN=$(ichido lock acquire invoices --wait 10s --lease 30s --owner script-A)",
        [a, &conn] {
          LockAcquireArgs args = *a;
          if (args.request_id.empty()) args.request_id = new_request_id();
          return lock_acquire_call(conn.ns, args);
        });
    add_name(*cmd, a->name);
    cmd->add_option("--owner", a->owner, "Who holds it, shown to others");
    add_duration(*cmd, "--wait", a->wait_ms, "Wait this long for the lock (default 0, max 300s)",
                 /*allow_zero=*/true, 0, kWaitMaxMs);
    add_duration(*cmd, "--lease", a->lease_ms, "Lease length (default 30s, 1s-1h)",
                 /*allow_zero=*/false, kLeaseMinMs, kLeaseMaxMs);
    cmd->add_option("--request-id", a->request_id,
                    "Sent with the request and on each of its retries, so that a grant whose "
                    "answer was lost is answered again (default: a new random one); pass the "
                    "same value when a script repeats a lost acquire");
  }
  {
    auto name = std::make_shared<std::string>();
    auto token = std::make_shared<std::int64_t>(0);
    CLI::App* cmd = tree.add_http_command(
        *group, "release", "Release a lock you hold", "ichido lock release invoices --token 7",
        [name, token, &conn] { return lock_release_call(conn.ns, *name, *token); });
    add_name(*cmd, *name);
    cmd->add_option("--token", *token, "The fencing token acquire gave you")->required();
  }
  {
    auto name = std::make_shared<std::string>();
    auto token = std::make_shared<std::int64_t>(0);
    auto lease = std::make_shared<std::optional<std::int64_t>>();
    CLI::App* cmd = tree.add_http_command(
        *group, "renew", "Extend the lease of a lock you hold (from now)",
        "ichido lock renew invoices --token 7 --lease 30s",
        [name, token, lease, &conn] { return lock_renew_call(conn.ns, *name, *token, *lease); });
    add_name(*cmd, *name);
    cmd->add_option("--token", *token, "The fencing token acquire gave you")->required();
    add_duration(*cmd, "--lease", *lease, "New lease length from now (default 30s)",
                 /*allow_zero=*/false, kLeaseMinMs, kLeaseMaxMs);
  }
  {
    auto name = std::make_shared<std::string>();
    auto token = std::make_shared<std::optional<std::int64_t>>();
    CLI::App* cmd = tree.add_http_command(
        *group, "get", "Show who holds a lock and how many wait; --token checks a holder",
        "ichido lock get invoices --token 7",
        [name, token, &conn] { return lock_get_call(conn.ns, *name, *token); });
    add_name(*cmd, *name);
    cmd->add_option("--token", *token, "Also answer whether this token is the live holder");
  }
  tree.add_http_command(*group, "list", "List the held locks of the namespace",
                        "ichido lock list --ns accounting",
                        [&conn] { return lock_list_call(conn.ns); });
  {
    auto name = std::make_shared<std::string>();
    CLI::App* cmd =
        tree.add_http_command(*group, "force-release", "End a holder's lease now (admin)",
                              "ichido lock force-release invoices",
                              [name, &conn] { return lock_force_release_call(conn.ns, *name); });
    add_name(*cmd, *name);
  }
  {
    auto a = std::make_shared<LockRunArgs>();
    CLI::App* cmd = tree.add_local_command(
        *group, "run",
        "Run a command while holding a lock, like flock(1) across machines: waits for the lock, "
        "renews the lease while the command runs, releases when it exits and exits with its "
        "code. 75: the wait timed out. 76: the lease was lost (the command got SIGTERM, then "
        "SIGKILL). 126/127: the command cannot be run (checked before the lock is taken). The "
        "command sees the fencing token in $ICHIDO_FENCING_TOKEN",
        "ichido lock run nightly-export --wait 30s --lease 30s -- ./export.sh --full", [a, &conn] {
          Output o{std::cout, std::cerr};
          return lock_run(conn, *a, o);
        });
    tree.add_connection_options(*cmd);
    add_name(*cmd, a->name);
    cmd->add_option("--owner", a->owner, "Who holds it, shown to others (default HOST:PID)");
    add_duration(*cmd, "--wait", a->wait_ms, "Wait this long for the lock (default 30s)",
                 /*allow_zero=*/true, 0, kWaitMaxMs);
    add_duration(*cmd, "--lease", a->lease_ms, "Lease length, renewed every third (default 30s)",
                 /*allow_zero=*/false, kLeaseMinMs, kLeaseMaxMs);
    add_duration(*cmd, "--grace", a->grace_ms,
                 "After SIGTERM on a lost lease, SIGKILL follows this late (default 10s)",
                 /*allow_zero=*/true);
    cmd->add_option("command", a->command, "The command and its arguments, after --")->required();
  }
}

}  // namespace ichido::cli

// `ichido once run KEY -- CMD ARGS…`: makes any cron job or shell script exactly-once.
//
//   CMD not found / not executable → exit 127 / 126 before anything is claimed
//   begin KEY ─┬─ completed   → print "already completed", exit 0 (CMD does not run)
//              ├─ in_progress → exit 75 (EX_TEMPFAIL), after waiting up to --wait
//              ├─ dead        → print last_error and the reset command, exit 65
//              └─ acquired    → run CMD (stdout passed through, its tail kept) while a thread
//                               renews the lease every third of it, then
//                               exit 0   → complete {"exit_code":0,"stdout_tail":"…"}, exit 0
//                               exit N≠0 → fail "exit code N" (retryable), exit N
// begin is retried (no answer, 503, 429) with one request_id for the whole invocation, so a claim
// whose answer was lost is answered again rather than waited for. After CMD succeeded, complete
// is retried until the lease ends; if it still is not recorded, the message says that CMD
// succeeded and gives the exact `ichido once complete` command that records it. fail is never
// sent for a command that succeeded.
// A renewal answered 409 stale_token means the lease was lost (this process stalled longer than
// the lease and another run took over): CMD keeps running (killing it halfway could be worse),
// a warning is printed, and the final complete/fail is answered stale and reported (exit 1).
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <ostream>
#include <thread>

#include "cli/child.h"
#include "cli/once_cmd.h"
#include "cli/output.h"
#include "cli/retry.h"

namespace ichido::cli {
namespace {

namespace json = boost::json;

constexpr std::size_t kTailBytes = 4096;

// `s` with every byte that is not part of a well-formed UTF-8 sequence replaced by '?', and a
// sequence cut at the front (the tail started mid-character) dropped.
std::string valid_utf8(std::string_view s) {
  std::string out;
  std::size_t i = 0;
  while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80           ? 1
                    : (c >> 5) == 0x6  ? 2
                    : (c >> 4) == 0xE  ? 3
                    : (c >> 3) == 0x1E ? 4
                                       : 0;
    bool ok = n > 0 && i + n <= s.size();
    std::uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
    for (std::size_t k = 1; ok && k < n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (ok && ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
               cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) {
      ok = false;
    }
    if (ok) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out.push_back('?');
      ++i;
    }
  }
  return out;
}

struct Answer {
  int status = 0;  // 0: no answer
  json::value body;
  std::string raw;
  std::string transport_error;
};

Answer call(HttpClient& client, const Request& req) {
  Answer a;
  HttpResult r = client.send(req);
  if (!r.ok()) {
    a.transport_error = r.error;
    return a;
  }
  a.status = r.response->status;
  a.raw = r.response->body;
  boost::system::error_code ec;
  a.body = json::parse(a.raw, ec);
  if (ec) a.body = nullptr;
  return a;
}

std::string field(const json::value& v, const char* name) { return display_field(v, name); }

// Renews the lease every lease/3 until stopped; remembers whether the lease was lost and until
// when the last successful renewal extended it.
class Renewer {
 public:
  using steady = std::chrono::steady_clock;

  // `lease_end` and `lease_expires_at`: what begin granted (local estimate and server's text).
  Renewer(BaseUrl url, ClientOptions options, std::string target, std::string key,
          std::int64_t token, std::int64_t lease_ms, steady::time_point lease_end,
          std::string lease_expires_at, std::ostream& err)
      : client_(std::move(url), std::move(options)),
        err_(err),
        lease_ms_(lease_ms),
        lease_end_(lease_end),
        lease_expires_at_(std::move(lease_expires_at)) {
    json::object body{{"key", key}, {"token", token}, {"lease_ms", lease_ms}};
    req_ = {"POST", std::move(target), json::serialize(body), {}};
    period_ = std::chrono::milliseconds(std::max<std::int64_t>(lease_ms / 3, 100));
    thread_ = std::thread([this] { loop(); });
  }
  ~Renewer() { stop(); }
  void stop() {
    {
      std::lock_guard lk(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  // When the lease ends, measured locally from before the last granted request was sent (never
  // later than the server's end), and the server's own lease_expires_at text for messages.
  steady::time_point lease_end() {
    std::lock_guard lk(mu_);
    return lease_end_;
  }
  std::string lease_expires_at() {
    std::lock_guard lk(mu_);
    return lease_expires_at_;
  }

 private:
  void loop() {
    std::unique_lock lk(mu_);
    while (!cv_.wait_for(lk, period_, [this] { return stopping_; })) {
      lk.unlock();
      const auto sent = steady::now();
      Answer a = call(client_, req_);
      lk.lock();
      if (a.status == 200) {
        lease_end_ = sent + std::chrono::milliseconds(lease_ms_);
        lease_expires_at_ = field(a.body, "lease_expires_at");
        continue;
      }
      if (a.status == 0 || a.status == 503 || a.status == 429) {
        err_ << "warning: could not renew the lease ("
             << (a.status == 0 ? a.transport_error : "HTTP " + std::to_string(a.status))
             << "); retrying\n";
      } else {
        err_ << "warning: the lease was lost (" << a.status << " " << a.raw
             << "); another run may take over\n";
        return;
      }
    }
  }

  HttpClient client_;
  std::ostream& err_;
  Request req_;
  std::chrono::milliseconds period_{};
  const std::int64_t lease_ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;         // guarded by mu_
  steady::time_point lease_end_;  // guarded by mu_
  std::string lease_expires_at_;  // guarded by mu_
  std::thread thread_;
};

// Runs argv with stdout through a pipe (copied to `out`, its tail kept). Returns the exit code
// (128 + signal when killed; 127 when it could not be started).
int run_child(const std::vector<std::string>& args, std::ostream& out, std::string& tail) {
  int fds[2];
  if (::pipe(fds) != 0) return 127;
  out.flush();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return 127;
  }
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    exec_command(args);
  }
  ::close(fds[1]);
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.write(buf, n);
    out.flush();
    tail.append(buf, static_cast<std::size_t>(n));
    if (tail.size() > 2 * kTailBytes) tail.erase(0, tail.size() - kTailBytes);
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 127;
  }
  if (tail.size() > kTailBytes) tail.erase(0, tail.size() - kTailBytes);
  return exit_code_of(status, 127);
}

}  // namespace

int once_run(const ConnectionOptions& conn, const OnceRunArgs& a, Output& o) {
  using steady = std::chrono::steady_clock;
  const std::optional<BaseUrl> url = run_target(conn, a.command, o);
  if (!url) return kExitUsage;
  if (const int bad = check_command(a.command, o); bad != 0) return bad;
  HttpClient client(*url, client_options(conn));
  const std::string base = once_path(conn.ns);
  const std::string key_arg = shell_quote(a.key);
  const std::string ns_arg = ns_hint(conn.ns);

  json::object begin{{"key", a.key},
                     {"owner", a.owner.value_or(default_owner())},
                     {"lease_ms", a.lease_ms},
                     {"wait_ms", a.wait_ms},
                     {"request_id", new_request_id()}};
  if (a.fingerprint) begin["fingerprint"] = *a.fingerprint;
  Request req{"POST", base + "/begin", json::serialize(begin),
              std::chrono::milliseconds(a.wait_ms + 30000)};
  auto sent_at = steady::now();
  HttpResult r = send_with_retry(
      [&](const Request& q) {
        sent_at = steady::now();
        return client.send(q);
      },
      req, RetryPolicy{}, o.err, real_sleep, shrink_wait(a.wait_ms));
  Answer b;
  if (r.ok()) {
    b.status = r.response->status;
    b.raw = r.response->body;
    boost::system::error_code ec;
    b.body = json::parse(b.raw, ec);
    if (ec) b.body = nullptr;
  }
  if (!r.ok()) {
    print_error("unreachable", r.error, o.err);
    return kExitUnreachable;
  }
  if (b.status != 200) {
    OnceBeginArgs probe;
    probe.key = a.key;
    print_error_answer(b.status, b.raw, b.body, o.err, once_begin_call(conn.ns, probe).explain);
    return kExitServerError;
  }
  const std::string outcome = field(b.body, "outcome");
  if (outcome == "completed") {
    o.err << "already completed at " << field(b.body, "completed_at") << "; not running\n";
    return kExitOk;
  }
  if (outcome == "in_progress") {
    o.err << "in progress elsewhere (owner " << field(b.body, "owner") << ", lease until "
          << field(b.body, "lease_expires_at") << "); try again later\n";
    return kExitTempFail;
  }
  if (outcome == "dead") {
    o.err << "dead after " << field(b.body, "attempts")
          << " attempts (last error: " << field(b.body, "last_error")
          << "); an admin makes it runnable again with: ichido once reset " << key_arg << ns_arg
          << "\n";
    return kExitDead;
  }
  if (outcome != "acquired") {
    print_error("bad_answer", "unexpected begin answer: " + b.raw, o.err);
    return kExitServerError;
  }
  const std::int64_t token = b.body.at("token").to_number<std::int64_t>();

  std::string tail;
  int code = 0;
  steady::time_point lease_end;
  std::string lease_expires_at;
  {
    Renewer renewer(*url, client_options(conn), base + "/renew", a.key, token, a.lease_ms,
                    sent_at + std::chrono::milliseconds(a.lease_ms),
                    field(b.body, "lease_expires_at"), o.err);
    code = run_child(a.command, o.out, tail);
    renewer.stop();
    lease_end = renewer.lease_end();
    lease_expires_at = renewer.lease_expires_at();
  }
  const Transport send = [&client](const Request& q) { return client.send(q); };

  if (code != 0) {
    // Sent once: if its answer is lost the lease lapses and the next run tries again anyway.
    json::object end{{"key", a.key},
                     {"token", token},
                     {"error", "exit code " + std::to_string(code)},
                     {"retry", true}};
    Answer f = call(client, {"POST", base + "/fail", json::serialize(end), {}});
    if (f.status == 0) {
      print_error("unreachable", f.transport_error, o.err);
      o.err << "ichido once run: the failure was not recorded; " << a.key << " stays claimed until "
            << lease_expires_at << ", then the next run tries again\n";
    } else if (f.status != 200) {
      OnceFailArgs probe;
      probe.key = a.key;
      print_error_answer(f.status, f.raw, f.body, o.err, once_fail_call(conn.ns, probe).explain);
    }
    return code;
  }

  // The command succeeded: record it, retrying until the lease ends (after that another run may
  // take the item over, and only then could the work be done twice).
  json::object result{{"exit_code", 0}, {"stdout_tail", valid_utf8(tail)}};
  json::object end{{"key", a.key}, {"token", token}, {"result", result}};
  RetryPolicy until_lease_end;
  until_lease_end.attempts = 0;
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(lease_end - steady::now());
  if (left.count() > 0) {
    until_lease_end.give_up_after = left;
  } else {
    until_lease_end.attempts = 1;
  }
  HttpResult c = send_with_retry(send, {"POST", base + "/complete", json::serialize(end), {}},
                                 until_lease_end, o.err);
  if (c.ok() && c.response->status == 200) return kExitOk;

  const std::string why =
      c.ok() ? "the server answered HTTP " + std::to_string(c.response->status) : c.error;
  if (c.ok() && !is_retryable(c)) {
    boost::system::error_code ec;
    json::value body = json::parse(c.response->body, ec);
    OnceCompleteArgs probe;
    probe.key = a.key;
    print_error_answer(c.response->status, c.response->body, ec ? json::value() : body, o.err,
                       once_complete_call(conn.ns, probe).explain);
    o.err << "ichido once run: the command succeeded (exit 0), but its success could not be "
             "recorded under this run's claim; check the record with: ichido once get "
          << key_arg << ns_arg << "\n";
    return kExitServerError;
  }
  json::object manual{{"exit_code", 0}};
  o.err << "ichido once run: THE COMMAND SUCCEEDED (exit 0), but ichido did not confirm "
           "recording it ("
        << why << ").\n"
        << "  " << a.key << " stays claimed by this run until " << lease_expires_at
        << "; after that the next run will run the command again.\n"
        << "  To record the success, run before then:\n"
        << "    ichido once complete " << key_arg << " --token " << token << ns_arg << " --url "
        << shell_quote(url->to_string()) << " --result " << shell_quote(json::serialize(manual))
        << "\n";
  return c.ok() ? kExitServerError : kExitUnreachable;
}

}  // namespace ichido::cli

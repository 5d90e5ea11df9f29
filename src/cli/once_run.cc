// `ichido once run KEY -- CMD ARGS…`: makes any cron job or shell script exactly-once.
//
//   begin KEY ─┬─ completed   → print "already completed", exit 0 (CMD does not run)
//              ├─ in_progress → exit 75 (EX_TEMPFAIL), after waiting up to --wait
//              ├─ dead        → print last_error, exit 1 (an operator must `once reset` it)
//              └─ acquired    → run CMD (stdout passed through, its tail kept) while a thread
//                               renews the lease every third of it, then
//                               exit 0   → complete {"exit_code":0,"stdout_tail":"…"}, exit 0
//                               exit N≠0 → fail "exit code N" (retryable), exit N
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

// Renews the lease every lease/3 until stopped; remembers whether the lease was lost.
class Renewer {
 public:
  Renewer(BaseUrl url, std::string target, std::string key, std::int64_t token,
          std::int64_t lease_ms, std::ostream& err)
      : client_(std::move(url)), err_(err) {
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

 private:
  void loop() {
    std::unique_lock lk(mu_);
    while (!cv_.wait_for(lk, period_, [this] { return stopping_; })) {
      lk.unlock();
      Answer a = call(client_, req_);
      lk.lock();
      if (a.status == 200) continue;
      if (a.status == 0) {
        err_ << "warning: could not renew the lease (" << a.transport_error << "); retrying\n";
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
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
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
  const std::optional<BaseUrl> url = run_target(conn, a.command, o);
  if (!url) return kExitUsage;
  HttpClient client(*url);
  const std::string base = once_path(conn.ns);

  json::object begin{{"key", a.key},
                     {"owner", a.owner.value_or(default_owner())},
                     {"lease_ms", a.lease_ms},
                     {"wait_ms", a.wait_ms}};
  if (a.fingerprint) begin["fingerprint"] = *a.fingerprint;
  Request req{"POST", base + "/begin", json::serialize(begin),
              std::chrono::milliseconds(a.wait_ms + 30000)};
  Answer b = call(client, req);
  if (b.status == 0) {
    print_error("unreachable", b.transport_error, o.err);
    return kExitUnreachable;
  }
  if (b.status != 200) {
    print_error_answer(b.status, b.raw, b.body, o.err);
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
          << "); an operator must run: ichido once reset " << a.key << "\n";
    return kExitServerError;
  }
  if (outcome != "acquired") {
    print_error("bad_answer", "unexpected begin answer: " + b.raw, o.err);
    return kExitServerError;
  }
  const std::int64_t token = b.body.at("token").to_number<std::int64_t>();

  std::string tail;
  int code = 0;
  {
    Renewer renewer(*url, base + "/renew", a.key, token, a.lease_ms, o.err);
    code = run_child(a.command, o.out, tail);
  }

  json::object end{{"key", a.key}, {"token", token}};
  std::string target;
  if (code == 0) {
    end["result"] = json::object{{"exit_code", 0}, {"stdout_tail", valid_utf8(tail)}};
    target = base + "/complete";
  } else {
    end["error"] = "exit code " + std::to_string(code);
    end["retry"] = true;
    target = base + "/fail";
  }
  Request fin{"POST", std::move(target), json::serialize(end), {}};
  Answer f = call(client, fin);
  if (f.status == 0) {  // the server may have acted: the record shows what happened
    print_error("unreachable", f.transport_error, o.err);
    return code == 0 ? kExitUnreachable : code;
  }
  if (f.status != 200) {
    print_error_answer(f.status, f.raw, f.body, o.err);
    return code == 0 ? kExitServerError : code;
  }
  return code;
}

}  // namespace ichido::cli

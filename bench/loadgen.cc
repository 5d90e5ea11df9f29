// ichido-loadgen: a closed-loop load generator for the ichido benchmarks, speaking HTTP/1.1
// (ichido, etcd's v3 JSON gateway), RESP (Redis) and the PostgreSQL protocol (libpq), so that every
// system of the comparison is measured by the same loop, timeline and histogram. Workloads:
// workloads.h.
//
// N keep-alive connections, each sending one request, awaiting its response and repeating, on 1–2
// io threads (it shares the machine with the server under test, so it must stay light). Requests
// are built in per-connection buffers reused for the whole run; responses go through a Beast
// basic_parser that keeps only the status and (a bounded prefix of) the body. After the first
// request of each connection nothing is allocated per request except what Asio recycles.
//
// Timeline: connect, warm-up (requests sent and checked but not measured), measurement window,
// then a bounded grace period for in-flight requests. Throughput = successful responses whose
// completion falls in the window / window length. Latency = write start to response parsed.
// Errors (non-2xx, transport failures, failed response checks) are counted over the whole run,
// warm-up included: any error means the numbers need a look.
#include <libpq-fe.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/read.hpp>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "histogram.h"
#include "options.h"
#include "workloads.h"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using ichido::bench::Histogram;
using std::chrono::microseconds;
using namespace ichido::bench;  // workloads.h

constexpr unsigned kMaxConnections = 4096;
constexpr unsigned kMaxThreads = 8;
constexpr std::size_t kMaxKeptBody = 4096;           // bytes of a response body kept for checks
constexpr std::uint64_t kMaxResponseBody = 1 << 20;  // larger responses are a parse error
constexpr std::size_t kMaxErrorSamples = 5;

// ---------------------------------------------------------------------------------------------
// HTTP response parsing without allocation: keeps the status and a bounded prefix of the body.

class ResponseParser final : public http::basic_parser<false> {
 public:
  explicit ResponseParser(std::string& body) : body_(body) {
    body_.clear();
    body_limit(kMaxResponseBody);
  }
  int status() const { return status_; }

 private:
  using error_code = beast::error_code;
  void keep(std::string_view s) {
    const std::size_t room = kMaxKeptBody - std::min(kMaxKeptBody, body_.size());
    body_.append(s.substr(0, room));
  }
  using sv = beast::string_view;  // boost::core::string_view in Boost 1.81, whatever the macro says
  void on_request_impl(http::verb, sv, sv, int, error_code&) override {}
  void on_response_impl(int code, sv, int, error_code&) override { status_ = code; }
  void on_field_impl(http::field, sv, sv, error_code&) override {}
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>&, error_code&) override {}
  std::size_t on_body_impl(sv s, error_code&) override {
    keep(std::string_view(s.data(), s.size()));
    return s.size();
  }
  void on_chunk_header_impl(std::uint64_t, sv, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, sv s, error_code&) override {
    keep(std::string_view(s.data(), s.size()));
    return s.size();
  }
  void on_finish_impl(error_code&) override {}

  std::string& body_;
  int status_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Run state

// Which system the workload talks to (selects the protocol and the workload implementation).
enum class Target { ichido, etcd, redis, postgres };

struct Options {
  std::string url = "http://127.0.0.1:7878";
  std::string host, port, prefix;
  // --url with several comma-separated http URLs (same prefix): (host, port) of each.
  std::vector<std::pair<std::string, std::string>> hosts;
  std::string host_header;  // HOST:PORT as written in the URL (IPv6 keeps its brackets)
  Target target = Target::ichido;
  unsigned connections = 16;
  unsigned threads = 1;
  microseconds duration = std::chrono::seconds(10);
  microseconds warmup = std::chrono::seconds(2);
  microseconds grace = std::chrono::seconds(10);
  std::string workload = "counter-next";
  std::string ns = "bench";
  std::string name = "bench";
  std::string path = "/healthz";
  std::string token;
  std::string redis_password;  // redis: AUTH on every connection before its first command
  std::string run_id;
  bool keys_in_time_order = false;
  unsigned counters = 1;  // --counters (ichido counter-next only)
  std::string system;     // default: the target's name
  bool verify = true;
  bool json = false;
};

// Samples of the first few errors, shared by all threads (touched only on the error path).
class ErrorSamples {
 public:
  void add(std::string text) {
    std::lock_guard lock(mu_);
    if (samples_.size() < kMaxErrorSamples) samples_.push_back(std::move(text));
  }
  std::vector<std::string> take() {
    std::lock_guard lock(mu_);
    return std::move(samples_);
  }

 private:
  std::mutex mu_;
  std::vector<std::string> samples_;
};

// Per io thread; only that thread writes it until the threads are joined.
struct ThreadStats {
  Histogram latency_us;
  std::uint64_t ok_in_window = 0;      // operations completed in the window
  std::uint64_t grants_in_window = 0;  // of which acquired a lock (lock workloads)
  std::uint64_t requests = 0;          // answers received, whole run
  std::uint64_t retries = 0;           // CAS retries (etcd counters), whole run
  std::uint64_t status_errors = 0;
  std::uint64_t check_errors = 0;
  std::uint64_t transport_errors = 0;
  std::uint64_t timed_out = 0;  // connections still waiting when the grace period ended
};

// The workload of the run: exactly one of these is set, matching opt.target.
struct Workloads {
  std::unique_ptr<HttpWorkload> http;
  std::unique_ptr<RespWorkload> resp;
  std::unique_ptr<PgWorkload> pg;
};

struct Shared {
  const Options& opt;
  const Workloads& workload;
  // One endpoint list per URL of --url; connection c uses list c % size (several nodes behind
  // one load generator, like a load balancer in front of them).
  std::vector<std::vector<tcp::endpoint>> endpoints;
  std::string fixed_headers;  // Host, auth, …, each ending in CRLF
  Clock::time_point start, measure_start, end;
  ErrorSamples samples;
  std::vector<PGconn*> pg_conns;  // postgres: connection c, connected and prepared before the run
};

std::string clip(std::string_view s) {
  constexpr std::size_t kMax = 300;
  std::string out(s.substr(0, kMax));
  for (char& c : out)
    if (c == '\n' || c == '\r') c = ' ';
  if (s.size() > kMax) out += "…";
  return out;
}

// An operation ended without error at t1 (started at t0): count it if it ended in the window.
void op_done(const Shared& sh, ThreadStats& st, OpState& op, Clock::time_point t0,
             Clock::time_point t1) {
  if (t1 >= sh.measure_start && t1 < sh.end) {
    ++st.ok_in_window;
    if (op.granted) ++st.grants_in_window;
    st.latency_us.record(
        static_cast<std::uint64_t>(std::chrono::duration_cast<microseconds>(t1 - t0).count()));
  }
}

void build_request(const Shared& sh, const HttpRequest& spec, std::string& out) {
  out.clear();
  out.append(spec.method).append(" ").append(spec.target).append(" HTTP/1.1\r\n");
  out.append(sh.fixed_headers);
  if (!spec.body.empty() || spec.method == "POST" || spec.method == "PUT") {
    out.append("Content-Type: application/json\r\nContent-Length: ");
    append_uint(out, spec.body.size());
    out.append("\r\n");
  }
  out.append("\r\n").append(spec.body);
}

// Connects (retrying with a 100 ms back-off until the run ends). Returns false when the run ended.
asio::awaitable<bool> tcp_connect(Shared& sh, ThreadStats& st, tcp::socket& sock, unsigned conn) {
  beast::error_code ec;
  const auto& endpoints = sh.endpoints[conn % sh.endpoints.size()];
  while (Clock::now() < sh.end) {
    co_await asio::async_connect(sock, endpoints, asio::redirect_error(asio::use_awaitable, ec));
    if (!ec) {
      sock.set_option(tcp::no_delay(true), ec);
      co_return true;
    }
    ++st.transport_errors;
    sh.samples.add("connect: " + ec.message());
    sock.close(ec);
    asio::steady_timer backoff(co_await asio::this_coro::executor, std::chrono::milliseconds(100));
    co_await backoff.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  co_return false;
}

// One HTTP connection's closed loop (ichido, etcd, ok-server).
asio::awaitable<void> http_loop(Shared& sh, ThreadStats& st, unsigned conn) {
  auto ex = co_await asio::this_coro::executor;
  const HttpWorkload& w = *sh.workload.http;
  tcp::socket sock(ex);
  beast::flat_buffer buf(16 * 1024);
  std::string request, body;
  request.reserve(1024);
  body.reserve(kMaxKeptBody);
  HttpRequest spec;
  OpState op;
  std::uint64_t seq = 0;
  bool connected = false;
  beast::error_code ec;
  Clock::time_point t0;

  bool in_op = false;  // an operation has started (an etcd CAS retry goes back to step 0 in it)

  while (Clock::now() < sh.end || (connected && in_op && w.finish_ops())) {
    if (!connected) {
      if (!co_await tcp_connect(sh, st, sock, conn)) break;
      connected = true;
      st.retries += op.retries;
      op = OpState{};
      in_op = false;
      buf.clear();
    }
    if (!in_op) {
      t0 = Clock::now();
      in_op = true;
    }
    w.make(conn, seq, op, spec);
    build_request(sh, spec, request);
    co_await asio::async_write(sock, asio::buffer(request),
                               asio::redirect_error(asio::use_awaitable, ec));
    std::optional<ResponseParser> parser;
    if (!ec) {
      parser.emplace(body);
      co_await http::async_read(sock, buf, *parser, asio::redirect_error(asio::use_awaitable, ec));
    }
    if (ec) {
      ++st.transport_errors;
      sh.samples.add("transport: " + ec.message());
      sock.close(ec);
      connected = false;
      in_op = false;
      ++seq;
      continue;
    }
    ++st.requests;
    const int status = parser->status();
    Verdict v;
    if (status < 200 || status > 299) {
      ++st.status_errors;
      sh.samples.add("HTTP " + std::to_string(status) + ": " + clip(body));
      v.error = "";
    } else if (v = w.check(body, op); v.error) {
      ++st.check_errors;
      sh.samples.add(std::string("check: ") + v.error + ": " + clip(body));
    }
    if (!v.more) {
      if (!v.error) op_done(sh, st, op, t0, Clock::now());
      op.step = 0;
      op.granted = false;
      in_op = false;
      ++seq;
    }
    if (!parser->keep_alive()) {
      sock.close(ec);
      connected = false;
    }
  }
  st.retries += op.retries;
  sock.close(ec);
}

// Parses one RESP2 reply at the start of `in`. Returns the bytes it used, 0 when incomplete,
// or -1 when malformed. Arrays are skipped over (none of the workloads expects one).
long parse_resp(std::string_view in, RespReply& r) {
  const auto eol = in.find("\r\n");
  if (eol == std::string_view::npos) return in.size() > 64 * 1024 ? -1 : 0;
  if (eol == 0) return -1;
  r = RespReply{};
  r.type = in[0];
  const std::string_view line = in.substr(1, eol - 1);
  switch (r.type) {
    case '+':
    case '-':
      r.text = line;
      return static_cast<long>(eol + 2);
    case ':': {
      const auto e = std::from_chars(line.data(), line.data() + line.size(), r.integer);
      return e.ec == std::errc{} ? static_cast<long>(eol + 2) : -1;
    }
    case '$': {
      long n = 0;
      const auto e = std::from_chars(line.data(), line.data() + line.size(), n);
      if (e.ec != std::errc{} || n < -1 || n > (1 << 20)) return -1;
      if (n == -1) {
        r.is_nil = true;
        return static_cast<long>(eol + 2);
      }
      const std::size_t need = eol + 2 + static_cast<std::size_t>(n) + 2;
      if (in.size() < need) return 0;
      r.text = in.substr(eol + 2, static_cast<std::size_t>(n));
      return static_cast<long>(need);
    }
    case '*': {
      long n = 0;
      const auto e = std::from_chars(line.data(), line.data() + line.size(), n);
      if (e.ec != std::errc{} || n < -1 || n > 1024) return -1;
      std::size_t used = eol + 2;
      for (long i = 0; i < n; ++i) {
        RespReply sub;
        const long u = parse_resp(in.substr(used), sub);
        if (u <= 0) return u;
        used += static_cast<std::size_t>(u);
      }
      r.is_nil = n == -1;
      return static_cast<long>(used);
    }
    default:
      return -1;
  }
}

// Writes `request` and reads one RESP reply into `reply`, keeping what follows it in `in`.
// Returns the bytes of `in` the reply used; 0 with `ec` set on a transport error, < 0 when the
// reply is malformed.
asio::awaitable<long> resp_round_trip(tcp::socket& sock, const std::string& request,
                                      std::string& in, RespReply& reply, beast::error_code& ec) {
  co_await asio::async_write(sock, asio::buffer(request),
                             asio::redirect_error(asio::use_awaitable, ec));
  char chunk[4096];
  long used = 0;
  while (!ec && (used = parse_resp(in, reply)) == 0) {
    const std::size_t n = co_await sock.async_read_some(
        asio::buffer(chunk), asio::redirect_error(asio::use_awaitable, ec));
    in.append(chunk, n);
  }
  co_return ec ? 0 : used;
}

// One Redis connection's closed loop.
asio::awaitable<void> resp_loop(Shared& sh, ThreadStats& st, unsigned conn) {
  auto ex = co_await asio::this_coro::executor;
  const RespWorkload& w = *sh.workload.resp;
  tcp::socket sock(ex);
  std::string request, in;
  request.reserve(512);
  in.reserve(4096);
  OpState op;
  std::uint64_t seq = 0;
  bool connected = false;
  beast::error_code ec;
  Clock::time_point t0;

  // A transport error or a malformed reply: counted, and the connection is opened again.
  auto lost_connection = [&](long used) {
    ++st.transport_errors;
    sh.samples.add(used == 0 ? "transport: " + ec.message() : std::string("malformed RESP reply"));
    sock.close(ec);
    connected = false;
  };

  while (Clock::now() < sh.end) {
    if (!connected) {
      if (!co_await tcp_connect(sh, st, sock, conn)) break;
      connected = true;
      op = OpState{};
      in.clear();
      if (!sh.opt.redis_password.empty()) {
        // AUTH first, as a client of a server with requirepass does (not counted as a request).
        request.clear();
        resp_command(request, {"AUTH", sh.opt.redis_password});
        RespReply reply;
        const long used = co_await resp_round_trip(sock, request, in, reply, ec);
        if (ec || used < 0) {
          lost_connection(used);
          continue;
        }
        if (reply.type == '-') {
          // A refused password: an error, and this connection stops (every command would fail).
          ++st.status_errors;
          sh.samples.add("redis AUTH: " + clip(reply.text));
          break;
        }
        in.erase(0, static_cast<std::size_t>(used));
      }
    }
    if (op.step == 0) t0 = Clock::now();
    w.make(conn, seq, op, request);
    RespReply reply;
    const long used = co_await resp_round_trip(sock, request, in, reply, ec);
    if (ec || used < 0) {
      lost_connection(used);
      ++seq;
      continue;
    }
    ++st.requests;
    Verdict v;
    if (reply.type == '-') {
      ++st.status_errors;
      sh.samples.add("redis error: " + clip(reply.text));
      v.error = "";
    } else if (v = w.check(reply, op); v.error) {
      ++st.check_errors;
      sh.samples.add(std::string("check: ") + v.error);
    }
    in.erase(0, static_cast<std::size_t>(used));
    if (!v.more) {
      if (!v.error) op_done(sh, st, op, t0, Clock::now());
      op.step = 0;
      op.granted = false;
      ++seq;
    }
  }
  sock.close(ec);
}

// Connects to PostgreSQL, prepares the workload's statements and switches to non-blocking mode.
// On failure sets `why` (and still returns the connection, for its error message, or nullptr).
PGconn* pg_connect(const std::string& url, const PgWorkload& w, const char*& why) {
  static thread_local std::string message;
  PGconn* pg = PQconnectdb(url.c_str());
  bool ok = PQstatus(pg) == CONNECTION_OK;
  for (const auto& s : w.statements()) {
    if (!ok) break;
    PGresult* r = PQprepare(pg, s.name, s.sql, s.nparams, nullptr);
    ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
  }
  if (ok) ok = PQsetnonblocking(pg, 1) == 0;
  why = nullptr;
  if (!ok) {
    message = clip(PQerrorMessage(pg));
    why = message.c_str();
  }
  return pg;
}

// One PostgreSQL connection's closed loop: libpq in non-blocking mode, its socket watched by
// Asio. Connecting and preparing the statements is synchronous (before the warm-up ends).
asio::awaitable<void> pg_loop(Shared& sh, ThreadStats& st, unsigned conn) {
  auto ex = co_await asio::this_coro::executor;
  const PgWorkload& w = *sh.workload.pg;
  PGconn* pg = nullptr;
  std::optional<asio::posix::stream_descriptor> sock;
  PgRequest req;
  OpState op;
  std::uint64_t seq = 0;
  beast::error_code ec;
  Clock::time_point t0;
  auto drop = [&] {
    if (sock) {
      sock->close(ec);
      sock.reset();
    }
    if (pg) PQfinish(pg);
    pg = nullptr;
  };

  pg = std::exchange(sh.pg_conns[conn], nullptr);
  if (pg) sock.emplace(ex, ::dup(PQsocket(pg)));
  while (Clock::now() < sh.end) {
    if (!pg) {  // a reconnect (after a failure): synchronous, it stalls this io thread briefly
      const char* why = nullptr;
      pg = pg_connect(sh.opt.url, w, why);
      if (why) {
        ++st.transport_errors;
        sh.samples.add(std::string("postgres connect/prepare: ") + why);
        drop();
        asio::steady_timer backoff(ex, std::chrono::milliseconds(100));
        co_await backoff.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        continue;
      }
      sock.emplace(ex, ::dup(PQsocket(pg)));
      op = OpState{};
    }
    if (op.step == 0) t0 = Clock::now();
    w.make(conn, seq, op, req);
    const char* values[3] = {req.params[0].c_str(), req.params[1].c_str(), req.params[2].c_str()};
    bool failed = !PQsendQueryPrepared(pg, req.statement, req.nparams, values, nullptr, nullptr, 0);
    int flush = failed ? -1 : PQflush(pg);
    while (flush == 1 && !ec) {
      co_await sock->async_wait(asio::posix::descriptor_base::wait_write,
                                asio::redirect_error(asio::use_awaitable, ec));
      flush = PQflush(pg);
    }
    failed = failed || flush < 0 || ec;
    // Read until the query's results are complete; keep the first one.
    PGresult* result = nullptr;
    while (!failed) {
      if (PQisBusy(pg)) {
        co_await sock->async_wait(asio::posix::descriptor_base::wait_read,
                                  asio::redirect_error(asio::use_awaitable, ec));
        if (ec || !PQconsumeInput(pg)) failed = true;
        continue;
      }
      PGresult* r = PQgetResult(pg);
      if (!r) break;
      if (!result)
        result = r;
      else
        PQclear(r);
    }
    if (failed || !result) {
      ++st.transport_errors;
      sh.samples.add(std::string("postgres: ") + clip(PQerrorMessage(pg)));
      if (result) PQclear(result);
      drop();
      ++seq;
      continue;
    }
    ++st.requests;
    Verdict v;
    const auto rs = PQresultStatus(result);
    if (rs != PGRES_TUPLES_OK && rs != PGRES_COMMAND_OK) {
      ++st.status_errors;
      sh.samples.add(std::string("postgres error: ") + clip(PQresultErrorMessage(result)));
      v.error = "";
    } else if (v = w.check(result, op); v.error) {
      ++st.check_errors;
      sh.samples.add(std::string("check: ") + v.error);
    }
    PQclear(result);
    if (!v.more) {
      if (!v.error) op_done(sh, st, op, t0, Clock::now());
      op.step = 0;
      op.granted = false;
      ++seq;
    }
  }
  drop();
}

// Runs the target's loop for one connection; `active` counts the running loops of this thread.
asio::awaitable<void> connection_loop(Shared& sh, ThreadStats& st, unsigned conn, unsigned& active,
                                      asio::steady_timer& watchdog) {
  switch (sh.opt.target) {
    case Target::ichido:
    case Target::etcd:
      co_await http_loop(sh, st, conn);
      break;
    case Target::redis:
      co_await resp_loop(sh, st, conn);
      break;
    case Target::postgres:
      co_await pg_loop(sh, st, conn);
      break;
  }
  if (--active == 0) watchdog.cancel();
}

// ---------------------------------------------------------------------------------------------
// Command line and output

void usage(std::FILE* to) {
  std::fprintf(
      to,
      "usage: ichido-loadgen [options]\n"
      "  --target T           ichido (default) | etcd | redis | postgres\n"
      "  --url URL            http://HOST:PORT[/PREFIX] (ichido, etcd), redis://HOST:PORT,\n"
      "                       or a libpq URI/conninfo (postgres); several comma-separated http\n"
      "                       URLs spread the connections over them (connection c: URL c %% n)\n"
      "  --connections N      keep-alive connections, each a closed loop (1-%u, default 16)\n"
      "  --threads N          io threads (1-%u, default 1)\n"
      "  --duration D         measured time, e.g. 10s, 500ms (default 10s, max 1h)\n"
      "  --warmup D           unmeasured time before it (default 2s, max 10m)\n"
      "  --grace D            how long in-flight requests may finish after it (default 10s)\n"
      "  --workload W         counter-next (W1, default) | incr (bare increment; peers only)\n"
      "                       | once (W2) | lock (W3) | lock-contended (W3, one name) | get\n"
      "                       | lock-handoff (ichido: waiting acquire + release on one name)\n"
      "  --ns NS --name NAME  namespace; counter name, or the lock of lock-contended "
      "(bench/bench)\n"
      "  --counters N         ichido counter-next: connection c uses counter NAME-(c %% N),\n"
      "                       which must exist (1-%u; default 1: the one counter NAME)\n"
      "  --path PATH          path for get (default /healthz)\n"
      "  --token T            send Authorization: Bearer T\n"
      "  --redis-password P   redis: AUTH P on each connection before its first command\n"
      "  --run-id ID          idempotency keys are k-ID-CONN-SEQ (default: time and pid)\n"
      "  --keys-in-time-order keys k-ID-SEQ-CONN (SEQ 12 digits): every connection's keys in\n"
      "                       one order, so a batch's keys share a key index's last pages\n"
      "  --no-verify          only check the status code (e.g. against ichido-ok-server)\n"
      "  --system NAME        label of the machine line (default: the target)\n"
      "  --json               print a JSON object instead of the machine line\n",
      kMaxConnections, kMaxThreads, kMaxConnections);
}

bool valid_name(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'))
      return false;
  return true;
}

// Accepts http://HOST[:PORT][/PREFIX] (no TLS) or redis://HOST[:PORT]; a postgres URL goes to
// libpq. For http, a comma-separated list of such URLs spreads the connections over them (the
// prefix and Host header of the first are used for all).
bool parse_one_url(Options& o);
bool parse_url(Options& o) {
  if (o.target == Target::postgres) return !o.url.empty();
  const std::string all = o.url;
  std::vector<std::string> urls;
  for (std::size_t at = 0; at <= all.size();) {
    const auto comma = all.find(',', at);
    urls.push_back(all.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (urls.size() > 1 && o.target == Target::redis) return false;
  for (std::size_t i = urls.size(); i-- > 0;) {  // the first last, so that o keeps its parts
    o.url = urls[i];
    if (!parse_one_url(o)) return false;
    o.hosts.insert(o.hosts.begin(), {o.host, o.port});
  }
  o.url = all;
  return true;
}
bool parse_one_url(Options& o) {
  std::string_view u = o.url;
  const std::string_view scheme = o.target == Target::redis ? "redis://" : "http://";
  if (!u.starts_with(scheme)) return false;
  u.remove_prefix(scheme.size());
  const auto slash = u.find('/');
  std::string_view hostport = u.substr(0, slash);
  o.host_header = hostport;
  o.prefix = slash == std::string_view::npos ? "" : std::string(u.substr(slash));
  while (!o.prefix.empty() && o.prefix.back() == '/') o.prefix.pop_back();
  const auto colon = hostport.rfind(':');
  if (colon == std::string_view::npos) {
    o.host = hostport;
    o.port = o.target == Target::redis ? "6379" : "80";
  } else {
    o.host = hostport.substr(0, colon);
    o.port = hostport.substr(colon + 1);
    if (!ichido::bench::parse_uint(o.port, 1, 65535)) return false;
  }
  if (o.host.size() > 2 && o.host.front() == '[' && o.host.back() == ']')
    o.host = o.host.substr(1, o.host.size() - 2);
  return !o.host.empty();
}

// Returns 0 to run, else the exit code.
int parse_args(int argc, char** argv, Options& o) {
  using ichido::bench::parse_duration;
  using ichido::bench::parse_uint;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      usage(stdout);
      return -1;
    }
    if (a == "--no-verify") {
      o.verify = false;
      continue;
    }
    if (a == "--json") {
      o.json = true;
      continue;
    }
    if (a == "--keys-in-time-order") {
      o.keys_in_time_order = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "ichido-loadgen: %s needs a value (or is unknown)\n", argv[i]);
      return 2;
    }
    const std::string_view v = argv[++i];
    bool ok = true;
    if (a == "--url") {
      o.url = v;
    } else if (a == "--target") {
      ok = true;
      if (v == "ichido")
        o.target = Target::ichido;
      else if (v == "etcd")
        o.target = Target::etcd;
      else if (v == "redis")
        o.target = Target::redis;
      else if (v == "postgres")
        o.target = Target::postgres;
      else
        ok = false;
    } else if (a == "--connections" || a == "-c") {
      const auto n = parse_uint(v, 1, kMaxConnections);
      ok = n.has_value();
      if (ok) o.connections = static_cast<unsigned>(*n);
    } else if (a == "--threads") {
      const auto n = parse_uint(v, 1, kMaxThreads);
      ok = n.has_value();
      if (ok) o.threads = static_cast<unsigned>(*n);
    } else if (a == "--duration" || a == "--warmup" || a == "--grace") {
      const auto hi = a == "--duration" ? std::chrono::hours(1) : std::chrono::minutes(10);
      const auto lo = a == "--duration" ? microseconds(1000) : microseconds(0);
      const auto d = parse_duration(v, lo, hi);
      ok = d.has_value();
      if (ok) (a == "--duration" ? o.duration : a == "--warmup" ? o.warmup : o.grace) = *d;
    } else if (a == "--workload") {
      o.workload = v;
      ok = v == "counter-next" || v == "incr" || v == "once" || v == "lock" ||
           v == "lock-contended" || v == "lock-handoff" || v == "get";
    } else if (a == "--ns") {
      o.ns = v;
      ok = valid_name(v);
    } else if (a == "--name") {
      o.name = v;
      ok = valid_name(v);
    } else if (a == "--counters") {
      const auto n = parse_uint(v, 1, kMaxConnections);
      ok = n.has_value();
      if (ok) o.counters = static_cast<unsigned>(*n);
    } else if (a == "--path") {
      o.path = v;
      ok = v.starts_with('/') && v.find_first_of(" \r\n") == std::string_view::npos;
    } else if (a == "--token") {
      o.token = v;
      ok = v.find_first_of("\r\n") == std::string_view::npos;
    } else if (a == "--redis-password") {
      o.redis_password = v;
    } else if (a == "--run-id") {
      o.run_id = v;
      ok = valid_name(v) && v.size() <= 64;
    } else if (a == "--system") {
      o.system = v;
      ok = valid_name(v);
    } else {
      std::fprintf(stderr, "ichido-loadgen: unknown option %s\n", argv[i - 1]);
      usage(stderr);
      return 2;
    }
    if (!ok) {
      std::fprintf(stderr, "ichido-loadgen: bad value for %.*s: '%.*s'\n",
                   static_cast<int>(a.size()), a.data(), static_cast<int>(v.size()), v.data());
      return 2;
    }
  }
  if (!parse_url(o)) {
    std::fprintf(stderr, "ichido-loadgen: bad --url for this --target: '%s'\n", o.url.c_str());
    return 2;
  }
  if (o.system.empty()) {
    static const char* const names[] = {"ichido", "etcd", "redis", "postgres"};
    o.system = names[static_cast<int>(o.target)];
  }
  if (o.workload == "get" && (o.target == Target::redis || o.target == Target::postgres)) {
    std::fprintf(stderr, "ichido-loadgen: --workload get is for HTTP targets\n");
    return 2;
  }
  if (o.counters > 1 && (o.target != Target::ichido || o.workload != "counter-next")) {
    std::fprintf(stderr, "ichido-loadgen: --counters is for --workload counter-next on ichido\n");
    return 2;
  }
  if (o.workload == "incr" && o.target == Target::ichido) {
    std::fprintf(stderr, "ichido-loadgen: --workload incr is the peers' bare increment\n");
    return 2;
  }
  if (o.run_id.empty()) {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    char buf[48];
    std::snprintf(buf, sizeof buf, "%llx%x",
                  static_cast<unsigned long long>(
                      std::chrono::duration_cast<std::chrono::milliseconds>(now).count()),
                  static_cast<unsigned>(getpid()));
    o.run_id = buf;
  }
  return 0;
}

double ms(std::uint64_t us) { return static_cast<double>(us) / 1000.0; }

int run(const Options& opt) {
  WorkloadParams p;
  p.prefix = opt.prefix;
  p.ns = opt.ns;
  p.name = opt.name;
  p.run_id = opt.run_id;
  p.keys_in_time_order = opt.keys_in_time_order;
  p.counters = opt.counters;
  p.verify = opt.verify;
  const std::string& wl = opt.workload;
  const bool contended = wl == "lock-contended";
  Workloads w;
  switch (opt.target) {
    case Target::ichido:
      if (wl == "counter-next")
        w.http = std::make_unique<IchidoCounterNext>(p);
      else if (wl == "once")
        w.http = std::make_unique<IchidoOnce>(p);
      else if (wl == "get")
        w.http = std::make_unique<HttpGet>(opt.prefix + opt.path);
      else if (wl == "lock-handoff")
        w.http = std::make_unique<IchidoLockHandoff>(p);
      else
        w.http = std::make_unique<IchidoLock>(p, contended);
      break;
    case Target::etcd:
      if (wl == "counter-next")
        w.http = std::make_unique<EtcdCounterNext>(p);
      else if (wl == "incr")
        w.http = std::make_unique<EtcdIncr>(p);
      else if (wl == "once")
        w.http = std::make_unique<EtcdOnce>(p);
      else if (wl == "get")
        w.http = std::make_unique<HttpGet>(opt.prefix + opt.path);
      else
        w.http = std::make_unique<EtcdLock>(p, contended);
      break;
    case Target::redis:
      if (wl == "counter-next" || wl == "incr")
        w.resp = std::make_unique<RedisCounterNext>(p, wl == "incr");
      else if (wl == "once")
        w.resp = std::make_unique<RedisOnce>(p);
      else
        w.resp = std::make_unique<RedisLock>(p, contended);
      break;
    case Target::postgres:
      if (wl == "counter-next" || wl == "incr")
        w.pg = std::make_unique<PgCounterNext>(p, wl == "incr");
      else if (wl == "once")
        w.pg = std::make_unique<PgOnce>(p);
      else
        w.pg = std::make_unique<PgLock>(p, contended);
      break;
  }

  Shared sh{opt, w, {}, {}, {}, {}, {}, {}, {}};
  if (opt.target == Target::postgres) {
    // Connect (fork a backend each) and prepare before the clock starts, not inside the warm-up.
    sh.pg_conns.assign(opt.connections, nullptr);
    for (unsigned c = 0; c < opt.connections; ++c) {
      const char* why = nullptr;
      PGconn* pg = pg_connect(opt.url, *w.pg, why);
      if (why) {
        std::fprintf(stderr, "ichido-loadgen: postgres connection %u: %s\n", c, why);
        PQfinish(pg);
        for (auto* p : sh.pg_conns)
          if (p) PQfinish(p);
        return 1;
      }
      sh.pg_conns[c] = pg;
    }
  } else {
    asio::io_context resolver_ctx;
    tcp::resolver resolver(resolver_ctx);
    for (const auto& [host, port] : opt.hosts) {
      beast::error_code ec;
      auto& eps = sh.endpoints.emplace_back();
      for (const auto& r : resolver.resolve(host, port, ec)) eps.push_back(r.endpoint());
      if (ec || eps.empty()) {
        std::fprintf(stderr, "ichido-loadgen: cannot resolve %s:%s: %s\n", host.c_str(),
                     port.c_str(), ec.message().c_str());
        return 1;
      }
    }
  }
  sh.fixed_headers = "Host: " + opt.host_header + "\r\nUser-Agent: ichido-loadgen\r\n";
  if (!opt.token.empty()) sh.fixed_headers += "Authorization: Bearer " + opt.token + "\r\n";

  const unsigned nthreads = std::min(opt.threads, opt.connections);
  std::vector<std::unique_ptr<ThreadStats>> stats;
  std::vector<std::unique_ptr<asio::io_context>> ctxs;
  std::vector<std::unique_ptr<asio::steady_timer>> watchdogs;
  std::vector<unsigned> active(nthreads, 0);
  std::atomic<unsigned> crashed{0};
  for (unsigned t = 0; t < nthreads; ++t) {
    stats.push_back(std::make_unique<ThreadStats>());
    ctxs.push_back(std::make_unique<asio::io_context>(1));
  }
  sh.start = Clock::now();
  sh.measure_start = sh.start + opt.warmup;
  sh.end = sh.measure_start + opt.duration;
  for (unsigned t = 0; t < nthreads; ++t) {
    auto& wd = *watchdogs.emplace_back(std::make_unique<asio::steady_timer>(*ctxs[t]));
    wd.expires_at(sh.end + opt.grace);
    wd.async_wait([&ctx = *ctxs[t], &st = *stats[t], &n = active[t]](beast::error_code ec) {
      if (ec) return;  // cancelled: every loop finished in time
      st.timed_out += n;
      ctx.stop();
    });
  }
  for (unsigned c = 0; c < opt.connections; ++c) {
    const unsigned t = c % nthreads;
    ++active[t];
    asio::co_spawn(*ctxs[t], connection_loop(sh, *stats[t], c, active[t], *watchdogs[t]),
                   [&crashed, &sh](std::exception_ptr e) {
                     if (!e) return;
                     ++crashed;
                     try {
                       std::rethrow_exception(e);
                     } catch (const std::exception& x) {
                       sh.samples.add(std::string("connection loop failed: ") + x.what());
                     }
                   });
  }
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < nthreads; ++t) threads.emplace_back([&ctx = *ctxs[t]] { ctx.run(); });
  ctxs[0]->run();
  for (auto& th : threads) th.join();

  ThreadStats total;
  for (const auto& s : stats) {
    total.latency_us.merge(s->latency_us);
    total.ok_in_window += s->ok_in_window;
    total.grants_in_window += s->grants_in_window;
    total.retries += s->retries;
    total.requests += s->requests;
    total.status_errors += s->status_errors;
    total.check_errors += s->check_errors;
    total.transport_errors += s->transport_errors;
    total.timed_out += s->timed_out;
  }
  const std::uint64_t errors = total.status_errors + total.check_errors + total.transport_errors +
                               total.timed_out + crashed.load();
  const double secs = std::chrono::duration<double>(opt.duration).count();
  const double ops = static_cast<double>(total.ok_in_window) / secs;
  const auto& h = total.latency_us;
  const double grants = static_cast<double>(total.grants_in_window) / secs;

  for (const auto& s : sh.samples.take())
    std::fprintf(stderr, "ichido-loadgen: error: %s\n", s.c_str());
  if (w.http) w.http->report(opt.json ? stderr : stdout);
  std::fprintf(opt.json ? stderr : stdout,
               "%s %s: conc=%u threads=%u %.1fs: %.0f ops/s, %llu ok, %llu errors "
               "(%llu non-2xx, %llu bad answers, %llu transport, %llu timed out); latency ms "
               "p50=%.3f p90=%.3f p99=%.3f p99.9=%.3f max=%.3f\n",
               opt.system.c_str(), opt.workload.c_str(), opt.connections, nthreads, secs, ops,
               static_cast<unsigned long long>(total.ok_in_window),
               static_cast<unsigned long long>(errors),
               static_cast<unsigned long long>(total.status_errors),
               static_cast<unsigned long long>(total.check_errors),
               static_cast<unsigned long long>(total.transport_errors),
               static_cast<unsigned long long>(total.timed_out), ms(h.quantile(0.5)),
               ms(h.quantile(0.9)), ms(h.quantile(0.99)), ms(h.quantile(0.999)), ms(h.max()));
  if (opt.json) {
    std::printf(
        "{\"system\":\"%s\",\"workload\":\"%s\",\"conc\":%u,\"threads\":%u,\"duration_s\":%.3f,"
        "\"ops_s\":%.1f,\"ok\":%llu,\"errors\":%llu,\"p50_ms\":%.3f,\"p90_ms\":%.3f,"
        "\"p99_ms\":%.3f,\"p999_ms\":%.3f,\"max_ms\":%.3f,\"mean_ms\":%.3f,\"grants_s\":%.1f,"
        "\"requests\":%llu,\"retries\":%llu}\n",
        opt.system.c_str(), opt.workload.c_str(), opt.connections, nthreads, secs, ops,
        static_cast<unsigned long long>(total.ok_in_window),
        static_cast<unsigned long long>(errors), ms(h.quantile(0.5)), ms(h.quantile(0.9)),
        ms(h.quantile(0.99)), ms(h.quantile(0.999)), ms(h.max()), h.mean() / 1000.0, grants,
        static_cast<unsigned long long>(total.requests),
        static_cast<unsigned long long>(total.retries));
  } else {
    std::printf(
        "system=%s workload=%s conc=%u ops_s=%.1f p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f errors=%llu "
        "p90_ms=%.3f max_ms=%.3f ok=%llu duration_s=%.3f threads=%u grants_s=%.1f requests=%llu "
        "retries=%llu\n",
        opt.system.c_str(), opt.workload.c_str(), opt.connections, ops, ms(h.quantile(0.5)),
        ms(h.quantile(0.99)), ms(h.quantile(0.999)), static_cast<unsigned long long>(errors),
        ms(h.quantile(0.9)), ms(h.max()), static_cast<unsigned long long>(total.ok_in_window), secs,
        nthreads, grants, static_cast<unsigned long long>(total.requests),
        static_cast<unsigned long long>(total.retries));
  }
  std::fflush(stdout);
  return errors == 0 ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Options opt;
    if (const int rc = parse_args(argc, argv, opt); rc != 0) return rc < 0 ? 0 : rc;
    return run(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ichido-loadgen: %s\n", e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "ichido-loadgen: unknown failure\n");
    return 1;
  }
}

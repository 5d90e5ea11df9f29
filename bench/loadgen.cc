// ichido-loadgen: a closed-loop HTTP/1.1 load generator for the ichido benchmarks.
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
#include <unistd.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
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
#include <vector>

#include "histogram.h"
#include "options.h"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using ichido::bench::Histogram;
using std::chrono::microseconds;

constexpr unsigned kMaxConnections = 4096;
constexpr unsigned kMaxThreads = 8;
constexpr std::size_t kMaxKeptBody = 4096;           // bytes of a response body kept for checks
constexpr std::uint64_t kMaxResponseBody = 1 << 20;  // larger responses are a parse error
constexpr std::size_t kMaxErrorSamples = 5;

// ---------------------------------------------------------------------------------------------
// Workloads

// One request to send. The strings are reused across requests of a connection: a workload
// assigns into them (clear + append) so that steady state allocates nothing.
struct RequestSpec {
  std::string_view method;  // must point to static storage
  std::string target;       // origin-form, e.g. /v1/ns/bench/counters/c/next
  std::string body;         // empty: no body
};

// What a benchmark does: produces request `seq` (0, 1, …) of connection `conn` and checks the
// answer. Thread-safety: make() and check() are called concurrently from the io threads for
// different connections; a workload keeps no mutable shared state (per-connection state lives in
// the `state` word the caller owns, zero at the start of a connection).
class Workload {
 public:
  virtual ~Workload() = default;
  // `state` is the connection's state word as the last check() left it.
  virtual void make(unsigned conn, std::uint64_t seq, std::uint64_t state,
                    RequestSpec& out) const = 0;
  // Called for 2xx answers only. Returns nullptr when the answer is right, else a short reason
  // (static storage).
  virtual const char* check(std::string_view body, std::uint64_t& state) const = 0;
};

void append_uint(std::string& out, std::uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// Finds `"name"` followed by optional blanks and ':' and returns the text after them.
std::optional<std::string_view> json_field(std::string_view body, std::string_view quoted_name) {
  const auto at = body.find(quoted_name);
  if (at == std::string_view::npos) return std::nullopt;
  body.remove_prefix(at + quoted_name.size());
  while (!body.empty() && (body.front() == ' ' || body.front() == '\t')) body.remove_prefix(1);
  if (body.empty() || body.front() != ':') return std::nullopt;
  body.remove_prefix(1);
  while (!body.empty() && (body.front() == ' ' || body.front() == '\t')) body.remove_prefix(1);
  return body;
}

// POST /v1/ns/{ns}/counters/{name}/next with a fresh idempotency key per request.
// Check (unless disabled): `value` is present and strictly increases on each connection (numbers
// increase in issue order, and a connection issues its next request only after the answer), and
// the answer is not a replay (every key is new).
class CounterNext final : public Workload {
 public:
  CounterNext(std::string_view prefix, std::string_view ns, std::string_view name,
              std::string_view run_id, bool verify)
      : verify_(verify) {
    target_.append(prefix)
        .append("/v1/ns/")
        .append(ns)
        .append("/counters/")
        .append(name)
        .append("/next");
    key_prefix_.append("{\"key\":\"k-").append(run_id).append("-");
  }

  void make(unsigned conn, std::uint64_t seq, std::uint64_t, RequestSpec& out) const override {
    out.method = "POST";
    if (out.target != target_) out.target = target_;
    out.body.clear();
    out.body.append(key_prefix_);
    append_uint(out.body, conn);
    out.body.push_back('-');
    append_uint(out.body, seq);
    out.body.append("\"}");
  }

  const char* check(std::string_view body, std::uint64_t& last_value) const override {
    if (!verify_) return nullptr;
    const auto v = json_field(body, "\"value\"");
    if (!v) return "answer has no \"value\"";
    std::uint64_t value = 0;
    const auto r = std::from_chars(v->data(), v->data() + v->size(), value);
    if (r.ec != std::errc{}) return "\"value\" is not an unsigned integer";
    if (value <= last_value) return "\"value\" did not increase on this connection";
    last_value = value;
    const auto replayed = json_field(body, "\"replayed\"");
    if (replayed && replayed->starts_with("true")) return "fresh key answered as a replay";
    return nullptr;
  }

 private:
  bool verify_;
  std::string target_;
  std::string key_prefix_;
};

// GET of a fixed path (e.g. /healthz): the plain HTTP round trip. Any 2xx is right.
class Get final : public Workload {
 public:
  Get(std::string_view prefix, std::string_view path) { target_.append(prefix).append(path); }
  void make(unsigned, std::uint64_t, std::uint64_t, RequestSpec& out) const override {
    out.method = "GET";
    if (out.target != target_) out.target = target_;
    out.body.clear();
  }
  const char* check(std::string_view, std::uint64_t&) const override { return nullptr; }

 private:
  std::string target_;
};

// Once records: begin + complete pairs on unique keys. Even requests of a connection are
// POST .../once/begin for a fresh key (must answer acquired; its token goes to the state word),
// odd ones POST .../once/complete with that token (must answer completed). Each pair is two
// durable commits; pairs/s = ops/s / 2.
class OncePairs final : public Workload {
 public:
  OncePairs(std::string_view prefix, std::string_view ns, std::string_view run_id) {
    begin_.append(prefix).append("/v1/ns/").append(ns).append("/once/begin");
    complete_.append(prefix).append("/v1/ns/").append(ns).append("/once/complete");
    key_prefix_.append("{\"key\":\"once-").append(run_id).append("-");
  }

  void make(unsigned conn, std::uint64_t seq, std::uint64_t token,
            RequestSpec& out) const override {
    out.method = "POST";
    const bool begin = seq % 2 == 0;
    const std::string& target = begin ? begin_ : complete_;
    if (out.target != target) out.target = target;
    out.body.clear();
    out.body.append(key_prefix_);
    append_uint(out.body, conn);
    out.body.push_back('-');
    append_uint(out.body, seq / 2);
    if (begin) {
      out.body.append("\",\"owner\":\"loadgen\",\"lease_ms\":60000}");
    } else {
      out.body.append("\",\"token\":");
      append_uint(out.body, token);
      out.body.append(",\"result\":{\"ok\":true}}");
    }
  }

  const char* check(std::string_view body, std::uint64_t& token) const override {
    const auto outcome = json_field(body, "\"outcome\"");
    if (!outcome) return "answer has no \"outcome\"";
    if (outcome->starts_with("\"completed\"")) return nullptr;
    if (!outcome->starts_with("\"acquired\"")) return "a fresh key was not acquired";
    const auto t = json_field(body, "\"token\"");
    if (!t) return "acquired without a token";
    std::uint64_t value = 0;
    const auto r = std::from_chars(t->data(), t->data() + t->size(), value);
    if (r.ec != std::errc{}) return "\"token\" is not an unsigned integer";
    if (value <= token) return "tokens did not increase on this connection";
    token = value;
    return nullptr;
  }

 private:
  std::string begin_, complete_, key_prefix_;
};

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

struct Options {
  std::string url = "http://127.0.0.1:7878";
  std::string host, port, prefix;
  std::string host_header;  // HOST:PORT as written in the URL (IPv6 keeps its brackets)
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
  std::string run_id;
  std::string system = "ichido";
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
  std::uint64_t ok_in_window = 0;
  std::uint64_t requests = 0;  // answers received, whole run
  std::uint64_t status_errors = 0;
  std::uint64_t check_errors = 0;
  std::uint64_t transport_errors = 0;
  std::uint64_t timed_out = 0;  // connections still waiting when the grace period ended
};

struct Shared {
  const Options& opt;
  const Workload& workload;
  std::vector<tcp::endpoint> endpoints;
  std::string fixed_headers;  // Host, auth, …, each ending in CRLF
  Clock::time_point start, measure_start, end;
  ErrorSamples samples;
};

std::string clip(std::string_view s) {
  constexpr std::size_t kMax = 300;
  std::string out(s.substr(0, kMax));
  for (char& c : out)
    if (c == '\n' || c == '\r') c = ' ';
  if (s.size() > kMax) out += "…";
  return out;
}

void build_request(const Shared& sh, const RequestSpec& spec, std::string& out) {
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

// One connection's closed loop. `active` counts the running loops of this thread.
asio::awaitable<void> connection_loop(Shared& sh, ThreadStats& st, unsigned conn, unsigned& active,
                                      asio::steady_timer& watchdog) {
  auto ex = co_await asio::this_coro::executor;
  tcp::socket sock(ex);
  beast::flat_buffer buf(16 * 1024);
  std::string request, body;
  request.reserve(1024);
  body.reserve(kMaxKeptBody);
  RequestSpec spec;
  std::uint64_t seq = 0, check_state = 0;
  bool connected = false;
  beast::error_code ec;

  while (Clock::now() < sh.end) {
    if (!connected) {
      co_await asio::async_connect(sock, sh.endpoints,
                                   asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        ++st.transport_errors;
        sh.samples.add("connect: " + ec.message());
        sock.close(ec);
        asio::steady_timer backoff(ex, std::chrono::milliseconds(100));
        co_await backoff.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        continue;
      }
      sock.set_option(tcp::no_delay(true), ec);
      connected = true;
      check_state = 0;
      buf.clear();
    }
    sh.workload.make(conn, seq, check_state, spec);
    build_request(sh, spec, request);
    const auto t0 = Clock::now();
    co_await asio::async_write(sock, asio::buffer(request),
                               asio::redirect_error(asio::use_awaitable, ec));
    std::optional<ResponseParser> parser;
    if (!ec) {
      parser.emplace(body);
      co_await http::async_read(sock, buf, *parser, asio::redirect_error(asio::use_awaitable, ec));
    }
    const auto t1 = Clock::now();
    ++seq;
    if (ec) {
      ++st.transport_errors;
      sh.samples.add("transport: " + ec.message());
      sock.close(ec);
      connected = false;
      continue;
    }
    ++st.requests;
    const int status = parser->status();
    if (status < 200 || status > 299) {
      ++st.status_errors;
      sh.samples.add("HTTP " + std::to_string(status) + ": " + clip(body));
    } else if (const char* why = sh.workload.check(body, check_state)) {
      ++st.check_errors;
      sh.samples.add(std::string("check: ") + why + ": " + clip(body));
    } else if (t1 >= sh.measure_start && t1 < sh.end) {
      ++st.ok_in_window;
      st.latency_us.record(
          static_cast<std::uint64_t>(std::chrono::duration_cast<microseconds>(t1 - t0).count()));
    }
    if (!parser->keep_alive()) {
      sock.close(ec);
      connected = false;
    }
  }
  sock.close(ec);
  if (--active == 0) watchdog.cancel();
}

// ---------------------------------------------------------------------------------------------
// Command line and output

void usage(std::FILE* to) {
  std::fprintf(
      to,
      "usage: ichido-loadgen [options]\n"
      "  --url URL            server base URL (default http://127.0.0.1:7878)\n"
      "  --connections N      keep-alive connections, each a closed loop (1-%u, default 16)\n"
      "  --threads N          io threads (1-%u, default 1)\n"
      "  --duration D         measured time, e.g. 10s, 500ms (default 10s, max 1h)\n"
      "  --warmup D           unmeasured time before it (default 2s, max 10m)\n"
      "  --grace D            how long in-flight requests may finish after it (default 10s)\n"
      "  --workload W         counter-next (default) | once | get\n"
      "  --ns NS --name NAME  counter for counter-next (default bench/bench)\n"
      "  --path PATH          path for get (default /healthz)\n"
      "  --token T            send Authorization: Bearer T\n"
      "  --run-id ID          idempotency keys are k-ID-CONN-SEQ (default: time and pid)\n"
      "  --no-verify          only check the status code (e.g. against ichido-ok-server)\n"
      "  --system NAME        label of the machine line (default ichido)\n"
      "  --json               print a JSON object instead of the machine line\n",
      kMaxConnections, kMaxThreads);
}

bool valid_name(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'))
      return false;
  return true;
}

// Accepts http://HOST[:PORT][/PREFIX]. No TLS.
bool parse_url(Options& o) {
  std::string_view u = o.url;
  if (!u.starts_with("http://")) return false;
  u.remove_prefix(7);
  const auto slash = u.find('/');
  std::string_view hostport = u.substr(0, slash);
  o.host_header = hostport;
  o.prefix = slash == std::string_view::npos ? "" : std::string(u.substr(slash));
  while (!o.prefix.empty() && o.prefix.back() == '/') o.prefix.pop_back();
  const auto colon = hostport.rfind(':');
  if (colon == std::string_view::npos) {
    o.host = hostport;
    o.port = "80";
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
    if (i + 1 >= argc) {
      std::fprintf(stderr, "ichido-loadgen: %s needs a value (or is unknown)\n", argv[i]);
      return 2;
    }
    const std::string_view v = argv[++i];
    bool ok = true;
    if (a == "--url") {
      o.url = v;
      ok = parse_url(o);
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
      ok = v == "counter-next" || v == "once" || v == "get";
    } else if (a == "--ns") {
      o.ns = v;
      ok = valid_name(v);
    } else if (a == "--name") {
      o.name = v;
      ok = valid_name(v);
    } else if (a == "--path") {
      o.path = v;
      ok = v.starts_with('/') && v.find_first_of(" \r\n") == std::string_view::npos;
    } else if (a == "--token") {
      o.token = v;
      ok = v.find_first_of("\r\n") == std::string_view::npos;
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
  if (o.host.empty() && !parse_url(o)) return 2;
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
  std::unique_ptr<Workload> workload;
  if (opt.workload == "counter-next")
    workload = std::make_unique<CounterNext>(opt.prefix, opt.ns, opt.name, opt.run_id, opt.verify);
  else if (opt.workload == "once")
    workload = std::make_unique<OncePairs>(opt.prefix, opt.ns, opt.run_id);
  else
    workload = std::make_unique<Get>(opt.prefix, opt.path);

  Shared sh{opt, *workload, {}, {}, {}, {}, {}, {}};
  {
    asio::io_context resolver_ctx;
    tcp::resolver resolver(resolver_ctx);
    beast::error_code ec;
    for (const auto& r : resolver.resolve(opt.host, opt.port, ec))
      sh.endpoints.push_back(r.endpoint());
    if (ec || sh.endpoints.empty()) {
      std::fprintf(stderr, "ichido-loadgen: cannot resolve %s:%s: %s\n", opt.host.c_str(),
                   opt.port.c_str(), ec.message().c_str());
      return 1;
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

  for (const auto& s : sh.samples.take())
    std::fprintf(stderr, "ichido-loadgen: error: %s\n", s.c_str());
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
        "\"p99_ms\":%.3f,\"p999_ms\":%.3f,\"max_ms\":%.3f,\"mean_ms\":%.3f}\n",
        opt.system.c_str(), opt.workload.c_str(), opt.connections, nthreads, secs, ops,
        static_cast<unsigned long long>(total.ok_in_window),
        static_cast<unsigned long long>(errors), ms(h.quantile(0.5)), ms(h.quantile(0.9)),
        ms(h.quantile(0.99)), ms(h.quantile(0.999)), ms(h.max()), h.mean() / 1000.0);
  } else {
    std::printf(
        "system=%s workload=%s conc=%u ops_s=%.1f p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f errors=%llu "
        "p90_ms=%.3f max_ms=%.3f ok=%llu duration_s=%.3f threads=%u\n",
        opt.system.c_str(), opt.workload.c_str(), opt.connections, ops, ms(h.quantile(0.5)),
        ms(h.quantile(0.99)), ms(h.quantile(0.999)), static_cast<unsigned long long>(errors),
        ms(h.quantile(0.9)), ms(h.max()), static_cast<unsigned long long>(total.ok_in_window), secs,
        nthreads);
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

// ichido-soak: the fault harness's driver (docs/reliability.md). Runs the real `ichido serve`
// under a mixed load (workload.h) and, while the load runs, injects faults:
//   - kill -9 at random moments (also within milliseconds of start-up), then a restart on the
//     same data directory, `--cycles` times;
//   - disk full: the data directory lives on a small tmpfs that is filled to the last byte while
//     the load runs, then the space is freed again;
//   - SIGSTOP for longer than every lease, then SIGCONT;
//   - damaged data directories (copies of the run's store: emptied, deleted, damaged pages).
// With --store URL the node runs on PostgreSQL (a schema of its own per run): the kill -9 cycles,
// the SIGSTOPs, the load and every check of the history are the same; the disk-full and
// damaged-data-dir phases and `ichido check` are the embedded store's and are skipped.
// Every request and answer goes to OUT/history.jsonl, the store as read after the last restart to
// OUT/final.json, and the driver's own checks (what each fault phase must show) with the run's
// numbers to OUT/run.json. tests/soak/check_history.py checks the history against the rules;
// scripts/soak runs both.
//
// The pauses in here (how long the server runs before it is killed, how long it stays frozen)
// are the experiment's random schedule, not waits for an event; every wait for an event (the
// listening line, the first 503 after the disk filled) is bounded and checked.
#include <signal.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "disk.h"
#include "history.h"
#include "server_control.h"
#include "workload.h"

namespace ichido::soak {
namespace {
namespace json = boost::json;
using std::chrono::milliseconds;

struct Options {
  std::string ichido;
  std::string out;
  int cycles = 100;
  int sigstops = 4;
  int disk_fulls = 2;
  int clients = 12;
  int burst_clients = 4;
  int min_up_ms = 200;
  int max_up_ms = 2000;
  int tmpfs_mib = 256;
  std::int64_t bounded_max = 400;
  std::uint64_t seed = 0;
  bool no_disk_full = false;
  bool no_damaged = false;
  std::string store;  // a PostgreSQL URL: the node runs on it (--store), else the embedded store
  int nodes = 1;      // with --store: this many nodes on the one store
  // With --store: a cluster of scripts/pg-test-cluster's (its DIR and the script) that the run may
  // restart and crash under the nodes, --store-faults times.
  std::string pg_cluster, pg_script;
  int store_faults = 0;
};

// ^C or a CTest timeout (SIGTERM): the server children die with the driver (PR_SET_PDEATHSIG in
// server_control.cc); the tmpfs is unmounted here. Only async-signal-safe calls.
char g_mount_point[4096];
void on_fatal_signal(int sig) {
  if (g_mount_point[0] != 0) ::umount2(g_mount_point, MNT_DETACH);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string first_lines(const std::string& text, std::size_t max = 600) {
  return text.size() <= max ? text : text.substr(0, max) + "…";
}

// Where a failing script's reason is: the end of the log it prints.
std::string last_lines(const std::string& text, std::size_t max = 1200) {
  return text.size() <= max ? text : "…" + text.substr(text.size() - max);
}

// A command that failed for the reason under test, not because it was called wrongly (an
// unknown subcommand or option is a usage error, not a finding).
bool failed_for_real(const ProcessOutcome& o) {
  return o.exited && o.exit_code > 0 && o.output.find("usage") == std::string::npos &&
         o.output.find("not expected") == std::string::npos;
}

class Driver {
 public:
  explicit Driver(Options o) : opt_(std::move(o)) {}
  int run();

 private:
  void check(const std::string& phase, const std::string& name, bool ok,
             const std::string& detail = "");
  // Starts `node` (node 0 when null) again on its data directory.
  bool restart(const std::string& why, ServerControl* node = nullptr);
  void pause(int lo_ms, int hi_ms);
  // Kills one node (a random one of several) and returns it, to be restarted.
  ServerControl* kill_cycle(int n, bool copy_after);
  Nodes nodes() const;
  void sigstop_episode(int n);
  void disk_full_episode(int n);
  void store_fault_episode(int n);
  void damaged_dirs();
  bool probe_write(Caller& c, const std::string& key, Answer* out);
  void write_run_json(double seconds);

  Options opt_;
  std::mt19937_64 rng_;
  std::string mnt_, data_, copies_;
  bool mounted_ = false;
  std::unique_ptr<History> history_;
  std::unique_ptr<ServerControl> server_;               // node 0: probes and the final read go here
  std::vector<std::unique_ptr<ServerControl>> others_;  // nodes 1.. (--nodes)
  std::unique_ptr<Workload> load_;
  json::array checks_;
  int failed_checks_ = 0;
  int cycles_done_ = 0;
  int startup_kills_ = 0;
  int supervisor_restarts_ = 0;
  int sigstops_done_ = 0;
  int disk_fulls_done_ = 0;
  int store_faults_done_ = 0;
  json::object final_counters_;
  std::int64_t final_keyed_last_ = -1;
};

void Driver::check(const std::string& phase, const std::string& name, bool ok,
                   const std::string& detail) {
  checks_.push_back(json::object{{"phase", phase}, {"name", name}, {"ok", ok}, {"detail", detail}});
  if (!ok) ++failed_checks_;
  std::cerr << "soak: [" << phase << "] " << (ok ? "ok  " : "FAIL") << " " << name
            << (detail.empty() ? "" : ": " + detail) << std::endl;
  if (history_) history_->event("check", {{"phase", phase}, {"name", name}, {"ok", ok}});
}

void Driver::pause(int lo_ms, int hi_ms) {
  std::this_thread::sleep_for(milliseconds(std::uniform_int_distribution<int>(lo_ms, hi_ms)(rng_)));
}

Nodes Driver::nodes() const {
  Nodes all{server_.get()};
  for (const auto& o : others_) all.push_back(o.get());
  return all;
}

bool Driver::restart(const std::string& why, ServerControl* node) {
  ServerControl& s = node ? *node : *server_;
  std::string error;
  if (s.start(&error)) {
    history_->event("start", {{"why", why}, {"port", s.port()}, {"pid", s.pid()}});
    return true;
  }
  check("restart", "the server starts again on the same data directory (" + why + ")", false,
        error);
  return false;
}

ServerControl* Driver::kill_cycle(int n, bool copy_after) {
  ServerControl* victim = server_.get();
  if (!others_.empty()) {
    const auto i = std::uniform_int_distribution<std::size_t>(0, others_.size())(rng_);
    if (i > 0) victim = others_[i - 1].get();
  }
  // Where the kill lands: mostly under load after a random run time; sometimes within
  // milliseconds of the listening line; sometimes during start-up itself (then a normal start).
  const int kind = std::uniform_int_distribution<int>(0, 99)(rng_);
  if (kind < 10) {
    pause(0, 60);
  } else {
    pause(opt_.min_up_ms, opt_.max_up_ms);
  }
  history_->event("kill", {{"cycle", n}, {"port", victim->port()}});
  victim->kill9();
  if (copy_after && opt_.store.empty()) {
    const std::string err = copy_dir(data_, copies_ + "/killed");
    check("kill", "copy of the data directory right after kill -9", err.empty(), err);
  }
  pause(0, 200);  // the server stays down: clients get "connection refused"
  if (kind >= 92) {
    const int delay = std::uniform_int_distribution<int>(0, 40)(rng_);
    history_->event("kill_during_startup", {{"cycle", n}, {"delay_ms", delay}});
    victim->start_then_kill(milliseconds(delay));
    ++startup_kills_;
  }
  return victim;
}

bool Driver::probe_write(Caller& c, const std::string& key, Answer* out) {
  json::object body{{"key", key}};
  Caller::Call call{"counter.next",
                    {{"counter", "keyed"}, {"key", key}},
                    "POST",
                    "/v1/ns/soak/counters/keyed/next",
                    json::serialize(body)};
  *out = c.with_retries(call, Retry::never, 1);
  return out->status == 200;
}

void Driver::sigstop_episode(int n) {
  const std::string phase = "sigstop";
  const std::string name = "stop-probe-" + std::to_string(n);
  load_->add_final_lock(name);
  load_->add_final_once_key(name);
  // A on node 0, which is frozen; B on another node when there are several (it takes over while
  // node 0 is still frozen), else on node 0 too.
  Caller a = load_->make_caller(1000 + 2 * n, 0);
  Caller b = load_->make_caller(1001 + 2 * n, others_.empty() ? 0 : 1);
  const std::string lock = "/v1/ns/soak/locks/" + name;
  auto acquire = [&](Caller& c, const std::string& owner, int lease) {
    json::object body{
        {"owner", owner}, {"lease_ms", lease}, {"wait_ms", 0}, {"request_id", owner + "-" + name}};
    json::object args = body;
    args["lock"] = name;
    return c.with_retries({"lock.acquire", args, "POST", lock + "/acquire", json::serialize(body)},
                          Retry::on_503_or_lost, 40);
  };
  auto begin = [&](Caller& c, const std::string& owner, int lease) {
    json::object body{{"key", name},
                      {"owner", owner},
                      {"lease_ms", lease},
                      {"request_id", owner + "-" + name},
                      {"wait_ms", 0}};
    return c.with_retries(
        {"once.begin", body, "POST", "/v1/ns/soak/once/begin", json::serialize(body)},
        Retry::on_503_or_lost, 40);
  };
  const Answer a_lock = acquire(a, "probe-A", 1000);
  const Answer a_once = begin(a, "probe-A", 1000);
  const bool a_ok = a_lock.status == 200 && a_lock.int_of("token") > 0 && a_once.status == 200 &&
                    a_once.str_of("outcome") == "acquired";
  check(phase, name + ": probe A acquires a lock and a once key (lease 1 s)", a_ok,
        json::serialize(a_lock.body) + " " + json::serialize(a_once.body));
  if (!a_ok) return;
  // Frozen for longer than every lease of the run (1–2.5 s): when it runs again, every lease
  // that was live when it stopped has lapsed by its own clock.
  const int stop_ms = std::uniform_int_distribution<int>(3000, 4500)(rng_);
  history_->event("sigstop", {{"n", n}, {"ms", stop_ms}});
  server_->sigstop();
  std::this_thread::sleep_for(milliseconds(stop_ms));
  server_->sigcont();
  history_->event("sigcont", {{"n", n}});
  ++sigstops_done_;
  const Answer b_lock = acquire(b, "probe-B", 10000);
  const Answer b_once = begin(b, "probe-B", 10000);
  check(phase, name + ": after SIGCONT probe B gets the lapsed lock with a larger token",
        b_lock.status == 200 && b_lock.body.is_object() &&
            b_lock.body.as_object().contains("acquired") &&
            b_lock.body.as_object().at("acquired") == true &&
            b_lock.int_of("token") > a_lock.int_of("token"),
        json::serialize(b_lock.body));
  check(phase, name + ": after SIGCONT probe B takes the once key over (attempt 2, larger token)",
        b_once.status == 200 && b_once.str_of("outcome") == "acquired" &&
            b_once.int_of("attempt") == 2 && b_once.int_of("token") > a_once.int_of("token"),
        json::serialize(b_once.body));
  // The lapsed holder's late calls must be refused: its token no longer holds anything.
  json::object rel{{"token", a_lock.int_of("token")}};
  json::object rel_args = rel;
  rel_args["lock"] = name;
  const Answer a_rel =
      a.with_retries({"lock.release", rel_args, "POST", lock + "/release", json::serialize(rel)},
                     Retry::on_503_or_lost, 40);
  check(phase, name + ": probe A's late release is 409 not_holder",
        a_rel.status == 409 && a_rel.code() == "not_holder", std::to_string(a_rel.status));
  json::object comp{{"key", name},
                    {"token", a_once.int_of("token")},
                    {"result", json::object{{"by", "probe-A"}}}};
  const Answer a_comp = a.with_retries(
      {"once.complete", comp, "POST", "/v1/ns/soak/once/complete", json::serialize(comp)},
      Retry::on_503_or_lost, 40);
  check(phase, name + ": probe A's late complete is 409 stale_token",
        a_comp.status == 409 && a_comp.code() == "stale_token", std::to_string(a_comp.status));
  json::object rel_b{{"token", b_lock.int_of("token")}};
  json::object rel_b_args = rel_b;
  rel_b_args["lock"] = name;
  const Answer b_rel = b.with_retries(
      {"lock.release", rel_b_args, "POST", lock + "/release", json::serialize(rel_b)},
      Retry::on_503_or_lost, 40);
  json::object comp_b{{"key", name},
                      {"token", b_once.int_of("token")},
                      {"result", json::object{{"by", "probe-B"}}}};
  const Answer b_comp = b.with_retries(
      {"once.complete", comp_b, "POST", "/v1/ns/soak/once/complete", json::serialize(comp_b)},
      Retry::on_503_or_lost, 40);
  check(phase, name + ": probe B releases and completes",
        b_rel.status == 200 && b_comp.status == 200,
        std::to_string(b_rel.status) + " " + std::to_string(b_comp.status));
}

// PostgreSQL goes away under the nodes and comes back on the same address: a fast restart (odd
// episodes) or a crash of every PostgreSQL process followed by a start (crash recovery; even
// ones). The load keeps running: writes in flight get 503 store_unavailable (with
// details.outcome "unknown" when the COMMIT itself was cut off; the checker counts those as
// unanswered), and every node must recover on its own — no node is restarted here.
void Driver::store_fault_episode(int n) {
  const std::string phase = "store-fault";
  const std::string kind = n % 2 == 1 ? "restart" : "crash";
  pause(opt_.min_up_ms, opt_.max_up_ms);
  const std::int64_t t_fault = history_->now_us();
  history_->event("store_" + kind, {{"n", n}});
  bool ok = false;
  std::string detail;
  if (kind == "restart") {
    const ProcessOutcome r =
        run_bounded({opt_.pg_script, "restart", opt_.pg_cluster}, std::chrono::seconds(120));
    ok = r.exited && r.exit_code == 0;
    detail = last_lines(r.output);
  } else {
    const ProcessOutcome k =
        run_bounded({opt_.pg_script, "kill", opt_.pg_cluster}, std::chrono::seconds(60));
    pause(200, 1500);  // down: every write is refused meanwhile
    const ProcessOutcome r =
        run_bounded({opt_.pg_script, "resume", opt_.pg_cluster}, std::chrono::seconds(120));
    ok = k.exited && k.exit_code == 0 && r.exited && r.exit_code == 0;
    detail = last_lines(k.output + r.output);
  }
  history_->event("store_back", {{"n", n}, {"ok", ok}});
  check(phase, "PostgreSQL " + kind + " " + std::to_string(n) + " and back", ok, detail);
  if (!ok) return;
  ++store_faults_done_;
  if (kind == "crash") {  // down for 0.2–1.5 s under a dozen writing clients
    check(phase, "writes are refused with 503 store_unavailable while PostgreSQL is down",
          load_->last_write_503_us() >= t_fault);
  }
  // Writes acknowledged after PostgreSQL is back, with no node restarted.
  const auto acked = load_->writes_acked();
  const auto t_back = std::chrono::steady_clock::now();
  const auto deadline = t_back + std::chrono::seconds(30);
  while (load_->writes_acked() <= acked + 20 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  const auto ms =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t_back).count();
  check(phase, "writes are acknowledged again after PostgreSQL's " + kind + ", no node restarted",
        load_->writes_acked() > acked + 20,
        std::to_string(load_->writes_acked() - acked) + " writes acknowledged in " +
            std::to_string(ms) + " ms");
  std::vector<ServerControl*> all{server_.get()};
  for (auto& o : others_) all.push_back(o.get());
  for (ServerControl* node : all) {
    std::string how;
    check(phase, "node on port " + std::to_string(node->port()) + " kept running through " + kind,
          node->alive(&how), how);
  }
}

void Driver::disk_full_episode(int n) {
  const std::string phase = "disk-full";
  if (!mounted_) return;
  Caller probe = load_->make_caller(1100 + n);
  const std::string filler = mnt_ + "/filler-" + std::to_string(n);
  const std::int64_t t_fill = history_->now_us();
  history_->event("disk_fill", {{"n", n}});
  std::string error;
  const long long bytes = fill_until_full(filler, &error);
  history_->event("disk_full", {{"n", n}, {"filler_bytes", bytes}});
  if (bytes < 0) {
    check(phase, "fill the tmpfs", false, error);
    std::filesystem::remove(filler);
    return;
  }
  ++disk_fulls_done_;
  // The load keeps writing; the disk is full once a write is refused with 503 store_unavailable.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (load_->last_write_503_us() < t_fill && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  const bool refused = load_->last_write_503_us() >= t_fill;
  check(phase, "writes are refused with 503 store_unavailable while the disk is full", refused,
        refused ? "first refusal " + std::to_string((load_->last_write_503_us() - t_fill) / 1000) +
                      " ms after the fill began"
                : "no 503 within 30 s of filling the disk");
  std::string how;
  check(phase, "the server keeps running while the disk is full", server_->alive(&how), how);
  if (server_->running()) {
    Caller::Call get{
        "counter.get", {{"counter", "keyed"}}, "GET", "/v1/ns/soak/counters/keyed", ""};
    const Answer r = probe.with_retries(get, Retry::never, 1);
    check(phase, "reads are answered while the disk is full", r.status == 200,
          std::to_string(r.status) + " " + r.error);
    // The soak server runs with --min-free-disk 1MiB: below that, /readyz says not ready (with the
    // default, 0, it stays 200 and only the writes fail with 503).
    cli::BaseUrl url;
    url.host = "127.0.0.1";
    url.port = server_->port();
    cli::HttpClient http(url, cli::ClientOptions{});
    auto y = http.get("/readyz");
    check(phase, "/readyz is 503 while the disk is full (serve --min-free-disk 1MiB)",
          y.ok() && y.response->status == 503,
          y.ok() ? std::to_string(y.response->status) + " " + first_lines(y.response->body)
                 : y.error);
  }
  pause(1500, 3000);  // the load runs on against the full disk
  std::filesystem::remove(filler);
  history_->event("disk_freed", {{"n", n}});
  // Space is back: writes must succeed again. A server that latched (healthz 503) is restarted
  // the way a supervisor would restart it.
  const auto t_freed = std::chrono::steady_clock::now();
  bool written = false;
  bool restarted = false;
  Answer w;
  for (int attempt = 0; attempt < 100 && !written; ++attempt) {
    if (!server_->alive(&how)) {
      history_->event("supervisor_restart", {{"reason", "exited " + how}});
      ++supervisor_restarts_;
      restarted = true;
      if (!restart("supervisor restart after the disk was full")) return;
    } else if (attempt == 20) {
      // Still refusing writes 2 s after the space came back: ask /healthz like a supervisor.
      cli::BaseUrl url;
      url.host = "127.0.0.1";
      url.port = server_->port();
      cli::HttpClient http(url, cli::ClientOptions{});
      auto h = http.get("/healthz");
      if (h.ok() && h.response->status != 200) {
        history_->event("supervisor_restart",
                        {{"reason", "healthz " + std::to_string(h.response->status)}});
        ++supervisor_restarts_;
        restarted = true;
        server_->kill9();
        if (!restart("supervisor restart: /healthz said the process must be restarted")) return;
      }
    }
    written = probe_write(probe, "disk-probe-" + std::to_string(n), &w);
    if (!written) std::this_thread::sleep_for(milliseconds(100));
  }
  const auto ms =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t_freed).count();
  check(phase, "writes succeed again once space is freed", written,
        (written ? "after " + std::to_string(ms) + " ms"
                 : "still failing after 10 s: " + std::to_string(w.status)) +
            (restarted ? " (after a supervisor restart)" : " (no restart needed)"));
  cli::BaseUrl url;
  url.host = "127.0.0.1";
  url.port = server_->port();
  cli::HttpClient http(url, cli::ClientOptions{});
  auto r = http.get("/readyz");
  check(phase, "/readyz is 200 once writes succeed again", r.ok() && r.response->status == 200,
        r.ok() ? std::to_string(r.response->status) + " " + r.response->body : r.error);
}

// The page number of table `table`'s root in the SQLite file `db` (0 when it cannot be read).
std::int64_t root_page(const std::string& db, const std::string& table, std::int64_t* page_size) {
  sqlite3* h = nullptr;
  std::int64_t root = 0;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    const std::string sql = "SELECT rootpage FROM sqlite_schema WHERE name = '" + table + "'";
    if (sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
      root = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(h, "PRAGMA page_size", -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
      *page_size = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(h);
  return root;
}

void Driver::damaged_dirs() {
  const std::string phase = "damaged";
  const std::string clean = copies_ + "/clean";
  const std::string work = copies_ + "/work";
  std::filesystem::create_directories(work);
  const auto serve_args = [&](const std::string& dir, std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {opt_.ichido, "serve", "--listen", "127.0.0.1:0",
                                  "--data",    dir,     "--no-auth"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const auto check_args = [&](const std::string& dir) {
    return std::vector<std::string>{opt_.ichido, "check", "--data", dir};
  };
  // A store that needs an operator: `serve` exits 4 ("do not restart automatically", serve
  // --help) before it listens.
  const auto refuses = [&](const std::string& what, const std::string& dir) {
    const ProcessOutcome o = run_bounded(serve_args(dir), std::chrono::seconds(20));
    const bool ok = o.exited && o.exit_code == 4 && !o.listening;
    check(phase, what + ": `ichido serve` refuses to start (exit 4: needs an operator)", ok,
          (o.listening ? "it started and listened" : "exit " + std::to_string(o.exit_code)) + ": " +
              first_lines(o.output));
    // Start-up errors speak of start-up: no request was made, so "retry the same request" misleads.
    check(phase, what + ": the refusal is in start-up words, not the API's retry advice",
          o.output.find("retry the same request") == std::string::npos, first_lines(o.output));
    return o;
  };

  // D0, the control: an undamaged copy starts, holds what the run left, and `check` passes.
  {
    const std::string dir = work + "/control";
    copy_dir(clean, dir);
    ServerControl s(opt_.ichido, dir, work + "/control.log", {"--no-auth"});
    std::string error;
    const bool started = s.start(&error);
    check(phase, "control: an undamaged copy of the store starts", started, error);
    if (started) {
      cli::BaseUrl url;
      url.host = "127.0.0.1";
      url.port = s.port();
      cli::HttpClient http(url, cli::ClientOptions{.token = std::string()});
      auto r = http.get("/v1/ns/soak/counters/keyed");
      std::int64_t last = -1;
      if (r.ok() && r.response->status == 200) {
        boost::system::error_code ec;
        json::value v = json::parse(r.response->body, ec);
        if (!ec && v.is_object() && v.as_object().at("last_value").is_int64()) {
          last = v.as_object().at("last_value").as_int64();
        }
      }
      check(phase, "control: the copy holds the run's counter", last == final_keyed_last_,
            "last_value " + std::to_string(last) + ", final read " +
                std::to_string(final_keyed_last_));
      const int code = s.stop();
      check(phase, "control: SIGTERM stops it with exit 0", code == 0, std::to_string(code));
    }
    const ProcessOutcome c = run_bounded(check_args(dir), std::chrono::seconds(120));
    check(phase, "control: `ichido check` passes on an undamaged store",
          c.exited && c.exit_code == 0,
          "exit " + std::to_string(c.exit_code) + ": " + first_lines(c.output));
  }

  // D1: ichido.db emptied (`: > ichido.db`) after a clean stop.
  const std::string emptied = work + "/emptied";
  {
    copy_dir(clean, emptied);
    const std::string id_before = read_file(emptied + "/ichido.id");
    std::filesystem::resize_file(emptied + "/ichido.db", 0);
    const ProcessOutcome o = refuses("ichido.db emptied", emptied);
    check(phase, "ichido.db emptied: the message names ichido.db and the way out (--init)",
          o.output.find("ichido.db") != std::string::npos &&
              o.output.find("--init") != std::string::npos,
          first_lines(o.output));
    check(phase,
          "ichido.db emptied: the refusal changes nothing (ichido.db still empty, "
          "ichido.id unchanged)",
          file_size_of(emptied + "/ichido.db") == 0 && !id_before.empty() &&
              read_file(emptied + "/ichido.id") == id_before,
          "ichido.db " + std::to_string(file_size_of(emptied + "/ichido.db")) +
              " bytes, ichido.id " + (id_before.empty() ? "missing" : "present"));
  }
  // D2: ichido.db deleted (with its WAL and shared-memory files).
  {
    const std::string dir = work + "/deleted";
    copy_dir(clean, dir);
    for (const char* f : {"/ichido.db", "/ichido.db-wal", "/ichido.db-shm"}) {
      std::filesystem::remove(dir + f);
    }
    const ProcessOutcome o = refuses("ichido.db deleted", dir);
    check(phase, "ichido.db deleted: the message names ichido.db and the way out (--init)",
          o.output.find("ichido.db") != std::string::npos &&
              o.output.find("--init") != std::string::npos,
          first_lines(o.output));
    check(phase, "ichido.db deleted: the refusal creates no new store",
          file_size_of(dir + "/ichido.db") <= 0,
          std::to_string(file_size_of(dir + "/ichido.db")) + " bytes");
  }
  // D3: ichido.db emptied in the copy taken right after a kill -9 (its WAL still there).
  if (std::filesystem::exists(copies_ + "/killed")) {
    const std::string dir = work + "/killed-emptied";
    copy_dir(copies_ + "/killed", dir);
    std::filesystem::resize_file(dir + "/ichido.db", 0);
    refuses("ichido.db emptied after kill -9 (WAL left behind)", dir);
  }
  // D4: `serve --init` on the emptied store: a new, empty store whose tokens continue above every
  // token the old one ever granted (the high-water mark in ichido.id).
  {
    ServerControl s(opt_.ichido, emptied, work + "/init.log", {"--no-auth", "--init"});
    std::string error;
    const bool started = s.start(&error);
    check(phase, "serve --init on the emptied store starts a new store", started, error);
    if (started) {
      cli::BaseUrl url;
      url.host = "127.0.0.1";
      url.port = s.port();
      cli::HttpClient http(url, cli::ClientOptions{.token = std::string()});
      auto g =
          http.post("/v1/ns/soak/locks/after-init/acquire", R"({"owner":"soak","lease_ms":5000})");
      std::int64_t token = 0;
      if (g.ok() && g.response->status == 200) {
        boost::system::error_code ec;
        json::value v = json::parse(g.response->body, ec);
        if (!ec && v.is_object() && v.as_object().contains("token")) {
          token = v.as_object().at("token").to_number<std::int64_t>();
        }
      }
      check(phase, "serve --init: the first token is above every token the old store granted",
            token > load_->max_token_seen(),
            "new token " + std::to_string(token) + ", largest token of the run " +
                std::to_string(load_->max_token_seen()));
      auto c = http.get("/v1/ns/soak/counters/keyed");
      check(phase, "serve --init: the new store is empty (counter_not_found)",
            c.ok() && c.response->status == 404, c.ok() ? c.response->body : c.error);
      s.stop();
      ServerControl again(opt_.ichido, emptied, work + "/init-again.log", {"--no-auth"});
      const bool restarted = again.start(&error);
      check(phase, "after --init, a plain `serve` starts on that directory", restarted, error);
      again.stop();
    }
  }
  // D5: a damaged page — the root page of the audit trail's table, overwritten with noise.
  {
    const std::string dir = work + "/page";
    copy_dir(clean, dir);
    std::int64_t page_size = 4096;
    const std::int64_t root = root_page(dir + "/ichido.db", "issued", &page_size);
    const std::string err =
        root > 1 ? scribble(dir + "/ichido.db", (root - 1) * page_size, page_size, root)
                 : "no root";
    check(phase, "damage one page of ichido.db (table issued, page " + std::to_string(root) + ")",
          err.empty(), err);
    const ProcessOutcome c = run_bounded(check_args(dir), std::chrono::seconds(120));
    check(phase, "damaged page: `ichido check` reports it (non-zero exit)", failed_for_real(c),
          "exit " + std::to_string(c.exit_code) + ": " + first_lines(c.output));
    // Small files are checked at start-up (refusal); a file too large for that check starts and
    // must answer 500 store_corrupt on the calls that touch the page, with /healthz 503.
    const ProcessOutcome o = run_bounded(serve_args(dir), std::chrono::seconds(20));
    if (!o.listening) {
      check(phase, "damaged page: `ichido serve` refuses to start (start-up quick_check, exit 4)",
            o.exited && o.exit_code == 4,
            "exit " + std::to_string(o.exit_code) + ": " + first_lines(o.output));
    } else {
      ServerControl s(opt_.ichido, dir, work + "/page.log", {"--no-auth"});
      std::string error;
      if (s.start(&error)) {
        cli::BaseUrl url;
        url.host = "127.0.0.1";
        url.port = s.port();
        cli::HttpClient http(url, cli::ClientOptions{.token = std::string()});
        auto r = http.get("/v1/ns/soak/counters/keyed/issued?after=0&limit=1000");
        const bool corrupt = r.ok() && r.response->status == 500 &&
                             r.response->body.find("store_corrupt") != std::string::npos;
        check(phase, "damaged page: a read of the damaged table is 500 store_corrupt", corrupt,
              r.ok() ? std::to_string(r.response->status) + " " + first_lines(r.response->body)
                     : r.error);
        auto h = http.get("/healthz");
        auto y = http.get("/readyz");
        check(phase, "damaged page: /healthz and /readyz are 503 after that",
              h.ok() && h.response->status == 503 && y.ok() && y.response->status == 503,
              (h.ok() ? std::to_string(h.response->status) : h.error) + " " +
                  (y.ok() ? std::to_string(y.response->status) : y.error));
        s.kill9();
      }
    }
  }
  // D7: a page damaged while the server runs (a disk going bad under it): the first read that
  // touches the page is 500 store_corrupt, /healthz and /readyz turn 503 (a supervisor stops
  // restarting it into the same damage), and the next start refuses (start-up quick_check).
  {
    const std::string dir = work + "/live";
    copy_dir(clean, dir);
    std::int64_t page_size = 4096;
    const std::int64_t root = root_page(dir + "/ichido.db", "issued", &page_size);
    ServerControl s(opt_.ichido, dir, work + "/live.log", {"--no-auth"});
    std::string error;
    const bool started = s.start(&error);
    check(phase, "live damage: an undamaged copy starts", started, error);
    if (started && root > 1) {
      cli::BaseUrl url;
      url.host = "127.0.0.1";
      url.port = s.port();
      cli::HttpClient http(url, cli::ClientOptions{.token = std::string()});
      auto before = http.get("/healthz");
      check(phase, "live damage: /healthz is 200 before the damage",
            before.ok() && before.response->status == 200,
            before.ok() ? std::to_string(before.response->status) : before.error);
      const std::string err =
          scribble(dir + "/ichido.db", (root - 1) * page_size, page_size, root + 7);
      check(phase, "live damage: overwrite page " + std::to_string(root) + " (table issued)",
            err.empty(), err);
      auto r = http.get("/v1/ns/soak/counters/keyed/issued?after=0&limit=1000");
      const bool corrupt = r.ok() && r.response->status == 500 &&
                           r.response->body.find("\"store_corrupt\"") != std::string::npos;
      check(phase, "live damage: a read of the damaged table is 500 store_corrupt", corrupt,
            r.ok() ? std::to_string(r.response->status) + " " + first_lines(r.response->body)
                   : r.error);
      auto other = http.get("/v1/ns/soak/locks/lock-0");
      check(phase, "live damage: a call that does not touch the page still answers 200",
            other.ok() && other.response->status == 200,
            other.ok()
                ? std::to_string(other.response->status) + " " + first_lines(other.response->body)
                : other.error);
      auto h = http.get("/healthz");
      auto y = http.get("/readyz");
      check(phase, "live damage: /healthz and /readyz are 503 once damage was found",
            h.ok() && h.response->status == 503 && y.ok() && y.response->status == 503,
            (h.ok() ? std::to_string(h.response->status) : h.error) + " " +
                (y.ok() ? std::to_string(y.response->status) : y.error));
      s.kill9();
      refuses("live damage, restarted", dir);
      const ProcessOutcome c = run_bounded(check_args(dir), std::chrono::seconds(120));
      check(phase, "live damage: `ichido check` reports it (non-zero exit)", failed_for_real(c),
            "exit " + std::to_string(c.exit_code) + ": " + first_lines(c.output));
    }
  }
  // D6: the file header overwritten (not a database any more).
  {
    const std::string dir = work + "/header";
    copy_dir(clean, dir);
    const std::string err = scribble(dir + "/ichido.db", 0, 100, 6);
    check(phase, "overwrite the first 100 bytes of ichido.db", err.empty(), err);
    refuses("ichido.db header damaged", dir);
    const ProcessOutcome c = run_bounded(check_args(dir), std::chrono::seconds(120));
    check(phase, "header damaged: `ichido check` reports it (non-zero exit)", failed_for_real(c),
          "exit " + std::to_string(c.exit_code) + ": " + first_lines(c.output));
  }
}

void Driver::write_run_json(double seconds) {
  json::object run{{"seed", opt_.seed},
                   {"cycles", cycles_done_},
                   {"cycles_planned", opt_.cycles},
                   {"startup_kills", startup_kills_},
                   {"server_starts", server_ ? server_->starts() : 0},
                   {"supervisor_restarts", supervisor_restarts_},
                   {"sigstops", sigstops_done_},
                   {"disk_fulls", disk_fulls_done_},
                   {"store_faults", store_faults_done_},
                   {"clients", opt_.clients},
                   {"burst_clients", opt_.burst_clients},
                   {"tmpfs", mounted_},
                   {"store", opt_.store.empty() ? "embedded" : "postgres"},
                   {"nodes", opt_.nodes},
                   {"seconds", seconds},
                   {"max_token_seen", load_ ? load_->max_token_seen() : 0},
                   {"checks", checks_},
                   {"failed_checks", failed_checks_}};
  std::ofstream(opt_.out + "/run.json") << json::serialize(run) << "\n";
}

int Driver::run() {
  const auto t_begin = std::chrono::steady_clock::now();
  if (opt_.seed == 0) opt_.seed = std::random_device{}() | 1;
  rng_.seed(opt_.seed);
  mnt_ = opt_.out + "/mnt";
  (void)unmount(mnt_);  // left mounted by a run that was killed with SIGKILL
  std::filesystem::remove_all(opt_.out);
  std::filesystem::create_directories(opt_.out);
  copies_ = opt_.out + "/copies";
  std::filesystem::create_directories(mnt_);
  std::filesystem::create_directories(copies_);
  std::string error;
  history_ = History::open(opt_.out + "/history.jsonl", &error);
  if (!history_) {
    std::cerr << "soak: " << error << std::endl;
    return 2;
  }
  std::cerr << "soak: seed " << opt_.seed << ", output in " << opt_.out << std::endl;
  if (!opt_.no_disk_full) {
    const std::string err = mount_tmpfs(mnt_, opt_.tmpfs_mib);
    mounted_ = err.empty();
    if (mounted_ && mnt_.size() < sizeof g_mount_point) {
      std::copy(mnt_.begin(), mnt_.end(), g_mount_point);
      g_mount_point[mnt_.size()] = 0;
    }
    check("setup", "mount a " + std::to_string(opt_.tmpfs_mib) + " MiB tmpfs for the data dir",
          mounted_,
          mounted_ ? mnt_
                   : err + " (run as root, or pass --no-disk-full to skip the disk-full phase)");
  }
  data_ = mnt_ + "/data";
  std::vector<std::string> serve_args{"--min-free-disk", "1MiB"};
  if (!opt_.store.empty()) {
    // A schema of its own: a run never meets another run's counters. --data keeps only the node's
    // files (admin.token, store.id).
    serve_args = {"--store", opt_.store, "--store-schema", "soak_" + std::to_string(opt_.seed)};
    std::cerr << "soak: " << opt_.nodes << " node(s) on PostgreSQL, schema soak_" << opt_.seed
              << std::endl;
  }
  server_ =
      std::make_unique<ServerControl>(opt_.ichido, data_, opt_.out + "/server.log", serve_args);
  for (int i = 1; i < opt_.nodes; ++i) {
    others_.push_back(std::make_unique<ServerControl>(
        opt_.ichido, data_ + "-" + std::to_string(i),
        opt_.out + "/server-" + std::to_string(i) + ".log", serve_args));
  }
  int status = 1;
  do {
    if (!restart("first start")) break;
    const std::string token = trim(read_file(data_ + "/admin.token"));
    if (token.empty()) {
      check("setup", "the first start writes admin.token", false, data_ + "/admin.token");
      break;
    }
    bool all_up = true;
    for (auto& o : others_) all_up = all_up && restart("first start of another node", o.get());
    if (!all_up) break;
    WorkloadOptions wo;
    wo.clients = opt_.clients;
    wo.burst_clients = opt_.burst_clients;
    wo.bounded_max = opt_.bounded_max;
    wo.seed = opt_.seed;
    load_ = std::make_unique<Workload>(*history_, nodes(), token, wo);
    if (!load_->setup(&error)) {
      check("setup", "create the counters", false, error);
      break;
    }
    load_->start();
    // Where the fault episodes fall among the kill cycles: spread evenly.
    std::set<int> stop_at, full_at, store_fault_at;
    for (int i = 1; i <= opt_.sigstops; ++i) stop_at.insert(i * opt_.cycles / (opt_.sigstops + 1));
    for (int i = 1; i <= opt_.disk_fulls; ++i) {
      full_at.insert(i * opt_.cycles / (opt_.disk_fulls + 1) + 1);
    }
    for (int i = 1; i <= opt_.store_faults; ++i) {
      store_fault_at.insert(i * opt_.cycles / (opt_.store_faults + 1) + 2);
    }
    const int copy_at = opt_.cycles / 2 + 2;
    bool alive = true;
    int stops = 0, fulls = 0, store_faults = 0;
    for (int n = 1; n <= opt_.cycles && alive; ++n) {
      if (stop_at.count(n)) sigstop_episode(++stops);
      if (full_at.count(n)) disk_full_episode(++fulls);
      if (store_fault_at.count(n)) store_fault_episode(++store_faults);
      ServerControl* victim = kill_cycle(n, n == copy_at);
      ++cycles_done_;
      alive = restart("after kill -9, cycle " + std::to_string(n), victim);
      if (n % 10 == 0) {
        std::cerr << "soak: " << n << "/" << opt_.cycles << " kill cycles, "
                  << load_->writes_acked() << " writes acknowledged" << std::endl;
      }
    }
    load_->stop();
    if (!alive) break;
    // The last crash, then the final read on a fresh start: what survived is what the checker
    // compares every acknowledged answer with.
    pause(100, 500);
    server_->kill9();
    history_->event("kill", {{"cycle", "final"}});
    if (!restart("final read")) break;
    json::object final_state;
    if (!load_->final_read(&final_state, &error)) {
      check("final", "read the store after the last restart", false, error);
      break;
    }
    if (const auto* k = final_state["counters"].as_object().if_contains("keyed")) {
      final_keyed_last_ = k->at("info").at("last_value").as_int64();
    }
    std::ofstream(opt_.out + "/final.json") << json::serialize(final_state) << "\n";
    const int code = server_->stop();
    history_->event("stop", {{"exit", code}});
    check("final", "SIGTERM stops the server with exit 0", code == 0, std::to_string(code));
    for (std::size_t i = 0; i < others_.size(); ++i) {
      const int c = others_[i]->stop();
      check("final", "SIGTERM stops node " + std::to_string(i + 1) + " with exit 0", c == 0,
            std::to_string(c));
    }
    if (!opt_.store.empty()) {  // the rest reads the embedded store's files
      status = 0;
      break;
    }
    const std::string err = copy_dir(data_, copies_ + "/clean");
    check("final", "copy of the data directory after the clean stop", err.empty(), err);
    const ProcessOutcome c =
        run_bounded({opt_.ichido, "check", "--data", data_}, std::chrono::seconds(300));
    check("final", "`ichido check` passes on the run's store", c.exited && c.exit_code == 0,
          "exit " + std::to_string(c.exit_code) + ": " + first_lines(c.output));
    if (!opt_.no_damaged) damaged_dirs();
    status = 0;
  } while (false);
  if (load_) load_->stop();
  if (server_ && server_->running()) server_->kill9();
  for (auto& o : others_) {
    if (o->running()) o->kill9();
  }
  history_->flush();
  if (mounted_) {
    g_mount_point[0] = 0;
    const std::string err = unmount(mnt_);
    if (!err.empty()) std::cerr << "soak: " << err << std::endl;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_begin).count();
  write_run_json(seconds);
  std::cerr << "soak: " << cycles_done_ << " kill cycles, " << sigstops_done_ << " SIGSTOPs, "
            << disk_fulls_done_ << " disk-full episodes, " << store_faults_done_
            << " PostgreSQL restarts and crashes, " << failed_checks_ << " failed phase checks, "
            << static_cast<int>(seconds) << " s" << std::endl;
  return status != 0 ? 1 : 0;
}

}  // namespace
}  // namespace ichido::soak

int main(int argc, char** argv) {
  ichido::soak::Options o;
  CLI::App app{
      "ichido-soak: run ichido serve under mixed load with kill -9 cycles, a full disk, SIGSTOP "
      "and "
      "damaged data dirs, recording every request and answer (check it with "
      "tests/soak/check_history.py; scripts/soak does both)"};
  // scripts/soak puts its defaults first: a later repetition of an option wins.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--ichido", o.ichido, "The ichido binary")->required();
  app.add_option("--out", o.out, "Output directory (emptied first)")->required();
  app.add_option("--cycles", o.cycles, "kill -9 / restart cycles")->capture_default_str();
  app.add_option("--sigstops", o.sigstops, "SIGSTOP episodes")->capture_default_str();
  app.add_option("--disk-fulls", o.disk_fulls, "disk-full episodes")->capture_default_str();
  app.add_option("--clients", o.clients, "client threads doing the mixed load")
      ->capture_default_str();
  app.add_option("--burst-clients", o.burst_clients,
                 "client threads issuing counter numbers back to back (full commit batches)")
      ->capture_default_str();
  app.add_option("--min-up-ms", o.min_up_ms, "shortest run before a kill (most cycles)")
      ->capture_default_str();
  app.add_option("--max-up-ms", o.max_up_ms, "longest run before a kill")->capture_default_str();
  app.add_option("--tmpfs-mib", o.tmpfs_mib, "size of the data dir's tmpfs")->capture_default_str();
  app.add_option("--bounded-max", o.bounded_max, "max of the bounded counter")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "random seed (0: pick one; printed)")->capture_default_str();
  app.add_flag("--no-disk-full", o.no_disk_full,
               "no tmpfs and no disk-full phase (when mounting is not permitted)");
  app.add_flag("--no-damaged", o.no_damaged, "skip the damaged-data-dir phase");
  app.add_option("--store", o.store,
                 "run the node on PostgreSQL (libpq URL; a schema soak_SEED of its own) instead of "
                 "the embedded store: no disk-full and no damaged-data-dir phase");
  app.add_option("--nodes", o.nodes,
                 "with --store: run this many nodes on the one store; clients spread over them "
                 "and fail over to the next when theirs does not answer; each kill cycle kills a "
                 "random node")
      ->capture_default_str();
  app.add_option("--pg-cluster", o.pg_cluster,
                 "with --store: the scripts/pg-test-cluster DIR of that PostgreSQL, which "
                 "--store-faults restarts and crashes under the nodes");
  app.add_option("--pg-script", o.pg_script, "the scripts/pg-test-cluster to do it with");
  app.add_option("--store-faults", o.store_faults,
                 "PostgreSQL fast restarts and crashes (alternating) during the kill cycles; "
                 "needs --pg-cluster and --pg-script")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (o.store_faults > 0 && (o.store.empty() || o.pg_cluster.empty() || o.pg_script.empty())) {
    std::cerr << "ichido-soak: --store-faults needs --store, --pg-cluster and --pg-script\n";
    return 2;
  }
  if (o.nodes < 1 || (o.nodes > 1 && o.store.empty())) {
    std::cerr << "ichido-soak: --nodes N > 1 needs --store URL (several nodes share PostgreSQL)\n";
    return 2;
  }
  if (!o.store.empty()) {
    o.no_disk_full = true;
    o.no_damaged = true;
  }
  if (o.cycles < 1 || o.clients < 1 || o.min_up_ms < 0 || o.max_up_ms < o.min_up_ms) {
    std::cerr << "ichido-soak: --cycles and --clients must be positive, min-up ≤ max-up\n";
    return 2;
  }
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGINT, ichido::soak::on_fatal_signal);
  ::signal(SIGTERM, ichido::soak::on_fatal_signal);
  return ichido::soak::Driver(o).run();
}

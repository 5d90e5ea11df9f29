// The soak run's load: client threads doing what office automations do, every request recorded
// in the History.
//
// Each client thread loops over a weighted mix of logical operations:
//   counters  keyed `next` (counters keyed, daily with a period, bounded with a max that runs
//             out during the run), unkeyed `next` (counter plain), `void` of a number it was
//             given, GET of a counter and of `issued?key=`;
//   once      begin (request_id, fingerprint, sometimes wait_ms) on a moving window of shared
//             keys, then complete / fail / renew or abandon (a crashed worker);
//   locks     acquire (request_id, sometimes wait_ms) on a few shared names, then renew /
//             release or abandon;
//   reads     GET of once records and locks.
// Burst clients (`burst_clients`) only issue counter numbers, keyed and unkeyed, back to back:
// they keep group-commit batches full, so that a kill lands in the middle of a batch.
// Retries follow the clients' rules (docs/decisions/081): a request that got no answer or 503 is
// re-sent unchanged (same key, token, request_id, result) when repeating it is safe; an unkeyed
// `next` whose answer was lost is not re-sent (it may have used a number) — only its 503 is.
// A logical operation gives up after a bounded number of attempts (a script that died).
//
// Thread-safety: start/stop/final_read from the driver thread; the client threads share only
// atomics and the mutex-guarded fields below.
#pragma once

#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "cli/client.h"
#include "history.h"
#include "server_control.h"

namespace ichido::soak {

class Workload;

// One answer: an HTTP status with its body, or no answer (status 0, `error`).
struct Answer {
  int status = 0;
  boost::json::value body;  // null unless the body was JSON
  std::string error;
  bool answered() const { return status != 0; }
  bool ok() const { return status >= 200 && status < 300; }
  std::string code() const;  // error.code of a JSON error body, else ""
  // A 503 whose error.details.outcome is "unknown": the COMMIT may have happened (PostgreSQL went
  // away during it), as when no answer arrived.
  bool outcome_unknown() const;
  // body[field] as an int64 / string ("" / 0 when absent or of another type).
  std::int64_t int_of(const char* field) const;
  std::string str_of(const char* field) const;
};

// What a request may do when it gets no answer or 503.
enum class Retry {
  never,          // one attempt
  on_503,         // 503 only when it says nothing changed, not "outcome unknown" (an unkeyed next)
  on_503_or_lost  // also when the answer was lost: the request is safe to repeat
};

// The HTTP side of one client thread: a keep-alive connection to the current port of its node,
// every attempt recorded. With several nodes a client talks to node `client % nodes` and, when an
// attempt gets no answer, to the next node (what a load balancer in front of them does) — unless
// it was made for one node (`node` >= 0). Not thread-safe (one per thread).
class Caller {
 public:
  // `stats` (may be null) hears of every answer (Workload::saw_answer).
  Caller(int client, History& history, Nodes nodes, std::string token, class Workload* stats,
         int node = -1);

  struct Call {
    std::string op;            // "counter.next", "once.begin", ... (history "op")
    boost::json::object args;  // history "a": what the checker needs to know about the call
    std::string method;
    std::string target;
    std::string body;  // JSON text or empty
    std::chrono::milliseconds read_timeout{5000};
    bool record = true;  // false: not written to the history (the final read)
  };
  // One attempt, recorded.
  Answer once(const Call& call, std::int64_t lid);
  // Attempts until an answer that is not 503 (or, by `retry`, the first answer/no answer), at most
  // `max_attempts`, pausing 20–500 ms between attempts. All attempts share one logical id.
  Answer with_retries(const Call& call, Retry retry, int max_attempts);

  int client() const { return client_; }
  std::mt19937_64& rng() { return rng_; }
  // Pauses for a random time in [lo, hi] ms (think time of a script, or back-off).
  void pause_ms(int lo, int hi);

 private:
  const int client_;
  History& history_;
  const Nodes nodes_;
  const bool fixed_;  // made for one node: no failover
  std::size_t node_;  // the node it talks to now
  const std::string token_;
  class Workload* const stats_;
  std::uint16_t port_ = 0;
  std::unique_ptr<cli::HttpClient> http_;
  std::mt19937_64 rng_;
};

struct WorkloadOptions {
  std::string ns = "soak";
  int clients = 12;
  int burst_clients = 4;  // counter `next` back to back (client ids from 101)
  int locks = 3;          // lock names lock-0 .. lock-(locks-1)
  int once_window = 12;   // begins pick among the newest this many once keys
  std::int64_t bounded_max = 400;
  int think_ms_max = 15;  // pause between a client's logical operations
  int max_attempts = 30;  // per logical operation
  std::uint64_t seed = 1;
};

class Workload {
 public:
  Workload(History& history, Nodes nodes, std::string token, WorkloadOptions options);
  ~Workload();  // stops the threads

  // Creates the counters (admin PUT, retried). False with `error` when they cannot be created.
  bool setup(std::string* error);
  void start();
  void stop();  // asks every thread to finish its current operation, then joins them

  // Reads everything the run touched (counters with every period seen, their audit trails, every
  // once key, every lock) after the last restart: the "final" part of the checker's input.
  bool final_read(boost::json::object* out, std::string* error);

  // A probe caller for the driver's own phases (client ids from 1000), talking to node `node` only.
  Caller make_caller(int client, int node = 0) {
    return Caller(client, history_, nodes_, token_, this, node);
  }
  // Once keys and locks the driver's probes used: the final read covers them too.
  void add_final_once_key(const std::string& key);
  void add_final_lock(const std::string& name);

  // The time (History::now_us) of the latest 503 store_unavailable answered to a mutation.
  std::int64_t last_write_503_us() const { return last_write_503_us_.load(); }
  std::int64_t writes_acked() const { return writes_acked_.load(); }
  std::int64_t max_token_seen() const { return max_token_.load(); }
  // Records a token seen in a grant (also by the driver's probes).
  void saw_token(std::int64_t t);
  void saw_answer(const std::string& op, const Answer& a);
  void saw_period(const std::string& counter, const std::string& period);
  const WorkloadOptions& options() const { return opt_; }
  std::string once_key(std::int64_t index) const;

 private:
  struct Issued {
    std::string counter, key, period;
    std::int64_t value = 0;
    bool voided = false;
  };
  struct ClientState {
    std::int64_t seq = 0;
    std::vector<Issued> issued;  // numbers this client was given (for void and reads)
  };

  void run_client(int client);
  void run_burst_client(int client);
  void op_next_keyed(Caller& c, ClientState& s, const std::string& counter);
  void op_next_unkeyed(Caller& c, ClientState& s);
  void op_void(Caller& c, ClientState& s);
  void op_counter_read(Caller& c, ClientState& s);
  void op_once(Caller& c);
  void op_lock(Caller& c);
  void op_reads(Caller& c);
  std::string base() const { return "/v1/ns/" + opt_.ns; }
  std::int64_t pick_once_index(Caller& c);

  History& history_;
  const Nodes nodes_;
  const std::string token_;
  const WorkloadOptions opt_;
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> threads_;
  std::atomic<std::int64_t> fresh_once_{1};  // once keys 0 .. fresh_once_-1 exist (maybe)
  std::atomic<std::int64_t> last_write_503_us_{-1};
  std::atomic<std::int64_t> writes_acked_{0};
  std::atomic<std::int64_t> max_token_{0};
  Mutex mu_;
  std::map<std::string, std::set<std::string>> periods_ GUARDED_BY(mu_);
  std::set<std::string> extra_once_keys_ GUARDED_BY(mu_);
  std::set<std::string> extra_locks_ GUARDED_BY(mu_);
};

// Mutating ops (whose 2xx is an acknowledgement).
bool is_mutation(const std::string& op);

}  // namespace ichido::soak

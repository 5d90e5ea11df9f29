// Helpers of the multi-node tests (nodes_test.cc, pg_failure_test.cc): a deployment of N nodes on
// one PostgreSQL schema, and a load of keyed counter calls that retries like a client behind a
// load balancer, then checks that every acknowledged number is stored and none is missing.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api_client.h"
#include "server_process.h"
#include "test_util.h"

namespace ichido::testing {

inline std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// How far ahead of this machine's clock the server's log clock is: its first log line's time
// minus now (a few seconds too low: the line was written at start-up).
inline std::int64_t log_clock_skew_ms(const std::string& log) {
  const auto first = rfc3339_to_ms(log.substr(0, log.find(' ')));
  return first < 0 ? -1 : first - now_ms();
}

// N nodes on one PostgreSQL schema: the first node's own (in the `pg` fixture's cluster), or
// `url` + `schema` of a cluster the test runs itself.
// Joins the threads when the test ends, also when an assertion returns early.
struct JoinAtExit {
  std::vector<std::thread>& threads;
  ~JoinAtExit() {
    for (auto& t : threads) {
      if (t.joinable()) t.join();
    }
  }
};

class Deployment {
 public:
  // `auth`: the nodes run with authentication on (ServerProcess's `auth`).
  explicit Deployment(int n, std::vector<std::string> args = {}, const std::string& url = "",
                      const std::string& schema = "ichido", bool auth = false) {
    for (int i = 0; i < n; ++i) {
      nodes_.push_back(
          std::make_unique<ServerProcess>(dir_.path() + "/node" + std::to_string(i), args, auth));
      if (!url.empty()) {
        nodes_.back()->set_store(url, schema);
      } else if (i > 0) {
        nodes_.back()->share_store(*nodes_.front());
      }
    }
  }
  // Starts every node at once, as an orchestrator would (they race to migrate).
  void start_all() {
    std::vector<std::string> errors(nodes_.size());
    std::vector<std::thread> ts;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      ts.emplace_back([&, i] { nodes_[i]->start(&errors[i]); });
    }
    for (auto& t : ts) t.join();
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      ASSERT_TRUE(nodes_[i]->running()) << "node " << i << ": " << errors[i];
    }
  }
  ServerProcess& node(int i) { return *nodes_.at(i); }
  int size() const { return static_cast<int>(nodes_.size()); }
  const std::string& url() const { return nodes_.front()->store_url(); }
  const std::string& schema() const { return nodes_.front()->store_schema(); }

 private:
  TempDir dir_;
  std::vector<std::unique_ptr<ServerProcess>> nodes_;
};

// Clients that issue numbers with a fresh key each, over every node. A call that gets no answer
// or a 503 is retried with the same key on the next node (what a load balancer and a careful
// client do) until some node answers 200, for at most 60 s per key.
class Load {
 public:
  Load(Deployment& d, std::string counter, int clients_per_node, std::string ns = "shop")
      : d_(d), counter_(std::move(counter)), per_node_(clients_per_node), ns_(std::move(ns)) {}
  ~Load() { stop(); }

  void start() {
    for (int n = 0; n < d_.size(); ++n) {
      for (int c = 0; c < per_node_; ++c) {
        threads_.emplace_back([this, n, c] { run(n, c); });
      }
    }
  }
  // Lets each client finish the key it is on, then joins them.
  void stop() {
    stopping_.store(true);
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  bool wait_acks(std::size_t n,
                 std::chrono::milliseconds limit = std::chrono::milliseconds(30000)) {
    return eventually([&] { return acks() >= n; }, limit);
  }
  std::size_t acks() {
    std::lock_guard lk(mu_);
    return acked_.size();
  }
  int unavailable() const { return unavailable_.load(); }
  int unknown() const { return unknown_.load(); }
  int transport() const { return transport_.load(); }
  int gave_up() const { return gave_up_.load(); }
  int bad() const { return bad_.load(); }
  std::string report() {
    return std::to_string(acks()) + " acknowledged, " + std::to_string(unavailable()) +
           " answers 503 store_unavailable (" + std::to_string(unknown()) +
           " with outcome unknown), " + std::to_string(transport()) + " without answer, " +
           std::to_string(bad()) + " other errors, " + std::to_string(gave_up()) + " keys given up";
  }

  // Every acknowledged key has its number in the store, the same one; the numbers are exactly
  // 1..acks (nothing issued that nobody was told, nothing issued twice).
  void verify_every_ack_is_stored_and_numbers_are_contiguous(ServerProcess& node) {
    std::map<std::string, std::int64_t> acked;
    {
      std::lock_guard lk(mu_);
      acked = acked_;
    }
    EXPECT_EQ(bad(), 0) << report();
    ApiClient api(node.url(), ns_);
    std::set<std::int64_t> values;
    for (const auto& [key, value] : acked) {
      auto r = api.issued_by_key(counter_, key);
      ASSERT_EQ(r.status, 200) << r.body << r.transport_error;
      const auto& items = r.at("items").as_array();
      ASSERT_EQ(items.size(), 1u) << "acknowledged key " << key << " is not stored";
      EXPECT_EQ(items[0].at("value").to_number<std::int64_t>(), value) << key;
      EXPECT_TRUE(values.insert(value).second) << "number " << value << " issued twice";
    }
    auto g = api.get(counter_);
    ASSERT_EQ(g.status, 200) << g.body;
    EXPECT_EQ(g.num("issued_count"), static_cast<std::int64_t>(acked.size()));
    EXPECT_EQ(g.num("last_value"), static_cast<std::int64_t>(acked.size()));
    if (!values.empty()) {
      EXPECT_EQ(*values.begin(), 1);
      EXPECT_EQ(*values.rbegin(), static_cast<std::int64_t>(acked.size()));
    }
  }

 private:
  void run(int home, int c) {
    std::vector<std::unique_ptr<ApiClient>> clients;
    for (int n = 0; n < d_.size(); ++n) {
      clients.push_back(std::make_unique<ApiClient>(d_.node(n).url(), ns_));
    }
    for (int i = 0; !stopping_.load(); ++i) {
      const std::string key =
          "load-" + std::to_string(home) + "-" + std::to_string(c) + "-" + std::to_string(i);
      int node = home;
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      for (;;) {
        auto r = clients[node]->next(counter_, key);
        if (r.status == 200) {
          std::lock_guard lk(mu_);
          acked_[key] = r.num("value");
          break;
        }
        if (r.status == 503) {
          unavailable_.fetch_add(1);
          if (r.body.find("\"outcome\":\"unknown\"") != std::string::npos) unknown_.fetch_add(1);
        } else if (r.status == 0) {
          transport_.fetch_add(1);
        } else {
          bad_.fetch_add(1);
          ADD_FAILURE() << "unexpected answer " << r.status << " " << r.body;
          return;
        }
        if (std::chrono::steady_clock::now() > give_up) {
          gave_up_.fetch_add(1);
          return;
        }
        node = (node + 1) % d_.size();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a client's back-off
      }
    }
  }

  Deployment& d_;
  std::string counter_;
  int per_node_;
  std::string ns_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::map<std::string, std::int64_t> acked_;  // guarded by mu_
  std::atomic<int> unavailable_{0}, unknown_{0}, transport_{0}, gave_up_{0}, bad_{0};
};

}  // namespace ichido::testing

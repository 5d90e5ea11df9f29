// Metrics: process-wide request counters, rendered in the Prometheus text format at /metrics.
// Lock-free (atomics); safe from any thread. Gauges are added at start-up, before serving, and
// are constant afterwards.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ichido/store.h"

namespace ichido::http {

class Metrics {
 public:
  void count_response(unsigned status);
  void connection_opened() {
    connections_.fetch_add(1);
    connections_total_.fetch_add(1);
  }
  void connection_closed() { connections_.fetch_sub(1); }
  void count_dropped_audit() { dropped_audits_.fetch_add(1, std::memory_order_relaxed); }
  void count_refused_connection() { refused_connections_.fetch_add(1, std::memory_order_relaxed); }
  void count_accept_error() { accept_errors_.fetch_add(1, std::memory_order_relaxed); }
  std::int64_t active_connections() const { return connections_.load(); }

  std::string render(const StoreStats& store) const;

  // A value read at render time (e.g. parked waiters). Call before serving only.
  void add_gauge(std::string name, std::string help, std::function<std::int64_t()> read) {
    gauges_.push_back({std::move(name), std::move(help), std::move(read), "gauge"});
  }
  // The same for a monotonic count read at render time. Call before serving only.
  void add_counter(std::string name, std::string help, std::function<std::int64_t()> read) {
    gauges_.push_back({std::move(name), std::move(help), std::move(read), "counter"});
  }
  // Whole metric families rendered at scrape time (HELP/TYPE lines included), for series with
  // labels. Must be cheap and must not wait. Call before serving only.
  void add_collector(std::function<std::string()> render) {
    collectors_.push_back(std::move(render));
  }

 private:
  std::array<std::atomic<std::uint64_t>, 600> by_status_{};
  std::atomic<std::int64_t> connections_{0};
  std::atomic<std::uint64_t> connections_total_{0};
  struct Gauge {
    std::string name, help;
    std::function<std::int64_t()> read;
    const char* type;  // "gauge" or "counter"
  };
  std::vector<Gauge> gauges_;                             // constant once serving
  std::vector<std::function<std::string()>> collectors_;  // constant once serving
  std::atomic<std::uint64_t> dropped_audits_{0};
  std::atomic<std::uint64_t> refused_connections_{0};
  std::atomic<std::uint64_t> accept_errors_{0};
};

}  // namespace ichido::http

#include "http/metrics.h"

#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>

namespace ichido::http {

void Metrics::count_response(unsigned status) {
  if (status < by_status_.size()) by_status_[status].fetch_add(1, std::memory_order_relaxed);
}

namespace {

// One series without labels in the Prometheus text format: HELP, TYPE, value.
void series(std::string& out, std::string_view name, std::string_view type, std::string_view help,
            std::string_view value) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
  out.append(name).append(" ").append(value).append("\n");
}

template <class N>
  requires std::is_integral_v<N>
void series(std::string& out, std::string_view name, std::string_view type, std::string_view help,
            N value) {
  series(out, name, type, help, std::string_view(std::to_string(value)));
}

}  // namespace

std::string Metrics::render(const StoreStats& s) const {
  std::string out;
  out += "# HELP ichido_http_responses_total HTTP responses sent, by status code.\n";
  out += "# TYPE ichido_http_responses_total counter\n";
  for (std::size_t code = 100; code < by_status_.size(); ++code) {
    const auto n = by_status_[code].load(std::memory_order_relaxed);
    if (n == 0) continue;
    out += "ichido_http_responses_total{code=\"" + std::to_string(code) + "\"} " +
           std::to_string(n) + "\n";
  }
  series(out, "ichido_http_connections", "gauge", "Open client connections.", connections_.load());
  series(out, "ichido_http_connections_total", "counter", "Client connections accepted.",
         connections_total_.load());
  series(out, "ichido_http_connections_refused_total", "counter",
         "Connections answered 503 too_many_connections (over --max-connections).",
         refused_connections_.load());
  series(out, "ichido_http_accept_errors_total", "counter",
         "Failed accepts (e.g. out of file descriptors: accepting pauses 50 ms and resumes).",
         accept_errors_.load());
  series(out, "ichido_audit_dropped_total", "counter",
         "Audit records not written (failure-audit rate limit reached, or the store refused "
         "them).",
         dropped_audits_.load());
  series(out, "ichido_store_commits_total", "counter",
         "Durable write transactions (one fsync each).", s.commits);
  series(out, "ichido_store_committed_commands_total", "counter",
         "Commands in those transactions (divide by commits for the average group-commit "
         "batch).",
         s.committed_commands);
  series(out, "ichido_store_failed_commits_total", "counter",
         "Write transactions that failed and were rolled back.", s.failed_commits);
  series(out, "ichido_store_isolated_batches_total", "counter",
         "Batches run again with a savepoint per command because a failing command had "
         "already written.",
         s.isolated_batches);
  char secs[64];
  std::snprintf(secs, sizeof secs, "%.6f", static_cast<double>(s.commit_us_total) / 1e6);
  series(out, "ichido_store_commit_seconds_total", "counter",
         "Time spent committing (the fsync of each group commit); divide its rate by the "
         "commits' rate for the average commit latency.",
         std::string_view(secs));
  series(out, "ichido_store_write_failed", "gauge",
         "1 when a commit failed with an I/O error: every write is refused until the server "
         "restarts (check the disk, then restart).",
         std::string_view(s.write_failed ? "1" : "0"));
  for (const auto& m : s.own) {
    series(out, m.name, m.type == StoreStats::Metric::Type::gauge ? "gauge" : "counter", m.help,
           m.value);
  }
  for (const auto& g : gauges_) series(out, g.name, g.type, g.help, g.read());
  for (const auto& c : collectors_) out += c();
  return out;
}

}  // namespace ichido::http

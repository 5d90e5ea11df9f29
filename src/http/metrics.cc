#include "http/metrics.h"

#include <cstdio>

namespace ichido::http {

void Metrics::count_response(unsigned status) {
  if (status < by_status_.size()) by_status_[status].fetch_add(1, std::memory_order_relaxed);
}

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
  out += "# HELP ichido_http_connections Open client connections.\n";
  out += "# TYPE ichido_http_connections gauge\n";
  out += "ichido_http_connections " + std::to_string(connections_.load()) + "\n";
  out += "# HELP ichido_http_connections_total Client connections accepted.\n";
  out += "# TYPE ichido_http_connections_total counter\n";
  out += "ichido_http_connections_total " + std::to_string(connections_total_.load()) + "\n";
  out +=
      "# HELP ichido_http_connections_refused_total Connections answered 503 "
      "too_many_connections (over --max-connections).\n";
  out += "# TYPE ichido_http_connections_refused_total counter\n";
  out +=
      "ichido_http_connections_refused_total " + std::to_string(refused_connections_.load()) + "\n";
  out +=
      "# HELP ichido_http_accept_errors_total Failed accepts (e.g. out of file descriptors: "
      "accepting pauses 50 ms and resumes).\n";
  out += "# TYPE ichido_http_accept_errors_total counter\n";
  out += "ichido_http_accept_errors_total " + std::to_string(accept_errors_.load()) + "\n";
  out +=
      "# HELP ichido_audit_dropped_total Audit records not written (failure-audit rate "
      "limit reached, or the store refused them).\n";
  out += "# TYPE ichido_audit_dropped_total counter\n";
  out += "ichido_audit_dropped_total " + std::to_string(dropped_audits_.load()) + "\n";
  out += "# HELP ichido_store_commits_total Durable write transactions (one fsync each).\n";
  out += "# TYPE ichido_store_commits_total counter\n";
  out += "ichido_store_commits_total " + std::to_string(s.commits) + "\n";
  out +=
      "# HELP ichido_store_committed_commands_total Commands in those transactions "
      "(divide by commits for the average group-commit batch).\n";
  out += "# TYPE ichido_store_committed_commands_total counter\n";
  out += "ichido_store_committed_commands_total " + std::to_string(s.committed_commands) + "\n";
  out +=
      "# HELP ichido_store_failed_commits_total Write transactions that failed and were "
      "rolled back.\n";
  out += "# TYPE ichido_store_failed_commits_total counter\n";
  out += "ichido_store_failed_commits_total " + std::to_string(s.failed_commits) + "\n";
  out +=
      "# HELP ichido_store_isolated_batches_total Batches run again with a savepoint per "
      "command because a failing command had already written.\n";
  out += "# TYPE ichido_store_isolated_batches_total counter\n";
  out += "ichido_store_isolated_batches_total " + std::to_string(s.isolated_batches) + "\n";
  out +=
      "# HELP ichido_store_commit_seconds_total Time spent committing (the fsync of each "
      "group commit); divide its rate by the commits' rate for the average commit latency.\n";
  out += "# TYPE ichido_store_commit_seconds_total counter\n";
  char secs[64];
  std::snprintf(secs, sizeof secs, "%.6f", static_cast<double>(s.commit_us_total) / 1e6);
  out += std::string("ichido_store_commit_seconds_total ") + secs + "\n";
  out +=
      "# HELP ichido_store_write_failed 1 when a commit failed with an I/O error: every write is "
      "refused until the server restarts (check the disk, then restart).\n";
  out += "# TYPE ichido_store_write_failed gauge\n";
  out += std::string("ichido_store_write_failed ") + (s.write_failed ? "1" : "0") + "\n";
  if (s.checkpoints) {
    out +=
        "# HELP ichido_store_checkpoints_total WAL checkpoints completed (the WAL copied into "
        "the database file, beside the writer).\n";
    out += "# TYPE ichido_store_checkpoints_total counter\n";
    out += "ichido_store_checkpoints_total " + std::to_string(s.checkpoints->done) + "\n";
    out +=
        "# HELP ichido_store_failed_checkpoints_total WAL checkpoints that failed (nothing is "
        "lost, but the WAL cannot start over and grows until one succeeds).\n";
    out += "# TYPE ichido_store_failed_checkpoints_total counter\n";
    out += "ichido_store_failed_checkpoints_total " + std::to_string(s.checkpoints->failed) + "\n";
    out +=
        "# HELP ichido_store_wal_bytes Size of the WAL file (about 40 MiB at most while "
        "checkpoints keep up).\n";
    out += "# TYPE ichido_store_wal_bytes gauge\n";
    out += "ichido_store_wal_bytes " + std::to_string(s.checkpoints->wal_bytes) + "\n";
  }
  for (const auto& g : gauges_) {
    out += "# HELP " + g.name + " " + g.help + "\n";
    out += "# TYPE " + g.name + " " + g.type + "\n";
    out += g.name + " " + std::to_string(g.read()) + "\n";
  }
  for (const auto& c : collectors_) out += c();
  return out;
}

}  // namespace ichido::http

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
  if (s.caller_commits) {
    series(out, "ichido_store_caller_commits_total", "counter",
           "Of the commits, those of a lone request run on its own I/O thread instead of the "
           "writer thread (a client alone: no hand-off between threads).",
           *s.caller_commits);
  }
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
  if (s.checkpoints) {
    series(out, "ichido_store_checkpoints_total", "counter",
           "WAL checkpoints completed (the WAL copied into the database file, beside the "
           "writer).",
           s.checkpoints->done);
    series(out, "ichido_store_failed_checkpoints_total", "counter",
           "WAL checkpoints that failed (nothing is lost, but the WAL cannot start over and "
           "grows until one succeeds).",
           s.checkpoints->failed);
    series(out, "ichido_store_wal_bytes", "gauge",
           "Size of the WAL file (about 40 MiB at most while checkpoints keep up).",
           s.checkpoints->wal_bytes);
  }
  if (s.key_index) {
    series(out, "ichido_store_key_index_keys", "gauge",
           "Keys of issued numbers in the embedded store's key index (decision 143).",
           s.key_index->keys);
    series(out, "ichido_store_key_index_bytes", "gauge",
           "Memory of the key index's table (8 bytes a slot, at most 3/4 full: about 11 bytes "
           "a key).",
           s.key_index->memory_bytes);
    series(out, "ichido_store_key_index_snapshots_total", "counter",
           "Snapshots of the key index written to keys.idx and named by the database.",
           s.key_index->snapshots);
    series(out, "ichido_store_key_index_failed_snapshots_total", "counter",
           "Snapshots of the key index that failed (nothing is lost: the next start adds the "
           "newer keys from the database, or rebuilds the index).",
           s.key_index->failed_snapshots);
  }
  for (const auto& g : gauges_) series(out, g.name, g.type, g.help, g.read());
  for (const auto& c : collectors_) out += c();
  return out;
}

}  // namespace ichido::http

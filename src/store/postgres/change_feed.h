// The PostgreSQL store's change feed between nodes (docs/decisions/075): after a write
// transaction whose jobs announced something (Job::announce: a lock released, a once record
// finished, tokens changed), the store sends ONE notification on the schema's channel in that
// transaction (pg_notify before COMMIT: delivered exactly when the transaction commits, never
// when it rolls back). Every node LISTENs on its own connection and wakes its local waiters.
//
// Payload (text, at most kMaxNotifyPayload bytes, under PostgreSQL's 8000):
//   line 1      the sender's node id (a node ignores its own notifications)
//   "L\t" ns "\t" name        a lock
//   "O\t" ns "\t" key         a once record; the key escaped ('\\' -> "\\\\", '\n' -> "\\n")
//   "N\t" ns                  everything in a namespace (when the items do not fit)
//   "*"                       everything (when the namespaces do not fit either)
//   "T"                       tokens changed
// Lines are sorted and unique. Namespaces and lock names cannot hold '\t' or '\n'
// (core/names.h); once keys can, hence the escaping (a '\t' in the last field needs none).
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ichido/store.h"
#include "store/table_store.h"

namespace ichido::store::postgres {

inline constexpr std::size_t kMaxNotifyPayload = 7900;

// The channel of the store in `schema` (an identifier: the schema name is validated).
std::string notify_channel(const std::string& schema);

// The payload for `items` sent by `node` (falls back to namespaces, then to "*", to fit).
std::string encode_changes(const std::string& node, std::vector<Announcement> items);

struct DecodedChanges {
  std::string node;
  ExternalChanges changes;
};
// nullopt for a payload this build cannot read (then the caller wakes everyone).
std::optional<DecodedChanges> decode_changes(std::string_view payload);

}  // namespace ichido::store::postgres

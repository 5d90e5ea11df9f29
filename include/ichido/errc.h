// errc: the one vocabulary of failures shared by every layer of ichido.
//
// Each code says what the caller should do next (after Abseil's status codes):
//   - invalid_request, key_required: fix the request; retrying it unchanged fails the same way.
//   - *_not_found: the named thing does not exist; create it first (never created implicitly).
//   - counter_exists, counter_exhausted, value_mismatch, value_below_issued, value_not_issued,
//     stale_token, not_holder, fingerprint_mismatch, result_mismatch: the request is well formed
//     but the current state forbids it; do not retry until that state changes.
//   - too_many_waiters, too_many_connections: back off and retry later.
//   - store_unavailable: the store could not durably apply the change; NOTHING was changed, and the
//     same request (same key / token) is safe to retry.
//   - store_corrupt: the store found damage in its data; an operator must act (restore a backup);
//     retrying will not help.
//   - unauthenticated, forbidden: credentials.
//   - internal: a bug; nothing is known to have changed.
// The mapping to HTTP lives in exactly one place: src/http/error_mapping.cc.
#pragma once

#include <string_view>

namespace ichido {

enum class errc {
  invalid_request,
  key_required,
  body_too_large,
  headers_too_large,
  uri_too_long,
  route_not_found,
  method_not_allowed,
  unauthenticated,
  forbidden,
  counter_not_found,
  counter_exists,
  counter_exhausted,
  value_mismatch,
  value_below_issued,
  value_not_issued,
  once_not_found,
  token_not_found,
  fingerprint_mismatch,
  stale_token,
  not_holder,
  result_mismatch,
  too_many_waiters,
  too_many_connections,
  store_unavailable,
  store_corrupt,
  internal,
};

// The snake_case wire name of a code, e.g. "counter_not_found".
std::string_view to_string(errc code);

}  // namespace ichido

// The HTTP layer's view of one request and one response, independent of sockets: handlers are
// pure functions (awaitables) from Request to Response, which is what the fuzz target and the
// unit tests drive directly.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/container/small_vector.hpp>
#include <boost/json/value.hpp>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/auth.h"
#include "http/json_writer.h"
#include "ichido/result.h"

namespace ichido::service {
class Client;
}

namespace ichido::http {

namespace beast_http = boost::beast::http;
// A request as the server read it. Its header holds only the fields kept_request_field()
// names (http/request_parser.h): to read another one, add it there.
using BeastRequest = beast_http::request<beast_http::string_body>;

// A request path's percent-decoded segments: inline up to the API's longest path.
using Segments = boost::container::small_vector<std::string, 8>;

// A parsed request: method, percent-decoded path segments, decoded query parameters, raw body.
struct Request {
  beast_http::verb method = beast_http::verb::get;
  std::string method_string;
  Segments segments;  // "/v1/ns/a/counters" -> {"v1","ns","a","counters"}
  std::multimap<std::string, std::string> query;
  // The body, not copied: it points into the server's request message, which outlives the
  // handler. Handlers parse it (parse_body) and must not keep the view.
  std::string_view body;
  std::string authorization;  // the Authorization header, if any; Api::route hands it to auth
  std::string if_none_match;  // the If-None-Match header, if any (static files answer 304)
  // The raw path (no query), for logs and audit: a view of the target parse_target() was given,
  // which outlives the request (the server's message; a test's literal).
  std::string_view path;
  std::string remote;  // client address, for the audit log
  // The authenticated caller (set by Api before the handler runs; null with --no-auth). Points
  // into the Api's own copy, valid for the duration of the handler.
  const core::TokenInfo* principal = nullptr;
  // Admin routes only: the audit entry of this call (actor, action, ns, remote, detail; status
  // set to the route's success status). Handlers pass it to their admin store command, which
  // writes it in the same transaction as the effect, and then mark the response `audited`.
  std::optional<core::AuditEntry> audit;
  // The connection of a request that may wait (Api::may_wait), for the services' last look at
  // whether its client is still there before they grant it something (service/client.h); null
  // for other requests and outside a server (tests, fuzzing).
  service::Client* client = nullptr;

  // The first value of query parameter `name`, if present.
  const std::string* param(const std::string& name) const {
    auto it = query.find(name);
    return it == query.end() ? nullptr : &it->second;
  }
};

struct Response {
  unsigned status = 200;
  // Static text (a literal, a web asset's type): every content type the server sends is one, and
  // a view of it costs no allocation per answer. Empty: no Content-Type field.
  std::string_view content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // The audit entry of this admin call was written atomically with its effect; Api writes one
  // for every admin response that is not marked so (reads, refusals, failures).
  bool audited = false;

  static Response json(unsigned status, const boost::json::value& v);
  // The same for an object, serialized where it is (as a `value` it would be copied first).
  static Response json(unsigned status, const boost::json::object& o);
  // A document written by a JsonWriter (the answers of the hot routes).
  static Response json(unsigned status, JsonWriter&& w);
  static Response error(const Error& e);
  static Response text(unsigned status, std::string body, std::string_view content_type);
};

// The success answer of an admin mutation whose store command carried `req.audit`: its audit
// entry was written in the same transaction, so Api does not write another.
inline Response audited(Response r, const Request& req) {
  r.audited = req.audit.has_value();
  return r;
}

}  // namespace ichido::http

// HttpClient: a small synchronous HTTP/1.1 client for the ichido API, used by the `ichido`
// command and by the integration tests.
//
// Lifecycle: construct with a parsed BaseUrl; the first request connects, later requests reuse
// the same keep-alive connection. Before reusing it, the client checks (without blocking) that
// the server has not closed it while idle, and connects afresh if it has. If a reused connection
// still fails before any byte of the answer arrives, GET/HEAD/PUT/DELETE are sent once more on a
// fresh connection; a POST is not resent, since the server may have acted on it: its error is
// returned and the caller decides (ichido's POSTs carrying a key or token are safe to repeat).
//
// HTTPS: an https:// base URL speaks TLS (1.2 or later) and verifies the server's certificate
// chain and host name (SNI is sent for names) against the system's CAs (OpenSSL's default paths,
// /etc/ssl/certs on Debian) or, when ClientOptions::cacert names a file, against the CAs in that
// PEM file only. There is no way to switch verification off.
//
// Errors: nothing throws. A request either yields an HttpResponse (any status, 4xx/5xx included:
// those are answers, not failures) or a transport error message (could not resolve/connect,
// TLS handshake or certificate check failed, timed out, connection lost, malformed answer).
//
// Thread-safety: one HttpClient must not be used by two threads at once (it owns one connection
// and one io_context). Distinct instances are independent: give each thread its own client.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace ichido::cli {

// Where the server is: from "http://host:port" or "https://host:port" with an optional path
// prefix ("https://proxy.local/ichido" sends "/ichido/v1/..."). "host:port" without a scheme
// means http.
struct BaseUrl {
  std::string host;  // name or address; an IPv6 address is stored without brackets
  std::uint16_t port = 80;
  std::string prefix;  // "" or "/some/path" (no trailing slash)
  bool tls = false;    // https://

  std::string to_string() const;  // "http://host:port/prefix" or "https://host:port/prefix"
};

// Result of parse_base_url: exactly one of `url` and `error` is meaningful.
struct [[nodiscard]] BaseUrlResult {
  std::optional<BaseUrl> url;
  std::string error;  // a sentence saying what is wrong, when !url
  bool ok() const { return url.has_value(); }
};

// Accepts http:// and https:// URLs with a host, an optional port (default 80 and 443) and an
// optional path; rejects other schemes, user info, queries and fragments.
BaseUrlResult parse_base_url(std::string_view text);

// One request. `target` is the path and query under the base URL's prefix, e.g.
// "/v1/ns/default/counters/r?key=a%2Fb" (already percent-encoded).
struct Request {
  std::string method;  // "GET", "PUT", "POST", "DELETE"
  std::string target;
  std::string body;  // JSON text; empty = no body (and no Content-Type)
  // Time allowed for the whole answer to arrive; zero = ClientOptions::read_timeout. Calls that
  // wait on the server (wait_ms) must allow at least that much more.
  std::chrono::milliseconds read_timeout{0};

  friend bool operator==(const Request&, const Request&) = default;
};

struct HttpResponse {
  int status = 0;
  std::string body;
  // Header names in lower case; repeated headers are joined with ", ".
  std::map<std::string, std::string> headers;
};

// Result of a request: exactly one of `response` and `error` is meaningful.
struct [[nodiscard]] HttpResult {
  std::optional<HttpResponse> response;
  std::string error;  // why no answer arrived, when !response
  // When !response: true if the request was never sent and sending it again fails the same way
  // (the server's certificate was refused, the CA file cannot be used): not worth a retry.
  bool definitive = false;
  bool ok() const { return response.has_value(); }
};

struct ClientOptions {
  std::chrono::milliseconds connect_timeout{5000};  // name resolution plus TCP connect
  std::chrono::milliseconds read_timeout{30000};    // sending the request plus the whole answer
  std::size_t max_response_bytes = 64 * 1024 * 1024;
  // Bearer token. nullopt: use $ICHIDO_TOKEN when it is set and non-empty (read at construction).
  // An empty string: send no Authorization header.
  std::optional<std::string> token;
  std::string user_agent = "ichido-cli";
  // https only: a PEM file of the CAs to trust instead of the system's. nullopt: $ICHIDO_CACERT
  // when it is set and non-empty (read at construction), else the system's CAs.
  std::optional<std::string> cacert;
};

class HttpClient {
 public:
  explicit HttpClient(BaseUrl base, ClientOptions options = {});
  ~HttpClient();
  HttpClient(HttpClient&&) noexcept;
  HttpClient& operator=(HttpClient&&) noexcept;
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends `request` and waits for the whole answer. Never throws.
  HttpResult send(const Request& request);

  HttpResult get(std::string target) { return send({"GET", std::move(target), {}, {}}); }
  HttpResult post(std::string target, std::string json) {
    return send({"POST", std::move(target), std::move(json), {}});
  }
  HttpResult put(std::string target, std::string json) {
    return send({"PUT", std::move(target), std::move(json), {}});
  }
  HttpResult del(std::string target) { return send({"DELETE", std::move(target), {}, {}}); }

  // Drops the kept-alive connection, if any; the next request connects afresh.
  void close();

  const BaseUrl& base_url() const { return base_; }

 private:
  struct Impl;
  BaseUrl base_;
  ClientOptions options_;
  std::unique_ptr<Impl> impl_;
};

// Percent-encodes everything but unreserved characters (A-Z a-z 0-9 - . _ ~): safe for one path
// segment or one query value, whatever bytes it holds ("<id@example.com>", "a/b", Japanese).
std::string percent_encode(std::string_view text);

}  // namespace ichido::cli

// HttpServer: the socket side of the API. A listener accepts connections; each connection is a
// coroutine that reads a request (with limits and timeouts), asks Api for the response and
// writes it, with keep-alive. Each connection's handlers run one at a time: on one of the
// io_contexts given to serve_connections_on() (each run by one thread, an implicit strand), in
// turn, or else on a strand of the listener's io_context.
//
// TLS (optional): enable_tls() before start(); then every connection does a TLS 1.2+ handshake
// first (bounded by the read timeout), and plain HTTP on that port is dropped. TLS 1.2 offers
// only forward-secret AEAD suites (ECDHE with AES-GCM or ChaCha20-Poly1305, Mozilla's
// "intermediate" profile; decision 171); TLS 1.3 OpenSSL's defaults. reload_tls() reads the
// files again while serving: new handshakes use the new certificate, connections already open
// keep theirs, and a replacement that cannot be loaded leaves the current one in use.
//
// Limits, all explicit: body size (413 before the body is read when Content-Length exceeds it),
// header size (431), idle keep-alive timeout, whole-request read timeout (a slow sender is cut
// off), connection count (connections beyond it are answered 503 too_many_connections and
// closed; over TLS simply closed). Running out of file descriptors (EMFILE) pauses accepting
// briefly and never stops it.
//
// Lifecycle: listen()/adopt() (one or more listeners) → start() → ... → begin_drain(): stop
// accepting, close idle connections, let busy ones finish their request and close after the
// response. active() reaches 0.
// Thread-safety: begin_drain(), active() and reload_tls() may be called from any thread.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "http/api.h"
#include "http/metrics.h"
#include "http/one_client.h"

namespace ichido::http {

struct Limits {
  std::size_t max_body_bytes = 64 * 1024;
  std::size_t max_header_bytes = 16 * 1024;
  std::uint32_t read_timeout_ms = 30000;
  std::uint32_t idle_timeout_ms = 60000;
  std::size_t max_connections = 10000;
};

// Opens, binds and listens on host:port (port 0: a free one); an IPv6 listener takes IPv6 only.
// Errors: invalid_request (not an address), internal (the address is in use, or not this
// machine's), with the OS's reason; `os_error`, when given, receives the OS's error code.
Result<boost::asio::ip::tcp::acceptor> bind_listener(boost::asio::io_context& ioc,
                                                     const std::string& host, std::uint16_t port,
                                                     boost::system::error_code* os_error = nullptr);

// A TLS server context for this PEM certificate chain and key: TLS 1.2 or later, the TLS 1.2
// suites above. Errors: invalid_request naming what could not be loaded (a missing or
// unreadable file, not PEM, a key that does not match the certificate).
Result<std::shared_ptr<boost::asio::ssl::context>> make_tls_context(const std::string& cert_file,
                                                                    const std::string& key_file);
// One line about the certificate a context serves: subject, expiry, SHA-256 fingerprint.
std::string describe_tls_certificate(boost::asio::ssl::context& ctx);

class HttpServer {
 public:
  HttpServer(boost::asio::io_context& ioc, Api& api, Metrics& metrics, Limits limits);
  ~HttpServer();

  // Binds and listens. Port 0 picks a free port; the bound endpoint is returned.
  Result<boost::asio::ip::tcp::endpoint> listen(const std::string& host, std::uint16_t port);
  // Serves on a listener bound earlier (bind_listener), e.g. before the store was opened. May be
  // called for several listeners (127.0.0.1 and ::1 for "localhost"); call before start().
  boost::asio::ip::tcp::endpoint adopt(boost::asio::ip::tcp::acceptor listener);
  // Serves HTTPS (TLS 1.2 or later only) with this PEM certificate chain and key
  // (make_tls_context). Call before start(). Returns describe_tls_certificate() of it. Errors:
  // invalid_request naming what could not be loaded.
  Result<std::string> enable_tls(const std::string& cert_file, const std::string& key_file);
  // Reads the files enable_tls() named again and serves the result to new connections; open
  // connections keep the context they started with. On an error (invalid_request, as
  // make_tls_context; also when TLS is off) the current certificate stays in use.
  // Returns describe_tls_certificate() of the new one.
  Result<std::string> reload_tls();
  bool tls_enabled() const { return tls_on_; }
  // Spreads connections over `contexts`, in turn (decision 139). Each must be run by exactly one
  // thread and outlive the server. Call before start(); without it connections run on strands
  // of the listener's io_context.
  void serve_connections_on(std::vector<boost::asio::io_context*> contexts) {
    conn_contexts_ = std::move(contexts);
  }
  void start();
  void begin_drain();
  std::size_t active() const;

  struct Conn;

 private:
  boost::asio::awaitable<void> accept_loop(boost::asio::ip::tcp::acceptor& acceptor);
  boost::asio::awaitable<void> session(std::shared_ptr<Conn> conn);
  boost::asio::awaitable<void> refuse(boost::asio::ip::tcp::socket socket);
  template <class Stream>
  boost::asio::awaitable<void> serve(std::shared_ptr<Conn> conn, Stream& stream,
                                     const std::string& remote);

  boost::asio::io_context& ioc_;
  Api& api_;
  Metrics& metrics_;
  const Limits limits_;
  // Set before start(), then constant (begin_drain closes them on the listener's io_context).
  std::vector<std::unique_ptr<boost::asio::ip::tcp::acceptor>> acceptors_;
  bool tls_on_ = false;                       // set by enable_tls() before start(), then constant
  std::string tls_cert_file_, tls_key_file_;  // likewise
  mutable Mutex tls_mu_;
  // The context new TLS connections get; each session holds the one it started with.
  std::shared_ptr<boost::asio::ssl::context> tls_ GUARDED_BY(tls_mu_);
  std::atomic<bool> draining_{false};
  std::vector<boost::asio::io_context*> conn_contexts_;  // set before start(), then constant
  std::size_t next_context_ = 0;                         // the accept loop's

  mutable Mutex mu_;
  std::unordered_map<std::uint64_t, std::weak_ptr<Conn>> conns_ GUARDED_BY(mu_);
  std::uint64_t next_id_ GUARDED_BY(mu_) = 0;
};

}  // namespace ichido::http

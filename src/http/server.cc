#include "http/server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <chrono>
#include <cstring>
#include <iostream>
#include <tuple>
#include <type_traits>

#include "http/request_parser.h"

namespace ichido::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

struct HttpServer::Conn final : service::Client {
  explicit Conn(tcp::socket s) : stream(std::move(s)) {}
  // service::Client, for a request that may wait: the kernel's state of the connection, now —
  // past any watch callback its I/O thread has not run yet (a lone write on this thread holds it
  // for a commit, decision 141). Anything but ESTABLISHED means the peer's FIN or reset arrived:
  // gone, as for the watch (a half-close counts). Then the session sends nothing (client_gone).
  bool gone() override {
    if (client_gone) return true;
    tcp_info info{};
    socklen_t len = sizeof info;
    if (!stream.socket().is_open() ||
        (::getsockopt(stream.socket().native_handle(), IPPROTO_TCP, TCP_INFO, &info, &len) == 0 &&
         info.tcpi_state != TCP_ESTABLISHED)) {
      client_gone = true;
    }
    return client_gone;
  }
  beast::tcp_stream stream;
  bool busy = false;  // a request is being read or answered; touched only on its executor
  std::uint64_t id = 0;
  // Bytes read and not yet parsed (a pipelined next request). Here, not in the session's frame,
  // so that the watch below can read into it. Touched only on its executor.
  beast::flat_buffer buffer;
  // The session coroutine's cancellation slot: emitted when the client of a waiting request
  // goes away (plain TCP, watch_plain), which cancels the wait inside the handler.
  asio::cancellation_signal gone_signal;
  // watch_plain's state; touched only on its executor.
  std::uint64_t watch_gen = 0;  // a watch whose generation is not this one is over
  bool client_gone = false;
};

namespace {

// Watches a connection while a parked request (a lock acquire with wait_ms) waits for its
// answer. Completes only when the peer is gone (EOF, reset); bytes that arrive meanwhile — a
// pipelined next request — are kept in `buffer` for the session, up to `limit` bytes, after which
// it stops reading and just waits to be cancelled. Raced against the handler with ||: whichever
// finishes first cancels the other, so a client that hangs up cancels its wait (it leaves the
// lock's line at once) and a finished handler stops the watch.
// Treats a half-close (the client shut down its sending side) as going away, like most proxies.
template <class Stream>
asio::awaitable<void> watch_peer(Stream& stream, beast::flat_buffer& buffer, std::size_t limit) {
  auto& socket = beast::get_lowest_layer(stream).socket();
  for (;;) {
    auto [ec] = co_await socket.async_wait(tcp::socket::wait_read, use_tuple);
    if (ec) co_return;
    if (buffer.size() >= limit) {
      asio::steady_timer forever(socket.get_executor(),
                                 std::chrono::steady_clock::time_point::max());
      co_await forever.async_wait(use_tuple);
      co_return;
    }
    // Through the stream (TLS decrypts here), so what is kept is the plain next request.
    auto [rec, n] = co_await stream.async_read_some(
        buffer.prepare(std::min<std::size_t>(4096, limit - buffer.size())), use_tuple);
    if (rec) co_return;  // EOF or reset: the client went away (or we were cancelled)
    buffer.commit(n);
  }
}

// Watches a plain-TCP connection while a parked request waits, like watch_peer, but as one
// reactor wait with a callback instead of coroutines raced with ||: that race cost ≈ 3 KiB of
// frames per waiting request (5,000 waiters: ≈ 16 MiB) and several allocations per lock
// acquire or once begin, waiting or not. When the socket turns readable, the callback reads
// what is there without blocking: EOF or an error means the client went away (cancel the
// handler through the session's slot); data (a pipelined request) is kept in the buffer, up to
// `limit`, and the watch re-arms. Every callback runs on the connection's executor, as does the
// session; the session ends a watch by bumping watch_gen (and cancelling the wait).
void watch_plain(std::shared_ptr<HttpServer::Conn> conn, std::size_t limit) {
  auto& socket = conn->stream.socket();
  const std::uint64_t gen = conn->watch_gen;
  socket.async_wait(tcp::socket::wait_read, [conn = std::move(conn), gen,
                                             limit](boost::system::error_code ec) mutable {
    if (ec || conn->watch_gen != gen) return;  // cancelled, or that request was answered
    auto& buffer = conn->buffer;
    for (;;) {
      if (buffer.size() >= limit) return;  // keep what came; stop watching (as watch_peer)
      boost::system::error_code rec;
      const std::size_t n = conn->stream.socket().read_some(
          buffer.prepare(std::min<std::size_t>(4096, limit - buffer.size())), rec);
      if (rec == asio::error::would_block || rec == asio::error::try_again) break;
      if (rec) {  // EOF (also a half-close) or reset: the client went away
        conn->client_gone = true;
        conn->gone_signal.emit(asio::cancellation_type::terminal);
        return;
      }
      buffer.commit(n);
    }
    watch_plain(std::move(conn), limit);
  });
}

// Feeds what is already buffered to the parser, without I/O. Usually the idle-phase read brought
// the whole request, and then no async_read (one scheduler round trip and a timer re-arm) is
// needed. Returns the parser's error, or success when it is done or simply needs more bytes.
// `header_only`: stop once the header is parsed (the parser is not eager, so put() returns at
// the end of the header even when body bytes follow).
template <class Parser>
boost::system::error_code parse_buffered(Parser& parser, beast::flat_buffer& buffer,
                                         bool header_only) {
  boost::system::error_code ec;
  while (!parser.is_done() && !(header_only && parser.is_header_done()) && buffer.size() > 0) {
    const std::size_t used = parser.put(buffer.data(), ec);
    buffer.consume(used);
    if (ec == beast_http::error::need_more) return {};
    if (ec || used == 0) return ec;
  }
  return ec;
}

// `Expect: 100-continue` in an HTTP/1.1 request (an HTTP/1.0 one must be ignored, RFC 9110
// §10.1.1). Other expectations are ignored too (the RFC allows answering them 417).
bool expects_continue(const BeastRequest& header) {
  if (header.version() < 11) return false;
  const auto it = header.find(beast_http::field::expect);
  return it != header.end() && beast::iequals(it->value(), "100-continue");
}

// Writes as much of `head` + `body` as the socket takes now (the socket is in non-blocking
// mode): small answers usually go out whole, in one sendmsg, with no async operation and no
// timer. Returns how many bytes went out; `ec` is would_block when the rest must be written
// asynchronously.
std::size_t write_now(tcp::socket& socket, std::string_view head, std::string_view body,
                      boost::system::error_code& ec) {
  const std::size_t total = head.size() + body.size();
  std::size_t off = 0;
  while (off < total && !ec) {
    std::array<asio::const_buffer, 2> bufs;
    if (off < head.size()) {
      bufs = {asio::buffer(head.substr(off)), asio::buffer(body)};
    } else {
      bufs = {asio::const_buffer(), asio::buffer(body.substr(off - head.size()))};
    }
    off += socket.write_some(bufs, ec);
  }
  return off;
}

// Writes `a` whole, head then body: for the answers sent outside the request loop (errors before
// a request was read whole, a refused `Expect: 100-continue`, a connection over the limit).
template <class Stream>
asio::awaitable<boost::system::error_code> write_answer(Stream& stream, const Answer& a) {
  std::string head;
  serialize_head(a, head);
  const std::array<asio::const_buffer, 2> bufs{asio::buffer(head), asio::buffer(a.body())};
  auto [ec, n] = co_await asio::async_write(stream, bufs, use_tuple);
  (void)n;
  co_return ec;
}

}  // namespace

HttpServer::HttpServer(asio::io_context& ioc, Api& api, Metrics& metrics, Limits limits)
    : ioc_(ioc), api_(api), metrics_(metrics), limits_(limits) {}

HttpServer::~HttpServer() = default;

Result<tcp::acceptor> bind_listener(asio::io_context& ioc, const std::string& host,
                                    std::uint16_t port, boost::system::error_code* os_error) {
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (ec) return Error(errc::invalid_request, "cannot parse the listen address '" + host + "'");
  tcp::endpoint ep(addr, port);
  tcp::acceptor acceptor(ioc);
  acceptor.open(ep.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  // [::]:PORT still takes IPv4 too (the system's default); ::1 and other IPv6 addresses are
  // IPv6 only anyway, and saying so keeps a wildcard from claiming 0.0.0.0's port.
  if (!ec && addr.is_v6() && !addr.is_unspecified())
    acceptor.set_option(asio::ip::v6_only(true), ec);
  if (!ec) acceptor.bind(ep, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (os_error) *os_error = ec;
  if (ec) {
    const std::string shown = addr.is_v6() ? "[" + host + "]" : host;
    return Error(errc::internal,
                 "cannot listen on " + shown + ":" + std::to_string(port) + ": " + ec.message());
  }
  return acceptor;
}

// TLS 1.2: ECDHE key exchange (forward secrecy) with AES-GCM or ChaCha20-Poly1305 only —
// Mozilla's "intermediate" profile without its finite-field DHE suites (decision 171). TLS 1.3
// suites are all AEAD and forward secret; OpenSSL's defaults are kept.
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

Result<std::shared_ptr<asio::ssl::context>> make_tls_context(const std::string& cert_file,
                                                             const std::string& key_file) {
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                   asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  if (SSL_CTX_set_cipher_list(ctx->native_handle(), kTls12Ciphers) != 1) {
    return Error(errc::internal, "This OpenSSL offers none of the TLS 1.2 suites ichido uses.");
  }
  boost::system::error_code ec;
  ctx->use_certificate_chain_file(cert_file, ec);
  if (ec) {
    return Error(errc::invalid_request,
                 "Cannot load the TLS certificate chain from " + cert_file + ": " + ec.message());
  }
  ctx->use_private_key_file(key_file, asio::ssl::context::pem, ec);
  if (ec) {
    return Error(errc::invalid_request,
                 "Cannot load the TLS private key from " + key_file + ": " + ec.message());
  }
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    ERR_clear_error();
    return Error(errc::invalid_request, "The TLS private key in " + key_file +
                                            " does not match the certificate in " + cert_file +
                                            ".");
  }
  return ctx;
}

std::string describe_tls_certificate(asio::ssl::context& ctx) {
  X509* cert = SSL_CTX_get0_certificate(ctx.native_handle());
  if (!cert) return "no certificate";
  std::string out;
  char name[256] = {};
  X509_NAME_oneline(X509_get_subject_name(cert), name, sizeof name);
  out += name;
  if (BIO* bio = BIO_new(BIO_s_mem())) {
    if (ASN1_TIME_print(bio, X509_get0_notAfter(cert)) == 1) {
      char* data = nullptr;
      const long n = BIO_get_mem_data(bio, &data);
      out += ", valid until " + std::string(data, static_cast<std::size_t>(n));
    }
    BIO_free(bio);
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  if (X509_digest(cert, EVP_sha256(), md, &md_len) == 1) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    out += ", SHA-256 ";
    for (unsigned int i = 0; i < md_len; ++i) {
      if (i) out += ':';
      out += kHex[md[i] >> 4];
      out += kHex[md[i] & 0xf];
    }
  }
  return out;
}

Result<tcp::endpoint> HttpServer::listen(const std::string& host, std::uint16_t port) {
  auto l = bind_listener(ioc_, host, port);
  if (!l.ok()) return std::move(l).error();
  return adopt(std::move(*l));
}

tcp::endpoint HttpServer::adopt(tcp::acceptor listener) {
  acceptors_.push_back(std::make_unique<tcp::acceptor>(std::move(listener)));
  return acceptors_.back()->local_endpoint();
}

Result<std::string> HttpServer::enable_tls(const std::string& cert_file,
                                           const std::string& key_file) {
  auto ctx = make_tls_context(cert_file, key_file);
  if (!ctx.ok()) return std::move(ctx).error();
  tls_cert_file_ = cert_file;
  tls_key_file_ = key_file;
  tls_on_ = true;
  std::string about = describe_tls_certificate(**ctx);
  MutexLock lk(tls_mu_);
  tls_ = std::move(*ctx);
  return about;
}

Result<std::string> HttpServer::reload_tls() {
  if (!tls_on_) return Error(errc::invalid_request, "TLS is off (no --tls-cert)");
  auto ctx = make_tls_context(tls_cert_file_, tls_key_file_);
  if (!ctx.ok()) return std::move(ctx).error();
  std::string about = describe_tls_certificate(**ctx);
  MutexLock lk(tls_mu_);
  tls_ = std::move(*ctx);
  return about;
}

void HttpServer::start() {
  for (auto& acceptor : acceptors_) {
    asio::co_spawn(acceptor->get_executor(), accept_loop(*acceptor), [](std::exception_ptr e) {
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          std::cerr << "ichido: accept loop stopped: " << ex.what() << "\n";
        }
      }
    });
  }
}

asio::awaitable<void> HttpServer::accept_loop(tcp::acceptor& acceptor) {
  while (!draining_.load()) {
    // The connection's executor: the next I/O thread's io_context, or a strand.
    const asio::any_io_executor conn_ex =
        conn_contexts_.empty()
            ? asio::any_io_executor(asio::make_strand(ioc_))
            : asio::any_io_executor(
                  conn_contexts_[next_context_++ % conn_contexts_.size()]->get_executor());
    auto [ec, socket] = co_await acceptor.async_accept(conn_ex, use_tuple);
    if (ec) {
      if (ec == asio::error::operation_aborted || draining_.load()) co_return;
      // EMFILE and friends: the connection waits in the kernel's backlog. Back off briefly
      // instead of spinning, and keep accepting once descriptors are free again.
      metrics_.count_accept_error();
      asio::steady_timer t(ioc_, std::chrono::milliseconds(50));
      co_await t.async_wait(use_tuple);
      continue;
    }
    if (metrics_.active_connections() >= static_cast<std::int64_t>(limits_.max_connections)) {
      metrics_.count_refused_connection();
      if (tls_on_) {  // no channel to answer on without a handshake
        boost::system::error_code ignore;
        socket.close(ignore);
      } else {
        asio::co_spawn(socket.get_executor(), refuse(std::move(socket)), asio::detached);
      }
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);
    auto conn = std::make_shared<Conn>(std::move(socket));
    {
      MutexLock lk(mu_);
      conn->id = next_id_++;
      conns_[conn->id] = conn;
    }
    metrics_.connection_opened();
    auto ex = conn->stream.get_executor();
    asio::co_spawn(ex, session(conn),
                   asio::bind_cancellation_slot(conn->gone_signal.slot(),
                                                [this, id = conn->id](std::exception_ptr) {
                                                  metrics_.connection_closed();
                                                  MutexLock lk(mu_);
                                                  conns_.erase(id);
                                                }));
  }
}

namespace {

// Lingering close after an early error answer (413, 431, 400): the client may still be sending
// the body we refused. Closing at once with unread data makes the kernel send a reset, which
// can destroy our answer before the client reads it. So: stop sending, then read and discard
// what the client still sends, for at most a second and 16 MiB, then close.
template <class Stream>
asio::awaitable<void> linger(Stream& stream) {
  auto& tcp_layer = beast::get_lowest_layer(stream);
  boost::system::error_code ignore;
  tcp_layer.socket().shutdown(tcp::socket::shutdown_send, ignore);
  tcp_layer.expires_after(std::chrono::seconds(1));
  std::array<char, 16384> sink;
  std::size_t total = 0;
  while (total < (16u << 20)) {
    auto [ec, n] = co_await stream.async_read_some(asio::buffer(sink), use_tuple);
    if (ec) break;
    total += n;
  }
}

}  // namespace

// A connection over --max-connections: answer 503 too_many_connections (whatever it asked; it
// is not read), then close without resetting the answer away (linger).
asio::awaitable<void> HttpServer::refuse(tcp::socket socket) {
  beast::tcp_stream stream(std::move(socket));
  auto res = api_.error_response(
      Error(errc::too_many_connections,
            "The server has as many connections as it serves at once (--max-connections); "
            "retry in a moment, or reuse a keep-alive connection."),
      11, false);
  stream.expires_after(std::chrono::seconds(1));
  const auto ec = co_await write_answer(stream, res);
  if (!ec) co_await linger(stream);
  boost::system::error_code ignore;
  stream.socket().close(ignore);
}

template <class Stream>
asio::awaitable<void> HttpServer::serve(std::shared_ptr<Conn> conn, Stream& stream,
                                        const std::string& remote) {
  auto& tcp_layer = conn->stream;
  beast::flat_buffer& buffer = conn->buffer;
  bool keep_going = true;
  while (keep_going && !draining_.load()) {
    // Idle phase: wait for the first bytes of the next request (unless pipelined data is here).
    if (buffer.size() == 0) {
      // The idle timeout is the stream's timer, armed before every idle read and cancelled when
      // it completes, for plain TCP as for TLS (decision 142).
      tcp_layer.expires_after(std::chrono::milliseconds(limits_.idle_timeout_ms));
      auto [ec, n] = co_await stream.async_read_some(buffer.prepare(4096), use_tuple);
      if (ec) break;  // closed, reset, idle timeout or drain
      buffer.commit(n);
    }
    conn->busy = true;
    RequestParser parser;  // keeps only the header fields the API reads
    parser.body_limit(limits_.max_body_bytes);
    parser.header_limit(static_cast<std::uint32_t>(limits_.max_header_bytes));
    // The header first (what the idle read brought, then more if needed), so that a client
    // waiting for `100 Continue` gets it, or its final answer, before it sends the body.
    // With TLS the buffer holds plain text too (the stream decrypts), so this works for both.
    boost::system::error_code ec = parse_buffered(parser, buffer, /*header_only=*/true);
    bool deadline_set = false;
    if (!ec && !parser.is_header_done()) {
      tcp_layer.expires_after(std::chrono::milliseconds(limits_.read_timeout_ms));
      deadline_set = true;
      auto [rec, n] = co_await beast_http::async_read_header(stream, buffer, parser, use_tuple);
      (void)n;
      ec = rec;
    }
    if (!ec && !parser.is_done() && buffer.size() == 0 && expects_continue(parser.get())) {
      // RFC 9110 §10.1.1. (A client that already sent part of the body is not waiting: no 100.)
      std::string_view admit_route;
      auto decided = co_await api_.admit(parser.get(), remote, &admit_route);
      if (decided) {
        // Refused whatever the body says (401, 404, 405, 414…): the answer now, without
        // reading the body; the body will not be read, so the connection closes after it.
        decided->keep_alive(false);
        api_.sending(parser.get(), admit_route, *decided);
        tcp_layer.expires_after(std::chrono::milliseconds(limits_.read_timeout_ms));
        const auto wec = co_await write_answer(stream, *decided);
        if (!wec) co_await linger(stream);
        break;
      }
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      tcp_layer.expires_after(std::chrono::milliseconds(limits_.read_timeout_ms));
      deadline_set = true;
      auto [wec, wn] = co_await asio::async_write(
          stream, asio::buffer(kContinue.data(), kContinue.size()), use_tuple);
      (void)wn;
      if (wec) break;
    }
    if (!ec) ec = parse_buffered(parser, buffer, /*header_only=*/false);
    if (!ec && !parser.is_done()) {
      if (!deadline_set) {
        tcp_layer.expires_after(std::chrono::milliseconds(limits_.read_timeout_ms));
      }
      auto [rec, n] = co_await beast_http::async_read(stream, buffer, parser, use_tuple);
      (void)n;
      ec = rec;
    }
    if (ec) {
      std::optional<Error> err;
      if (ec == beast_http::error::body_limit) {
        err = Error(errc::body_too_large, "The request body is larger than " +
                                              std::to_string(limits_.max_body_bytes) +
                                              " bytes; send less.");
      } else if (ec == beast_http::error::header_limit) {
        // Over the limit before the header ended: when the request line alone is that long,
        // the URL is the problem (414), else the header fields are (431).
        const auto data = buffer.data();
        const std::string_view seen(static_cast<const char*>(data.data()), data.size());
        const auto eol = seen.find("\r\n");
        if (eol == std::string_view::npos || eol > limits_.max_header_bytes / 2) {
          err = Error(errc::uri_too_long,
                      "The request URL is too long; send long values in a JSON body instead.");
        } else {
          err = Error(errc::headers_too_large,
                      "The request headers are too large or too many; send fewer.");
        }
      } else if (ec.category() ==
                     beast_http::make_error_code(beast_http::error::bad_method).category() &&
                 ec != beast_http::error::end_of_stream &&
                 ec != beast_http::error::partial_message) {
        err = Error(errc::invalid_request, "Malformed HTTP request (" + ec.message() + ").");
      }
      if (err) {
        // The rest of the message cannot be trusted or skipped: answer, then close.
        // The header was read whole when the body is too large (Content-Length): its Origin
        // decides the CORS headers, so a browser sees the 413. What was read of the request
        // line (empty when it was not read to its end) goes to the contract log.
        auto res = api_.error_response(
            *err, 11, false, ec == beast_http::error::body_limit ? &parser.get() : nullptr,
            std::string_view(parser.get().method_string()),
            std::string_view(parser.get().target()));
        tcp_layer.expires_after(std::chrono::milliseconds(limits_.read_timeout_ms));
        const auto wec = co_await write_answer(stream, res);
        if (!wec) co_await linger(stream);
      }
      break;
    }
    auto req = parser.release();
    Answer res;
    std::string_view route;
    if (Api::may_wait(req)) {
      // The wait may outlast the idle and read timeouts; an expired deadline would close the
      // connection under it. The watch notices a client that goes away.
      tcp_layer.expires_never();
      // The read buffer (4 KiB) is given back while the request waits, which may be minutes;
      // the watch allocates one only when the client sends something meanwhile.
      if (buffer.size() == 0) buffer.shrink_to_fit();
      if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
        // Plain TCP: the light watch (watch_plain).
        watch_plain(conn, limits_.max_header_bytes + limits_.max_body_bytes);
        res = co_await api_.handle(req, remote, &route, conn.get());
        ++conn->watch_gen;
        if (conn->client_gone) break;  // gone while it waited; nothing to answer
        boost::system::error_code ignore;
        tcp_layer.socket().cancel(ignore);  // the watch's pending wait
      } else {
        // TLS: bytes must be read through the TLS stream, so the watch is a coroutine raced
        // with the handler (watch_peer), which reads a pipelined request through the stream.
        using namespace asio::experimental::awaitable_operators;
        // Named locals, not temporaries, inside co_await (g++ 12).
        auto handling = api_.handle(req, remote, &route, conn.get());
        auto watching =
            watch_peer(stream, buffer, limits_.max_header_bytes + limits_.max_body_bytes);
        auto raced = std::move(handling) || std::move(watching);
        auto outcome = co_await std::move(raced);
        // The client went away: its wait was cancelled, or the service found it gone.
        if (outcome.index() == 1 || conn->client_gone) break;
        res = std::move(std::get<0>(outcome));
      }
    } else {
      res = co_await api_.handle(req, remote, &route);
    }
    if (draining_.load()) res.keep_alive(false);
    api_.sending(req, route, res);
    keep_going = res.keep_alive();
    // The head goes to a per-thread scratch string: only what the socket does not take at once
    // is copied into the frame's `rest` for an asynchronous write.
    thread_local std::string scratch;
    const std::string_view head = serialize_head(res, scratch);
    const std::string_view body = res.body();
    boost::system::error_code wec = asio::error::would_block;
    std::size_t sent = 0;
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      wec = {};
      sent = write_now(tcp_layer.socket(), head, body, wec);
    }
    if (wec == asio::error::would_block || wec == asio::error::try_again) {
      std::string rest;
      rest.reserve(head.size() + body.size() - sent);
      if (sent < head.size()) rest.append(head.substr(sent));
      rest.append(body.substr(sent > head.size() ? sent - head.size() : 0));
      tcp_layer.expires_after(std::chrono::milliseconds(limits_.read_timeout_ms));
      auto [aec, wn] = co_await asio::async_write(stream, asio::buffer(rest), use_tuple);
      (void)wn;
      wec = aec;
    }
    conn->busy = false;
    if (wec) break;
  }
}

namespace {

// Whether this thread serves one connection now (this_thread_serves_one_client).
bool& serves_one_client() noexcept {
  static thread_local bool one = false;
  return one;
}

}  // namespace

bool this_thread_serves_one_client() noexcept { return serves_one_client(); }
void set_this_thread_serves_one_client(bool one) noexcept { serves_one_client() = one; }

NotWaitingHere::NotWaitingHere() noexcept : saved_(serves_one_client()) {
  serves_one_client() = false;
}
NotWaitingHere::~NotWaitingHere() { serves_one_client() = saved_; }

namespace {

// How many connections this I/O thread serves now, and whether that is one
// (this_thread_serves_one_client). Kept only where each connection stays on one thread
// (serve_connections_on): on strands of a shared io_context a coroutine may resume on any
// thread.
class ThreadSessions {
 public:
  explicit ThreadSessions(bool counted) : counted_(counted) {
    if (counted_) changed(++count());
  }
  // Normally on the same thread (the session's last step runs there). A session destroyed
  // unfinished with its io_context, at shutdown, may end on the destroying thread: that thread's
  // count then goes below 0, which says "not one" — harmless there, nothing is served any more.
  ~ThreadSessions() {
    if (counted_) changed(--count());
  }
  ThreadSessions(const ThreadSessions&) = delete;
  ThreadSessions& operator=(const ThreadSessions&) = delete;

 private:
  static int& count() {
    static thread_local int n = 0;
    return n;
  }
  static void changed(int n) { serves_one_client() = n == 1; }
  const bool counted_;
};

}  // namespace

asio::awaitable<void> HttpServer::session(std::shared_ptr<Conn> conn) {
  const ThreadSessions on_this_thread(!conn_contexts_.empty());
  std::string remote;
  {
    boost::system::error_code ec;
    const auto ep = conn->stream.socket().remote_endpoint(ec);
    if (!ec) remote = ep.address().to_string() + ":" + std::to_string(ep.port());
  }
  if (!tls_on_) {
    // Non-blocking at the user level too, so write_now() never blocks the I/O thread.
    boost::system::error_code ignore;
    conn->stream.socket().non_blocking(true, ignore);
    co_await serve(conn, conn->stream, remote);
  } else {
    // TLS over the connection's tcp_stream (by reference, so drain can still cancel it), with
    // the context of the moment: a reload_tls() meanwhile does not touch this connection.
    std::shared_ptr<asio::ssl::context> ctx;
    {
      MutexLock lk(tls_mu_);
      ctx = tls_;
    }
    asio::ssl::stream<beast::tcp_stream&> tls(conn->stream, *ctx);
    conn->stream.expires_after(std::chrono::milliseconds(limits_.read_timeout_ms));
    auto [ec] = co_await tls.async_handshake(asio::ssl::stream_base::server, use_tuple);
    if (!ec) {
      co_await serve(conn, tls, remote);
      conn->stream.expires_after(std::chrono::seconds(1));
      co_await tls.async_shutdown(use_tuple);
    }
    // A failed handshake (plain HTTP sent to the TLS port, TLS < 1.2, no shared cipher) is
    // simply closed: there is no channel to answer on.
  }
  boost::system::error_code ignore;
  conn->stream.socket().shutdown(tcp::socket::shutdown_send, ignore);
  conn->stream.socket().close(ignore);
}

void HttpServer::begin_drain() {
  if (draining_.exchange(true)) return;
  for (auto& acceptor : acceptors_) {
    asio::post(acceptor->get_executor(), [a = acceptor.get()] {
      boost::system::error_code ignore;
      a->close(ignore);
    });
  }
  MutexLock lk(mu_);
  for (auto& [id, weak] : conns_) {
    if (auto conn = weak.lock()) {
      asio::post(conn->stream.get_executor(), [conn] {
        // The session may have closed its socket meanwhile: cancel() would throw EBADF out of
        // io_context::run() and take the process down mid-drain.
        boost::system::error_code ignore;
        if (!conn->busy) conn->stream.socket().cancel(ignore);
      });
    }
  }
}

std::size_t HttpServer::active() const {
  MutexLock lk(mu_);
  return conns_.size();
}

}  // namespace ichido::http

#include "cli/client.h"

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>
#include <boost/url/url_view.hpp>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <exception>
#include <optional>
#include <utility>

namespace ichido::cli {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
namespace urls = boost::urls;
using tcp = asio::ip::tcp;

bool is_ipv6_literal(const std::string& host) { return host.find(':') != std::string::npos; }

std::string host_with_port(const BaseUrl& base) {
  std::string out = is_ipv6_literal(base.host) ? "[" + base.host + "]" : base.host;
  out += ':';
  out += std::to_string(base.port);
  return out;
}

BaseUrlResult url_error(std::string message) { return {std::nullopt, std::move(message)}; }

// Errors that mean "the peer had already closed this kept-alive connection".
bool is_closed_connection(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == asio::error::connection_aborted || ec == asio::error::not_connected ||
         ec == ssl::error::stream_truncated;
}

// True unless the kept-alive connection is idle and still open: a non-blocking peek that would
// block means nothing arrived; EOF, an error or unsolicited bytes all mean "do not reuse".
bool unusable(tcp::socket& socket) {
  beast::error_code ec;
  socket.non_blocking(true, ec);
  if (ec) return true;
  char byte = 0;
  socket.receive(asio::buffer(&byte, 1), tcp::socket::message_peek, ec);
  beast::error_code ignored;
  socket.non_blocking(false, ignored);
  return ec != asio::error::would_block && ec != asio::error::try_again;
}

// Methods that may be sent twice without changing the outcome (RFC 9110 9.2.2). ichido's PUT
// (create) answers 200 for an identical second create.
bool is_idempotent(http::verb v) {
  return v == http::verb::get || v == http::verb::head || v == http::verb::put ||
         v == http::verb::delete_ || v == http::verb::options;
}

std::string describe(const beast::error_code& ec, std::chrono::milliseconds timeout) {
  if (ec == beast::error::timeout)
    return "timed out after " + std::to_string(timeout.count()) + " ms";
  if (ec == ssl::error::stream_truncated) return "the TLS connection was cut short";
  return ec.message();
}

// OpenSSL's words for a failed handshake, plus what to do about the common case (a server whose
// certificate is not signed by a trusted CA).
std::string describe_handshake(const beast::error_code& ec, const std::string& host,
                               const std::optional<std::string>& cacert) {
  std::string out = "TLS handshake with " + host + " failed: " + ec.message();
  if (ec.category() == asio::error::get_ssl_category()) {
    const std::string what = ec.message();
    if (what.find("certificate") != std::string::npos) {
      out += cacert ? "; the server's certificate is not signed by a CA in " + *cacert +
                          " or does not name " + host
                    : "; the server's certificate is not signed by a CA this system trusts or "
                      "does not name " +
                          host + " (a private CA: pass --cacert FILE or set ICHIDO_CACERT)";
    }
  }
  return out;
}

}  // namespace

std::string BaseUrl::to_string() const {
  return (tls ? "https://" : "http://") + host_with_port(*this) + prefix;
}

BaseUrlResult parse_base_url(std::string_view text) {
  std::string s(text);
  if (s.empty()) return url_error("the server URL is empty");
  if (s.find("://") == std::string::npos) s = "http://" + s;
  auto parsed = urls::parse_uri(s);
  if (!parsed) {
    return url_error("'" + std::string(text) +
                     "' is not a URL (expected http://HOST:PORT or https://HOST:PORT)");
  }
  const urls::url_view u = *parsed;
  if (u.scheme_id() != urls::scheme::http && u.scheme_id() != urls::scheme::https) {
    return url_error("unsupported URL scheme '" + std::string(u.scheme()) +
                     "'; use http:// or https://");
  }
  if (u.has_userinfo())
    return url_error("the server URL must not contain user info; use ICHIDO_TOKEN");
  if (u.has_query() || u.has_fragment()) {
    return url_error("the server URL must not contain a query or a fragment");
  }
  if (u.host_type() == urls::host_type::ipvfuture) return url_error("unsupported host address");
  BaseUrl base;
  base.tls = u.scheme_id() == urls::scheme::https;
  base.port = base.tls ? 443 : 80;
  base.host = u.host_address();
  if (base.host.empty()) return url_error("the server URL has no host");
  if (u.has_port()) {
    const std::string_view port = u.port();
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value == 0 ||
        value > 65535) {
      return url_error("invalid port '" + std::string(port) + "' in the server URL");
    }
    base.port = static_cast<std::uint16_t>(value);
  }
  base.prefix = u.encoded_path();
  // Boost.URL 1.81 accepts "http://h:12x" as port 12 and path "x"; a path must start with '/'.
  if (!base.prefix.empty() && base.prefix.front() != '/') {
    return url_error("invalid port or path in the server URL '" + std::string(text) + "'");
  }
  while (!base.prefix.empty() && base.prefix.back() == '/') base.prefix.pop_back();
  return {std::move(base), {}};
}

std::string percent_encode(std::string_view text) {
  return urls::encode(text, urls::unreserved_chars);
}

// The connection and the event loop that drives it. Every operation is started asynchronously
// and the loop is run until it completes: that is how beast::tcp_stream's timeouts apply to an
// otherwise synchronous client. Handlers never outlive the call that started them.
//
// A connection is either `plain` or `secure` (TLS over a tcp_stream); a TLS stream cannot be
// reused after its connection ends, so each connection gets a new one.
struct HttpClient::Impl {
  asio::io_context ioc{1};
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;
  std::unique_ptr<ssl::context> tls;  // made on the first https connection
  beast::flat_buffer buffer;
  bool connected = false;

  void run() {
    ioc.restart();
    ioc.run();
  }

  beast::tcp_stream& lowest() { return secure ? beast::get_lowest_layer(*secure) : *plain; }

  // Calls f with the stream the HTTP messages go through.
  template <class F>
  void with_stream(F&& f) {
    if (secure) {
      f(*secure);
    } else {
      f(*plain);
    }
  }

  void close() {
    if (plain || secure) {
      beast::error_code ignored;
      lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
      lowest().close();
    }
    plain.reset();
    secure.reset();
    buffer.clear();
    connected = false;
  }
};

namespace {

// The TLS client context: TLS 1.2 or later, peer verification against `cacert` or the system's
// CAs. Returns an error sentence when the CA file cannot be used.
std::string make_tls_context(std::unique_ptr<ssl::context>& out,
                             const std::optional<std::string>& cacert) {
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
  beast::error_code ec;
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1,
                   ec);
  if (cacert) {
    ctx->load_verify_file(*cacert, ec);
    if (ec) return "cannot use the CA file " + *cacert + ": " + ec.message();
  } else {
    ctx->set_default_verify_paths(ec);
    if (ec) return "cannot load the system's CA certificates: " + ec.message();
  }
  ctx->set_verify_mode(ssl::verify_peer, ec);
  out = std::move(ctx);
  return {};
}

}  // namespace

HttpClient::HttpClient(BaseUrl base, ClientOptions options)
    : base_(std::move(base)), options_(std::move(options)), impl_(std::make_unique<Impl>()) {
  if (!options_.token) {
    const char* env = std::getenv("ICHIDO_TOKEN");
    options_.token = (env != nullptr) ? std::string(env) : std::string();
  }
  if (!options_.cacert) {
    const char* env = std::getenv("ICHIDO_CACERT");
    if (env != nullptr && *env != '\0') options_.cacert = std::string(env);
  }
}

HttpClient::~HttpClient() = default;
HttpClient::HttpClient(HttpClient&&) noexcept = default;
HttpClient& HttpClient::operator=(HttpClient&&) noexcept = default;

void HttpClient::close() {
  if (impl_) impl_->close();
}

HttpResult HttpClient::send(const Request& request) {
  if (!impl_) return {std::nullopt, "this client was moved from"};
  try {
    Impl& im = *impl_;
    const std::chrono::milliseconds read_timeout =
        request.read_timeout.count() > 0 ? request.read_timeout : options_.read_timeout;

    http::request<http::string_body> req;
    const http::verb verb = http::string_to_verb(request.method);
    if (verb == http::verb::unknown) {
      req.method_string(request.method);
    } else {
      req.method(verb);
    }
    std::string target = base_.prefix + (request.target.empty() ? "/" : request.target);
    req.target(target);
    req.version(11);
    req.set(http::field::host, host_with_port(base_));
    req.set(http::field::user_agent, options_.user_agent);
    req.set(http::field::accept, "application/json");
    if (!options_.token->empty()) req.set(http::field::authorization, "Bearer " + *options_.token);
    if (!request.body.empty()) req.set(http::field::content_type, "application/json");
    req.body() = request.body;
    req.prepare_payload();

    // At most two attempts: the second only for an idempotent request whose kept-alive
    // connection failed before any byte of an answer arrived.
    for (int attempt = 0;; ++attempt) {
      if (im.connected && (im.buffer.size() != 0 || unusable(im.lowest().socket()))) im.close();
      const bool reused = im.connected;
      beast::error_code ec;
      if (!im.connected) {
        if (base_.tls && !im.tls) {
          std::string why = make_tls_context(im.tls, options_.cacert);
          if (!why.empty()) return {std::nullopt, std::move(why), /*definitive=*/true};
        }
        tcp::resolver resolver(im.ioc);
        // Name resolution (getaddrinfo) cannot be cancelled, so the connect timeout does not bound
        // it.
        auto endpoints = resolver.resolve(base_.host, std::to_string(base_.port), ec);
        if (ec) {
          return {std::nullopt, "could not resolve " + base_.host + ": " + ec.message()};
        }
        if (base_.tls) {
          im.secure.emplace(im.ioc, *im.tls);
        } else {
          im.plain.emplace(im.ioc);
        }
        im.lowest().expires_after(options_.connect_timeout);
        im.lowest().async_connect(endpoints,
                                  [&](beast::error_code e, const tcp::endpoint&) { ec = e; });
        im.run();
        if (ec) {
          im.close();
          return {std::nullopt, "could not connect to " + base_.to_string() + ": " +
                                    describe(ec, options_.connect_timeout)};
        }
        if (base_.tls) {
          SSL* native = im.secure->native_handle();
          const bool is_name = !is_ipv6_literal(base_.host) &&
                               base_.host.find_first_not_of("0123456789.") != std::string::npos;
          // SNI carries names only (RFC 6066); the certificate check covers names and addresses.
          if (is_name) SSL_set_tlsext_host_name(native, base_.host.c_str());
          im.secure->set_verify_callback(ssl::host_name_verification(base_.host), ec);
          im.secure->async_handshake(ssl::stream_base::client,
                                     [&](beast::error_code e) { ec = e; });
          im.run();
          if (ec) {
            im.close();
            if (ec == beast::error::timeout) {
              return {std::nullopt, "TLS handshake with " + base_.to_string() + ": " +
                                        describe(ec, options_.connect_timeout)};
            }
            // A refused certificate stays refused; other handshake errors may be the network's.
            const bool refused = ec.category() == asio::error::get_ssl_category() &&
                                 ec.message().find("certificate") != std::string::npos;
            return {std::nullopt, describe_handshake(ec, base_.host, options_.cacert), refused};
          }
        }
        im.connected = true;
      }

      im.lowest().expires_after(read_timeout);
      im.with_stream([&](auto& stream) {
        http::async_write(stream, req, [&](beast::error_code e, std::size_t) { ec = e; });
      });
      im.run();
      bool got_some = false;
      http::response_parser<http::string_body> parser;
      if (!ec) {
        parser.body_limit(options_.max_response_bytes);
        im.with_stream([&](auto& stream) {
          http::async_read(stream, im.buffer, parser,
                           [&](beast::error_code e, std::size_t) { ec = e; });
        });
        im.run();
        got_some = parser.got_some();
      }
      if (ec) {
        im.close();
        if (reused && attempt == 0 && !got_some && is_idempotent(verb) &&
            is_closed_connection(ec)) {
          continue;
        }
        return {std::nullopt,
                "no answer from " + base_.to_string() + ": " + describe(ec, read_timeout)};
      }

      http::response<http::string_body> res = parser.release();
      HttpResponse out;
      out.status = static_cast<int>(res.result_int());
      for (const auto& field : res.base()) {
        std::string name(field.name_string());
        std::transform(name.begin(), name.end(), name.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        auto [it, inserted] = out.headers.try_emplace(std::move(name), field.value());
        if (!inserted) {
          it->second += ", ";
          it->second += field.value();
        }
      }
      if (!res.keep_alive()) im.close();
      out.body = std::move(res.body());
      return {std::move(out), {}};
    }
  } catch (const std::exception& e) {
    if (impl_) impl_->close();
    return {std::nullopt, std::string("request failed: ") + e.what()};
  }
}

}  // namespace ichido::cli

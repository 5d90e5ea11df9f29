#include "cli/client.h"

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>
#include <boost/url/url_view.hpp>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <exception>
#include <utility>

namespace ichido::cli {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
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
         ec == asio::error::connection_aborted || ec == asio::error::not_connected;
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
  return ec.message();
}

}  // namespace

std::string BaseUrl::to_string() const { return "http://" + host_with_port(*this) + prefix; }

BaseUrlResult parse_base_url(std::string_view text) {
  std::string s(text);
  if (s.empty()) return url_error("the server URL is empty");
  if (s.find("://") == std::string::npos) s = "http://" + s;
  auto parsed = urls::parse_uri(s);
  if (!parsed)
    return url_error("'" + std::string(text) + "' is not a URL (expected http://HOST:PORT)");
  const urls::url_view u = *parsed;
  if (u.scheme_id() == urls::scheme::https) {
    return url_error("https URLs are not supported by the ichido client yet; use http://");
  }
  if (u.scheme_id() != urls::scheme::http) {
    return url_error("unsupported URL scheme '" + std::string(u.scheme()) + "'; use http://");
  }
  if (u.has_userinfo())
    return url_error("the server URL must not contain user info; use ICHIDO_TOKEN");
  if (u.has_query() || u.has_fragment()) {
    return url_error("the server URL must not contain a query or a fragment");
  }
  if (u.host_type() == urls::host_type::ipvfuture) return url_error("unsupported host address");
  BaseUrl base;
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
struct HttpClient::Impl {
  asio::io_context ioc{1};
  beast::tcp_stream stream{ioc};
  beast::flat_buffer buffer;
  bool connected = false;

  void run() {
    ioc.restart();
    ioc.run();
  }

  void close() {
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream.close();
    buffer.clear();
    connected = false;
  }
};

HttpClient::HttpClient(BaseUrl base, ClientOptions options)
    : base_(std::move(base)), options_(std::move(options)), impl_(std::make_unique<Impl>()) {
  if (!options_.token) {
    const char* env = std::getenv("ICHIDO_TOKEN");
    options_.token = (env != nullptr) ? std::string(env) : std::string();
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
      if (im.connected && (im.buffer.size() != 0 || unusable(im.stream.socket()))) im.close();
      const bool reused = im.connected;
      beast::error_code ec;
      if (!im.connected) {
        tcp::resolver resolver(im.ioc);
        // Name resolution (getaddrinfo) cannot be cancelled, so the connect timeout does not bound
        // it.
        auto endpoints = resolver.resolve(base_.host, std::to_string(base_.port), ec);
        if (ec) {
          return {std::nullopt, "could not resolve " + base_.host + ": " + ec.message()};
        }
        im.stream.expires_after(options_.connect_timeout);
        im.stream.async_connect(endpoints,
                                [&](beast::error_code e, const tcp::endpoint&) { ec = e; });
        im.run();
        if (ec) {
          im.close();
          return {std::nullopt, "could not connect to " + base_.to_string() + ": " +
                                    describe(ec, options_.connect_timeout)};
        }
        im.connected = true;
      }

      im.stream.expires_after(read_timeout);
      http::async_write(im.stream, req, [&](beast::error_code e, std::size_t) { ec = e; });
      im.run();
      bool got_some = false;
      http::response_parser<http::string_body> parser;
      if (!ec) {
        parser.body_limit(options_.max_response_bytes);
        http::async_read(im.stream, im.buffer, parser,
                         [&](beast::error_code e, std::size_t) { ec = e; });
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

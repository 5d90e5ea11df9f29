// The server's HTTP/1 request parser: Beast's basic_parser, producing a BeastRequest whose header
// holds only the fields the API reads.
//
// Beast's `request_parser<string_body>` stores every header field in the message: one
// allocation, a list link and a red-black tree insert per field, and a free per field when the
// message goes — 1,100–1,800 instructions of every request (callgrind) for the four fields a
// minimal client sends (Host, User-Agent, Content-Type, Content-Length), none of which the API
// reads (the parser itself consumes Content-Length and Transfer-Encoding). This
// parser is that one with a different on_field_impl: a field is stored only when
// kept_request_field() says it is read. Everything else is Beast's: the request line, the limits
// (header_limit counts every byte of the header, kept or not), Content-Length and chunked
// framing, and every error.
#pragma once

#include <boost/beast/http/basic_parser.hpp>
#include <string_view>

#include "http/message.h"

namespace ichido::http {

// True for the header fields somebody reads of a request the server parsed, by name (case
// insensitive); the others are dropped while parsing. Who reads them:
// - Connection: BeastRequest::keep_alive() (Api::serve);
// - Authorization, If-None-Match: Api::serve, into Request;
// - Origin, Access-Control-Request-Method, Access-Control-Request-Private-Network: CORS
//   (Api::cors_origin, Api::serve, Api::cors_preflight);
// - Expect: the server's 100-continue (server.cc, expects_continue).
// Reading another field of a parsed request means adding it here (request_parser_test.cc checks
// that the list and these readers agree). The message's own readers of dropped fields —
// chunked(), has_content_length(), payload_size(), need_eof() — must not be asked of it.
bool kept_request_field(beast_http::field name, std::string_view name_string);

class RequestParser final : public beast_http::basic_parser<true> {
  using sv = boost::beast::string_view;

 public:
  RequestParser() : reader_(message_.base(), message_.body()) {}
  RequestParser(const RequestParser&) = delete;
  RequestParser& operator=(const RequestParser&) = delete;

  // The message as parsed so far (the header once is_header_done()).
  const BeastRequest& get() const { return message_; }
  // The message, moved out; the parser is not usable afterwards.
  BeastRequest release() { return std::move(message_); }

 private:
  void on_request_impl(beast_http::verb method, sv method_string, sv target, int version,
                       boost::system::error_code& ec) override;
  void on_response_impl(int, sv, int, boost::system::error_code&) override {}
  void on_field_impl(beast_http::field name, sv name_string, sv value,
                     boost::system::error_code& ec) override;
  void on_header_impl(boost::system::error_code& ec) override { ec = {}; }
  void on_body_init_impl(const boost::optional<std::uint64_t>& content_length,
                         boost::system::error_code& ec) override;
  std::size_t on_body_impl(sv body, boost::system::error_code& ec) override;
  void on_chunk_header_impl(std::uint64_t, sv, boost::system::error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t remain, sv body,
                                 boost::system::error_code& ec) override;
  void on_finish_impl(boost::system::error_code& ec) override;

  BeastRequest message_;
  beast_http::string_body::reader reader_;
  bool used_ = false;
};

}  // namespace ichido::http

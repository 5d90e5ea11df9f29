#include "http/request_parser.h"

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>

namespace ichido::http {

bool kept_request_field(beast_http::field name, std::string_view name_string) {
  using beast_http::field;
  switch (name) {
    case field::connection:
    case field::authorization:
    case field::if_none_match:
    case field::origin:
    case field::access_control_request_method:
    case field::expect:
      return true;
    case field::unknown:  // Beast has no constant for this one
      return boost::beast::iequals(name_string, "Access-Control-Request-Private-Network");
    default:
      return false;
  }
}

void RequestParser::on_request_impl(beast_http::verb method, sv method_string, sv target,
                                    int version, boost::system::error_code& ec) {
  if (used_) {  // one parser per message, as Beast's parser
    ec = beast_http::error::stale_parser;
    return;
  }
  used_ = true;
  message_.target(target);
  if (method != beast_http::verb::unknown) {
    message_.method(method);
  } else {
    message_.method_string(method_string);
  }
  message_.version(version);
}

void RequestParser::on_field_impl(beast_http::field name, sv name_string, sv value,
                                  boost::system::error_code&) {
  if (kept_request_field(name, std::string_view(name_string.data(), name_string.size()))) {
    message_.insert(name, name_string, value);
  }
}

void RequestParser::on_body_init_impl(const boost::optional<std::uint64_t>& content_length,
                                      boost::system::error_code& ec) {
  reader_.init(content_length, ec);
}

std::size_t RequestParser::on_body_impl(sv body, boost::system::error_code& ec) {
  return reader_.put(boost::asio::buffer(body.data(), body.size()), ec);
}

std::size_t RequestParser::on_chunk_body_impl(std::uint64_t, sv body,
                                              boost::system::error_code& ec) {
  return reader_.put(boost::asio::buffer(body.data(), body.size()), ec);
}

void RequestParser::on_finish_impl(boost::system::error_code& ec) { reader_.finish(ec); }

}  // namespace ichido::http

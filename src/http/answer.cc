#include "http/answer.h"

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/status.hpp>
#include <charconv>
#include <cstring>

namespace ichido::http {

void Answer::add(std::string_view name, std::string_view value) {
  const std::size_t at = fields_.size();
  fields_.resize(at + name.size() + 2 + value.size() + 2);
  char* p = fields_.data() + at;
  std::memcpy(p, name.data(), name.size());
  p += name.size();
  std::memcpy(p, ": ", 2);
  p += 2;
  std::memcpy(p, value.data(), value.size());
  p += value.size();
  std::memcpy(p, "\r\n", 2);
}

void Answer::set(std::string_view name, std::string_view value) {
  for (std::size_t at = 0; at < fields_.size();) {
    const Line line = first_line(std::string_view(fields_).substr(at));
    if (boost::beast::iequals(line.name, name)) {
      fields_.erase(at, line.size);
    } else {
      at += line.size;
    }
  }
  add(name, value);
}

std::optional<std::string> Answer::find(std::string_view name) const {
  std::optional<std::string> found;
  for_each_field([&](std::string_view n, std::string_view v) {
    if (!found && boost::beast::iequals(n, name)) found.emplace(v);
  });
  return found;
}

std::string_view Answer::connection() const {
  if (version_ == 11) return keep_alive_ ? std::string_view() : std::string_view("close");
  return keep_alive_ ? std::string_view("keep-alive") : std::string_view();
}

std::string_view Answer::content_length(char (&digits)[24]) const {
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, body_.size());
  (void)ec;  // 24 digits hold any size_t
  return std::string_view(digits, static_cast<std::size_t>(end - digits));
}

Answer make_answer(Response r, unsigned version, bool keep_alive, std::string_view cors_origin) {
  Answer a(r.status, version, keep_alive);
  // The fields every answer has take ≈ 75 bytes; room for a few more, one allocation.
  std::size_t room = 128 + cors_origin.size();
  for (const auto& [k, v] : r.headers) room += k.size() + v.size() + 4;
  a.reserve_fields(room);
  // The fields in the order Beast's set() left them when answers were Beast messages
  // (server_test holds the two to each other); add() where the name cannot be there yet.
  a.add("Server", "ichido");
  if (!r.content_type.empty()) a.add("Content-Type", r.content_type);
  a.add("Cache-Control", "no-store");
  for (const auto& [k, v] : r.headers) a.set(k, v);
  if (r.status == 503 && !a.find("Retry-After")) a.add("Retry-After", "1");
  if (r.status == 401) a.set("WWW-Authenticate", "Bearer realm=\"ichido\"");
  if (!cors_origin.empty()) {
    a.set("Access-Control-Allow-Origin", cors_origin);
    a.set("Vary", "Origin");
    if (r.status != 204) a.set("Access-Control-Expose-Headers", "Retry-After, ETag");
  }
  // A 204 or 304 has no body (RFC 9110 §6.4.1); none is sent even if a handler made one, so
  // that the connection's framing holds.
  if (r.status != 204 && r.status != 304) a.body() = std::move(r.body);
  return a;
}

// Sized first, then copied into place: appended piece by piece (four appends per field, each
// with its capacity check) it cost ≈ 1,500 instructions per answer, this ≈ 390 (callgrind, W1).
std::string_view serialize_head(const Answer& a, std::string& out) {
  const unsigned v = a.version();
  const unsigned code = a.result_int();
  char line[] = "HTTP/1.1 200 ";  // version and status patched in below
  line[5] = static_cast<char>('0' + v / 10 % 10);
  line[7] = static_cast<char>('0' + v % 10);
  line[9] = static_cast<char>('0' + code / 100 % 10);
  line[10] = static_cast<char>('0' + code / 10 % 10);
  line[11] = static_cast<char>('0' + code % 10);
  const std::string_view status_line(line, sizeof line - 1);
  const auto reason =
      boost::beast::http::obsolete_reason(static_cast<boost::beast::http::status>(code));
  const std::string_view connection = a.connection();
  char digits[24];
  const std::string_view length =
      a.has_content_length() ? a.content_length(digits) : std::string_view();
  constexpr std::string_view kConnection = "Connection: ";
  constexpr std::string_view kLength = "Content-Length: ";
  // Every line below ends in "\r\n" (2); an empty line ends the head.
  std::size_t size = status_line.size() + reason.size() + 2 + a.field_lines().size() + 2;
  if (!connection.empty()) size += kConnection.size() + connection.size() + 2;
  if (a.has_content_length()) size += kLength.size() + length.size() + 2;
  out.resize(size);
  char* p = out.data();
  const auto put = [&p](std::string_view s) {
    std::memcpy(p, s.data(), s.size());
    p += s.size();
  };
  put(status_line);
  put(std::string_view(reason.data(), reason.size()));
  put("\r\n");
  put(a.field_lines());
  if (!connection.empty()) {
    put(kConnection);
    put(connection);
    put("\r\n");
  }
  if (a.has_content_length()) {
    put(kLength);
    put(length);
    put("\r\n");
  }
  put("\r\n");
  return out;
}

}  // namespace ichido::http

// An answer as the server sends it: status line, header fields, body. Api::handle() makes one
// from a handler's Response (make_answer); the server writes serialize_head() and then body().
//
// The header fields are kept as the text they are written as ("Name: value\r\n", in order), not
// in Beast's basic_fields, which allocates, links and indexes every field of every answer
// (≈ 2,000 instructions per answer with its destruction, counted with callgrind).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "http/message.h"

namespace ichido::http {

class Answer {
 public:
  // Status 0, no fields, no body: "nothing to send" (an admitted header, a client gone).
  Answer() = default;
  Answer(unsigned status, unsigned version, bool keep_alive)
      : status_(status), version_(version), keep_alive_(keep_alive) {}

  unsigned result_int() const { return status_; }
  unsigned version() const { return version_; }  // 10 or 11, as the request's
  // Whether the connection stays open after this answer; written as the Connection field
  // (`close` for HTTP/1.1, `keep-alive` for HTTP/1.0, none when it is the version's default).
  bool keep_alive() const { return keep_alive_; }
  void keep_alive(bool on) { keep_alive_ = on; }
  const std::string& body() const { return body_; }
  std::string& body() { return body_; }

  // Room for `n` bytes of field lines, so that adding them allocates once.
  void reserve_fields(std::size_t n) { fields_.reserve(n); }
  // Adds `name: value` after the fields so far, without looking for one of the same name: for
  // building an answer whose names are known to be new.
  void add(std::string_view name, std::string_view value);
  // As Beast's set(): every field named `name` (case-insensitive) is removed, then `name: value`
  // is added last. Neither `name` nor `value` may hold CR or LF (not checked: names and values
  // come from the server's own code, or are a request's Origin that matched an allowed pattern,
  // and Beast's parser refuses CR and LF in field values). Connection and Content-Length are
  // not set here: they follow from keep_alive() and body().
  void set(std::string_view name, std::string_view value);
  // The value of the first field named `name` (case-insensitive), Connection and
  // Content-Length included; nullopt when there is none. A copy: for tests and rare paths.
  std::optional<std::string> find(std::string_view name) const;
  // Calls f(name, value) for every field in the order they are written, Connection and
  // Content-Length last.
  template <class F>
  void for_each_field(F&& f) const {
    for (std::string_view rest = fields_; !rest.empty();) {
      const Line line = first_line(rest);
      f(line.name, line.value);
      rest.remove_prefix(line.size);
    }
    if (const auto c = connection(); !c.empty()) f(std::string_view("Connection"), c);
    if (has_content_length()) {
      char digits[24];
      f(std::string_view("Content-Length"), content_length(digits));
    }
  }

  // The field lines set so far ("Name: value\r\n" each), without Connection and Content-Length.
  std::string_view field_lines() const { return fields_; }
  // The Connection field's value keep_alive() asks for in this version, "" for none.
  std::string_view connection() const;
  // Every answer says how long its body is, but a 204 (RFC 9110 §8.6: it has none).
  bool has_content_length() const { return status_ != 204; }
  // body().size() in decimal, written into `digits`.
  std::string_view content_length(char (&digits)[24]) const;

 private:
  // The first of `lines` ("Name: value\r\n"…): its name, its value, its length with the CRLF.
  struct Line {
    std::string_view name;
    std::string_view value;
    std::size_t size;
  };
  static Line first_line(std::string_view lines) {
    const auto colon = lines.find(": ");
    const auto end = lines.find("\r\n", colon);
    return {lines.substr(0, colon), lines.substr(colon + 2, end - colon - 2), end + 2};
  }

  unsigned status_ = 0;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  std::string fields_;
  std::string body_;
};

// The answer to send for a handler's response: its status, body and headers, and the fields
// every answer carries (decided here, once, for every route and error):
// Server: ichido; Content-Type (unless the response has none); Cache-Control: no-store unless
// the response sets its own; the response's headers (a name it repeats replaces the earlier
// field, as Beast's set()); Retry-After: 1 on a 503 that sets none; WWW-Authenticate on a 401;
// with `cors_origin` (an allowed Origin) Access-Control-Allow-Origin, Vary: Origin and, but on a
// 204, Access-Control-Expose-Headers; then Connection and Content-Length (Answer).
// `r.status` must be 100–999 (the status line has three digits); the body of a 204 or 304 is
// dropped (they have none).
Answer make_answer(Response r, unsigned version, bool keep_alive,
                   std::string_view cors_origin = {});

// The status line and header fields of `a`, ending in the empty line, written into `out` (its
// old contents replaced; a reused string keeps its capacity, so a warm one allocates nothing).
// Returns a view of `out`. The same bytes as Beast's serializer writes for the same fields (the
// server used it before; server_test holds the two to each other).
std::string_view serialize_head(const Answer& a, std::string& out);

}  // namespace ichido::http

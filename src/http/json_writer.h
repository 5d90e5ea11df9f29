// JsonWriter: JSON text written straight into one string, for the answers of the routes every
// automation calls (next, once begin/complete/fail/renew, lock acquire/release/renew and
// force-release), which built a boost::json::object only to serialize it at once (writing
// straight saves ≈ 3,000 instructions of a `next`, counted with callgrind). Reads,
// lists and errors still go through boost::json: they are rare, and their shapes are bigger.
//
// Contract: the text is byte for byte what boost::json::serialize writes for the same value built
// in the same order (strings escaped as it escapes them: `"`, `\`, \b \f \n \r \t, other bytes
// below 0x20 as \u00xx, everything else as is), so a route moved to the writer answers exactly as
// before; json_writer_test.cc checks this against boost::json on random values. The calls must
// form a valid document (members only inside an object, elements only inside an array, every
// container closed), and member names are the server's own, printable ASCII without `"` or `\`
// (written as they are): misuse is a programming error, caught by assertions in debug builds.
#pragma once

#include <cassert>
#include <charconv>
#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ichido::http {

// Appends `s` as a JSON string (quoted and escaped as above). Runs of characters that need no
// escape are appended at once. Shared with the access log.
void append_json_string(std::string& out, std::string_view s);

// Appends `v` in decimal (as JSON writes an integer), without a temporary string. Shared with
// the access log.
template <std::integral I>
void append_integer(std::string& out, I v) {
  char buf[24];
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  out.append(buf, end);
}

class JsonWriter {
 public:
  JsonWriter() { out_.reserve(256); }

  // Containers: the unnamed forms open the document or an element of the enclosing array; the
  // named forms open a member of the enclosing object.
  JsonWriter& open_object() { return open('{'); }
  JsonWriter& open_object(std::string_view name) { return name_then(name).open_nested('{'); }
  JsonWriter& open_array(std::string_view name) { return name_then(name).open_nested('['); }
  JsonWriter& close_object() { return close('}'); }
  JsonWriter& close_array() { return close(']'); }

  // Members of the open object.
  JsonWriter& member(std::string_view name, std::string_view s) {
    name_then(name);
    append_json_string(out_, s);
    return *this;
  }
  JsonWriter& member(std::string_view name, const std::string& s) {
    return member(name, std::string_view(s));
  }
  JsonWriter& member(std::string_view name, const char* s) {
    return member(name, std::string_view(s));
  }
  // The string, or null when there is none.
  JsonWriter& member(std::string_view name, const std::optional<std::string>& s) {
    return s ? member(name, std::string_view(*s)) : member(name, nullptr);
  }
  JsonWriter& member(std::string_view name, std::nullptr_t) {
    name_then(name);
    out_ += "null";
    return *this;
  }
  template <class B>
    requires std::same_as<B, bool>
  JsonWriter& member(std::string_view name, B b) {
    name_then(name);
    out_ += b ? "true" : "false";
    return *this;
  }
  template <std::integral I>
    requires(!std::same_as<I, bool> && !std::same_as<I, char>)
  JsonWriter& member(std::string_view name, I v) {
    name_then(name);
    append_integer(out_, v);
    return *this;
  }
  // A member whose value is JSON text already (one value, written by a serializer).
  JsonWriter& member_json(std::string_view name, std::string_view json_text) {
    name_then(name);
    out_ += json_text;
    return *this;
  }

  // The document; the writer is left empty.
  std::string take() && {
    assert(depth_ == 0);
    return std::move(out_);
  }

 private:
  // At most this many containers open at once (the answers nest two deep).
  static constexpr int kMaxDepth = 8;

  JsonWriter& open(char c) {
    if (depth_ > 0) separate();  // an array element
    return open_nested(c);
  }
  JsonWriter& open_nested(char c) {
    assert(depth_ < kMaxDepth);
    out_ += c;
    first_[depth_++] = true;
    return *this;
  }
  JsonWriter& close(char c) {
    assert(depth_ > 0);
    --depth_;
    out_ += c;
    return *this;
  }
  void separate() {
    assert(depth_ > 0);
    if (!first_[depth_ - 1]) out_ += ',';
    first_[depth_ - 1] = false;
  }
  // Names come from the server's code: plain ASCII, nothing to escape (checked in debug builds).
  JsonWriter& name_then(std::string_view name) {
    assert(plain_name(name));
    separate();
    out_ += '"';
    out_ += name;
    out_ += "\":";
    return *this;
  }
  static bool plain_name(std::string_view name) {
    for (const char c : name)
      if (c < 0x20 || c > 0x7e || c == '"' || c == '\\') return false;
    return true;
  }

  std::string out_;
  int depth_ = 0;
  bool first_[kMaxDepth] = {};  // per open container: nothing written in it yet
};

}  // namespace ichido::http

// RequestParser: Beast's request parser, keeping only the header fields the API reads.
#include "http/request_parser.h"

#include <gtest/gtest.h>

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/parser.hpp>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace ichido::http {
namespace {

namespace beast = boost::beast;

// Feeds `raw` to `parser` in pieces of at most `piece` bytes, as the server does (put() with what
// is buffered, the unused rest kept for the next call). Returns the first error, or success when
// the message is done; need_more at the end of the input is returned as is.
template <class Parser>
boost::system::error_code feed(Parser& parser, std::string_view raw, std::size_t piece,
                               std::size_t body_limit = 1 << 20) {
  parser.eager(true);
  parser.body_limit(body_limit);
  parser.header_limit(8192);
  std::string buffered;
  std::size_t at = 0;
  boost::system::error_code ec;
  while (!parser.is_done()) {
    if (at < raw.size()) {
      const std::size_t n = std::min(piece, raw.size() - at);
      buffered.append(raw.substr(at, n));
      at += n;
    } else if (buffered.empty()) {
      return beast_http::error::need_more;
    }
    const std::size_t used = parser.put(boost::asio::buffer(buffered), ec);
    buffered.erase(0, used);
    if (ec == beast_http::error::need_more) {
      if (at == raw.size()) return ec;
      ec = {};
      continue;
    }
    if (ec) return ec;
  }
  return ec;
}

TEST(RequestParser, KeepsTheFieldsTheApiReadsAndDropsTheRest) {
  const std::string raw =
      "POST /v1/ns/a/counters/c/next HTTP/1.1\r\n"
      "Host: example\r\n"
      "User-Agent: Mozilla/5.0 (compatible; Google-Apps-Script)\r\n"
      "Accept: */*\r\n"
      "Accept-Encoding: gzip, deflate\r\n"
      "Content-Type: application/json\r\n"
      "X-Anything: 1\r\n"
      "Connection: keep-alive\r\n"
      "authorization: Bearer s3cret\r\n"
      "If-None-Match: \"abc\"\r\n"
      "ORIGIN: https://script.google.com\r\n"
      "Access-Control-Request-Method: POST\r\n"
      "access-control-request-private-network: true\r\n"
      "Expect: 100-continue\r\n"
      "Content-Length: 10\r\n"
      "\r\n"
      "{\"key\":1}\n";
  RequestParser p;
  ASSERT_FALSE(feed(p, raw, raw.size()));
  const BeastRequest& m = p.get();
  EXPECT_EQ(m.method(), beast_http::verb::post);
  EXPECT_EQ(m.target(), "/v1/ns/a/counters/c/next");
  EXPECT_EQ(m.version(), 11);
  EXPECT_EQ(m.body(), "{\"key\":1}\n");
  EXPECT_TRUE(m.keep_alive());
  EXPECT_EQ(m[beast_http::field::authorization], "Bearer s3cret");
  EXPECT_EQ(m[beast_http::field::if_none_match], "\"abc\"");
  EXPECT_EQ(m[beast_http::field::origin], "https://script.google.com");
  EXPECT_EQ(m[beast_http::field::access_control_request_method], "POST");
  EXPECT_EQ(m["Access-Control-Request-Private-Network"], "true");
  EXPECT_EQ(m[beast_http::field::expect], "100-continue");
  EXPECT_EQ(m[beast_http::field::connection], "keep-alive");
  for (auto f : {beast_http::field::host, beast_http::field::user_agent, beast_http::field::accept,
                 beast_http::field::accept_encoding, beast_http::field::content_type,
                 beast_http::field::content_length}) {
    EXPECT_EQ(m.find(f), m.end()) << beast_http::to_string(f);
  }
  EXPECT_EQ(m.find("X-Anything"), m.end());
  // Connection: close is what keep_alive() reads, so it must survive.
  RequestParser q;
  ASSERT_FALSE(feed(q, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 7));
  EXPECT_FALSE(q.get().keep_alive());
  RequestParser r;
  ASSERT_FALSE(feed(r, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 64));
  EXPECT_TRUE(r.get().keep_alive());
}

// Every lookup of a field in a parsed request in the HTTP layer's sources (`req`, `breq` or
// `header` with find, count, at or []) names a kept field, and none asks the message about
// Content-Length or Transfer-Encoding: a new reader of a dropped field would read nothing.
TEST(RequestParser, TheFieldsTheHttpLayerLooksUpAreKept) {
  const std::regex find_call(
      R"re(\b(?:req|breq|header)(?:\.(?:find|count|at)\(|\[)(?:beast_http::field::(\w+)|"([^"]+)")[)\]])re");
  // The message's own readers of fields the parser drops (Content-Length, Transfer-Encoding).
  const std::regex dropped_reader(
      R"re(\b(?:req|breq|header)\.(?:chunked|has_content_length|payload_size|need_eof)\(\))re");
  int seen = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(ICHIDO_SOURCE_DIR) + "/src/http")) {
    const auto path = entry.path();
    if (path.extension() != ".cc" || path.filename().string().ends_with("_test.cc")) continue;
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    EXPECT_FALSE(std::regex_search(s, dropped_reader))
        << path << " asks a parsed request about a header field the parser drops";
    for (std::sregex_iterator it(s.begin(), s.end(), find_call), end; it != end; ++it) {
      ++seen;
      if ((*it)[1].matched) {
        // beast_http::field::if_none_match -> "If-None-Match", through Beast's own table.
        std::string name = (*it)[1];
        for (char& c : name) c = c == '_' ? '-' : c;
        const auto f = beast_http::string_to_field(name);
        ASSERT_NE(f, beast_http::field::unknown) << name << " in " << path;
        EXPECT_TRUE(kept_request_field(f, beast_http::to_string(f)))
            << name << " is read in " << path << " but dropped by the parser";
      } else {
        const std::string name = (*it)[2];
        EXPECT_TRUE(kept_request_field(beast_http::string_to_field(name), name))
            << name << " is read in " << path << " but dropped by the parser";
      }
    }
  }
  EXPECT_GE(seen, 6);  // the scan found the readers it is meant to check
  // keep_alive() reads Connection; nothing spells that out as a find().
  EXPECT_TRUE(kept_request_field(beast_http::field::connection, "Connection"));
}

// What both parsers make of one input.
struct Parsed {
  boost::system::error_code ec;
  std::string method, target, body;
  unsigned version = 0;
  bool keep_alive = false;
  std::vector<std::string> kept;  // "name: value" of the kept fields, in order
};

template <class Parser>
Parsed parse_with(std::string_view raw, std::size_t piece, std::size_t body_limit) {
  Parser p;
  Parsed out;
  out.ec = feed(p, raw, piece, body_limit);
  const auto& m = p.get();
  out.method = std::string(m.method_string());
  out.target = std::string(m.target());
  out.version = m.version();
  out.body = m.body();
  if (!out.ec) out.keep_alive = m.keep_alive();
  for (const auto& f : m) {
    const std::string_view name(f.name_string().data(), f.name_string().size());
    if (kept_request_field(f.name(), name)) {
      out.kept.push_back(std::string(name) + ": " + std::string(f.value()));
    }
  }
  return out;
}

// Random requests — methods, targets, fields of every kind in any case, Content-Length or
// chunked bodies, HTTP/1.0 and 1.1, malformed lines, bodies over the limit — fed in random
// pieces to both parsers: the same errors, request line, body, keep-alive and kept fields.
TEST(RequestParser, ParsesWhatBeastsParserParses) {
  std::mt19937 rng(20261204);
  auto pick = [&](const auto& v) { return v[rng() % v.size()]; };
  const std::vector<std::string> methods = {"GET", "POST", "DELETE", "OPTIONS",
                                            "PUT", "BREW", "G@T"};
  const std::vector<std::string> targets = {"/", "/v1/ns/a/counters/c/next",      "/healthz?x=1",
                                            "*", "/v1/ns/%E3%81%82/once/k/begin", "bad target"};
  const std::vector<std::string> names = {"Host",
                                          "User-Agent",
                                          "Accept",
                                          "Content-Type",
                                          "Connection",
                                          "Authorization",
                                          "If-None-Match",
                                          "Origin",
                                          "Access-Control-Request-Method",
                                          "Access-Control-Request-Private-Network",
                                          "Expect",
                                          "X-Custom",
                                          "Cookie",
                                          "Bad Name"};
  const std::vector<std::string> values = {"",          "x",
                                           "close",     "keep-alive",
                                           "Bearer t",  "100-continue",
                                           "a, b",      "https://a.example",
                                           "  padded  "};
  int done = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string raw = pick(methods) + " " + pick(targets) + (rng() % 4 ? " HTTP/1.1" : " HTTP/1.0");
    raw += rng() % 50 ? "\r\n" : "\n";
    const int fields = static_cast<int>(rng() % 8);
    for (int i = 0; i < fields; ++i) {
      std::string name = pick(names);
      for (char& c : name) {
        if (rng() % 3 == 0) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (rng() % 7 == 0) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      }
      raw += name + ": " + pick(values) + "\r\n";
    }
    std::string body(rng() % 40, 'b');
    const int framing = static_cast<int>(rng() % 4);
    if (framing == 0 && !body.empty()) {
      raw += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    } else if (framing == 1) {
      raw += "Transfer-Encoding: chunked\r\n\r\n";
      if (!body.empty()) {
        raw += "5\r\n" + body.substr(0, 5) + "\r\n";
        if (body.size() > 5) {
          std::ostringstream hex;
          hex << std::hex << body.size() - 5;
          raw += hex.str() + "\r\n" + body.substr(5) + "\r\n";
        }
      }
      raw += "0\r\n\r\n";
    } else if (framing == 2) {
      raw += "Content-Length: " + std::to_string(body.size() + 1) + "\r\n\r\n" + body;  // short
    } else {
      raw += "\r\n";
    }
    const std::size_t piece = 1 + rng() % 64;
    const std::size_t limit = rng() % 10 ? 1 << 20 : 8;
    const Parsed ours = parse_with<RequestParser>(raw, piece, limit);
    const Parsed beasts =
        parse_with<beast_http::request_parser<beast_http::string_body>>(raw, piece, limit);
    SCOPED_TRACE(raw);
    ASSERT_EQ(ours.ec, beasts.ec) << ours.ec.message() << " / " << beasts.ec.message();
    EXPECT_EQ(ours.method, beasts.method);
    EXPECT_EQ(ours.target, beasts.target);
    EXPECT_EQ(ours.version, beasts.version);
    EXPECT_EQ(ours.body, beasts.body);
    EXPECT_EQ(ours.keep_alive, beasts.keep_alive);
    EXPECT_EQ(ours.kept, beasts.kept);
    if (!ours.ec) ++done;
  }
  EXPECT_GT(done, 500);  // enough of them were whole, valid requests
}

}  // namespace
}  // namespace ichido::http

// RequestLog::format: the exact line for each format (durations with three decimals, escaping,
// no field can split a line).
#include "http/request_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace ichido::http {
namespace {

RequestLog::Entry entry(std::int64_t duration_us) {
  RequestLog::Entry e;
  e.at = 1796066649724;
  e.remote = "127.0.0.1";
  e.method = "POST";
  e.route = "/v1/ns/{ns}/counters/{name}/next";
  e.ns = "shop";
  e.status = 200;
  e.duration_us = duration_us;
  e.token_id = "3f9a0c1d2e4b5a6f";
  return e;
}

TEST(RequestLogFormat, TextLine) {
  EXPECT_EQ(RequestLog::format(entry(1234), LogFormat::text),
            "2026-11-30T19:24:09.724Z 127.0.0.1 POST /v1/ns/{ns}/counters/{name}/next ns=shop 200 "
            "1.234ms token=3f9a0c1d2e4b5a6f\n");
}

TEST(RequestLogFormat, DurationsKeepThreeDecimals) {
  auto ms = [](std::int64_t us) {
    const std::string line = RequestLog::format(entry(us), LogFormat::text);
    const auto end = line.find("ms token=");
    return line.substr(line.rfind(' ', end) + 1, end - line.rfind(' ', end) - 1);
  };
  EXPECT_EQ(ms(0), "0.000");
  EXPECT_EQ(ms(7), "0.007");
  EXPECT_EQ(ms(70), "0.070");
  EXPECT_EQ(ms(1000), "1.000");
  EXPECT_EQ(ms(123456789), "123456.789");
  EXPECT_EQ(ms(-5), "0.000");
}

TEST(RequestLogFormat, JsonLineEscapesAndTextLineReplaces) {
  auto e = entry(500);
  e.route = "/a b\n\"c\"";
  EXPECT_EQ(RequestLog::format(e, LogFormat::json),
            "{\"at\":\"2026-11-30T19:24:09.724Z\",\"remote\":\"127.0.0.1\",\"method\":\"POST\","
            "\"route\":\"/a b\\n\\\"c\\\"\",\"ns\":\"shop\",\"status\":200,\"duration_ms\":0.500,"
            "\"token\":\"3f9a0c1d2e4b5a6f\"}\n");
  EXPECT_NE(RequestLog::format(e, LogFormat::text).find(" /a_b_\"c\" "), std::string::npos);
}

TEST(RequestLogFormat, EveryCharacterClassAtEveryPlaceInAField) {
  auto e = entry(500);
  // Escapes at the start, in the middle and at the end, UTF-8 and DEL passed through in JSON.
  const std::string route = std::string("\\a\tb\rc\x01\x1f\x7f\xE8\xAB\x8B") + '\0' + "\"";
  e.route = route;
  e.ns = "";
  const std::string json = RequestLog::format(e, LogFormat::json);
  EXPECT_NE(json.find("\"route\":\"\\\\a\\tb\\rc\\u0001\\u001f\x7f\xE8\xAB\x8B\\u0000\\\"\","),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"ns\":\"\","), std::string::npos) << json;
  const std::string text = RequestLog::format(e, LogFormat::text);
  EXPECT_NE(text.find(" \\a_b_c___\xE8\xAB\x8B_\" ns=- 200 "), std::string::npos) << text;
}

// The text line's field as the rule says: every byte <= 0x20 and 0x7f replaced by '_', every
// other byte as it is (the fast check of eight bytes at a time must agree at every byte value,
// every place and every length, and next to any other byte).
std::string replaced(std::string_view s) {
  std::string out(s);
  for (auto& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) c = '_';
  }
  return out;
}

std::string route_field(const std::string& route) {
  auto e = entry(500);
  e.route = route;
  const std::string line = RequestLog::format(e, LogFormat::text);
  const auto from = line.find(" POST ") + 6;
  return line.substr(from, line.find(" ns=") - from);
}

TEST(RequestLogFormat, EveryByteValueAtEveryPlaceOfFieldsUpToThreeWords) {
  for (int b = 0; b < 256; ++b) {
    for (std::size_t len = 1; len <= 24; ++len) {
      for (std::size_t at = 0; at < len; ++at) {
        std::string route(len, 'a');
        route[at] = static_cast<char>(b);
        ASSERT_EQ(route_field(route), replaced(route))
            << "byte " << b << " at " << at << " of " << len;
      }
    }
  }
}

TEST(RequestLogFormat, RandomFieldsOfBorderBytes) {
  // Bytes on both sides of each border (0x20/0x21, 0x7e/0x7f/0x80) and the extremes, mixed.
  const unsigned char alphabet[] = {0x00, 0x01, 0x1f, 0x20, 0x21, 0x22, 0x7e,
                                    0x7f, 0x80, 0x81, 0xa0, 0xfe, 0xff, 'a'};
  std::srand(15);
  for (int n = 0; n < 20000; ++n) {
    std::string route(1 + static_cast<std::size_t>(std::rand() % 40), 'a');
    for (auto& c : route) c = static_cast<char>(alphabet[std::rand() % sizeof alphabet]);
    ASSERT_EQ(route_field(route), replaced(route)) << n;
  }
}

// write() formats into a string each thread reuses: every line is whole and alone, a short one
// after a long one included, and reaches the file in order.
TEST(RequestLogWrite, LinesFromOneThreadReachTheFileWholeAndInOrder) {
  char path[] = "/tmp/ichido-request-log-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  RequestLog::Entry longer = entry(1234);
  longer.route = "/v1/ns/{ns}/counters/{name}/issued/{value}/void";
  RequestLog::Entry shorter = entry(7);
  shorter.route = "/healthz";
  shorter.ns = {};
  {
    RequestLog log(fd, LogFormat::text);
    log.write(longer);
    log.write(shorter);
    log.write(longer);
    log.stop();
  }
  std::string got(4096, '\0');
  const ssize_t n = ::pread(fd, got.data(), got.size(), 0);
  ::close(fd);
  ::unlink(path);
  ASSERT_GT(n, 0);
  got.resize(static_cast<std::size_t>(n));
  const std::string a = RequestLog::format(longer, LogFormat::text);
  const std::string b = RequestLog::format(shorter, LogFormat::text);
  EXPECT_EQ(got, a + b + a);
}

}  // namespace
}  // namespace ichido::http

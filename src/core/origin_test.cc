#include "core/origin.h"

#include <gtest/gtest.h>

namespace ichido::core {
namespace {

std::string ok(std::string_view text) {
  auto r = parse_origin_pattern(text);
  EXPECT_TRUE(r.ok()) << text << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : std::string();
}

void refused(std::string_view text, std::string_view says) {
  auto r = parse_origin_pattern(text);
  ASSERT_FALSE(r.ok()) << text << " was accepted as " << *r;
  EXPECT_EQ(r.error().code, errc::invalid_request);
  EXPECT_NE(r.error().message.find(says), std::string::npos) << r.error().message;
}

TEST(OriginPattern, CanonicalFormIsWhatBrowsersSend) {
  EXPECT_EQ(ok("https://example.com"), "https://example.com");
  EXPECT_EQ(ok("HTTPS://Example.COM/"), "https://example.com");
  EXPECT_EQ(ok("https://example.com:443"), "https://example.com");
  EXPECT_EQ(ok("http://example.com:80"), "http://example.com");
  EXPECT_EQ(ok("http://example.com:443"), "http://example.com:443");
  EXPECT_EQ(ok("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
  EXPECT_EQ(ok("http://[::1]:8080"), "http://[::1]:8080");
  EXPECT_EQ(ok("https://*.example.com"), "https://*.example.com");
  EXPECT_EQ(ok("https://intra:08443"), "https://intra:8443");
}

TEST(OriginPattern, RefusesWhatIsNotAnOrigin) {
  refused("*", "name each origin");
  refused("null", "Origin: null");
  refused("example.com", "scheme");
  refused("ftp://example.com", "scheme");
  refused("https://example.com/app", "no path");
  refused("https://example.com/?x", "no path");
  refused("https://user@example.com", "user info");
  refused("https://", "host is missing");
  refused("https://example.com:", "port is missing");
  refused("https://example.com:0", "1 to 65535");
  refused("https://example.com:65536", "1 to 65535");
  refused("https://example.com:80a", "1 to 65535");
  refused("https://a.*.example.com", "first label");
  refused("https://*.com", "needs a domain with a dot");
  refused("https://exa mple.com", "character");
  refused("https://a..b", "empty label");
}

TEST(OriginPattern, ExactOriginsMatchOnlyThemselves) {
  const std::string p = ok("https://example.com:8443");
  EXPECT_TRUE(origin_matches(p, "https://example.com:8443"));
  EXPECT_FALSE(origin_matches(p, "https://example.com"));
  EXPECT_FALSE(origin_matches(p, "http://example.com:8443"));
  EXPECT_FALSE(origin_matches(p, "https://example.com:84431"));
  EXPECT_FALSE(origin_matches(p, "null"));
  EXPECT_FALSE(origin_matches(p, ""));
}

TEST(OriginPattern, SubdomainPatternsMatchSubdomainsOnly) {
  const std::string p = ok("https://*.example.com");
  EXPECT_TRUE(origin_matches(p, "https://a.example.com"));
  EXPECT_TRUE(origin_matches(p, "https://a.b.example.com"));
  EXPECT_FALSE(origin_matches(p, "https://example.com"));
  EXPECT_FALSE(origin_matches(p, "https://.example.com"));
  EXPECT_FALSE(origin_matches(p, "https://evilexample.com"));
  EXPECT_FALSE(origin_matches(p, "http://a.example.com"));
  EXPECT_FALSE(origin_matches(p, "https://a.example.com:8443"));
  EXPECT_FALSE(origin_matches(p, "https://a.example.com.evil.net"));
  EXPECT_FALSE(origin_matches(p, "https://x/y.example.com"));
}

}  // namespace
}  // namespace ichido::core

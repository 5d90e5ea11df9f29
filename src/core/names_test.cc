// Tests of core/names: the identifiers every request carries. Each failure case checks the exact
// errc and the field named, because the HTTP layer turns those into details.field.
#include "core/names.h"

#include <gtest/gtest.h>

#include <string>

namespace ichido::core {
namespace {

void ExpectInvalid(const Result<void>& r, const std::string& field) {
  ASSERT_FALSE(r.ok()) << "expected invalid_request on field " << field;
  EXPECT_EQ(r.error().code, errc::invalid_request);
  EXPECT_EQ(r.error().field, field);
  EXPECT_FALSE(r.error().message.empty());
}

// --- names ---------------------------------------------------------------------------------

TEST(ValidateName, AcceptsEveryAllowedCharacter) {
  EXPECT_TRUE(validate_name("ABCXYZabcxyz0189._-", "name").ok());
  EXPECT_TRUE(validate_name("a", "name").ok());
  EXPECT_TRUE(validate_name("receipts-2026", "ns").ok());
  EXPECT_TRUE(validate_name("...", "name").ok());  // only "." and ".." are reserved
  EXPECT_TRUE(validate_name(".hidden", "name").ok());
  EXPECT_TRUE(validate_name("_", "name").ok());
}

TEST(ValidateName, LengthIsOneTo128Bytes) {
  EXPECT_TRUE(validate_name(std::string(128, 'x'), "name").ok());
  ExpectInvalid(validate_name(std::string(129, 'x'), "name"), "name");
  ExpectInvalid(validate_name("", "name"), "name");
  ExpectInvalid(validate_name("", "ns"), "ns");
}

TEST(ValidateName, RejectsDotAndDotDot) {
  ExpectInvalid(validate_name(".", "name"), "name");
  ExpectInvalid(validate_name("..", "ns"), "ns");
}

TEST(ValidateName, RejectsCharactersOutsideTheSet) {
  for (const char* bad : {"a/b", "/", "a b", "a:b", "a@b", "a%2F", "caf\xC3\xA9", "a\tb", "a+b",
                          "a~b", "{seq}", "a\\b"}) {
    SCOPED_TRACE(bad);
    ExpectInvalid(validate_name(bad, "name"), "name");
  }
  ExpectInvalid(validate_name(std::string("a\0b", 3), "ns"), "ns");
}

TEST(ValidateName, ErrorNamesTheFieldItWasGiven) {
  ExpectInvalid(validate_name("a/b", "ns"), "ns");
  ExpectInvalid(validate_name("a/b", "name"), "name");
}

// --- keys ----------------------------------------------------------------------------------

TEST(ValidateKey, AcceptsAnyValidUtf8) {
  EXPECT_TRUE(validate_key("form-response-123").ok());
  EXPECT_TRUE(validate_key("<abc/def@example.com>").ok());  // e-mail Message-ID
  EXPECT_TRUE(validate_key("<CAF=x+y_z@mail.gmail.com>").ok());
  EXPECT_TRUE(validate_key("請求書-2026年4月-第1号").ok());  // Japanese
  EXPECT_TRUE(
      validate_key("emoji \xF0\x9F\x98\x80 and \xF4\x8F\xBF\xBF").ok());  // U+1F600, U+10FFFF
  EXPECT_TRUE(validate_key(" ").ok());
  EXPECT_TRUE(validate_key("a b\tc\nd").ok());
}

TEST(ValidateKey, LengthIsOneTo512Bytes) {
  EXPECT_TRUE(validate_key(std::string(512, 'k')).ok());
  ExpectInvalid(validate_key(std::string(513, 'k')), "key");
  ExpectInvalid(validate_key(""), "key");
  // Bytes, not characters: 170 three-byte characters = 510 bytes pass, 171 = 513 fail.
  std::string jp;
  for (int i = 0; i < 170; ++i) jp += "\xE3\x81\x82";  // あ
  EXPECT_TRUE(validate_key(jp).ok());
  jp += "\xE3\x81\x82";
  ExpectInvalid(validate_key(jp), "key");
}

TEST(ValidateRequestId, OneTo128BytesOfUtf8WithoutNul) {
  EXPECT_TRUE(validate_request_id("a").ok());
  EXPECT_TRUE(validate_request_id(std::string(128, 'r')).ok());
  EXPECT_TRUE(validate_request_id("再試行-1").ok());
  ExpectInvalid(validate_request_id(""), "request_id");
  ExpectInvalid(validate_request_id(std::string(129, 'r')), "request_id");
  ExpectInvalid(validate_request_id(std::string("a\0b", 3)), "request_id");
  ExpectInvalid(validate_request_id("\xC0\xAF"), "request_id");
}

TEST(ValidateKey, RejectsNul) {
  ExpectInvalid(validate_key(std::string("a\0b", 3)), "key");
  ExpectInvalid(validate_key(std::string(1, '\0')), "key");
}

TEST(ValidateKey, RejectsInvalidUtf8) {
  const char* bad[] = {
      "\xC0\xAF",          // overlong '/'
      "\xE0\x80\xAF",      // overlong '/' in 3 bytes
      "\xF0\x80\x80\xAF",  // overlong '/' in 4 bytes
      "\xC1\xBF",          // overlong (C1 lead)
      "\xED\xA0\x80",      // U+D800, a surrogate
      "\xED\xBF\xBF",      // U+DFFF
      "\xE3\x81",          // truncated 3-byte sequence
      "abc\xF0\x9F\x98",   // truncated at the end
      "\xF4\x90\x80\x80",  // U+110000, above U+10FFFF
      "\xF5\x80\x80\x80",  // lead byte beyond any code point
      "\x80",              // lone continuation byte
      "\xE3\x41\x82",      // continuation replaced by ASCII
      "\xFF",
  };
  for (const char* b : bad) {
    SCOPED_TRACE(testing::PrintToString(std::string(b)));
    EXPECT_FALSE(is_valid_utf8(b));
    ExpectInvalid(validate_key(b), "key");
  }
}

TEST(ValidateKey, ErrorNamesTheFieldItWasGiven) {
  ExpectInvalid(validate_key("", "once_key"), "once_key");
  ExpectInvalid(validate_key("\xC0\xAF", "fingerprint"), "fingerprint");
}

TEST(IsValidUtf8, BoundaryCodePoints) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("\x7F"));
  EXPECT_TRUE(is_valid_utf8("\xC2\x80"));           // U+0080, smallest 2-byte
  EXPECT_TRUE(is_valid_utf8("\xE0\xA0\x80"));       // U+0800, smallest 3-byte
  EXPECT_TRUE(is_valid_utf8("\xED\x9F\xBF"));       // U+D7FF, just below the surrogates
  EXPECT_TRUE(is_valid_utf8("\xEE\x80\x80"));       // U+E000, just above them
  EXPECT_TRUE(is_valid_utf8("\xF0\x90\x80\x80"));   // U+10000, smallest 4-byte
  EXPECT_FALSE(is_valid_utf8("\xE0\x9F\xBF"));      // U+07FF as 3 bytes: overlong
  EXPECT_FALSE(is_valid_utf8("\xF0\x8F\xBF\xBF"));  // U+FFFF as 4 bytes: overlong
}

}  // namespace
}  // namespace ichido::core

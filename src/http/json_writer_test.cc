// JsonWriter writes what boost::json::serialize writes for the same value: checked on random
// documents built both ways at once (strings of any bytes, integers at their limits, nesting).
#include "http/json_writer.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <limits>
#include <random>
#include <string>

namespace ichido::http {
namespace {

namespace json = boost::json;

class Twin {
 public:
  explicit Twin(std::uint64_t seed) : rng_(seed) {}

  // A random object, built into `o` and written by `w`, `depth` levels deep at most.
  void object(json::object& o, JsonWriter& w, int depth) {
    const int members = pick(0, 6);
    for (int i = 0; i < members; ++i) {
      // Names unique within the object (boost::json keeps one member per name), plain ASCII as
      // the writer requires.
      const std::string name = name_text() + "#" + std::to_string(i);
      switch (pick(0, depth > 0 ? 8 : 6)) {
        case 0: {
          const std::string s = text();
          o[name] = s;
          w.member(name, s);
          break;
        }
        case 1: {
          const std::int64_t v = integer();
          o[name] = v;
          w.member(name, v);
          break;
        }
        case 2: {
          const int v = static_cast<int>(integer());
          o[name] = v;
          w.member(name, v);
          break;
        }
        case 3: {
          const bool b = pick(0, 1) == 1;
          o[name] = b;
          w.member(name, b);
          break;
        }
        case 4:
          o[name] = nullptr;
          w.member(name, nullptr);
          break;
        case 5: {
          const std::optional<std::string> s =
              pick(0, 1) ? std::optional<std::string>(text()) : std::nullopt;
          o[name] = s ? json::value(*s) : json::value(nullptr);
          w.member(name, s);
          break;
        }
        case 6: {  // a value serialized elsewhere
          json::array a{integer(), text(), nullptr};
          o[name] = a;
          w.member_json(name, json::serialize(a));
          break;
        }
        case 7: {
          json::object inner;
          w.open_object(name);
          object(inner, w, depth - 1);
          w.close_object();
          o[name] = std::move(inner);
          break;
        }
        case 8: {
          json::array items;
          w.open_array(name);
          for (int n = pick(0, 3); n > 0; --n) {
            json::object inner;
            w.open_object();
            object(inner, w, depth - 1);
            w.close_object();
            items.push_back(std::move(inner));
          }
          w.close_array();
          o[name] = std::move(items);
          break;
        }
      }
    }
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  std::int64_t integer() {
    switch (pick(0, 3)) {
      case 0:
        return std::numeric_limits<std::int64_t>::min();
      case 1:
        return std::numeric_limits<std::int64_t>::max();
      case 2:
        return pick(-20, 20);
      default:
        return static_cast<std::int64_t>(rng_());
    }
  }
  std::string name_text() {
    std::string s;
    for (int n = pick(0, 12); n > 0; --n) {
      const char c = static_cast<char>(pick(0x20, 0x7e));
      if (c != '"' && c != '\\') s += c;
    }
    return s;
  }
  // Any bytes: control characters, quotes, backslashes, DEL, UTF-8 and bytes that are not.
  std::string text() {
    std::string s;
    for (int n = pick(0, 12); n > 0; --n) {
      switch (pick(0, 3)) {
        case 0:
          s += static_cast<char>(pick(0, 0x1f));
          break;
        case 1:
          s += "\"\\/\x7f"[pick(0, 3)];
          break;
        case 2:
          s += static_cast<char>(pick(0x80, 0xff));
          break;
        default:
          s += static_cast<char>(pick(0x20, 0x7e));
      }
    }
    return s;
  }

  std::mt19937_64 rng_;
};

TEST(JsonWriter, WritesWhatBoostJsonSerializesForTheSameValue) {
  for (std::uint64_t seed = 1; seed <= 2000; ++seed) {
    Twin twin(seed);
    json::object o;
    JsonWriter w;
    w.open_object();
    twin.object(o, w, 2);
    w.close_object();
    ASSERT_EQ(std::move(w).take(), json::serialize(o)) << "seed " << seed;
  }
}

TEST(JsonWriter, EscapesEveryControlCharacterAsBoostJsonDoes) {
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  std::string out;
  append_json_string(out, all);
  EXPECT_EQ(out, json::serialize(json::value(all)));
  EXPECT_NE(out.find("\\b\\t\\n\\u000b\\f\\r\\u000e"), std::string::npos);
}

TEST(JsonWriter, ASmallAnswer) {
  JsonWriter w;
  w.open_object().member("outcome", "completed").member("attempt", 3);
  w.open_object("holder").member("owner", std::optional<std::string>()).close_object();
  w.member("replayed", true).close_object();
  EXPECT_EQ(std::move(w).take(),
            R"({"outcome":"completed","attempt":3,"holder":{"owner":null},"replayed":true})");
}

}  // namespace
}  // namespace ichido::http

#include "core/fields.h"

#include <string>

namespace ichido::core {

Error out_of_range(const IntRule& rule) {
  auto num = [](std::int64_t v) {
    return v == kMaxJsonInteger ? std::string("2^53") : std::to_string(v);
  };
  std::string f(rule.field);
  return invalid_field(f, "The " + f + " must be a whole number from " + num(rule.min) + " to " +
                              num(rule.max) + ".");
}

Result<void> check(const IntRule& rule, std::int64_t v) {
  if (v < rule.min || v > rule.max) return out_of_range(rule);
  return {};
}

}  // namespace ichido::core

// Result<T>: a value or an Error. No exceptions cross a layer boundary in ichido; every fallible
// function returns a Result and callers must look at it ([[nodiscard]]).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <variant>

#include "ichido/errc.h"

namespace ichido {

// A detail value attached to an error (e.g. details.last_value = 41).
using DetailValue = std::variant<std::int64_t, std::string>;

struct Error {
  errc code = errc::internal;
  // One human sentence saying what to do.
  std::string message;
  // The JSON field at fault ("key", "lease_ms", "name"), empty when none.
  std::string field;
  std::map<std::string, DetailValue> details;

  Error() = default;
  Error(errc c, std::string msg, std::string fld = {})
      : code(c), message(std::move(msg)), field(std::move(fld)) {}

  Error&& with(std::string k, DetailValue v) && {
    details.emplace(std::move(k), std::move(v));
    return std::move(*this);
  }
};

// Convenience for the most common error: a bad field.
inline Error invalid_field(std::string field, std::string message) {
  return Error(errc::invalid_request, std::move(message), std::move(field));
}

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const& { return std::get<1>(v_); }
  Error&& error() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

struct Unit {};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : err_(std::move(error)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const& { return err_; }
  Error&& error() && { return std::move(err_); }

 private:
  Error err_;
  bool ok_ = true;
};

}  // namespace ichido

// Propagates an error from an expression returning Result<...>.
#define ICHIDO_TRY(expr)                                                                           \
  do {                                                                                             \
    if (auto ichido_try_r_ = (expr); !ichido_try_r_.ok()) return std::move(ichido_try_r_).error(); \
  } while (0)

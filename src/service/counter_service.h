// CounterService: the Counters API as C++ calls. Validates what the rulebook cannot see from a
// single record (names, keys, text lengths), then runs the command on the store and awaits its
// durable answer. Stateless apart from the store reference; safe to share between threads.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "ichido/store.h"

namespace ichido::service {

class CounterService {
 public:
  explicit CounterService(Store& store) : store_(store) {}

  boost::asio::awaitable<Result<CreateCounterReply>> create(CreateCounterCmd cmd);
  boost::asio::awaitable<Result<NextReply>> next(NextCmd cmd);
  boost::asio::awaitable<Result<core::IssuedNumber>> void_number(VoidCmd cmd);
  boost::asio::awaitable<Result<core::CounterInfo>> set_last_value(SetCmd cmd);
  boost::asio::awaitable<Result<core::CounterInfo>> get(CounterRef ref);
  boost::asio::awaitable<Result<std::vector<core::CounterInfo>>> list(std::string ns);
  boost::asio::awaitable<Result<IssuedPage>> issued(IssuedQuery q);

 private:
  Store& store_;
};

// Validates a (namespace, name) pair: errors name field "ns" or "name".
Result<void> validate_ref(const CounterRef& ref);

}  // namespace ichido::service

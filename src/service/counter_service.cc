#include "service/counter_service.h"

#include "core/names.h"
#include "service/call_store.h"

namespace ichido::service {
namespace {

Result<void> validate_text(const std::string& s, std::size_t max, const char* field) {
  if (s.size() > max) {
    return invalid_field(
        field, std::string("The ") + field + " must be at most " + std::to_string(max) + " bytes.");
  }
  if (!core::is_valid_utf8(s)) {
    return invalid_field(field, std::string("The ") + field + " must be valid UTF-8.");
  }
  return {};
}

}  // namespace

Result<void> validate_ref(const CounterRef& ref) {
  ICHIDO_TRY(core::validate_name(ref.ns, "ns"));
  return core::validate_name(ref.name, "name");
}

boost::asio::awaitable<Result<CreateCounterReply>> CounterService::create(CreateCounterCmd cmd) {
  if (auto r = validate_ref(cmd.ref); !r.ok()) co_return std::move(r).error();
  if (auto r = core::validate_config(cmd.config); !r.ok()) co_return std::move(r).error();
  co_return co_await call_store<CreateCounterReply>(
      [&](auto cb) { store_.create_counter(std::move(cmd), std::move(cb)); });
}

boost::asio::awaitable<Result<NextReply>> CounterService::next(NextCmd cmd) {
  if (auto r = validate_ref(cmd.ref); !r.ok()) co_return std::move(r).error();
  if (cmd.next.key) {
    if (auto r = core::validate_key(*cmd.next.key, "key"); !r.ok()) co_return std::move(r).error();
  }
  if (auto r = validate_text(cmd.next.note, core::kMaxNoteBytes, "note"); !r.ok()) {
    co_return std::move(r).error();
  }
  co_return co_await call_store<NextReply>(
      [&](auto cb) { store_.next(std::move(cmd), std::move(cb)); });
}

boost::asio::awaitable<Result<core::IssuedNumber>> CounterService::void_number(VoidCmd cmd) {
  if (auto r = validate_ref(cmd.ref); !r.ok()) co_return std::move(r).error();
  if (auto r = validate_text(cmd.reason, core::kMaxReasonBytes, "reason"); !r.ok()) {
    co_return std::move(r).error();
  }
  co_return co_await call_store<core::IssuedNumber>(
      [&](auto cb) { store_.void_number(std::move(cmd), std::move(cb)); });
}

boost::asio::awaitable<Result<core::CounterInfo>> CounterService::set_last_value(SetCmd cmd) {
  if (auto r = validate_ref(cmd.ref); !r.ok()) co_return std::move(r).error();
  co_return co_await call_store<core::CounterInfo>(
      [&](auto cb) { store_.set_last_value(std::move(cmd), std::move(cb)); });
}

boost::asio::awaitable<Result<core::CounterInfo>> CounterService::get(CounterRef ref) {
  if (auto r = validate_ref(ref); !r.ok()) co_return std::move(r).error();
  co_return co_await call_store<core::CounterInfo>(
      [&](auto cb) { store_.get_counter(std::move(ref), std::move(cb)); });
}

boost::asio::awaitable<Result<std::vector<core::CounterInfo>>> CounterService::list(
    std::string ns) {
  if (auto r = core::validate_name(ns, "ns"); !r.ok()) co_return std::move(r).error();
  co_return co_await call_store<std::vector<core::CounterInfo>>(
      [&](auto cb) { store_.list_counters(std::move(ns), std::move(cb)); });
}

boost::asio::awaitable<Result<IssuedPage>> CounterService::issued(IssuedQuery q) {
  if (auto r = validate_ref(q.ref); !r.ok()) co_return std::move(r).error();
  if (q.key) {
    if (auto r = core::validate_key(*q.key, "key"); !r.ok()) co_return std::move(r).error();
  }
  if (q.limit < 1 || q.limit > 1000)
    co_return invalid_field("limit", "The limit must be 1 to 1000.");
  co_return co_await call_store<IssuedPage>(
      [&](auto cb) { store_.list_issued(std::move(q), std::move(cb)); });
}

}  // namespace ichido::service

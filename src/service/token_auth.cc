#include "service/token_auth.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <future>

#include "base/secret.h"
#include "service/call_store.h"

namespace ichido::service {
namespace {

// A4: the last token verified on this thread. One entry: a connection stays on one I/O thread
// and nearly always presents one token, and a miss costs what every request cost without it.
struct Remembered {
  std::uint64_t instance = 0;  // the Authenticator that verified it; 0: nothing remembered
  std::uint64_t version = 0;   // its index version then
  std::string secret;
  std::shared_ptr<const core::TokenInfo> info;
};
// Reached only through this function, never named in a coroutine: a compiler may keep a
// thread_local's address across a suspension, and the coroutine may resume on another thread.
[[gnu::noinline]] Remembered& this_threads_remembered() {
  thread_local Remembered r;
  return r;
}

// Instance numbers, so that an Authenticator made where another one was (same address, same
// thread: tests) never reads the other's remembered token.
std::atomic<std::uint64_t> g_instances{0};

}  // namespace

Authenticator::Authenticator(Store& store, const Clock& clock, AuthOptions options)
    : store_(store), clock_(clock), opt_(std::move(options)), instance_(++g_instances) {}

Authenticator::Principal Authenticator::remembered(std::string_view secret) const {
  const Remembered& r = this_threads_remembered();
  if (r.instance != instance_ || r.version != index_version_.load(std::memory_order_acquire) ||
      !constant_time_equal(r.secret, secret)) {
    return nullptr;
  }
  return r.info;
}

void Authenticator::merge(std::vector<core::TokenInfo> tokens) {
  MutexLock lk(mu_);
  auto next = std::make_shared<Index>(*index_);
  for (auto& t : tokens) {
    auto [it, inserted] = next->try_emplace(t.hash, t);
    if (inserted) continue;
    // A2: the earliest revocation wins; nothing un-revokes.
    const auto known = it->second.revoked_at;
    it->second = std::move(t);
    if (known && (!it->second.revoked_at || *known < *it->second.revoked_at)) {
      it->second.revoked_at = known;
    }
  }
  index_ = std::move(next);
  index_version_.fetch_add(1, std::memory_order_release);  // A4: remembered tokens are stale
}

void Authenticator::upsert(const core::TokenInfo& t) { merge({t}); }

Result<void> Authenticator::load_blocking() {
  const std::uint64_t rev = opt_.external_revision ? opt_.external_revision() : 0;
  std::promise<Result<std::vector<core::TokenInfo>>> p;
  auto f = p.get_future();
  store_.list_tokens([&p](Result<std::vector<core::TokenInfo>> r) { p.set_value(std::move(r)); });
  auto r = f.get();
  if (!r.ok()) return std::move(r).error();
  merge(std::move(*r));
  loaded_revision_.store(rev);
  return {};
}

void Authenticator::start_refresh(boost::asio::any_io_executor ex,
                                  std::chrono::milliseconds period) {
  period_ = period;
  timer_ = std::make_unique<boost::asio::steady_timer>(ex);
  schedule();
}

void Authenticator::schedule() {
  if (stopped_.load()) return;
  timer_->expires_after(period_);
  timer_->async_wait([this](boost::system::error_code ec) {
    if (ec || stopped_.load()) return;
    if (opt_.recheck_revision) opt_.recheck_revision();
    store_.list_tokens([this](Result<std::vector<core::TokenInfo>> r) {
      // Keep the last good index when the store cannot be read: authentication must not fail
      // open or closed because of one failed refresh.
      if (r.ok()) merge(std::move(*r));
      if (!stopped_.load()) {
        boost::asio::post(timer_->get_executor(), [this] { schedule(); });
      }
    });
  });
}

void Authenticator::stop() {
  stopped_.store(true);
  if (timer_) {
    boost::asio::post(timer_->get_executor(), [this] { timer_->cancel(); });
  }
}

bool Authenticator::take_lookup() {
  using namespace std::chrono;
  const std::int64_t second =
      duration_cast<seconds>(steady_clock::now().time_since_epoch()).count();
  if (lookup_window_.exchange(second) != second) lookups_in_window_.store(0);
  return lookups_in_window_.fetch_add(1) < opt_.lookups_per_second;
}

boost::asio::awaitable<Result<Authenticator::Principal>> Authenticator::authenticate(
    std::string header) {
  auto fail = [](std::string msg) { return Error(errc::unauthenticated, std::move(msg)); };
  if (header.empty()) {
    co_return fail("This call needs a token: send \"Authorization: Bearer <token>\".");
  }
  constexpr std::string_view kScheme = "bearer ";
  if (header.size() <= kScheme.size()) {
    co_return fail("The Authorization header must be \"Bearer <token>\".");
  }
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) {
      co_return fail("The Authorization header must be \"Bearer <token>\".");
    }
  }
  std::string_view secret = std::string_view(header).substr(kScheme.size());
  while (!secret.empty() && secret.front() == ' ') secret.remove_prefix(1);
  while (!secret.empty() && secret.back() == ' ') secret.remove_suffix(1);

  if (opt_.external_revision) {  // A3
    // Every request that sees a revision newer than the last completed reload reloads itself
    // (rarely more than one at once), so none is answered from an index older than what the
    // CLI had committed when it returned.
    const std::uint64_t rev = opt_.external_revision();
    if (rev != loaded_revision_.load()) {
      auto r = co_await call_store<std::vector<core::TokenInfo>>(
          [&](auto cb) { store_.list_tokens(std::move(cb)); });
      if (!r.ok()) {
        co_return Error(errc::store_unavailable,
                        "The tokens changed and cannot be read again right now; retry later.");
      }
      merge(std::move(*r));
      loaded_revision_.store(rev);
    }
  }
  Principal found = remembered(secret);  // A4
  if (!found) {
    hashed_.fetch_add(1, std::memory_order_relaxed);
    const std::string hash = sha256_hex(secret);
    auto find = [&]() -> Principal {
      std::shared_ptr<const Index> index;
      std::uint64_t version = 0;
      {
        MutexLock lk(mu_);
        index = index_;
        version = index_version_.load(std::memory_order_relaxed);  // changes only under mu_
      }
      auto it = index->find(hash);
      if (it == index->end() || !constant_time_equal(it->second.hash, hash)) return nullptr;
      auto info = std::make_shared<const core::TokenInfo>(it->second);
      this_threads_remembered() = Remembered{instance_, version, std::string(secret), info};
      return info;
    };
    found = find();
    if (!found && take_lookup()) {  // A1
      auto r = co_await call_store<std::optional<core::TokenInfo>>(
          [&](auto cb) { store_.find_token_by_hash(hash, std::move(cb)); });
      if (r.ok() && *r) {
        merge({**r});
        found = find();  // merged: a revocation known here still wins (A2)
      }
    }
  }
  if (!found) co_return fail("The token is not known; check it, or ask an admin for a new one.");
  if (!core::token_active(*found, clock_.now_ms())) {
    co_return fail("The token was revoked or has expired; ask an admin for a new one.");
  }
  co_return std::move(found);
}

std::size_t Authenticator::token_count() const {
  MutexLock lk(mu_);
  return index_->size();
}

}  // namespace ichido::service

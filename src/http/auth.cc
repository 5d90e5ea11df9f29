#include "http/auth.h"

#include <boost/asio/post.hpp>
#include <future>

#include "base/secret.h"

namespace ichido::http {

void Authenticator::install(std::vector<core::TokenInfo> tokens) {
  auto next = std::make_shared<Index>();
  for (auto& t : tokens) {
    auto hash = t.hash;
    next->emplace(std::move(hash), std::move(t));
  }
  std::lock_guard lk(mu_);
  index_ = std::move(next);
}

Result<void> Authenticator::load_blocking() {
  std::promise<Result<std::vector<core::TokenInfo>>> p;
  auto f = p.get_future();
  store_.list_tokens([&p](Result<std::vector<core::TokenInfo>> r) { p.set_value(std::move(r)); });
  auto r = f.get();
  if (!r.ok()) return std::move(r).error();
  install(std::move(*r));
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
    store_.list_tokens([this](Result<std::vector<core::TokenInfo>> r) {
      // Keep the last good index when the store cannot be read: authentication must not fail
      // open or closed because of one failed refresh.
      if (r.ok()) install(std::move(*r));
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

Result<core::TokenInfo> Authenticator::authenticate(std::string_view header) const {
  auto fail = [](std::string msg) { return Error(errc::unauthenticated, std::move(msg)); };
  if (header.empty()) {
    return fail("This call needs a token: send \"Authorization: Bearer <token>\".");
  }
  constexpr std::string_view kScheme = "bearer ";
  if (header.size() <= kScheme.size())
    return fail("The Authorization header must be \"Bearer <token>\".");
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) {
      return fail("The Authorization header must be \"Bearer <token>\".");
    }
  }
  std::string_view secret = header.substr(kScheme.size());
  while (!secret.empty() && secret.front() == ' ') secret.remove_prefix(1);
  while (!secret.empty() && secret.back() == ' ') secret.remove_suffix(1);
  const std::string hash = sha256_hex(secret);
  std::shared_ptr<const Index> index;
  {
    std::lock_guard lk(mu_);
    index = index_;
  }
  auto it = index->find(hash);
  if (it == index->end() || !constant_time_equal(it->second.hash, hash)) {
    return fail("The token is not known; check it, or ask an admin for a new one.");
  }
  if (!core::token_active(it->second, clock_.now_ms())) {
    return fail("The token was revoked or has expired; ask an admin for a new one.");
  }
  return it->second;
}

void Authenticator::upsert(const core::TokenInfo& t) {
  std::lock_guard lk(mu_);
  auto next = std::make_shared<Index>(*index_);
  (*next)[t.hash] = t;
  index_ = std::move(next);
}

std::size_t Authenticator::token_count() const {
  std::lock_guard lk(mu_);
  return index_->size();
}

}  // namespace ichido::http

// AdminService and the Authenticator over the in-memory store: tokens made in the store work at
// once (A1, rate-limited), a revocation is never undone by a refresh that read before it (A2),
// out-of-process changes are seen before answering (A3), and admin mutations write their audit
// entry atomically with their effect.
#include "service/admin_service.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <optional>
#include <vector>

#include "base/secret.h"
#include "store/memory/memory_store.h"
#include "store/testing/forwarding_store.h"

namespace ichido::service {
namespace {

namespace asio = boost::asio;
constexpr TimeMs kT0 = 1'780'000'000'000;

// Counts token lookups and can hold back list_tokens answers (read at call time, delivered when
// the test says: a refresh whose snapshot predates later changes).
class WatchedStore final : public store_testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  std::atomic<int> lookups{0};
  bool hold_lists = false;
  std::vector<std::function<void()>> held;
  void find_token_by_hash(std::string h, Callback<std::optional<core::TokenInfo>> d) override {
    lookups.fetch_add(1);
    in_.find_token_by_hash(std::move(h), std::move(d));
  }
  void list_tokens(Callback<std::vector<core::TokenInfo>> d) override {
    if (!hold_lists) return in_.list_tokens(std::move(d));
    in_.list_tokens([this, d](Result<std::vector<core::TokenInfo>> r) {
      held.push_back([d, r] { d(Result<std::vector<core::TokenInfo>>(r)); });
    });
  }
};

class AdminServiceTest : public ::testing::Test {
 protected:
  template <class T, class F>
  Result<T> Run(F f) {
    std::optional<Result<T>> out;
    asio::co_spawn(
        ioc_, [&]() -> asio::awaitable<void> { out.emplace(co_await f()); }, asio::detached);
    ioc_.restart();
    ioc_.run();
    EXPECT_TRUE(out.has_value()) << "the call did not finish";
    if (!out) return Error(errc::internal, "did not finish");
    return std::move(*out);
  }
  Result<Authenticator::Principal> Auth(const std::string& secret) {
    return Run<Authenticator::Principal>([&] { return auth_.authenticate("Bearer " + secret); });
  }
  NewToken MustCreate(const std::string& role = "writer", const std::string& ns = "shop") {
    auto t = Run<NewToken>([&] { return admin_.create_token({role, ns, "t", {}}, std::nullopt); });
    EXPECT_TRUE(t.ok()) << t.error().message;
    return t.ok() ? *t : NewToken{};
  }
  // A token written straight into the store, as `ichido token create` or another node would.
  std::string CreateBehindTheServersBack(std::optional<TimeMs> expires_at = std::nullopt) {
    const std::string secret = new_token_secret();
    auto info = core::make_token(new_token_id(), secret, core::Role::writer, "shop", "cli",
                                 clock_.now_ms(), expires_at);
    EXPECT_TRUE(info.ok());
    std::optional<Result<core::TokenInfo>> r;
    mem_.create_token(CreateTokenCmd{*info, std::nullopt},
                      [&](Result<core::TokenInfo> x) { r.emplace(std::move(x)); });
    EXPECT_TRUE(r && r->ok());
    return secret;
  }

  asio::io_context ioc_;
  ManualClock clock_{kT0};
  store::memory::MemoryStore mem_{&clock_};
  WatchedStore store_{mem_};
  std::uint64_t revision_ = 0;
  Authenticator auth_{store_, clock_, AuthOptions{2, [this] { return revision_; }}};
  AdminService admin_{store_, clock_, &auth_};
};

TEST_F(AdminServiceTest, ATokenCreatedElsewhereWorksOnTheNextRequest) {
  ASSERT_TRUE(auth_.load_blocking().ok());
  const std::string secret = CreateBehindTheServersBack();
  auto who = Auth(secret);
  ASSERT_TRUE(who.ok()) << who.error().message;
  EXPECT_EQ((*who)->scope, "shop");
  EXPECT_EQ(store_.lookups.load(), 1);
  ASSERT_TRUE(Auth(secret).ok());
  EXPECT_EQ(store_.lookups.load(), 1) << "now known: no second lookup";
}

TEST_F(AdminServiceTest, UnknownTokensCostAtMostTheLookupBudget) {
  ASSERT_TRUE(auth_.load_blocking().ok());
  for (int i = 0; i < 50; ++i) {
    auto r = Auth("ichido_not-a-token-" + std::to_string(i));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, errc::unauthenticated);
  }
  // The budget is 2 per second: the test runs in far less than 25 s, so at most a few windows.
  EXPECT_LE(store_.lookups.load(), 4);
  EXPECT_GE(store_.lookups.load(), 2);
}

// A2: a refresh whose snapshot was read before the revoke committed must not revive the token.
TEST_F(AdminServiceTest, ARefreshReadBeforeARevokeCannotBringTheTokenBack) {
  auto made = MustCreate();
  ASSERT_TRUE(auth_.load_blocking().ok());
  ASSERT_TRUE(Auth(made.secret).ok());
  store_.hold_lists = true;
  auth_.start_refresh(ioc_.get_executor(), std::chrono::milliseconds(1));
  ioc_.restart();
  for (int i = 0; i < 1000 && store_.held.empty(); ++i) {
    ioc_.run_one_for(std::chrono::milliseconds(10));  // until a refresh read the active token
  }
  ASSERT_FALSE(store_.held.empty()) << "no refresh ran";
  store_.hold_lists = false;
  auto revoked = Run<core::TokenInfo>([&] { return admin_.revoke_token(made.info.id, {}); });
  ASSERT_TRUE(revoked.ok()) << revoked.error().message;
  auto denied = Auth(made.secret);
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.error().code, errc::unauthenticated);
  for (auto& f : store_.held) f();  // the stale snapshot arrives now
  store_.held.clear();
  auth_.stop();
  ioc_.restart();
  ioc_.run();
  auto still = Auth(made.secret);
  ASSERT_FALSE(still.ok()) << "a revoked token came back";
  EXPECT_EQ(still.error().code, errc::unauthenticated);
}

// A3: a change made outside the process (the CLI on the data directory) is seen before the next
// answer, not at the next refresh.
TEST_F(AdminServiceTest, AnExternalRevokeIsSeenBeforeTheNextAnswer) {
  auto made = MustCreate();
  ASSERT_TRUE(auth_.load_blocking().ok());
  ASSERT_TRUE(Auth(made.secret).ok());
  std::optional<Result<core::TokenInfo>> r;
  mem_.revoke_token(RevokeTokenCmd{made.info.id, std::nullopt},
                    [&](Result<core::TokenInfo> x) { r.emplace(std::move(x)); });
  ASSERT_TRUE(r && r->ok());
  EXPECT_TRUE(Auth(made.secret).ok()) << "the index cannot know without a signal";
  revision_ += 1;  // what `ichido token revoke` does after committing
  auto denied = Auth(made.secret);
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.error().code, errc::unauthenticated);
}

// A4: a token verified on this thread is not hashed or looked up again while the index is
// unchanged.
TEST_F(AdminServiceTest, ATokenVerifiedOnThisThreadIsNotHashedAgain) {
  auto made = MustCreate();
  ASSERT_TRUE(auth_.load_blocking().ok());
  ASSERT_TRUE(Auth(made.secret).ok());
  const std::uint64_t hashed = auth_.secrets_hashed();
  for (int i = 0; i < 3; ++i) {
    auto again = Auth(made.secret);
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_EQ((*again)->id, made.info.id);
    EXPECT_EQ((*again)->scope, "shop");
  }
  EXPECT_EQ(auth_.secrets_hashed(), hashed);
}

// A4: the remembered token answers only for its own secret, only from the current index, and
// only until it expires.
TEST_F(AdminServiceTest, ARememberedTokenFollowsEveryChangeOfTheIndexAndTheClock) {
  auto made = MustCreate();
  ASSERT_TRUE(auth_.load_blocking().ok());
  ASSERT_TRUE(Auth(made.secret).ok());
  std::string other = made.secret;  // same length, one character off
  other.back() = other.back() == 'A' ? 'B' : 'A';
  auto wrong = Auth(other);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code, errc::unauthenticated);
  ASSERT_TRUE(Auth(made.secret).ok());

  // Revoked on this node (the index learns it from the revoke itself).
  auto revoked = Run<core::TokenInfo>([&] { return admin_.revoke_token(made.info.id, {}); });
  ASSERT_TRUE(revoked.ok()) << revoked.error().message;
  auto denied = Auth(made.secret);
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.error().code, errc::unauthenticated);

  // Expired while remembered.
  const std::string short_lived = CreateBehindTheServersBack(clock_.now_ms() + 1000);
  ASSERT_TRUE(Auth(short_lived).ok());
  ASSERT_TRUE(Auth(short_lived).ok());
  clock_.advance(1000);
  auto expired = Auth(short_lived);
  ASSERT_FALSE(expired.ok());
  EXPECT_EQ(expired.error().code, errc::unauthenticated);
}

// A4 and A3: a revoke made outside the process is seen through a remembered token too.
TEST_F(AdminServiceTest, AnExternalRevokeEndsARememberedToken) {
  auto made = MustCreate();
  ASSERT_TRUE(auth_.load_blocking().ok());
  ASSERT_TRUE(Auth(made.secret).ok());
  ASSERT_TRUE(Auth(made.secret).ok());
  std::optional<Result<core::TokenInfo>> r;
  mem_.revoke_token(RevokeTokenCmd{made.info.id, std::nullopt},
                    [&](Result<core::TokenInfo> x) { r.emplace(std::move(x)); });
  ASSERT_TRUE(r && r->ok());
  revision_ += 1;
  auto denied = Auth(made.secret);
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.error().code, errc::unauthenticated);
}

// A4: two Authenticators whose requests run on one thread never answer from each other's
// remembered token, even at the same index version.
TEST_F(AdminServiceTest, ARememberedTokenBelongsToItsAuthenticator) {
  auto made = MustCreate();                 // auth_'s index: version 2
  ASSERT_TRUE(auth_.load_blocking().ok());  // 3
  ASSERT_TRUE(Auth(made.secret).ok());      // remembered at 3
  store::memory::MemoryStore empty{&clock_};
  Authenticator other(empty, clock_);
  ASSERT_TRUE(other.load_blocking().ok());  // 2
  auto unrelated = core::make_token(new_token_id(), new_token_secret(), core::Role::reader, "shop",
                                    "x", clock_.now_ms(), std::nullopt);
  ASSERT_TRUE(unrelated.ok());
  other.upsert(*unrelated);  // 3
  auto r =
      Run<Authenticator::Principal>([&] { return other.authenticate("Bearer " + made.secret); });
  ASSERT_FALSE(r.ok()) << "a token of another store was let in";
  EXPECT_EQ(r.error().code, errc::unauthenticated);
}

// The periodic refresh asks the probe to recheck what it cannot check per request, before it
// reads the tokens.
TEST_F(AdminServiceTest, TheRefreshRechecksTheProbeBeforeItReads) {
  std::vector<std::string> events;
  class Recording final : public store_testing::ForwardingStore {
   public:
    Recording(Store& in, std::vector<std::string>& events) : ForwardingStore(in), e_(events) {}
    void list_tokens(Callback<std::vector<core::TokenInfo>> d) override {
      e_.push_back("read");
      in_.list_tokens(std::move(d));
    }

   private:
    std::vector<std::string>& e_;
  } recording(mem_, events);
  AuthOptions o;
  o.external_revision = [] { return std::uint64_t{0}; };
  o.recheck_revision = [&] { events.push_back("recheck"); };
  Authenticator auth(recording, clock_, std::move(o));
  ASSERT_TRUE(auth.load_blocking().ok());
  ASSERT_EQ(events, std::vector<std::string>{"read"});
  auth.start_refresh(ioc_.get_executor(), std::chrono::milliseconds(1));
  ioc_.restart();
  for (int i = 0; i < 1000 && events.size() < 5; ++i) {
    ioc_.run_one_for(std::chrono::milliseconds(10));
  }
  auth.stop();
  ioc_.restart();
  ioc_.run();
  ASSERT_GE(events.size(), 5u);
  for (std::size_t i = 1; i + 1 < events.size(); i += 2) {
    EXPECT_EQ(events[i], "recheck") << i;
    EXPECT_EQ(events[i + 1], "read") << i;
  }
}

// Admin mutations: the audit entry and the effect are one transaction.
TEST_F(AdminServiceTest, ATokenIsNotCreatedWhenItsAuditEntryCannotBeWritten) {
  core::AuditEntry audit;
  audit.actor = "admin-1";
  audit.action = "POST /v1/admin/tokens";
  audit.status = 201;
  mem_.fail_audit_inserts(true);
  auto failed =
      Run<NewToken>([&] { return admin_.create_token({"reader", "shop", "x", {}}, audit); });
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().code, errc::store_unavailable);
  auto none = Run<std::vector<core::TokenInfo>>([&] { return admin_.list_tokens(); });
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty()) << "the token was stored without its audit entry";
  mem_.fail_audit_inserts(false);
  auto made =
      Run<NewToken>([&] { return admin_.create_token({"reader", "shop", "x", {}}, audit); });
  ASSERT_TRUE(made.ok());
  auto log = Run<AuditPage>([&] { return admin_.list_audit(AuditQuery{.limit = 10}); });
  ASSERT_TRUE(log.ok());
  ASSERT_EQ(log->items.size(), 1u);
  EXPECT_EQ(log->items[0].actor, "admin-1");
  EXPECT_EQ(log->items[0].status, 201u);
  EXPECT_EQ(log->items[0].at, kT0);
}

TEST_F(AdminServiceTest, BadInputNamesItsField) {
  auto role = Run<NewToken>([&] { return admin_.create_token({"boss", "shop", "", {}}, {}); });
  EXPECT_EQ(role.error().field, "role");
  auto ns = Run<NewToken>([&] { return admin_.create_token({"reader", "..", "", {}}, {}); });
  EXPECT_EQ(ns.error().field, "ns");
  auto exp = Run<NewToken>([&] { return admin_.create_token({"reader", "shop", "", 0}, {}); });
  EXPECT_EQ(exp.error().field, "expires_in_ms");
  auto id = Run<core::TokenInfo>([&] { return admin_.revoke_token("", {}); });
  EXPECT_EQ(id.error().field, "id");
  auto missing = Run<core::TokenInfo>([&] { return admin_.revoke_token("ffffffffffffffff", {}); });
  EXPECT_EQ(missing.error().code, errc::token_not_found);
  auto limit = Run<AuditPage>([&] { return admin_.list_audit(AuditQuery{.limit = 1001}); });
  EXPECT_EQ(limit.error().field, "limit");
}

}  // namespace
}  // namespace ichido::service

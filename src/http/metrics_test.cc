// The /metrics once gauges per namespace: read from a store by OverviewService::refresh, rendered
// in the Prometheus text format (label values escaped).
#include "http/metrics.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include "http/routes.h"
#include "store/memory/memory_store.h"

namespace ichido::http {
namespace {

class FixedClock final : public Clock {
 public:
  TimeMs now_ms() const override { return now; }
  TimeMs now = 1'800'000'000'000;
};

template <class T>
T run(boost::asio::io_context& ioc, boost::asio::awaitable<T> a) {
  std::optional<T> out;
  boost::asio::co_spawn(ioc, std::move(a), [&](std::exception_ptr e, T v) {
    if (e) std::rethrow_exception(e);
    out = std::move(v);
  });
  ioc.run();
  ioc.restart();
  return std::move(*out);
}

TEST(OnceGauges, CountsPerNamespaceAndStateAndTheOldestExpiredAge) {
  FixedClock clock;
  store::memory::MemoryStore store(&clock);
  auto begin = [&](const std::string& ns, const std::string& key, std::int64_t lease) {
    std::int64_t token = 0;
    store.begin_once({{ns, key}, core::BeginCommand{"w", lease, std::nullopt, 5}},
                     [&](Result<BeginOnceReply> r) { token = r.ok() ? r->record.token : -1; });
    return token;
  };
  begin("mail", "stuck", 1000);
  const std::int64_t t = begin("mail", "bad", 60000);
  store.fail_once({{"mail", "bad"}, t, "e", false}, [](Result<core::OnceRecord>) {});
  begin("we\"ird", "k", 60000);
  clock.now += 61000;  // "stuck" lapsed 60 s ago, the others lapsed 1 s ago (still processing)

  boost::asio::io_context ioc;
  service::OverviewService overview(store);
  EXPECT_EQ(overview.snapshot()->taken_at, 0);
  auto r = run(ioc, overview.refresh(clock.now));
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::string text = render_once_gauges(*overview.snapshot());
  EXPECT_NE(text.find("# TYPE ichido_once_records gauge\n"), std::string::npos) << text;
  EXPECT_NE(text.find("ichido_once_records{ns=\"mail\",state=\"dead\"} 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("ichido_once_records{ns=\"mail\",state=\"expired\"} 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("ichido_once_records{ns=\"mail\",state=\"processing\"} 0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ichido_once_oldest_expired_seconds{ns=\"mail\"} 60\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("ichido_once_records{ns=\"we\\\"ird\",state=\"expired\"} 1\n"),
            std::string::npos)
      << text;
}

// A store's own series are served as it names them, with their type; a store without any adds
// nothing.
TEST(StoreMetrics, AStoresOwnSeriesAreServedAsTheStoreNamesThem) {
  Metrics m;
  StoreStats s;
  const std::string bare = m.render(s);
  s.own.push_back(
      {"ichido_store_wal_bytes", StoreStats::Metric::Type::gauge, "WAL size.", 4194304});
  s.own.push_back(
      {"ichido_store_checkpoints_total", StoreStats::Metric::Type::counter, "Checkpoints.", 3});
  const std::string text = m.render(s);
  EXPECT_EQ(bare.find("ichido_store_wal_bytes"), std::string::npos);
  EXPECT_NE(text.find("\nichido_store_wal_bytes 4194304\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE ichido_store_wal_bytes gauge\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# HELP ichido_store_wal_bytes WAL size.\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nichido_store_checkpoints_total 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE ichido_store_checkpoints_total counter\n"), std::string::npos)
      << text;
}

}  // namespace
}  // namespace ichido::http

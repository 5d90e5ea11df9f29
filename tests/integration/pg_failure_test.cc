// The database fails under the nodes (decision 073): PostgreSQL stopped and restarted under load, a
// primary killed and its synchronous standby promoted, a COMMIT whose answer is lost, and the
// nodes behind PgBouncer in transaction pooling mode, one node cut off from the database by a
// network that drops its packets. Each test runs real `ichido serve` processes, most on a cluster
// of their own (scripts/pg-test-cluster); nodes are never restarted.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "api_client.h"
#include "dropping_proxy.h"
#include "nodes_util.h"
#include "pg_cluster.h"
#include "server_process.h"
#include "test_util.h"

namespace ichido::testing {
namespace {

using std::chrono::milliseconds;

int readyz(ServerProcess& s) { return ApiClient(s.url()).send("GET", "/readyz").status; }

TEST(PgFailure, PostgresDownAndBackUnderLoadGives503sThenRecoversWithoutRestartingNodes) {
  TempDir dir;
  PgCluster db(dir.path() + "/db");
  std::string err;
  ASSERT_TRUE(db.start(&err)) << err;
  Deployment d(2, {}, db.url(), "ichido");
  d.start_all();
  ApiClient admin(d.node(0).url(), "shop");
  ASSERT_EQ(admin.create("n", R"({"start":0,"max":1000000,"format":"{seq}"})").status, 201);

  Load load(d, "n", /*clients_per_node=*/2);
  load.start();
  ASSERT_TRUE(load.wait_acks(50)) << load.report();

  // Down (an immediate stop: like a crash of the server process): every node says so.
  ASSERT_TRUE(db.stop_keep());
  for (int n = 0; n < 2; ++n) {
    EXPECT_TRUE(eventually([&] { return readyz(d.node(n)) == 503; }, milliseconds(5000)))
        << "node " << n;
  }
  ApiClient probe(d.node(1).url(), "shop");
  auto during = probe.next("n", "during-outage");
  EXPECT_EQ(during.status, 503) << during.body;
  EXPECT_EQ(during.error_code(), "store_unavailable") << during.body;
  const int unavailable_before = load.unavailable();
  ASSERT_TRUE(eventually([&] { return load.unavailable() > unavailable_before + 5; }))
      << load.report();

  // Back: the same nodes serve again by themselves.
  ASSERT_TRUE(db.resume());
  for (int n = 0; n < 2; ++n) {
    EXPECT_TRUE(eventually([&] { return readyz(d.node(n)) == 200; }, milliseconds(10000)))
        << "node " << n;
  }
  const std::size_t at_recovery = load.acks();
  ASSERT_TRUE(load.wait_acks(at_recovery + 50)) << load.report();

  // And a restart (fast shutdown, start) under load, too.
  ASSERT_TRUE(db.restart());
  const std::size_t at_restart = load.acks();
  ASSERT_TRUE(load.wait_acks(at_restart + 50)) << load.report();
  load.stop();
  std::printf("[ figures  ] %s\n", load.report().c_str());
  EXPECT_GT(load.unavailable(), 0);
  EXPECT_EQ(load.gave_up(), 0) << load.report();
  load.verify_every_ack_is_stored_and_numbers_are_contiguous(d.node(0));
  auto after = probe.next("n", "during-outage");  // the refused call, retried: a new number now
  ASSERT_EQ(after.status, 200) << after.body;
  EXPECT_FALSE(after.at("replayed").as_bool()) << "a 503 must have changed nothing";
  for (int n = 0; n < 2; ++n) EXPECT_TRUE(d.node(n).running()) << "node " << n;
}

TEST(PgFailure, PrimaryKilledAndSynchronousStandbyPromotedNodesFollowAndLoseNothing) {
  TempDir dir;
  PgCluster primary(dir.path() + "/primary"), standby(dir.path() + "/standby");
  std::string err;
  ASSERT_TRUE(primary.start(&err)) << err;
  ASSERT_TRUE(standby.start_standby_of(primary, &err)) << err;
  // Synchronous replication: a COMMIT returns only once the standby has it.
  ASSERT_EQ(primary.psql("ALTER SYSTEM SET synchronous_standby_names = 'standby'").first, 0);
  ASSERT_EQ(primary.psql("SELECT pg_reload_conf()").first, 0);
  ASSERT_TRUE(eventually([&] {
    return primary.psql("SELECT sync_state FROM pg_stat_replication").second == "sync";
  })) << primary.psql("SELECT * FROM pg_stat_replication").second;

  // One URI naming both; libpq picks the writable one (target_session_attrs=read-write).
  auto host_port = [](const std::string& url) {
    const auto at = url.find('@') + 1;
    return url.substr(at, url.rfind('/') - at);
  };
  const std::string url = "postgresql://postgres@" + host_port(primary.url()) + "," +
                          host_port(standby.url()) +
                          "/postgres?target_session_attrs=read-write&connect_timeout=2";
  Deployment d(2, {}, url, "ichido");
  d.start_all();
  ApiClient admin(d.node(0).url(), "shop");
  ASSERT_EQ(admin.create("n", R"({"start":0,"max":1000000,"format":"{seq}"})").status, 201);

  Load load(d, "n", /*clients_per_node=*/2);
  load.start();
  ASSERT_TRUE(load.wait_acks(50)) << load.report();
  ASSERT_TRUE(primary.kill9());  // the primary's machine is gone
  const std::size_t at_kill = load.acks();
  ASSERT_TRUE(standby.promote());
  ASSERT_TRUE(load.wait_acks(at_kill + 50))
      << "nodes follow the promoted standby: " << load.report() << "\nnode 0:\n"
      << d.node(0).log() << "\nnode 1:\n"
      << d.node(1).log();
  load.stop();
  std::printf("[ figures  ] %s\n", load.report().c_str());
  EXPECT_EQ(load.gave_up(), 0) << load.report();
  for (int n = 0; n < 2; ++n) {
    EXPECT_TRUE(eventually([&] { return readyz(d.node(n)) == 200; }, milliseconds(10000)))
        << "node " << n;
    EXPECT_TRUE(d.node(n).running());
  }
  // Every acknowledged number is on the new primary.
  load.verify_every_ack_is_stored_and_numbers_are_contiguous(d.node(1));
  EXPECT_EQ(query_value(standby.url(), "pg_is_in_recovery()"), "false");
}

TEST(PgFailure, ACommitWhoseAnswerIsLostIs503OutcomeUnknownAndAKeyedRetryAnswersWhatWasSaved) {
  TempDir dir;
  PgCluster db(dir.path() + "/db");
  std::string err;
  ASSERT_TRUE(db.start(&err)) << err;
  Deployment d(1, {}, db.url(), "ichido");
  d.start_all();
  ApiClient api(d.node(0).url(), "shop");
  ASSERT_EQ(api.create("n", R"({"start":0,"max":99,"format":"{seq}"})").status, 201);

  // Commits now wait for a synchronous standby that does not exist: the COMMIT is sent, the
  // transaction is committed locally, and its answer never comes.
  ASSERT_EQ(db.psql("ALTER SYSTEM SET synchronous_standby_names = 'nobody'").first, 0);
  ASSERT_EQ(db.psql("SELECT pg_reload_conf()").first, 0);
  Reply lost;
  std::vector<std::thread> threads;
  JoinAtExit join{threads};
  threads.emplace_back([&] { lost = api.next("n", "invoice-7"); });
  ASSERT_TRUE(eventually([&] {
    return !db.psql("SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'").second.empty();
  })) << "no COMMIT waiting";
  // The connection dies while the COMMIT waits (a network cut, the server's process killed).
  // Every waiting COMMIT's: the node's heartbeat may be waiting beside it (two pids in one
  // pg_terminate_backend(…) made this test fail now and then).
  ASSERT_EQ(db.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE wait_event = 'SyncRep'")
                .first,
            0);
  threads[0].join();
  EXPECT_EQ(lost.status, 503) << lost.body;
  EXPECT_EQ(lost.error_code(), "store_unavailable") << lost.body;
  ASSERT_TRUE(lost.json.is_object()) << lost.body;
  EXPECT_EQ(lost.at("error").at("details").at("outcome"), "unknown") << lost.body;

  ASSERT_EQ(db.psql("ALTER SYSTEM RESET synchronous_standby_names").first, 0);
  ASSERT_EQ(db.psql("SELECT pg_reload_conf()").first, 0);
  // It had been saved: the retry with the same key answers that number.
  Reply retry;
  ASSERT_TRUE(eventually([&] {
    retry = api.next("n", "invoice-7");
    return retry.status == 200;
  })) << retry.body;
  EXPECT_EQ(retry.num("value"), 1);
  EXPECT_TRUE(retry.at("replayed").as_bool()) << retry.body;
  EXPECT_TRUE(eventually([&] { return readyz(d.node(0)) == 200; }));
}

// The port of a postgresql://user@host:PORT/db URL (0 when it has none).
int port_of(const std::string& url) {
  const auto at = url.find('@');
  const auto colon = url.find(':', at == std::string::npos ? 0 : at);
  return colon == std::string::npos ? 0 : std::atoi(url.c_str() + colon + 1);
}

// One node reaches PostgreSQL through a network that silently drops its packets for a while (a
// cut cable: no reset, no refusal); another reaches it directly. The cut node reports /readyz 503
// within 3 s by its heartbeat alone; requests sent at a cut answer within its --store-timeout
// (2 s here) with 503 store_unavailable (details.outcome "unknown" only where a commit may have
// happened), reads and renewals too, instead of hanging until the path is back, and later ones at
// once; the other node goes on. When the path is back the cut node is ready again within a few
// seconds, and a keyed retry of the write it refused is answered exactly once.
TEST(PgFailure, ANodeCutOffFromPostgresSaysSoAndAnswersWithinItsBound) {
  TempDir dir;
  ServerProcess direct(dir.path() + "/direct");
  std::string err;
  ASSERT_TRUE(direct.start(&err)) << err;
  BlackHoleProxy proxy(static_cast<std::uint16_t>(port_of(direct.store_url())));
  ASSERT_TRUE(proxy.ok());
  std::string via = direct.store_url();
  via.replace(via.find(std::to_string(port_of(via))), std::to_string(port_of(via)).size(),
              std::to_string(proxy.port()));
  ServerProcess cut(dir.path() + "/cut", {"--store-timeout", "2s"});
  cut.set_store(via, direct.store_schema());
  ASSERT_TRUE(cut.start(&err)) << err;
  ApiClient a(cut.url(), "shop"), b(direct.url(), "shop");
  ASSERT_EQ(b.create("n", R"({"start":0,"max":999999,"format":"{seq}"})").status, 201);
  ASSERT_EQ(b.create("m", R"({"start":0,"max":999999,"format":"{seq}"})").status, 201);
  ASSERT_EQ(a.next("n", "before").status, 200);
  auto held = a.send("POST", "/v1/ns/shop/locks/L/acquire",
                     R"({"owner":"cut-node-client","lease_ms":60000})");
  ASSERT_TRUE(held.at("acquired").as_bool()) << held.body;
  ASSERT_EQ(readyz(cut), 200);

  using steady = std::chrono::steady_clock;
  // The heartbeat alone (nothing else asks the database): not ready within 3 s of the cut, and
  // ready again soon after the path is back.
  proxy.cut();
  auto cut_at = steady::now();
  EXPECT_TRUE(eventually([&] { return readyz(cut) == 503; }, milliseconds(3000)))
      << "still ready " << std::chrono::duration_cast<milliseconds>(steady::now() - cut_at).count()
      << " ms after the cut";
  std::cout << "[ info ] heartbeat: not ready "
            << std::chrono::duration_cast<milliseconds>(steady::now() - cut_at).count()
            << " ms after the cut\n";
  EXPECT_EQ(readyz(direct), 200);
  proxy.restore();
  ASSERT_TRUE(eventually([&] { return readyz(cut) == 200; }, milliseconds(10000)));

  // Requests sent at a cut (before anything noticed it) answer within the bound.
  proxy.cut();
  cut_at = steady::now();
  auto timed = [](auto call) {
    const auto t0 = steady::now();
    Reply r = call();
    return std::make_pair(r, std::chrono::duration_cast<milliseconds>(steady::now() - t0).count());
  };
  Reply write, renew, read;
  long write_ms = 0, renew_ms = 0, read_ms = 0;
  std::vector<std::thread> threads;
  {
    JoinAtExit join{threads};
    threads.emplace_back(
        [&] { std::tie(write, write_ms) = timed([&] { return a.next("n", "during"); }); });
    threads.emplace_back([&] {
      ApiClient c(cut.url(), "shop");
      std::tie(renew, renew_ms) = timed([&] {
        return c.send("POST", "/v1/ns/shop/locks/L/renew",
                      R"({"token":)" + std::to_string(held.num("token")) + R"(,"lease_ms":60000})");
      });
    });
    threads.emplace_back([&] {
      ApiClient c(cut.url(), "shop");
      std::tie(read, read_ms) = timed([&] { return c.get("n"); });
    });
    EXPECT_TRUE(eventually([&] { return readyz(cut) == 503; }, milliseconds(3000)))
        << "still ready "
        << std::chrono::duration_cast<milliseconds>(steady::now() - cut_at).count()
        << " ms after the cut";

    EXPECT_EQ(readyz(direct), 200);
    EXPECT_EQ(b.next("m", "elsewhere").status, 200) << "the other node goes on";
  }
  std::cout << "[ info ] answered after the cut: write " << write_ms << " ms, renew " << renew_ms
            << " ms, read " << read_ms << " ms\n";
  for (const auto& [what, r, ms] :
       {std::tuple{"write", write, write_ms}, std::tuple{"renew", renew, renew_ms},
        std::tuple{"read", read, read_ms}}) {
    EXPECT_EQ(r.status, 503) << what << ": " << r.body << r.transport_error;
    EXPECT_EQ(r.error_code(), "store_unavailable") << what << ": " << r.body;
    EXPECT_LT(ms, 3000) << what << " answered after " << ms << " ms (--store-timeout 2s)";
    if (r.json.is_object() && r.json.as_object().contains("error")) {
      const auto& details = r.at("error").at("details").as_object();
      if (details.contains("outcome")) {
        EXPECT_EQ(details.at("outcome"), "unknown") << what;
      }
    }
  }
  // Still cut: later requests answer at once, not after the bound each.
  auto [again, again_ms] = timed([&] { return a.next("n", "during"); });
  EXPECT_EQ(again.status, 503) << again.body;
  EXPECT_LT(again_ms, 1000);

  proxy.restore();
  const auto back_at = steady::now();
  EXPECT_TRUE(eventually([&] { return readyz(cut) == 200; }, milliseconds(10000)));
  const auto back_ms = std::chrono::duration_cast<milliseconds>(steady::now() - back_at).count();
  std::cout << "[ info ] a request during the cut, later: " << again_ms << " ms; ready again "
            << back_ms << " ms after the path came back\n";
  EXPECT_LT(back_ms, 5000) << "ready again only this long after the path came back";
  Reply retried;
  ASSERT_TRUE(eventually([&] {
    retried = a.next("n", "during");
    return retried.status == 200;
  })) << retried.body;
  auto issued = b.issued_by_key("n", "during");
  ASSERT_EQ(issued.status, 200) << issued.body;
  EXPECT_EQ(issued.at("items").as_array().size(), 1u) << issued.body;
  EXPECT_EQ(issued.at("items").as_array()[0].at("value").to_number<std::int64_t>(),
            retried.num("value"));
}

// The protocol-level cause of reads that hung behind PgBouncer (transaction pooling): a
// connection that ends a pipeline segment with a Sync and, before that Sync's ReadyForQuery came
// back, sends the next segment (ended by a Flush, as every query() is). PgBouncer forwards the new
// segment to the same server connection, then releases that server to its pool when the
// ReadyForQuery "idle" passes, and drops the new segment's answers ("got packet from server when
// not linked"): the client waits for an answer that never comes. The server-side sleeps only
// widen the window so that the interleaving happens on every run: the first keeps the server busy
// while the second segment is forwarded, the second makes its answer come after the release.
TEST(PgFailure, ASegmentSentBeforeTheLastSyncIsAnsweredIsNotLostBehindPgBouncer) {
  TempDir dir;
  PgCluster db(dir.path() + "/db"), bouncer(dir.path() + "/bouncer");
  std::string err;
  ASSERT_TRUE(db.start(&err)) << err;
  ASSERT_TRUE(bouncer.start_pgbouncer_for(db, &err)) << err;
  using store::postgres::Params;
  using store::postgres::PgConn;
  using store::postgres::Stmt;
  PgConn::Settings s;
  s.conninfo = bouncer.url();
  s.mode = PgConn::Mode::unnamed;
  s.io_timeout_ms = 5000;
  auto c = PgConn::connect(s);
  ASSERT_TRUE(c.ok()) << c.error().message;
  PgConn& conn = **c;
  for (int round = 0; round < 3; ++round) {
    conn.send(Stmt{"SELECT pg_sleep(0.3)"}, Params());
    ASSERT_TRUE(conn.sync_nowait().ok());
    const auto start = std::chrono::steady_clock::now();
    auto r = conn.query(Stmt{"SELECT 42::int8 FROM pg_sleep(0.3)"}, Params());
    ASSERT_TRUE(r.ok()) << "round " << round << ": " << r.error().message;
    EXPECT_EQ(r->i64(0, 0), 42);
    ASSERT_TRUE(conn.sync().ok());
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  }
  EXPECT_FALSE(conn.broken());
}

TEST(PgFailure, NodesBehindPgBouncerInTransactionModeKeepEveryGuarantee) {
  TempDir dir;
  PgCluster db(dir.path() + "/db"), bouncer(dir.path() + "/bouncer");
  std::string err;
  ASSERT_TRUE(db.start(&err)) << err;
  ASSERT_TRUE(bouncer.start_pgbouncer_for(db, &err)) << err;
  // 2 nodes × 7 connections share PgBouncer's 20 server connections per database and user:
  // any session state would leak between them.
  // LISTEN needs a session, which transaction pooling does not keep: the change feed's
  // connection goes to the database itself (--listen-store, decision 075).
  Deployment d(2, {"--store-no-prepare", "--listen-store", db.url()}, bouncer.url(), "ichido");
  d.start_all();
  // A session of its own on the database, whose last statement is the LISTEN or the token epoch
  // confirmation that follows it at start (decision 077) — never a pooled server connection.
  EXPECT_TRUE(eventually([&] {
    return query_value(db.url(),
                       "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                       "'ichido-listen' AND (query LIKE 'LISTEN%' OR query LIKE "
                       "'UPDATE %.nodes SET tokens_epoch%')") == "2";
  })) << "both nodes LISTEN on the database directly";
  ApiClient admin(d.node(0).url(), "shop");
  ASSERT_EQ(admin.create("n", R"({"start":0,"max":1000000,"format":"{seq}"})").status, 201);
  Load load(d, "n", /*clients_per_node=*/3);
  load.start();

  // Meanwhile: once records and a lock, on both nodes.
  std::atomic<int> acquired{0};
  std::vector<std::thread> ts;
  for (int n = 0; n < 2; ++n) {
    ts.emplace_back([&, n] {
      ApiClient api(d.node(n).url(), "shop");
      for (int k = 0; k < 20; ++k) {
        auto b = api.send(
            "POST", "/v1/ns/shop/once/begin",
            R"({"key":"o-)" + std::to_string(k) + R"(","owner":"n)" + std::to_string(n) + R"("})");
        ASSERT_EQ(b.status, 200) << b.body;
        if (b.str("outcome") == "acquired") acquired.fetch_add(1);
        // Try-lock until granted (waking a waiter across nodes is not part of this test).
        Reply l;
        ASSERT_TRUE(eventually([&] {
          l = api.send("POST", "/v1/ns/shop/locks/l/acquire",
                       R"({"owner":"n)" + std::to_string(n) + R"(","lease_ms":10000})");
          return l.status == 200 && l.at("acquired").as_bool();
        })) << l.body;
        auto r = api.send("POST", "/v1/ns/shop/locks/l/release",
                          R"({"token":)" + std::to_string(l.num("token")) + "}");
        ASSERT_EQ(r.status, 200) << r.body;
      }
    });
  }
  for (auto& t : ts) t.join();
  ASSERT_TRUE(load.wait_acks(200)) << load.report();
  load.stop();
  std::printf("[ figures  ] through PgBouncer: %s\n", load.report().c_str());
  EXPECT_EQ(acquired.load(), 20) << "each once key acquired exactly once";
  EXPECT_EQ(load.unavailable(), 0) << load.report();
  load.verify_every_ack_is_stored_and_numbers_are_contiguous(d.node(1));
  if (::testing::Test::HasFailure()) {
    for (int n = 0; n < 2; ++n) std::printf("--- node %d log:\n%s\n", n, d.node(n).log().c_str());
  }
}

}  // namespace
}  // namespace ichido::testing

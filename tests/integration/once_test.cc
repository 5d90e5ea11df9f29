// Once records end to end: the real binary, real sockets, real concurrent clients, real kill -9,
// and real `ichido once run` processes. Leases use the smallest lease docs/API.md allows (1000 ms);
// waiting for an event is a bounded poll or a server-side wait, never a sleep standing in for
// synchronisation.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <latch>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "api_client.h"
#include "raw_client.h"
#include "server_process.h"
#include "test_util.h"

namespace ichido::testing {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

class OnceClient {
 public:
  explicit OnceClient(const cli::BaseUrl& url) : api_(url) {}

  Reply begin(const std::string& key, const std::string& owner, std::int64_t lease_ms = 60000,
              std::int64_t wait_ms = 0, std::optional<std::string> fingerprint = std::nullopt) {
    json::object o{{"key", key}, {"owner", owner}, {"lease_ms", lease_ms}, {"wait_ms", wait_ms}};
    if (fingerprint) o["fingerprint"] = *fingerprint;
    return api_.send("POST", "/v1/ns/t/once/begin", json::serialize(o));
  }
  Reply complete(const std::string& key, std::int64_t token, const json::value& result) {
    json::object o{{"key", key}, {"token", token}, {"result", result}};
    return api_.send("POST", "/v1/ns/t/once/complete", json::serialize(o));
  }
  Reply fail(const std::string& key, std::int64_t token, const std::string& error) {
    json::object o{{"key", key}, {"token", token}, {"error", error}, {"retry", true}};
    return api_.send("POST", "/v1/ns/t/once/fail", json::serialize(o));
  }
  Reply get(const std::string& key) {
    return api_.send("GET", "/v1/ns/t/once?key=" + cli::percent_encode(key));
  }
  Reply reset(const std::string& key) {
    return api_.send("POST", "/v1/ns/t/once/reset", json::serialize(json::object{{"key", key}}));
  }
  Reply raw(const std::string& method, const std::string& target, const std::string& body = "") {
    return api_.send(method, target, body);
  }

 private:
  ApiClient api_;
};

class OnceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    ASSERT_TRUE(server_.start(&err)) << err;
  }
  std::string data_dir() const { return dir_.path() + "/data"; }

  TempDir dir_;
  ServerProcess server_{dir_.path() + "/data"};
};

// 1. 64 concurrent begins on one key: exactly one acquired, 63 in_progress; after complete every
//    begin answers completed with the identical result.
TEST_F(OnceTest, SixtyFourConcurrentBeginsOneAcquiresAndAllLaterSeeTheSameResult) {
  constexpr int kClients = 64;
  const std::string key = "<CAF=grouped+action/1@mail.example.co.jp>";
  std::latch start(kClients);
  std::vector<Reply> replies(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      OnceClient c(server_.url());
      start.arrive_and_wait();
      replies[i] = c.begin(key, "script-" + std::to_string(i));
    });
  }
  for (auto& t : threads) t.join();
  int acquired = 0, in_progress = 0;
  std::int64_t token = 0;
  std::string holder;
  for (int i = 0; i < kClients; ++i) {
    ASSERT_EQ(replies[i].status, 200) << replies[i].body << replies[i].transport_error;
    const auto outcome = replies[i].str("outcome");
    if (outcome == "acquired") {
      ++acquired;
      token = replies[i].num("token");
      holder = "script-" + std::to_string(i);
      EXPECT_EQ(replies[i].num("attempt"), 1);
    } else if (outcome == "in_progress") {
      ++in_progress;
    }
  }
  ASSERT_EQ(acquired, 1);
  EXPECT_EQ(in_progress, kClients - 1);
  for (const auto& r : replies) {
    if (r.str("outcome") == "in_progress") {
      EXPECT_EQ(r.str("owner"), holder);
      EXPECT_GT(r.num("retry_after_ms"), 0);
    }
  }

  OnceClient holder_client(server_.url());
  const json::value result = json::parse(R"({"ticket":"T-1","lines":[1,2,3],"jp":"請求書"})");
  ASSERT_EQ(holder_client.complete(key, token, result).status, 200);

  std::latch again(kClients);
  threads.clear();
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      OnceClient c(server_.url());
      again.arrive_and_wait();
      replies[i] = c.begin(key, "late-" + std::to_string(i));
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : replies) {
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.str("outcome"), "completed");
    EXPECT_EQ(json::serialize(r.at("result")), json::serialize(result));
  }
}

// 2. 1,000 keys, 8 workers each racing over all keys with begin -> complete: every key is
//    acquired exactly once and completed with its acquirer's result; none lost.
TEST_F(OnceTest, ThousandKeysEightWorkersEveryKeyCompletedExactlyOnce) {
  constexpr int kKeys = 1000;
  constexpr int kWorkers = 8;
  std::mutex mu;
  std::map<std::string, std::vector<int>> acquired_by;  // key -> workers that got acquired
  std::atomic<int> errors{0};
  std::latch start(kWorkers);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      OnceClient c(server_.url());
      start.arrive_and_wait();
      for (int i = 0; i < kKeys; ++i) {
        // Each worker walks the keys from a different starting point, so races happen all over.
        const std::string key = "item-" + std::to_string((i + w * kKeys / kWorkers) % kKeys);
        auto b = c.begin(key, "worker-" + std::to_string(w));
        if (b.status != 200) {
          errors.fetch_add(1);
          continue;
        }
        if (b.str("outcome") != "acquired") continue;
        {
          std::lock_guard lk(mu);
          acquired_by[key].push_back(w);
        }
        auto done = c.complete(key, b.num("token"), json::object{{"worker", w}});
        if (done.status != 200) errors.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  ASSERT_EQ(acquired_by.size(), static_cast<std::size_t>(kKeys));
  OnceClient c(server_.url());
  for (const auto& [key, workers] : acquired_by) {
    ASSERT_EQ(workers.size(), 1u) << key << " was acquired more than once";
    auto g = c.get(key);
    ASSERT_EQ(g.status, 200);
    EXPECT_EQ(g.str("state"), "completed");
    EXPECT_EQ(g.at("result").at("worker").to_number<int>(), workers[0]);
  }
  auto list = c.raw("GET", "/v1/ns/t/once?state=completed&limit=1000");
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(list.at("items").as_array().size(), static_cast<std::size_t>(kKeys));
  EXPECT_FALSE(list.json.as_object().contains("next_after"));
}

// 3. A holder that stops renewing: after its lease the next begin acquires with attempt 2 and a
//    larger token; the old holder's complete gets 409 stale_token and overwrites nothing.
TEST_F(OnceTest, LapsedLeaseIsTakenOverAndTheOldHolderIsStale) {
  OnceClient a(server_.url()), b(server_.url());
  auto first = a.begin("job-1", "A", 1000);
  ASSERT_EQ(first.str("outcome"), "acquired");
  const auto old_token = first.num("token");
  // B waits on the server for the lease to lapse (no sleep here): the server wakes it then.
  auto second = b.begin("job-1", "B", 60000, 20000);
  ASSERT_EQ(second.status, 200) << second.body;
  ASSERT_EQ(second.str("outcome"), "acquired") << second.body;
  EXPECT_EQ(second.num("attempt"), 2);
  EXPECT_GT(second.num("token"), old_token);

  const auto before = a.get("job-1").body;
  auto stale = a.complete("job-1", old_token, "A's late result");
  EXPECT_EQ(stale.status, 409);
  EXPECT_EQ(stale.error_code(), "stale_token");
  EXPECT_EQ(a.fail("job-1", old_token, "late").error_code(), "stale_token");
  EXPECT_EQ(a.get("job-1").body, before) << "a stale token changed the record";

  ASSERT_EQ(b.complete("job-1", second.num("token"), "B's result").status, 200);
  // The holder's repeat: the same result is answered again, another one is refused.
  EXPECT_EQ(b.complete("job-1", second.num("token"), "B's result").status, 200);
  auto other = b.complete("job-1", second.num("token"), "B's second thoughts");
  EXPECT_EQ(other.status, 409);
  EXPECT_EQ(other.error_code(), "result_mismatch");
  auto done = a.get("job-1");
  EXPECT_EQ(done.str("state"), "completed");
  EXPECT_EQ(done.at("result").as_string(), "B's result");
  EXPECT_EQ(done.str("last_error"), "lease expired");
}

// 4. fail with retry 5 times -> dead; reset -> acquirable again. Fingerprint mismatch -> 422,
//    record unchanged.
TEST_F(OnceTest, FailFiveTimesIsDeadResetMakesItAcquirableAndFingerprintMismatchIs422) {
  OnceClient c(server_.url());
  std::int64_t last_token = 0;
  for (int attempt = 1; attempt <= 5; ++attempt) {
    auto b = c.begin("inv-42", "w", 60000, 0, "sha256:aaa");
    ASSERT_EQ(b.str("outcome"), "acquired") << b.body;
    EXPECT_EQ(b.num("attempt"), attempt);
    last_token = b.num("token");
    auto f = c.fail("inv-42", last_token, "smtp timeout " + std::to_string(attempt));
    ASSERT_EQ(f.status, 200);
    EXPECT_EQ(f.str("outcome"), attempt < 5 ? "pending" : "dead");
  }
  auto dead = c.begin("inv-42", "w");
  EXPECT_EQ(dead.str("outcome"), "dead");
  EXPECT_EQ(dead.num("attempts"), 5);
  EXPECT_EQ(dead.str("last_error"), "smtp timeout 5");

  const auto before = c.get("inv-42").body;
  auto mismatch = c.begin("inv-42", "w", 60000, 0, "sha256:bbb");
  EXPECT_EQ(mismatch.status, 422);
  EXPECT_EQ(mismatch.error_code(), "fingerprint_mismatch");
  EXPECT_EQ(c.get("inv-42").body, before);

  ASSERT_EQ(c.reset("inv-42").status, 200);
  EXPECT_EQ(c.get("inv-42").status, 404);
  EXPECT_EQ(c.get("inv-42").error_code(), "once_not_found");
  auto again = c.begin("inv-42", "w");
  ASSERT_EQ(again.str("outcome"), "acquired");
  EXPECT_EQ(again.num("attempt"), 1);
  EXPECT_GT(again.num("token"), last_token);
}

// Bad input: a clear JSON error naming the field, and nothing changes.
TEST_F(OnceTest, BadInputIsRejectedWithTheFieldAndChangesNothing) {
  OnceClient c(server_.url());
  struct Case {
    std::string body, field;
  };
  const std::vector<Case> cases = {
      {R"({"key":""})", "key"},
      {R"({"owner":"x"})", "key"},
      {R"({"key":"k","lease_ms":999})", "lease_ms"},
      {R"({"key":"k","lease_ms":3600001})", "lease_ms"},
      {R"({"key":"k","lease_ms":1500.5})", "lease_ms"},
      {R"({"key":"k","wait_ms":300001})", "wait_ms"},
      {R"({"key":"k","wait_ms":-1})", "wait_ms"},
      {R"({"key":7})", "key"},
  };
  for (const auto& tc : cases) {
    auto r = c.raw("POST", "/v1/ns/t/once/begin", tc.body);
    EXPECT_EQ(r.status, 400) << tc.body;
    EXPECT_EQ(r.error_code(), "invalid_request") << tc.body;
    EXPECT_EQ(r.error_field(), tc.field) << tc.body;
  }
  EXPECT_EQ(c.raw("POST", "/v1/ns/t/once/begin", "{not json").status, 400);
  EXPECT_EQ(c.get("k").status, 404) << "a rejected begin created a record";

  auto b = c.begin("k", "w");
  ASSERT_EQ(b.str("outcome"), "acquired");
  const auto before = c.get("k").body;
  const std::string big = "\"" + std::string(32 * 1024, 'x') + "\"";
  auto too_big = c.raw(
      "POST", "/v1/ns/t/once/complete",
      R"({"key":"k","token":)" + std::to_string(b.num("token")) + R"(,"result":)" + big + "}");
  EXPECT_EQ(too_big.status, 400);
  EXPECT_EQ(too_big.error_field(), "result");
  EXPECT_EQ(c.get("k").body, before);
  EXPECT_EQ(c.raw("GET", "/v1/ns/t/once?state=finished").error_field(), "state");
  EXPECT_EQ(c.raw("GET", "/v1/ns/t/once?limit=0").error_field(), "limit");
}

// 5. wait_ms: a parked waiter is answered with the result once the holder completes.
TEST_F(OnceTest, ParkedWaiterIsAnsweredWithTheResultWhenTheHolderCompletes) {
  OnceClient holder(server_.url()), probe(server_.url());
  auto a = holder.begin("<shared-mailbox-1@example.com>", "outlook-A");
  ASSERT_EQ(a.str("outcome"), "acquired");
  Reply waited;
  steady::time_point answered;
  std::thread waiter([&] {
    OnceClient w(server_.url());
    waited = w.begin("<shared-mailbox-1@example.com>", "outlook-B", 60000, 60000);
    answered = steady::now();
  });
  // The waiter is parked once the server reports it (not after some sleep).
  ASSERT_TRUE(eventually([&] {
    return probe.raw("GET", "/metrics").body.find("\nichido_once_waiters 1\n") != std::string::npos;
  }));
  const auto sent = steady::now();
  ASSERT_EQ(holder
                .complete("<shared-mailbox-1@example.com>", a.num("token"),
                          json::object{{"forwarded_to", "billing"}})
                .status,
            200);
  waiter.join();
  ASSERT_EQ(waited.status, 200) << waited.transport_error;
  EXPECT_EQ(waited.str("outcome"), "completed");
  EXPECT_EQ(waited.at("result").at("forwarded_to").as_string(), "billing");
  std::cout << "[ info ] waiter answered "
            << std::chrono::duration_cast<std::chrono::microseconds>(answered - sent).count()
            << " us after complete was sent (see bench for p50/p99)\n";
}

// A waiter whose client hangs up leaves the wait at once (the session watches its socket), so a
// crowd of impatient callers cannot pile up parked requests until their wait_ms runs out.
TEST_F(OnceTest, AParkedWaiterWhoseClientDisconnectsLeavesTheWait) {
  OnceClient holder(server_.url()), probe(server_.url());
  auto a = holder.begin("<gone@example.com>", "outlook-A");
  ASSERT_EQ(a.str("outcome"), "acquired");
  auto parked = [&](int n) {
    return probe.raw("GET", "/metrics")
               .body.find("\nichido_once_waiters " + std::to_string(n) + "\n") != std::string::npos;
  };
  {
    RawConn conn(server_.port());
    ASSERT_TRUE(conn.ok());
    const std::string body = R"({"key":"<gone@example.com>","owner":"B","wait_ms":60000})";
    ASSERT_TRUE(conn.send("POST /v1/ns/t/once/begin HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body));
    ASSERT_TRUE(eventually([&] { return parked(1); }));
  }  // the client closes its connection while parked
  // Without the watch this would stay at 1 for the remaining ~60 s of wait_ms.
  EXPECT_TRUE(eventually([&] { return parked(0); }));
  EXPECT_EQ(holder.get("<gone@example.com>").str("state"), "processing");
}

// 6. kill -9 during a race of begin/complete: after restart, every key a client saw completed is
//    completed with the same result, and no two acquired answers carry the same token.
TEST_F(OnceTest, KillNineDuringARaceLosesNoAnsweredCompletionAndNeverRepeatsAToken) {
  constexpr int kClients = 16;
  constexpr int kKeys = 400;
  constexpr int kKillAfterCompletes = 300;
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::string> seen_completed;  // key -> serialized result
  std::vector<std::int64_t> tokens;                   // of every acquired answer
  int completes = 0;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < kClients; ++w) {
    threads.emplace_back([&, w] {
      OnceClient c(server_.url());
      for (int i = 0; !stop.load(); ++i) {
        const std::string key = "mail-" + std::to_string((i * 7 + w * 31) % kKeys);
        auto b = c.begin(key, "client-" + std::to_string(w));
        if (b.status != 200) {
          if (b.status == 0) return;  // the server is gone
          continue;
        }
        const auto outcome = b.str("outcome");
        std::unique_lock lk(mu);
        if (outcome == "completed") {
          auto [it, fresh] = seen_completed.emplace(key, json::serialize(b.at("result")));
          if (!fresh) {
            EXPECT_EQ(it->second, json::serialize(b.at("result"))) << key;
          }
          continue;
        }
        if (outcome != "acquired") continue;
        const auto token = b.num("token");
        tokens.push_back(token);
        lk.unlock();
        const json::value result = json::object{{"by", w}, {"token", token}};
        auto d = c.complete(key, token, result);
        if (d.status == 0) return;
        lk.lock();
        if (d.status == 200) {
          seen_completed.emplace(key, json::serialize(result));
          if (++completes == kKillAfterCompletes) cv.notify_all();
        }
      }
    });
  }
  {
    std::unique_lock lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(120),
                            [&] { return completes >= kKillAfterCompletes; }));
  }
  server_.kill9();  // clients are mid-request
  stop.store(true);
  for (auto& t : threads) t.join();

  std::string err;
  ASSERT_TRUE(server_.start(&err)) << err;
  OnceClient c(server_.url());
  ASSERT_GE(seen_completed.size(), static_cast<std::size_t>(kKillAfterCompletes));
  for (const auto& [key, result] : seen_completed) {
    auto g = c.get(key);
    ASSERT_EQ(g.status, 200) << key;
    EXPECT_EQ(g.str("state"), "completed") << key;
    EXPECT_EQ(json::serialize(g.at("result")), result) << key;
  }
  std::set<std::int64_t> unique(tokens.begin(), tokens.end());
  EXPECT_EQ(unique.size(), tokens.size()) << "two acquired answers carried the same token";
  // The sequence is durable: a new acquisition after the restart gets a larger token.
  auto fresh = c.begin("after-restart", "w");
  ASSERT_EQ(fresh.str("outcome"), "acquired");
  EXPECT_GT(fresh.num("token"), *unique.rbegin());
}

// 7. `ichido once run` from 10 parallel invocations with the same key runs the command once.
TEST_F(OnceTest, OnceRunRunsTheCommandOnceAcrossTenParallelInvocations) {
  constexpr int kRuns = 10;
  const std::string file = dir_.path() + "/appended.txt";
  const std::string url = "http://127.0.0.1:" + std::to_string(server_.port());
  std::vector<pid_t> pids;
  for (int i = 0; i < kRuns; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // The command is slow enough (0.3 s) for the other invocations to overlap it.
      const std::string script =
          "echo ran >> '" + file + "'; sleep 0.3; echo out-" + std::to_string(i);
      const char* argv[] = {ichido_binary(),
                            "once",
                            "run",
                            "nightly-2026-04-01",
                            "--url",
                            url.c_str(),
                            "--ns",
                            "t",
                            "--wait",
                            "30s",
                            "--lease",
                            "5s",
                            "--",
                            "sh",
                            "-c",
                            script.c_str(),
                            nullptr};
      ::execv(argv[0], const_cast<char* const*>(argv));
      ::_exit(126);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "every invocation ends well: it ran it, or saw it done";
  }
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  EXPECT_EQ(lines, std::vector<std::string>{"ran"});

  OnceClient c(server_.url());
  auto g = c.get("nightly-2026-04-01");
  ASSERT_EQ(g.status, 200);
  EXPECT_EQ(g.str("state"), "completed");
  EXPECT_EQ(g.at("result").at("exit_code").to_number<int>(), 0);
  EXPECT_EQ(std::string(g.at("result").at("stdout_tail").as_string()).rfind("out-", 0), 0u);
}

TEST_F(OnceTest, OnceRunPassesOnAFailureAndRunsAgainNextTime) {
  const std::string url = "http://127.0.0.1:" + std::to_string(server_.port());
  auto run = [&](const char* script) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      const char* argv[] = {ichido_binary(), "once", "run", "flaky", "--url", url.c_str(),
                            "--ns",          "t",    "--",  "sh",    "-c",    script,
                            nullptr};
      ::execv(argv[0], const_cast<char* const*>(argv));
      ::_exit(126);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(run("exit 4"), 4);
  OnceClient c(server_.url());
  EXPECT_EQ(c.get("flaky").str("state"), "pending");
  EXPECT_EQ(c.get("flaky").str("last_error"), "exit code 4");
  EXPECT_EQ(run("true"), 0);
  EXPECT_EQ(c.get("flaky").str("state"), "completed");
  EXPECT_EQ(c.get("flaky").num("attempt"), 2);
  EXPECT_EQ(run("exit 9"), 0) << "completed: the command is not run again";
}

// Retention: completed records older than --once-retention are purged in the background.
TEST(OnceRetentionTest, CompletedRecordsArePurgedAfterTheRetention) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data", {"--once-retention", "1s"});
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  OnceClient c(server.url());
  auto b = c.begin("old", "w");
  ASSERT_EQ(c.complete("old", b.num("token"), 1).status, 200);
  auto live = c.begin("live", "w");
  ASSERT_EQ(live.str("outcome"), "acquired");
  ASSERT_TRUE(eventually([&] { return c.get("old").status == 404; }))
      << "the completed record was not purged";
  EXPECT_EQ(c.get("live").str("state"), "processing") << "unfinished records are kept";
}

// With authentication on: readers may look, writers may begin/complete, only admins may reset
// (and the reset is audited); `ichido once run` sends $ICHIDO_TOKEN.
TEST(OnceAuthTest, RolesGuardOnceRoutesAndResetIsAdminAndAudited) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data", {}, /*auth=*/true);
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  std::ifstream in(dir.path() + "/data/admin.token");
  std::string admin_token;
  std::getline(in, admin_token);
  ASSERT_FALSE(admin_token.empty());
  ApiClient admin(server.url(), "t", admin_token);
  auto mint = [&](const char* role) {
    auto r = admin.send("POST", "/v1/admin/tokens",
                        json::serialize(json::object{{"ns", "t"}, {"role", role}}));
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? r.str("token") : std::string();
  };
  const std::string writer_token = mint("writer"), reader_token = mint("reader");
  ApiClient writer(server.url(), "t", writer_token), reader(server.url(), "t", reader_token);
  const std::string begin = R"({"key":"inv-1","owner":"w"})";

  EXPECT_EQ(ApiClient(server.url()).send("POST", "/v1/ns/t/once/begin", begin).status, 401);
  EXPECT_EQ(reader.send("POST", "/v1/ns/t/once/begin", begin).error_code(), "forbidden");
  EXPECT_EQ(reader.send("GET", "/v1/ns/t/once?key=inv-1").error_code(), "once_not_found");
  auto b = writer.send("POST", "/v1/ns/t/once/begin", begin);
  ASSERT_EQ(b.str("outcome"), "acquired");
  ASSERT_EQ(writer
                .send("POST", "/v1/ns/t/once/complete",
                      R"({"key":"inv-1","token":)" + std::to_string(b.num("token")) + "}")
                .status,
            200);
  EXPECT_EQ(reader.send("GET", "/v1/ns/t/once?key=inv-1").str("state"), "completed");
  EXPECT_EQ(writer.send("POST", "/v1/ns/t/once/reset", R"({"key":"inv-1"})").error_code(),
            "forbidden");
  EXPECT_EQ(reader.send("GET", "/v1/ns/t/once?key=inv-1").str("state"), "completed");
  EXPECT_EQ(admin.send("POST", "/v1/ns/t/once/reset", R"({"key":"inv-1"})").status, 200);
  EXPECT_EQ(reader.send("GET", "/v1/ns/t/once?key=inv-1").status, 404);
  auto audit = admin.send("GET", "/v1/admin/audit");
  ASSERT_EQ(audit.status, 200);
  EXPECT_NE(audit.body.find("/v1/ns/{ns}/once/reset"), std::string::npos) << audit.body;

  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv("ICHIDO_TOKEN", writer_token.c_str(), 1);
    const char* argv[] = {ichido_binary(), "once", "run", "cron-1", "--url", url.c_str(),
                          "--ns",          "t",    "--",  "true",   nullptr};
    ::execv(argv[0], const_cast<char* const*>(argv));
    ::_exit(126);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(reader.send("GET", "/v1/ns/t/once?key=cron-1").str("state"), "completed");
}

}  // namespace
}  // namespace ichido::testing

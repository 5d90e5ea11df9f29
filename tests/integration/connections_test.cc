// Connection limits end to end: over --max-connections a client is told 503 too_many_connections
// (not a silent close); the open-file soft limit is raised to the hard limit at start; running
// out of descriptors (EMFILE) pauses accepting and never stops it.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api_client.h"
#include "raw_client.h"
#include "server_process.h"
#include "test_util.h"

namespace ichido::testing {
namespace {

// "Max open files" soft and hard limits of a process, from /proc.
std::pair<long, long> open_file_limits(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/limits");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Max open files", 0) == 0) {
      long soft = 0, hard = 0;
      std::sscanf(line.c_str() + 14, "%ld %ld", &soft, &hard);
      return {soft, hard};
    }
  }
  return {-1, -1};
}

bool healthz(std::uint16_t port) {
  RawConn c(port);
  if (!c.ok()) return false;
  c.send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  return statuses(c.read_all(std::chrono::milliseconds(2000))) == std::vector<int>{200};
}

TEST(Connections, OverTheLimitIsAnswered503TooManyConnections) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data", {"--max-connections", "2"});
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  std::vector<std::unique_ptr<RawConn>> open;
  for (int i = 0; i < 2; ++i) {
    open.push_back(std::make_unique<RawConn>(server.port()));
    ASSERT_TRUE(open.back()->ok());
    // A complete exchange proves the server accepted (and counts) this connection.
    open.back()->send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_NE(open.back()->read_all(std::chrono::milliseconds(300)).find("200 OK"),
              std::string::npos);
  }
  RawConn third(server.port());
  ASSERT_TRUE(third.ok());
  third.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  bool closed = false;
  const std::string answer = third.read_all(std::chrono::milliseconds(5000), &closed);
  EXPECT_EQ(statuses(answer), std::vector<int>{503}) << answer;
  EXPECT_NE(answer.find("too_many_connections"), std::string::npos) << answer;
  EXPECT_TRUE(closed);
  open.clear();  // room again
  EXPECT_TRUE(eventually([&] { return healthz(server.port()); }));
}

// --idle-timeout-ms: a keep-alive connection with no request for that long is closed, counted
// from its last answer (or from its opening), never sooner; one that keeps sending stays open
// however long it lives (the timer is armed once a timeout and looks again when it fires).
TEST(Connections, AConnectionIdleForTheIdleTimeoutIsClosedAndNotSooner) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data", {"--idle-timeout-ms", "400"});
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  using clock = std::chrono::steady_clock;
  const auto ms = [](clock::duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  };

  // Each time is measured from a moment before the server can have started its timer (before
  // the connect, before the request is sent), so "not sooner" holds however late this process
  // is scheduled; the server's steady timer never fires early.
  const auto connecting = clock::now();
  RawConn never_asked(server.port());
  ASSERT_TRUE(never_asked.ok());
  bool closed = false;
  never_asked.read_all(std::chrono::milliseconds(10000), &closed);
  EXPECT_TRUE(closed) << "a connection that never sent a request";
  EXPECT_GE(ms(clock::now() - connecting), 400);

  RawConn asked_once(server.port());
  ASSERT_TRUE(asked_once.ok());
  const auto asking = clock::now();
  asked_once.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_NE(asked_once.read_until("\r\n\r\n", std::chrono::milliseconds(5000)).find("200 OK"),
            std::string::npos);
  closed = false;
  asked_once.read_all(std::chrono::milliseconds(10000), &closed);
  EXPECT_TRUE(closed) << "a keep-alive connection after its answer";
  EXPECT_GE(ms(clock::now() - asking), 400);
}

TEST(Connections, RequestsMoreOftenThanTheIdleTimeoutKeepTheConnectionOpen) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data", {"--idle-timeout-ms", "400"});
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  RawConn c(server.port());
  ASSERT_TRUE(c.ok());
  // 12 requests 150 ms apart: 1.8 s, four and a half idle timeouts, on one connection.
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")) << "request " << i;
    const std::string answer = c.read_until("\r\n\r\n", std::chrono::milliseconds(5000));
    ASSERT_NE(answer.find("200 OK"), std::string::npos) << "request " << i << ": " << answer;
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
  }
  bool closed = true;
  c.read_all(std::chrono::milliseconds(100), &closed);
  EXPECT_FALSE(closed);
}

// A client that sends its request(s) and shuts down its sending side at once — the FIN in the
// same segment as the last request — is answered, and the server then closes at once, not after
// the idle timeout: the read that takes the request takes the FIN too, and no later event tells
// the server (decision 142: sockets are watched for EPOLLRDHUP). Failed with only the short-read
// half of that patch (every connection waited out the 60 s idle timeout).
TEST(Connections, ARequestSentWithItsHalfCloseIsAnsweredAndTheConnectionClosed) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data", {"--idle-timeout-ms", "60000"});
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  const std::string req = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  for (int i = 0; i < 10; ++i) {
    const int requests = 1 + i % 2;  // one, or two pipelined
    RawConn c(server.port());
    ASSERT_TRUE(c.ok());
    c.cork();
    std::string bytes;
    for (int r = 0; r < requests; ++r) bytes += req;
    ASSERT_TRUE(c.send(bytes));
    c.shutdown_write();
    bool closed = false;
    const std::string answer = c.read_all(std::chrono::milliseconds(5000), &closed);
    EXPECT_EQ(statuses(answer), std::vector<int>(requests, 200)) << "connection " << i;
    EXPECT_TRUE(closed) << "connection " << i << ": not closed within 5 s of its half-close";
  }
}

TEST(Connections, TheOpenFileSoftLimitIsRaisedToTheHardLimit) {
  struct rlimit mine{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &mine), 0);
  if (mine.rlim_max <= 256) GTEST_SKIP() << "hard limit too low to observe a raise";
  struct rlimit low = mine;
  low.rlim_cur = 256;  // the server inherits this soft limit
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  TempDir dir;
  ServerProcess server(dir.path() + "/data");
  std::string err;
  const bool started = server.start(&err);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &mine), 0);
  ASSERT_TRUE(started) << err;
  auto [soft, hard] = open_file_limits(server.pid());
  EXPECT_EQ(soft, hard);
  EXPECT_EQ(hard, static_cast<long>(mine.rlim_max));
  EXPECT_NE(server.log().find("raised from 256"), std::string::npos) << server.log();
}

TEST(Connections, RunningOutOfDescriptorsPausesAcceptingButNeverStopsIt) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data");
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  // Leave the server 48 descriptors, then open more connections than that.
  auto [rc, out] =
      run_command("prlimit --pid " + std::to_string(server.pid()) + " --nofile=48:48 2>&1");
  ASSERT_EQ(rc, 0) << out;
  auto open_fds = [&] {
    std::size_t n = 0;
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator(
             "/proc/" + std::to_string(server.pid()) + "/fd", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      ++n;
    }
    return n;
  };
  ApiClient api(server.url());
  // The server fills its 48 descriptors; the rest of the flood waits in the backlog (its
  // accepts fail with EMFILE meanwhile) until descriptors are free again. Whether an accept
  // failed before the flood is gone again is a race the test cannot see from outside (the
  // counter is only readable once the server accepts again), so a round that did not run out
  // is played again: every round checks that accepting resumes.
  std::string metrics;
  for (int round = 0; round < 5; ++round) {
    std::vector<std::unique_ptr<RawConn>> flood;
    for (int i = 0; i < 80; ++i) flood.push_back(std::make_unique<RawConn>(server.port()));
    EXPECT_TRUE(eventually([&] { return open_fds() >= 47; })) << open_fds();
    flood.clear();
    ASSERT_TRUE(eventually([&] { return healthz(server.port()); }))
        << "the server stopped accepting after running out of descriptors";
    auto m = api.send("GET", "/metrics");
    ASSERT_EQ(m.status, 200);
    metrics = m.body;
    if (metrics.find("ichido_http_accept_errors_total 0\n") == std::string::npos) break;
  }
  EXPECT_EQ(metrics.find("ichido_http_accept_errors_total 0\n"), std::string::npos)
      << "no accept failed in five rounds: the test did not exhaust the descriptors";
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// One exchange on a keep-alive connection: the whole response (its Content-Length read).
std::string exchange(RawConn& c, const std::string& method, const std::string& target,
                     const std::string& body = "") {
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: x\r\n";
  if (!body.empty()) {
    req +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  c.send(req + "\r\n" + body);
  std::string got = c.read_until("\r\n\r\n", std::chrono::milliseconds(10000));
  const auto head_end = got.find("\r\n\r\n");
  const auto cl = got.find("Content-Length: ");
  if (head_end == std::string::npos || cl == std::string::npos || cl > head_end) return got;
  const std::size_t want = head_end + 4 + std::stoul(got.substr(cl + 16));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (got.size() < want && std::chrono::steady_clock::now() < deadline) {
    got += c.read_all(std::chrono::milliseconds(50));
  }
  return got;
}

// A series' value in /metrics text (-1 when absent).
long long metric(const std::string& text, const std::string& name) {
  const auto at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stoll(text.substr(at + name.size() + 2));
}

// Decision 141: an I/O thread serving one connection lets the embedded store commit that
// connection's lone writes on it (no hand-off to the writer thread and back); with a second
// connection on the same thread it does not (the thread would serve no one else while it
// waits for the fsync). With --threads 1 every connection is on the one thread.
TEST(Connections, AThreadWithOneConnectionCommitsItsLoneWritesItself) {
  if (on_postgres()) GTEST_SKIP() << "the embedded store's path";
  TempDir dir;
  ServerProcess server(dir.path() + "/data", {"--threads", "1"});
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  RawConn a(server.port());
  ASSERT_TRUE(a.ok());
  const std::string counter = "/v1/ns/t/counters/r";  // ApiClient's namespace
  ASSERT_EQ(statuses(exchange(a, "PUT", counter, "{}")), std::vector<int>{201});
  auto next = [&](RawConn& c, const std::string& key) {
    return statuses(exchange(c, "POST", counter + "/next", R"({"key":")" + key + R"("})"));
  };
  auto counts = [&](RawConn& c) {
    const std::string m = exchange(c, "GET", "/metrics");
    return std::pair{metric(m, "ichido_store_commits_total"),
                     metric(m, "ichido_store_caller_commits_total")};
  };
  for (int i = 0; i < 10; ++i) ASSERT_EQ(next(a, "a" + std::to_string(i)), std::vector<int>{200});
  const auto [commits, on_caller] = counts(a);
  EXPECT_EQ(commits, 11);
  EXPECT_EQ(on_caller, 11) << "every write of a lone connection, the counter's creation too";

  RawConn b(server.port());
  ASSERT_TRUE(b.ok());
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(next(b, "b" + std::to_string(i)), std::vector<int>{200});
    ASSERT_EQ(next(a, "c" + std::to_string(i)), std::vector<int>{200});
  }
  const auto [commits2, on_caller2] = counts(a);
  EXPECT_EQ(commits2, 21);
  EXPECT_EQ(on_caller2, 11) << "two connections on the thread: the writer commits";
  // Every answer is durable either way: replays after a restart give the same numbers.
  EXPECT_EQ(server.stop(), 0);
  ASSERT_TRUE(server.start(&err)) << err;
  ApiClient api(server.url());
  EXPECT_EQ(api.next("r", "a3").num("value"), 4);
  EXPECT_EQ(api.next("r", "c4").num("value"), 20);  // b0 11, c0 12, …, b4 19, c4 20
}

}  // namespace
}  // namespace ichido::testing

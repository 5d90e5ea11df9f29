// Start-up refusals of the real binary, in start-up words and with the documented exit codes
// (src/server/config.h): an emptied or deleted database beside its ichido.id is refused (4)
// instead of coming back as an empty store, --init starts a new one whose fencing tokens
// continue above the old ones; a damaged database is refused (4) naming `ichido check`; a port
// in use is found (3) before the data directory is touched; the token CLI refuses a directory
// without a store; --min-free-disk makes /readyz say not-ready while writes still work, and so
// does a full disk; a start that finds damage writes nothing.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "api_client.h"
#include "disk.h"
#include "server_process.h"
#include "test_util.h"

namespace ichido::testing {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;

// Runs `ichido serve` to its end (a server that starts is stopped by timeout: exit 124).
std::pair<int, std::string> serve(const std::string& args) {
  return run_command("timeout 10 " + std::string(ichido_binary()) +
                     " serve --listen 127.0.0.1:0 --no-auth " + args + " 2>&1");
}

std::int64_t take_lock(ApiClient& api) {
  auto r = api.send("POST", "/v1/ns/t/locks/L/acquire",
                    json::serialize(json::object{{"owner", "a"}, {"lease_ms", 1000}}));
  EXPECT_EQ(r.status, 200) << r.body;
  return r.status == 200 ? r.num("token") : -1;
}

TEST(Startup, AnEmptiedOrDeletedDatabaseIsRefusedAndInitStartsAboveTheOldTokens) {
  TempDir dir;
  const std::string data = dir.path() + "/data";
  std::int64_t old_token = 0;
  {
    ServerProcess server(data);
    std::string err;
    ASSERT_TRUE(server.start(&err)) << err;
    ApiClient api(server.url());
    ASSERT_EQ(api.create("r", "{}").status, 201);
    ASSERT_EQ(api.next("r", "a").num("value"), 1);
    old_token = take_lock(api);
    EXPECT_EQ(server.stop(), 0);
  }
  for (const bool truncate : {true, false}) {
    if (truncate) {
      std::ofstream(data + "/ichido.db", std::ios::trunc);  // `: > ichido.db`
    } else {
      fs::remove(data + "/ichido.db");
    }
    auto [rc, out] = serve("--data " + data);
    EXPECT_EQ(rc, 4) << out;
    EXPECT_NE(out.find("cannot start"), std::string::npos) << out;
    EXPECT_NE(out.find(truncate ? "is empty" : "is missing"), std::string::npos) << out;
    EXPECT_NE(out.find("ichido restore --from FILE --data " + data), std::string::npos) << out;
    EXPECT_NE(out.find("--init"), std::string::npos) << out;
    EXPECT_EQ(out.find("retry the same request"), std::string::npos) << out;
  }
  ServerProcess fresh(data, {"--init"});
  std::string err;
  ASSERT_TRUE(fresh.start(&err)) << err;
  ApiClient api(fresh.url());
  EXPECT_EQ(api.get("r").status, 404);  // a new, empty store, on purpose
  EXPECT_GT(take_lock(api), old_token);
  EXPECT_EQ(fresh.stop(), 0);
  // --init only where there is no store.
  auto [rc, out] = serve("--data " + data + " --init");
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("--init starts a new store only where none is"), std::string::npos) << out;
}

TEST(Startup, ADamagedDatabaseIsRefusedNamingCheckAndRestore) {
  TempDir dir;
  const std::string data = dir.path() + "/data";
  {
    ServerProcess server(data);
    std::string err;
    ASSERT_TRUE(server.start(&err)) << err;
    ApiClient api(server.url());
    ASSERT_EQ(api.create("r", "{}").status, 201);
    for (int i = 0; i < 100; ++i) ASSERT_EQ(api.next("r", "k" + std::to_string(i)).status, 200);
    EXPECT_EQ(server.stop(), 0);  // a clean stop checkpoints: the rows are in ichido.db
  }
  std::string bytes = slurp(data + "/ichido.db");
  ASSERT_GT(bytes.size(), 6u * 4096);
  for (std::size_t i = 2 * 4096; i < bytes.size() - 4096; ++i) bytes[i] = static_cast<char>(0x5a);
  std::ofstream(data + "/ichido.db", std::ios::binary | std::ios::trunc) << bytes;
  auto [rc, out] = serve("--data " + data);
  EXPECT_EQ(rc, 4) << out;
  EXPECT_NE(out.find("cannot start"), std::string::npos) << out;
  EXPECT_NE(out.find("ichido check --data " + data), std::string::npos) << out;
  auto [crc, cout] = run_command(std::string(ichido_binary()) + " check --data " + data);
  EXPECT_EQ(crc, 1) << cout;
}

TEST(Startup, APortInUseIsFoundBeforeTheDataDirectoryIsTouched) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  TempDir dir;
  const std::string data = dir.path() + "/new-data";
  auto [rc, out] = run_command("timeout 10 " + std::string(ichido_binary()) +
                               " serve --listen 127.0.0.1:" + port + " --data " + data + " 2>&1");
  ::close(fd);
  EXPECT_EQ(rc, 3) << out;
  EXPECT_NE(out.find("cannot start"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(data)) << "no data directory, no admin token for a server that "
                                    "never started";
}

// `--listen localhost:PORT` serves both loopback addresses on one port (decision 170): a client
// finds the server whichever of 127.0.0.1 and ::1 its resolver gives first for "localhost".
TEST(Startup, LocalhostListensOnBothLoopbackAddresses) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data");
  server.set_listen("localhost:0");
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  const std::string port = std::to_string(server.port());
  EXPECT_TRUE(eventually([&] {
    return server.log().find("ichido listening on [::1]:" + port + "\n") != std::string::npos;
  })) << server.log();
  for (const std::string host : {"127.0.0.1", "[::1]"}) {
    auto [rc, out] =
        run_command("curl -sS --max-time 10 http://" + host + ":" + port + "/healthz 2>&1");
    EXPECT_EQ(rc, 0) << host << ": " << out;
    EXPECT_NE(out.find("\"status\":\"ok\""), std::string::npos) << host << ": " << out;
  }
  EXPECT_NE(server.log().find("listening on 127.0.0.1:" + port + " and [::1]:" + port),
            std::string::npos)
      << server.log();
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(Startup, TheTokenCliRefusesADirectoryWithoutAStoreUnlessInit) {
  TempDir dir;
  const std::string typo = dir.path() + "/ichido-dta";
  const std::string create =
      std::string(ichido_binary()) + " token create --ns shop --role " + "writer --data " + typo;
  auto [rc, out] = run_command(create + " 2>&1");
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("there is no ichido store in " + typo), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(typo));
  auto [irc, iout] = run_command(create + " --init");
  EXPECT_EQ(irc, 0) << iout;
  EXPECT_TRUE(std::regex_match(iout, std::regex("ichido_[A-Za-z0-9_-]{20,}"))) << iout;  // only it
  EXPECT_TRUE(fs::exists(typo + "/ichido.db"));
  EXPECT_TRUE(fs::exists(typo + "/ichido.id"));
}

TEST(Startup, MinFreeDiskMakesTheServerNotReadyWhileWritesStillWork) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data", {"--min-free-disk", "100TiB"});
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  ApiClient api(server.url());
  auto ready = api.send("GET", "/readyz");
  EXPECT_EQ(ready.status, 503) << ready.body;
  EXPECT_NE(ready.body.find("free"), std::string::npos) << ready.body;
  EXPECT_EQ(api.send("GET", "/healthz").status, 200);
  EXPECT_EQ(api.create("r", "{}").status, 201);
  EXPECT_EQ(api.next("r", "k").status, 200);

  ServerProcess roomy(dir.path() + "/data2", {"--min-free-disk", "1MiB"});
  ASSERT_TRUE(roomy.start(&err)) << err;
  ApiClient api2(roomy.url());
  EXPECT_EQ(api2.send("GET", "/readyz").status, 200);
}

// A tmpfs mounted on a directory for a test's life (tests/soak/disk.h; needs root, as the soak's
// disk-full phase does), unmounted when it ends.
class Tmpfs {
 public:
  Tmpfs(std::string dir, int mib) : dir_(std::move(dir)) {
    fs::create_directories(dir_);
    error_ = soak::mount_tmpfs(dir_, mib);
  }
  ~Tmpfs() {
    if (error_.empty()) (void)soak::unmount(dir_);
  }
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

 private:
  std::string dir_;
  std::string error_;
};

// The data directory's disk fills up: once a write is refused for lack of space, /readyz is 503
// at once (a load balancer stops sending writes here) while /healthz stays 200 (the process is
// fine) and reads go on; when space comes back /readyz is 200 again, without a write having to
// get through first (a drained node receives none), and writes succeed.
TEST(Startup, AFullDiskMakesTheServerNotReadyUntilSpaceComesBack) {
  TempDir dir;
  const std::string mnt = dir.path() + "/mnt";
  Tmpfs tmpfs(mnt, 32);
  ASSERT_TRUE(tmpfs.ok()) << tmpfs.error() << " (run the tests as root, as `make test` does)";
  ServerProcess server(mnt + "/data");  // after the tmpfs: stopped before it is unmounted
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  ApiClient api(server.url());
  ASSERT_EQ(api.create("r", "{}").status, 201);
  ASSERT_EQ(api.send("GET", "/readyz").status, 200);
  std::string why;
  ASSERT_GE(soak::fill_until_full(mnt + "/filler", &why), 0) << why;
  // Writes go on while the WAL's zeros ahead last (decision 132); then one is refused.
  Reply w;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int i = 0; std::chrono::steady_clock::now() < give_up; ++i) {
    w = api.next("r", "k" + std::to_string(i));
    if (w.status != 200) break;
  }
  ASSERT_EQ(w.status, 503) << w.body;
  EXPECT_EQ(w.error_code(), "store_unavailable") << w.body;
  Reply ready;
  EXPECT_TRUE(eventually(
      [&] {
        ready = api.send("GET", "/readyz");
        return ready.status == 503;
      },
      std::chrono::milliseconds(1000)))
      << "/readyz " << ready.status << " " << ready.body;
  EXPECT_NE(ready.body.find("full"), std::string::npos) << ready.body;
  EXPECT_EQ(api.send("GET", "/healthz").status, 200);
  EXPECT_EQ(api.get("r").status, 200) << "reads go on";

  fs::remove(mnt + "/filler");
  EXPECT_TRUE(eventually([&] { return api.send("GET", "/readyz").status == 200; },
                         std::chrono::milliseconds(5000)));
  EXPECT_EQ(api.next("r", "after").status, 200);
  EXPECT_EQ(api.send("GET", "/readyz").status, 200);
  EXPECT_EQ(server.stop(), 0);
}

// The pages of a database that are in use (dbstat), each table's root page and the page size,
// read through Python's sqlite3 opened immutable (nothing written): "PAGE_SIZE\nP P P…\nNAME
// ROOT…".
std::string describe_pages(const std::string& db, const std::string& work) {
  const std::string script = work + "/pages.py";
  std::ofstream(script) << "import sqlite3, sys\n"
                           "c = sqlite3.connect('file:' + sys.argv[1] + '?mode=ro&immutable=1', "
                           "uri=True)\n"
                           "print(c.execute('PRAGMA page_size').fetchone()[0])\n"
                           "print(' '.join(str(r[0]) for r in c.execute("
                           "'SELECT DISTINCT pageno FROM dbstat ORDER BY 1')))\n"
                           "for n, r in c.execute(\"SELECT name, rootpage FROM sqlite_master "
                           "WHERE type = 'table' AND rootpage > 0 ORDER BY name\"):\n"
                           "    print(n, r)\n";
  return run_command("python3 " + script + " " + db + " 2>&1").second;
}

// Every file of a directory by name, with its bytes.
std::map<std::string, std::string> files_of(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& f : fs::directory_iterator(dir)) {
    out[f.path().filename().string()] = f.is_regular_file() ? slurp(f.path().string()) : "(dir)";
  }
  return out;
}

// A start that finds the database damaged refuses (exit 4, naming `ichido check` and `ichido
// restore`) and leaves every file of the data directory as it was, byte for byte — no page
// written, no -wal or -shm created, ichido.id untouched — for a damaged first, middle and last
// page and the damaged root page of each table.
TEST(Startup, AStartThatFindsDamageLeavesEveryFileAsItWas) {
  TempDir dir;
  const std::string data = dir.path() + "/data";
  const std::string pristine = dir.path() + "/pristine";
  {
    ServerProcess server(data);
    std::string err;
    ASSERT_TRUE(server.start(&err)) << err;
    ApiClient api(server.url());
    ASSERT_EQ(api.create("r", "{}").status, 201);
    for (int i = 0; i < 200; ++i) ASSERT_EQ(api.next("r", "k" + std::to_string(i)).status, 200);
    ASSERT_GT(take_lock(api), 0);
    for (int i = 0; i < 50; ++i) {
      const std::string key = "mail-" + std::to_string(i);
      auto b = api.send("POST", "/v1/ns/t/once/begin",
                        json::serialize(json::object{{"key", key}, {"owner", "a"}}));
      ASSERT_EQ(b.status, 200) << b.body;
      if (i % 2 == 0) {
        ASSERT_EQ(api.send("POST", "/v1/ns/t/once/complete",
                           json::serialize(json::object{
                               {"key", key}, {"token", b.num("token")}, {"result", i}}))
                      .status,
                  200);
      }
    }
    EXPECT_EQ(server.stop(), 0);  // a clean stop checkpoints: every page is in ichido.db
  }
  ASSERT_EQ(soak::copy_dir(data, pristine), "");
  std::istringstream layout(describe_pages(pristine + "/ichido.db", dir.path()));
  std::int64_t page_size = 0;
  layout >> page_size;
  ASSERT_GT(page_size, 0) << layout.str();
  std::string line;
  std::getline(layout, line);  // the end of the page size's line
  std::getline(layout, line);
  std::vector<std::int64_t> pages;
  {
    std::istringstream in(line);
    for (std::int64_t p; in >> p;) pages.push_back(p);
  }
  ASSERT_GT(pages.size(), 8u) << layout.str();
  std::vector<std::pair<std::string, std::int64_t>> cases = {
      {"first page", pages.front()},
      {"middle page", pages[pages.size() / 2]},
      {"last page", pages.back()}};
  for (std::string name; layout >> name;) {
    std::int64_t root = 0;
    layout >> root;
    cases.emplace_back("root page of " + name, root);
  }
  ASSERT_GT(cases.size(), 8u) << layout.str();
  std::cout << "[ info ] " << cases.size() << " damaged pages, one start each\n";
  for (const auto& [what, page] : cases) {
    SCOPED_TRACE(what + " (page " + std::to_string(page) + ")");
    fs::remove_all(data);
    ASSERT_EQ(soak::copy_dir(pristine, data), "");
    ASSERT_EQ(soak::scribble(data + "/ichido.db", (page - 1) * page_size, page_size,
                             static_cast<std::uint64_t>(page)),
              "");
    const auto before = files_of(data);
    auto [rc, out] = serve("--data " + data);
    EXPECT_EQ(rc, 4) << out;
    EXPECT_NE(out.find("ichido check --data " + data), std::string::npos) << out;
    EXPECT_NE(out.find("ichido restore"), std::string::npos) << out;
    const auto after = files_of(data);
    std::string listed;
    for (const auto& [f, bytes] : after) listed += f + " ";
    EXPECT_EQ(after.size(), before.size()) << "files now: " << listed;
    for (const auto& [f, bytes] : before) {
      auto it = after.find(f);
      ASSERT_NE(it, after.end()) << f << " is gone";
      EXPECT_TRUE(it->second == bytes) << f << " was changed by a start that found damage";
    }
  }
}

// Every thread of a running server carries a name (`top -H`, `ps -L`, perf): the writer, the
// checkpointer and the readers of the embedded store (or the PostgreSQL store's lanes, readers,
// monitor and acknowledger), the I/O threads after the first (which keeps the process's name),
// the request log's writer. Read from /proc, as those tools read it.
TEST(ServerThreads, EveryThreadIsNamed) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data", {"--threads", "3"});
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  // Its long-lived threads, not a connection attempt's short-lived one (steady_threads).
  const auto threads = steady_threads(server.pid());
  std::multiset<std::string> names;
  for (const auto& [tid, name] : threads) names.insert(name);
  std::vector<std::string> expected = {"ichido", "ichido-io-1", "ichido-io-2", "ichido-log"};
  if (on_postgres()) {
    for (const char* n : {"ichido-pgw-0", "ichido-pgr-0", "ichido-pgmon", "ichido-pgack"}) {
      expected.push_back(n);
    }
  } else {
    for (const char* n :
         {"ichido-writer", "ichido-ckpt", "ichido-keysnap", "ichido-read-0", "ichido-read-1"}) {
      expected.push_back(n);
    }
  }
  std::string all;
  for (const auto& n : names) all += n + " ";
  // Each once — "ichido" included: no thread is left with the process's name but the main one.
  for (const auto& n : expected) EXPECT_EQ(names.count(n), 1u) << n << " among: " << all;
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace ichido::testing

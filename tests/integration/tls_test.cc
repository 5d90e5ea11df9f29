// TLS: a self-signed certificate made for the test, curl trusting it as its CA completes a
// counter `next` over HTTPS; plain HTTP and TLS 1.1 to the TLS port are refused cleanly, and the
// server keeps serving.
#include <gtest/gtest.h>

#include "server_process.h"
#include "test_util.h"

namespace ichido::testing {
namespace {

TEST(Tls, CurlWithTheSelfSignedCaCompletesANextAndPlainHttpIsRefused) {
  TempDir dir;
  const std::string cert = dir.path() + "/cert.pem", key = dir.path() + "/key.pem";
  ASSERT_EQ(make_self_signed_cert(dir.path()), "");
  ServerProcess server(dir.path() + "/data", {"--tls-cert", cert, "--tls-key", key},
                       /*auth=*/true);
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  std::string token = slurp(dir.path() + "/data/admin.token");
  while (!token.empty() && token.back() == '\n') token.pop_back();
  const std::string base = "https://127.0.0.1:" + std::to_string(server.port());
  const std::string curl = "curl -sS --max-time 10 --cacert " + cert +
                           " -H 'Authorization: Bearer " + token + "' -w ' %{http_code}' ";

  auto [c1, put] =
      run_command(curl + "-X PUT " + base + "/v1/ns/s/counters/r -d '{\"format\":\"T-{seq:3}\"}'");
  EXPECT_EQ(c1, 0);
  EXPECT_NE(put.find(" 201"), std::string::npos) << put;
  auto [c2, next] =
      run_command(curl + "-X POST " + base + "/v1/ns/s/counters/r/next -d '{\"key\":\"k\"}'");
  EXPECT_EQ(c2, 0);
  EXPECT_NE(next.find("\"formatted\":\"T-001\""), std::string::npos) << next;
  EXPECT_NE(next.find(" 200"), std::string::npos) << next;

  // Plain HTTP to the TLS port: no HTTP answer, the connection is closed (curl: empty reply).
  auto [c3, plain] = run_command(
      "curl -sS --max-time 10 http://127.0.0.1:" + std::to_string(server.port()) + "/healthz 2>&1");
  EXPECT_NE(c3, 0) << plain;
  EXPECT_EQ(plain.find("\"status\""), std::string::npos) << plain;
  // TLS below 1.2 is refused at the handshake.
  auto [c4, old] = run_command("curl -sS --max-time 10 --cacert " + cert + " --tls-max 1.1 " +
                               base + "/healthz 2>&1");
  EXPECT_NE(c4, 0) << old;
  // Without trusting the self-signed CA, curl refuses the server's certificate.
  auto [c5, untrusted] = run_command("curl -sS --max-time 10 " + base + "/healthz 2>&1");
  EXPECT_NE(c5, 0) << untrusted;

  auto [c6, health] = run_command(curl + base + "/healthz");
  EXPECT_EQ(c6, 0);
  EXPECT_NE(health.find(" 200"), std::string::npos) << health;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Over TLS the watch of a waiting request reads through the TLS stream (server.cc, watch_peer):
// a client that gives up leaves the line there too, and is logged 499.
TEST(Tls, AWaiterWhoseClientGivesUpLeavesTheLine) {
  TempDir dir;
  const std::string cert = dir.path() + "/cert.pem", key = dir.path() + "/key.pem";
  ASSERT_EQ(make_self_signed_cert(dir.path()), "");
  ServerProcess server(dir.path() + "/data", {"--tls-cert", cert, "--tls-key", key});
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  const std::string lock =
      "https://127.0.0.1:" + std::to_string(server.port()) + "/v1/ns/t/locks/x";
  const std::string curl = "curl -sS --cacert " + cert + " ";
  auto [c1, held] =
      run_command(curl + "-X POST " + lock + "/acquire -d '{\"owner\":\"a\",\"wait_ms\":0}'");
  ASSERT_NE(held.find("\"acquired\":true"), std::string::npos) << held;
  auto [c2, gave_up] = run_command(curl + "--max-time 1 -X POST " + lock +
                                   "/acquire -d '{\"owner\":\"b\",\"wait_ms\":60000}' 2>&1");
  EXPECT_NE(c2, 0) << gave_up;  // curl timed out and closed the connection
  EXPECT_TRUE(eventually([&] {
    auto [c, st] = run_command(curl + lock);
    return st.find("\"waiters\":0") != std::string::npos;
  })) << "the waiter whose client gave up is still in line";
  EXPECT_TRUE(eventually([&] {
    return server.log().find("/locks/{name}/acquire ns=t 499 ") != std::string::npos;
  })) << server.log();
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(Tls, ACertificateWithoutAKeyIsAUsageError) {
  TempDir dir;
  auto [rc, out] =
      run_command(std::string(ichido_binary()) + " serve --listen 127.0.0.1:0 --data " +
                  dir.path() + "/d --tls-cert /nonexistent.pem 2>&1");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--tls-key"), std::string::npos) << out;
}

}  // namespace
}  // namespace ichido::testing

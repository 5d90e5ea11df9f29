// TLS: a self-signed certificate made for the test, curl trusting it as its CA completes a
// counter `next` over HTTPS; plain HTTP and TLS 1.1 to the TLS port are refused cleanly, and the
// server keeps serving. TLS 1.2 offers forward-secret AEAD suites only. SIGHUP reloads the
// certificate under load: new connections get the new one, open ones keep working, no request
// fails, and a replacement that does not load leaves the current one in use.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "cli/client.h"
#include "server_process.h"
#include "test_util.h"

namespace ichido::testing {
namespace {

namespace asio = boost::asio;

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

// `openssl s_client` against the server with extra options; true when the handshake succeeded.
bool handshake_ok(std::uint16_t port, const std::string& options) {
  auto [rc, out] = run_command("openssl s_client -connect 127.0.0.1:" + std::to_string(port) +
                               " -servername localhost " + options + " </dev/null 2>&1");
  return rc == 0 && out.find("Cipher is (NONE)") == std::string::npos &&
         out.find("New, (NONE)") == std::string::npos;
}

// Mozilla's "intermediate" profile for TLS 1.2: ECDHE with AES-GCM or ChaCha20-Poly1305. Static
// RSA key exchange and CBC suites are refused; TLS 1.3 is offered as before.
TEST(Tls, Tls12OffersOnlyForwardSecretAeadSuites) {
  TempDir dir;
  ASSERT_EQ(make_self_signed_cert(dir.path()), "");
  ServerProcess server(dir.path() + "/data", {"--tls-cert", dir.path() + "/cert.pem", "--tls-key",
                                              dir.path() + "/key.pem"});
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  for (const char* refused :
       {"AES128-SHA", "AES256-SHA", "AES128-GCM-SHA256", "AES256-GCM-SHA384", "AES128-SHA256",
        "ECDHE-RSA-AES128-SHA", "ECDHE-RSA-AES256-SHA", "ECDHE-RSA-AES128-SHA256",
        "ECDHE-RSA-AES256-SHA384", "DHE-RSA-AES128-GCM-SHA256"}) {
    EXPECT_FALSE(handshake_ok(server.port(), std::string("-tls1_2 -cipher ") + refused))
        << refused << " was accepted";
  }
  for (const char* accepted : {"ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384",
                               "ECDHE-RSA-CHACHA20-POLY1305"}) {
    EXPECT_TRUE(handshake_ok(server.port(), std::string("-tls1_2 -cipher ") + accepted))
        << accepted << " was refused";
  }
  EXPECT_TRUE(handshake_ok(server.port(), "-tls1_3"));
  EXPECT_TRUE(handshake_ok(server.port(), "-tls1_3 -ciphersuites TLS_CHACHA20_POLY1305_SHA256"));
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// A self-signed certificate for localhost and 127.0.0.1 with this common name, in dir/NAME/.
std::string make_named_cert(const std::string& dir, const std::string& name) {
  std::filesystem::create_directories(dir + "/" + name);
  auto [rc, out] =
      run_command("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=" + name +
                  " -addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " + dir + "/" + name +
                  "/key.pem -out " + dir + "/" + name + "/cert.pem 2>&1");
  return rc == 0 ? std::string() : out;
}

// The subject of the certificate a new connection to the server gets.
std::string served_subject(std::uint16_t port) {
  return run_command("openssl s_client -connect 127.0.0.1:" + std::to_string(port) +
                     " -servername localhost </dev/null 2>/dev/null | openssl x509 -noout "
                     "-subject")
      .second;
}

// How often `what` occurs in `text`.
int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Atomically puts `from` at `to`, as a renewal hook does (a copy, then a rename over the old).
void replace_file(const std::string& from, const std::string& to) {
  std::filesystem::copy_file(from, to + ".new", std::filesystem::copy_options::overwrite_existing);
  std::filesystem::rename(to + ".new", to);
}

// One TLS connection held open by the test: the handshake at construction, then requests on it.
class HeldConnection {
 public:
  HeldConnection(std::uint16_t port, const std::string& cafile)
      : ctx_(asio::ssl::context::tls_client), stream_(io_, ctx_) {
    ctx_.load_verify_file(cafile);
    stream_.set_verify_mode(asio::ssl::verify_peer);
    SSL_set_tlsext_host_name(stream_.native_handle(), "localhost");
    asio::ip::tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), port);
    stream_.lowest_layer().connect(ep);
    stream_.handshake(asio::ssl::stream_base::client);
  }
  // The common name of the certificate this connection got.
  std::string peer_name() {
    X509* cert = SSL_get1_peer_certificate(stream_.native_handle());
    if (!cert) return "";
    char cn[256] = {};
    X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
    X509_free(cert);
    return cn;
  }
  // GET /healthz on this connection; the status line of the answer.
  std::string get_healthz() {
    const std::string req = "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n";
    asio::write(stream_, asio::buffer(req));
    asio::streambuf buf;
    asio::read_until(stream_, buf, "\r\n\r\n");
    std::string head(asio::buffers_begin(buf.data()), asio::buffers_end(buf.data()));
    const auto cl = head.find("Content-Length: ");
    const std::size_t body = cl == std::string::npos ? 0 : std::stoul(head.substr(cl + 16));
    const std::size_t head_len = head.find("\r\n\r\n") + 4;
    if (buf.size() < head_len + body)
      asio::read(stream_, buf, asio::transfer_exactly(head_len + body - buf.size()));
    return head.substr(0, head.find("\r\n"));
  }

 private:
  asio::io_context io_;
  asio::ssl::context ctx_;
  asio::ssl::stream<asio::ip::tcp::socket> stream_;
};

// SIGHUP after the certificate files were replaced, under load from clients that reconnect for
// every request and clients that keep one connection: new connections get the new certificate,
// a connection opened before keeps working, and not one request fails. Then two broken
// replacements (a key that does not match, a file that is not PEM): each is logged, the current
// certificate stays, and the load still sees no failure.
TEST(TlsReload, SighupServesTheNewCertificateWithoutAFailedRequest) {
  TempDir dir;
  const std::string d = dir.path();
  for (const char* name : {"ichido-a", "ichido-b", "ichido-c"}) {
    ASSERT_EQ(make_named_cert(d, name), "");
  }
  std::filesystem::create_directories(d + "/live");
  replace_file(d + "/ichido-a/cert.pem", d + "/live/cert.pem");
  replace_file(d + "/ichido-a/key.pem", d + "/live/key.pem");
  // The clients trust both certificates (as a browser trusts the old and the renewed one).
  {
    std::ofstream trust(d + "/trust.pem");
    trust << slurp(d + "/ichido-a/cert.pem") << slurp(d + "/ichido-b/cert.pem");
  }
  ServerProcess server(d + "/data", {"--tls-cert", d + "/live/cert.pem", "--tls-key",
                                     d + "/live/key.pem", "--threads", "2"});
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  ASSERT_NE(served_subject(server.port()).find("ichido-a"), std::string::npos);

  cli::ClientOptions opt;
  opt.cacert = d + "/trust.pem";
  opt.token = "";
  const cli::BaseUrl url =
      *cli::parse_base_url("https://127.0.0.1:" + std::to_string(server.port())).url;
  {
    cli::HttpClient admin(url, opt);
    for (int i = 0; i < 4; ++i) {
      auto r = admin.put("/v1/ns/reload/counters/c" + std::to_string(i), "{}");
      ASSERT_TRUE(r.ok() && r.response->status == 201) << r.error;
    }
  }
  // The load: four clients, two reconnecting for every request, two keeping their connection.
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0};
  std::atomic<int> failed{0};
  std::mutex failures_mu;
  std::vector<std::string> failures;
  std::vector<std::thread> load;
  for (int i = 0; i < 4; ++i) {
    load.emplace_back([&, i] {
      cli::HttpClient client(url, opt);
      int n = 0;
      while (!stop.load()) {
        if (i % 2 == 0) client.close();  // a new connection, a new handshake
        auto r = client.post("/v1/ns/reload/counters/c" + std::to_string(i) + "/next",
                             "{\"key\":\"k" + std::to_string(n++) + "\"}");
        if (r.ok() && r.response->status == 200) {
          ok.fetch_add(1);
        } else {
          failed.fetch_add(1);
          std::lock_guard lk(failures_mu);
          failures.push_back(r.ok() ? std::to_string(r.response->status) + " " + r.response->body
                                    : r.error);
        }
      }
    });
  }
  struct Joiner {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~Joiner() {
      stop = true;
      for (auto& t : threads) t.join();
    }
  } joiner{stop, load};
  HeldConnection held(server.port(), d + "/trust.pem");
  EXPECT_EQ(held.peer_name(), "ichido-a");
  EXPECT_EQ(held.get_healthz(), "HTTP/1.1 200 OK");
  ASSERT_TRUE(eventually([&] { return ok.load() > 50; })) << "the load made no progress";

  // The renewal: both files replaced, then SIGHUP.
  replace_file(d + "/ichido-b/cert.pem", d + "/live/cert.pem");
  replace_file(d + "/ichido-b/key.pem", d + "/live/key.pem");
  ASSERT_EQ(::kill(server.pid(), SIGHUP), 0);
  EXPECT_TRUE(eventually([&] {
    return server.log().find("reloaded the TLS certificate: /CN=ichido-b") != std::string::npos;
  })) << server.log();
  EXPECT_NE(served_subject(server.port()).find("ichido-b"), std::string::npos);
  EXPECT_EQ(held.get_healthz(), "HTTP/1.1 200 OK");  // opened before the reload
  EXPECT_EQ(held.peer_name(), "ichido-a");
  const int after_reload = ok.load();
  ASSERT_TRUE(eventually([&] { return ok.load() > after_reload + 50; }));

  // A key that does not match the certificate: logged, and ichido-b stays.
  replace_file(d + "/ichido-c/cert.pem", d + "/live/cert.pem");
  ASSERT_EQ(::kill(server.pid(), SIGHUP), 0);
  // (OpenSSL refuses the key while loading it: "key values mismatch".)
  EXPECT_TRUE(eventually([&] {
    return count(server.log(),
                 "cannot reload the TLS certificate, still serving the previous one") == 1;
  })) << server.log();
  EXPECT_NE(server.log().find("key values mismatch"), std::string::npos) << server.log();
  EXPECT_NE(served_subject(server.port()).find("ichido-b"), std::string::npos);
  // A certificate file that is not PEM at all: the same.
  {
    std::ofstream junk(d + "/live/cert.pem.new");
    junk << "not a certificate\n";
  }
  std::filesystem::rename(d + "/live/cert.pem.new", d + "/live/cert.pem");
  ASSERT_EQ(::kill(server.pid(), SIGHUP), 0);
  EXPECT_TRUE(eventually([&] {
    return count(server.log(),
                 "cannot reload the TLS certificate, still serving the previous one") == 2;
  })) << server.log();
  EXPECT_NE(server.log().find("Cannot load the TLS certificate chain"), std::string::npos);
  EXPECT_NE(served_subject(server.port()).find("ichido-b"), std::string::npos);
  const int after_broken = ok.load();
  ASSERT_TRUE(eventually([&] { return ok.load() > after_broken + 50; }));
  EXPECT_EQ(held.get_healthz(), "HTTP/1.1 200 OK");

  stop = true;
  for (auto& t : load) t.join();
  load.clear();
  EXPECT_EQ(failed.load(), 0) << (failures.empty() ? "" : failures.front());
  EXPECT_GT(ok.load(), 150);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Without TLS a SIGHUP changes nothing and, above all, does not end the server (its default
// action would).
TEST(TlsReload, SighupWithoutTlsKeepsServing) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data");
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  ASSERT_EQ(::kill(server.pid(), SIGHUP), 0);
  EXPECT_TRUE(eventually([&] {
    return server.log().find("received SIGHUP: nothing to reload") != std::string::npos;
  })) << server.log();
  auto [rc, out] = run_command(
      "curl -sS --max-time 10 http://127.0.0.1:" + std::to_string(server.port()) + "/healthz");
  EXPECT_EQ(rc, 0) << out;
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

// How requests and answers travel on one connection, whatever the byte boundaries: a request in
// pieces, several requests in one packet, an answer larger than the socket takes at once (the
// server writes what it can at once and the rest asynchronously; it parses what one read
// brought and reads more only when needed).
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "api_client.h"
#include "raw_client.h"
#include "server_process.h"

namespace ichido::testing {
namespace {

class FramingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    ASSERT_TRUE(server_.start(&err)) << err;
    ApiClient api(server_.url());
    ASSERT_EQ(api.create("c", R"({"format":"N{seq:4}"})").status, 201);
  }
  static std::string next_request(const std::string& key, bool close = false) {
    const std::string body = R"({"key":")" + key + R"("})";
    return "POST /v1/ns/t/counters/c/next HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           "Content-Length: " +
           std::to_string(body.size()) + "\r\n" + (close ? "Connection: close\r\n" : "") + "\r\n" +
           body;
  }

  TempDir dir_;
  ServerProcess server_{dir_.path() + "/data"};
};

TEST_F(FramingTest, ARequestArrivingInPiecesIsAnsweredOnceComplete) {
  RawConn conn(server_.port());
  ASSERT_TRUE(conn.ok());
  const std::string req = next_request("pieces", /*close=*/true);
  const auto header_end = req.find("\r\n\r\n") + 4;
  // The request line alone, the rest of the header, then the body a byte at a time. The pauses
  // only make the pieces arrive separately; the answer must be the same whatever they are.
  const std::string pieces[] = {
      req.substr(0, req.find("\r\n") + 2),
      req.substr(req.find("\r\n") + 2, header_end - req.find("\r\n") - 2)};
  for (const auto& p : pieces) {
    ASSERT_TRUE(conn.send(p));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  for (std::size_t i = header_end; i < req.size(); ++i) {
    ASSERT_TRUE(conn.send(req.substr(i, 1)));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  bool closed = false;
  const std::string out = conn.read_all(std::chrono::seconds(20), &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(statuses(out), std::vector<int>{200});
  EXPECT_NE(out.find(R"("value":1)"), std::string::npos) << out;
}

TEST_F(FramingTest, PipelinedRequestsInOnePacketAreAnsweredInOrder) {
  RawConn conn(server_.port());
  ASSERT_TRUE(conn.ok());
  ASSERT_TRUE(conn.send(next_request("p1") + next_request("p2") + next_request("p1") +
                        next_request("p3", /*close=*/true)));
  bool closed = false;
  const std::string out = conn.read_all(std::chrono::seconds(20), &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(statuses(out), (std::vector<int>{200, 200, 200, 200}));
  // p1, p2, p1 again (a replay: the same number), p3.
  std::vector<std::string> values;
  for (std::size_t at = 0; (at = out.find(R"("value":)", at)) != std::string::npos; at += 8) {
    values.push_back(out.substr(at + 8, out.find_first_of(",}", at + 8) - at - 8));
  }
  EXPECT_EQ(values, (std::vector<std::string>{"1", "2", "1", "3"})) << out;
}

TEST_F(FramingTest, AnswersLargerThanTheSocketTakesAtOnceArriveWhole) {
  ApiClient api(server_.url());
  const std::string note(1000, 'n');
  constexpr int kNumbers = 400;  // ~450 KB of JSON per answer
  for (int i = 0; i < kNumbers; ++i) {
    boost::json::object o{{"key", "big-" + std::to_string(i)}, {"note", note}};
    ASSERT_EQ(api.send("POST", api.counter_path("c") + "/next", boost::json::serialize(o)).status,
              200);
  }
  // 20 pipelined requests for ~9 MB of answers, a 4 KiB receive buffer and a reader that starts
  // late: the socket fills up (the kernel takes at most 4 MiB) and the server must finish its
  // writes as the reader drains it.
  constexpr int kRequests = 20;
  RawConn conn(server_.port(), 4096);
  ASSERT_TRUE(conn.ok());
  std::string requests;
  for (int i = 0; i < kRequests; ++i) {
    requests += "GET /v1/ns/t/counters/c/issued?limit=1000 HTTP/1.1\r\nHost: x\r\n";
    requests += i + 1 == kRequests ? "Connection: close\r\n\r\n" : "\r\n";
  }
  ASSERT_TRUE(conn.send(requests));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  bool closed = false;
  const std::string out = conn.read_all(std::chrono::seconds(60), &closed);
  EXPECT_TRUE(closed);
  ASSERT_EQ(statuses(out), std::vector<int>(kRequests, 200));
  // Every answer whole: its Content-Length of bytes, parsing as the full list.
  std::size_t at = 0;
  for (int i = 0; i < kRequests; ++i) {
    const auto header_end = out.find("\r\n\r\n", at);
    ASSERT_NE(header_end, std::string::npos) << "answer " << i;
    const auto cl = out.find("Content-Length: ", at);
    ASSERT_LT(cl, header_end) << "answer " << i;
    const auto length = std::stoul(out.substr(cl + 16));
    ASSERT_LE(header_end + 4 + length, out.size()) << "answer " << i << " is cut";
    boost::system::error_code ec;
    auto json = boost::json::parse(out.substr(header_end + 4, length), ec);
    ASSERT_FALSE(ec) << "answer " << i << " is garbled";
    EXPECT_EQ(json.at("items").as_array().size(), static_cast<std::size_t>(kNumbers));
    at = header_end + 4 + length;
  }
  EXPECT_EQ(at, out.size());
}

}  // namespace
}  // namespace ichido::testing

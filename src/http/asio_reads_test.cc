// Asio's reads as the server relies on them: data that comes after a short read completes the
// waiting read, and a peer's half-close is never missed, whether its FIN came with the last data
// or after it. Real loopback TCP sockets and Asio's epoll reactor; no sleeps: the
// client's bytes are known to have arrived when poll(2) on the server's socket says so.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <string>
#include <vector>

namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

struct Pair {
  asio::io_context ioc;
  tcp::socket server{ioc};
  tcp::socket client{ioc};  // used with blocking calls only

  Pair() {
    tcp::acceptor acceptor(ioc, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    client.connect(acceptor.local_endpoint());
    acceptor.accept(server);
    server.non_blocking(true);
  }

  // Waits (level-triggered, outside Asio) until the server's socket has something to read.
  void await_readable() {
    pollfd p{server.native_handle(), POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 5000), 1);
  }

  // Starts one read on the server; its outcome lands in `got` / `ec`, and `order` records it.
  void read(const char* name) {
    server.async_read_some(asio::buffer(buf),
                           [this, name](boost::system::error_code e, std::size_t n) {
                             ec = e;
                             got.assign(buf.data(), n);
                             order.push_back(name);
                           });
  }

  // Runs the loop until `done` or 5 s: a read that never completes fails the test, not hangs it.
  template <class F>
  bool run_until(F done) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done()) {
      if (std::chrono::steady_clock::now() > until) return false;
      ioc.restart();
      ioc.run_one_for(std::chrono::milliseconds(20));
    }
    return true;
  }

  std::array<char, 64> buf{};
  std::vector<std::string> order;  // the reads (and markers) in the order they completed
  std::string got;                 // the last read's bytes
  boost::system::error_code ec;    // the last read's error
};

TEST(AsioReads, DataThatArrivesAfterAShortReadCompletesTheWaitingRead) {
  Pair p;
  asio::write(p.client, asio::buffer(std::string("a")));
  p.await_readable();
  p.read("first");
  ASSERT_TRUE(p.run_until([&] { return p.order.size() == 1; }));
  p.read("second");  // nothing there yet: it waits in the reactor
  p.ioc.restart();
  p.ioc.poll();
  ASSERT_EQ(p.order.size(), 1u);
  asio::write(p.client, asio::buffer(std::string("later")));
  ASSERT_TRUE(p.run_until([&] { return p.order.size() == 2; }));
  EXPECT_EQ(p.got, "later");
  EXPECT_FALSE(p.ec);
}

// A request and the FIN in one segment (TCP_CORK, then shutdown): the read that takes the
// request takes the FIN too, and no later event comes. The next read must still see the end of
// file at once. Half the rounds as a connection reads (the read waits in the reactor before the
// segment arrives: with only the short-read half of the patch, the next read waited for ever),
// half with the segment there before the read starts.
TEST(AsioReads, AHalfCloseThatCameWithTheDataIsSeen) {
  for (int round = 0; round < 20; ++round) {
    Pair p;
    const bool read_first = round % 2 == 0;
    if (read_first) p.read("request");
    int one = 1;
    ASSERT_EQ(::setsockopt(p.client.native_handle(), IPPROTO_TCP, TCP_CORK, &one, sizeof one), 0);
    asio::write(p.client, asio::buffer(std::string("GET / HTTP/1.1\r\n\r\n")));
    p.client.shutdown(tcp::socket::shutdown_send);
    p.await_readable();
    if (!read_first) p.read("request");
    ASSERT_TRUE(p.run_until([&] { return p.order.size() == 1; }));
    EXPECT_EQ(p.got, "GET / HTTP/1.1\r\n\r\n");
    p.read("eof");
    ASSERT_TRUE(p.run_until([&] { return p.order.size() == 2; })) << "round " << round;
    EXPECT_EQ(p.ec, asio::error::eof);
  }
}

// The FIN after the data, in its own segment, once the request was read.
TEST(AsioReads, AHalfCloseAfterTheDataIsSeen) {
  Pair p;
  asio::write(p.client, asio::buffer(std::string("GET / HTTP/1.1\r\n\r\n")));
  p.await_readable();
  p.read("request");
  ASSERT_TRUE(p.run_until([&] { return p.order.size() == 1; }));
  p.read("eof");
  p.ioc.restart();
  p.ioc.poll();
  ASSERT_EQ(p.order.size(), 1u);
  p.client.shutdown(tcp::socket::shutdown_send);
  ASSERT_TRUE(p.run_until([&] { return p.order.size() == 2; }));
  EXPECT_EQ(p.ec, asio::error::eof);
}

}  // namespace

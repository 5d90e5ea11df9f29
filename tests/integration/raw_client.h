// A raw TCP client for the tests that must send what no HTTP library would: oversized or
// malformed requests, byte-by-byte senders, half-closed connections, pipelined garbage.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ichido::testing {

class RawConn {
 public:
  // `receive_buffer` > 0 sets SO_RCVBUF before connecting: a small one makes the server's
  // writes block part-way (a slow reader).
  explicit RawConn(std::uint16_t port, int receive_buffer = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (receive_buffer > 0) {
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawConn() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }

  // Sends everything; false when the peer closed (a server may close mid-send on purpose).
  bool send(const std::string& bytes) {
    std::size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<std::size_t>(n);
    }
    return true;
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  // Holds what is sent until the connection's send side is shut down (or the cork removed):
  // the bytes and the FIN then leave in one segment.
  void cork() {
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_CORK, &one, sizeof one);
  }

  // Reads until what arrived contains `needle`, the server closes the connection or `limit`
  // passes; returns what arrived (the caller checks for `needle`).
  std::string read_until(const std::string& needle, std::chrono::milliseconds limit) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (out.find(needle) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buf[65536];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }

  // Reads until the server closes the connection or `limit` passes. `closed` tells which.
  std::string read_all(std::chrono::milliseconds limit, bool* closed = nullptr) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buf[65536];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        if (closed) *closed = true;
        return out;
      }
      out.append(buf, static_cast<std::size_t>(n));
    }
    if (closed) *closed = false;
    return out;
  }

 private:
  int fd_ = -1;
};

// The status codes of every HTTP response in `bytes`, in order.
inline std::vector<int> statuses(const std::string& bytes) {
  std::vector<int> out;
  std::size_t at = 0;
  while ((at = bytes.find("HTTP/1.1 ", at)) != std::string::npos) {
    out.push_back(std::atoi(bytes.c_str() + at + 9));
    at += 9;
  }
  return out;
}

}  // namespace ichido::testing

// A raw TCP client for the tests that must send what no HTTP library would: oversized or
// malformed requests, byte-by-byte senders, half-closed connections, pipelined garbage.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
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

  // Whether bytes (or the server's end of stream) are waiting to be read now.
  bool readable_now() const {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }

  // From now on the kernel stamps every segment it receives (SO_TIMESTAMPNS), so that
  // read_all_stamped() can tell when the first byte of an answer arrived: before or after
  // something the test did at a known moment (realtime_ns()).
  void stamp_receives() {
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
  }
  // CLOCK_REALTIME in nanoseconds: the clock of the kernel's receive stamps.
  static std::int64_t realtime_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    return std::int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
  }
  // read_all(), and when the first byte of what it returns was received by the kernel
  // (realtime_ns() terms; 0 when nothing came). Needs stamp_receives() before the bytes came.
  std::string read_all_stamped(std::chrono::milliseconds limit, std::int64_t* first_at_ns,
                               bool* closed = nullptr) {
    std::string out;
    *first_at_ns = 0;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buf[65536];
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec))];
      iovec iov{buf, sizeof buf};
      msghdr m{};
      m.msg_iov = &iov;
      m.msg_iovlen = 1;
      m.msg_control = control;
      m.msg_controllen = sizeof control;
      const ssize_t n = ::recvmsg(fd_, &m, 0);
      if (n <= 0) {
        if (closed) *closed = true;
        return out;
      }
      if (*first_at_ns == 0) {
        for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
          if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
            timespec ts{};
            std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
            *first_at_ns = std::int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
          }
        }
      }
      out.append(buf, static_cast<std::size_t>(n));
    }
    if (closed) *closed = false;
    return out;
  }

  // Reads until the server closes the connection or `limit` passes. `closed` tells which.
  std::string read_all(std::chrono::milliseconds limit, bool* closed = nullptr) {
    std::int64_t first_at_ns = 0;
    return read_all_stamped(limit, &first_at_ns, closed);
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

// Proxies that lose traffic the way a flaky network does.
//
// AnswerDroppingProxy: a TCP proxy that loses answers the way a flaky network does. It forwards
// one HTTP request to the server, reads the server's whole answer (so the server has committed
// and answered — from its side the exchange succeeded) and then closes the client's connection
// without relaying a byte. The client sees a dropped connection; the test reads what the server
// really answered from `last_answer()`.
//
// One connection at a time, HTTP/1.1 with Content-Length bodies (what ichido sends and the test
// clients send). Lifecycle: construct (listens on 127.0.0.1, port 0) → port() → destroy (joins).
// Thread-safety: last_answer()/answers() may be called from the test thread while it runs.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ichido::testing {

// A listening socket on 127.0.0.1 and a port the kernel picks (`*port`); -1 when it fails.
inline int listen_on_loopback(int backlog, std::uint16_t* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, backlog) != 0) {
    ::close(fd);
    return -1;
  }
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

class AnswerDroppingProxy {
 public:
  explicit AnswerDroppingProxy(std::uint16_t server_port) : server_port_(server_port) {
    listen_fd_ = listen_on_loopback(16, &port_);
    if (listen_fd_ >= 0) thread_ = std::thread([this] { run(); });
  }
  ~AnswerDroppingProxy() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }
  AnswerDroppingProxy(const AnswerDroppingProxy&) = delete;
  AnswerDroppingProxy& operator=(const AnswerDroppingProxy&) = delete;

  bool ok() const { return listen_fd_ >= 0; }
  std::uint16_t port() const { return port_; }
  // The last answer the server sent (status line, headers and body), "" when none yet.
  std::string last_answer() const {
    std::lock_guard lk(mu_);
    return last_;
  }
  int answers() const { return answers_.load(); }

 private:
  // Reads one HTTP message (header + Content-Length body) from fd; "" on EOF/error/stop.
  std::string read_message(int fd) {
    std::string buf;
    std::size_t need = std::string::npos;
    while (!stop_.load()) {
      if (need != std::string::npos && buf.size() >= need) return buf;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char chunk[16384];
      const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n <= 0) return "";
      buf.append(chunk, static_cast<std::size_t>(n));
      const auto end = buf.find("\r\n\r\n");
      if (need == std::string::npos && end != std::string::npos) {
        std::size_t length = 0;
        std::string lower = buf.substr(0, end);
        for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const auto at = lower.find("content-length:");
        if (at != std::string::npos) length = std::stoul(lower.substr(at + 15));
        need = end + 4 + length;
      }
    }
    return "";
  }

  void run() {
    while (!stop_.load()) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(server_port_);
      if (::connect(server, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
        const std::string request = read_message(client);
        if (!request.empty() && ::send(server, request.data(), request.size(), MSG_NOSIGNAL) ==
                                    static_cast<ssize_t>(request.size())) {
          std::string answer = read_message(server);
          if (!answer.empty()) {
            std::lock_guard lk(mu_);
            last_ = std::move(answer);
            answers_.fetch_add(1);
          }
        }
      }
      // The answer is dropped: the client's connection ends without a byte of it.
      ::shutdown(client, SHUT_RDWR);
      ::close(client);
      ::close(server);
    }
  }

  const std::uint16_t server_port_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> answers_{0};
  mutable std::mutex mu_;
  std::string last_;  // guarded by mu_
};

// BlackHoleProxy: a TCP proxy (listens on 127.0.0.1, port 0) to a local port that can be cut
// like a cable. cut(): no byte moves either way any more — no reset, no FIN; what is sent just
// stays unanswered, and a new connection is taken by the kernel's backlog but gets nothing.
// restore(): bytes move again, what was held first (as TCP delivers what it retransmits once a
// path is back). Many connections, both directions, one thread.
// Lifecycle: construct → port() → destroy (joins, closes every connection).
// Thread-safety: cut()/restore() from any thread.
class BlackHoleProxy {
 public:
  explicit BlackHoleProxy(std::uint16_t target_port) : target_port_(target_port) {
    listen_fd_ = listen_on_loopback(128, &port_);
    if (listen_fd_ >= 0) thread_ = std::thread([this] { run(); });
  }
  ~BlackHoleProxy() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    for (const auto& [from, to] : peer_) ::close(from);
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }
  BlackHoleProxy(const BlackHoleProxy&) = delete;
  BlackHoleProxy& operator=(const BlackHoleProxy&) = delete;

  bool ok() const { return listen_fd_ >= 0; }
  std::uint16_t port() const { return port_; }
  void cut() { cut_.store(true); }
  void restore() { cut_.store(false); }

 private:
  void run() {
    char buf[65536];
    while (!stop_.load()) {
      if (cut_.load()) {  // nothing is read, accepted or written: the bytes wait in the kernel
        ::poll(nullptr, 0, 10);
        continue;
      }
      std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
      for (const auto& [from, to] : peer_) fds.push_back({from, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 10) <= 0) continue;
      if (fds[0].revents & POLLIN) accept_one();
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const int from = fds[i].fd;
        auto it = peer_.find(from);
        if (it == peer_.end()) continue;  // closed meanwhile with its peer
        const ssize_t n = ::recv(from, buf, sizeof buf, 0);
        if (n <= 0) {
          close_pair(from);
          continue;
        }
        if (!send_all(it->second, buf, static_cast<std::size_t>(n))) close_pair(from);
      }
    }
  }
  void accept_one() {
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) return;
    const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(target_port_);
    if (::connect(server, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(client);
      ::close(server);
      return;
    }
    peer_[client] = server;
    peer_[server] = client;
  }
  static bool send_all(int fd, const char* p, std::size_t n) {
    while (n > 0) {
      const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
      if (w <= 0) return false;
      p += w;
      n -= static_cast<std::size_t>(w);
    }
    return true;
  }
  void close_pair(int fd) {
    auto it = peer_.find(fd);
    if (it == peer_.end()) return;
    const int other = it->second;
    peer_.erase(fd);
    peer_.erase(other);
    ::close(fd);
    ::close(other);
  }

  const std::uint16_t target_port_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> cut_{false};
  std::map<int, int> peer_;  // the run thread's: each socket and the one it forwards to
};

}  // namespace ichido::testing

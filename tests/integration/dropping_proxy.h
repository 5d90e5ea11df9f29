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
#include <mutex>
#include <string>
#include <thread>

namespace ichido::testing {

class AnswerDroppingProxy {
 public:
  explicit AnswerDroppingProxy(std::uint16_t server_port) : server_port_(server_port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_fd_, 16) != 0) {
      ::close(listen_fd_);
      listen_fd_ = -1;
      return;
    }
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
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

}  // namespace ichido::testing

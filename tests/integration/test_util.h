// Small helpers shared by the integration tests.
#pragma once

#include <sys/wait.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

namespace ichido::testing {

// "2026-04-01T09:30:00.123Z" -> ms since the epoch (-1 when malformed).
inline std::int64_t rfc3339_to_ms(const std::string& s) {
  int y, mo, d, h, mi, sec, ms = 0;
  if (std::sscanf(s.c_str(), "%d-%d-%dT%d:%d:%d.%dZ", &y, &mo, &d, &h, &mi, &sec, &ms) < 6) {
    return -1;
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  return static_cast<std::int64_t>(::timegm(&tm)) * 1000 + ms;
}

// Polls `pred` every 5 ms until it holds or `limit` passes; true when it held. For waiting on
// an event the test cannot be told about directly (a refresh, a queue position), with a bound —
// never a sleep standing in for synchronisation.
inline bool eventually(const std::function<bool()>& pred,
                       std::chrono::milliseconds limit = std::chrono::milliseconds(20000)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

// Runs a shell command; returns its exit status and its stdout without trailing newlines.
inline std::pair<int, std::string> run_command(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return {-1, ""};
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A self-signed certificate for localhost and 127.0.0.1 (valid one day), written to
// `dir`/cert.pem and `dir`/key.pem with openssl. "" on success, else openssl's output.
inline std::string make_self_signed_cert(const std::string& dir) {
  auto [code, out] = run_command(
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
      "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " +
      dir + "/key.pem -out " + dir + "/cert.pem 2>&1");
  return code == 0 ? std::string() : "openssl failed (" + std::to_string(code) + "): " + out;
}

}  // namespace ichido::testing

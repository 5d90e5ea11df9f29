// Whether an I/O thread serves one connection: what the embedded store asks before it commits a
// lone write on the calling thread (decision 141). Kept by HttpServer for its I/O threads
// (server.cc); read through SqliteStore's Options::caller_may_commit, which server/server.cc
// wires to this_thread_serves_one_client.
#pragma once

namespace ichido::http {

// Whether the calling thread is an I/O thread that serves exactly one connection now
// (serve_connections_on: each connection stays on its thread). Such a thread has nothing else to
// do while that connection's write commits, so the embedded store may commit a lone write on it
// (decision 141; wired by server/server.cc as SqliteStore's Options::caller_may_commit). False on
// every other thread, and within a NotWaitingHere scope.
bool this_thread_serves_one_client() noexcept;
// Sets what this_thread_serves_one_client() answers on this thread. The server keeps it up to
// date for its I/O threads; tests say it for theirs.
void set_this_thread_serves_one_client(bool one) noexcept;

// Within its scope the thread does not offer itself for a commit: for writes nobody on this
// thread waits for (fire and forget), which must not hold the thread for their fsync.
class NotWaitingHere {
 public:
  NotWaitingHere() noexcept;
  ~NotWaitingHere();
  NotWaitingHere(const NotWaitingHere&) = delete;
  NotWaitingHere& operator=(const NotWaitingHere&) = delete;

 private:
  const bool saved_;
};

}  // namespace ichido::http

// Client: what a waiting request's service needs to know of its client — whether it is gone.
//
// A request that waits (a lock acquire or once begin with wait_ms) learns that its client went away
// through its coroutine's cancellation, which the HTTP server emits when it sees the connection
// end. That is as fresh as the last time the connection's I/O thread looked at its socket: a
// thread that was busy meanwhile (a lone write's commit runs on the very thread that watches the
// socket, decision 141) looks only after the grant it made is answered. A grant is therefore
// decided with gone(), which looks at the connection itself, now: a client whose end of stream
// (or reset) reached this host before the grant was decided gets no grant (the H2 and W5 hand-
// overs of once_service.h and lock_service.h), whichever thread ran the commit (decision 160).
//
// Lifecycle: the HTTP server's connection implements it; it outlives the request.
// Thread-safety: called only on the request's executor (the connection's).
#pragma once

#include <boost/asio/cancellation_state.hpp>

namespace ichido::service {

class Client {
 public:
  // True when the client has gone away: its connection's end of stream (a close or a half-close)
  // or a reset has arrived, whether or not the server has read up to it. Never blocks. Once true,
  // the server sends this request no answer.
  virtual bool gone() = 0;

 protected:
  ~Client() = default;
};

// The request's client is gone: its cancellation fired, or `client` (when given) finds it gone.
inline bool client_gone(const boost::asio::cancellation_state& cs, Client* client) {
  return cs.cancelled() != boost::asio::cancellation_type::none ||
         (client != nullptr && client->gone());
}

}  // namespace ichido::service

// The benchmark workloads of ichido-loadgen, for ichido and for its peers (Redis, PostgreSQL,
// etcd).
//
// Purpose: define, once per system, what one *operation* of each workload is — the same semantics
// on every system (see bench/README.md, "Workloads") — as a short sequence of protocol requests,
// and how to check each answer. The io loops in loadgen.cc send the requests; a workload never
// touches a socket.
//
// An operation is one or more steps (e.g. once begin, then complete). Per connection the loop keeps
// an OpState; make() builds the request for `st.step`, check() looks at its answer and either
// reports an error (the operation is abandoned), asks for another step (sets st.step, returns
// more = true), or finishes the operation (more = false). Latency is measured per operation, from
// the first request written to the last answer read.
//
// Thread-safety: make() and check() are const and called concurrently for different connections;
// all mutable state lives in the caller's OpState.
#pragma once

#include <libpq-fe.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "histogram.h"

namespace ichido::bench {

// Per-connection state. `last` survives operations (strictly increasing value checks) and is reset
// on reconnect; the rest is scratch of the current operation.
struct OpState {
  unsigned step = 0;
  std::uint64_t last = 0;
  std::uint64_t value = 0, rev = 0, token = 0;
  bool granted = false;       // this operation acquired a lock (contended workloads count grants)
  std::uint64_t retries = 0;  // CAS retries (etcd), whole run
};

struct Verdict {
  const char* error = nullptr;  // static storage; non-null: the answer is wrong
  bool more = false;            // another step follows (st.step was set)
};
inline Verdict fail(const char* why) { return {why, false}; }
inline Verdict done() { return {nullptr, false}; }
inline Verdict next(OpState& st, unsigned step) {
  st.step = step;
  return {nullptr, true};
}

// What the run is about, shared by all workloads.
struct WorkloadParams {
  std::string prefix;  // HTTP path prefix of the URL
  std::string ns = "bench";
  std::string name = "bench";  // counter name, or the lock name of contended workloads
  std::string run_id;          // makes every key of this run new
  bool verify = true;
  // Keys PREFIX RUNID-CONN-SEQ (false: each connection's keys in a place of their own in a key
  // index) or PREFIX RUNID-SEQ(12 digits)-CONN (true: all connections' keys in one time order, so
  // a batch's new keys share the last pages of a key index: what the keys' order costs).
  bool keys_in_time_order = false;
  // counter-next on ichido: connection c uses counter NAME-(c % counters) when counters > 1 (the
  // counters NAME-0 … NAME-(counters-1) must exist), else NAME: one hot record, or as many as
  // asked, so that commits on different records need not wait for each other.
  unsigned counters = 1;
};

inline void append_uint(std::string& out, std::uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// Finds `"name"` followed by optional blanks and ':' and returns the text after them.
inline std::optional<std::string_view> json_field(std::string_view body,
                                                  std::string_view quoted_name) {
  const auto at = body.find(quoted_name);
  if (at == std::string_view::npos) return std::nullopt;
  body.remove_prefix(at + quoted_name.size());
  while (!body.empty() && (body.front() == ' ' || body.front() == '\t')) body.remove_prefix(1);
  if (body.empty() || body.front() != ':') return std::nullopt;
  body.remove_prefix(1);
  while (!body.empty() && (body.front() == ' ' || body.front() == '\t')) body.remove_prefix(1);
  return body;
}
// An unsigned integer field, bare or quoted (protobuf JSON quotes 64-bit integers).
inline std::optional<std::uint64_t> json_uint(std::string_view body, std::string_view quoted_name) {
  auto v = json_field(body, quoted_name);
  if (!v) return std::nullopt;
  if (!v->empty() && v->front() == '"') v->remove_prefix(1);
  std::uint64_t n = 0;
  const auto r = std::from_chars(v->data(), v->data() + v->size(), n);
  if (r.ec != std::errc{}) return std::nullopt;
  return n;
}
inline bool json_true(std::string_view body, std::string_view quoted_name) {
  const auto v = json_field(body, quoted_name);
  return v && v->starts_with("true");
}
// A string field's raw text (no escapes expected in what we read).
inline std::optional<std::string_view> json_string(std::string_view body,
                                                   std::string_view quoted_name) {
  auto v = json_field(body, quoted_name);
  if (!v || v->empty() || v->front() != '"') return std::nullopt;
  v->remove_prefix(1);
  const auto end = v->find('"');
  if (end == std::string_view::npos) return std::nullopt;
  return v->substr(0, end);
}

// A key unique in this run: PREFIX RUNID - CONN - SEQ, or PREFIX RUNID - SEQ - CONN with the
// sequence number zero-padded to 12 digits (keys_in_time_order).
inline void append_key(std::string& out, std::string_view prefix, const WorkloadParams& p,
                       unsigned conn, std::uint64_t seq) {
  out.append(prefix).append(p.run_id).push_back('-');
  if (p.keys_in_time_order) {
    char digits[24];
    const auto r = std::to_chars(digits, digits + sizeof digits, seq);
    const auto n = static_cast<std::size_t>(r.ptr - digits);
    if (n < 12) out.append(12 - n, '0');
    out.append(digits, n).push_back('-');
    append_uint(out, conn);
    return;
  }
  append_uint(out, conn);
  out.push_back('-');
  append_uint(out, seq);
}

// =============================================================================================
// HTTP: ichido and etcd (etcd serves its v3 API as JSON over HTTP/1.1 on the client port).

struct HttpRequest {
  std::string_view method;  // static storage
  std::string target;
  std::string body;
};

class HttpWorkload {
 public:
  virtual ~HttpWorkload() = default;
  virtual void make(unsigned conn, std::uint64_t seq, const OpState& st,
                    HttpRequest& out) const = 0;
  // Called for 2xx answers only (the loop counts the others as errors).
  virtual Verdict check(std::string_view body, OpState& st) const = 0;
  // True when an operation in progress must be finished even after the window ended (a lock
  // held by this connection must be released, or every waiter would sit out its lease).
  virtual bool finish_ops() const { return false; }
  // Extra result lines printed after the run (e.g. wake-up latency). Default: none.
  virtual void report(std::FILE*) const {}
};

// Only the status matters (ok-server, /healthz).
class HttpGet final : public HttpWorkload {
 public:
  explicit HttpGet(std::string target) : target_(std::move(target)) {}
  void make(unsigned, std::uint64_t, const OpState&, HttpRequest& out) const override {
    out.method = "GET";
    out.target = target_;
    out.body.clear();
  }
  Verdict check(std::string_view, OpState&) const override { return done(); }

 private:
  std::string target_;
};

// W1 on ichido: POST /v1/ns/{ns}/counters/{name}/next with a fresh key (name: see
// WorkloadParams::counters). Check: `value` strictly increases on each connection and the answer
// is not a replay.
class IchidoCounterNext final : public HttpWorkload {
 public:
  explicit IchidoCounterNext(const WorkloadParams& p) : p_(p) {
    const std::string base = p.prefix + "/v1/ns/" + p.ns + "/counters/" + p.name;
    if (p.counters <= 1) {
      targets_.push_back(base + "/next");
    } else {
      for (unsigned i = 0; i < p.counters; ++i)
        targets_.push_back(base + "-" + std::to_string(i) + "/next");
    }
  }
  void make(unsigned conn, std::uint64_t seq, const OpState&, HttpRequest& out) const override {
    out.method = "POST";
    const std::string& target = targets_[conn % targets_.size()];
    if (out.target != target) out.target = target;
    out.body.assign("{\"key\":\"");
    append_key(out.body, "k-", p_, conn, seq);
    out.body.append("\"}");
  }
  Verdict check(std::string_view body, OpState& st) const override {
    if (!p_.verify) return done();
    const auto v = json_uint(body, "\"value\"");
    if (!v) return fail("answer has no unsigned \"value\"");
    if (*v <= st.last) return fail("\"value\" did not increase on this connection");
    st.last = *v;
    if (json_true(body, "\"replayed\"")) return fail("fresh key answered as a replay");
    return done();
  }

 private:
  WorkloadParams p_;
  std::vector<std::string> targets_;  // one a counter; connection c uses c % size
};

// W2 on ichido: once begin (fresh key) → acquired with a token, then complete with that token.
class IchidoOnce final : public HttpWorkload {
 public:
  explicit IchidoOnce(const WorkloadParams& p) : p_(p) {
    begin_ = p.prefix + "/v1/ns/" + p.ns + "/once/begin";
    complete_ = p.prefix + "/v1/ns/" + p.ns + "/once/complete";
  }
  void make(unsigned conn, std::uint64_t seq, const OpState& st, HttpRequest& out) const override {
    out.method = "POST";
    out.body.assign("{\"key\":\"");
    append_key(out.body, "o-", p_, conn, seq);
    if (st.step == 0) {
      out.target = begin_;
      out.body.append("\",\"owner\":\"bench-");
      append_uint(out.body, conn);
      out.body.append("\",\"lease_ms\":60000}");
    } else {
      out.target = complete_;
      out.body.append("\",\"token\":");
      append_uint(out.body, st.token);
      out.body.append(",\"result\":{\"ok\":true}}");
    }
  }
  Verdict check(std::string_view body, OpState& st) const override {
    if (st.step == 0) {
      if (body.find("\"acquired\"") == std::string_view::npos)
        return fail("begin on a fresh key was not acquired");
      const auto t = json_uint(body, "\"token\"");
      if (!t) return fail("begin answer has no token");
      st.token = *t;
      return next(st, 1);
    }
    if (body.find("\"completed\"") == std::string_view::npos)
      return fail("complete did not answer completed");
    return done();
  }

 private:
  WorkloadParams p_;
  std::string begin_, complete_;
};

// W3 on ichido: acquire (wait_ms 0) then release with the token. Uncontended: a fresh lock name
// per operation; contended: one name for all (an attempt that finds it held ends the operation).
class IchidoLock final : public HttpWorkload {
 public:
  IchidoLock(const WorkloadParams& p, bool contended) : p_(p), contended_(contended) {}
  void make(unsigned conn, std::uint64_t seq, const OpState& st, HttpRequest& out) const override {
    out.method = "POST";
    out.target.assign(p_.prefix).append("/v1/ns/").append(p_.ns).append("/locks/");
    if (contended_)
      out.target.append(p_.name);
    else
      append_key(out.target, "l-", p_, conn, seq);
    if (st.step == 0) {
      out.target.append("/acquire");
      out.body.assign("{\"owner\":\"bench-");
      append_uint(out.body, conn);
      out.body.append("\",\"wait_ms\":0,\"lease_ms\":30000}");
    } else {
      out.target.append("/release");
      out.body.assign("{\"token\":");
      append_uint(out.body, st.token);
      out.body.append("}");
    }
  }
  Verdict check(std::string_view body, OpState& st) const override {
    if (st.step == 0) {
      if (!json_true(body, "\"acquired\"")) {
        if (contended_) return done();
        return fail("acquire of a fresh lock name was refused");
      }
      const auto t = json_uint(body, "\"token\"");
      if (!t) return fail("acquire answer has no token");
      st.token = *t;
      st.granted = true;
      return next(st, 1);
    }
    if (!json_true(body, "\"released\"")) return fail("release did not answer released");
    return done();
  }

 private:
  WorkloadParams p_;
  bool contended_;
};

// ichido only: every connection acquires the one lock NAME *waiting* in line (wait_ms 30000),
// then releases it: the contended hand-off rate (ops/s = grants/s, every operation is a grant).
// Also measures the wake-up latency, from writing a release to reading the next grant: grants
// and releases of one lock strictly alternate, so the grant read after a release is the one that
// release woke. That clock is the one piece of state shared between connections (mutex-guarded).
class IchidoLockHandoff final : public HttpWorkload {
 public:
  explicit IchidoLockHandoff(const WorkloadParams& p) : p_(p) {}
  void make(unsigned conn, std::uint64_t, const OpState& st, HttpRequest& out) const override {
    out.method = "POST";
    out.target.assign(p_.prefix).append("/v1/ns/").append(p_.ns).append("/locks/").append(p_.name);
    if (st.step == 0) {
      out.target.append("/acquire");
      out.body.assign("{\"owner\":\"bench-");
      append_uint(out.body, conn);
      out.body.append("\",\"wait_ms\":30000,\"lease_ms\":30000}");
    } else {
      out.target.append("/release");
      out.body.assign("{\"token\":");
      append_uint(out.body, st.token);
      out.body.append("}");
      std::lock_guard lk(mu_);
      release_written_ = std::chrono::steady_clock::now();
    }
  }
  Verdict check(std::string_view body, OpState& st) const override {
    if (st.step == 0) {
      if (!json_true(body, "\"acquired\"")) return fail("a waiting acquire was not granted");
      const auto t = json_uint(body, "\"token\"");
      if (!t) return fail("acquire answer has no token");
      if (*t <= st.last) return fail("fencing token did not increase");
      st.last = *t;
      st.token = *t;
      st.granted = true;
      const auto now = std::chrono::steady_clock::now();
      std::lock_guard lk(mu_);
      if (release_written_ != std::chrono::steady_clock::time_point{}) {
        wakeup_us_.record(static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(now - release_written_).count()));
      }
      return next(st, 1);
    }
    if (!json_true(body, "\"released\"")) return fail("release did not answer released");
    return done();
  }
  bool finish_ops() const override { return true; }
  void report(std::FILE* to) const override {
    std::lock_guard lk(mu_);
    std::fprintf(to,
                 "wakeup (release written -> next grant read): n=%llu p50_ms=%.3f p99_ms=%.3f "
                 "max_ms=%.3f\n",
                 static_cast<unsigned long long>(wakeup_us_.count()),
                 static_cast<double>(wakeup_us_.quantile(0.5)) / 1000.0,
                 static_cast<double>(wakeup_us_.quantile(0.99)) / 1000.0,
                 static_cast<double>(wakeup_us_.max()) / 1000.0);
  }

 private:
  WorkloadParams p_;
  mutable std::mutex mu_;
  mutable std::chrono::steady_clock::time_point release_written_{};
  mutable Histogram wakeup_us_;
};

// --- etcd v3 JSON gateway
// --------------------------------------------------------------------------

inline void base64(std::string& out, std::string_view in) {
  static constexpr char k[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v =
        (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8 | (unsigned char)in[i + 2];
    out.push_back(k[v >> 18]);
    out.push_back(k[(v >> 12) & 63]);
    out.push_back(k[(v >> 6) & 63]);
    out.push_back(k[v & 63]);
  }
  if (i + 1 == in.size()) {
    const unsigned v = (unsigned char)in[i] << 16;
    out.push_back(k[v >> 18]);
    out.push_back(k[(v >> 12) & 63]);
    out.append("==");
  } else if (i + 2 == in.size()) {
    const unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8;
    out.push_back(k[v >> 18]);
    out.push_back(k[(v >> 12) & 63]);
    out.push_back(k[(v >> 6) & 63]);
    out.push_back('=');
  }
}
// Decodes base64 of a decimal number (what the etcd workloads store as counter values).
inline std::optional<std::uint64_t> base64_uint(std::string_view in) {
  std::string raw;
  unsigned acc = 0;
  int bits = 0;
  for (char c : in) {
    int v;
    if (c >= 'A' && c <= 'Z')
      v = c - 'A';
    else if (c >= 'a' && c <= 'z')
      v = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      v = c - '0' + 52;
    else if (c == '+')
      v = 62;
    else if (c == '/')
      v = 63;
    else
      break;
    acc = acc << 6 | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      raw.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  std::uint64_t n = 0;
  const auto r = std::from_chars(raw.data(), raw.data() + raw.size(), n);
  if (r.ec != std::errc{} || r.ptr != raw.data() + raw.size()) return std::nullopt;
  return n;
}
inline void base64_uint_to(std::string& out, std::uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  base64(out, std::string_view(buf, static_cast<std::size_t>(r.ptr - buf)));
}

// Shared by the etcd workloads: key encodings and the transaction target.
class EtcdBase : public HttpWorkload {
 protected:
  explicit EtcdBase(const WorkloadParams& p) : p_(p) {
    txn_ = p.prefix + "/v3/kv/txn";
    range_ = p.prefix + "/v3/kv/range";
    base64(counter64_, "c/" + p.name);
  }
  // base64 of PREFIX-RUNID-CONN-SEQ
  void key64(std::string& out, std::string_view prefix, unsigned conn, std::uint64_t seq) const {
    std::string k;
    append_key(k, prefix, p_, conn, seq);
    base64(out, k);
  }
  WorkloadParams p_;
  std::string txn_, range_, counter64_;
};

// Reads the counter's value and mod_revision from a range answer (`kvs` absent: no such key).
inline const char* etcd_counter(std::string_view body, OpState& st) {
  const auto kvs = body.find("\"kvs\"");
  if (kvs == std::string_view::npos) return "counter key missing (the driver creates it)";
  body.remove_prefix(kvs);
  const auto rev = json_uint(body, "\"mod_revision\"");
  const auto val = json_string(body, "\"value\"");
  if (!rev || !val) return "counter range answer without mod_revision/value";
  const auto v = base64_uint(*val);
  if (!v) return "counter value is not a number";
  st.rev = *rev;
  st.value = *v;
  return nullptr;
}

// W1 on etcd, compare-and-swap: (0) one txn reads the key's number if the key exists, else the
// counter (value, mod_revision); (1) txn [counter unchanged, key absent] → put counter=v+1,
// put key=v+1. A failed compare (another client won) goes back to (0).
class EtcdCounterNext final : public EtcdBase {
 public:
  explicit EtcdCounterNext(const WorkloadParams& p) : EtcdBase(p) {}
  void make(unsigned conn, std::uint64_t seq, const OpState& st, HttpRequest& out) const override {
    out.method = "POST";
    out.target = txn_;
    std::string k;
    key64(k, "k-", conn, seq);
    if (st.step == 0) {
      out.body.assign("{\"compare\":[{\"key\":\"")
          .append(k)
          .append(
              "\",\"target\":\"VERSION\",\"result\":\"GREATER\",\"version\":\"0\"}],"
              "\"success\":[{\"request_range\":{\"key\":\"");
      out.body.append(k).append("\"}}],\"failure\":[{\"request_range\":{\"key\":\"");
      out.body.append(counter64_).append("\"}}]}");
    } else {
      out.body.assign("{\"compare\":[{\"key\":\"")
          .append(counter64_)
          .append("\",\"target\":\"MOD\",\"result\":\"EQUAL\",\"mod_revision\":\"");
      append_uint(out.body, st.rev);
      out.body.append("\"},{\"key\":\"")
          .append(k)
          .append(
              "\",\"target\":\"VERSION\",\"result\":\"EQUAL\",\"version\":\"0\"}],\"success\":["
              "{\"request_put\":{\"key\":\"");
      out.body.append(counter64_).append("\",\"value\":\"");
      base64_uint_to(out.body, st.value + 1);
      out.body.append("\"}},{\"request_put\":{\"key\":\"").append(k).append("\",\"value\":\"");
      base64_uint_to(out.body, st.value + 1);
      out.body.append("\"}}]}");
    }
  }
  Verdict check(std::string_view body, OpState& st) const override {
    if (st.step == 0) {
      if (json_true(body, "\"succeeded\"")) return fail("fresh key already has a number");
      if (const char* e = etcd_counter(body, st)) return fail(e);
      return next(st, 1);
    }
    if (!json_true(body, "\"succeeded\"")) {
      ++st.retries;
      return next(st, 0);
    }
    if (p_.verify && st.value + 1 <= st.last)
      return fail("number did not increase on this connection");
    st.last = st.value + 1;
    return done();
  }
};

// Bare increment on etcd: range the counter, then txn [mod_revision unchanged] → put v+1; retry.
class EtcdIncr final : public EtcdBase {
 public:
  explicit EtcdIncr(const WorkloadParams& p) : EtcdBase(p) {}
  void make(unsigned, std::uint64_t, const OpState& st, HttpRequest& out) const override {
    out.method = "POST";
    if (st.step == 0) {
      out.target = range_;
      out.body.assign("{\"key\":\"").append(counter64_).append("\"}");
    } else {
      out.target = txn_;
      out.body.assign("{\"compare\":[{\"key\":\"")
          .append(counter64_)
          .append("\",\"target\":\"MOD\",\"result\":\"EQUAL\",\"mod_revision\":\"");
      append_uint(out.body, st.rev);
      out.body.append("\"}],\"success\":[{\"request_put\":{\"key\":\"").append(counter64_);
      out.body.append("\",\"value\":\"");
      base64_uint_to(out.body, st.value + 1);
      out.body.append("\"}}]}");
    }
  }
  Verdict check(std::string_view body, OpState& st) const override {
    if (st.step == 0) {
      if (const char* e = etcd_counter(body, st)) return fail(e);
      return next(st, 1);
    }
    if (!json_true(body, "\"succeeded\"")) {
      ++st.retries;
      return next(st, 0);
    }
    return done();
  }
};

// W2 on etcd: txn [create_revision(key) == 0] → put key=processing (the answer's revision is
// the token); then txn [mod_revision(key) == token] → put key=completed+result.
class EtcdOnce final : public EtcdBase {
 public:
  explicit EtcdOnce(const WorkloadParams& p) : EtcdBase(p) {}
  void make(unsigned conn, std::uint64_t seq, const OpState& st, HttpRequest& out) const override {
    out.method = "POST";
    out.target = txn_;
    std::string k;
    key64(k, "o-", conn, seq);
    out.body.assign("{\"compare\":[{\"key\":\"").append(k);
    if (st.step == 0) {
      out.body.append("\",\"target\":\"CREATE\",\"result\":\"EQUAL\",\"create_revision\":\"0\"}],");
      out.body.append("\"success\":[{\"request_put\":{\"key\":\"")
          .append(k)
          .append("\",\"value\":\"");
      base64(out.body, "processing:bench-" + std::to_string(conn));
    } else {
      out.body.append("\",\"target\":\"MOD\",\"result\":\"EQUAL\",\"mod_revision\":\"");
      append_uint(out.body, st.token);
      out.body.append("\"}],\"success\":[{\"request_put\":{\"key\":\"")
          .append(k)
          .append("\",\"value\":\"");
      base64(out.body, "completed:{\"ok\":true}");
    }
    out.body.append("\"}}]}");
  }
  Verdict check(std::string_view body, OpState& st) const override {
    if (!json_true(body, "\"succeeded\""))
      return fail(st.step == 0 ? "begin on a fresh key failed" : "complete lost its token");
    if (st.step == 0) {
      const auto rev = json_uint(body, "\"revision\"");
      if (!rev) return fail("txn answer without header revision");
      st.token = *rev;
      return next(st, 1);
    }
    return done();
  }
};

// W3 on etcd: txn [create_revision(lock) == 0] → put lock=owner (token = revision); release:
// txn [mod_revision(lock) == token] → delete. No etcd lease is attached (that would be one more
// Raft round trip per acquire): like Redis, a crashed holder is not expired by this workload.
class EtcdLock final : public EtcdBase {
 public:
  EtcdLock(const WorkloadParams& p, bool contended) : EtcdBase(p), contended_(contended) {
    base64(lock64_, "l/" + p.name);
  }
  void make(unsigned conn, std::uint64_t seq, const OpState& st, HttpRequest& out) const override {
    out.method = "POST";
    out.target = txn_;
    std::string k;
    if (contended_)
      k = lock64_;
    else
      key64(k, "l-", conn, seq);
    out.body.assign("{\"compare\":[{\"key\":\"").append(k);
    if (st.step == 0) {
      out.body.append("\",\"target\":\"CREATE\",\"result\":\"EQUAL\",\"create_revision\":\"0\"}],");
      out.body.append("\"success\":[{\"request_put\":{\"key\":\"")
          .append(k)
          .append("\",\"value\":\"");
      base64(out.body, "bench-" + std::to_string(conn));
      out.body.append("\"}}]}");
    } else {
      out.body.append("\",\"target\":\"MOD\",\"result\":\"EQUAL\",\"mod_revision\":\"");
      append_uint(out.body, st.token);
      out.body.append("\"}],\"success\":[{\"request_delete_range\":{\"key\":\"")
          .append(k)
          .append("\"}}]}");
    }
  }
  Verdict check(std::string_view body, OpState& st) const override {
    const bool ok = json_true(body, "\"succeeded\"");
    if (st.step == 0) {
      if (!ok) return contended_ ? done() : fail("acquire of a fresh lock name failed");
      const auto rev = json_uint(body, "\"revision\"");
      if (!rev) return fail("txn answer without header revision");
      st.token = *rev;
      st.granted = true;
      return next(st, 1);
    }
    if (!ok) return fail("release lost its token");
    return done();
  }

 private:
  bool contended_;
  std::string lock64_;
};

// =============================================================================================
// Redis (RESP2).

struct RespReply {
  char type = 0;  // '+', '-', ':', '$' (nil: is_nil), '*'
  bool is_nil = false;
  std::int64_t integer = 0;
  std::string_view text;  // simple string, error or bulk string
};

// Appends a command as a RESP array of bulk strings.
inline void resp_command(std::string& out, std::initializer_list<std::string_view> args) {
  out.push_back('*');
  append_uint(out, args.size());
  out.append("\r\n");
  for (auto a : args) {
    out.push_back('$');
    append_uint(out, a.size());
    out.append("\r\n").append(a).append("\r\n");
  }
}

class RespWorkload {
 public:
  virtual ~RespWorkload() = default;
  virtual void make(unsigned conn, std::uint64_t seq, const OpState& st,
                    std::string& out) const = 0;
  // Error replies are counted by the loop; check sees the others.
  virtual Verdict check(const RespReply& r, OpState& st) const = 0;
};

// If the key has a number return it, else INCR the counter and store key→number: one Lua script,
// atomic in Redis (and fsync'd with appendfsync always before the reply is sent).
inline constexpr std::string_view kRedisNextLua =
    "local v = redis.call('GET', KEYS[1]) if v then return tonumber(v) end "
    "local n = redis.call('INCR', KEYS[2]) redis.call('SET', KEYS[1], n) return n";
inline constexpr std::string_view kRedisUnlockLua =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) "
    "else return 0 end";

class RedisCounterNext final : public RespWorkload {
 public:
  RedisCounterNext(const WorkloadParams& p, bool bare)
      : p_(p), bare_(bare), counter_("c:" + p.name) {}
  void make(unsigned conn, std::uint64_t seq, const OpState&, std::string& out) const override {
    out.clear();
    if (bare_) return resp_command(out, {"INCR", counter_});
    std::string k;
    append_key(k, "k:", p_, conn, seq);
    resp_command(out, {"EVAL", kRedisNextLua, "2", k, counter_});
  }
  Verdict check(const RespReply& r, OpState& st) const override {
    if (r.type != ':') return fail("expected an integer reply");
    if (p_.verify && static_cast<std::uint64_t>(r.integer) <= st.last)
      return fail("number did not increase on this connection");
    st.last = static_cast<std::uint64_t>(r.integer);
    return done();
  }

 private:
  WorkloadParams p_;
  bool bare_;
  std::string counter_;
};

// W2 on Redis: SET key processing NX PX 60000, then SET key completed+result.
class RedisOnce final : public RespWorkload {
 public:
  explicit RedisOnce(const WorkloadParams& p) : p_(p) {}
  void make(unsigned conn, std::uint64_t seq, const OpState& st, std::string& out) const override {
    out.clear();
    std::string k;
    append_key(k, "o:", p_, conn, seq);
    if (st.step == 0)
      resp_command(out,
                   {"SET", k, "processing:bench-" + std::to_string(conn), "NX", "PX", "60000"});
    else
      resp_command(out, {"SET", k, "completed:{\"ok\":true}"});
  }
  Verdict check(const RespReply& r, OpState& st) const override {
    if (r.type != '+') return fail(st.step == 0 ? "SET NX on a fresh key failed" : "SET failed");
    return st.step == 0 ? next(st, 1) : done();
  }

 private:
  WorkloadParams p_;
};

// W3 on Redis: SET lock token NX PX 30000; release by a compare-and-delete Lua script.
class RedisLock final : public RespWorkload {
 public:
  RedisLock(const WorkloadParams& p, bool contended) : p_(p), contended_(contended) {}
  void make(unsigned conn, std::uint64_t seq, const OpState& st, std::string& out) const override {
    out.clear();
    std::string k, token;
    if (contended_)
      k = "l:" + p_.name;
    else
      append_key(k, "l:", p_, conn, seq);
    append_key(token, "t-", p_, conn, seq);
    if (st.step == 0)
      resp_command(out, {"SET", k, token, "NX", "PX", "30000"});
    else
      resp_command(out, {"EVAL", kRedisUnlockLua, "1", k, token});
  }
  Verdict check(const RespReply& r, OpState& st) const override {
    if (st.step == 0) {
      if (r.type == '+') {
        st.granted = true;
        return next(st, 1);
      }
      if (r.is_nil && contended_) return done();
      return fail("acquire of a fresh lock name failed");
    }
    if (r.type != ':' || r.integer != 1) return fail("release did not delete the lock");
    return done();
  }

 private:
  WorkloadParams p_;
  bool contended_;
};

// =============================================================================================
// PostgreSQL (libpq, prepared statements, one statement = one transaction with autocommit).
// The schema (bench_* tables, the bench_next() function) is created by bench/run.

struct PgStatement {
  const char* name;
  const char* sql;
  int nparams;
};
struct PgRequest {
  const char* statement = nullptr;
  int nparams = 0;
  std::string params[3];
};

class PgWorkload {
 public:
  virtual ~PgWorkload() = default;
  virtual std::vector<PgStatement> statements() const = 0;
  virtual void make(unsigned conn, std::uint64_t seq, const OpState& st, PgRequest& out) const = 0;
  // Called for PGRES_TUPLES_OK / PGRES_COMMAND_OK results; others are errors counted by the loop.
  virtual Verdict check(const PGresult* r, OpState& st) const = 0;
};

inline std::optional<std::uint64_t> pg_uint(const PGresult* r) {
  if (PQntuples(r) != 1 || PQgetisnull(r, 0, 0)) return std::nullopt;
  const char* s = PQgetvalue(r, 0, 0);
  std::uint64_t n = 0;
  const auto e = std::from_chars(s, s + std::char_traits<char>::length(s), n);
  if (e.ec != std::errc{}) return std::nullopt;
  return n;
}
inline bool pg_one_row_affected(const PGresult* r) {
  return std::string_view(PQcmdTuples(const_cast<PGresult*>(r))) == "1";
}

// W1: SELECT bench_next(key) — a plpgsql function: return the key's number if issued, else
// UPDATE the counter row … RETURNING and INSERT key→number, in the statement's transaction.
// Bare: UPDATE bench_counters SET last = last + 1 … RETURNING last.
class PgCounterNext final : public PgWorkload {
 public:
  PgCounterNext(const WorkloadParams& p, bool bare) : p_(p), bare_(bare) {}
  std::vector<PgStatement> statements() const override {
    return {
        {"next", "SELECT bench_next($1, $2)", 2},
        {"incr", "UPDATE bench_counters SET last = last + 1 WHERE name = $1 RETURNING last", 1}};
  }
  void make(unsigned conn, std::uint64_t seq, const OpState&, PgRequest& out) const override {
    if (bare_) {
      out.statement = "incr";
      out.nparams = 1;
      out.params[0] = p_.name;
      return;
    }
    out.statement = "next";
    out.nparams = 2;
    out.params[0] = p_.name;
    out.params[1].clear();
    append_key(out.params[1], "k-", p_, conn, seq);
  }
  Verdict check(const PGresult* r, OpState& st) const override {
    const auto v = pg_uint(r);
    if (!v) return fail("expected one number");
    if (p_.verify && *v <= st.last) return fail("number did not increase on this connection");
    st.last = *v;
    return done();
  }

 private:
  WorkloadParams p_;
  bool bare_;
};

// W2: INSERT … ON CONFLICT DO NOTHING RETURNING token, then UPDATE … WHERE key AND token.
class PgOnce final : public PgWorkload {
 public:
  explicit PgOnce(const WorkloadParams& p) : p_(p) {}
  std::vector<PgStatement> statements() const override {
    return {{"begin",
             "INSERT INTO bench_once (key, state, owner, token, lease_expires_at) "
             "VALUES ($1, 'processing', $2, nextval('bench_tokens'), now() + interval '60 s') "
             "ON CONFLICT (key) DO NOTHING RETURNING token",
             2},
            {"complete",
             "UPDATE bench_once SET state = 'completed', result = $3::jsonb, completed_at = now() "
             "WHERE key = $1 AND token = $2",
             3}};
  }
  void make(unsigned conn, std::uint64_t seq, const OpState& st, PgRequest& out) const override {
    out.params[0].clear();
    append_key(out.params[0], "o-", p_, conn, seq);
    if (st.step == 0) {
      out.statement = "begin";
      out.nparams = 2;
      out.params[1] = "bench-" + std::to_string(conn);
    } else {
      out.statement = "complete";
      out.nparams = 3;
      out.params[1] = std::to_string(st.token);
      out.params[2] = "{\"ok\":true}";
    }
  }
  Verdict check(const PGresult* r, OpState& st) const override {
    if (st.step == 0) {
      const auto t = pg_uint(r);
      if (!t) return fail("begin on a fresh key returned no token");
      st.token = *t;
      return next(st, 1);
    }
    if (!pg_one_row_affected(r)) return fail("complete updated no row");
    return done();
  }

 private:
  WorkloadParams p_;
};

// W3: INSERT the lock row (or take over an expired one) RETURNING token; DELETE … WHERE token.
class PgLock final : public PgWorkload {
 public:
  PgLock(const WorkloadParams& p, bool contended) : p_(p), contended_(contended) {}
  std::vector<PgStatement> statements() const override {
    return {
        {"acquire",
         "INSERT INTO bench_locks (name, owner, token, expires_at) "
         "VALUES ($1, $2, nextval('bench_tokens'), now() + interval '30 s') "
         "ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, token = EXCLUDED.token, "
         "expires_at = EXCLUDED.expires_at WHERE bench_locks.expires_at < now() RETURNING token",
         2},
        {"release", "DELETE FROM bench_locks WHERE name = $1 AND token = $2", 2}};
  }
  void make(unsigned conn, std::uint64_t seq, const OpState& st, PgRequest& out) const override {
    out.params[0].clear();
    if (contended_)
      out.params[0] = p_.name;
    else
      append_key(out.params[0], "l-", p_, conn, seq);
    out.nparams = 2;
    if (st.step == 0) {
      out.statement = "acquire";
      out.params[1] = "bench-" + std::to_string(conn);
    } else {
      out.statement = "release";
      out.params[1] = std::to_string(st.token);
    }
  }
  Verdict check(const PGresult* r, OpState& st) const override {
    if (st.step == 0) {
      const auto t = pg_uint(r);
      if (!t) return contended_ ? done() : fail("acquire of a fresh lock name failed");
      st.token = *t;
      st.granted = true;
      return next(st, 1);
    }
    if (!pg_one_row_affected(r)) return fail("release deleted no row");
    return done();
  }

 private:
  WorkloadParams p_;
  bool contended_;
};

}  // namespace ichido::bench

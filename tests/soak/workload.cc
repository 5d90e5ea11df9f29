#include "workload.h"

#include <algorithm>
#include <cstdio>

namespace ichido::soak {
namespace json = boost::json;

namespace {

constexpr const char* kCounters[] = {"keyed", "daily", "plain", "bounded"};

std::string hex_id(std::mt19937_64& rng) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

int uniform(std::mt19937_64& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

bool chance(std::mt19937_64& rng, double p) {
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng) < p;
}

}  // namespace

bool is_mutation(const std::string& op) {
  return op == "counter.create" || op == "counter.next" || op == "counter.void" ||
         op == "once.begin" || op == "once.complete" || op == "once.fail" || op == "once.renew" ||
         op == "lock.acquire" || op == "lock.release" || op == "lock.renew";
}

// ---------------------------------------------------------------------------------- Answer

std::string Answer::code() const {
  if (!body.is_object()) return "";
  const auto* e = body.as_object().if_contains("error");
  if (!e || !e->is_object()) return "";
  const auto* c = e->as_object().if_contains("code");
  return c && c->is_string() ? std::string(c->as_string()) : "";
}

bool Answer::outcome_unknown() const {
  if (status != 503 || !body.is_object()) return false;
  const auto* e = body.as_object().if_contains("error");
  const auto* d = e && e->is_object() ? e->as_object().if_contains("details") : nullptr;
  const auto* o = d && d->is_object() ? d->as_object().if_contains("outcome") : nullptr;
  return o && o->is_string() && o->as_string() == "unknown";
}

std::int64_t Answer::int_of(const char* field) const {
  if (!body.is_object()) return 0;
  const auto* v = body.as_object().if_contains(field);
  return v && v->is_int64() ? v->as_int64() : (v && v->is_uint64() ? v->as_uint64() : 0);
}

std::string Answer::str_of(const char* field) const {
  if (!body.is_object()) return "";
  const auto* v = body.as_object().if_contains(field);
  return v && v->is_string() ? std::string(v->as_string()) : "";
}

// ---------------------------------------------------------------------------------- Caller

Caller::Caller(int client, History& history, Nodes nodes, std::string token, Workload* stats,
               int node)
    : client_(client),
      history_(history),
      nodes_(std::move(nodes)),
      fixed_(node >= 0),
      node_(static_cast<std::size_t>(node >= 0 ? node : client) % nodes_.size()),
      token_(std::move(token)),
      stats_(stats),
      rng_(static_cast<std::uint64_t>(client) * 0x9E3779B97F4A7C15ull +
           (stats ? stats->options().seed : 1)) {}

void Caller::pause_ms(int lo, int hi) {
  std::this_thread::sleep_for(std::chrono::milliseconds(uniform(rng_, lo, hi)));
}

Answer Caller::once(const Call& call, std::int64_t lid) {
  const std::uint16_t port = nodes_[node_]->port();
  if (!http_ || port != port_) {
    cli::BaseUrl url;
    url.host = "127.0.0.1";
    url.port = port;
    cli::ClientOptions o;
    o.token = token_;
    o.connect_timeout = std::chrono::milliseconds(2000);
    o.user_agent = "ichido-soak";
    http_ = std::make_unique<cli::HttpClient>(url, o);
    port_ = port;
  }
  cli::Request req{call.method, call.target, call.body, call.read_timeout};
  const std::int64_t t0 = history_.now_us();
  cli::HttpResult r = http_->send(req);
  const std::int64_t t1 = history_.now_us();
  Answer a;
  std::string raw;
  if (r.ok()) {
    a.status = r.response->status;
    raw = std::move(r.response->body);
    boost::system::error_code ec;
    json::value v = json::parse(raw, ec);
    if (!ec) a.body = std::move(v);
  } else {
    a.error = r.error;
    http_->close();
    if (!fixed_ && nodes_.size() > 1) {  // the next attempt goes to the next node
      node_ = (node_ + 1) % nodes_.size();
      http_.reset();
    }
  }
  if (call.record) {
    json::object line;
    line["i"] = history_.next_id();
    line["c"] = client_;
    line["lid"] = lid;
    line["op"] = call.op;
    line["a"] = call.args;
    line["t0"] = t0;
    line["t1"] = t1;
    line["st"] = a.status;
    if (a.answered()) {
      line["b"] = raw;
    } else {
      line["err"] = a.error;
    }
    history_.append(line);
  }
  if (stats_) stats_->saw_answer(call.op, a);
  return a;
}

Answer Caller::with_retries(const Call& call, Retry retry, int max_attempts) {
  const std::int64_t lid = history_.next_id();
  Answer a;
  for (int n = 0; n < max_attempts; ++n) {
    // Back-off between attempts: what a client does, not a wait for anything in particular.
    if (n > 0) pause_ms(std::min(500, 20 * n), std::min(600, 40 * n));
    a = once(call, lid);
    if (a.answered() && a.status != 503) return a;
    if (retry == Retry::never) return a;
    if ((!a.answered() || a.outcome_unknown()) && retry == Retry::on_503) return a;
  }
  return a;
}

// ---------------------------------------------------------------------------------- Workload

Workload::Workload(History& history, Nodes nodes, std::string token, WorkloadOptions options)
    : history_(history),
      nodes_(std::move(nodes)),
      token_(std::move(token)),
      opt_(std::move(options)) {}

Workload::~Workload() { stop(); }

std::string Workload::once_key(std::int64_t index) const {
  // Keys as users have them: e-mail Message-IDs and Japanese text travel in JSON bodies.
  const std::string n = std::to_string(index);
  switch (index % 4) {
    case 0:
      return "<item-" + n + ".soak@mail.example.co.jp>";
    case 1:
      return "受付/" + n;
    default:
      return "item-" + n;
  }
}

void Workload::saw_token(std::int64_t t) {
  std::int64_t cur = max_token_.load();
  while (t > cur && !max_token_.compare_exchange_weak(cur, t)) {
  }
}

void Workload::saw_answer(const std::string& op, const Answer& a) {
  if (!is_mutation(op)) return;
  if (a.ok()) writes_acked_.fetch_add(1);
  if (a.status == 503 && a.code() == "store_unavailable") {
    last_write_503_us_.store(history_.now_us());
  }
  if (a.ok() && (op == "once.begin" || op == "lock.acquire")) {
    if (const std::int64_t t = a.int_of("token"); t > 0) saw_token(t);
  }
}

void Workload::saw_period(const std::string& counter, const std::string& period) {
  MutexLock lk(mu_);
  periods_[counter].insert(period);
}

void Workload::add_final_once_key(const std::string& key) {
  MutexLock lk(mu_);
  extra_once_keys_.insert(key);
}

void Workload::add_final_lock(const std::string& name) {
  MutexLock lk(mu_);
  extra_locks_.insert(name);
}

bool Workload::setup(std::string* error) {
  Caller c(0, history_, nodes_, token_, this, 0);
  for (const char* name : kCounters) {
    json::object cfg{{"start", 0}, {"format", "N-{seq:6}"}, {"require_key", true}};
    const std::string n = name;
    if (n == "daily") {
      cfg["period"] = "day";
      cfg["timezone"] = "Asia/Tokyo";
      cfg["format"] = "D{yyyy}{mm}{dd}-{seq:4}";
    } else if (n == "plain") {
      cfg["require_key"] = false;
      cfg["format"] = "P-{seq}";
    } else if (n == "bounded") {
      cfg["max"] = opt_.bounded_max;
      cfg["format"] = "B-{seq:4}";
    }
    Caller::Call call{"counter.create",
                      {{"counter", n}, {"config", cfg}},
                      "PUT",
                      base() + "/counters/" + n,
                      json::serialize(cfg)};
    Answer a = c.with_retries(call, Retry::on_503_or_lost, 20);
    if (a.status != 200 && a.status != 201) {
      *error = "cannot create counter " + n + ": status " + std::to_string(a.status) + " " +
               a.error + " " + json::serialize(a.body);
      return false;
    }
    saw_period(n, a.str_of("current_period"));
  }
  return true;
}

void Workload::start() {
  stopping_.store(false);
  for (int i = 1; i <= opt_.clients; ++i) threads_.emplace_back([this, i] { run_client(i); });
  for (int i = 1; i <= opt_.burst_clients; ++i) {
    threads_.emplace_back([this, i] { run_burst_client(100 + i); });
  }
}

void Workload::stop() {
  stopping_.store(true);
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void Workload::run_client(int client) {
  Caller c(client, history_, nodes_, token_, this);
  c.rng().seed(opt_.seed * 1000003ull + static_cast<std::uint64_t>(client));
  ClientState s;
  while (!stopping_.load()) {
    const int r = uniform(c.rng(), 0, 99);
    if (r < 22) {
      op_next_keyed(c, s, "keyed");
    } else if (r < 28) {
      op_next_keyed(c, s, "daily");
    } else if (r < 34) {
      op_next_keyed(c, s, "bounded");
    } else if (r < 42) {
      op_next_unkeyed(c, s);
    } else if (r < 45) {
      op_void(c, s);
    } else if (r < 50) {
      op_counter_read(c, s);
    } else if (r < 75) {
      op_once(c);
    } else if (r < 92) {
      op_lock(c);
    } else {
      op_reads(c);
    }
    c.pause_ms(0, opt_.think_ms_max);
  }
}

void Workload::run_burst_client(int client) {
  Caller c(client, history_, nodes_, token_, this);
  c.rng().seed(opt_.seed * 1000003ull + static_cast<std::uint64_t>(client));
  ClientState s;
  while (!stopping_.load()) {
    const int r = uniform(c.rng(), 0, 9);
    if (r < 5) {
      op_next_keyed(c, s, "keyed");
    } else if (r < 7) {
      op_next_keyed(c, s, "daily");
    } else {
      op_next_unkeyed(c, s);
    }
    if (s.issued.size() > 1000) s.issued.clear();  // only the readers use it
    c.pause_ms(0, 2);
  }
}

void Workload::op_next_keyed(Caller& c, ClientState& s, const std::string& counter) {
  const std::string n = std::to_string(c.client()) + "." + std::to_string(++s.seq);
  std::string key = "c" + n;
  if (s.seq % 5 == 0) key = "<c" + n + "@mail.example.co.jp>";
  if (s.seq % 7 == 0) key = "フォーム回答/" + n;
  json::object body{{"key", key}};
  Caller::Call call{"counter.next",
                    {{"counter", counter}, {"key", key}},
                    "POST",
                    base() + "/counters/" + counter + "/next",
                    json::serialize(body)};
  Answer a = c.with_retries(call, Retry::on_503_or_lost, opt_.max_attempts);
  if (a.status == 200) {
    saw_period(counter, a.str_of("period"));
    s.issued.push_back({counter, key, a.str_of("period"), a.int_of("value"), false});
  }
}

void Workload::op_next_unkeyed(Caller& c, ClientState& s) {
  // No key: a lost answer cannot be retried safely (it may have used a number), nor a 503 whose
  // outcome is unknown; any other 503 can.
  Caller::Call call{"counter.next",
                    {{"counter", "plain"}, {"key", nullptr}},
                    "POST",
                    base() + "/counters/plain/next",
                    "{}"};
  Answer a = c.with_retries(call, Retry::on_503, opt_.max_attempts);
  if (a.status == 200) {
    saw_period("plain", a.str_of("period"));
    s.issued.push_back({"plain", "", a.str_of("period"), a.int_of("value"), false});
  }
}

void Workload::op_void(Caller& c, ClientState& s) {
  std::vector<std::size_t> candidates;
  for (std::size_t i = 0; i < s.issued.size(); ++i) {
    if (!s.issued[i].voided) candidates.push_back(i);
  }
  if (candidates.empty()) return;
  Issued& it = s.issued[candidates[uniform(c.rng(), 0, int(candidates.size()) - 1)]];
  json::object body{{"value", it.value},
                    {"period", it.period},
                    {"reason", "soak: client " + std::to_string(c.client()) + " voids it"}};
  json::object args = body;
  args["counter"] = it.counter;
  Caller::Call call{"counter.void", args, "POST", base() + "/counters/" + it.counter + "/void",
                    json::serialize(body)};
  Answer a = c.with_retries(call, Retry::on_503_or_lost, opt_.max_attempts);
  if (a.status == 200) it.voided = true;
}

void Workload::op_counter_read(Caller& c, ClientState& s) {
  if (!s.issued.empty() && chance(c.rng(), 0.5)) {
    const Issued& it = s.issued[uniform(c.rng(), 0, int(s.issued.size()) - 1)];
    if (!it.key.empty()) {
      Caller::Call call{
          "counter.issued_key",
          {{"counter", it.counter}, {"key", it.key}},
          "GET",
          base() + "/counters/" + it.counter + "/issued?key=" + cli::percent_encode(it.key),
          ""};
      (void)c.with_retries(call, Retry::never, 1);
      return;
    }
  }
  const std::string counter = kCounters[uniform(c.rng(), 0, 3)];
  Caller::Call call{
      "counter.get", {{"counter", counter}}, "GET", base() + "/counters/" + counter, ""};
  (void)c.with_retries(call, Retry::never, 1);
}

std::int64_t Workload::pick_once_index(Caller& c) {
  if (chance(c.rng(), 0.25)) return fresh_once_.fetch_add(1);
  const std::int64_t f = fresh_once_.load();
  const std::int64_t span = std::min<std::int64_t>(opt_.once_window, f);
  return f - 1 - std::uniform_int_distribution<std::int64_t>(0, span - 1)(c.rng());
}

void Workload::op_once(Caller& c) {
  const std::string key = once_key(pick_once_index(c));
  const std::string owner = "c" + std::to_string(c.client());
  const int lease = uniform(c.rng(), 1000, 2500);
  const int wait = chance(c.rng(), 0.25) ? uniform(c.rng(), 200, 1500) : 0;
  json::object body{{"key", key},
                    {"owner", owner},
                    {"lease_ms", lease},
                    {"request_id", hex_id(c.rng())},
                    {"fingerprint", "fp:" + key},
                    {"wait_ms", wait}};
  Caller::Call begin{"once.begin",
                     body,
                     "POST",
                     base() + "/once/begin",
                     json::serialize(body),
                     std::chrono::milliseconds(wait + 5000)};
  Answer a = c.with_retries(begin, Retry::on_503_or_lost, opt_.max_attempts);
  if (a.status != 200 || a.str_of("outcome") != "acquired") return;
  const std::int64_t token = a.int_of("token");
  c.pause_ms(0, 300);  // the work
  if (chance(c.rng(), 0.2)) {
    json::object rb{{"key", key}, {"token", token}, {"lease_ms", lease}};
    Caller::Call renew{"once.renew", rb, "POST", base() + "/once/renew", json::serialize(rb)};
    Answer r = c.with_retries(renew, Retry::on_503_or_lost, opt_.max_attempts);
    if (r.status != 200) return;  // stale: someone took over, stop working on it
    c.pause_ms(0, 200);
  }
  const int what = uniform(c.rng(), 0, 99);
  if (what < 70) {
    json::object result{{"by", owner}, {"token", token}, {"n", uniform(c.rng(), 0, 1 << 30)}};
    json::object cb{{"key", key}, {"token", token}, {"result", result}};
    Caller::Call complete{"once.complete", cb, "POST", base() + "/once/complete",
                          json::serialize(cb)};
    (void)c.with_retries(complete, Retry::on_503_or_lost, opt_.max_attempts);
  } else if (what < 85) {
    json::object fb{{"key", key},
                    {"token", token},
                    {"error", "soak: simulated failure"},
                    {"retry", chance(c.rng(), 0.85)}};
    Caller::Call fail{"once.fail", fb, "POST", base() + "/once/fail", json::serialize(fb)};
    (void)c.with_retries(fail, Retry::on_503_or_lost, opt_.max_attempts);
  }
  // else: the worker "crashes" here; its lease lapses and the next begin takes the key over.
}

void Workload::op_lock(Caller& c) {
  const std::string name = "lock-" + std::to_string(uniform(c.rng(), 0, opt_.locks - 1));
  const std::string owner = "c" + std::to_string(c.client());
  const int lease = uniform(c.rng(), 1000, 2000);
  const int wait = chance(c.rng(), 0.5) ? uniform(c.rng(), 100, 1500) : 0;
  json::object body{
      {"owner", owner}, {"lease_ms", lease}, {"wait_ms", wait}, {"request_id", hex_id(c.rng())}};
  json::object args = body;
  args["lock"] = name;
  const std::string path = base() + "/locks/" + name;
  Caller::Call acquire{"lock.acquire",
                       args,
                       "POST",
                       path + "/acquire",
                       json::serialize(body),
                       std::chrono::milliseconds(wait + 5000)};
  Answer a = c.with_retries(acquire, Retry::on_503_or_lost, opt_.max_attempts);
  if (a.status != 200 || !a.body.is_object()) return;
  const auto* acquired = a.body.as_object().if_contains("acquired");
  if (!acquired || !acquired->is_bool() || !acquired->as_bool()) return;
  const std::int64_t token = a.int_of("token");
  c.pause_ms(0, 300);  // the guarded work
  if (chance(c.rng(), 0.2)) {
    json::object rb{{"token", token}, {"lease_ms", lease}};
    json::object rargs = rb;
    rargs["lock"] = name;
    Caller::Call renew{"lock.renew", rargs, "POST", path + "/renew", json::serialize(rb)};
    Answer r = c.with_retries(renew, Retry::on_503_or_lost, opt_.max_attempts);
    if (r.status != 200) return;
    c.pause_ms(0, 200);
  }
  if (chance(c.rng(), 0.85)) {
    json::object rb{{"token", token}};
    json::object rargs = rb;
    rargs["lock"] = name;
    Caller::Call release{"lock.release", rargs, "POST", path + "/release", json::serialize(rb)};
    (void)c.with_retries(release, Retry::on_503_or_lost, opt_.max_attempts);
  }
  // else: the holder "crashes"; the lease lapses.
}

void Workload::op_reads(Caller& c) {
  if (chance(c.rng(), 0.5)) {
    const std::int64_t f = fresh_once_.load();
    const std::string key =
        once_key(std::uniform_int_distribution<std::int64_t>(0, f - 1)(c.rng()));
    Caller::Call call{
        "once.get", {{"key", key}}, "GET", base() + "/once?key=" + cli::percent_encode(key), ""};
    (void)c.with_retries(call, Retry::never, 1);
  } else {
    const std::string name = "lock-" + std::to_string(uniform(c.rng(), 0, opt_.locks - 1));
    Caller::Call call{"lock.get", {{"lock", name}}, "GET", base() + "/locks/" + name, ""};
    (void)c.with_retries(call, Retry::never, 1);
  }
}

bool Workload::final_read(json::object* out, std::string* error) {
  Caller c(999, history_, nodes_, token_, nullptr, 0);
  auto get = [&](const std::string& target, json::value* body, int* status) {
    Caller::Call call{"final", {}, "GET", target, ""};
    call.record = false;
    Answer a = c.with_retries(call, Retry::on_503_or_lost, 20);
    *status = a.status;
    *body = a.body;
    if (!a.answered()) *error = "final read of " + target + ": no answer: " + a.error;
    return a.answered();
  };
  json::object counters;
  for (const char* name : kCounters) {
    json::value info;
    int st = 0;
    if (!get(base() + "/counters/" + name, &info, &st)) return false;
    if (st != 200) {
      *error = std::string("final read: GET counter ") + name + ": status " + std::to_string(st);
      return false;
    }
    std::set<std::string> periods;
    {
      MutexLock lk(mu_);
      periods = periods_[name];
    }
    periods.insert(std::string(info.as_object().at("current_period").as_string()));
    json::object trails;
    for (const std::string& p : periods) {
      json::array items;
      std::int64_t after = 0;
      for (;;) {
        json::value page;
        const std::string target = base() + "/counters/" + name +
                                   "/issued?after=" + std::to_string(after) +
                                   "&limit=1000&period=" + cli::percent_encode(p);
        if (!get(target, &page, &st)) return false;
        if (st != 200 || !page.is_object()) {
          *error = "final read: " + target + ": status " + std::to_string(st);
          return false;
        }
        for (const auto& item : page.as_object().at("items").as_array()) items.push_back(item);
        const auto* next = page.as_object().if_contains("next_after");
        if (!next || !next->is_int64()) break;
        after = next->as_int64();
      }
      trails[p] = std::move(items);
    }
    counters[name] = json::object{{"info", info}, {"trails", std::move(trails)}};
  }
  std::set<std::string> once_keys, locks;
  for (std::int64_t i = 0; i < fresh_once_.load(); ++i) once_keys.insert(once_key(i));
  for (int i = 0; i < opt_.locks; ++i) locks.insert("lock-" + std::to_string(i));
  {
    MutexLock lk(mu_);
    once_keys.insert(extra_once_keys_.begin(), extra_once_keys_.end());
    locks.insert(extra_locks_.begin(), extra_locks_.end());
  }
  json::object once;
  for (const std::string& key : once_keys) {
    json::value rec;
    int st = 0;
    if (!get(base() + "/once?key=" + cli::percent_encode(key), &rec, &st)) return false;
    if (st == 200) {
      once[key] = rec;
    } else if (st == 404) {
      once[key] = nullptr;
    } else {
      *error = "final read: once " + key + ": status " + std::to_string(st);
      return false;
    }
  }
  json::object lock_states;
  for (const std::string& name : locks) {
    json::value rec;
    int st = 0;
    if (!get(base() + "/locks/" + name, &rec, &st)) return false;
    if (st != 200) {
      *error = "final read: lock " + name + ": status " + std::to_string(st);
      return false;
    }
    lock_states[name] = rec;
  }
  (*out)["counters"] = std::move(counters);
  (*out)["once"] = std::move(once);
  (*out)["locks"] = std::move(lock_states);
  return true;
}

}  // namespace ichido::soak

// Small helpers over cli::HttpClient for tests: JSON in, status + JSON out.
#pragma once

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <string>

#include "cli/client.h"

namespace ichido::testing {

struct Reply {
  int status = 0;           // 0: no answer (transport error)
  boost::json::value json;  // parsed body (null when not JSON)
  std::string body;
  std::string transport_error;

  std::string error_code() const {
    if (!json.is_object()) return "";
    auto* e = json.as_object().if_contains("error");
    if (!e || !e->is_object()) return "";
    return std::string(e->as_object().at("code").as_string());
  }
  std::string error_field() const {
    if (!json.is_object()) return "";
    auto* e = json.as_object().if_contains("error");
    if (!e) return "";
    auto* f = e->as_object().at("details").as_object().if_contains("field");
    return f ? std::string(f->as_string()) : "";
  }
  const boost::json::value& at(const char* k) const { return json.as_object().at(k); }
  std::int64_t num(const char* k) const { return at(k).to_number<std::int64_t>(); }
  std::string str(const char* k) const { return std::string(at(k).as_string()); }
};

inline Reply to_reply(const cli::HttpResult& r) {
  Reply out;
  if (!r.ok()) {
    out.transport_error = r.error;
    return out;
  }
  out.status = r.response->status;
  out.body = r.response->body;
  boost::system::error_code ec;
  out.json = boost::json::parse(out.body, ec);
  if (ec) out.json = nullptr;
  return out;
}

class ApiClient {
 public:
  explicit ApiClient(const cli::BaseUrl& url, std::string ns = "t", std::string token = "")
      : client_(url, options(std::move(token))), ns_(std::move(ns)) {}

  Reply send(const std::string& method, const std::string& target, const std::string& body = "") {
    return to_reply(client_.send({method, target, body, {}}));
  }
  std::string counter_path(const std::string& name) const {
    return "/v1/ns/" + ns_ + "/counters/" + name;
  }
  Reply create(const std::string& name, const std::string& config_json) {
    return send("PUT", counter_path(name), config_json);
  }
  Reply next(const std::string& name, const std::string& key) {
    boost::json::object o{{"key", key}};
    return send("POST", counter_path(name) + "/next", boost::json::serialize(o));
  }
  Reply get(const std::string& name) { return send("GET", counter_path(name)); }
  Reply issued_by_key(const std::string& name, const std::string& key) {
    return send("GET", counter_path(name) + "/issued?key=" + cli::percent_encode(key));
  }
  cli::HttpClient& raw() { return client_; }

 private:
  static cli::ClientOptions options(std::string token) {
    cli::ClientOptions o;
    o.token = std::move(token);  // "" sends no Authorization header (--no-auth servers)
    o.read_timeout = std::chrono::milliseconds(20000);
    return o;
  }
  cli::HttpClient client_;
  std::string ns_;
};

}  // namespace ichido::testing

// docs/openapi.yaml and the route table agree both ways
// (docs/decisions/111-openapi-stays-right.md): every served route is documented with its method,
// every documented operation is served, and what the document says about who may call it matches
// the route (admin, any scope, no token). The document's YAML itself is validated by a real OpenAPI
// validator (tests/openapi, CTest openapi_lint) and the answers by the contract test
// (openapi_contract); this test reads only the path and method keys, which the file writes one per
// line in block style (openapi_lint would reject a file whose flow style hid them from this reader:
// the counts below would differ).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "http/api.h"
#include "store/memory/memory_store.h"

namespace ichido::http {
namespace {

std::string read_openapi() {
  std::ifstream in(std::string(ICHIDO_SOURCE_DIR) + "/docs/openapi.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One operation of the document, as far as this test cares.
struct Operation {
  bool admin = false;      // x-ichido-role: admin
  bool any_scope = false;  // x-ichido-any-scope: true
  bool no_token = false;   // security: []
};

// "METHOD /pattern" -> Operation, from the paths section (2-space path keys, 4-space methods,
// 6-space operation fields).
std::map<std::string, Operation> documented(const std::string& yaml) {
  std::map<std::string, Operation> out;
  std::istringstream in(yaml);
  std::string line, path, key;
  bool in_paths = false;
  static const std::regex path_re(R"(^  (/\S*):\s*$)");
  static const std::regex method_re(R"(^    (get|put|post|delete|patch|head|options):\s*$)");
  std::smatch m;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != ' ' && line[0] != '#') {
      in_paths = line.rfind("paths:", 0) == 0;
      continue;
    }
    if (!in_paths) continue;
    if (std::regex_match(line, m, path_re)) {
      path = m[1];
      key.clear();
    } else if (std::regex_match(line, m, method_re)) {
      std::string method = m[1];
      for (auto& c : method) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      key = method + " " + path;
      out[key];
    } else if (!key.empty() && line.rfind("      ", 0) == 0 && line[6] != ' ') {
      if (line == "      x-ichido-role: admin") out[key].admin = true;
      if (line == "      x-ichido-any-scope: true") out[key].any_scope = true;
      if (line == "      security: []") out[key].no_token = true;
    }
  }
  return out;
}

std::map<std::string, const Route*> served(const Api& api) {
  std::map<std::string, const Route*> out;
  for (const auto& r : api.router().routes()) {
    out[std::string(beast_http::to_string(r.method)) + " " + r.pattern] = &r;
  }
  return out;
}

class OpenApi : public ::testing::Test {
 protected:
  store::memory::MemoryStore store_;
  Metrics metrics_;
  Api api_{store_, metrics_};
  const std::string yaml_ = read_openapi();
};

TEST_F(OpenApi, EveryServedRouteIsDocumentedWithItsMethod) {
  ASSERT_FALSE(yaml_.empty()) << "docs/openapi.yaml not found";
  const auto docs = documented(yaml_);
  ASSERT_FALSE(api_.router().routes().empty());
  for (const auto& [key, route] : served(api_)) {
    EXPECT_TRUE(docs.count(key)) << key << " is served but not in docs/openapi.yaml";
  }
}

TEST_F(OpenApi, EveryDocumentedOperationIsServed) {
  const auto routes = served(api_);
  const auto docs = documented(yaml_);
  ASSERT_GE(docs.size(), 30u) << "the paths section was not read";
  for (const auto& [key, op] : docs) {
    EXPECT_TRUE(routes.count(key)) << key << " is in docs/openapi.yaml but not served";
  }
  EXPECT_EQ(docs.size(), routes.size());
}

TEST_F(OpenApi, WhoMayCallAnOperationIsDocumentedAsTheRouteHasIt) {
  const auto docs = documented(yaml_);
  for (const auto& [key, route] : served(api_)) {
    const auto it = docs.find(key);
    if (it == docs.end()) continue;  // reported above
    EXPECT_EQ(it->second.admin, route->admin())
        << key << ": x-ichido-role: admin must be there exactly when the route needs an admin";
    EXPECT_EQ(it->second.any_scope, route->any_scope)
        << key << ": x-ichido-any-scope: true must be there exactly for any-scope routes";
    // Api::route: a token is checked on /v1 and /metrics, nowhere else.
    const bool needs_token = route->pattern.rfind("/v1/", 0) == 0 || route->pattern == "/metrics";
    EXPECT_EQ(it->second.no_token, !needs_token)
        << key << ": security: [] must be there exactly when no token is checked";
  }
}

}  // namespace
}  // namespace ichido::http

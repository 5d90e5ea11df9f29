// docs/openapi.yaml must describe every route the server serves, with its method.
#include <gtest/gtest.h>

#include <fstream>
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

// The lowercase method keys listed directly under path `pattern` in the paths section.
std::vector<std::string> methods_of(const std::string& yaml, const std::string& pattern) {
  std::vector<std::string> out;
  const std::string key = "\n  " + pattern + ":\n";
  auto at = yaml.find(key);
  if (at == std::string::npos) return out;
  std::istringstream rest(yaml.substr(at + key.size()));
  std::string line;
  while (std::getline(rest, line)) {
    if (line.rfind("    ", 0) != 0) break;      // left the path item
    if (line.rfind("     ", 0) == 0) continue;  // deeper than a method key
    const auto colon = line.find(':');
    if (colon != std::string::npos) out.push_back(line.substr(4, colon - 4));
  }
  return out;
}

TEST(OpenApi, EveryServedRouteIsDocumentedWithItsMethod) {
  const std::string yaml = read_openapi();
  ASSERT_FALSE(yaml.empty()) << "docs/openapi.yaml not found";
  store::memory::MemoryStore store;
  Metrics metrics;
  Api api(store, metrics);
  ASSERT_FALSE(api.router().routes().empty());
  for (const auto& r : api.router().routes()) {
    std::string method(beast_http::to_string(r.method));
    for (auto& ch : method) ch = static_cast<char>(std::tolower(ch));
    const auto methods = methods_of(yaml, r.pattern);
    EXPECT_NE(std::find(methods.begin(), methods.end(), method), methods.end())
        << r.pattern << " " << method << " is served but not in docs/openapi.yaml";
  }
}

}  // namespace
}  // namespace ichido::http

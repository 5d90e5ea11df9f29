#include "http/contract_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

namespace ichido::http {

namespace {
constexpr std::size_t kMaxBody = 1 << 20;

bool keeps_body(std::string_view content_type) {
  return content_type.starts_with("application/json") || content_type.starts_with("text/plain");
}
}  // namespace

std::unique_ptr<ContractLog> ContractLog::from_environment() {
  const char* dir = std::getenv("ICHIDO_CONTRACT_LOG");
  if (dir == nullptr || *dir == '\0') return nullptr;
  const std::string path = std::string(dir) + "/exchanges-" + std::to_string(::getpid()) + ".jsonl";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::cerr << "ichido: ICHIDO_CONTRACT_LOG: cannot open " << path << ": " << std::strerror(errno)
              << "\n";
    return nullptr;
  }
  return std::unique_ptr<ContractLog>(new ContractLog(fd));
}

ContractLog::~ContractLog() { ::close(fd_); }

void ContractLog::record(std::string_view method, std::string_view target, std::string_view route,
                         const Answer& res) {
  boost::json::object line;
  line["method"] = method;
  line["target"] = target;
  line["route"] = route;
  line["status"] = res.result_int();
  boost::json::object headers;
  std::string content_type;
  res.for_each_field([&](std::string_view field, std::string_view value) {
    std::string name(field);
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name == "content-type" && content_type.empty()) content_type = value;
    headers[name] = value;
  });
  line["headers"] = std::move(headers);
  const std::string& body = res.body();
  line["body_bytes"] = body.size();
  if (keeps_body(content_type)) {
    line["body"] = std::string_view(body).substr(0, kMaxBody);
    if (body.size() > kMaxBody) line["body_truncated"] = true;
  }
  std::string text = boost::json::serialize(line);
  text += '\n';
  MutexLock lk(mu_);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace ichido::http

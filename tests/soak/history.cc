#include "history.h"

namespace ichido::soak {

std::unique_ptr<History> History::open(const std::string& path, std::string* error) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    *error = "cannot create " + path;
    return nullptr;
  }
  return std::unique_ptr<History>(new History(f, std::chrono::steady_clock::now()));
}

History::~History() {
  MutexLock lk(mu_);
  if (f_) std::fclose(f_);
  f_ = nullptr;
}

std::int64_t History::now_us() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               t0_)
      .count();
}

void History::append(const boost::json::object& line) {
  std::string text = boost::json::serialize(line);
  text.push_back('\n');
  MutexLock lk(mu_);
  std::fwrite(text.data(), 1, text.size(), f_);
}

void History::event(std::string_view name, boost::json::object fields) {
  fields["ev"] = name;
  fields["t"] = now_us();
  append(fields);
  flush();
}

void History::flush() {
  MutexLock lk(mu_);
  std::fflush(f_);
}

}  // namespace ichido::soak

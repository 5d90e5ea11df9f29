// `ichido counter …`: sequential numbers (see docs/API.md, "Counters"). The *_call functions map
// parsed options to one HTTP call; add_counter_commands declares the options.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cli/command.h"

namespace ichido::cli {

struct CounterCreateArgs {
  std::string name;
  std::optional<std::int64_t> start;
  std::optional<std::int64_t> max;
  std::optional<std::string> format;
  std::optional<std::string> period;  // none | year | month | day | fiscal_year
  std::optional<std::string> timezone;
  std::optional<std::int64_t> fiscal_year_start;  // 1-12, with period fiscal_year
  bool require_key = false;                       // sent only when set
};

struct CounterNextArgs {
  std::string name;
  std::optional<std::string> key;
  std::optional<std::string> note;
};

struct CounterIssuedArgs {
  std::string name;
  std::optional<std::string> key;  // excludes the paging options
  std::optional<std::int64_t> after;
  std::optional<std::int64_t> limit;
  std::optional<std::string> period;
};

struct CounterVoidArgs {
  std::string name;
  std::int64_t value = 0;
  std::optional<std::string> period;
  std::optional<std::string> reason;
};

struct CounterSetArgs {
  std::string name;
  std::int64_t expected = 0;
  std::int64_t value = 0;
};

// "/v1/ns/{ns}/counters/{name}" (name empty: the collection), both percent-encoded.
std::string counter_path(std::string_view ns, std::string_view name = {});

HttpCall counter_create_call(std::string_view ns, const CounterCreateArgs& args);
HttpCall counter_next_call(std::string_view ns, const CounterNextArgs& args);
HttpCall counter_get_call(std::string_view ns, std::string_view name);
HttpCall counter_list_call(std::string_view ns);
HttpCall counter_issued_call(std::string_view ns, const CounterIssuedArgs& args);
HttpCall counter_void_call(std::string_view ns, const CounterVoidArgs& args);
HttpCall counter_set_call(std::string_view ns, const CounterSetArgs& args);

void add_counter_commands(CommandTree& tree);

}  // namespace ichido::cli

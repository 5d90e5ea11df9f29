#include "cli/output.h"

#include <algorithm>
#include <boost/json/serialize.hpp>
#include <cctype>
#include <vector>

namespace ichido::cli {

namespace json = boost::json;

std::string display(const json::value& v) {
  if (v.is_string()) return std::string(v.get_string());
  if (v.is_null()) return "-";
  return json::serialize(v);
}

std::string display_field(const json::value& v, std::string_view field) {
  const json::object* obj = v.if_object();
  if (obj == nullptr) return "-";
  const json::value* member = obj->if_contains(field);
  return member == nullptr ? "-" : display(*member);
}

void print_fields(const json::object& fields, std::ostream& out) {
  std::size_t width = 0;
  for (const auto& kv : fields) width = std::max(width, kv.key().size());
  for (const auto& kv : fields) {
    out << kv.key() << ':' << std::string(width - kv.key().size() + 1, ' ') << display(kv.value())
        << '\n';
  }
}

void print_table(const json::array& items, std::span<const Column> columns, std::ostream& out) {
  std::vector<std::vector<std::string>> rows;
  rows.reserve(items.size() + 1);
  std::vector<std::size_t> widths(columns.size(), 0);
  auto add_row = [&](std::vector<std::string> row) {
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
    rows.push_back(std::move(row));
  };
  std::vector<std::string> header;
  for (const Column& c : columns) header.emplace_back(c.header);
  add_row(std::move(header));
  for (const json::value& item : items) {
    std::vector<std::string> row;
    for (const Column& c : columns) row.push_back(display_field(item, c.field));
    add_row(std::move(row));
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    out << line << '\n';
  }
}

void print_error(std::string_view code, std::string_view message, std::ostream& err) {
  err << "error: " << code << ": " << message << '\n';
}

void print_error_answer(
    int status, std::string_view body, const json::value& parsed, std::ostream& err,
    const std::function<std::string(std::string_view, const json::value&)>& explain) {
  if (const json::object* root = parsed.if_object()) {
    if (const json::value* e = root->if_contains("error"); e != nullptr && e->is_object()) {
      const std::string code = display_field(*e, "code");
      std::string message = display_field(*e, "message");
      const json::value* details = e->get_object().if_contains("details");
      if (explain) {
        std::string mine = explain(code, details ? *details : json::value());
        if (!mine.empty()) message = std::move(mine);
      }
      print_error(code, message, err);
      if (details != nullptr && details->is_object() && !details->get_object().empty()) {
        err << "  details: " << json::serialize(*details) << '\n';
      }
      return;
    }
  }
  // Not the API's error shape (a proxy's page, an empty body): show what there is.
  std::string text(trim_trailing_space(body));
  if (text.size() > 200) text = text.substr(0, 200) + "...";
  std::replace(text.begin(), text.end(), '\n', ' ');
  if (text.empty()) text = "the server answered HTTP " + std::to_string(status) + " without a body";
  print_error("http_" + std::to_string(status), text, err);
}

std::string_view trim_trailing_space(std::string_view body) {
  while (!body.empty() && std::isspace(static_cast<unsigned char>(body.back()))) {
    body.remove_suffix(1);
  }
  return body;
}

}  // namespace ichido::cli

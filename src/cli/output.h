// Readable output shared by all commands: field lists, tables and error lines. Pure formatting
// over Boost.JSON values; nothing here knows about a particular resource.
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <functional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

namespace ichido::cli {

// A value as a human reads it: strings without quotes, null as "-", anything else as compact JSON.
std::string display(const boost::json::value& v);

// The member `field` of `v` shown by display(), or "-" when `v` is not an object or lacks it.
std::string display_field(const boost::json::value& v, std::string_view field);

// "field: value" lines with the values aligned, in the object's order.
void print_fields(const boost::json::object& fields, std::ostream& out);

struct Column {
  std::string_view field;   // member of each item
  std::string_view header;  // printed in the header row
};

// A table: a header row, then one row per item (objects), columns padded to their widest cell.
void print_table(const boost::json::array& items, std::span<const Column> columns,
                 std::ostream& out);

// "error: <code>: <message>" (one line), e.g. "error: counter_not_found: create it first".
void print_error(std::string_view code, std::string_view message, std::ostream& err);

// The error line for a non-2xx answer: the API's {"error": {code, message, details}} when the body
// has that shape (details follow on a second line), otherwise "http_<status>" and the body text.
// `explain`, when given and when it returns a non-empty sentence for (code, details), replaces
// the server's message: the command line's words instead of the JSON API's.
void print_error_answer(
    int status, std::string_view body, const boost::json::value& parsed, std::ostream& err,
    const std::function<std::string(std::string_view, const boost::json::value&)>& explain =
        nullptr);

// `body` without trailing whitespace, so that it prints as one line followed by '\n'.
std::string_view trim_trailing_space(std::string_view body);

}  // namespace ichido::cli

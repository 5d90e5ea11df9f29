#include "cli/counter_cmd.h"

#include <CLI/CLI.hpp>
#include <array>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <memory>
#include <ostream>

#include "cli/output.h"

namespace ichido::cli {
namespace {

namespace json = boost::json;

constexpr std::array<Column, 8> kCounterColumns = {{
    {"name", "NAME"},
    {"last_value", "LAST"},
    {"max", "MAX"},
    {"format", "FORMAT"},
    {"period", "PERIOD"},
    {"current_period", "CURRENT"},
    {"issued_count", "ISSUED"},
    {"voided_count", "VOIDED"},
}};

constexpr std::array<Column, 7> kIssuedColumns = {{
    {"value", "VALUE"},
    {"formatted", "FORMATTED"},
    {"period", "PERIOD"},
    {"key", "KEY"},
    {"issued_at", "ISSUED_AT"},
    {"voided_at", "VOIDED_AT"},
    {"note", "NOTE"},
}};

const json::array* items_of(const json::value& body) {
  const json::object* obj = body.if_object();
  if (obj == nullptr) return nullptr;
  const json::value* items = obj->if_contains("items");
  return (items != nullptr) ? items->if_array() : nullptr;
}

void render_fields(const HttpResponse&, const json::value& body, Output& o) {
  if (const json::object* obj = body.if_object()) {
    print_fields(*obj, o.out);
  } else {
    o.out << display(body) << '\n';
  }
}

void render_items(const json::value& body, std::span<const Column> columns, Output& o) {
  const json::array* items = items_of(body);
  if (items == nullptr || items->empty()) {
    o.err << "(none)\n";
    return;
  }
  print_table(*items, columns, o.out);
}

std::string add_query(std::string target, std::string_view name, std::string_view value) {
  target += (target.find('?') == std::string::npos) ? '?' : '&';
  target += name;
  target += '=';
  target += percent_encode(value);
  return target;
}

// The CLI's words for the errors of calls on one counter.
Explainer counter_explainer(std::string ns, std::string name) {
  return [ns = std::move(ns), name = std::move(name)](std::string_view code,
                                                      const json::value&) -> std::string {
    if (code == "counter_not_found") {
      return "no counter " + name + " in namespace " + ns +
             " (counters are never created implicitly); an admin creates it with: ichido "
             "counter create " +
             shell_quote(name) + ns_hint(ns) + " --max N --format 'R-{seq:4}'";
    }
    if (code == "key_required") {
      return "counter " + name +
             " requires --key: a value unique to the item you are numbering (e.g. --key "
             "form-123); the same --key always gets the same number back";
    }
    return {};
  };
}

// Shared by every leaf: the counter NAME positional.
void add_name(CLI::App& cmd, std::string& name) {
  cmd.add_option("name", name, "Counter name: [A-Za-z0-9._-], 1-128 bytes")->required();
}

}  // namespace

std::string counter_path(std::string_view ns, std::string_view name) {
  std::string path = ns_path(ns) + "/counters";
  if (!name.empty()) path += "/" + percent_encode(name);
  return path;
}

HttpCall counter_create_call(std::string_view ns, const CounterCreateArgs& args) {
  json::object body;
  if (args.start) body["start"] = *args.start;
  if (args.max) body["max"] = *args.max;
  if (args.format) body["format"] = *args.format;
  if (args.period) body["period"] = *args.period;
  if (args.timezone) body["timezone"] = *args.timezone;
  if (args.fiscal_year_start) body["fiscal_year_start"] = *args.fiscal_year_start;
  if (args.require_key) body["require_key"] = true;
  std::string name = args.name;
  return {{"PUT", counter_path(ns, args.name), json::serialize(body), {}},
          [name](const HttpResponse& res, const json::value&, Output& o) {
            if (res.status == 201) {
              o.out << "created counter " << name << '\n';
            } else {
              o.out << "counter " << name << " already exists with this configuration\n";
            }
          }};
}

HttpCall counter_next_call(std::string_view ns, const CounterNextArgs& args) {
  json::object body;
  if (args.key) body["key"] = *args.key;
  if (args.note) body["note"] = *args.note;
  HttpCall call{{"POST", counter_path(ns, args.name) + "/next", json::serialize(body), {}},
                [](const HttpResponse&, const json::value& answer, Output& o) {
                  o.out << display_field(answer, "formatted") << '\n';
                  const json::object* obj = answer.if_object();
                  const json::value* replayed = obj ? obj->if_contains("replayed") : nullptr;
                  if (replayed != nullptr && replayed->is_bool() && replayed->get_bool()) {
                    o.err << "(replayed)\n";
                  }
                }};
  call.explain = counter_explainer(std::string(ns), args.name);
  // With a key a second send gets the same number back; without one it could issue two.
  call.retry = args.key.has_value();
  return call;
}

HttpCall counter_get_call(std::string_view ns, std::string_view name) {
  HttpCall call{{"GET", counter_path(ns, name), {}, {}}, render_fields};
  call.explain = counter_explainer(std::string(ns), std::string(name));
  call.retry = true;
  return call;
}

HttpCall counter_list_call(std::string_view ns) {
  HttpCall call{{"GET", counter_path(ns), {}, {}},
                [](const HttpResponse&, const json::value& body, Output& o) {
                  render_items(body, kCounterColumns, o);
                }};
  call.retry = true;
  return call;
}

HttpCall counter_issued_call(std::string_view ns, const CounterIssuedArgs& args) {
  std::string target = counter_path(ns, args.name) + "/issued";
  if (args.key) target = add_query(target, "key", *args.key);
  if (args.after) target = add_query(target, "after", std::to_string(*args.after));
  if (args.limit) target = add_query(target, "limit", std::to_string(*args.limit));
  if (args.period) target = add_query(target, "period", *args.period);
  HttpCall call{{"GET", std::move(target), {}, {}},
                [](const HttpResponse&, const json::value& body, Output& o) {
                  render_items(body, kIssuedColumns, o);
                  const std::string next = display_field(body, "next_after");
                  if (next != "-") o.err << "more: --after " << next << '\n';
                }};
  call.explain = counter_explainer(std::string(ns), args.name);
  call.retry = true;
  return call;
}

HttpCall counter_void_call(std::string_view ns, const CounterVoidArgs& args) {
  json::object body;
  body["value"] = args.value;
  if (args.period) body["period"] = *args.period;
  if (args.reason) body["reason"] = *args.reason;
  HttpCall call{{"POST", counter_path(ns, args.name) + "/void", json::serialize(body), {}},
                render_fields};
  call.explain = counter_explainer(std::string(ns), args.name);
  return call;
}

HttpCall counter_set_call(std::string_view ns, const CounterSetArgs& args) {
  json::object body;
  body["expected_last_value"] = args.expected;
  body["last_value"] = args.value;
  HttpCall call{{"POST", counter_path(ns, args.name) + "/set", json::serialize(body), {}},
                render_fields};
  call.explain = counter_explainer(std::string(ns), args.name);
  return call;
}

void add_counter_commands(CommandTree& tree) {
  CLI::App* group = tree.add_group(tree.root(), "counter",
                                   "Sequential numbers: receipts, invoices (create, next, get, "
                                   "list, issued, void, set)",
                                   "ichido counter next receipts --key form-123");
  const ConnectionOptions& conn = tree.connection();

  {
    auto a = std::make_shared<CounterCreateArgs>();
    CLI::App* cmd = tree.add_http_command(
        *group, "create",
        "Create a counter (admin). Succeeds unchanged when it exists with the same settings",
        "ichido counter create receipts --format 'R-{yyyy}-{seq:4}' --period year "
        "--timezone Asia/Tokyo --require-key",
        [a, &conn] { return counter_create_call(conn.ns, *a); });
    add_name(*cmd, a->name);
    cmd->add_option("--start", a->start,
                    "The last value already used; the first number issued is START+1 "
                    "(server default: 0)");
    cmd->add_option("--max", a->max,
                    "Highest value that may be issued; then next fails with counter_exhausted "
                    "(server default: 2^53)");
    cmd->add_option("--format", a->format,
                    "Literal text with {seq}, {seq:N} (zero-padded), {yyyy}, {yy}, {mm}, {dd}, "
                    "{fy}, {fy2} (fiscal year), {era}, {era_initial}, {era_year}, {era_year:N} "
                    "(Japanese era: 令和, R, 8) (server default: {seq})");
    cmd->add_option("--period", a->period,
                    "Restart numbering each none|year|month|day|fiscal_year (server default: "
                    "none)")
        ->check(CLI::IsMember({"none", "year", "month", "day", "fiscal_year"}));
    cmd->add_option("--fiscal-year-start", a->fiscal_year_start,
                    "With --period fiscal_year: the month (1-12) a fiscal year starts in; the "
                    "year is named by the year it starts in (server default: 4, April)")
        ->check(CLI::Range(1, 12));
    cmd->add_option("--timezone", a->timezone,
                    "IANA time zone for periods and dates, e.g. Asia/Tokyo (server default: its "
                    "--default-timezone, itself UTC unless set)");
    cmd->add_flag("--require-key", a->require_key, "Make next without --key an error");
  }
  {
    auto a = std::make_shared<CounterNextArgs>();
    CLI::App* cmd = tree.add_http_command(
        *group, "next",
        "Issue the next number and print it formatted. The same --key always gets the same "
        "number back (printed with '(replayed)' on stderr)",
        "ichido counter next receipts --key form-123",
        [a, &conn] { return counter_next_call(conn.ns, *a); });
    add_name(*cmd, a->name);
    cmd->add_option("--key", a->key,
                    "Idempotency key: retrying with it never issues a second number");
    cmd->add_option("--note", a->note, "Text kept in the audit trail (at most 1 KiB)");
  }
  {
    auto name = std::make_shared<std::string>();
    CLI::App* cmd = tree.add_http_command(
        *group, "get", "Show a counter's settings and where its current period stands",
        "ichido counter get receipts", [name, &conn] { return counter_get_call(conn.ns, *name); });
    add_name(*cmd, *name);
  }
  tree.add_http_command(*group, "list", "List the counters of the namespace",
                        "ichido counter list --ns accounting",
                        [&conn] { return counter_list_call(conn.ns); });
  {
    auto a = std::make_shared<CounterIssuedArgs>();
    CLI::App* cmd = tree.add_http_command(
        *group, "issued",
        "Show the audit trail of issued numbers: by --key, or a page in value order",
        "ichido counter issued receipts --after 100 --limit 50 --period 2026",
        [a, &conn] { return counter_issued_call(conn.ns, *a); });
    add_name(*cmd, a->name);
    CLI::Option* key = cmd->add_option("--key", a->key, "Show the number issued to this key");
    CLI::Option* after =
        cmd->add_option("--after", a->after, "Start after this value (next page: next_after)");
    CLI::Option* limit = cmd->add_option("--limit", a->limit, "At most this many (1-1000)")
                             ->check(CLI::Range(1, 1000));
    CLI::Option* period =
        cmd->add_option("--period", a->period,
                        "Period label, e.g. 2026, 2026-04 or FY2026 (default: the current one)");
    key->excludes(after)->excludes(limit)->excludes(period);
  }
  {
    auto a = std::make_shared<CounterVoidArgs>();
    CLI::App* cmd = tree.add_http_command(
        *group, "void",
        "Record that an issued number will not be used (admin); it is never issued again",
        "ichido counter void receipts 17 --period 2026 --reason 'cancelled order'",
        [a, &conn] { return counter_void_call(conn.ns, *a); });
    add_name(*cmd, a->name);
    cmd->add_option("value", a->value, "The issued number (its value, not the formatted text)")
        ->required();
    cmd->add_option("--period", a->period, "Period label of the number (default: the current one)");
    cmd->add_option("--reason", a->reason, "Why it is voided (kept in the audit trail)");
  }
  {
    auto a = std::make_shared<CounterSetArgs>();
    CLI::App* cmd = tree.add_http_command(
        *group, "set",
        "Compare-and-set the current period's last value (admin): fails unless it is --expected",
        "ichido counter set receipts --expected 41 --value 100",
        [a, &conn] { return counter_set_call(conn.ns, *a); });
    add_name(*cmd, a->name);
    cmd->add_option("--expected", a->expected, "The last value you believe is current")->required();
    cmd->add_option("--value", a->value, "The new last value (the next number is VALUE+1)")
        ->required();
  }
}

}  // namespace ichido::cli

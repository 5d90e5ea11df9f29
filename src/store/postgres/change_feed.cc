#include "store/postgres/change_feed.h"

#include <algorithm>
#include <set>

namespace ichido::store::postgres {
namespace {

std::string escape_key(std::string_view k) {
  std::string out;
  out.reserve(k.size());
  for (char c : k) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::optional<std::string> unescape_key(std::string_view k) {
  std::string out;
  out.reserve(k.size());
  for (std::size_t i = 0; i < k.size(); ++i) {
    if (k[i] != '\\') {
      out.push_back(k[i]);
      continue;
    }
    if (++i == k.size()) return std::nullopt;
    if (k[i] == '\\') {
      out.push_back('\\');
    } else if (k[i] == 'n') {
      out.push_back('\n');
    } else {
      return std::nullopt;
    }
  }
  return out;
}

std::string join(const std::string& node, const std::set<std::string>& lines) {
  std::string out = node;
  for (const auto& l : lines) {
    out.push_back('\n');
    out += l;
  }
  return out;
}

}  // namespace

std::string notify_channel(const std::string& schema) { return "ichido_" + schema; }

std::string encode_changes(const std::string& node, std::vector<Announcement> items) {
  std::set<std::string> lines;
  bool tokens = false;
  std::set<std::string> namespaces;
  for (const auto& a : items) {
    switch (a.kind) {
      case Announcement::Kind::tokens:
        tokens = true;
        lines.insert("T");
        break;
      case Announcement::Kind::lock:
        namespaces.insert(a.ns);
        lines.insert("L\t" + a.ns + "\t" + a.name);
        break;
      case Announcement::Kind::once:
        namespaces.insert(a.ns);
        lines.insert("O\t" + a.ns + "\t" + escape_key(a.name));
        break;
    }
  }
  std::string out = join(node, lines);
  if (out.size() <= kMaxNotifyPayload) return out;
  lines.clear();
  if (tokens) lines.insert("T");
  for (const auto& ns : namespaces) lines.insert("N\t" + ns);
  out = join(node, lines);
  if (out.size() <= kMaxNotifyPayload) return out;
  lines.clear();
  if (tokens) lines.insert("T");
  lines.insert("*");
  return join(node, lines);
}

std::optional<DecodedChanges> decode_changes(std::string_view payload) {
  DecodedChanges d;
  std::size_t pos = payload.find('\n');
  d.node = std::string(payload.substr(0, pos));
  if (d.node.empty()) return std::nullopt;
  while (pos != std::string_view::npos) {
    const std::size_t start = pos + 1;
    pos = payload.find('\n', start);
    std::string_view line =
        payload.substr(start, pos == std::string_view::npos ? pos : pos - start);
    if (line == "*") {
      d.changes.all_waiters = true;
      continue;
    }
    if (line == "T") {
      d.changes.tokens = true;
      continue;
    }
    if (line.size() < 3 || line[1] != '\t') return std::nullopt;
    const char kind = line[0];
    std::string_view rest = line.substr(2);
    if (kind == 'N') {
      d.changes.namespaces.emplace_back(rest);
      continue;
    }
    const std::size_t tab = rest.find('\t');
    if (tab == std::string_view::npos || tab == 0) return std::nullopt;
    std::string ns(rest.substr(0, tab));
    std::string_view name = rest.substr(tab + 1);
    if (kind == 'L') {
      d.changes.locks.push_back(LockRef{std::move(ns), std::string(name)});
    } else if (kind == 'O') {
      auto key = unescape_key(name);
      if (!key) return std::nullopt;
      d.changes.once.push_back(OnceRef{std::move(ns), std::move(*key)});
    } else {
      return std::nullopt;
    }
  }
  return d;
}

}  // namespace ichido::store::postgres

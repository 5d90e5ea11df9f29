// TableStore commands for tokens and the audit log.
#include "store/admin_ops.h"

#include "core/names.h"
#include "store/table_store.h"

namespace ichido::store {

void TableStore::create_token(CreateTokenCmd cmd, Callback<core::TokenInfo> done) {
  JobExtras x = extras(
      [&] { return JobExtras{{job_key("token", cmd.token.id, "")}, {}, {announce_tokens()}}; });
  write_audited<core::TokenInfo>(
      [token = std::move(cmd.token)](Tables& t, TimeMs) -> Result<core::TokenInfo> {
        ICHIDO_TRY(core::validate_scope(token.scope));
        ICHIDO_TRY(t.insert_token(token));
        return token;
      },
      std::move(cmd.audit), std::move(done), std::move(x));
}

void TableStore::create_first_token(core::TokenInfo token, AuditNote audit, Callback<bool> done) {
  JobExtras x = extras([&] {
    JobExtras e{{job_key("token-bootstrap", "", "")}, {}, {}};
    if (audit) e.keys.push_back(job_key("audit", "", ""));
    return e;
  });
  write<bool>(
      [token = std::move(token), audit = std::move(audit)](Tables& t,
                                                           TimeMs now) mutable -> Result<bool> {
        auto existing = t.list_tokens();
        if (!existing.ok()) return std::move(existing).error();
        if (!existing->empty()) return false;
        token.created_at = now;
        ICHIDO_TRY(t.insert_token(token));
        if (audit) {
          if (audit->at == 0) audit->at = now;
          auto id = t.insert_audit(*audit);
          if (!id.ok()) return std::move(id).error();
        }
        return true;
      },
      std::move(done), std::move(x));
}

Result<core::TokenInfo> revoke_token_rows(Tables& t, const std::string& id, TimeMs now) {
  auto found = t.find_token(id);
  if (!found.ok()) return std::move(found).error();
  if (!*found) {
    return Error(errc::token_not_found,
                 "No token with id '" + id + "'; list them with GET /v1/admin/tokens.");
  }
  core::TokenInfo tok = std::move(**found);
  if (!tok.revoked_at) {
    tok.revoked_at = now;
    ICHIDO_TRY(t.save_token(tok));
    ICHIDO_TRY(t.bump_token_epoch());
  }
  return tok;
}

void TableStore::revoke_token(RevokeTokenCmd cmd, Callback<core::TokenInfo> done) {
  JobExtras x =
      extras([&] { return JobExtras{{job_key("token", cmd.id, "")}, {}, {announce_tokens()}}; });
  write_audited<core::TokenInfo>(
      [id = std::move(cmd.id)](Tables& t, TimeMs now) { return revoke_token_rows(t, id, now); },
      std::move(cmd.audit), std::move(done), std::move(x));
}

void TableStore::list_tokens(Callback<std::vector<core::TokenInfo>> done) {
  read<std::vector<core::TokenInfo>>([](Tables& t, TimeMs) { return t.list_tokens(); },
                                     std::move(done));
}

void TableStore::find_token_by_hash(std::string hash,
                                    Callback<std::optional<core::TokenInfo>> done) {
  read<std::optional<core::TokenInfo>>(
      [hash = std::move(hash)](Tables& t, TimeMs) { return t.find_token_by_hash(hash); },
      std::move(done));
}

void TableStore::append_audit(core::AuditEntry entry, Callback<core::AuditEntry> done) {
  JobExtras x = extras([] { return JobExtras{{job_key("audit", "", "")}, {}, {}}; });
  write<core::AuditEntry>(
      [entry = std::move(entry)](Tables& t, TimeMs now) mutable -> Result<core::AuditEntry> {
        if (entry.at == 0) entry.at = now;
        auto id = t.insert_audit(entry);
        if (!id.ok()) return std::move(id).error();
        entry.id = *id;
        return entry;
      },
      std::move(done), std::move(x));
}

void TableStore::list_audit(AuditQuery q, Callback<std::vector<core::AuditEntry>> done) {
  read<std::vector<core::AuditEntry>>(
      [q = std::move(q)](Tables& t, TimeMs) -> Result<std::vector<core::AuditEntry>> {
        // One more than a page: callers ask for it to learn whether a next page exists.
        if (q.limit < 1 || q.limit > kMaxAuditLimit + 1) {
          return invalid_field("limit", "The limit must be a whole number from 1 to 1000.");
        }
        return t.list_audit(q);
      },
      std::move(done));
}

void TableStore::get_ns_settings(std::string ns, Callback<NamespaceSettings> done) {
  read<NamespaceSettings>(
      [ns = std::move(ns)](Tables& t, TimeMs) -> Result<NamespaceSettings> {
        ICHIDO_TRY(core::validate_name(ns, "ns"));
        auto s = t.find_ns_settings(ns);
        if (!s.ok()) return std::move(s).error();
        return s->value_or(NamespaceSettings{});
      },
      std::move(done));
}

void TableStore::put_ns_settings(PutNsSettingsCmd cmd, Callback<NamespaceSettings> done) {
  JobExtras x = extras([&] { return JobExtras{{job_key("ns-settings", cmd.ns, "")}, {}, {}}; });
  write_audited<NamespaceSettings>(
      [ns = std::move(cmd.ns), settings = cmd.settings](Tables& t,
                                                        TimeMs) -> Result<NamespaceSettings> {
        ICHIDO_TRY(core::validate_name(ns, "ns"));
        ICHIDO_TRY(t.save_ns_settings(ns, settings));
        return settings;
      },
      std::move(cmd.audit), std::move(done), std::move(x));
}

void TableStore::summarize_namespaces(std::optional<std::string> only_ns, std::int64_t cap,
                                      Callback<std::vector<NamespaceSummary>> done) {
  read<std::vector<NamespaceSummary>>(
      [only_ns = std::move(only_ns), cap](Tables& t,
                                          TimeMs now) -> Result<std::vector<NamespaceSummary>> {
        std::vector<std::string> names;
        if (only_ns) {
          names.push_back(*only_ns);
        } else {
          auto all = t.list_namespaces();
          if (!all.ok()) return std::move(all).error();
          names = std::move(*all);
        }
        std::vector<NamespaceSummary> out;
        out.reserve(names.size());
        for (auto& ns : names) {
          NamespaceSummary s;
          auto counters = t.list_counters(ns);
          if (!counters.ok()) return std::move(counters).error();
          s.counters = static_cast<std::int64_t>(counters->size());
          auto locks = t.list_live_locks(ns, now);
          if (!locks.ok()) return std::move(locks).error();
          s.locks_held = static_cast<std::int64_t>(locks->size());
          auto once = t.count_once(ns, now, cap);
          if (!once.ok()) return std::move(once).error();
          s.once = *once;
          s.ns = std::move(ns);
          out.push_back(std::move(s));
        }
        return out;
      },
      std::move(done));
}

}  // namespace ichido::store

// TableStore commands for tokens and the audit log.
#include "store/admin_ops.h"

#include "store/table_store.h"

namespace ichido::store {

void TableStore::create_token(CreateTokenCmd cmd, Callback<core::TokenInfo> done) {
  auto keys = std::vector<std::int64_t>{job_key("token", cmd.token.id, "")};
  write_audited<core::TokenInfo>(
      [token = std::move(cmd.token)](Tables& t, TimeMs) -> Result<core::TokenInfo> {
        ICHIDO_TRY(core::validate_scope(token.scope));
        ICHIDO_TRY(t.insert_token(token));
        return token;
      },
      std::move(cmd.audit), std::move(done), std::move(keys));
}

void TableStore::create_first_token(core::TokenInfo token, AuditNote audit, Callback<bool> done) {
  std::vector<std::int64_t> keys{job_key("token-bootstrap", "", "")};
  if (audit) keys.push_back(job_key("audit", "", ""));
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
      std::move(done), std::move(keys));
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
  }
  return tok;
}

void TableStore::revoke_token(RevokeTokenCmd cmd, Callback<core::TokenInfo> done) {
  auto keys = std::vector<std::int64_t>{job_key("token", cmd.id, "")};
  write_audited<core::TokenInfo>(
      [id = std::move(cmd.id)](Tables& t, TimeMs now) { return revoke_token_rows(t, id, now); },
      std::move(cmd.audit), std::move(done), std::move(keys));
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
  auto keys = std::vector<std::int64_t>{job_key("audit", "", "")};
  write<core::AuditEntry>(
      [entry = std::move(entry)](Tables& t, TimeMs now) mutable -> Result<core::AuditEntry> {
        if (entry.at == 0) entry.at = now;
        auto id = t.insert_audit(entry);
        if (!id.ok()) return std::move(id).error();
        entry.id = *id;
        return entry;
      },
      std::move(done), std::move(keys));
}

void TableStore::list_audit(std::int64_t after, int limit,
                            Callback<std::vector<core::AuditEntry>> done) {
  read<std::vector<core::AuditEntry>>(
      [after, limit](Tables& t, TimeMs) { return t.list_audit(after, limit); }, std::move(done));
}

}  // namespace ichido::store

// Secrets: random API tokens and their hashes (OpenSSL). Tokens are shown once and stored only
// as SHA-256 hashes; comparisons of hashes take constant time.
// Thread-safety: all functions are safe from any thread.
#pragma once

#include <string>
#include <string_view>

namespace ichido {

// "ichido_" + 43 base64url characters: 256 bits from the OS's CSPRNG. Aborts if the CSPRNG
// fails (there is no safe fallback for a credential).
std::string new_token_secret();
// A short public identifier (16 lowercase hex characters, 64 random bits).
std::string new_token_id();
// Lowercase hex SHA-256 of `text`.
std::string sha256_hex(std::string_view text);
// Equal length and bytes, in time independent of where they differ.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace ichido

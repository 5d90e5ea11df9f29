#include "base/secret.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <cstdio>
#include <cstdlib>

namespace ichido {
namespace {

void random_bytes(unsigned char* out, int n) {
  if (RAND_bytes(out, n) != 1) {
    std::fputs("ichido: the system random number generator failed\n", stderr);
    std::abort();
  }
}

std::string hex(const unsigned char* p, std::size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out(n * 2, '0');
  for (std::size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  return out;
}

}  // namespace

std::string new_token_secret() {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  unsigned char raw[33];  // 264 bits: 44 base64url characters, of which 43 are kept (>= 256 bits)
  random_bytes(raw, sizeof raw);
  std::string out = "ichido_";
  for (std::size_t i = 0; i < sizeof raw; i += 3) {
    const unsigned v = (raw[i] << 16) | (raw[i + 1] << 8) | raw[i + 2];
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
    out += alphabet[v & 63];
  }
  out.pop_back();
  return out;
}

std::string new_token_id() {
  unsigned char raw[8];
  random_bytes(raw, sizeof raw);
  return hex(raw, sizeof raw);
}

std::string sha256_hex(std::string_view text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  return hex(digest, sizeof digest);
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace ichido

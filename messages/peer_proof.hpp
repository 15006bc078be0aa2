#pragma once

// The challenge-response by which cluster peers and remote executors prove
// they hold cluster.secret (SPEC §7) without sending it: each side sends a
// fresh nonce and answers the other's with HMAC-SHA256(secret, nonce | name).

#include <string>

namespace taskmill {

/// 32 hex digits from the operating system's random source.
std::string new_nonce();

/// Hex HMAC-SHA256 over `nonce` and the prover's `name`, keyed by `secret`.
std::string peer_proof(const std::string& secret, const std::string& nonce,
                       const std::string& name);

/// Compares two secrets or proofs in time independent of where they differ
/// (the API token, peer proofs).
bool same_secret(const std::string& a, const std::string& b);

}  // namespace taskmill

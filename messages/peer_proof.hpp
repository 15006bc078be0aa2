#pragma once

// The challenge-response by which cluster peers and remote executors prove
// they hold cluster.secret (SPEC §7) without sending it: each side sends a
// fresh nonce and answers the other's with HMAC-SHA256(secret, role | nonce |
// name). The role keeps the two directions apart: otherwise a caller without
// the secret could ask node A to answer the nonce node B gave it, and join B
// as A with that answer.

#include <string>

namespace taskmill {

/// 32 hex digits from the operating system's random source.
std::string new_nonce();

/// Who proves: the node answering a hello, or the caller joining it.
enum class proof_role { answer, join };

/// Hex HMAC-SHA256 over the role, `nonce` and the prover's `name`, keyed by
/// `secret`.
std::string peer_proof(const std::string& secret, proof_role role, const std::string& nonce,
                       const std::string& name);

/// Compares two secrets or proofs in time independent of where they differ
/// (the API token, peer proofs).
bool same_secret(const std::string& a, const std::string& b);

}  // namespace taskmill

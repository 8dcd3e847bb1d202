#pragma once

// Shamir's t-of-n secret sharing (1979) of 32-byte secrets over the prime field GF(2^31 - 1).
// A secret is cut into eleven 24-bit limbs; each limb is the constant term of its own random
// polynomial of degree t - 1, so any t shares determine the secret and t - 1 shares are
// independent of it. The field is small enough for 32 x 32 -> 64-bit products, which every
// target (armhf and the Cortex-M4 included) multiplies natively.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/result.h"
#include "edgesgd/core/status.h"
#include "edgesgd/secagg/crypto.h"

namespace edgesgd::secagg {

inline constexpr std::uint32_t kShamirPrime = 0x7FFFFFFFu;  // 2^31 - 1
inline constexpr std::size_t kLimbBits = 24;
inline constexpr std::size_t kSecretLimbs = (kKeyBytes * 8 + kLimbBits - 1) / kLimbBits;  // 11

// One holder's share: its evaluation point x (1 <= x < p) and the polynomials' values there.
struct Share {
  std::uint32_t x = 0;
  std::array<std::uint32_t, kSecretLimbs> y{};
};
// A share's encoding: its limbs only; the evaluation point is known from who holds it.
inline constexpr std::size_t kShareBytes = 4 * kSecretLimbs;  // 44

// Evaluates fresh random polynomials (coefficients from `random`) with constant terms `secret`
// at `xs` (distinct, in [1, p)), writing shares[i] for xs[i].
// Errors: kInvalidArgument for threshold 0, threshold > xs.size(), shares.size() != xs.size(),
// or points that repeat or fall outside [1, p).
Status SplitSecret(const Key& secret, std::uint32_t threshold, std::span<const std::uint32_t> xs,
                   SecretRandom& random, std::span<Share> shares);

// The secret from the first `threshold` of `shares` (Lagrange interpolation at 0).
// Errors: kInvalidArgument for fewer than `threshold` shares or repeated points; kDataLoss when
// the interpolated limbs do not form a 32-byte secret (shares that do not belong together).
Result<Key> CombineShares(std::span<const Share> shares, std::uint32_t threshold);

// Little-endian encoding of a share's limbs, kShareBytes long, and its decoding as the share at
// point `x`.
void WriteShare(const Share& share, std::span<std::byte, kShareBytes> out);
Share ReadShare(std::span<const std::byte, kShareBytes> in, std::uint32_t x);

}  // namespace edgesgd::secagg

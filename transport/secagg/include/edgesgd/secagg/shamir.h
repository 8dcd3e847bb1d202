#pragma once

// Shamir's t-of-n secret sharing (1979) over the prime field GF(2^127 - 1). A secret of up to
// 252 bits is cut into two 126-bit halves; each half is the constant term of its own random
// polynomial of degree t - 1, so any t shares determine the secret and t - 1 shares are
// independent of it. A share is then two field elements, 32 bytes, no larger than the secret
// itself. Elements are four 32-bit words multiplied with 32 x 32 -> 64-bit products, which every
// target (armhf and the Cortex-M4 included) has natively.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/result.h"
#include "edgesgd/core/status.h"
#include "edgesgd/secagg/crypto.h"

namespace edgesgd::secagg {

// A secret is a Key whose bits kSecretBits.. are zero (the top nibble of its last byte).
inline constexpr std::size_t kSecretBits = 252;
inline constexpr std::size_t kElementWords = 4;  // an element of GF(2^127 - 1), little-endian
inline constexpr std::size_t kShareElements = 2;
inline constexpr std::size_t kShareWords = kElementWords * kShareElements;  // 8

// One holder's share: its evaluation point x (x >= 1) and the two polynomials' values there,
// element e in words [4e, 4e + 4).
struct Share {
  std::uint32_t x = 0;
  std::array<std::uint32_t, kShareWords> y{};
};
// A share's encoding: its elements only; the evaluation point is known from who holds it.
inline constexpr std::size_t kShareBytes = 4 * kShareWords;  // 32

// Evaluates fresh random polynomials (coefficients from `random`) with constant terms `secret`
// at `xs` (distinct and nonzero), writing shares[i] for xs[i].
// Errors: kInvalidArgument for a secret with any of bits 252..255 set, threshold 0,
// threshold > xs.size(), shares.size() != xs.size(), or points that repeat or are 0.
Status SplitSecret(const Key& secret, std::uint32_t threshold, std::span<const std::uint32_t> xs,
                   SecretRandom& random, std::span<Share> shares);

// The secret from the first `threshold` of `shares` (Lagrange interpolation at 0).
// Errors: kInvalidArgument for fewer than `threshold` shares or repeated points; kDataLoss when
// the interpolated halves do not form a 252-bit secret (shares that do not belong together). Share
// words that are not a canonical element (at least p) are read modulo p.
Result<Key> CombineShares(std::span<const Share> shares, std::uint32_t threshold);

// An element of GF(2^127 - 1): four little-endian words.
using FieldElement = std::array<std::uint32_t, kElementWords>;

// Scratch elements DecodeShares needs for `count` shares: five polynomials of degree `count`.
constexpr std::size_t DecodeScratchElements(std::size_t count) { return 5 * (count + 1); }

// The secret from all of `shares` when up to (shares.size() - threshold) / 2 of them are wrong
// (Gao's Reed-Solomon decoder, run on each half). wrong[i] becomes 1 for each share that
// disagrees with the decoded polynomials, else 0. Beyond that bound the result may be an error or
// a different secret, so a caller checks it against what it knows of the secret. `scratch` is
// wiped before returning.
// Errors: kInvalidArgument for fewer than `threshold` shares, threshold 0, repeated or zero points,
// `wrong` not one per share or `scratch` shorter than DecodeScratchElements; kDataLoss when no
// polynomial of degree below `threshold` lies within that distance of the shares, or the decoded
// halves do not form a 252-bit secret.
Result<Key> DecodeShares(std::span<const Share> shares, std::uint32_t threshold,
                         std::span<FieldElement> scratch, std::span<std::uint8_t> wrong);

// Little-endian encoding of a share's words, kShareBytes long, and its decoding as the share at
// point `x`.
void WriteShare(const Share& share, std::span<std::byte, kShareBytes> out);
Share ReadShare(std::span<const std::byte, kShareBytes> in, std::uint32_t x);

}  // namespace edgesgd::secagg

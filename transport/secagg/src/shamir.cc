#include "edgesgd/secagg/shamir.h"

#include <algorithm>

namespace edgesgd::secagg {
namespace {

constexpr std::uint32_t Reduce(std::uint64_t value) {
  // 2^31 = 1 (mod p): fold the high part onto the low part twice, then subtract once.
  value = (value & kShamirPrime) + (value >> 31);
  value = (value & kShamirPrime) + (value >> 31);
  return value >= kShamirPrime ? static_cast<std::uint32_t>(value - kShamirPrime)
                               : static_cast<std::uint32_t>(value);
}
constexpr std::uint32_t Add(std::uint32_t a, std::uint32_t b) {
  return Reduce(std::uint64_t{a} + b);
}
constexpr std::uint32_t Sub(std::uint32_t a, std::uint32_t b) { return Add(a, kShamirPrime - b); }
constexpr std::uint32_t Mul(std::uint32_t a, std::uint32_t b) {
  return Reduce(std::uint64_t{a} * b);
}

constexpr std::uint32_t Inverse(std::uint32_t a) {
  // Fermat: a^(p-2).
  std::uint32_t result = 1;
  std::uint32_t base = a;
  for (std::uint32_t exponent = kShamirPrime - 2; exponent != 0; exponent >>= 1) {
    if (exponent & 1u) result = Mul(result, base);
    base = Mul(base, base);
  }
  return result;
}

// Uniform in [0, p) by rejection: 31-bit draws, of which only p itself is refused.
std::uint32_t RandomElement(SecretRandom& random) {
  for (;;) {
    const std::uint32_t candidate = random.NextWord() & kShamirPrime;
    if (candidate != kShamirPrime) return candidate;
  }
}

std::array<std::uint32_t, kSecretLimbs> ToLimbs(const Key& secret) {
  std::array<std::uint32_t, kSecretLimbs> limbs{};
  for (std::size_t bit = 0; bit < kKeyBytes * 8; bit += 8) {
    const std::uint32_t byte = std::to_integer<std::uint8_t>(secret[bit / 8]);
    limbs[bit / kLimbBits] |= byte << (bit % kLimbBits);
  }
  return limbs;
}

bool PointsValid(std::span<const std::uint32_t> xs) {
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (xs[i] == 0 || xs[i] >= kShamirPrime) return false;
    for (std::size_t j = 0; j < i; ++j) {
      if (xs[j] == xs[i]) return false;
    }
  }
  return true;
}

void PutWord(std::uint32_t word, std::span<std::byte> out) {
  for (std::size_t i = 0; i < 4; ++i) out[i] = static_cast<std::byte>(word >> (8 * i));
}
std::uint32_t GetWord(std::span<const std::byte> in) {
  std::uint32_t word = 0;
  for (std::size_t i = 0; i < 4; ++i)
    word |= std::uint32_t{std::to_integer<std::uint8_t>(in[i])} << (8 * i);
  return word;
}

}  // namespace

Status SplitSecret(const Key& secret, std::uint32_t threshold, std::span<const std::uint32_t> xs,
                   SecretRandom& random, std::span<Share> shares) {
  if (threshold == 0 || threshold > xs.size()) {
    return Status::InvalidArgument("threshold must be between 1 and the number of holders");
  }
  if (shares.size() != xs.size()) {
    return Status::InvalidArgument("one share per evaluation point");
  }
  if (!PointsValid(xs)) {
    return Status::InvalidArgument("evaluation points must be distinct and in [1, 2^31 - 1)");
  }
  std::array<std::uint32_t, kSecretLimbs> limbs = ToLimbs(secret);
  // The coefficients a_1..a_{t-1} of every limb's polynomial come from a stream under a fresh
  // key; each share replays the stream, highest degree first, for Horner's rule
  // y = ((a_{t-1} x + a_{t-2}) x + ... + a_1) x + a_0.
  Key coefficient_key;
  random.Fill(coefficient_key);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    SecretRandom coefficients(coefficient_key);
    std::array<std::uint32_t, kSecretLimbs> value{};
    for (std::uint32_t degree = threshold - 1; degree >= 1; --degree) {
      for (std::size_t limb = 0; limb < kSecretLimbs; ++limb) {
        value[limb] = Add(Mul(value[limb], xs[i]), RandomElement(coefficients));
      }
    }
    shares[i].x = xs[i];
    for (std::size_t limb = 0; limb < kSecretLimbs; ++limb) {
      shares[i].y[limb] = Add(Mul(value[limb], xs[i]), limbs[limb]);
    }
    Wipe(std::as_writable_bytes(std::span(value)));
  }
  Wipe(coefficient_key);
  Wipe(std::as_writable_bytes(std::span(limbs)));
  return Status::Ok();
}

Result<Key> CombineShares(std::span<const Share> shares, std::uint32_t threshold) {
  if (threshold == 0 || shares.size() < threshold) {
    return Status::InvalidArgument("fewer shares than the threshold");
  }
  shares = shares.first(threshold);
  std::array<std::uint32_t, kSecretLimbs> limbs{};
  for (std::size_t i = 0; i < shares.size(); ++i) {
    if (shares[i].x == 0 || shares[i].x >= kShamirPrime) {
      return Status::InvalidArgument("a share's evaluation point is outside [1, 2^31 - 1)");
    }
    // Lagrange basis at 0: prod_{j != i} x_j / (x_j - x_i).
    std::uint32_t numerator = 1;
    std::uint32_t denominator = 1;
    for (std::size_t j = 0; j < shares.size(); ++j) {
      if (j == i) continue;
      if (shares[j].x == shares[i].x) {
        return Status::InvalidArgument("two shares have the same evaluation point");
      }
      numerator = Mul(numerator, shares[j].x);
      denominator = Mul(denominator, Sub(shares[j].x, shares[i].x));
    }
    const std::uint32_t basis = Mul(numerator, Inverse(denominator));
    for (std::size_t limb = 0; limb < kSecretLimbs; ++limb) {
      limbs[limb] = Add(limbs[limb], Mul(basis, shares[i].y[limb]));
    }
  }
  Key secret{};
  bool fits = true;
  for (std::size_t limb = 0; limb < kSecretLimbs; ++limb) {
    const std::size_t first_bit = limb * kLimbBits;
    const std::size_t bits = std::min(kLimbBits, kKeyBytes * 8 - first_bit);
    if ((limbs[limb] >> bits) != 0) fits = false;
    for (std::size_t bit = 0; bit < bits; bit += 8) {
      secret[(first_bit + bit) / 8] = static_cast<std::byte>(limbs[limb] >> bit);
    }
  }
  Wipe(std::as_writable_bytes(std::span(limbs)));
  if (!fits) {
    Wipe(secret);
    return Status::DataLoss(
        "the shares do not interpolate to a secret (they do not belong together)");
  }
  return secret;
}

void WriteShare(const Share& share, std::span<std::byte, kShareBytes> out) {
  for (std::size_t limb = 0; limb < kSecretLimbs; ++limb) {
    PutWord(share.y[limb], std::span(out).subspan(4 * limb, 4));
  }
}

Share ReadShare(std::span<const std::byte, kShareBytes> in, std::uint32_t x) {
  Share share;
  share.x = x;
  for (std::size_t limb = 0; limb < kSecretLimbs; ++limb) {
    share.y[limb] = GetWord(std::span(in).subspan(4 * limb, 4));
  }
  return share;
}

}  // namespace edgesgd::secagg

#include "edgesgd/secagg/shamir.h"

#include <algorithm>

namespace edgesgd::secagg {
namespace {

// An element of GF(p), p = 2^127 - 1, as four little-endian words; canonical below p.
using Element = FieldElement;
constexpr std::uint32_t kTopMask = 0x7FFFFFFFu;                  // bits 96..126 of the top word
constexpr std::size_t kHalfBits = kSecretBits / kShareElements;  // 126

constexpr bool IsPrime(const Element& e) {
  return e[0] == ~0u && e[1] == ~0u && e[2] == ~0u && e[3] == kTopMask;
}

// Adds `value` (below 2^32) at word 0 and carries; the caller knows the sum fits 128 bits.
constexpr void AddSmall(Element& e, std::uint32_t value) {
  std::uint64_t carry = value;
  for (std::size_t w = 0; w < kElementWords && carry != 0; ++w) {
    const std::uint64_t sum = std::uint64_t{e[w]} + carry;
    e[w] = static_cast<std::uint32_t>(sum);
    carry = sum >> 32;
  }
}

// Any 128-bit value to its canonical element: 2^127 = 1 (mod p), so the top bit folds onto
// bit 0; two folds leave a value of at most p, and p itself is 0.
constexpr Element Canonical(Element e) {
  for (int fold = 0; fold < 2; ++fold) {
    const std::uint32_t top = e[3] >> 31;
    e[3] &= kTopMask;
    AddSmall(e, top);
  }
  return IsPrime(e) ? Element{} : e;
}

// a + b for a, b at most p (the sum stays below 2^128).
constexpr Element Add(const Element& a, const Element& b) {
  Element sum{};
  std::uint64_t carry = 0;
  for (std::size_t w = 0; w < kElementWords; ++w) {
    const std::uint64_t word = std::uint64_t{a[w]} + b[w] + carry;
    sum[w] = static_cast<std::uint32_t>(word);
    carry = word >> 32;
  }
  return Canonical(sum);
}

// p - b is b's complement in 127 bits.
constexpr Element Sub(const Element& a, const Element& b) {
  return Add(a, Element{~b[0], ~b[1], ~b[2], ~b[3] & kTopMask});
}

constexpr Element Mul(const Element& a, const Element& b) {
  std::array<std::uint32_t, 2 * kElementWords> product{};
  for (std::size_t i = 0; i < kElementWords; ++i) {
    std::uint64_t carry = 0;
    for (std::size_t j = 0; j < kElementWords; ++j) {
      const std::uint64_t word = std::uint64_t{a[i]} * b[j] + product[i + j] + carry;
      product[i + j] = static_cast<std::uint32_t>(word);
      carry = word >> 32;
    }
    product[i + kElementWords] = static_cast<std::uint32_t>(carry);
  }
  // product = high * 2^127 + low, and 2^127 = 1: the result is low + high (both below 2^127).
  const Element low{product[0], product[1], product[2], product[3] & kTopMask};
  Element high{};
  for (std::size_t w = 0; w < kElementWords; ++w) {
    high[w] = (product[w + 3] >> 31) | (product[w + 4] << 1);
  }
  return Add(low, high);
}

// Fermat: a^(p-2), p - 2 = 2^127 - 3 (every bit of 0..126 set but bit 1).
constexpr Element Inverse(const Element& a) {
  Element result{1, 0, 0, 0};
  Element base = a;
  for (std::size_t bit = 0; bit < 127; ++bit) {
    if (bit != 1) result = Mul(result, base);
    base = Mul(base, base);
  }
  return result;
}

constexpr Element FromWord(std::uint32_t word) { return Element{word, 0, 0, 0}; }

// Uniform in [0, p) by rejection: 127-bit draws, of which only p itself is refused.
Element RandomElement(SecretRandom& random) {
  for (;;) {
    Element candidate{};
    for (std::uint32_t& word : candidate) word = random.NextWord();
    candidate[3] &= kTopMask;
    if (!IsPrime(candidate)) return candidate;
  }
}

bool BitOf(const Key& key, std::size_t bit) {
  return ((std::to_integer<std::uint8_t>(key[bit / 8]) >> (bit % 8)) & 1u) != 0;
}

// Bits [126 h, 126 h + 126) of the secret as half h.
std::array<Element, kShareElements> ToHalves(const Key& secret) {
  std::array<Element, kShareElements> halves{};
  for (std::size_t bit = 0; bit < kSecretBits; ++bit) {
    if (!BitOf(secret, bit)) continue;
    const std::size_t at = bit % kHalfBits;
    halves[bit / kHalfBits][at / 32] |= 1u << (at % 32);
  }
  return halves;
}

bool PointsValid(std::span<const std::uint32_t> xs) {
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (xs[i] == 0) return false;
    for (std::size_t j = 0; j < i; ++j) {
      if (xs[j] == xs[i]) return false;
    }
  }
  return true;
}

Element ElementOf(const Share& share, std::size_t e) {
  Element out{};
  for (std::size_t w = 0; w < kElementWords; ++w) out[w] = share.y[kElementWords * e + w];
  return Canonical(out);
}
void SetElement(Share& share, std::size_t e, const Element& value) {
  for (std::size_t w = 0; w < kElementWords; ++w) share.y[kElementWords * e + w] = value[w];
}

template <typename T>
void WipeValue(T& value) {
  Wipe(std::as_writable_bytes(std::span(&value, 1)));
}

// The secret whose halves are `halves`, which it wipes. Each half must lie below 2^126; anything
// else is not a secret that was shared.
Result<Key> SecretFromHalves(std::array<Element, kShareElements>& halves) {
  const bool fits = std::all_of(halves.begin(), halves.end(),
                                [](const Element& half) { return (half[3] >> 30) == 0; });
  Key secret{};
  if (fits) {
    for (std::size_t bit = 0; bit < kSecretBits; ++bit) {
      const std::size_t at = bit % kHalfBits;
      if (((halves[bit / kHalfBits][at / 32] >> (at % 32)) & 1u) != 0) {
        secret[bit / 8] |= static_cast<std::byte>(1u << (bit % 8));
      }
    }
  }
  WipeValue(halves);
  if (!fits) {
    return Status::DataLoss(
        "the shares do not interpolate to a secret (they do not belong together)");
  }
  return secret;
}

}  // namespace

Status SplitSecret(const Key& secret, std::uint32_t threshold, std::span<const std::uint32_t> xs,
                   SecretRandom& random, std::span<Share> shares) {
  if ((std::to_integer<std::uint8_t>(secret[kKeyBytes - 1]) & 0xF0u) != 0) {
    return Status::InvalidArgument("a secret to share holds at most 252 bits");
  }
  if (threshold == 0 || threshold > xs.size()) {
    return Status::InvalidArgument("threshold must be between 1 and the number of holders");
  }
  if (shares.size() != xs.size()) {
    return Status::InvalidArgument("one share per evaluation point");
  }
  if (!PointsValid(xs)) {
    return Status::InvalidArgument("evaluation points must be distinct and nonzero");
  }
  std::array<Element, kShareElements> halves = ToHalves(secret);
  // The coefficients a_1..a_{t-1} of both polynomials come from a stream under a fresh key; each
  // share replays the stream, highest degree first, for Horner's rule
  // y = ((a_{t-1} x + a_{t-2}) x + ... + a_1) x + a_0.
  Key coefficient_key;
  random.Fill(coefficient_key);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    SecretRandom coefficients(coefficient_key);
    const Element x = FromWord(xs[i]);
    std::array<Element, kShareElements> value{};
    for (std::uint32_t degree = threshold - 1; degree >= 1; --degree) {
      for (Element& v : value) v = Add(Mul(v, x), RandomElement(coefficients));
    }
    shares[i].x = xs[i];
    for (std::size_t e = 0; e < kShareElements; ++e) {
      SetElement(shares[i], e, Add(Mul(value[e], x), halves[e]));
    }
    WipeValue(value);
  }
  Wipe(coefficient_key);
  WipeValue(halves);
  return Status::Ok();
}

Result<Key> CombineShares(std::span<const Share> shares, std::uint32_t threshold) {
  if (threshold == 0 || shares.size() < threshold) {
    return Status::InvalidArgument("fewer shares than the threshold");
  }
  shares = shares.first(threshold);
  // Lagrange at 0: secret = sum_i y_i prod_{j != i} x_j / (x_j - x_i) = P sum_i y_i / (x_i d_i),
  // with P = prod_j x_j and d_i = prod_{j != i} (x_j - x_i). The sum is kept as one fraction
  // num / den, so the whole interpolation takes a single inversion.
  Element product = FromWord(1);
  for (const Share& share : shares) {
    if (share.x == 0) return Status::InvalidArgument("a share's evaluation point is 0");
    product = Mul(product, FromWord(share.x));
  }
  std::array<Element, kShareElements> numerators{};
  Element denominator = FromWord(1);
  for (std::size_t i = 0; i < shares.size(); ++i) {
    Element term = FromWord(shares[i].x);
    for (std::size_t j = 0; j < shares.size(); ++j) {
      if (j == i) continue;
      if (shares[j].x == shares[i].x) {
        return Status::InvalidArgument("two shares have the same evaluation point");
      }
      term = Mul(term, Sub(FromWord(shares[j].x), FromWord(shares[i].x)));
    }
    for (std::size_t e = 0; e < kShareElements; ++e) {
      numerators[e] = Add(Mul(numerators[e], term), Mul(ElementOf(shares[i], e), denominator));
    }
    denominator = Mul(denominator, term);
  }
  const Element scale = Mul(product, Inverse(denominator));
  std::array<Element, kShareElements> halves{};
  for (std::size_t e = 0; e < kShareElements; ++e) halves[e] = Mul(numerators[e], scale);
  WipeValue(numerators);
  return SecretFromHalves(halves);
}

namespace {

// A polynomial over GF(p) in scratch: coefficients lowest degree first, and its degree (-1 for
// the zero polynomial). Its span is long enough for every degree the decoder reaches.
struct Polynomial {
  std::span<Element> c;
  int degree = -1;

  void Trim() {
    while (degree >= 0 && c[static_cast<std::size_t>(degree)] == Element{}) --degree;
  }
  void Set(int to_degree) {
    std::fill(c.begin(), c.end(), Element{});
    degree = to_degree;
  }
  const Element& Lead() const { return c[static_cast<std::size_t>(degree)]; }
};

// this -= factor * X^shift * other, for other's degree + shift within this one's span.
void SubtractScaled(Polynomial& into, const Element& factor, std::size_t shift,
                    const Polynomial& other) {
  for (int k = 0; k <= other.degree; ++k) {
    Element& target = into.c[static_cast<std::size_t>(k) + shift];
    target = Sub(target, Mul(factor, other.c[static_cast<std::size_t>(k)]));
  }
  into.degree = std::max(into.degree, other.degree + static_cast<int>(shift));
  into.Trim();
}

// Divides `dividend` by `divisor` (nonzero), leaving the remainder in `dividend` and the quotient
// in `quotient` (cleared first).
void Divide(Polynomial& dividend, const Polynomial& divisor, Polynomial& quotient) {
  quotient.Set(-1);
  const Element lead_inverse = Inverse(divisor.Lead());
  while (dividend.degree >= divisor.degree) {
    const auto shift = static_cast<std::size_t>(dividend.degree - divisor.degree);
    const Element factor = Mul(dividend.Lead(), lead_inverse);
    quotient.c[shift] = factor;
    quotient.degree = std::max(quotient.degree, static_cast<int>(shift));
    SubtractScaled(dividend, factor, shift, divisor);  // cancels the leading term exactly
  }
}

Element Evaluate(const Polynomial& poly, const Element& x) {
  Element value{};
  for (int k = poly.degree; k >= 0; --k)
    value = Add(Mul(value, x), poly.c[static_cast<std::size_t>(k)]);
  return value;
}

// Half `half` of the polynomial of degree below `threshold` within (m - threshold) / 2 of the m
// shares (Gao 2003): the interpolant g1 of all shares is reduced against g0 = prod (X - x_i) by the
// extended Euclidean algorithm until the remainder's degree falls below (m + threshold) / 2; the
// remainder divided by its cofactor v is the polynomial, and v vanishes on the wrong shares.
// Marks the shares the result disagrees with in `wrong`.
Result<Element> DecodeHalf(std::span<const Share> shares, std::uint32_t threshold, std::size_t half,
                           std::span<Element> scratch, std::span<std::uint8_t> wrong) {
  const std::size_t m = shares.size();
  const std::size_t length = m + 1;
  Polynomial r0{scratch.subspan(0, length)}, r1{scratch.subspan(length, length)};
  Polynomial v0{scratch.subspan(2 * length, length)}, v1{scratch.subspan(3 * length, length)};
  Polynomial work{scratch.subspan(4 * length, length)};
  r0.Set(0);
  r0.c[0] = FromWord(1);
  for (const Share& share : shares) {  // r0 *= (X - x)
    const Element x = FromWord(share.x);
    for (std::size_t k = static_cast<std::size_t>(r0.degree) + 1; k > 0; --k) {
      r0.c[k] = Sub(r0.c[k - 1], Mul(x, r0.c[k]));
    }
    r0.c[0] = Sub(Element{}, Mul(x, r0.c[0]));
    ++r0.degree;
  }
  // r1 = sum_i y_i g0 / ((X - x_i) g0'(x_i)), and g0'(x_i) is the quotient's value at x_i.
  r1.Set(-1);
  for (const Share& share : shares) {
    const Element x = FromWord(share.x);
    work.Set(static_cast<int>(m) - 1);
    work.c[m - 1] = r0.c[m];
    for (std::size_t k = m - 1; k > 0; --k) work.c[k - 1] = Add(r0.c[k], Mul(x, work.c[k]));
    const Element scale = Mul(ElementOf(share, half), Inverse(Evaluate(work, x)));
    for (std::size_t k = 0; k < m; ++k) r1.c[k] = Add(r1.c[k], Mul(scale, work.c[k]));
  }
  r1.degree = static_cast<int>(m) - 1;
  r1.Trim();
  v0.Set(-1);
  v1.Set(0);
  v1.c[0] = FromWord(1);
  const int stop = static_cast<int>(m + threshold);  // while 2 deg r1 >= m + t
  while (r1.degree >= 0 && 2 * r1.degree >= stop) {
    const Element lead_inverse = Inverse(r1.Lead());
    while (r0.degree >= r1.degree) {
      const auto shift = static_cast<std::size_t>(r0.degree - r1.degree);
      const Element factor = Mul(r0.Lead(), lead_inverse);
      SubtractScaled(r0, factor, shift, r1);
      SubtractScaled(v0, factor, shift, v1);
    }
    std::swap(r0, r1);
    std::swap(v0, v1);
  }
  if (v1.degree < 0 || 2 * v1.degree > static_cast<int>(m - threshold)) {
    return Status::DataLoss("more shares are wrong than decoding can correct");
  }
  Divide(r1, v1, work);
  if (r1.degree >= 0 || work.degree >= static_cast<int>(threshold)) {
    return Status::DataLoss("more shares are wrong than decoding can correct");
  }
  for (std::size_t i = 0; i < m; ++i) {
    if (Evaluate(work, FromWord(shares[i].x)) != ElementOf(shares[i], half)) wrong[i] = 1;
  }
  return work.degree < 0 ? Element{} : work.c[0];
}

}  // namespace

Result<Key> DecodeShares(std::span<const Share> shares, std::uint32_t threshold,
                         std::span<FieldElement> scratch, std::span<std::uint8_t> wrong) {
  if (threshold == 0 || shares.size() < threshold) {
    return Status::InvalidArgument("fewer shares than the threshold");
  }
  if (wrong.size() != shares.size() || scratch.size() < DecodeScratchElements(shares.size())) {
    return Status::InvalidArgument("decoding needs a flag per share and its scratch");
  }
  for (std::size_t i = 0; i < shares.size(); ++i) {
    if (shares[i].x == 0) return Status::InvalidArgument("a share's evaluation point is 0");
    for (std::size_t j = 0; j < i; ++j) {
      if (shares[j].x == shares[i].x) {
        return Status::InvalidArgument("two shares have the same evaluation point");
      }
    }
  }
  std::fill(wrong.begin(), wrong.end(), std::uint8_t{0});
  std::array<Element, kShareElements> halves{};
  Status status = Status::Ok();
  for (std::size_t half = 0; half < kShareElements && status.ok(); ++half) {
    Result<Element> decoded = DecodeHalf(shares, threshold, half, scratch, wrong);
    if (decoded.ok()) {
      halves[half] = decoded.value();
    } else {
      status = decoded.status();
    }
  }
  Wipe(std::as_writable_bytes(scratch));
  if (!status.ok()) {
    WipeValue(halves);
    return status;
  }
  return SecretFromHalves(halves);
}

void WriteShare(const Share& share, std::span<std::byte, kShareBytes> out) {
  for (std::size_t w = 0; w < kShareWords; ++w) {
    for (std::size_t b = 0; b < 4; ++b)
      out[4 * w + b] = static_cast<std::byte>(share.y[w] >> (8 * b));
  }
}

Share ReadShare(std::span<const std::byte, kShareBytes> in, std::uint32_t x) {
  Share share;
  share.x = x;
  for (std::size_t w = 0; w < kShareWords; ++w) {
    for (std::size_t b = 0; b < 4; ++b) {
      share.y[w] |= std::uint32_t{std::to_integer<std::uint8_t>(in[4 * w + b])} << (8 * b);
    }
  }
  return share;
}

}  // namespace edgesgd::secagg

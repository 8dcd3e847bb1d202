#include "format.h"

#include <cstdint>
#include <type_traits>

namespace edgesgd::platform::internal {
namespace {

// Bounds on what one conversion produces, so every conversion fits a small stack buffer: long
// precisions are clamped (no log line needs 40 decimals).
constexpr int kMaxIntegerPrecision = 32;
constexpr int kMaxFloatPrecision = 17;
constexpr std::size_t kBodyCapacity = 64;

class Writer {
 public:
  explicit Writer(std::span<char> out) : out_(out) {}

  void Put(char c) {
    if (out_.size() > 1 && length_ < out_.size() - 1) out_[length_++] = c;
  }
  void Put(const char* text, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) Put(text[i]);
  }
  void Repeat(char c, int count) {
    for (int i = 0; i < count; ++i) Put(c);
  }
  std::size_t Finish() {
    if (!out_.empty()) out_[length_] = '\0';
    return length_;
  }

 private:
  std::span<char> out_;
  std::size_t length_ = 0;
};

struct Spec {
  bool left = false;
  bool plus = false;
  bool space = false;
  bool zero = false;
  bool alternate = false;
  int width = 0;
  int precision = -1;  // -1: not given
  enum class Length : std::uint8_t {
    kNone,
    kChar,
    kShort,
    kLong,
    kLongLong,
    kSize,
    kMax,
    kPtrdiff
  };
  Length length = Length::kNone;
};

// A conversion's text split as sign/prefix ("-", "0x") and digits, so zero padding goes between.
struct Body {
  char prefix[3] = {};
  std::size_t prefix_length = 0;
  char digits[kBodyCapacity] = {};
  std::size_t digit_count = 0;

  void AddPrefix(char c) { prefix[prefix_length++] = c; }
  void Add(char c) {
    if (digit_count < sizeof(digits)) digits[digit_count++] = c;
  }
  void Add(const char* text) {
    while (*text != '\0') Add(*text++);
  }
};

void Emit(Writer& writer, const Spec& spec, const Body& body, bool zero_pad_allowed) {
  const int length = static_cast<int>(body.prefix_length + body.digit_count);
  const int padding = spec.width > length ? spec.width - length : 0;
  if (spec.left) {
    writer.Put(body.prefix, body.prefix_length);
    writer.Put(body.digits, body.digit_count);
    writer.Repeat(' ', padding);
  } else if (spec.zero && zero_pad_allowed) {
    writer.Put(body.prefix, body.prefix_length);
    writer.Repeat('0', padding);
    writer.Put(body.digits, body.digit_count);
  } else {
    writer.Repeat(' ', padding);
    writer.Put(body.prefix, body.prefix_length);
    writer.Put(body.digits, body.digit_count);
  }
}

void AddSign(Body& body, const Spec& spec, bool negative) {
  if (negative) {
    body.AddPrefix('-');
  } else if (spec.plus) {
    body.AddPrefix('+');
  } else if (spec.space) {
    body.AddPrefix(' ');
  }
}

// Appends `value` in `base`, at least `min_digits` digits.
void AddUnsigned(Body& body, std::uint64_t value, unsigned base, bool upper, int min_digits) {
  char reversed[kBodyCapacity];
  int count = 0;
  const char* digit_chars = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  while (value != 0 && count < static_cast<int>(sizeof(reversed))) {
    reversed[count++] = digit_chars[value % base];
    value /= base;
  }
  while (count < min_digits && count < static_cast<int>(sizeof(reversed))) reversed[count++] = '0';
  while (count > 0) body.Add(reversed[--count]);
}

void FormatInteger(Writer& writer, const Spec& spec, char conversion, std::uint64_t magnitude,
                   bool negative) {
  Body body;
  const bool is_signed = conversion == 'd' || conversion == 'i';
  if (is_signed) AddSign(body, spec, negative);
  unsigned base = 10;
  if (conversion == 'x' || conversion == 'X' || conversion == 'p') base = 16;
  if (conversion == 'o') base = 8;
  if ((spec.alternate && base == 16 && magnitude != 0) || conversion == 'p') {
    body.AddPrefix('0');
    body.AddPrefix(conversion == 'X' ? 'X' : 'x');
  }
  // C: the default precision is 1, and precision 0 prints nothing for the value 0.
  int min_digits = spec.precision < 0 ? 1 : spec.precision;
  if (min_digits > kMaxIntegerPrecision) min_digits = kMaxIntegerPrecision;
  if (spec.alternate && base == 8) {
    // '#' with %o: the first digit must be 0.
    int digits = 0;
    for (std::uint64_t v = magnitude; v != 0; v /= 8) ++digits;
    if (min_digits <= digits) min_digits = digits + 1;
  }
  AddUnsigned(body, magnitude, base, conversion == 'X', min_digits);
  // An explicit precision turns the 0 flag off for integers.
  Emit(writer, spec, body, spec.precision < 0);
}

constexpr std::uint64_t Pow10(int exponent) {
  std::uint64_t result = 1;
  for (int i = 0; i < exponent; ++i) result *= 10;
  return result;
}

// Appends `value` (>= 0, small enough that value * 10^precision < 2^63) in fixed notation.
void AddFixed(Body& body, double value, int precision, bool alternate) {
  const std::uint64_t scale = Pow10(precision);
  const auto scaled = static_cast<std::uint64_t>(value * static_cast<double>(scale) + 0.5);
  AddUnsigned(body, scaled / scale, 10, false, 1);
  if (precision > 0 || alternate) body.Add('.');
  if (precision > 0) AddUnsigned(body, scaled % scale, 10, false, precision);
}

// value = mantissa * 10^exponent with 1 <= mantissa < 10 (value > 0, finite). Repeated scaling
// loses a few ulps, which is fine for logs and avoids pulling in libm.
double Normalize(double value, int& exponent) {
  exponent = 0;
  while (value >= 1e16) {
    value /= 1e16;
    exponent += 16;
  }
  while (value >= 10.0) {
    value /= 10.0;
    ++exponent;
  }
  while (value > 0.0 && value < 1e-16) {
    value *= 1e16;
    exponent -= 16;
  }
  while (value > 0.0 && value < 1.0) {
    value *= 10.0;
    --exponent;
  }
  return value;
}

// Mantissa rounded to `precision` decimals, renormalised when rounding carries to 10.
double RoundedMantissa(double value, int precision, int& exponent) {
  double mantissa = Normalize(value, exponent);
  const auto scale = static_cast<double>(Pow10(precision));
  if (static_cast<double>(static_cast<std::uint64_t>(mantissa * scale + 0.5)) >= 10.0 * scale) {
    mantissa /= 10.0;
    ++exponent;
  }
  return mantissa;
}

void AddExponent(Body& body, int exponent, bool upper) {
  body.Add(upper ? 'E' : 'e');
  body.Add(exponent < 0 ? '-' : '+');
  AddUnsigned(body, static_cast<std::uint64_t>(exponent < 0 ? -exponent : exponent), 10, false, 2);
}

// Removes trailing zeros of the fraction (and a bare '.') from digits[begin, end); %g without '#'.
void StripFractionZeros(Body& body, std::size_t begin, std::size_t end, std::size_t tail_start) {
  bool has_point = false;
  for (std::size_t i = begin; i < end; ++i) has_point |= body.digits[i] == '.';
  if (!has_point) return;
  std::size_t new_end = end;
  while (new_end > begin && body.digits[new_end - 1] == '0') --new_end;
  if (new_end > begin && body.digits[new_end - 1] == '.') --new_end;
  // Move the exponent (if any) down over the removed characters.
  std::size_t out = new_end;
  for (std::size_t i = tail_start; i < body.digit_count; ++i) body.digits[out++] = body.digits[i];
  body.digit_count = out;
}

void FormatFloat(Writer& writer, const Spec& spec, char conversion, double value) {
  Body body;
  const bool upper = conversion == 'F' || conversion == 'E' || conversion == 'G';
  const bool negative = value < 0.0 || (value == 0.0 && 1.0 / value < 0.0);
  AddSign(body, spec, negative);
  if (negative) value = -value;
  if (value != value) {
    body.Add(upper ? "NAN" : "nan");
    Emit(writer, spec, body, false);
    return;
  }
  if (value > 1.7976931348623157e308) {
    body.Add(upper ? "INF" : "inf");
    Emit(writer, spec, body, false);
    return;
  }
  int precision = spec.precision < 0 ? 6 : spec.precision;
  if (precision > kMaxFloatPrecision) precision = kMaxFloatPrecision;
  const char lower = static_cast<char>(conversion | 0x20);
  if (lower == 'g') {
    const int significant = precision == 0 ? 1 : precision;
    int exponent = 0;
    if (value != 0.0) RoundedMantissa(value, significant - 1, exponent);
    const std::size_t begin = body.digit_count;
    // Fixed form when C says so and the digits fit 64-bit fixed point (10^19 is the largest
    // power of ten below 2^64).
    if (exponent >= -4 && exponent < significant && significant - 1 - exponent <= 19 &&
        value * static_cast<double>(Pow10(significant - 1 - exponent)) < 9.2e18) {
      AddFixed(body, value, significant - 1 - exponent, spec.alternate);
      if (!spec.alternate) StripFractionZeros(body, begin, body.digit_count, body.digit_count);
    } else {
      const double mantissa = RoundedMantissa(value, significant - 1, exponent);
      AddFixed(body, mantissa, significant - 1, spec.alternate);
      const std::size_t mantissa_end = body.digit_count;
      AddExponent(body, exponent, upper);
      if (!spec.alternate) StripFractionZeros(body, begin, mantissa_end, mantissa_end);
    }
  } else if (lower == 'f' && value * static_cast<double>(Pow10(precision)) < 9.2e18) {
    AddFixed(body, value, precision, spec.alternate);
  } else {
    // %e, and %f of values too large for 64-bit fixed point (printed in %e form instead).
    int exponent = 0;
    const double mantissa = value == 0.0 ? 0.0 : RoundedMantissa(value, precision, exponent);
    AddFixed(body, mantissa, precision, spec.alternate);
    AddExponent(body, exponent, upper);
  }
  Emit(writer, spec, body, true);
}

int ParseNumber(const char*& p) {
  int value = 0;
  while (*p >= '0' && *p <= '9') {
    if (value < 10000) value = value * 10 + (*p - '0');
    ++p;
  }
  return value;
}

template <typename T>
std::uint64_t Magnitude(T value, bool& negative) {
  if constexpr (std::is_signed_v<T>) {
    negative = value < 0;
    // Through the unsigned type, so the most negative value does not overflow.
    const auto bits = static_cast<std::make_unsigned_t<T>>(value);
    return negative ? static_cast<std::uint64_t>(static_cast<std::make_unsigned_t<T>>(0u - bits))
                    : static_cast<std::uint64_t>(bits);
  } else {
    negative = false;
    return static_cast<std::uint64_t>(value);
  }
}

std::uint64_t SignedArgument(const Spec& spec, std::va_list& args, bool& negative) {
  switch (spec.length) {
    case Spec::Length::kChar:
      return Magnitude(static_cast<signed char>(va_arg(args, int)), negative);
    case Spec::Length::kShort:
      return Magnitude(static_cast<short>(va_arg(args, int)), negative);
    case Spec::Length::kLong:
      return Magnitude(va_arg(args, long), negative);
    case Spec::Length::kLongLong:
      return Magnitude(va_arg(args, long long), negative);
    case Spec::Length::kSize:
      return Magnitude(va_arg(args, std::make_signed_t<std::size_t>), negative);
    case Spec::Length::kMax:
      return Magnitude(va_arg(args, std::intmax_t), negative);
    case Spec::Length::kPtrdiff:
      return Magnitude(va_arg(args, std::ptrdiff_t), negative);
    case Spec::Length::kNone:
      break;
  }
  return Magnitude(va_arg(args, int), negative);
}

std::uint64_t UnsignedArgument(const Spec& spec, std::va_list& args) {
  bool negative = false;
  switch (spec.length) {
    case Spec::Length::kChar:
      return Magnitude(static_cast<unsigned char>(va_arg(args, unsigned)), negative);
    case Spec::Length::kShort:
      return Magnitude(static_cast<unsigned short>(va_arg(args, unsigned)), negative);
    case Spec::Length::kLong:
      return Magnitude(va_arg(args, unsigned long), negative);
    case Spec::Length::kLongLong:
      return Magnitude(va_arg(args, unsigned long long), negative);
    case Spec::Length::kSize:
      return Magnitude(va_arg(args, std::size_t), negative);
    case Spec::Length::kMax:
      return Magnitude(va_arg(args, std::uintmax_t), negative);
    case Spec::Length::kPtrdiff:
      return Magnitude(
          static_cast<std::make_unsigned_t<std::ptrdiff_t>>(va_arg(args, std::ptrdiff_t)),
          negative);
    case Spec::Length::kNone:
      break;
  }
  return Magnitude(va_arg(args, unsigned), negative);
}

}  // namespace

std::size_t FormatV(std::span<char> out, const char* format, std::va_list args_in) {
  Writer writer(out);
  // A copy, so that va_arg through a reference works the same whether va_list is an array type
  // (x86-64) or a struct/pointer (ARM).
  std::va_list args;
  va_copy(args, args_in);
  const char* p = format;
  while (*p != '\0') {
    if (*p != '%') {
      writer.Put(*p++);
      continue;
    }
    const char* const spec_start = p++;
    Spec spec;
    for (bool more = true; more;) {
      switch (*p) {
        case '-':
          spec.left = true;
          ++p;
          break;
        case '+':
          spec.plus = true;
          ++p;
          break;
        case ' ':
          spec.space = true;
          ++p;
          break;
        case '0':
          spec.zero = true;
          ++p;
          break;
        case '#':
          spec.alternate = true;
          ++p;
          break;
        default:
          more = false;
      }
    }
    if (*p == '*') {
      spec.width = va_arg(args, int);
      if (spec.width < 0) {
        spec.left = true;
        spec.width = spec.width == -2147483647 - 1 ? 0 : -spec.width;
      }
      ++p;
    } else {
      spec.width = ParseNumber(p);
    }
    if (*p == '.') {
      ++p;
      if (*p == '*') {
        spec.precision = va_arg(args, int);  // negative: as if not given
        if (spec.precision < 0) spec.precision = -1;
        ++p;
      } else {
        spec.precision = ParseNumber(p);
      }
    }
    switch (*p) {
      case 'h':
        ++p;
        if (*p == 'h') {
          spec.length = Spec::Length::kChar;
          ++p;
        } else {
          spec.length = Spec::Length::kShort;
        }
        break;
      case 'l':
        ++p;
        if (*p == 'l') {
          spec.length = Spec::Length::kLongLong;
          ++p;
        } else {
          spec.length = Spec::Length::kLong;
        }
        break;
      case 'z':
        spec.length = Spec::Length::kSize;
        ++p;
        break;
      case 'j':
        spec.length = Spec::Length::kMax;
        ++p;
        break;
      case 't':
        spec.length = Spec::Length::kPtrdiff;
        ++p;
        break;
      case 'L':
        ++p;
        break;  // long double is double on ARM EABI
      default:
        break;
    }
    const char conversion = *p;
    if (conversion == '\0') {
      writer.Put(spec_start, static_cast<std::size_t>(p - spec_start));
      break;
    }
    ++p;
    switch (conversion) {
      case '%':
        writer.Put('%');
        break;
      case 'd':
      case 'i': {
        bool negative = false;
        const std::uint64_t magnitude = SignedArgument(spec, args, negative);
        FormatInteger(writer, spec, conversion, magnitude, negative);
        break;
      }
      case 'u':
      case 'x':
      case 'X':
      case 'o':
        FormatInteger(writer, spec, conversion, UnsignedArgument(spec, args), false);
        break;
      case 'p': {
        Spec pointer_spec = spec;
        pointer_spec.alternate = false;
        FormatInteger(writer, pointer_spec, 'p',
                      reinterpret_cast<std::uintptr_t>(va_arg(args, const void*)), false);
        break;
      }
      case 'c': {
        Body body;
        body.Add(static_cast<char>(va_arg(args, int)));
        Emit(writer, spec, body, false);
        break;
      }
      case 's': {
        const char* text = va_arg(args, const char*);
        if (text == nullptr) text = "(null)";
        int length = 0;
        while (text[length] != '\0' && (spec.precision < 0 || length < spec.precision)) ++length;
        const int padding = spec.width > length ? spec.width - length : 0;
        if (!spec.left) writer.Repeat(' ', padding);
        writer.Put(text, static_cast<std::size_t>(length));
        if (spec.left) writer.Repeat(' ', padding);
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G':
        FormatFloat(writer, spec, conversion, va_arg(args, double));
        break;
      case 'n':
        (void)va_arg(args, void*);  // writing through a log argument is never wanted
        break;
      default:
        writer.Put(spec_start, static_cast<std::size_t>(p - spec_start));
        break;
    }
  }
  va_end(args);
  return writer.Finish();
}

std::size_t Format(std::span<char> out, const char* format, ...) {
  std::va_list args;
  va_start(args, format);
  const std::size_t length = FormatV(out, format, args);
  va_end(args);
  return length;
}

}  // namespace edgesgd::platform::internal

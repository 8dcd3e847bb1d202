#include "cli/number_checks.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

namespace edgesgd::cli {
namespace {

CLI::Validator SignCheck(bool zero_allowed) {
  const char* wanted = zero_allowed ? "zero or a positive number" : "a positive number";
  return CLI::Validator(
      [zero_allowed, wanted](std::string& text) -> std::string {
        const char* begin = text.c_str();
        char* end = nullptr;
        errno = 0;
        const double value = std::strtod(begin, &end);
        const bool parsed = end != begin && *end == '\0' && errno != ERANGE;
        const bool in_range = parsed && std::isfinite(value) &&
                              value <= static_cast<double>(std::numeric_limits<float>::max()) &&
                              (value > 0.0 || (zero_allowed && value == 0.0));
        if (in_range) return "";
        return std::string("must be ") + wanted + " (at most 3.4e38), not '" + text + "'";
      },
      zero_allowed ? "NONNEGATIVE" : "POSITIVE");
}

}  // namespace

CLI::Validator PositiveFloat() { return SignCheck(false); }
CLI::Validator NonNegativeFloat() { return SignCheck(true); }

}  // namespace edgesgd::cli

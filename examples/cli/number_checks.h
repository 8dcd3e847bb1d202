#pragma once

// Checks for float flags bounded only by their sign. CLI11's PositiveNumber and NonNegativeNumber
// accept infinity and, when they refuse a value, print the largest double as the range's upper
// end; these take finite values a float can hold and say so in a line.

#include <CLI/CLI.hpp>

namespace edgesgd::cli {

// A finite number greater than zero, at most the largest float.
CLI::Validator PositiveFloat();
// Zero or a finite positive number, at most the largest float.
CLI::Validator NonNegativeFloat();

}  // namespace edgesgd::cli

#pragma once

// Spelling suggestions for a mistyped name (a flag, a command, a config-file key): the known
// names nearest to it, when one is near enough to be what was meant.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace edgesgd::cli {

// The Damerau-Levenshtein distance in its optimal-string-alignment form: the fewest insertions,
// deletions, substitutions and swaps of two adjacent characters that turn `a` into `b`, each
// counting 1, no character being edited twice.
std::size_t EditDistance(std::string_view a, std::string_view b);

// The names of `known` nearest to `typed`, in their order there, when they are at most a third of
// `typed`'s length away (at least 1): farther than that a name is another word rather than a
// typo of it. Empty when no name is that near.
std::vector<std::string> NearestNames(std::string_view typed,
                                      const std::vector<std::string>& known);

// "a", "a or b", "a, b or c".
std::string JoinAlternatives(const std::vector<std::string>& names);

}  // namespace edgesgd::cli

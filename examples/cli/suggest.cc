#include "cli/suggest.h"

#include <algorithm>

namespace edgesgd::cli {

std::size_t EditDistance(std::string_view a, std::string_view b) {
  // Three rows of the dynamic programme: distances from a's prefixes of length i - 2, i - 1 and
  // i to each prefix of b (the swap looks two rows back).
  const std::size_t width = b.size() + 1;
  std::vector<std::size_t> before(width), previous(width), current(width);
  for (std::size_t j = 0; j < width; ++j) previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j < width; ++j) {
      const std::size_t substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
    }
    std::swap(before, previous);
    std::swap(previous, current);
  }
  return previous[b.size()];
}

std::vector<std::string> NearestNames(std::string_view typed,
                                      const std::vector<std::string>& known) {
  std::size_t nearest = std::max<std::size_t>(1, typed.size() / 3);
  std::vector<std::string> names;
  for (const std::string& name : known) {
    const std::size_t distance = EditDistance(typed, name);
    if (distance > nearest || std::find(names.begin(), names.end(), name) != names.end()) continue;
    if (distance < nearest) names.clear();
    nearest = distance;
    names.push_back(name);
  }
  return names;
}

std::string JoinAlternatives(const std::vector<std::string>& names) {
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) text += i + 1 == names.size() ? " or " : ", ";
    text += names[i];
  }
  return text;
}

}  // namespace edgesgd::cli

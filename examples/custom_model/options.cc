#include "options.h"

#include <charconv>
#include <string_view>
#include <utility>

namespace custom_model {
namespace {

// std::from_chars over the whole of `text`: "12x" is not a number.
template <typename T>
bool ParseNumber(std::string_view text, T& value) {
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  return error == std::errc() && stop == end;
}

edgesgd::HostError UsageError(std::string message) {
  return edgesgd::HostError(edgesgd::Status::InvalidArgument(), std::move(message));
}

}  // namespace

const char* const kUsage = R"(usage: custom_model [options]

Trains a hand-written two-layer MLP on a CSV file with edgesgd: first in the simulator, then
as a TCP server with 4 workers on loopback (authenticated frames). Workers send top_k updates
with error feedback, each from its own shard of the rows; the last 20 % of the rows are held
out to measure accuracy.

options:
  --out DIR            write the generated data to DIR/two_moons.csv (default: .)
  --csv FILE           train on FILE instead of generating data: a header line, then rows of
                       an integer class label (0, 1, ...) and numeric features
  --csv-label COLUMN   the column of --csv that holds the label: first or last (default: first)
  --rounds N           training rounds of each run (default: 500)
  --k-ratio R          fraction of each tensor top_k sends, in (0, 1] (default: 0.1)
  --seed N             seed of the generated data and the initial model (default: 1)
  --min-accuracy A     fail when a run's held-out accuracy is below A (default: 0.9)
  --verbose            show the connection log of the TCP run
  --help               print this help and exit

exit status: 0 both runs reached --min-accuracy, 1 a run failed or fell short,
             2 bad arguments or unusable data
)";

edgesgd::HostResult<Parsed> ParseOptions(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") return Parsed::kHelp;
    if (flag == "--verbose") {
      options.verbose = true;
      continue;
    }
    if (!flag.starts_with("--")) {
      return UsageError("unexpected argument '" + std::string(flag) + "'");
    }
    if (i + 1 == argc) return UsageError(std::string(flag) + " needs a value");
    const std::string_view value = argv[++i];
    const auto bad = [flag, value](const char* expected) {
      return UsageError(std::string(flag) + " expects " + expected + ", got '" +
                        std::string(value) + "'");
    };
    if (flag == "--out") {
      options.out_dir = value;
    } else if (flag == "--csv") {
      options.csv = value;
    } else if (flag == "--csv-label") {
      if (value != "first" && value != "last") return bad("first or last");
      options.label_last = value == "last";
    } else if (flag == "--rounds") {
      if (!ParseNumber(value, options.rounds) || options.rounds == 0) return bad("a count >= 1");
    } else if (flag == "--k-ratio") {
      if (!ParseNumber(value, options.k_ratio) || !(options.k_ratio > 0 && options.k_ratio <= 1)) {
        return bad("a fraction in (0, 1]");
      }
    } else if (flag == "--seed") {
      if (!ParseNumber(value, options.seed)) return bad("a whole number");
    } else if (flag == "--min-accuracy") {
      if (!ParseNumber(value, options.min_accuracy) ||
          !(options.min_accuracy >= 0 && options.min_accuracy <= 1)) {
        return bad("a fraction in [0, 1]");
      }
    } else {
      return UsageError("unknown option " + std::string(flag));
    }
  }
  if (options.label_last && options.csv.empty()) {
    return UsageError(
        "--csv-label last describes the file of --csv; the generated data has its label first");
  }
  return Parsed::kRun;
}

}  // namespace custom_model

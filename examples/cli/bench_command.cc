// `edgesgd bench codecs`: encode/decode throughput of every codec against memcpy of the same
// buffer, measured in the same run so the figures are comparable on any machine.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/bounded_option.h"
#include "cli/codec_flags.h"
#include "cli/commands.h"
#include "cli/config_file.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/random.h"
#include "edgesgd/platform/clock.h"

namespace edgesgd::cli {
namespace {

struct BenchOptions {
  std::size_t dimension = 1 << 24;
  int repeats = 5;
  bool json = false;
  CodecFlags codec;
  std::uint64_t seed = 1;
};

struct CodecFigures {
  std::string_view codec;
  std::size_t encoded_bytes = 0;
  double encode_seconds = 0;
  double decode_seconds = 0;
};

// Best (minimum) wall time of `repeats` runs of `body`: the figure least disturbed by other
// processes on a shared machine.
template <typename Body>
double BestSeconds(int repeats, Body&& body) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const std::uint64_t start = platform::MonotonicNanos();
    body();
    const double seconds = static_cast<double>(platform::MonotonicNanos() - start) * 1e-9;
    best = std::min(best, seconds);
  }
  return best;
}

// Gradient-like data: standard-normal-ish values (sum of four uniforms, centred), deterministic.
std::vector<float> MakeInput(std::size_t dimension, std::uint64_t seed) {
  std::vector<float> input(dimension);
  CounterRng rng(seed, 0, 0, StreamId(RandomPurpose::kUser));
  for (float& value : input) {
    float sum = 0.0f;
    for (int i = 0; i < 4; ++i) sum += rng.NextFloat();
    value = (sum - 2.0f) * 1.7320508f;
  }
  return input;
}

struct PayloadBuffers {
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
  std::vector<std::uint32_t> words;
  std::vector<float> scales;

  explicit PayloadBuffers(const PayloadShape& shape)
      : indices(shape.indices), values(shape.values), words(shape.words), scales(shape.scales) {}
  PayloadSpans Spans() { return {indices, values, words, scales}; }
  PayloadView View() const { return {indices, values, words, scales}; }
};

int RunBenchCodecs(const BenchOptions& options) {
  const Result<TensorLayout> layout = TensorLayout::Single(options.dimension);
  if (!layout.ok()) {
    std::fprintf(stderr, "edgesgd bench: --dim must be between 1 and 4294967295\n");
    return 2;
  }
  const std::vector<float> input = MakeInput(options.dimension, options.seed);
  std::vector<float> copy(options.dimension);
  std::vector<float> accumulator(options.dimension, 0.0f);
  const double input_bytes = 4.0 * static_cast<double>(options.dimension);

  const double memcpy_seconds = BestSeconds(options.repeats, [&] {
    std::memcpy(copy.data(), input.data(), input.size() * sizeof(float));
  });

  std::vector<CodecFigures> figures;
  CodecParams top_k_params = TopKParams{};
  bool failed = false;
  ForEachCodec([&](auto codec) {
    using Codec = typename decltype(codec)::type;
    if (failed) return;
    const HostResult<CodecParams> parsed = options.codec.ParamsFor(Codec::kName, false);
    if (!parsed.ok()) {
      std::fprintf(stderr, "edgesgd bench: %s\n", parsed.message().c_str());
      failed = true;
      return;
    }
    const CodecParams params = *parsed;
    if (std::holds_alternative<TopKParams>(params)) top_k_params = params;
    const Result<PayloadShape> shape = EncodedShape(params, *layout);
    if (!shape.ok()) {
      std::fprintf(stderr, "edgesgd bench: %s cannot encode --dim %zu: %s\n",
                   std::string(Codec::kName).c_str(), options.dimension, shape.status().reason());
      failed = true;
      return;
    }
    PayloadBuffers payload(*shape);
    std::vector<std::byte> scratch(CodecScratchBytes(params, *layout));
    const CodecContext context{options.seed, 0, 0};
    Status status;
    CodecFigures row{Codec::kName};
    row.encoded_bytes = shape->bytes();
    row.encode_seconds = BestSeconds(options.repeats, [&] {
      status = AllCodecs().Encode(params, *layout, context, input, payload.Spans(), scratch);
    });
    if (status.ok()) {
      row.decode_seconds = BestSeconds(options.repeats, [&] {
        status = AllCodecs().DecodeAdd(params, *layout, context, payload.View(), 1.0f,
                                       accumulator, scratch);
      });
    }
    if (!status.ok()) {
      std::fprintf(stderr, "edgesgd bench: %s failed: %s\n", std::string(Codec::kName).c_str(),
                   status.reason());
      failed = true;
      return;
    }
    figures.push_back(row);
  });
  if (failed) return 1;

  // The baseline exact Top-k would use: nth_element over a copy of the magnitudes (the lightest
  // form — it yields only the threshold, not the sorted index set).
  std::vector<float> magnitudes(options.dimension);
  const Result<std::size_t> top_k =
      SparseCount(options.dimension, std::get<TopKParams>(top_k_params).k_ratio);
  const std::size_t k = top_k.ok() ? top_k.value() : 1;
  const double nth_element_seconds = BestSeconds(options.repeats, [&] {
    for (std::size_t i = 0; i < input.size(); ++i) magnitudes[i] = std::fabs(input[i]);
    std::nth_element(magnitudes.begin(), magnitudes.begin() + static_cast<std::ptrdiff_t>(k - 1),
                     magnitudes.end(), std::greater<float>());
  });

  const auto gbps = [&](double seconds) { return input_bytes / seconds * 1e-9; };
  const double memcpy_gbps = gbps(memcpy_seconds);
  double top_k_seconds = 0;
  for (const CodecFigures& row : figures) {
    if (row.codec == TopKCodec::kName) top_k_seconds = row.encode_seconds;
  }

  if (options.json) {
    std::printf("{\"dim\": %zu, \"repeats\": %d, \"memcpy_gbps\": %.3f, \"memcpy_ms\": %.3f,\n",
                options.dimension, options.repeats, memcpy_gbps, memcpy_seconds * 1e3);
    std::printf(" \"top_k\": {\"k\": %zu, \"nth_element_ms\": %.3f, \"speedup\": %.2f},\n", k,
                nth_element_seconds * 1e3, nth_element_seconds / top_k_seconds);
    std::printf(" \"codecs\": [\n");
    for (std::size_t i = 0; i < figures.size(); ++i) {
      const CodecFigures& row = figures[i];
      std::printf(
          "  {\"codec\": \"%s\", \"encoded_bytes\": %zu, \"compression\": %.2f, "
          "\"encode_ms\": %.3f, \"encode_gbps\": %.3f, \"encode_vs_memcpy\": %.3f, "
          "\"decode_ms\": %.3f, \"decode_gbps\": %.3f}%s\n",
          std::string(row.codec).c_str(), row.encoded_bytes,
          input_bytes / static_cast<double>(row.encoded_bytes), row.encode_seconds * 1e3,
          gbps(row.encode_seconds), gbps(row.encode_seconds) / memcpy_gbps,
          row.decode_seconds * 1e3, gbps(row.decode_seconds),
          i + 1 < figures.size() ? "," : "");
    }
    std::printf(" ]}\n");
    return 0;
  }

  std::printf("dim %zu (%.1f MiB of floats), best of %d runs\n", options.dimension,
              input_bytes / 1048576.0, options.repeats);
  std::printf("memcpy: %.3f ms, %.2f GB/s\n\n", memcpy_seconds * 1e3, memcpy_gbps);
  std::printf("%-13s %14s %8s %11s %11s %9s %11s %11s\n", "codec", "encoded bytes", "ratio",
              "encode ms", "encode GB/s", "vs memcpy", "decode ms", "decode GB/s");
  for (const CodecFigures& row : figures) {
    std::printf("%-13s %14zu %7.1fx %11.3f %11.2f %8.0f%% %11.3f %11.2f\n",
                std::string(row.codec).c_str(), row.encoded_bytes,
                input_bytes / static_cast<double>(row.encoded_bytes), row.encode_seconds * 1e3,
                gbps(row.encode_seconds), 100.0 * gbps(row.encode_seconds) / memcpy_gbps,
                row.decode_seconds * 1e3, gbps(row.decode_seconds));
  }
  std::printf("\ntop_k (k = %zu): %.3f ms; copy + std::nth_element: %.3f ms (%.1fx)\n", k,
              top_k_seconds * 1e3, nth_element_seconds * 1e3,
              nth_element_seconds / top_k_seconds);
  return 0;
}

}  // namespace

void AddBenchCommand(CLI::App& app, int& exit_code) {
  CLI::App* bench = app.add_subcommand("bench", "Measure throughput (prints figures, no pass/fail)");
  bench->require_subcommand(1);
  auto options = std::make_shared<BenchOptions>();
  CLI::App* codecs = bench->add_subcommand(
      "codecs",
      "Encode/decode throughput of every codec (GB/s of input floats), encoded bytes, and memcpy "
      "of the same buffer measured in the same run; top_k is also compared with std::nth_element");
  AddConfigFlag(*codecs);
  AddBoundedOption(*codecs, "--dim", options->dimension, std::size_t{1}, std::size_t{4294967295},
                   "Vector length in floats");
  AddBoundedOption(*codecs, "--repeats", options->repeats, 1, 1000,
                   "Runs per figure; the best is reported");
  codecs->add_option("--seed", options->seed, "Seed of the input data and codec randomness")
      ->capture_default_str();
  codecs->add_flag("--json", options->json, "Print one JSON object instead of a table");
  options->codec.AddParameters(*codecs);
  codecs->callback([options, &exit_code] { exit_code = RunBenchCodecs(*options); });
  AddBenchTcpCommand(*bench, exit_code);
  AddBenchSecAggCommand(*bench, exit_code);
  AddBenchModelCommand(*bench, exit_code);
}

}  // namespace edgesgd::cli

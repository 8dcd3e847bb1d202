// Fuzz target: the layer-network parser (--model SPEC, docs/models.md) on any text, for input
// shapes and class counts drawn from the first bytes. Invariants: a spec that parses validates,
// formats to text that parses back to the same spec, has as many parameters as its layout and
// ends in `classes` outputs; and the kernels run on it without reading or writing out of bounds
// (a sanitizer build catches that), returning a finite loss for zero inputs and parameters.

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "edgesgd/core/model/sequential.h"
#include "fuzz/fuzz_input.h"

namespace {

// Networks small enough to run once per input.
constexpr std::size_t kMaxRunFloats = std::size_t{1} << 16;

void RunOnce(const edgesgd::SequentialSpec& spec) {
  const std::size_t parameters = edgesgd::ParameterCount(spec);
  const std::size_t scratch_floats = edgesgd::Sequential::ScratchFloats(spec);
  EDGESGD_FUZZ_CHECK(scratch_floats > 0, "a valid network's scratch fits in memory");
  if (parameters > kMaxRunFloats || scratch_floats > kMaxRunFloats ||
      spec.features() > kMaxRunFloats) {
    return;
  }
  std::vector<float> params(parameters, 0.0f);
  std::vector<float> gradient(parameters, 0.0f);
  std::vector<float> scratch(scratch_floats, 0.0f);
  std::vector<float> sample(spec.features(), 0.0f);
  const std::uint8_t label = 0;
  edgesgd::DatasetView batch;
  batch.features = sample;
  batch.labels = std::span<const std::uint8_t>(&label, 1);
  batch.num_samples = 1;
  batch.feature_dim = spec.features();
  const edgesgd::Result<float> loss =
      edgesgd::Sequential::LossAndGradient(spec, params, batch, gradient, scratch);
  EDGESGD_FUZZ_CHECK(loss.ok(), "the kernels take every valid network");
  // All-zero logits: the loss is ln(classes).
  EDGESGD_FUZZ_CHECK(std::isfinite(*loss), "a finite loss for zero inputs and parameters");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  edgesgd::fuzz::FuzzInput input(data, size);
  const edgesgd::Shape shape{1u + input.U8() % 32u, 1u + input.U8() % 32u, 1u + input.U8() % 4u};
  const std::size_t classes = 2 + input.U8() % 15;
  const std::span<const std::byte> rest = input.Rest();
  const std::string_view text(reinterpret_cast<const char*>(rest.data()), rest.size());

  const edgesgd::Result<edgesgd::SequentialSpec> spec =
      edgesgd::ParseSequentialSpec(text, shape, classes);
  if (!spec.ok()) {
    EDGESGD_FUZZ_CHECK(spec.status().code() == edgesgd::StatusCode::kInvalidArgument,
                       "a refused spec is an invalid argument");
    return 0;
  }
  EDGESGD_FUZZ_CHECK(edgesgd::ValidateSequentialSpec(*spec).ok(), "a parsed spec validates");
  std::array<char, edgesgd::kMaxSequentialSpecChars> buffer{};
  const edgesgd::Result<std::string_view> formatted = edgesgd::FormatSequentialSpec(*spec, buffer);
  EDGESGD_FUZZ_CHECK(formatted.ok(), "a valid spec formats within kMaxSequentialSpecChars");
  const edgesgd::Result<edgesgd::SequentialSpec> again =
      edgesgd::ParseSequentialSpec(*formatted, shape, classes);
  EDGESGD_FUZZ_CHECK(again.ok() && *again == *spec, "the canonical text parses back to the spec");
  const edgesgd::Result<edgesgd::TensorLayout> layout = edgesgd::SequentialLayout(*spec);
  EDGESGD_FUZZ_CHECK(layout.ok() && layout->dimension() == edgesgd::ParameterCount(*spec),
                     "the layout holds every parameter");
  const edgesgd::Result<edgesgd::SequentialShapes> shapes = edgesgd::InferSequentialShapes(*spec);
  EDGESGD_FUZZ_CHECK(shapes.ok() && shapes->at[spec->layer_count].size() == classes,
                     "the last layer has one output per class");
  RunOnce(*spec);
  return 0;
}

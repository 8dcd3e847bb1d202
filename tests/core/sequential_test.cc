#include "edgesgd/core/model/sequential.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/model_test_util.h"
#include "edgesgd/core/model/mlp.h"
#include "edgesgd/core/model/model.h"
#include "edgesgd/core/model/softmax_regression.h"

namespace edgesgd {
namespace {

using namespace test_util;  // NOLINT: the model tests' shared helpers

std::vector<float> RandomParams(std::size_t count, std::uint32_t seed) {
  std::mt19937 engine(seed);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<float> params(count);
  for (float& value : params) value = normal(engine);
  return params;
}

SequentialSpec Parse(std::string_view text, Shape input, std::size_t classes) {
  const Result<SequentialSpec> spec = ParseSequentialSpec(text, input, classes);
  EXPECT_TRUE(spec.ok()) << text << ": " << spec.status().reason();
  return spec.ok() ? *spec : SequentialSpec{};
}

std::string Format(const SequentialSpec& spec) {
  std::array<char, kMaxSequentialSpecChars> text{};
  const Result<std::string_view> written = FormatSequentialSpec(spec, text);
  EXPECT_TRUE(written.ok()) << written.status().reason();
  return written.ok() ? std::string(*written) : std::string();
}

// ---- A double-precision forward pass written from the documented semantics, independently
// of the kernels: plain loops, padding from its own formula. ----

struct Activation {
  std::vector<double> values;
  std::size_t height = 0;
  std::size_t width = 0;
  std::size_t channels = 0;

  double At(long y, long x, std::size_t c) const {  // 0 outside: the padding
    if (y < 0 || x < 0 || y >= static_cast<long>(height) || x >= static_cast<long>(width)) {
      return 0.0;
    }
    return values[(static_cast<std::size_t>(y) * width + static_cast<std::size_t>(x)) * channels +
                  c];
  }
};

// Output side and leading padding of a window sweep.
std::pair<std::size_t, long> Sweep(std::size_t in, const LayerSpec& layer) {
  if (layer.padding == Padding::kValid) return {(in - layer.kernel) / layer.stride + 1, 0};
  const std::size_t out = (in + layer.stride - 1) / layer.stride;
  const long total =
      static_cast<long>((out - 1) * layer.stride + layer.kernel) - static_cast<long>(in);
  return {out, std::max(total, 0L) / 2};
}

std::vector<double> ReferenceLogits(const SequentialSpec& spec, const std::vector<double>& p,
                                    const float* sample) {
  Activation a;
  a.height = spec.input.height;
  a.width = spec.input.width;
  a.channels = spec.input.channels;
  a.values.assign(sample, sample + spec.features());
  std::size_t offset = 0;
  for (const LayerSpec& layer : spec.used_layers()) {
    Activation out;
    const auto k = static_cast<long>(layer.kernel);
    const auto s = static_cast<long>(layer.stride);
    switch (layer.kind) {
      case LayerKind::kDense: {
        const std::size_t n = a.values.size();
        out.height = out.width = 1;
        out.channels = layer.units;
        for (std::size_t o = 0; o < layer.units; ++o) {
          double z = p[offset + layer.units * n + o];
          for (std::size_t i = 0; i < n; ++i) z += p[offset + o * n + i] * a.values[i];
          out.values.push_back(z);
        }
        offset += layer.units * n + layer.units;
        break;
      }
      case LayerKind::kConv:
      case LayerKind::kDepthwiseConv: {
        const bool depthwise = layer.kind == LayerKind::kDepthwiseConv;
        const auto [height, pad_top] = Sweep(a.height, layer);
        const auto [width, pad_left] = Sweep(a.width, layer);
        out.height = height;
        out.width = width;
        out.channels = depthwise ? a.channels : layer.units;
        const std::size_t weights = layer.kernel * layer.kernel * (depthwise ? 1 : a.channels);
        for (std::size_t y = 0; y < height; ++y) {
          for (std::size_t x = 0; x < width; ++x) {
            for (std::size_t f = 0; f < out.channels; ++f) {
              double z = p[offset + out.channels * weights + f];
              for (long ky = 0; ky < k; ++ky) {
                for (long kx = 0; kx < k; ++kx) {
                  const long iy = static_cast<long>(y) * s + ky - pad_top;
                  const long ix = static_cast<long>(x) * s + kx - pad_left;
                  const auto tap = static_cast<std::size_t>(ky * k + kx);
                  if (depthwise) {
                    z += p[offset + tap * a.channels + f] * a.At(iy, ix, f);
                    continue;
                  }
                  for (std::size_t c = 0; c < a.channels; ++c) {
                    z += p[offset + (f * layer.kernel * layer.kernel + tap) * a.channels + c] *
                         a.At(iy, ix, c);
                  }
                }
              }
              out.values.push_back(z);
            }
          }
        }
        offset += out.channels * weights + out.channels;
        break;
      }
      case LayerKind::kMaxPool:
      case LayerKind::kAvgPool: {
        out.height = (a.height - layer.kernel) / layer.stride + 1;
        out.width = (a.width - layer.kernel) / layer.stride + 1;
        out.channels = a.channels;
        for (std::size_t y = 0; y < out.height; ++y) {
          for (std::size_t x = 0; x < out.width; ++x) {
            for (std::size_t c = 0; c < a.channels; ++c) {
              double best = -std::numeric_limits<double>::infinity();
              double sum = 0.0;
              for (long ky = 0; ky < k; ++ky) {
                for (long kx = 0; kx < k; ++kx) {
                  const double v =
                      a.At(static_cast<long>(y) * s + ky, static_cast<long>(x) * s + kx, c);
                  best = std::max(best, v);
                  sum += v;
                }
              }
              out.values.push_back(
                  layer.kind == LayerKind::kMaxPool ? best : sum / static_cast<double>(k * k));
            }
          }
        }
        break;
      }
      case LayerKind::kRelu:
      case LayerKind::kRelu6:
        out = a;
        for (double& v : out.values) {
          v = std::max(v, 0.0);
          if (layer.kind == LayerKind::kRelu6) v = std::min(v, 6.0);
        }
        break;
      case LayerKind::kFlatten:
        out = a;
        out.channels = a.values.size();
        out.height = out.width = 1;
        break;
    }
    a = out;
  }
  return a.values;
}

double ReferenceLoss(const SequentialSpec& spec, const std::vector<double>& p,
                     const OwnedData& data) {
  double loss = 0.0;
  for (std::size_t i = 0; i < data.samples; ++i) {
    const std::vector<double> z = ReferenceLogits(spec, p, data.features.data() + i * data.dim);
    const double max_z = *std::max_element(z.begin(), z.end());
    double total = 0.0;
    for (const double v : z) total += std::exp(v - max_z);
    loss += std::log(total) + max_z - z[data.labels[i]];
  }
  return loss / static_cast<double>(data.samples);
}

// The kernel's loss and gradient against the double reference and its central differences,
// at random parameters and inputs (stddev `input_scale`), for every `stride`-th parameter.
void ExpectGradientMatchesFiniteDifferences(std::string_view text, Shape input, std::size_t classes,
                                            std::uint32_t seed, float input_scale = 1.0f,
                                            std::size_t stride = 1) {
  SCOPED_TRACE(text);
  const SequentialSpec spec = Parse(text, input, classes);
  const OwnedData data = RandomData(3, spec.features(), classes, seed, input_scale);
  const std::vector<float> params = RandomParams(ParameterCount(spec), seed + 1);
  std::vector<float> gradient(params.size(), 123.0f);
  std::vector<float> scratch(Sequential::ScratchFloats(spec));
  const Result<float> loss =
      Sequential::LossAndGradient(spec, params, data.View(), gradient, scratch);
  ASSERT_TRUE(loss.ok()) << loss.status().reason();

  std::vector<double> reference(params.begin(), params.end());
  const double reference_loss = ReferenceLoss(spec, reference, data);
  EXPECT_NEAR(static_cast<double>(*loss), reference_loss, 1e-5 * (1.0 + reference_loss));

  const std::vector<double> numeric =
      NumericGradient([&](const std::vector<double>& at) { return ReferenceLoss(spec, at, data); },
                      reference, 1e-6, stride);
  const double max_abs = MaxAbs(numeric);
  ASSERT_GT(max_abs, 1e-3);  // the check would be vacuous on a flat loss
  for (std::size_t j = 0; j < params.size(); j += stride) {
    EXPECT_NEAR(static_cast<double>(gradient[j]), numeric[j], 1e-4 * (1.0 + max_abs))
        << "parameter " << j;
  }
}

// ---- Spec: parsing, shapes, counts, canonical text, refusals. ----

TEST(SequentialSpecTest, ParsesTheSmallCnnWithItsShapesAndParameters) {
  const SequentialSpec spec =
      Parse("conv:8:3,relu,maxpool:2,conv:16:3,relu,maxpool:2,dense:10", {28, 28, 1}, 10);
  ASSERT_EQ(spec.layer_count, 7u);
  EXPECT_EQ(spec.layers[0], (LayerSpec{LayerKind::kConv, Padding::kValid, 8, 3, 1}));
  EXPECT_EQ(spec.layers[2], (LayerSpec{LayerKind::kMaxPool, Padding::kValid, 0, 2, 2}));
  const SequentialShapes shapes = InferSequentialShapes(spec).value();
  const std::array<Shape, 8> expected = {{{28, 28, 1},
                                          {26, 26, 8},
                                          {26, 26, 8},
                                          {13, 13, 8},
                                          {11, 11, 16},
                                          {11, 11, 16},
                                          {5, 5, 16},
                                          {1, 1, 10}}};
  for (std::size_t l = 0; l < expected.size(); ++l) EXPECT_EQ(shapes.at[l], expected[l]) << l;
  // conv1 8*3*3*1 + 8, conv2 16*3*3*8 + 16, dense 10*(5*5*16) + 10.
  EXPECT_EQ(ParameterCount(spec), 80u + 1168u + 4010u);
  const TensorLayout layout = SequentialLayout(spec).value();
  ASSERT_EQ(layout.tensor_count(), 6u);
  EXPECT_EQ(layout.size(0), 72u);
  EXPECT_EQ(layout.size(1), 8u);
  EXPECT_EQ(layout.size(2), 1152u);
  EXPECT_EQ(layout.offset(4), 1248u);
  EXPECT_EQ(layout.size(4), 4000u);
  EXPECT_EQ(layout.size(5), 10u);
  // Outputs 5408 + 5408 + 1352 + 1936 + 1936 + 400 + 10, two gradient buffers of the largest
  // hidden output (5408), each conv's receptive fields (26*26 of 3*3*1, 11*11 of 3*3*8) and the
  // gradient of the largest product's (conv2's 121 fields).
  EXPECT_EQ(Sequential::ScratchFloats(spec),
            16450u + 2u * 5408u + (676u * 9u + 121u * 72u) + 121u * 72u);
}

TEST(SequentialSpecTest, InfersPaddingStrideAndDepthwiseShapes) {
  struct Case {
    std::string_view text;
    Shape input;
    Shape output;
    std::size_t parameters;
  };
  const Case cases[] = {
      {"conv:4:3:1:same,flatten,dense:2", {5, 7, 2}, {5, 7, 4}, 4 * 9 * 2 + 4 + 2 * 140 + 2},
      {"conv:4:3:2:same,flatten,dense:2", {28, 28, 1}, {14, 14, 4}, 40 + 2 * 784 + 2},
      {"conv:4:3:2:same,flatten,dense:2", {27, 27, 1}, {14, 14, 4}, 40 + 2 * 784 + 2},
      {"conv:4:3:2,flatten,dense:2", {28, 28, 1}, {13, 13, 4}, 40 + 2 * 676 + 2},
      {"dwconv:3,dense:2", {6, 6, 3}, {4, 4, 3}, 27 + 3 + 2 * 48 + 2},
      {"dwconv:5:2:same,dense:2", {6, 6, 3}, {3, 3, 3}, 75 + 3 + 2 * 27 + 2},
      {"avgpool:3:2,dense:2", {7, 7, 2}, {3, 3, 2}, 2 * 18 + 2},
      {"maxpool:2,dense:2", {5, 5, 1}, {2, 2, 1}, 2 * 4 + 2},
      {"dense:2", {4, 4, 3}, {1, 1, 2}, 2 * 48 + 2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const SequentialSpec spec = Parse(c.text, c.input, 2);
    EXPECT_EQ(InferSequentialShapes(spec).value().at[1], c.output);
    EXPECT_EQ(ParameterCount(spec), c.parameters);
  }
}

TEST(SequentialSpecTest, CanonicalTextRoundTrips) {
  const SequentialSpec spec =
      Parse("conv:8:3,relu6,dwconv:3:2:same,maxpool:2,avgpool:1:1,relu,flatten,dense:10",
            {16, 16, 3}, 10);
  const std::string text = Format(spec);
  EXPECT_EQ(text,
            "conv:8:3:1:valid,relu6,dwconv:3:2:same,maxpool:2:2,avgpool:1:1,relu,flatten,"
            "dense:10");
  EXPECT_EQ(Parse(text, {16, 16, 3}, 10), spec);
  EXPECT_EQ(Format(Parse(text, {16, 16, 3}, 10)), text);
}

TEST(SequentialSpecTest, ParsesTheDocumentedExamples) {
  EXPECT_EQ(ParameterCount(Parse("dense:10", {28, 28, 1}, 10)), 7850u);
  EXPECT_EQ(ParameterCount(Parse("dense:64,relu,dense:10", {28, 28, 1}, 10)), 50890u);
  // 14x14x8 after the strided conv, 2x2x16 after the pool: 80 + 80 + 144 + 650.
  const SequentialSpec mobile =
      Parse("conv:8:3:2:same,relu6,dwconv:3:1:same,relu6,conv:16:1,relu6,avgpool:7,dense:10",
            {28, 28, 1}, 10);
  EXPECT_EQ(InferSequentialShapes(mobile).value().at[7], (Shape{2, 2, 16}));
  EXPECT_EQ(ParameterCount(mobile), 80u + 80u + 144u + 650u);
  EXPECT_EQ(sizeof(SequentialSpec), 276u);
}

TEST(SequentialSpecTest, FormatRefusesAShortBufferAndAnInvalidSpec) {
  const SequentialSpec spec = Parse("dense:10", {1, 1, 4}, 10);
  std::array<char, 8> exact{};
  EXPECT_EQ(FormatSequentialSpec(spec, exact).value(), "dense:10");
  std::array<char, 7> short_by_one{};
  EXPECT_EQ(FormatSequentialSpec(spec, short_by_one).status().code(),
            StatusCode::kResourceExhausted);
  SequentialSpec invalid = spec;
  invalid.classes = 9;
  EXPECT_EQ(FormatSequentialSpec(invalid, exact).status().code(), StatusCode::kInvalidArgument);
}

TEST(SequentialSpecTest, FormatsLargeFields) {
  SequentialSpec spec;
  spec.input = {4, 4, 1};
  spec.classes = 2;
  spec.layer_count = kMaxSequentialLayers;
  for (LayerSpec& layer : spec.layers)
    layer = {LayerKind::kConv, Padding::kValid, 1, 1, 4000000000u};
  spec.layers[kMaxSequentialLayers - 1] = {LayerKind::kDense, Padding::kValid, 2, 0, 0};
  const std::string text = Format(spec);
  EXPECT_EQ(text.size(), 15 * std::string_view("conv:1:1:4000000000:valid,").size() + 7);
}

TEST(SequentialSpecTest, RefusesBadSpecsWithTheirReason) {
  struct Case {
    std::string_view text;
    Shape input;
    std::size_t classes;
    std::string_view reason;
  };
  const std::string seventeen = [] {
    std::string text;
    for (int i = 0; i < 16; ++i) text += "relu,";
    return text + "dense:2";
  }();
  const Case cases[] = {
      {"pool:2,dense:2", {4, 4, 1}, 2, "unknown layer"},
      {"Dense:2", {4, 4, 1}, 2, "unknown layer"},
      {"dense:x", {4, 4, 1}, 2, "not a decimal integer"},
      {"dense:-2", {4, 4, 1}, 2, "not a decimal integer"},
      {"dense:+2", {4, 4, 1}, 2, "not a decimal integer"},
      {"dense:2x", {4, 4, 1}, 2, "not a decimal integer"},
      {"dense:", {4, 4, 1}, 2, "not a decimal integer"},
      {"dense:4294967296", {4, 4, 1}, 2, "not a decimal integer"},
      {"dense:0", {4, 4, 1}, 2, "is zero"},
      {"conv:2:0,dense:2", {4, 4, 1}, 2, "is zero"},
      {"maxpool:2:0,dense:2", {4, 4, 1}, 2, "is zero"},
      {"dense", {4, 4, 1}, 2, "too few or too many"},
      {"conv:8,dense:2", {4, 4, 1}, 2, "too few or too many"},
      {"conv:8:3:1:same:1,dense:2", {4, 4, 1}, 2, "too few or too many"},
      {"relu:1,dense:2", {4, 4, 1}, 2, "too few or too many"},
      {"maxpool:2:2:valid,dense:2", {4, 4, 1}, 2, "too few or too many"},
      {"conv:2:3:1:full,dense:2", {4, 4, 1}, 2, "neither same nor valid"},
      {"conv:2:3:same,dense:2", {4, 4, 1}, 2, "not a decimal integer"},
      {"conv:2:5,dense:2", {4, 4, 1}, 2, "larger than its input"},
      {"conv:2:5:1:same,dense:2", {4, 4, 1}, 2, "larger than its input"},
      {"dwconv:2,dense:2", {1, 4, 1}, 2, "larger than its input"},
      {"maxpool:3,maxpool:2,dense:2", {4, 4, 1}, 2, "larger than its input"},
      {"dense:3", {4, 4, 1}, 2, "differs from the class count"},
      {"conv:2:1", {4, 4, 1}, 2, "differs from the class count"},
      {seventeen, {4, 4, 1}, 2, "1..16 layers"},
      {"", {4, 4, 1}, 2, "is empty"},
      {"dense:2,", {4, 4, 1}, 2, "is empty"},
      {"relu,,dense:2", {4, 4, 1}, 2, "is empty"},
      {"dense:2", {4, 4, 1}, 1, "2..256 classes"},
      {"dense:257", {4, 4, 1}, 257, "2..256 classes"},
      {"dense:2", {0, 4, 1}, 2, "input's height"},
      {"dense:2", {65536, 65536, 1}, 2, "input's height"},
      {"flatten", {1, 1, 2}, 2, "needs a dense, conv or dwconv"},
      {"dense:65537,dense:2", {1, 1, 65535}, 2, "2^32 or more parameters"},
      {"conv:2:1,dense:2", {65535, 65535, 1}, 2, "2^32 or more values"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const Result<SequentialSpec> spec = ParseSequentialSpec(c.text, c.input, c.classes);
    ASSERT_FALSE(spec.ok());
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(std::string_view(spec.status().reason()).find(c.reason), std::string_view::npos)
        << spec.status().reason();
  }
}

TEST(SequentialSpecTest, ValidateRefusesUnknownKindsAndFieldsAKindDoesNotUse) {
  SequentialSpec spec = Parse("relu,dense:2", {1, 1, 3}, 2);
  ASSERT_TRUE(ValidateSequentialSpec(spec).ok());
  spec.layers[0].kernel = 3;
  EXPECT_EQ(ValidateSequentialSpec(spec), Status::InvalidArgument());
  spec = Parse("maxpool:1,dense:2", {1, 1, 3}, 2);
  spec.layers[0].padding = Padding::kSame;
  EXPECT_EQ(ValidateSequentialSpec(spec), Status::InvalidArgument());
  spec = Parse("relu,dense:2", {1, 1, 3}, 2);
  spec.layers[0].kind = static_cast<LayerKind>(8);
  EXPECT_EQ(ValidateSequentialSpec(spec), Status::InvalidArgument());
  spec = Parse("conv:1:1,dense:2", {1, 1, 3}, 2);
  spec.layers[0].padding = static_cast<Padding>(2);
  EXPECT_EQ(ValidateSequentialSpec(spec), Status::InvalidArgument());
  spec = Parse("dense:2", {1, 1, 3}, 2);
  spec.layers[0].stride = 1;
  EXPECT_EQ(ValidateSequentialSpec(spec), Status::InvalidArgument());
  EXPECT_EQ(ParameterCount(spec), 0u);
  EXPECT_EQ(Sequential::ScratchFloats(spec), 0u);
  EXPECT_FALSE(SequentialLayout(spec).ok());
}

// ---- Gradients of every layer kind against finite differences. A 1x1 conv in front makes
// each layer under test pass a gradient to its input, so its backward pass is checked too. ----

TEST(LayerGradientTest, Dense) {
  ExpectGradientMatchesFiniteDifferences("dense:3", {1, 1, 5}, 3, 1);
  ExpectGradientMatchesFiniteDifferences("dense:4,dense:3", {2, 2, 2}, 3, 2);
}

TEST(LayerGradientTest, ConvValidStrideOne) {
  ExpectGradientMatchesFiniteDifferences("conv:2:1,conv:3:3,dense:3", {5, 5, 2}, 3, 3);
}

TEST(LayerGradientTest, ConvValidStrideTwo) {
  ExpectGradientMatchesFiniteDifferences("conv:2:1,conv:3:3:2,dense:3", {6, 7, 2}, 3, 4);
}

TEST(LayerGradientTest, ConvSameStrideOne) {
  ExpectGradientMatchesFiniteDifferences("conv:2:1,conv:3:3:1:same,dense:3", {4, 5, 2}, 3, 5);
  ExpectGradientMatchesFiniteDifferences("conv:2:1,conv:2:2:1:same,dense:3", {4, 3, 2}, 3, 6);
}

TEST(LayerGradientTest, ConvSameStrideTwo) {
  ExpectGradientMatchesFiniteDifferences("conv:2:1,conv:3:3:2:same,dense:3", {5, 6, 2}, 3, 7);
  ExpectGradientMatchesFiniteDifferences("conv:2:1,conv:2:4:2:same,dense:3", {7, 4, 1}, 3, 8);
}

TEST(LayerGradientTest, ConvOverSeveralTilesAndProducts) {
  // conv2 has 31*31 receptive fields of 3*3*2: more than one tile of fields holds (910 of
  // them), so both passes gather each tile, and the products take 256 positions at a time, the
  // last of each tile fewer.
  const std::string_view text = "conv:2:1,conv:2:3:1:same,avgpool:31,dense:2";
  const SequentialSpec spec = Parse(text, {31, 31, 1}, 2);
  // Outputs 1922 + 1922 + 2 + 2, two gradient buffers of 1922, conv1's 961 fields of one value
  // and conv2's one tile of 910 fields, and the gradient of conv2's 256-field products.
  EXPECT_EQ(Sequential::ScratchFloats(spec),
            3848u + 2u * 1922u + (961u + 910u * 18u) + 256u * 18u);
  ExpectGradientMatchesFiniteDifferences(text, {31, 31, 1}, 2, 20);
}

TEST(LayerGradientTest, ConvWithMoreWeightsThanAStackPack) {
  // conv2's 8 x 3*3*512 weights (36,864) exceed what Eigen's blocked product packs on the stack
  // (32,768 floats), so its products are added row by row, as on bare metal. Every 397th
  // parameter is checked: the reference is slow at this size.
  ExpectGradientMatchesFiniteDifferences("conv:512:1,conv:8:3:1:same,dense:3", {3, 3, 1}, 3, 21,
                                         1.0f, 397);
}

TEST(LayerGradientTest, DepthwiseConv) {
  ExpectGradientMatchesFiniteDifferences("conv:3:1,dwconv:3,dense:3", {5, 5, 2}, 3, 9);
  ExpectGradientMatchesFiniteDifferences("conv:3:1,dwconv:3:2:same,dense:3", {5, 6, 2}, 3, 10);
  ExpectGradientMatchesFiniteDifferences("dwconv:2:1:same,dense:2", {3, 3, 4}, 2, 11);
}

TEST(LayerGradientTest, MaxPool) {
  ExpectGradientMatchesFiniteDifferences("conv:2:1,maxpool:2,dense:3", {5, 4, 2}, 3, 12);
  ExpectGradientMatchesFiniteDifferences("conv:2:1,maxpool:3:1,dense:3", {4, 5, 1}, 3, 13);
}

TEST(LayerGradientTest, AvgPool) {
  ExpectGradientMatchesFiniteDifferences("conv:2:1,avgpool:2,dense:3", {5, 4, 2}, 3, 14);
  ExpectGradientMatchesFiniteDifferences("conv:2:1,avgpool:3:2,dense:3", {5, 5, 1}, 3, 15);
}

TEST(LayerGradientTest, Relu) {
  ExpectGradientMatchesFiniteDifferences("conv:3:1,relu,dense:3", {3, 3, 2}, 3, 16);
}

TEST(LayerGradientTest, Relu6) {
  // Inputs large enough that some units sit above the cap.
  ExpectGradientMatchesFiniteDifferences("conv:3:1,relu6,dense:3", {3, 3, 2}, 3, 17, 8.0f);
}

TEST(LayerGradientTest, Flatten) {
  ExpectGradientMatchesFiniteDifferences("conv:2:1,flatten,dense:3", {2, 3, 2}, 3, 18);
}

TEST(LayerGradientTest, SmallCnn) {
  ExpectGradientMatchesFiniteDifferences(
      "conv:3:3:1:same,relu,maxpool:2,dwconv:3:1:same,relu6,conv:4:2:2,avgpool:1,flatten,"
      "dense:5,relu,dense:3",
      {8, 8, 2}, 3, 19, 2.0f);
}

// ---- Forward on cases small enough to compute by hand. ----

// Loss of the one sample `x` under each label: loss_k = logsumexp(z) - z_k.
std::vector<double> LossPerLabel(const SequentialSpec& spec, const std::vector<float>& params,
                                 const std::vector<float>& x) {
  std::vector<float> scratch(Sequential::ScratchFloats(spec));
  std::vector<double> losses;
  for (std::uint32_t label = 0; label < spec.classes; ++label) {
    OwnedData data;
    data.features = x;
    data.labels = {static_cast<std::uint8_t>(label)};
    data.samples = 1;
    data.dim = x.size();
    EvaluationSums sums;
    EXPECT_TRUE(Sequential::AddToEvaluation(spec, params, data.View(), scratch, sums).ok());
    losses.push_back(sums.loss);
  }
  return losses;
}

void ExpectLogits(std::string_view text, Shape input, const std::vector<float>& params,
                  const std::vector<float>& x, const std::vector<double>& logits) {
  SCOPED_TRACE(text);
  const SequentialSpec spec = Parse(text, input, logits.size());
  ASSERT_EQ(ParameterCount(spec), params.size());
  double total = 0.0;
  for (const double z : logits) total += std::exp(z);
  const std::vector<double> losses = LossPerLabel(spec, params, x);
  for (std::size_t k = 0; k < logits.size(); ++k) {
    EXPECT_NEAR(losses[k], std::log(total) - logits[k], 1e-6) << "label " << k;
  }
}

const std::vector<float> kThreeByThree = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f};

TEST(LayerForwardTest, ConvOnAThreeByThreeInput) {
  // Input rows (.1 .2 .3) (.4 .5 .6) (.7 .8 .9); kernel [[0.5, -1], [0, 0.25]], bias 0.1.
  // Valid: the four 2x2 windows, e.g. top left .05 - .2 + 0 + .125 + .1 = .075.
  const std::vector<float> params = {0.5f, -1.0f, 0.0f, 0.25f, 0.1f};
  ExpectLogits("conv:1:2", {3, 3, 1}, params, kThreeByThree, {0.075, 0.05, 0.0, -0.025});
  // Same: 3x3 outputs, the one padded row and column at the bottom and right, e.g. the
  // bottom-right window holds only .9: .45 + .1.
  ExpectLogits("conv:1:2:1:same", {3, 3, 1}, params, kThreeByThree,
               {0.075, 0.05, 0.25, 0.0, -0.025, 0.4, -0.35, -0.4, 0.55});
  // Stride 2 with same padding: windows at rows and columns 0 and 2.
  ExpectLogits("conv:1:2:2:same", {3, 3, 1}, params, kThreeByThree, {0.075, 0.25, -0.35, 0.55});
}

TEST(LayerForwardTest, ConvMixesChannelsAndFilters) {
  // Input 1x2x2: two pixels of two channels; 1x1 kernels, weights [filter][channel].
  const std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f};
  const std::vector<float> params = {1.0f, -1.0f, 0.5f, 0.5f, 0.0f, 1.0f};
  // Filter 0: c0 - c1 = -1, -1; filter 1: (c0 + c1) / 2 + 1 = 2.5, 4.5. NHWC order.
  ExpectLogits("conv:2:1", {1, 2, 2}, params, x, {-1.0, 2.5, -1.0, 4.5});
}

TEST(LayerForwardTest, DepthwisePoolsAndActivations) {
  // Depthwise weights [ky][kx][channel] with two channels: channel 0 sums its window, channel 1
  // takes its top-left value; biases 0 and -0.5.
  const std::vector<float> x = {1, -1, 2, -2, 3, -3, 4, -4};  // 2x2 pixels of 2 channels
  const std::vector<float> params = {1, 1, 1, 0, 1, 0, 1, 0, 0.0f, -0.5f};
  ExpectLogits("dwconv:2", {2, 2, 2}, params, x, {10.0, -1.5});
  // An identity 1x1 conv in front, since a network needs a parametric layer.
  const std::vector<float> identity = {1.0f, 0.0f};
  ExpectLogits("conv:1:1,maxpool:2:1", {3, 3, 1}, identity, kThreeByThree, {0.5, 0.6, 0.8, 0.9});
  ExpectLogits("conv:1:1,avgpool:2:1", {3, 3, 1}, identity, kThreeByThree, {0.3, 0.4, 0.6, 0.7});
  const std::vector<float> line = {-2.0f, 3.0f, 7.0f, 0.5f};
  ExpectLogits("conv:1:1,relu", {1, 4, 1}, identity, line, {0.0, 3.0, 7.0, 0.5});
  ExpectLogits("conv:1:1,relu6", {1, 4, 1}, identity, line, {0.0, 3.0, 6.0, 0.5});
  ExpectLogits("conv:1:1,flatten", {2, 2, 1}, identity, line, {-2.0, 3.0, 7.0, 0.5});
}

TEST(LayerGradientTest, MaxPoolTiesGoToTheFirstTap) {
  // Pixels (1, 0) and (0, 1) both give 1 under the filter (1, 1); the pool's gradient reaches the
  // first (top-left) of them, so only the filter's channel-0 weight moves.
  const SequentialSpec spec = Parse("conv:1:1,maxpool:2,dense:2", {2, 2, 2}, 2);
  const std::vector<float> params = {1.0f, 1.0f, 0.0f, 1.0f, -1.0f, 0.0f, 0.0f};
  OwnedData data;
  data.features = {1.0f, 0.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  data.labels = {0};
  data.samples = 1;
  data.dim = 8;
  std::vector<float> gradient(params.size());
  std::vector<float> scratch(Sequential::ScratchFloats(spec));
  ASSERT_TRUE(Sequential::LossAndGradient(spec, params, data.View(), gradient, scratch).ok());
  EXPECT_NE(gradient[0], 0.0f);
  EXPECT_EQ(gradient[1], 0.0f);
}

// ---- The simple models as special cases. ----

TEST(SequentialTest, DenseOnlyEqualsSoftmaxRegression) {
  const ModelSpec softmax{ModelKind::kSoftmaxRegression, 12, 4, 0, true};
  const SequentialSpec spec = Parse("dense:4", {2, 2, 3}, 4);
  ASSERT_EQ(ParameterCount(spec), ParameterCount(softmax));
  const OwnedData data = RandomData(7, 12, 4, 31);
  const std::vector<float> params = RandomParams(ParameterCount(spec), 32);
  std::vector<float> expected(params.size());
  std::vector<float> actual(params.size());
  std::vector<float> scratch(Sequential::ScratchFloats(spec));
  std::vector<float> softmax_scratch(SoftmaxRegression::ScratchFloats(softmax));
  const float expected_loss =
      SoftmaxRegression::LossAndGradient(softmax, params, data.View(), expected, softmax_scratch)
          .value();
  const float loss =
      Sequential::LossAndGradient(spec, params, data.View(), actual, scratch).value();
  EXPECT_EQ(loss, expected_loss);
  EXPECT_EQ(actual, expected);
}

TEST(SequentialTest, DenseReluDenseEqualsTheMlp) {
  const ModelSpec mlp{ModelKind::kMlp, 10, 3, 6, true};
  const SequentialSpec spec = Parse("dense:6,relu,dense:3", {1, 1, 10}, 3);
  ASSERT_EQ(SequentialLayout(spec).value(), ModelLayout(mlp).value());
  const OwnedData data = RandomData(9, 10, 3, 41);
  std::vector<float> params(ParameterCount(spec));
  std::vector<float> mlp_params(params.size());
  ASSERT_TRUE(InitSequentialParameters(spec, 42, params).ok());
  ASSERT_TRUE(InitModelParameters(mlp, 42, mlp_params).ok());
  EXPECT_EQ(params, mlp_params);
  // Non-zero biases, so every tensor's gradient path is compared.
  for (std::size_t j = 60; j < 66; ++j) params[j] = 0.1f * static_cast<float>(j % 3) - 0.1f;

  std::vector<float> expected(params.size());
  std::vector<float> actual(params.size());
  std::vector<float> scratch(Sequential::ScratchFloats(spec));
  std::vector<float> mlp_scratch(Mlp::ScratchFloats(mlp));
  const float expected_loss =
      Mlp::LossAndGradient(mlp, params, data.View(), expected, mlp_scratch).value();
  const float loss =
      Sequential::LossAndGradient(spec, params, data.View(), actual, scratch).value();
  EXPECT_EQ(loss, expected_loss);
  EXPECT_EQ(actual, expected);

  EvaluationSums expected_sums;
  EvaluationSums sums;
  ASSERT_TRUE(Mlp::AddToEvaluation(mlp, params, data.View(), mlp_scratch, expected_sums).ok());
  ASSERT_TRUE(Sequential::AddToEvaluation(spec, params, data.View(), scratch, sums).ok());
  EXPECT_EQ(sums.loss, expected_sums.loss);
  EXPECT_EQ(sums.correct, expected_sums.correct);
  EXPECT_EQ(sums.samples, 9u);
}

// ---- Initialisation. ----

TEST(SequentialTest, InitDrawsHeAndGlorotLimitsWithZeroBiases) {
  const SequentialSpec spec =
      Parse("conv:8:3,relu,maxpool:2,conv:16:3,maxpool:2,relu6,dwconv:3:1:same,dense:10",
            {28, 28, 1}, 10);
  const TensorLayout layout = SequentialLayout(spec).value();
  std::vector<float> params(layout.dimension(), 7.0f);
  ASSERT_TRUE(InitSequentialParameters(spec, 5, params).ok());
  // conv1 He sqrt(6/9); conv2 He through the pool, sqrt(6/72); dwconv Glorot (dense follows)
  // sqrt(6/18); dense Glorot sqrt(6/(400+10)).
  const std::array<float, 4> limits = {std::sqrt(6.0f / 9.0f), std::sqrt(6.0f / 72.0f),
                                       std::sqrt(6.0f / 18.0f), std::sqrt(6.0f / 410.0f)};
  for (std::size_t p = 0; p < limits.size(); ++p) {
    const std::span<const float> weights = layout.Slice(std::span<const float>(params), 2 * p);
    float largest = 0.0f;
    for (const float w : weights) largest = std::max(largest, std::fabs(w));
    EXPECT_LT(largest, limits[p]) << p;
    EXPECT_GT(largest, 0.8f * limits[p]) << p;
    for (const float b : layout.Slice(std::span<const float>(params), 2 * p + 1))
      EXPECT_EQ(b, 0.0f);
  }
  std::vector<float> again(params.size());
  std::vector<float> other_seed(params.size());
  ASSERT_TRUE(InitSequentialParameters(spec, 5, again).ok());
  ASSERT_TRUE(InitSequentialParameters(spec, 6, other_seed).ok());
  EXPECT_EQ(again, params);
  EXPECT_NE(other_seed, params);
  std::vector<float> wrong(params.size() - 1);
  EXPECT_EQ(InitSequentialParameters(spec, 5, wrong), Status::InvalidArgument());
}

// ---- Calls: scratch, sizes, labels, determinism. ----

struct CallFixture {
  SequentialSpec spec;
  OwnedData data;
  std::vector<float> params;
  std::vector<float> gradient;
  std::vector<float> scratch;

  CallFixture()
      : spec(Parse("conv:3:3:1:same,relu,maxpool:2,dense:4", {6, 6, 2}, 4)),
        data(RandomData(5, 72, 4, 51)),
        params(RandomParams(ParameterCount(spec), 52)),
        gradient(params.size(), -1.0f),
        scratch(Sequential::ScratchFloats(spec)) {}

  Status Call(std::span<float> scratch_span) {
    return Sequential::LossAndGradient(spec, params, data.View(), gradient, scratch_span).status();
  }
};

TEST(SequentialTest, ScratchOfExactlyScratchFloatsSuffices) {
  CallFixture f;
  // Outputs 6*6*3 + 6*6*3 + 3*3*3 + 4, gradient buffers of 108 (the conv's and relu's outputs),
  // the conv's 36 receptive fields of 3*3*2 and their gradient.
  ASSERT_EQ(f.scratch.size(), 108u + 108u + 27u + 4u + 2u * 108u + 2u * 36u * 18u);
  EXPECT_TRUE(f.Call(f.scratch).ok());
  const std::vector<float> exact = f.gradient;
  std::vector<float> larger(f.scratch.size() + 100, 5.0f);
  EXPECT_TRUE(f.Call(larger).ok());
  EXPECT_EQ(f.gradient, exact);
  std::fill(f.gradient.begin(), f.gradient.end(), -1.0f);
  EXPECT_EQ(f.Call(std::span<float>(f.scratch).first(f.scratch.size() - 1)),
            Status::InvalidArgument());
  EXPECT_TRUE(
      std::all_of(f.gradient.begin(), f.gradient.end(), [](float g) { return g == -1.0f; }));
}

TEST(SequentialTest, RefusesWrongSizesAndLabelsWithoutTouchingTheGradient) {
  CallFixture f;
  std::vector<float> short_params(f.params.begin(), f.params.end() - 1);
  EXPECT_EQ(Sequential::LossAndGradient(f.spec, short_params, f.data.View(), f.gradient, f.scratch)
                .status(),
            Status::InvalidArgument());
  std::vector<float> long_gradient(f.params.size() + 1);
  EXPECT_EQ(Sequential::LossAndGradient(f.spec, f.params, f.data.View(), long_gradient, f.scratch)
                .status(),
            Status::InvalidArgument());
  OwnedData narrow = RandomData(5, 71, 4, 53);
  EXPECT_EQ(
      Sequential::LossAndGradient(f.spec, f.params, narrow.View(), f.gradient, f.scratch).status(),
      Status::InvalidArgument());
  DatasetView empty = f.data.View();
  empty.num_samples = 0;
  empty.features = {};
  empty.labels = {};
  EXPECT_EQ(Sequential::LossAndGradient(f.spec, f.params, empty, f.gradient, f.scratch).status(),
            Status::InvalidArgument());
  DatasetView unlabelled = f.data.View();
  unlabelled.labels = {};
  const std::vector<float> targets(5);
  unlabelled.targets = targets;
  EXPECT_EQ(
      Sequential::LossAndGradient(f.spec, f.params, unlabelled, f.gradient, f.scratch).status(),
      Status::InvalidArgument());
  const std::vector<std::uint8_t> bytes(5 * 72);
  DatasetView byte_rows = f.data.View();
  byte_rows.features = {};
  byte_rows.feature_bytes = bytes;
  EXPECT_EQ(
      Sequential::LossAndGradient(f.spec, f.params, byte_rows, f.gradient, f.scratch).status(),
      Status::InvalidArgument());
  OwnedData bad_label = f.data;
  bad_label.labels[3] = 4;
  EXPECT_EQ(Sequential::LossAndGradient(f.spec, f.params, bad_label.View(), f.gradient, f.scratch)
                .status(),
            Status::OutOfRange());
  EvaluationSums sums;
  EXPECT_EQ(Sequential::AddToEvaluation(f.spec, f.params, bad_label.View(), f.scratch, sums),
            Status::OutOfRange());
  EXPECT_EQ(sums.samples, 0u);
  SequentialSpec invalid = f.spec;
  invalid.classes = 5;
  EXPECT_EQ(
      Sequential::LossAndGradient(invalid, f.params, f.data.View(), f.gradient, f.scratch).status(),
      Status::InvalidArgument());
  EXPECT_TRUE(
      std::all_of(f.gradient.begin(), f.gradient.end(), [](float g) { return g == -1.0f; }));
}

TEST(SequentialTest, SameInputsGiveTheSameBits) {
  CallFixture f;
  const float loss =
      Sequential::LossAndGradient(f.spec, f.params, f.data.View(), f.gradient, f.scratch).value();
  const std::vector<float> first = f.gradient;
  std::fill(f.gradient.begin(), f.gradient.end(), 9.0f);
  std::fill(f.scratch.begin(), f.scratch.end(), -3.0f);
  EXPECT_EQ(
      Sequential::LossAndGradient(f.spec, f.params, f.data.View(), f.gradient, f.scratch).value(),
      loss);
  EXPECT_EQ(f.gradient, first);
}

TEST(SequentialTest, BatchGradientIsTheMeanOfSampleGradients) {
  CallFixture f;
  const float loss =
      Sequential::LossAndGradient(f.spec, f.params, f.data.View(), f.gradient, f.scratch).value();
  std::vector<double> mean_gradient(f.params.size());
  double mean_loss = 0.0;
  for (std::size_t i = 0; i < f.data.samples; ++i) {
    const DatasetView one = SliceRows(f.data.View(), i, 1).value();
    std::vector<float> gradient(f.params.size());
    const float sample_loss =
        Sequential::LossAndGradient(f.spec, f.params, one, gradient, f.scratch).value();
    mean_loss += static_cast<double>(sample_loss) / 5.0;
    for (std::size_t j = 0; j < gradient.size(); ++j) {
      mean_gradient[j] += static_cast<double>(gradient[j]) / 5.0;
    }
  }
  EXPECT_NEAR(static_cast<double>(loss), mean_loss, 1e-6);
  for (std::size_t j = 0; j < f.params.size(); ++j) {
    EXPECT_NEAR(static_cast<double>(f.gradient[j]), mean_gradient[j], 1e-6) << j;
  }
}

TEST(SequentialTest, EvaluationCountsCorrectPredictionsWithTiesToTheLowestClass) {
  // All-zero parameters: every logit is equal, so every sample is predicted class 0.
  const SequentialSpec spec = Parse("conv:2:3,relu,dense:3", {4, 4, 1}, 3);
  const OwnedData data = RandomData(30, 16, 3, 61);
  const std::vector<float> params(ParameterCount(spec), 0.0f);
  std::vector<float> scratch(Sequential::ScratchFloats(spec));
  EvaluationSums sums;
  ASSERT_TRUE(Sequential::AddToEvaluation(spec, params, data.View(), scratch, sums).ok());
  EXPECT_EQ(sums.correct, static_cast<std::size_t>(
                              std::count(data.labels.begin(), data.labels.end(), std::uint8_t{0})));
  EXPECT_EQ(sums.samples, 30u);
  EXPECT_NEAR(sums.loss, 30.0 * std::log(3.0), 1e-4);
}

// ---- Training. ----

// 8x8 images with a bright left or right half (label 0 or 1) under noise.
OwnedData LeftRightImages(std::size_t samples, std::uint32_t seed) {
  std::mt19937 engine(seed);
  std::normal_distribution<float> noise(0.0f, 0.3f);
  OwnedData data;
  data.samples = samples;
  data.dim = 64;
  for (std::size_t i = 0; i < samples; ++i) {
    const auto label = static_cast<std::uint8_t>(engine() % 2);
    data.labels.push_back(label);
    for (std::size_t y = 0; y < 8; ++y) {
      for (std::size_t x = 0; x < 8; ++x) {
        const bool bright = (x < 4) == (label == 0);
        data.features.push_back((bright ? 1.0f : 0.0f) + noise(engine));
      }
    }
  }
  return data;
}

TEST(SequentialTest, SgdLearnsBrightLeftFromBrightRight) {
  const SequentialSpec spec = Parse("conv:4:3,relu,maxpool:2,dense:2", {8, 8, 1}, 2);
  const OwnedData train = LeftRightImages(512, 71);
  const OwnedData test = LeftRightImages(200, 72);
  std::vector<float> params(ParameterCount(spec));
  ASSERT_TRUE(InitSequentialParameters(spec, 73, params).ok());
  std::vector<float> gradient(params.size());
  std::vector<float> scratch(Sequential::ScratchFloats(spec));
  EvaluationSums before;
  ASSERT_TRUE(Sequential::AddToEvaluation(spec, params, test.View(), scratch, before).ok());
  constexpr std::size_t kBatch = 16;
  for (std::size_t step = 0; step < 200; ++step) {
    const std::size_t first = (step * kBatch) % train.samples;
    const DatasetView batch = SliceRows(train.View(), first, kBatch).value();
    ASSERT_TRUE(Sequential::LossAndGradient(spec, params, batch, gradient, scratch).ok());
    for (std::size_t j = 0; j < params.size(); ++j) params[j] -= 0.1f * gradient[j];
  }
  EvaluationSums after;
  ASSERT_TRUE(Sequential::AddToEvaluation(spec, params, test.View(), scratch, after).ok());
  EXPECT_GE(static_cast<double>(after.correct) / 200.0, 0.97);
  EXPECT_LT(after.loss, 0.25 * before.loss);
}

// ModelKind::kSequential: Model and the spec functions dispatch to the network, and a spec
// whose features or classes disagree with its network is refused.
TEST(SequentialTest, ModelOfKindSequentialIsTheNetwork) {
  CallFixture f;
  ModelSpec spec;
  spec.kind = ModelKind::kSequential;
  spec.network = f.spec;
  spec.features = f.spec.features();
  spec.classes = f.spec.classes;
  ASSERT_TRUE(ValidateModelSpec(spec).ok());
  EXPECT_EQ(ParameterCount(spec), ParameterCount(f.spec));
  const TensorLayout layout = ModelLayout(spec).value();
  const TensorLayout network_layout = SequentialLayout(f.spec).value();
  ASSERT_EQ(layout.tensor_count(), network_layout.tensor_count());
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    EXPECT_EQ(layout.size(t), network_layout.size(t));
  }
  EXPECT_EQ(ModelScratchFloats(spec), Sequential::ScratchFloats(f.spec));

  std::vector<std::byte> storage(Model::ScratchBytes(spec) + kArenaAlignment);
  Arena arena{std::span<std::byte>(storage)};
  Model model;
  ASSERT_TRUE(model.Init(spec, arena).ok());
  std::vector<float> initial(f.params.size());
  std::vector<float> network_initial(f.params.size());
  ASSERT_TRUE(model.InitParameters(7, initial).ok());
  ASSERT_TRUE(InitSequentialParameters(f.spec, 7, network_initial).ok());
  EXPECT_EQ(initial, network_initial);

  std::vector<float> gradient(f.params.size());
  const Result<float> loss = model.LossAndGradient(f.params, f.data.View(), gradient);
  ASSERT_TRUE(f.Call(f.scratch).ok());
  ASSERT_TRUE(loss.ok());
  EXPECT_EQ(gradient, f.gradient);
  const Result<Evaluation> evaluation = model.Evaluate(f.params, f.data.View());
  ASSERT_TRUE(evaluation.ok());
  EvaluationSums sums;
  ASSERT_TRUE(Sequential::AddToEvaluation(f.spec, f.params, f.data.View(), f.scratch, sums).ok());
  EXPECT_EQ(evaluation->loss, static_cast<float>(sums.loss / static_cast<double>(sums.samples)));

  ModelSpec wrong = spec;
  wrong.features += 1;
  EXPECT_EQ(ValidateModelSpec(wrong), Status::InvalidArgument());
  wrong = spec;
  wrong.classes = 3;
  EXPECT_EQ(ValidateModelSpec(wrong), Status::InvalidArgument());
  EXPECT_EQ(ParameterCount(wrong), 0u);
  EXPECT_FALSE(ModelLayout(wrong).ok());
}

}  // namespace
}  // namespace edgesgd

#include "edgesgd/core/scaffold.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/test_util.h"
#include "edgesgd/core/aggregator.h"
#include "edgesgd/core/codec_registry.h"

namespace edgesgd {
namespace {

using namespace test_util;  // NOLINT: the core tests' shared helpers

TensorLayout TestLayout() { return test_util::Layout({30, 12}); }

// A device with its own arena.
struct Device {
  Device(const TensorLayout& layout, const CodecParams& codec)
      : box(ScaffoldDevice::StateBytes(layout, codec)) {
    init = scaffold.Init(box.arena, AllCodecs(), layout, codec);
  }
  ArenaBox box;
  ScaffoldDevice scaffold;
  Status init;
};

// Devices and the server's side of SCAFFOLD: a MeanAggregator over their changes and c.
struct Federation {
  Federation(const TensorLayout& layout, const CodecParams& codec, std::uint32_t count)
      : box(MeanAggregator::StateBytes(layout, codec)), server(layout.dimension(), 0.0f) {
    init = changes.Init(box.arena, AllCodecs(), layout, codec);
    for (std::uint32_t i = 0; i < count; ++i) {
      devices.push_back(std::make_unique<Device>(layout, codec));
      if (init.ok()) init = devices.back()->init;
    }
  }
  ScaffoldDevice& device(std::uint32_t i) { return devices[i]->scaffold; }
  std::vector<std::unique_ptr<Device>> devices;
  ArenaBox box;
  MeanAggregator changes;
  std::vector<float> server;  // c
  Status init;
};

// The change is q = -c + delta / (H * eta) and c_i gains exactly what the payload decodes to, so
// a server decoding the same payloads adds the same amounts: checked for a lossless and two lossy
// codecs over two rounds.
TEST(ScaffoldTest, TheDeviceKeepsWhatItsCompressedChangeCarries) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  for (const CodecParams& codec :
       {CodecParams{}, CodecParams{TopKParams{0.25f}}, CodecParams{RandomBlockParams{4}}}) {
    SCOPED_TRACE(CodecName(codec));
    Device device(layout, codec);
    ASSERT_TRUE(device.init.ok()) << device.init.reason();
    const std::vector<float> server = UniformVector(d, 1, 0, 0.5f);
    ASSERT_TRUE(device.scaffold.SetServerControl(server).ok());
    std::vector<float> expected(d, 0.0f);
    std::vector<float> work(d);
    for (std::uint32_t round = 0; round < 2; ++round) {
      const std::vector<float> delta = UniformVector(d, 2, round, 1.0f);
      PayloadBuffers payload(device.scaffold.payload_shape());
      const CodecContext context{9, round, 3};
      const Result<PayloadShape> shape =
          device.scaffold.CompressChange(context, delta, 5, 0.1f, work, payload.spans());
      ASSERT_TRUE(shape.ok()) << shape.status().reason();
      const std::vector<float> sent = DecodeDense(codec, layout, context, payload.view());
      for (std::size_t i = 0; i < d; ++i) {
        const float q = delta[i] / (5.0f * 0.1f) - server[i];
        if (std::holds_alternative<IdentityParams>(codec)) {
          ASSERT_EQ(sent[i], q) << i;
        }
        expected[i] += sent[i];
        ASSERT_EQ(device.scaffold.device_control()[i], expected[i]) << i;
      }
    }
  }
}

TEST(ScaffoldTest, TheCorrectionIsTheServersMinusTheDevicesControl) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  Device device(layout, CodecParams{});
  ASSERT_TRUE(device.init.ok());
  std::vector<float> work(d);
  PayloadBuffers payload(device.scaffold.payload_shape());
  // c = 0 here, so c_i becomes delta / (H * eta) = delta.
  const std::vector<float> delta = UniformVector(d, 4, 0, 1.0f);
  ASSERT_TRUE(device.scaffold.CompressChange({}, delta, 1, 1.0f, work, payload.spans()).ok());
  const std::vector<float> server = UniformVector(d, 5, 0, 1.0f);
  ASSERT_TRUE(device.scaffold.SetServerControl(server).ok());
  std::vector<float> gradient = UniformVector(d, 6, 0, 1.0f);
  const std::vector<float> before = gradient;
  ASSERT_TRUE(device.scaffold.Correct(gradient).ok());
  for (std::size_t i = 0; i < d; ++i) {
    ASSERT_EQ(gradient[i], before[i] + (server[i] - delta[i])) << i;
  }
}

// With every device in every round, the server's c (c += count / N * mean of the changes) stays
// the mean of the devices' c_i, even with a lossy codec on the changes.
TEST(ScaffoldTest, TheServersControlIsTheMeanOfTheDevices) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  const CodecParams codec = TopKParams{0.2f};
  constexpr std::uint32_t kDevices = 4;
  Federation federation(layout, codec, kDevices);
  ASSERT_TRUE(federation.init.ok());
  MeanAggregator& changes = federation.changes;
  std::vector<float>& server = federation.server;
  std::vector<float> work(d);
  for (std::uint32_t round = 0; round < 5; ++round) {
    changes.Reset();
    // Three of the four devices take part in odd rounds.
    const std::uint32_t taking_part = round % 2 == 1 ? kDevices - 1 : kDevices;
    for (std::uint32_t i = 0; i < taking_part; ++i) {
      ScaffoldDevice& device = federation.device(i);
      ASSERT_TRUE(device.SetServerControl(server).ok());
      PayloadBuffers payload(device.payload_shape());
      const CodecContext context{1, round, i + 1};
      const std::vector<float> delta = UniformVector(d, 10 + i, round, 1.0f);
      ASSERT_TRUE(device.CompressChange(context, delta, 4, 0.05f, work, payload.spans()).ok());
      ASSERT_TRUE(changes.Add(payload.view(), context).ok());
    }
    ASSERT_TRUE(changes.AddScaledMean(static_cast<float>(taking_part) / kDevices, server).ok());
    for (std::size_t j = 0; j < d; ++j) {
      float mean = 0.0f;
      for (std::uint32_t i = 0; i < kDevices; ++i) mean += federation.device(i).device_control()[j];
      mean /= kDevices;
      ASSERT_NEAR(server[j], mean, 1e-4f * (1.0f + std::fabs(mean))) << round << " " << j;
    }
  }
}

// Client drift: devices whose quadratics differ in curvature and optimum, H = 10 local steps.
// FedAvg settles at a point biased towards the flat devices' optima; SCAFFOLD removes the drift
// and reaches the global optimum, with its changes sent whole or as random blocks of a quarter.
struct DriftResult {
  float fedavg = 0.0f;
  float scaffold = 0.0f;
};

DriftResult DistancesAfterTraining(const CodecParams& change_codec) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  constexpr std::uint32_t kDevices = 4;
  constexpr std::uint32_t kSteps = 10;
  constexpr float kRate = 0.1f;
  std::vector<std::vector<float>> curvature;
  std::vector<std::vector<float>> optimum;
  for (std::uint32_t i = 0; i < kDevices; ++i) {
    curvature.push_back(std::vector<float>(d, i % 2 == 0 ? 0.2f : 2.0f));
    optimum.push_back(UniformVector(d, 20 + i, 0, 3.0f));
  }
  std::vector<float> global(d, 0.0f);  // sum_i a_i b_i / sum_i a_i
  for (std::size_t j = 0; j < d; ++j) {
    float weighted = 0.0f;
    float total = 0.0f;
    for (std::uint32_t i = 0; i < kDevices; ++i) {
      weighted += curvature[i][j] * optimum[i][j];
      total += curvature[i][j];
    }
    global[j] = weighted / total;
  }
  const auto distance = [&](const std::vector<float>& x) {
    double sum = 0.0;
    for (std::size_t j = 0; j < d; ++j) {
      sum += static_cast<double>(x[j] - global[j]) * static_cast<double>(x[j] - global[j]);
    }
    return static_cast<float>(std::sqrt(sum));
  };

  DriftResult result;
  for (const bool corrected : {false, true}) {
    Federation federation(layout, change_codec, kDevices);
    EXPECT_TRUE(federation.init.ok());
    MeanAggregator& changes = federation.changes;
    std::vector<float>& server = federation.server;
    std::vector<float> x(d, 0.0f);
    std::vector<float> y(d);
    std::vector<float> gradient(d);
    std::vector<float> work(d);
    std::vector<float> mean_delta(d);
    for (std::uint32_t round = 0; round < 300; ++round) {
      std::fill(mean_delta.begin(), mean_delta.end(), 0.0f);
      changes.Reset();
      for (std::uint32_t i = 0; i < kDevices; ++i) {
        ScaffoldDevice& device = federation.device(i);
        EXPECT_TRUE(device.SetServerControl(server).ok());
        y = x;
        for (std::uint32_t step = 0; step < kSteps; ++step) {
          for (std::size_t j = 0; j < d; ++j) {
            gradient[j] = curvature[i][j] * (y[j] - optimum[i][j]);
          }
          if (corrected) {
            EXPECT_TRUE(device.Correct(gradient).ok());
          }
          for (std::size_t j = 0; j < d; ++j) y[j] -= kRate * gradient[j];
        }
        std::vector<float> delta(d);
        for (std::size_t j = 0; j < d; ++j) {
          delta[j] = x[j] - y[j];
          mean_delta[j] += delta[j] / kDevices;
        }
        if (!corrected) continue;
        PayloadBuffers payload(device.payload_shape());
        const CodecContext context{5, round, i + 1};
        EXPECT_TRUE(
            device.CompressChange(context, delta, kSteps, kRate, work, payload.spans()).ok());
        EXPECT_TRUE(changes.Add(payload.view(), context).ok());
      }
      for (std::size_t j = 0; j < d; ++j) x[j] -= mean_delta[j];
      if (corrected) {
        EXPECT_TRUE(changes.AddScaledMean(1.0f, server).ok());
      }
    }
    (corrected ? result.scaffold : result.fedavg) = distance(x);
  }
  return result;
}

TEST(ScaffoldTest, RemovesTheClientDriftOfLocalSteps) {
  const DriftResult whole = DistancesAfterTraining(CodecParams{});
  // FedAvg's fixed point is 0.93 from the optimum here; SCAFFOLD's is the optimum (1e-6 off).
  EXPECT_GT(whole.fedavg, 0.5f);
  EXPECT_LT(whole.scaffold, 1e-4f);
  const DriftResult blocks = DistancesAfterTraining(RandomBlockParams{4});
  EXPECT_LT(blocks.scaffold, 1e-4f);
}

TEST(ScaffoldTest, RefusesWhatItCannotUse) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  ScaffoldDevice uninitialized;
  std::vector<float> gradient(d);
  std::vector<float> work(d);
  EXPECT_EQ(uninitialized.Correct(gradient), Status::FailedPrecondition());
  EXPECT_EQ(uninitialized.SetServerControl(gradient), Status::FailedPrecondition());

  Device selector(layout, RegTopKParams{});
  EXPECT_EQ(selector.init, Status::InvalidArgument());
  ArenaBox small(ScaffoldDevice::StateBytes(layout, CodecParams{}) - 1);
  ScaffoldDevice starved;
  EXPECT_EQ(starved.Init(small.arena, AllCodecs(), layout, CodecParams{}),
            Status::ResourceExhausted());
  EXPECT_EQ(small.arena.used_bytes(), 0u);

  Device device(layout, CodecParams{});
  ASSERT_TRUE(device.init.ok());
  ScaffoldDevice& scaffold = device.scaffold;
  std::vector<float> short_vector(d - 1);
  EXPECT_EQ(scaffold.Correct(short_vector), Status::InvalidArgument());
  EXPECT_EQ(scaffold.SetServerControl(short_vector), Status::InvalidArgument());
  std::vector<float> bad(d, 0.0f);
  bad[7] = kNaN;
  EXPECT_EQ(scaffold.SetServerControl(bad), Status::InvalidArgument());
  bad[7] = kInf;
  EXPECT_EQ(scaffold.SetServerControl(bad), Status::InvalidArgument());
  for (const float c : scaffold.server_control()) ASSERT_EQ(c, 0.0f);  // nothing taken

  PayloadBuffers payload(scaffold.payload_shape());
  const std::vector<float> delta(d, 1.0f);
  EXPECT_EQ(scaffold.CompressChange({}, delta, 0, 0.1f, work, payload.spans()).status(),
            Status::InvalidArgument());
  EXPECT_EQ(scaffold.CompressChange({}, delta, 2, 0.0f, work, payload.spans()).status(),
            Status::InvalidArgument());
  EXPECT_EQ(scaffold.CompressChange({}, delta, 2, kNaN, work, payload.spans()).status(),
            Status::InvalidArgument());
  EXPECT_EQ(scaffold.CompressChange({}, short_vector, 2, 0.1f, work, payload.spans()).status(),
            Status::InvalidArgument());
  PayloadBuffers short_payload(PayloadShape{0, d - 1, 0, 0});
  EXPECT_EQ(scaffold.CompressChange({}, delta, 2, 0.1f, work, short_payload.spans()).status(),
            Status::ResourceExhausted());
  for (const float c : scaffold.device_control()) ASSERT_EQ(c, 0.0f);  // nothing kept
}

}  // namespace
}  // namespace edgesgd

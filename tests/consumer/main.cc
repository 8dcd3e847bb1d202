// A program built against an installed edgesgd, through find_package only: proves the exported
// targets carry their include paths, compile definitions and link dependencies (Eigen,
// FlatBuffers with its overlay and the generated schema header, Asio, mbed TLS, OpenSSL), and
// that the libraries work together. It encodes a vector with a codec (core), then runs the same
// two-round parameter-server run in the simulator (sim) and over loopback TCP with
// authenticated frames (tcp, auth, protocol, wire, platform): one worker makes both runs
// compute the same floats, so the models must match bit for bit.

#include <algorithm>
#include <array>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "edgesgd/auth/key_ring.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/serial/framing.h"
#include "edgesgd/sim/simulation.h"
#include "edgesgd/tcp/asio.h"
#include "edgesgd/tcp/server.h"
#include "edgesgd/tcp/worker.h"
#include "edgesgd/wire/edgesgd_generated.h"

namespace {

constexpr std::size_t kDim = 8;
constexpr std::uint32_t kRounds = 2;

bool SignRoundTrip() {
  const auto layout = edgesgd::TensorLayout::Single(kDim);
  if (!layout.ok()) return false;
  const edgesgd::CodecParams params = edgesgd::SignParams{.scale = edgesgd::SignScale::kUnit};
  const edgesgd::CodecRegistry& codecs = edgesgd::AllCodecs();
  std::array<float, kDim> input = {1, -2, 3, -4, 0, 6, -7, 8};
  std::array<std::uint32_t, 1> words{};
  std::array<float, 1> scales{};
  const edgesgd::PayloadSpans out{{}, {}, words, scales};
  if (!codecs.Encode(params, *layout, {}, input, out, {}).ok()) return false;
  std::array<float, kDim> decoded{};
  const edgesgd::PayloadView view({}, {}, words, scales);
  if (!codecs.DecodeAdd(params, *layout, {}, view, 1.0f, decoded, {}).ok()) return false;
  for (std::size_t i = 0; i < input.size(); ++i) {
    if ((input[i] >= 0.0f) != (decoded[i] > 0.0f)) return false;
  }
  return true;
}

// A frame through the serial framing and back.
bool SerialRoundTrip() {
  const std::array<std::byte, 5> payload = {std::byte{1}, std::byte{0}, std::byte{2},
                                            std::byte{0}, std::byte{3}};
  std::array<std::byte, edgesgd::serial::MaxEncodedBytes(5)> encoded{};
  const edgesgd::Result<std::size_t> length = edgesgd::serial::EncodeFrame(payload, encoded);
  if (!length.ok()) return false;
  std::array<std::byte, 16> buffer{};
  edgesgd::serial::FrameDecoder decoder(buffer);
  const auto step = decoder.Push(std::span<const std::byte>(encoded).first(*length));
  return step.frame.size() == payload.size() &&
         std::equal(payload.begin(), payload.end(), step.frame.begin());
}

// f(x) = |x - 1|^2 / 2.
edgesgd::Status Gradient(void*, std::span<const float> point, std::uint32_t, std::uint32_t,
                         std::span<float> gradient) {
  for (std::size_t i = 0; i < point.size(); ++i) gradient[i] = point[i] - 1.0f;
  return edgesgd::Status::Ok();
}

edgesgd::protocol::RunConfig Run() {
  edgesgd::protocol::RunConfig config;
  config.layout = edgesgd::TensorLayout::Single(kDim).value();
  config.codec = edgesgd::IdentityParams{};
  config.feedback.kind = edgesgd::FeedbackKind::kNone;
  config.feedback.learning_rate = 0.5f;
  config.feedback.momentum = 0.0f;
  config.rounds = kRounds;
  config.batch = 1;
  return config;
}

std::vector<float> Simulated(const std::vector<float>& initial) {
  edgesgd::sim::ServerSimulationSettings settings;
  settings.run = Run();
  settings.initial_model = initial;
  settings.workers.resize(1);
  settings.gradient = [](std::size_t, std::span<const float> point, std::uint32_t round,
                         std::uint32_t step, std::span<float> gradient) {
    return Gradient(nullptr, point, round, step, gradient);
  };
  edgesgd::sim::ServerSimulation simulation;
  if (const edgesgd::HostResult<> init = simulation.Init(settings); !init.ok()) {
    std::fprintf(stderr, "consumer: simulation: %s\n", init.message().c_str());
    return {};
  }
  const edgesgd::sim::SimulationResult result = simulation.Run();
  return result.finished ? result.model : std::vector<float>{};
}

std::vector<float> OverTcp(const std::vector<float>& initial) {
  edgesgd::auth::FixedKeyRing<1> keys;
  std::array<std::byte, edgesgd::auth::kKeyBytes> key{};
  key.fill(std::byte{0x5a});
  if (!keys.Add(1, key).ok()) return {};
  asio::io_context io;
  edgesgd::tcp::Server server(io);
  edgesgd::tcp::ServerSettings settings;
  settings.run = Run();
  settings.initial_model = initial;
  settings.listen = {"127.0.0.1", 0};
  settings.network.auth_keys = &keys;
  if (const edgesgd::HostResult<> opened = server.Open(settings); !opened.ok()) {
    std::fprintf(stderr, "consumer: server: %s\n", opened.message().c_str());
    return {};
  }
  std::uint32_t rounds = 0;
  server.OnRound([&rounds](const edgesgd::protocol::RoundEvent&, std::span<const float>) {
    ++rounds;
  });
  edgesgd::tcp::Worker worker(io);
  edgesgd::tcp::WorkerSettings worker_settings;
  worker_settings.server = {"127.0.0.1", server.listen_port()};
  worker_settings.worker.device_id = 1;
  worker_settings.worker.gradient = &Gradient;
  worker_settings.network.auth_keys = &keys;
  worker_settings.network.give_up_ns = 10'000'000'000;
  if (const edgesgd::HostResult<> opened = worker.Open(worker_settings); !opened.ok()) {
    std::fprintf(stderr, "consumer: worker: %s\n", opened.message().c_str());
    return {};
  }
  edgesgd::tcp::DriverStop stop = edgesgd::tcp::DriverStop::kStopped;
  server.Start([&stop](edgesgd::tcp::DriverStop reason) { stop = reason; });
  worker.Start([](edgesgd::tcp::DriverStop) {});
  io.run();
  if (stop != edgesgd::tcp::DriverStop::kFinished || rounds != kRounds) return {};
  const std::span<const float> model = server.session().model();
  return std::vector<float>(model.begin(), model.end());
}

}  // namespace

int main() {
  if (!SignRoundTrip() || !SerialRoundTrip()) return 1;
  // The generated schema header is installed and agrees with the FlatBuffers headers found.
  if (std::string(edgesgd::wire::fb::EnumNamePayload(edgesgd::wire::fb::Payload::SignPayload)) !=
      "SignPayload") {
    return 1;
  }
  const std::vector<float> initial(kDim, 3.0f);
  const std::vector<float> simulated = Simulated(initial);
  const std::vector<float> over_tcp = OverTcp(initial);
  if (simulated.empty() || simulated != over_tcp) {
    std::fprintf(stderr, "consumer: the simulated and the TCP run disagree\n");
    return 1;
  }
  std::printf("consumer: sign and serial round trips ok; %u rounds simulated and over TCP, model[0] = %g\n",
              kRounds, static_cast<double>(simulated[0]));
  return 0;
}

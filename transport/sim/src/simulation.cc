#include "edgesgd/sim/simulation.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <utility>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/error_feedback.h"
#include "edgesgd/core/random.h"

namespace edgesgd::sim {

namespace {

std::span<std::byte> MapZeroedPages(std::size_t bytes) {
  void* pages = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (pages == MAP_FAILED) return {};
  return std::span<std::byte>(static_cast<std::byte*>(pages), bytes);
}

}  // namespace

internal::OwnedArena::OwnedArena(std::size_t bytes)
    : storage(MapZeroedPages(std::max<std::size_t>(bytes, 1))),
      arena(storage, Arena::StorageIsZeroed{}) {}

internal::OwnedArena::~OwnedArena() {
  if (!storage.empty()) ::munmap(storage.data(), storage.size());
}

void internal::OwnedArena::ReleasePages(std::span<std::byte> region) {
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(region.data());
  const std::uintptr_t first = (begin + page - 1) / page * page;
  const std::uintptr_t last = (begin + region.size()) / page * page;
  // Only whole pages inside the region: their neighbours may hold what the session keeps.
  // Private anonymous pages read as zeros afterwards.
  if (last > first) {
    ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
  }
}

namespace {

using internal::DeviceBinding;
using internal::OwnedArena;

Status DeviceGradientCallback(void* user, std::span<const float> point, std::uint32_t round,
                              std::uint32_t local_step, std::span<float> gradient) {
  const DeviceBinding& binding = *static_cast<const DeviceBinding*>(user);
  return (*binding.gradient)(binding.device, point, round, local_step, gradient);
}

// `bindings` (one per device, never resized afterwards) bound to `gradient`.
std::vector<DeviceBinding> BindDevices(const DeviceGradient& gradient, std::size_t devices) {
  std::vector<DeviceBinding> bindings(devices);
  for (std::size_t i = 0; i < devices; ++i) bindings[i] = {&gradient, i};
  return bindings;
}

// What stands in for the secret a real device draws from its operating system to key its
// differential-privacy noise (holder 0 the server, w the worker): derived from the run's seed,
// so that a simulated run is reproducible. Never all zero, which means "no key".
SecretKey SimulatedNoiseKey(std::uint64_t seed, std::uint32_t holder) {
  std::uint64_t state = seed ^ (0x6E6F697365ull << 32) ^ holder;  // "noise"
  SecretKey key;
  key.low = SplitMix64(state);
  key.high = SplitMix64(state);
  if (key.empty()) key.low = 1;
  return key;
}

// What stands in for a device's operating-system entropy for its secure aggregation keys: a
// stream of its simulated secret (DeviceBinding::secret) per round, so a run is reproducible.
Status SimulatedEntropy(void* user, std::uint32_t round, std::span<std::byte> out) {
  const DeviceBinding& binding = *static_cast<const DeviceBinding*>(user);
  CounterRng stream(binding.secret, round, 1, StreamId(RandomPurpose::kUser));
  for (std::size_t at = 0; at < out.size(); at += sizeof(std::uint32_t)) {
    const std::uint32_t word = stream.NextU32();
    std::memcpy(out.data() + at, &word, std::min(sizeof(word), out.size() - at));
  }
  return Status::Ok();
}

}  // namespace

// ---- ServerSimulation ----

HostResult<> ServerSimulation::Init(const ServerSimulationSettings& settings) {
  if (network_) {  // the sessions are registered on it
    return HostError(Status::FailedPrecondition("already initialised"));
  }
  const std::size_t n = settings.workers.size();
  if (n != settings.server.workers || !settings.gradient || settings.codecs == nullptr) {
    return HostError(Status::InvalidArgument("inconsistent simulation settings"),
                     n != settings.server.workers ? "one device per worker"
                     : !settings.gradient         ? "no gradient function"
                                                  : "no codec registry");
  }
  gradient_ = settings.gradient;
  bindings_ = BindDevices(gradient_, n);
  memory_.server_arena_bytes = protocol::ServerSession::ArenaBytes(settings.run, settings.server);
  memory_.device_arena_bytes =
      protocol::WorkerSession::ArenaBytes(settings.run, static_cast<std::uint32_t>(n));
  server_arena_ = std::make_unique<OwnedArena>(memory_.server_arena_bytes);
  protocol::ServerOptions server_options = settings.server;
  if (server_options.noise_key.empty()) {
    server_options.noise_key = SimulatedNoiseKey(settings.run.seed, 0);
  }
  const bool signed_rounds = settings.run.secure.enabled && settings.run.secure.signed_rounds;
  if (signed_rounds) {
    EDGESGD_HOST_TRY(GenerateSigningKeys(settings.run.seed, n));
    if (server_options.secure_verifier == nullptr) server_options.secure_verifier = verifier_.get();
  }
  if (const Status init =
          server_.Init(server_arena_->arena, *settings.codecs, settings.run, server_options,
                       settings.initial_model);
      !init.ok()) {
    return HostError(init).WithContext("server");
  }
  for (std::size_t w = 0; w < n; ++w) {
    worker_arenas_.push_back(std::make_unique<OwnedArena>(memory_.device_arena_bytes));
    workers_.push_back(std::make_unique<protocol::WorkerSession>());
    protocol::WorkerOptions options;
    options.device_id = static_cast<std::uint32_t>(w + 1);
    options.gradient = &DeviceGradientCallback;
    options.codecs = settings.codecs;
    options.user = &bindings_[w];
    options.samples_per_step = settings.workers[w].samples_per_step;
    options.local_step_limit = settings.workers[w].local_step_limit;
    options.add_noise = &AddNoiseShare;
    options.noise_key = SimulatedNoiseKey(settings.run.seed, options.device_id);
    // A second secret of the device, apart from its noise key.
    bindings_[w].secret = SimulatedNoiseKey(~settings.run.seed, options.device_id).low;
    options.secure_entropy = &SimulatedEntropy;
    if (signed_rounds) options.secure_signing = {signers_[w].get(), verifier_.get()};
    if (const Status init = workers_[w]->Init(worker_arenas_[w]->arena, options); !init.ok()) {
      return HostError(init).WithContext("worker " + std::to_string(w + 1));
    }
  }
  network_.emplace(settings.network);
  network_->AddSession(protocol::kServerPeer, server_, settings.server_device);
  for (std::size_t w = 0; w < n; ++w) {
    network_->AddSession(static_cast<protocol::PeerId>(w + 1), *workers_[w],
                         settings.workers[w].profile);
  }
  release_idle_memory_ = settings.release_idle_memory;
  released_after_.assign(n, 0);
  network_->SetObserver([this](const SimEvent& event) {
    Drain();
    if (release_idle_memory_ && event.peer != protocol::kServerPeer) ReleaseIdle(event.peer);
  });
  residuals_.resize(n);
  readout_.resize(settings.run.layout.dimension());
  return {};
}

HostResult<> ServerSimulation::GenerateSigningKeys(std::uint64_t seed, std::size_t devices) {
  std::array<std::byte, 16> material{};
  for (std::size_t i = 0; i < 8; ++i) material[i] = static_cast<std::byte>(seed >> (8 * i));
  std::memcpy(material.data() + 8, "signing", 7);
  secagg::SecretRandom random(secagg::Sha256(material));
  verifying_keys_.resize(devices);
  signers_.clear();
  for (std::size_t w = 0; w < devices; ++w) {
    secagg::SigningKey key;
    verifying_keys_[w].device = static_cast<std::uint32_t>(w + 1);
    const Status generated = secagg::GenerateSigningKey(random, key, verifying_keys_[w].key);
    if (!generated.ok()) return HostError(generated).WithContext("signing keys");
    signers_.push_back(std::make_unique<secagg::EcdsaSigner>(key));
    secagg::Wipe(key);
  }
  verifier_ = std::make_unique<secagg::EcdsaVerifier>(verifying_keys_);
  return {};
}

void ServerSimulation::Drain() {
  protocol::RoundEvent round;
  while (server_.PollRoundEvent(round)) {
    if (on_round_) on_round_(round, server_.model());
  }
  protocol::RejectEvent reject;
  while (server_.PollRejectEvent(reject)) {
    if (on_reject_) on_reject_(reject);
  }
}

void ServerSimulation::ReleaseIdle(protocol::PeerId peer) {
  const std::size_t w = peer - 1;
  const std::uint64_t sent = workers_[w]->counters().updates_sent;
  if (sent == released_after_[w]) return;
  released_after_[w] = sent;
  for (const std::span<std::byte> region : workers_[w]->IdleBuffers()) {
    internal::OwnedArena::ReleasePages(region);
  }
}

SimulationResult ServerSimulation::Run() {
  SimulationResult result;
  result.stop = network_->Run();
  result.status = server_.status();
  result.finished = server_.Finished() && result.status.ok();
  result.rounds = server_.round();
  result.time_ns = network_->now();
  result.model.assign(server_.model().begin(), server_.model().end());
  result.network = network_->TotalCounters();
  result.memory = memory_;
  return result;
}

std::span<const float> ServerSimulation::DeaveragedModel() {
  for (std::size_t w = 0; w < workers_.size(); ++w) {
    residuals_[w] = workers_[w]->error_feedback().residual();
  }
  if (!DeAveragedReadout(server_.model(), residuals_, readout_).ok()) return server_.model();
  return readout_;
}

// ---- GossipSimulation ----

HostResult<> GossipSimulation::Init(const GossipSimulationSettings& settings) {
  if (network_) {  // the sessions are registered on it
    return HostError(Status::FailedPrecondition("already initialised"));
  }
  const std::size_t n = settings.peers.size();
  if (n == 0 || n != settings.devices.size() || !settings.gradient) {
    return HostError(Status::InvalidArgument("inconsistent simulation settings"),
                     n == 0               ? "no peers"
                     : !settings.gradient ? "no gradient function"
                                          : "one device per peer");
  }
  gradient_ = settings.gradient;
  bindings_ = BindDevices(gradient_, n);
  for (std::size_t i = 0; i < n; ++i) {
    const protocol::GossipConfig& config = settings.peers[i];
    const std::string who = "peer " + std::to_string(i + 1);
    if (config.mixing.peer != i + 1) {
      return HostError(Status::InvalidArgument("a peer's configuration names another peer"))
          .WithContext(who);
    }
    const std::size_t bytes = protocol::GossipPeerSession::ArenaBytes(config);
    memory_.device_arena_bytes = std::max(memory_.device_arena_bytes, bytes);
    arenas_.push_back(std::make_unique<OwnedArena>(bytes));
    peers_.push_back(std::make_unique<protocol::GossipPeerSession>());
    protocol::GossipOptions options;
    options.gradient = &DeviceGradientCallback;
    options.user = &bindings_[i];
    options.samples_per_step = settings.devices[i].samples_per_step;
    options.initial_model = settings.initial_model;
    options.codecs = settings.codecs;
    if (const Status init = peers_[i]->Init(arenas_[i]->arena, config, options); !init.ok()) {
      return HostError(init).WithContext(who);
    }
  }
  // One thread: a completed round reads every peer's model, which must not run ahead of it.
  SimConfig network = settings.network;
  network.device_threads = 1;
  network_.emplace(network);
  for (std::size_t i = 0; i < n; ++i) {
    network_->AddSession(static_cast<protocol::PeerId>(i + 1), *peers_[i],
                         settings.devices[i].profile);
  }
  network_->SetObserver([this](const SimEvent&) { Drain(); });
  completed_.assign(settings.peers.front().rounds, 0);
  bytes_sent_.assign(n, 0);
  bytes_received_.assign(n, 0);
  average_.resize(settings.peers.front().layout.dimension());
  return {};
}

void GossipSimulation::Drain() {
  const std::size_t n = peers_.size();
  for (std::size_t i = 0; i < n; ++i) {
    protocol::GossipRoundEvent event;
    while (peers_[i]->PollRoundEvent(event)) {
      if (event.round < completed_.size()) ++completed_[event.round];
      bytes_sent_[i] = event.bytes_sent;
      bytes_received_[i] = event.bytes_received;
    }
  }
  while (next_round_ < completed_.size() && completed_[next_round_] == n) {
    GossipRound round;
    round.round = next_round_;
    round.time_ns = network_->now();
    std::uint64_t sent = 0;
    std::uint64_t received = 0;
    for (std::size_t i = 0; i < n; ++i) {
      sent += bytes_sent_[i];
      received += bytes_received_[i];
    }
    round.bytes_sent = sent / n;
    round.bytes_received = received / n;
    ++next_round_;
    if (on_round_) on_round_(round);
  }
}

PeerAverage GossipSimulation::Average() {
  const auto n = static_cast<float>(peers_.size());
  std::fill(average_.begin(), average_.end(), 0.0f);
  for (const auto& peer : peers_) {
    const std::span<const float> x = peer->model();
    for (std::size_t k = 0; k < average_.size(); ++k) average_[k] += x[k] / n;
  }
  double consensus = 0;
  for (const auto& peer : peers_) {
    const std::span<const float> x = peer->model();
    for (std::size_t k = 0; k < average_.size(); ++k) {
      const double diff = static_cast<double>(x[k]) - static_cast<double>(average_[k]);
      consensus += diff * diff;
    }
  }
  return PeerAverage{average_, consensus / static_cast<double>(peers_.size())};
}

SimulationResult GossipSimulation::Run() {
  SimulationResult result;
  result.stop = network_->Run();
  result.rounds = next_round_;
  for (const auto& peer : peers_) {
    if (!peer->status().ok()) {
      result.status = peer->status();
      break;
    }
  }
  result.finished = next_round_ == completed_.size() && result.status.ok();
  result.time_ns = network_->now();
  const PeerAverage average = Average();
  result.model.assign(average.model.begin(), average.model.end());
  result.network = network_->TotalCounters();
  result.memory = memory_;
  return result;
}

}  // namespace edgesgd::sim

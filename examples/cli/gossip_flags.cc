#include "cli/gossip_flags.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "cli/async_flags.h"
#include "cli/bounded_option.h"
#include "cli/flag_error.h"
#include "cli/secure_flags.h"
#include "cli/server_optimizer_flags.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/protocol/run_feature.h"

namespace edgesgd::cli {

void AddGossipFlags(CLI::App& command, RunFlags& o) {
  RunFlags* flags = &o;
  const auto gossip_given = [flags](const std::string&) { flags->gossip_flags_given = true; };
  command.add_option("--gossip", o.gossip,
                     "Gossip algorithm: dpsgd (mix, then a gradient step), gt (gradient "
                     "tracking: model and tracker exchanged each round), detag (gradient "
                     "tracking with accelerated gossip over R steps per round), choco "
                     "(CHOCO-SGD: a gradient step, then the model's change against its public "
                     "copy sent compressed with --codec, then a consensus step of "
                     "--consensus-step) or beer (BEER: gradient tracking with both the model "
                     "and the tracker sent compressed with --codec against public copies, "
                     "consensus steps of --consensus-step)")
      ->capture_default_str()
      ->check(CLI::IsMember({"dpsgd", "gt", "detag", "choco", "beer"}))
      ->each(gossip_given);
  command.add_option("--topology", o.topology,
                     "Gossip graph: ring, torus (or torus:RxC), complete, star (peer 1 the hub), "
                     "exponential (peers 2^k apart), random-regular:K[:SEED] (connected, "
                     "degree K; SEED defaults to --seed) or file:PATH (an edge list: one `I J` "
                     "pair of peer ids 1..n per line, # comments; each edge once or both ways)")
      ->capture_default_str()
      ->each(gossip_given);
  command.add_option("--gossip-weights", o.gossip_weights,
                     "Mixing matrix: metropolis (W_ij = 1/(1 + max(deg i, deg j))) or uniform "
                     "(1/(1 + max degree) on every edge: 1/3 on a ring)")
      ->capture_default_str()
      ->check(CLI::IsMember({"metropolis", "uniform"}))
      ->each(gossip_given);
  AddBoundedOption(command, "--gossip-rounds", o.gossip_rounds, 0u, protocol::kMaxGossipSteps,
                   "DeTAG: accelerated gossip steps R per round; 0 = the recipe "
                   "max(1, floor(0.5 ln(n) / sqrt(1 - lambda)))")
      ->each(gossip_given);
  AddBoundedOption(command, "--phase-batches", o.phase_batches, 1u, protocol::kMaxPhaseBatches,
                   "Gossip: gradient mini-batches (of --batch samples each) averaged into "
                   "every round's gradient (DeTAG's phase batch is B = this x --batch)")
      ->each(gossip_given);
  AddBoundedOption(command, "--consensus-step", o.consensus_step, 0.0f, 1.0f,
                   "CHOCO and BEER: consensus step gamma in (0, 1], x += gamma * sum_j W_ij "
                   "(x^_j - x^_i) (BEER: the tracker too); 0 = the codec's default: 1 for "
                   "identity, fp16, natural and qsgd, "
                   "0.5 for sign, 0.05 for top_k, rand_k and random_block (docs/algorithms.md)")
      ->each([flags](const std::string&) {
        flags->gossip_flags_given = true;
        flags->consensus_step_given = true;
      });
  command.add_flag("--no-public-copies", o.no_public_copies,
                   "CHOCO without its public copies, for comparisons: peers exchange the "
                   "compressed models themselves, x += gamma * sum_j W_ij (C(x_j) - C(x_i)) — "
                   "the naive compressed gossip that stalls or diverges with aggressive "
                   "compression (docs/algorithms.md)")
      ->each(gossip_given);
}

HostResult<> CheckGossipConsistency(const RunFlags& o) {
  const RunFlags defaults;
  const bool choco = o.gossip == "choco";
  const bool compressed = choco || o.gossip == "beer";
  if (!compressed && o.codec.codec() != CodecName(protocol::ModelCodec())) {
    return FlagError("--gossip " + o.gossip +
                     " exchanges dense models: use --gossip choco or beer to compress (or --codec "
                     "identity)");
  }
  if (!compressed && o.consensus_step_given) {
    return FlagError(
        "--consensus-step is the consensus step gamma of CHOCO and BEER: it needs --gossip "
        "choco or beer");
  }
  if (!choco && o.no_public_copies) {
    return FlagError("--no-public-copies turns off CHOCO's public copies: it needs --gossip choco");
  }
  if (compressed) {
    const HostResult<CodecParams> parsed = o.codec.Params();
    if (!parsed.ok()) return parsed.error();
    const CodecParams& codec = *parsed;
    if (const Status usable = protocol::CheckChocoCodec(codec); !usable.ok()) {
      return FlagError("--gossip " + o.gossip + ": " + usable.reason());
    }
  }
  if (o.aggregate != defaults.aggregate || o.optimizer != defaults.optimizer) {
    return FlagError(
        "gossip mixes models with plain SGD steps instead of a server aggregate: drop "
        "--aggregate and --optimizer");
  }
  if (o.feedback_given && o.feedback != "none") {
    return FlagError(
        "gossip has no error feedback (CHOCO's public copies keep what compression left "
        "out): drop --feedback");
  }
  if (o.local_steps != defaults.local_steps || o.participation != defaults.participation ||
      o.features.AnyGiven(protocol::kProximalFeature) || o.scaffold) {
    return FlagError(
        "gossip takes one gradient step per round with every peer: drop --local-steps, "
        "--prox-mu, --scaffold and --participation");
  }
  if (o.momentum != defaults.momentum || o.weight_decay != defaults.weight_decay ||
      o.detach != defaults.detach) {
    return FlagError(
        "gossip steps are plain SGD steps: drop --momentum, --weight-decay and --detach");
  }
  if (o.quorum != defaults.quorum || o.downlink != defaults.downlink || o.tie != defaults.tie ||
      o.join_timeout_s != defaults.join_timeout_s) {
    return FlagError(
        "--quorum, --downlink, --tie and --join-timeout-s shape a server's rounds: gossip has "
        "no server");
  }
  if (o.features.AnyGiven(protocol::kPrivacyFeature)) {
    return FlagError(
        "differential privacy clips and noises the updates a server averages: gossip has "
        "no server (drop the --dp-* flags)");
  }
  if (o.features.AnyGiven(protocol::kRobustFeature)) {
    return FlagError(
        "robust aggregation replaces a server's mean: gossip has no server (drop the "
        "--robust* flags)");
  }
  if (ServerOptimizerFlagsGiven(o)) {
    return FlagError(
        "a server optimizer moves a server's model: gossip has no server (drop the "
        "--server-* flags)");
  }
  if (SecureFlagsGiven(o)) {
    return FlagError(
        "secure aggregation hides updates from a server: gossip has no server (drop "
        "--secure-aggregation and the --secagg-* flags)");
  }
  if (AsyncFlagsGiven(o)) {
    return FlagError(
        "buffered asynchronous aggregation is a server's: gossip has no server (drop "
        "--buffer, --staleness and --max-staleness)");
  }
  if (o.gossip_rounds != 0 && o.gossip != "detag") {
    return FlagError(
        "--gossip-rounds sets DeTAG's gossip steps per round: it needs --gossip detag "
        "(dpsgd and gt take one)");
  }
  return {};
}

HostResult<GossipPlan> BuildGossipPlan(const RunFlags& o, std::size_t peers) {
  const auto n = static_cast<std::uint32_t>(peers);
  HostResult<GossipTopology> graph = MakeGossipTopology(o.topology, n, o.seed);
  if (!graph.ok()) return std::move(graph).error();
  GossipPlan plan;
  plan.graph = std::move(graph).value();
  const protocol::Topology topology = plan.graph.view();
  plan.rule = o.gossip_weights == "uniform" ? protocol::MixingRule::kMaxDegree
                                            : protocol::MixingRule::kMetropolisHastings;
  // The spectrum of W, once: lambda sets DeTAG's eta_g and R and is reported.
  std::vector<std::byte> scratch(protocol::SpectrumScratchBytes(topology));
  if (const Status check =
          protocol::ComputeMixingSpectrum(topology, plan.rule, scratch, plan.spectrum);
      !check.ok()) {
    return FlagError("--topology " + o.topology + ": " + check.reason());
  }
  plan.algorithm = o.gossip == "gt"      ? protocol::GossipAlgorithm::kGradientTracking
                   : o.gossip == "detag" ? protocol::GossipAlgorithm::kDetag
                   : o.gossip == "choco" ? protocol::GossipAlgorithm::kChoco
                   : o.gossip == "beer"  ? protocol::GossipAlgorithm::kBeer
                                         : protocol::GossipAlgorithm::kDpsgd;
  if (protocol::CompressesGossip(plan.algorithm)) {
    const HostResult<CodecParams> codec = o.codec.Params();
    if (!codec.ok()) return codec.error();
    plan.codec = *codec;
    if (o.consensus_step != 0.0f) {
      plan.consensus_step = o.consensus_step;
    } else if (const Result<float> step = protocol::DefaultConsensusStep(plan.codec); step.ok()) {
      plan.consensus_step = step.value();
    } else {
      return FlagError(std::string("--codec ") + std::string(CodecName(plan.codec)) + ": " +
                       step.status().reason() + " with --consensus-step");
    }
    plan.public_copies = !o.no_public_copies;
  }
  const bool detag = plan.algorithm == protocol::GossipAlgorithm::kDetag;
  plan.steps = !detag ? 1
                      : (o.gossip_rounds != 0 ? o.gossip_rounds
                                              : protocol::DetagGossipSteps(n, plan.spectrum.lambda));
  plan.eta = detag ? protocol::AcceleratedGossipRate(plan.spectrum.lambda) : 0.0f;
  return plan;
}

void PrintGossipPlan(const char* command, const RunFlags& o, const GossipPlan& plan) {
  std::fprintf(stderr,
               "edgesgd %s: gossip %s on a %s, %s weights: lambda %.6f, spectral gap %.6f, eta_g "
               "%.4f, R %u exchange step%s per round, B %u gradient call%s per round\n",
               command, protocol::GossipAlgorithmName(plan.algorithm),
               plan.graph.description.c_str(), o.gossip_weights.c_str(), plan.spectrum.lambda,
               plan.spectrum.spectral_gap, static_cast<double>(plan.eta), plan.steps,
               plan.steps == 1 ? "" : "s", o.phase_batches, o.phase_batches == 1 ? "" : "s");
  if (plan.algorithm == protocol::GossipAlgorithm::kChoco) {
    std::fprintf(stderr, "edgesgd %s: CHOCO sends %s-compressed %s, consensus step %g\n",
                 command, std::string(CodecName(plan.codec)).c_str(),
                 plan.public_copies ? "model deltas"
                                    : "models (no public copies: the naive baseline)",
                 static_cast<double>(plan.consensus_step));
  } else if (plan.algorithm == protocol::GossipAlgorithm::kBeer) {
    std::fprintf(stderr,
                 "edgesgd %s: BEER sends %s-compressed model and tracker deltas, consensus "
                 "step %g\n",
                 command, std::string(CodecName(plan.codec)).c_str(),
                 static_cast<double>(plan.consensus_step));
  }
}

void WriteGossipPlanFields(SummaryWriter& summary, const RunFlags& o, const GossipPlan& plan) {
  summary.Field("algorithm", protocol::GossipAlgorithmName(plan.algorithm));
  summary.Field("graph", plan.graph.description);
  summary.Field("weights", o.gossip_weights);
  summary.Field("lambda", plan.spectrum.lambda);
  summary.Field("spectral_gap", plan.spectrum.spectral_gap);
  summary.Field("eta_g", static_cast<double>(plan.eta));
  summary.Field("gossip_steps", plan.steps);
  summary.Field("phase_batches", o.phase_batches);
  summary.Field("max_degree", protocol::MaxDegree(plan.graph.view()));
  if (protocol::CompressesGossip(plan.algorithm)) {
    summary.Field("codec", std::string(CodecName(plan.codec)));
    summary.Field("consensus_step", static_cast<double>(plan.consensus_step));
    summary.Field("public_copies", plan.public_copies);
  }
}

protocol::GossipConfig BuildGossipConfig(const RunFlags& o, const Task& task,
                                         const GossipPlan& plan, protocol::PeerId id) {
  protocol::GossipConfig config;
  config.algorithm = plan.algorithm;
  config.mixing = protocol::MakeMixingRow(plan.graph.view(), plan.rule, id).value();
  config.layout = task.layout();
  config.rounds = o.rounds;
  config.learning_rate = o.lr;
  config.seed = o.seed;
  config.neighbour_deadline_ns = static_cast<protocol::TimeNs>(o.round_deadline_s * 1e9);
  config.gossip_steps = plan.steps;
  config.accel = plan.eta;
  config.phase_batches = o.phase_batches;
  config.codec = plan.codec;
  config.consensus_step = plan.consensus_step;
  config.public_copies = plan.public_copies;
  return config;
}

}  // namespace edgesgd::cli

"""DP-FedAvg at epsilon 3: clipping alone, central noise and distributed noise against the
non-private run, with epsilon 8 for the trade-off and a random_block pair for compression."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from experiment_figures import final, fmt, mean  # noqa: E402

TITLE = "K: DP-FedAvg at epsilon 3 (delta 1e-5), central and distributed noise, vs non-private"
CLAIM = (
    "McMahan, Ramage, Talwar & Zhang (ICLR 2018, DP-FedAvg): with devices sampled each round, "
    "updates clipped to an L2 norm C and Gaussian noise of std z C on each round's sum, a "
    "federated model is (epsilon, delta)-private per device at an accuracy cost that shrinks "
    "with the cohort; epsilon from the RDP accountant of Mironov, Talwar & Zhang (2019). "
    "Checked on Fashion-MNIST softmax regression, 256 iid devices, --participation 0.1 (each "
    "device joins a round with probability q = 0.1, Poisson sampling from the server's secret), "
    "8 local SGD steps of batch 32 at lr 0.1 per round, 500 rounds, C = 0.05, 2 seeds; z = 3.485 "
    "for epsilon 3 and 1.636 for epsilon 8 from `edgesgd privacy-budget --sampling-rate 0.1 "
    "--rounds 500 --delta 1e-5 --epsilon E`. The server charges each round with the noise its "
    "sum really carried: with distributed noise a round where fewer than the expected 26 devices "
    "reported carries less, so those runs can end above their plan (the pilot and the first "
    "runs of this experiment used a fixed cohort of 26 accounted as q = 26/256 with z = 3.536 "
    "and 1.656; the accuracy figures of the pilot below are from that sampling). The main "
    "runs all send dense fp32 (identity), so that central "
    "and distributed DP differ only in where the noise is added (same z, same total variance) "
    "and no compression cost mixes in; a random_block 1/8 pair (error feedback, aggregate "
    "downlink, as in G) is a reference for DP with compression. Pilot on seed 99 (not one of "
    "the experiment's seeds), final accuracy: with 1 local step of batch 32 and 1,000 rounds "
    "central DP at epsilon 3 reached 0.66/0.73/0.75/0.70 for C = 0.003/0.01/0.03/0.1 against "
    "0.824 non-private; full local shards (batch 0) 0.796 at 3x the time; 4 local steps 0.780 "
    "(C 0.05); 8 local steps and 500 rounds 0.806 (C 0.05; 0.798 with C 0.1), hence this "
    "configuration (fewer rounds need less noise per round for the same epsilon). There: "
    "non-private 0.839, clipping only 0.820, distributed DP 0.799, epsilon 8 0.817, random_block "
    "1/8 0.835 without DP and 0.719 with distributed DP (1/64: 0.780 and 0.571, hence 1/8). "
    "Clipping costs ~2 points because a clipped delta moves at most C per round, more than the "
    "1 point first hoped for. Criteria, fixed before the run (means over seeds): every epsilon-3 "
    "run ends at epsilon in (2.5, 3.0] and the epsilon-8 run in (7, 8]; clipping only ends "
    "within 2.5 points of non-private; central DP at epsilon 3 within 5 points of non-private; "
    "distributed DP within 1 point of central DP; epsilon 8 ends above central epsilon 3. "
    "Adaptive clipping (Andrew et al., NeurIPS 2021: C follows the target quantile gamma of the "
    "update norms from a noised count, so that C needs no tuning), added afterwards with its own "
    "pilot on seed 99: central DP at epsilon 3 with a badly chosen fixed C = 1 (20x the pilot's "
    "choice) reached 0.684; adaptive clipping from C = 1 with gamma 0.5, eta_C 0.2 and count "
    "noise sigma_b 5 (it must exceed z / 2: the count shares the budget, leaving the updates a "
    "multiplier of 3.78) reached 0.733, the same as from C = 0.05 (0.733; gamma 0.1 0.751, 0.2 "
    "0.745), still below the tuned fixed C's 0.806. Criterion, from that pilot: adaptive from "
    "C = 1 ends above fixed C = 1; its gap to the tuned fixed C is reported."
)

SEEDS = [1, 2]
CLIP = "0.05"
# edgesgd privacy-budget --sampling-rate 0.1 --rounds 500 --delta 1e-5 --epsilon 3
Z_EPS3 = "3.485"
# edgesgd privacy-budget --sampling-rate 0.1 --rounds 500 --delta 1e-5 --epsilon 8
Z_EPS8 = "1.636"
RANDOM_BLOCK = ["--codec", "random_block", "--block-ratio", "8", "--downlink", "aggregate"]

BASE = "non-private"
CLIPPED = "clipping only (z = 0)"
CENTRAL = "central DP, eps 3"
DISTRIBUTED = "distributed DP, eps 3"
CENTRAL8 = "central DP, eps 8"
RB = "random_block 1/8, non-private"
RB_DISTRIBUTED = "random_block 1/8, distributed DP, eps 3"
LOOSE = "central DP, eps 3, fixed C = 1"
ADAPTIVE = "central DP, eps 3, adaptive C from 1"


def _dp(mode, z):
    return ["--dp-mode", mode, "--dp-clip", CLIP, "--dp-noise-multiplier", z]


RUNS = [
    (BASE, ["--dp-mode", "off"], SEEDS),
    (CLIPPED, _dp("central", "0"), SEEDS),
    (CENTRAL, _dp("central", Z_EPS3), SEEDS),
    (DISTRIBUTED, _dp("distributed", Z_EPS3), SEEDS),
    (CENTRAL8, _dp("central", Z_EPS8), SEEDS),
    (RB, RANDOM_BLOCK, SEEDS),
    (RB_DISTRIBUTED, RANDOM_BLOCK + _dp("distributed", Z_EPS3), SEEDS),
    (LOOSE, ["--dp-mode", "central", "--dp-clip", "1", "--dp-noise-multiplier", Z_EPS3], SEEDS),
    (ADAPTIVE, ["--dp-mode", "central", "--dp-clip", "1", "--dp-noise-multiplier", Z_EPS3,
                "--dp-target-quantile", "0.5", "--dp-count-noise", "5"], SEEDS),
]

PLOTS = [
    {"x": "round", "y": "accuracy", "ylabel": "test accuracy (mean over seeds)", "logy": False},
    {"x": "round", "y": "epsilon", "ylabel": "epsilon spent (delta 1e-5)", "logy": False},
]

EPSILON_BOUNDS = {CENTRAL: (2.5, 3.0), DISTRIBUTED: (2.5, 3.0), RB_DISTRIBUTED: (2.5, 3.0),
                  ADAPTIVE: (2.5, 3.0), CENTRAL8: (7.0, 8.0)}
CLIP_GAP = 0.025
CENTRAL_GAP = 0.05
DISTRIBUTED_GAP = 0.01


def evaluate(results):
    labels = [label for label, _, _ in RUNS]
    accuracy = {label: mean(final(results, label, "accuracy")) for label in labels}
    per_seed = {label: final(results, label, "accuracy") for label in labels}
    accuracies = "final accuracy (per seed) - " + "; ".join(
        f"{label}: {fmt(accuracy[label], 4)} ("
        + ", ".join(fmt(value, 4) for value in per_seed[label]) + ")"
        for label in labels)
    epsilon = {label: final(results, label, "epsilon") for label in EPSILON_BOUNDS}
    epsilons = "final epsilon per seed - " + "; ".join(
        f"{label}: " + ", ".join(fmt(value, 4) for value in epsilon[label])
        for label in EPSILON_BOUNDS)

    def gap(label, reference):
        return f"{label} {fmt(accuracy[label], 4)} vs {reference} {fmt(accuracy[reference], 4)} " \
               f"({(accuracy[label] - accuracy[reference]) * 100:+.2f} points)"

    claims = []
    claims.append(("every epsilon-3 run ends at epsilon in (2.5, 3.0] and the epsilon-8 run in "
                   "(7, 8] (the accountant's budget is met, and the noise not overestimated)",
                   all(len(epsilon[label]) == len(SEEDS)
                       and all(value is not None and low < value <= high
                               for value in epsilon[label])
                       for label, (low, high) in EPSILON_BOUNDS.items()),
                   epsilons))
    claims.append((f"clipping only (C = {CLIP}, no noise) ends within {CLIP_GAP * 100:.1f} points "
                   f"of the non-private run",
                   accuracy[CLIPPED] >= accuracy[BASE] - CLIP_GAP,
                   gap(CLIPPED, BASE) + "; " + accuracies))
    claims.append((f"central DP at epsilon 3 ends within {CENTRAL_GAP * 100:.0f} points of the "
                   f"non-private run",
                   accuracy[CENTRAL] >= accuracy[BASE] - CENTRAL_GAP,
                   gap(CENTRAL, BASE) + "; " + gap(CENTRAL, CLIPPED) + " (the noise's share)"))
    claims.append((f"distributed DP ends within {DISTRIBUTED_GAP * 100:.0f} point of central DP "
                   f"at the same z (same total noise)",
                   abs(accuracy[DISTRIBUTED] - accuracy[CENTRAL]) <= DISTRIBUTED_GAP,
                   gap(DISTRIBUTED, CENTRAL) + "; reference, not a criterion: "
                   + gap(RB_DISTRIBUTED, RB) + ", " + gap(RB, BASE)))
    claims.append(("epsilon 8 ends above epsilon 3 (central, same C)",
                   accuracy[CENTRAL8] > accuracy[CENTRAL], gap(CENTRAL8, CENTRAL)))
    claims.append(("adaptive clipping from a badly chosen C = 1 ends above fixed C = 1 (central, "
                   "epsilon 3)",
                   accuracy[ADAPTIVE] > accuracy[LOOSE],
                   gap(ADAPTIVE, LOOSE) + "; reference, not a criterion: " + gap(ADAPTIVE, CENTRAL)
                   + " (the pilot-tuned fixed C)"))
    return claims

"""Secure aggregation of random_block updates with DEF, of qsgd levels of a shared scale with EF
and of majority votes: the masked runs against the plain ones, with every device masking with
every other (SecAgg) and with four neighbours (SecAgg+)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from experiment_figures import final_mean, fmt  # noqa: E402

TITLE = "o_secure_aggregation: SecAgg and SecAgg+ of compressed updates and of majority votes"
CLAIM = (
    "Bonawitz et al. (CCS 2017, SecAgg) and Bell et al. (CCS 2020, SecAgg+): devices mask their "
    "updates with pairwise masks that cancel in the sum and a self mask the survivors help "
    "remove, so the server learns only the round's sum; the sum is exact, so training is "
    "unchanged. edgesgd masks the compressed update: random_block selects the same coordinates "
    "on every device from the run's seed, so only those values are masked and sent, in 32-bit "
    "fixed point (bound 4, 24 fraction bits for 8 workers); a majority vote masks each sign as a "
    "0 or 1 in a 4-bit lane (8 voters), and the server learns each coordinate's count of +1 "
    "votes. Checked on Fashion-MNIST with the 256-unit MLP (203,530 parameters), 8 workers, 600 "
    "rounds, 2 seeds: random_block 1/64 with DEF (3,181 values per device and round; lr 0.05, "
    "the setting of experiment G) and sign with majority vote (Signum, lr 0.0005, the vote as "
    "downlink; pilot on seed 99, 300 rounds: lr 0.0005 0.846, 0.002 0.840), and 4-bit qsgd "
    "(7 levels) with EF, every bucket quantized with one shared scale S = 0.01 so that the "
    "devices' levels add up, masked as level + 7 in 7-bit lanes (pilot on seed 99, 300 rounds, "
    "plain: S 0.003 0.832, 0.01 0.838, 0.03 0.834; qsgd with its own bucket norms diverged at "
    "this lr, 0.085). Criteria, fixed before the run (means over seeds): SecAgg ends within 0.5 "
    "points of the plain run's test accuracy with random_block, with qsgd and with the majority "
    "vote; so does SecAgg+ (k = 4) with random_block; the masked random_block payload is no larger than the plain payload (bits "
    "per coordinate; the plain payload also carries the 4 block starts, which the masked one "
    "leaves to the shared seed); the whole secure uplink of random_block (masked inputs, keys, "
    "sealed and revealed shares, and their frames) stays within 10 % of the plain uplink."
)

SEEDS = [1, 2]
BLOCKS = ["--codec", "random_block", "--block-ratio", "64", "--feedback", "def", "--optimizer",
          "momentum", "--lr", "0.05"]
QSGD = ["--codec", "qsgd", "--bits", "4", "--shared-scale", "0.01", "--feedback", "ef",
        "--optimizer", "momentum", "--lr", "0.05"]
VOTES = ["--codec", "sign", "--aggregate", "majority", "--optimizer", "signum", "--lr", "0.0005",
         "--downlink", "aggregate"]
SECURE = ["--secure-aggregation"]
PLAIN = "random_block, plain"
SECAGG = "random_block, SecAgg (every other device)"
SECAGG_PLUS = "random_block, SecAgg+ (k = 4 neighbours)"
QSGD_PLAIN = "qsgd 4 bits, shared scale, plain"
QSGD_SECAGG = "qsgd 4 bits, shared scale, SecAgg"
VOTE_PLAIN = "majority vote, plain"
VOTE_SECAGG = "majority vote, SecAgg"
RUNS = [
    (PLAIN, BLOCKS, SEEDS),
    (SECAGG, BLOCKS + SECURE, SEEDS),
    (SECAGG_PLUS, BLOCKS + SECURE + ["--secagg-neighbours", "4"], SEEDS),
    (QSGD_PLAIN, QSGD, SEEDS),
    (QSGD_SECAGG, QSGD + SECURE, SEEDS),
    (VOTE_PLAIN, VOTES, SEEDS),
    (VOTE_SECAGG, VOTES + SECURE, SEEDS),
]

PLOTS = [
    {"x": "round", "y": "accuracy", "ylabel": "test accuracy, random_block (mean over seeds)",
     "logy": False, "runs": [PLAIN, SECAGG, SECAGG_PLUS]},
    {"x": "round", "y": "accuracy", "ylabel": "test accuracy, qsgd (mean over seeds)",
     "logy": False, "runs": [QSGD_PLAIN, QSGD_SECAGG]},
    {"x": "round", "y": "accuracy", "ylabel": "test accuracy, majority vote (mean over seeds)",
     "logy": False, "runs": [VOTE_PLAIN, VOTE_SECAGG]},
]

ACCURACY_GAP = 0.005
UPLINK_BUDGET = 1.10


def evaluate(results):
    accuracy = {label: final_mean(results, label, "accuracy") for label, _, _ in RUNS}
    uplink = {label: final_mean(results, label, "bytes_up") for label, _, _ in RUNS}
    bits = {label: final_mean(results, label, "bits_per_coord") for label, _, _ in RUNS}
    claims = []
    for label, reference in ((SECAGG, PLAIN), (SECAGG_PLUS, PLAIN), (QSGD_SECAGG, QSGD_PLAIN),
                             (VOTE_SECAGG, VOTE_PLAIN)):
        ok = None not in (accuracy[label], accuracy[reference])
        claims.append((
            f"{label} ends within {ACCURACY_GAP * 100:.1f} points of the plain run's accuracy",
            ok and accuracy[label] >= accuracy[reference] - ACCURACY_GAP,
            f"{fmt(accuracy[label], 4)} against {fmt(accuracy[reference], 4)}"
            + (f" ({(accuracy[label] - accuracy[reference]) * 100:+.2f} points)" if ok else "")))
    claims.append((
        "the masked random_block payload is no larger than the plain compressed payload",
        None not in (bits[SECAGG], bits[PLAIN]) and bits[SECAGG] <= bits[PLAIN],
        f"{fmt(bits[SECAGG], 5)} bits per coordinate masked against {fmt(bits[PLAIN], 5)} plain; "
        f"reference, not a criterion: the masked votes {fmt(bits[VOTE_SECAGG], 5)} against the "
        f"plain votes' {fmt(bits[VOTE_PLAIN], 5)} (4-bit lanes for 8 voters)"))

    def ratio(label, reference):
        if None in (uplink[label], uplink[reference]):
            return None
        return uplink[label] / uplink[reference]

    claims.append((
        f"the whole secure uplink of random_block stays within {(UPLINK_BUDGET - 1) * 100:.0f} % "
        f"of the plain uplink (SecAgg, 8 devices)",
        ratio(SECAGG, PLAIN) is not None and ratio(SECAGG, PLAIN) <= UPLINK_BUDGET,
        f"SecAgg {fmt(ratio(SECAGG, PLAIN), 4)}x the plain uplink "
        f"({fmt(uplink[SECAGG] / 1e6 if uplink[SECAGG] else None)} MB against "
        f"{fmt(uplink[PLAIN] / 1e6 if uplink[PLAIN] else None)} MB); reference, not a "
        f"criterion: SecAgg+ (k = 4) {fmt(ratio(SECAGG_PLUS, PLAIN), 4)}x, masked qsgd "
        f"{fmt(ratio(QSGD_SECAGG, QSGD_PLAIN), 4)}x plain qsgd's (7-bit lanes against 4-bit "
        f"fields), the masked majority vote {fmt(ratio(VOTE_SECAGG, VOTE_PLAIN), 4)}x the plain "
        f"vote's"))
    return claims

"""Natural compression and half precision against dense SGD."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from experiment_figures import final, fmt, mean  # noqa: E402

TITLE = "J: natural compression and fp16 with error feedback"
CLAIM = (
    "Horváth et al. (2019, natural compression): rounding every coordinate without bias to a "
    "power of two (sign + exponent, 9 bits) costs next to nothing in accuracy for 3.6x fewer "
    "bits; half precision (16 bits) is lossless in practice. Checked on Fashion-MNIST softmax "
    "regression, 8 workers, momentum 0.9, lr 0.05, 1,500 rounds, 3 seeds: natural + EF and "
    "fp16 + EF end within 0.5 points of dense SGD, with at least 3.4x and 1.9x fewer uplink "
    "bytes."
)

SEEDS = [1, 2, 3]
DENSE = "dense SGD"
NATURAL = "natural + EF"
FP16 = "fp16 + EF"
RUNS = [
    (DENSE, ["--codec", "identity", "--feedback", "none"], SEEDS),
    (NATURAL, ["--codec", "natural", "--feedback", "ef"], SEEDS),
    (FP16, ["--codec", "fp16", "--feedback", "ef"], SEEDS),
]

PLOTS = [
    {"x": "round", "y": "accuracy", "ylabel": "test accuracy (mean over seeds)", "logy": False},
    {"x": "bytes_up", "y": "accuracy", "ylabel": "test accuracy vs cumulative uplink bytes",
     "logy": False},
]


def evaluate(results):
    accuracy = {label: mean(final(results, label, "accuracy")) for label in (DENSE, NATURAL, FP16)}
    up = {label: mean(final(results, label, "bytes_up")) for label in (DENSE, NATURAL, FP16)}
    accuracies = "final accuracy - " + "; ".join(f"{label}: {fmt(accuracy[label], 4)}"
                                                 for label in accuracy)
    claims = []
    for label, ratio_needed in ((NATURAL, 3.4), (FP16, 1.9)):
        ratio = up[DENSE] / up[label]
        claims.append((f"{label} ends within 0.5 points of dense SGD",
                       accuracy[label] >= accuracy[DENSE] - 0.005, accuracies))
        claims.append((f"{label} sends at least {ratio_needed}x fewer uplink bytes",
                       ratio >= ratio_needed,
                       f"MB up - dense {up[DENSE] / 1e6:.1f}, {label} {up[label] / 1e6:.1f} "
                       f"({ratio:.2f}x fewer)"))
    return claims

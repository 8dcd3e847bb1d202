"""Experiment E: DQ-SGD's per-round bit widths against fixed-width QSGD."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from experiment_figures import final, fmt, mean  # noqa: E402

TITLE = "E: DQ-SGD (dynamic bits) vs QSGD at 2, 4 and 8 bits"
CLAIM = (
    "Yan et al. (2021): choosing the quantization level per round from the gradient norm and "
    "the rounds left (few bits early, more near the end) reaches the accuracy of a fine fixed "
    "quantizer with fewer bits. Checked with 8 workers on Fashion-MNIST softmax regression "
    "(batch 64, lr 0.2, 600 rounds, 3 seeds): DQ-SGD (K = 20, rho = 0.99, bits clipped to 2..8) "
    "must end within 0.5 points of 8-bit QSGD's test accuracy, send fewer uplink bytes than "
    "8-bit, and beat 2-bit's accuracy. Independent re-run: 2-bit 0.811 / 9.7 MB, 4-bit 0.819 / "
    "19.1 MB, 8-bit 0.820 / 38.0 MB, dq 0.820 / 19.8 MB."
)

SEEDS = [1, 2, 3]
FIXED_BITS = [2, 4, 8]
DQ = "DQ-SGD K=20 rho=0.99"
RUNS = [(f"QSGD {bits}-bit", ["--bits", str(bits)], SEEDS) for bits in FIXED_BITS] + [
    (DQ, ["--quant-schedule", "dq", "--dq-k", "20", "--dq-rho", "0.99", "--bits-min", "2",
          "--bits-max", "8"], SEEDS),
]

PLOTS = [
    {"x": "bytes_up", "y": "accuracy", "ylabel": "test accuracy vs cumulative uplink bytes",
     "logy": False},
    {"x": "round", "y": "bits_per_coord", "ylabel": "payload bits per coordinate (round mean)",
     "logy": False},
]


def evaluate(results):
    labels = [f"QSGD {bits}-bit" for bits in FIXED_BITS] + [DQ]
    accuracy = {label: mean(final(results, label, "accuracy")) for label in labels}
    megabytes = {label: mean(final(results, label, "bytes_up")) / 1e6 for label in labels}
    eight, two = accuracy["QSGD 8-bit"], accuracy["QSGD 2-bit"]

    def versus(other):
        return (f"DQ-SGD accuracy {fmt(accuracy[DQ], 4)} / {fmt(megabytes[DQ], 1)} MB up vs "
                f"{other} {fmt(accuracy[other], 4)} / {fmt(megabytes[other], 1)} MB up")

    return [
        ("DQ-SGD final accuracy within 0.5 points of 8-bit QSGD (mean of 3 seeds)",
         accuracy[DQ] >= eight - 0.005, versus("QSGD 8-bit")),
        ("DQ-SGD sends fewer uplink bytes than 8-bit QSGD",
         megabytes[DQ] < megabytes["QSGD 8-bit"], versus("QSGD 8-bit")),
        ("DQ-SGD final accuracy above 2-bit QSGD's", accuracy[DQ] > two, versus("QSGD 2-bit")),
    ]

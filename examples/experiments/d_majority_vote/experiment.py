"""Experiment D: majority vote reduces variance with more workers and tolerates sign-flip
attackers (Bernstein et al.'s blind adversaries)."""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from experiment_figures import final, fmt, mean  # noqa: E402

TITLE = "D: signSGD with majority vote, M workers and sign-flip attackers"
CLAIM = (
    "Bernstein et al. (ICML 2018, ICLR 2019): the majority vote of M workers' signs reduces "
    "variance like full-precision averaging, so training improves with M; and a minority of "
    "blind adversaries (workers sending negated signs) cannot stop it. Here they are sign-flip "
    "attackers (--attack sign_flip): a negated gradient negates Signum's momentum and so the "
    "vote. Checked on Fashion-MNIST "
    "softmax regression (Signum beta 0.9, lr 0.002, batch 16 per worker, 300 rounds): mean final "
    "test loss over 5 seeds for M = 1, 3, 5, 9; and 3 of 9 workers negating their votes must "
    "still cut the loss from ln 10 (the zero model) by at least half. Independent re-run (one "
    "seed): M=1 0.676, M=3 0.644, M=5 0.676, M=9 0.614; 3 of 9 attacking: loss 0.660."
)

WORKER_COUNTS = [1, 3, 5, 9]
SEEDS = [1, 2, 3, 4, 5]
ATTACKED = "M=9, 3 sign-flip attackers"
RUNS = [(f"M={m}", ["--workers", str(m)], SEEDS) for m in WORKER_COUNTS] + [
    (ATTACKED, ["--workers", "9", "--attack", "sign_flip", "--attackers", "3"], [1, 2, 3]),
]

PLOTS = [
    {"x": "round", "y": "loss", "ylabel": "test loss (mean over seeds)", "logy": False},
    {"x": "round", "y": "accuracy", "ylabel": "test accuracy (mean over seeds)", "logy": False},
]

# The softmax model starts at zero: every class equally likely.
INITIAL_LOSS = math.log(10.0)


def evaluate(results):
    loss = {m: mean(final(results, f"M={m}", "loss")) for m in WORKER_COUNTS}
    accuracy = {m: mean(final(results, f"M={m}", "accuracy")) for m in WORKER_COUNTS}
    table = "; ".join(f"M={m}: loss {fmt(loss[m])}, accuracy {fmt(accuracy[m])}"
                      for m in WORKER_COUNTS)
    checks = [
        ("final test loss with M = 9 below M = 1 (mean of 5 seeds)",
         loss[9] is not None and loss[1] is not None and loss[9] < loss[1], table),
        ("final test loss decreases at every step M = 1 -> 3 -> 5 -> 9 (mean of 5 seeds)",
         all(loss[a] is not None and loss[b] is not None and loss[b] < loss[a]
             for a, b in zip(WORKER_COUNTS, WORKER_COUNTS[1:])), table),
    ]
    attacked = final(results, ATTACKED, "loss")
    attacked_accuracy = mean(final(results, ATTACKED, "accuracy"))
    checks.append((
        "3 of 9 workers sending negated signs: final loss <= half of ln 10 in every seed",
        all(value is not None and value <= 0.5 * INITIAL_LOSS for value in attacked),
        f"losses {', '.join(fmt(v) for v in attacked)} (from {fmt(INITIAL_LOSS)}), mean "
        f"accuracy {fmt(attacked_accuracy)}; without attackers M=9 loss {fmt(loss[9])}"))
    return checks

"""Robust aggregation rules against Byzantine workers: each rule under each attack, against the
mean."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from experiment_figures import comparison_grid, final_mean, fmt  # noqa: E402

TITLE = "k_robust: median, trimmed mean, multi-Krum and centered clipping against 20 % attackers"
CLAIM = (
    "Yin et al. (ICML 2018, median and trimmed mean), Blanchard et al. (NeurIPS 2017, Krum) and "
    "Karimireddy, He & Jaggi (ICML 2021, centered clipping): a robust rule keeps training where "
    "a minority of Byzantine workers drives the mean off. Checked on Fashion-MNIST softmax "
    "regression, 10 iid workers of which 2 attack (--attackers 2), dense updates, plain SGD "
    "(batch 64, lr 0.2), 300 rounds, 2 seeds. Attacks (cli --attack, on the gradient each "
    "attacker's session receives): sign_flip -s g with s = 1 and 10, scale 10 g, gaussian "
    "N(0, 1), ALIE (Baruch et al. 2019, mean - z std of the honest gradients) at the default "
    "z_max = 0.25 for 10 workers and 2 attackers, at z = 3 and at z = 100, and IPM (Xie et al. 2020, -eps "
    "times the honest mean) at eps 0.1 and 10. Rules: trimmed mean and multi-Krum with f = 2, "
    "centered clipping with tau = 1 and one pass. Pilot on seed 99 (not one of the seeds), "
    "final accuracy: the mean reached 0.812 without attack, 0.807 under sign flip s = 1, "
    "0.811 under ALIE z_max, 0.699 under gaussian, 0.100 under sign flip s = 10 and IPM "
    "eps 10; the median, the trimmed mean and multi-Krum stayed within 0.795-0.815 under every "
    "attack; centered clipping fell to 0.704 (sign flip s = 10) and 0.553 (IPM eps 10). So on "
    "this convex model the unscaled sign flip and ALIE at z_max cost the mean under a point. "
    "ALIE's z_max moves the mean by a twentieth of the honest spread; a second pilot on seed 99 "
    "raised z until the mean broke: at z = 10 it ended at 0.742, at z = 30 at 0.517 and at "
    "z = 100 at 0.208, where the median (0.795), the trimmed mean (0.803), multi-Krum (0.810) "
    "and centered clipping (0.773) held. At z = 100 the attackers sit far outside the honest "
    "spread, so ALIE is then no longer 'a little': the mean falls below 50 % only under attacks "
    "scaled well beyond the honest updates. Criteria, fixed before the run (means over seeds): "
    "without attack every rule ends within 1 point of the mean; under sign flip s = 10, IPM "
    "eps 10 and ALIE z = 100 the mean ends below 0.50 and at least one robust rule at 0.75 or "
    "more; under ALIE (z_max and z = 3) and the unscaled sign flip at least one robust rule "
    "ends at 0.75 or more, the mean's accuracy reported beside it."
)

SEEDS = [1, 2]
ATTACKERS = ["--attackers", "2"]
RULES = [
    ("mean", []),
    ("median", ["--robust", "median"]),
    ("trimmed mean f=2", ["--robust", "trimmed_mean", "--robust-f", "2"]),
    ("multi-Krum f=2", ["--robust", "multi_krum", "--robust-f", "2"]),
    ("centered clipping tau=1", ["--robust", "centered_clipping"]),
]
ATTACKS = [
    ("no attack", []),
    ("sign flip s=1", ["--attack", "sign_flip"] + ATTACKERS),
    ("sign flip s=10", ["--attack", "sign_flip", "--attack-strength", "10"] + ATTACKERS),
    ("scale 10", ["--attack", "scale"] + ATTACKERS),
    ("gaussian 1", ["--attack", "gaussian"] + ATTACKERS),
    ("ALIE z_max", ["--attack", "alie"] + ATTACKERS),
    ("ALIE z=3", ["--attack", "alie", "--attack-strength", "3"] + ATTACKERS),
    ("ALIE z=100", ["--attack", "alie", "--attack-strength", "100"] + ATTACKERS),
    ("IPM eps 0.1", ["--attack", "ipm"] + ATTACKERS),
    ("IPM eps 10", ["--attack", "ipm", "--attack-strength", "10"] + ATTACKERS),
]


def _label(rule, attack):
    return f"{rule}, {attack}"


RUNS, PLOTS = comparison_grid(
    ATTACKS, RULES, SEEDS, lambda attack, rule: _label(rule, attack), "accuracy",
    lambda attack: f"test accuracy under {attack} (mean over seeds)",
    plotted=["sign flip s=10", "ALIE z=3", "ALIE z=100"])

NO_ATTACK_GAP = 0.01
BROKEN = 0.50
KEPT = 0.75


def evaluate(results):
    accuracy = {label: final_mean(results, label, "accuracy") for label, _, _ in RUNS}
    rules = [rule for rule, _ in RULES]
    robust = rules[1:]

    def row(attack):
        return f"{attack}: " + ", ".join(
            f"{rule} {fmt(accuracy[_label(rule, attack)], 4)}" for rule in rules)

    def best_robust(attack):
        return max(robust, key=lambda rule: accuracy[_label(rule, attack)] or 0.0)

    claims = []
    base = accuracy[_label("mean", "no attack")]
    claims.append((f"without attack every robust rule ends within {NO_ATTACK_GAP * 100:.0f} "
                   f"point of the mean",
                   all(accuracy[_label(rule, "no attack")] >= base - NO_ATTACK_GAP
                       for rule in robust),
                   row("no attack")))
    for attack in ("sign flip s=10", "IPM eps 10", "ALIE z=100"):
        best = best_robust(attack)
        claims.append((f"{attack}: the mean ends below {BROKEN:.2f} and at least one robust rule "
                       f"at {KEPT:.2f} or more",
                       accuracy[_label("mean", attack)] < BROKEN
                       and accuracy[_label(best, attack)] >= KEPT,
                       row(attack) + f" (best: {best})"))
    for attack in ("sign flip s=1", "ALIE z_max", "ALIE z=3"):
        best = best_robust(attack)
        claims.append((f"{attack}: at least one robust rule ends at {KEPT:.2f} or more (the "
                       f"mean's accuracy beside it)",
                       accuracy[_label(best, attack)] >= KEPT,
                       row(attack) + f" (best: {best})"))
    return claims

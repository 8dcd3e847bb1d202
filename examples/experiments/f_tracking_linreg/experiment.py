"""Experiment F (primary): gradient tracking's exact convergence where D-PSGD stalls."""

TITLE = "F: gradient tracking and DeTAG vs D-PSGD on heterogeneous linear regression (ring of 12)"
CLAIM = (
    "Lu & De Sa (ICML 2021), docs/algorithms.md §6: on heterogeneous data D-PSGD converges only to a "
    "neighbourhood of the optimum (a bias floor set by the data heterogeneity and the spectral "
    "gap), while gradient tracking — and DeTAG, tracking with accelerated gossip over R rounds "
    "per phase — converge to the optimum itself. Checked on the linear-regression generator of experiment A "
    "(12 peers, d = 100, full local gradients, lr 0.02) on a ring with weights 1/3, every "
    "algorithm sending 2400 vectors per neighbour. Metric: log10 ||mean_i x_i - x*||^2. "
    "Independent re-run: D-PSGD +0.2..+1.2, GT -26, DeTAG -6."
)

VECTORS = 2400  # sent to each neighbour by every run
SEEDS = [1, 2]  # the seed also draws the data
DPSGD = "D-PSGD"
GT = "gradient tracking"
DETAG = "DeTAG (R 4, recipe)"
RUNS = [
    (DPSGD, ["--gossip", "dpsgd", "--rounds", str(VECTORS), "--eval-every", "24"], SEEDS),
    (GT, ["--gossip", "gt", "--rounds", str(VECTORS // 2), "--eval-every", "12"], SEEDS),
    # R = 4 on this ring (the run reports it; evaluate() checks), so 2 * 4 vectors per phase.
    (DETAG, ["--gossip", "detag", "--rounds", str(VECTORS // 8), "--eval-every", "3"], SEEDS),
]

PLOTS = [
    {"x": "bytes_up", "y": "dist_to_opt", "ylabel": "log10 ||mean x - x*||^2", "logy": False},
    {"x": "bytes_up", "y": "consensus", "ylabel": "consensus distance mean_i ||x_i - mean x||^2",
     "logy": True},
]


def _final(results, label, column):
    values = []
    for run in results.get(label, []):
        rows = [row for row in run["rows"] if row.get(column) is not None]
        if rows:
            values.append(rows[-1][column])
    return sum(values) / len(values) if values else None


def _at_fraction(results, label, column, fraction):
    """Mean over seeds of `column` at the last evaluated row within `fraction` of the budget."""
    values = []
    for run in results.get(label, []):
        rows = [row for row in run["rows"] if row.get(column) is not None]
        if not rows:
            continue
        budget = rows[-1]["bytes_up"] * fraction
        within = [row for row in rows if row["bytes_up"] <= budget]
        if within:
            values.append(within[-1][column])
    return sum(values) / len(values) if values else None


def _fmt(value):
    return "n/a" if value is None else f"{value:.2f}"


def evaluate(results):
    final = {label: _final(results, label, "dist_to_opt") for label in (DPSGD, GT, DETAG)}
    half = {label: _at_fraction(results, label, "dist_to_opt", 0.5) for label in (DPSGD, GT, DETAG)}
    steps = [run["summary"].get("gossip", {}).get("gossip_steps")
             for run in results.get(DETAG, [])]
    sent = {label: _final(results, label, "bytes_up") for label in (DPSGD, GT, DETAG)}
    figures = (f"log10 ||x - x*||^2 after {VECTORS} vectors per neighbour (mean of "
               f"{len(SEEDS)} seeds): D-PSGD {_fmt(final[DPSGD])} (at half the budget "
               f"{_fmt(half[DPSGD])}), GT {_fmt(final[GT])}, DeTAG {_fmt(final[DETAG])}; "
               f"DeTAG R = {steps}; MB sent per peer: "
               + ", ".join(f"{label} {(sent[label] or 0) / 1e6:.2f}" for label in sent))
    checks = []
    dpsgd, gt, detag = final[DPSGD], final[GT], final[DETAG]
    stalled = (dpsgd is not None and half[DPSGD] is not None and dpsgd > -2.0
               and abs(dpsgd - half[DPSGD]) < 0.5)
    checks.append(("D-PSGD stalls at a bias floor: log10 distance above -2 and moving less than "
                   "0.5 over the second half of the budget", stalled, figures))
    checks.append(("gradient tracking converges to the optimum: log10 distance below -6 and at "
                   "least 4 below D-PSGD's", gt is not None and dpsgd is not None and gt < -6.0
                   and gt < dpsgd - 4.0, figures))
    checks.append(("DeTAG converges to the optimum: log10 distance below -6 and at least 4 below "
                   "D-PSGD's (R from the recipe is 4 on this ring)",
                   detag is not None and dpsgd is not None and detag < -6.0
                   and detag < dpsgd - 4.0 and all(s == 4 for s in steps), figures))
    return checks

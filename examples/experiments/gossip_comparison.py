"""Runs and checks shared by f_detag_ring and f_detag_complete (experiment F, docs/algorithms.md §6):
D-PSGD, gradient tracking and DeTAG at an equal number of vectors sent per neighbour and an
equal number of gradient samples (each run computes one mini-batch per vector it sends)."""

DPSGD = "D-PSGD"
GT = "gradient tracking"
DETAG = "DeTAG"
ALGORITHMS = (DPSGD, GT, DETAG)

PLOTS = [
    {"x": "bytes_up", "y": "loss", "ylabel": "test loss of the average model", "logy": False},
    {"x": "bytes_up", "y": "consensus", "ylabel": "consensus distance mean_i ||x_i - mean x||^2",
     "logy": True},
    {"x": "bytes_up", "y": "accuracy", "ylabel": "test accuracy of the average model",
     "logy": False},
]


def runs(vectors, detag_steps, seeds=(1,), prefix="", extra=()):
    """D-PSGD sends one vector per round, GT two (model, tracker), DeTAG 2R per phase (R must
    be what the recipe gives on the graph: evaluate() checks); rows are evaluated about every
    vectors/50 vectors. Labels get `prefix`; `extra` flags go to every run."""
    per_phase = 2 * detag_steps
    every = max(1, vectors // 50)
    extra = list(extra)
    return [
        (prefix + DPSGD, extra + ["--gossip", "dpsgd", "--rounds", str(vectors),
                                  "--eval-every", str(every)], list(seeds)),
        (prefix + GT, extra + ["--gossip", "gt", "--phase-batches", "2", "--rounds",
                               str(vectors // 2), "--eval-every", str(max(1, every // 2))],
         list(seeds)),
        (prefix + DETAG, extra + ["--gossip", "detag", "--phase-batches", str(per_phase),
                                  "--rounds", str(vectors // per_phase), "--eval-every",
                                  str(max(1, every // per_phase))], list(seeds)),
    ]


def _mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _at_budget(results, label, column, budget):
    """Mean over seeds of `column` at the last evaluated row with bytes_up <= budget."""
    values = []
    for run in results.get(label, []):
        rows = [row for row in run["rows"]
                if row.get(column) is not None and row["bytes_up"] <= budget]
        if rows:
            values.append(rows[-1][column])
    return _mean(values)


def _budget(results, prefix):
    """The smallest final bytes_up over the runs of `prefix`: all of them reached it."""
    finals = [run["rows"][-1]["bytes_up"] for label in ALGORITHMS
              for run in results.get(prefix + label, []) if run["rows"]]
    return min(finals) if finals else 0


def _fmt(value, digits=3):
    return "n/a" if value is None else f"{value:.{digits}g}"


def figures(results, prefix=""):
    """Loss, accuracy and consensus of each algorithm at the common byte budget, DeTAG's R, and
    a one-line text of them."""
    budget = _budget(results, prefix)
    table = {}
    for label in ALGORITHMS:
        table[label] = {column: _at_budget(results, prefix + label, column, budget)
                        for column in ("loss", "accuracy", "consensus")}
    steps = [run["summary"].get("gossip", {}).get("gossip_steps")
             for run in results.get(prefix + DETAG, [])]
    lam = [round(run["summary"].get("gossip", {}).get("lambda", float("nan")), 4)
           for run in results.get(prefix + DETAG, [])]
    text = f"{prefix}at {budget / 1e6:.1f} MB sent per peer: " + "; ".join(
        f"{label} loss {_fmt(row['loss'])}, accuracy {_fmt(row['accuracy'])}, consensus "
        f"{_fmt(row['consensus'])}" for label, row in table.items())
    text += f" (lambda {lam}, DeTAG R {steps})"
    return table, steps, text


def evaluate(results, detag_steps, graph, prefix=""):
    """The two claims of experiment F on one graph: DeTAG below D-PSGD in loss and in consensus
    distance at equal communication."""
    table, steps, text = figures(results, prefix)
    detag, dpsgd = table[DETAG], table[DPSGD]
    recipe = all(s == detag_steps for s in steps)
    note = "" if recipe else f" — DeTAG's R was {steps}, not {detag_steps}: budgets differ"
    checks = []
    checks.append((f"{graph}: DeTAG reaches a lower average test loss than D-PSGD at the same "
                   f"communication", recipe and detag["loss"] is not None
                   and dpsgd["loss"] is not None and detag["loss"] < dpsgd["loss"], text + note))
    checks.append((f"{graph}: DeTAG reaches a lower consensus distance than D-PSGD at the same "
                   f"communication", recipe and detag["consensus"] is not None
                   and dpsgd["consensus"] is not None
                   and detag["consensus"] < dpsgd["consensus"], text + note))
    return checks

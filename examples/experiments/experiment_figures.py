"""Figures the experiments' evaluate() functions read out of their runs.

`results[label]` is a list with one entry per seed: {"rows": [metrics-CSV row as a dict of
column -> float or None], "summary": the summary JSON as a dict}.
"""


def load_experiment(name):
    """The experiment.py module of the sibling experiment `name`, for a variant that reruns its
    runs and checks on another configuration (another model, say)."""
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name, "experiment.py")
    spec = importlib.util.spec_from_file_location(f"experiment_base_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def mean(values):
    """Mean of the values that are not None; None when there are none."""
    present = [value for value in values if value is not None]
    return sum(present) / len(present) if present else None


def final(results, label, column):
    """The summary's final-row `column` of every seed of run `label`."""
    return [run["summary"]["final"].get(column) for run in results[label]]


def at_round(results, label, round_number, column):
    """`column` at round `round_number` (1-based, as in the CSV) of every seed of `label`; None
    for a seed whose row there has no value (not evaluated)."""
    values = []
    for run in results[label]:
        value = None
        for row in run["rows"]:
            if row.get("round") is not None and int(row["round"]) == round_number:
                value = row.get(column)
                break
        values.append(value)
    return values


def fmt(value, digits=3):
    """A figure for the report: `digits` significant decimals, or n/a."""
    return "n/a" if value is None else f"{value:.{digits}f}"

"""Figures the experiments' evaluate() functions read out of their runs.

`results[label]` is a list with one entry per seed: {"rows": [metrics-CSV row as a dict of
column -> float or None], "summary": the summary JSON as a dict}.
"""


def with_model(name, model, description):
    """The TITLE, CLAIM, RUNS, PLOTS and evaluate of the sibling experiment `name`, rerun with
    `model` (its config.toml sets --model; the runs, checks and learning rates are the
    sibling's)."""
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name, "experiment.py")
    spec = importlib.util.spec_from_file_location(f"experiment_base_{name}", path)
    base = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(base)
    title = base.TITLE.replace(":", f" with {description}:", 1)
    claim = (f"The claim of experiment {name}, rechecked with {description} ({model}) in place "
             "of softmax regression, every other setting and learning rate as there (chosen "
             "for softmax regression, not tuned for this model). " + base.CLAIM)
    return title, claim, base.RUNS, base.PLOTS, base.evaluate


def comparison_grid(settings, methods, seeds, label, y, ylabel, plotted=None):
    """RUNS and PLOTS of experiments that compare methods in several settings.

    `settings` and `methods` are lists of (name, flags). RUNS holds every method in every setting,
    settings outermost, named `label(setting, method)` with the setting's flags then the method's.
    PLOTS has one plot of `y` against rounds per setting named in `plotted` (default: all), the
    methods side by side, its axis titled `ylabel(setting)`."""
    runs = [(label(setting, method), setting_flags + method_flags, seeds)
            for setting, setting_flags in settings for method, method_flags in methods]
    names = [setting for setting, _ in settings] if plotted is None else plotted
    plots = [{"x": "round", "y": y, "ylabel": ylabel(setting), "logy": False,
              "runs": [label(setting, method) for method, _ in methods]} for setting in names]
    return runs, plots


def final_mean(results, label, column):
    """The mean over seeds of run `label`'s final `column` (None when no seed has it)."""
    return mean(final(results, label, column))


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

"""Experiment F (f_detag_complete) with a small CNN: the same runs and checks on a deep model."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from experiment_figures import load_experiment  # noqa: E402

_BASE = load_experiment("f_detag_complete")
TITLE = _BASE.TITLE.replace(":", " with a small CNN:", 1)
CLAIM = ("The claim of experiment f_detag_complete, rechecked with the small CNN of docs/models.md "
         "(5,258 parameters) in place of softmax regression, every other setting and learning "
         "rate as there (chosen for softmax regression, not tuned for the CNN). "
         + _BASE.CLAIM)
RUNS = _BASE.RUNS
PLOTS = _BASE.PLOTS
evaluate = _BASE.evaluate

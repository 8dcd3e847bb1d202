"""Experiment G (g_def_random_block) with a small CNN: the same runs and checks on a deep model."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from experiment_figures import with_model  # noqa: E402

TITLE, CLAIM, RUNS, PLOTS, evaluate = with_model(
    "g_def_random_block", "conv:8:3,relu,maxpool:2,conv:16:3,relu,maxpool:2,dense:10", "a small CNN")

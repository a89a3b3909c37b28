"""Experiments room: declared grids of (method, base model, corpus, settings) -> train -> evaluate."""

from sentkit.experiments.grid import CellSpec, ExperimentSpec, load_experiment
from sentkit.experiments.runner import run_experiment

__all__ = ["CellSpec", "ExperimentSpec", "load_experiment", "run_experiment"]

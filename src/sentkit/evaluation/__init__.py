"""SentEval-compatible evaluation: every SentEval task, SentEval's protocol, fast on CPU.

    import sentkit
    results = sentkit.evaluate(encoder, tasks="MR,STSB", preset="prototyping")
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sentkit.evaluation.config import PRESETS, EvalConfig, make_config
    from sentkit.evaluation.report import declutr_average, markdown_table, side_by_side
    from sentkit.evaluation.runner import EncoderOutputError, EvaluationInterrupted, evaluate
    from sentkit.evaluation.tasks import ALL_TASKS, DOWNSTREAM, PROBING, TASKS, get_task, load_task

# Public names and the module each comes from: imported on first use, so that importing a light
# submodule (the CLI's argument parser) does not pull in torch and scikit-learn.
_EXPORTS = {
    "PRESETS": "config", "EvalConfig": "config", "make_config": "config",
    "declutr_average": "report", "markdown_table": "report", "side_by_side": "report",
    "EncoderOutputError": "runner", "EvaluationInterrupted": "runner", "evaluate": "runner",
    "ALL_TASKS": "tasks", "DOWNSTREAM": "tasks", "PROBING": "tasks", "TASKS": "tasks",
    "get_task": "tasks", "load_task": "tasks",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "ALL_TASKS",
    "DOWNSTREAM",
    "PRESETS",
    "PROBING",
    "TASKS",
    "EncoderOutputError",
    "EvalConfig",
    "EvaluationInterrupted",
    "declutr_average",
    "evaluate",
    "get_task",
    "load_task",
    "make_config",
    "markdown_table",
    "side_by_side",
]

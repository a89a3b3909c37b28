"""SentEval-compatible evaluation: every SentEval task, SentEval's protocol, fast on CPU.

import sentkit
results = sentkit.evaluate(encoder, tasks="MR,STSB", preset="prototyping")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sentkit.core.lazy import lazy_exports

if TYPE_CHECKING:
    from sentkit.evaluation.config import PRESETS, EvalConfig, make_config
    from sentkit.evaluation.report import declutr_average, markdown_table, side_by_side
    from sentkit.evaluation.runner import EncoderOutputError, EvaluationInterrupted, evaluate
    from sentkit.evaluation.tasks import ALL_TASKS, DOWNSTREAM, PROBING, TASKS, get_task, load_task

# imported on first use: the runner pulls in torch and scikit-learn
__getattr__ = lazy_exports(
    __name__,
    {
        "PRESETS": "config",
        "EvalConfig": "config",
        "make_config": "config",
        "declutr_average": "report",
        "markdown_table": "report",
        "side_by_side": "report",
        "EncoderOutputError": "runner",
        "EvaluationInterrupted": "runner",
        "evaluate": "runner",
        "ALL_TASKS": "tasks",
        "DOWNSTREAM": "tasks",
        "PROBING": "tasks",
        "TASKS": "tasks",
        "get_task": "tasks",
        "load_task": "tasks",
    },
)

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

"""SentEval-compatible evaluation: every SentEval task, SentEval's protocol, fast on CPU.

    import sentkit
    results = sentkit.evaluate(encoder, tasks="MR,STSB", preset="prototyping")
"""

from __future__ import annotations

from sentkit.evaluation.config import PRESETS, EvalConfig, make_config
from sentkit.evaluation.report import declutr_average, markdown_table, side_by_side
from sentkit.evaluation.runner import EncoderOutputError, EvaluationInterrupted, evaluate
from sentkit.evaluation.tasks import ALL_TASKS, DOWNSTREAM, PROBING, TASKS, get_task, load_task

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

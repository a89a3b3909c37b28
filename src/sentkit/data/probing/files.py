"""The ten probing tasks as SentEval names them: each task's name, its other spelling and its file
under ``PROBING/``. The builder (:mod:`~sentkit.data.probing.build`) writes these files and
evaluation's task registry (`sentkit.evaluation.tasks`) reads them, so the table lives here, below
both: building data never needs the evaluation room."""

from __future__ import annotations

from sentkit.core.config import ConfigError
from sentkit.core.registry import loose_key, suggest

# task -> its file under PROBING/ (SentEval's names), in SentEval's order
PROBING_FILES = {
    "SentLen": "sentence_length.txt",
    "WC": "word_content.txt",
    "TreeDepth": "tree_depth.txt",
    "TopConst": "top_constituents.txt",
    "BShift": "bigram_shift.txt",
    "Tense": "past_present.txt",
    "SubjNum": "subj_number.txt",
    "ObjNum": "obj_number.txt",
    "SOMO": "odd_man_out.txt",
    "CoordInv": "coordination_inversion.txt",
}
# task -> the other name SentEval's papers and code use
PROBING_ALIASES = {
    "SentLen": "Length",
    "WC": "WordContent",
    "TreeDepth": "Depth",
    "TopConst": "TopConstituents",
    "BShift": "BigramShift",
    "Tense": "PastPresent",
    "SubjNum": "SubjNumber",
    "ObjNum": "ObjNumber",
    "SOMO": "OddManOut",
    "CoordInv": "CoordinationInversion",
}


def probing_task(name: str) -> str:
    """The task `name` names (its alias too; case, '-', '_' and spaces ignored); ConfigError naming
    the probing tasks when it is none of them."""
    tasks = {loose_key(n): task for task, alias in PROBING_ALIASES.items() for n in (task, alias)}
    found = tasks.get(loose_key(name))
    if found is None:
        raise ConfigError(
            f"{name} is not a probing task.{suggest(name, list(PROBING_FILES))} Probing tasks: "
            f"{', '.join(PROBING_FILES)}"
        )
    return found

"""What a cell of an experiment grid does with its `method`: train it (any `sentkit train --method`), or,
for ``method = "pretrained"``, evaluate a given model as it is. The runner, the diagnostics and the report
ask a cell's kind (:func:`cell_kind`) rather than compare method names.

`KINDS` holds the methods that are not training methods (one: `pretrained`); every other name is a
training method of `sentkit.methods`, looked up when the cell trains (so an unknown name is named, with
the closest one, by the method registry)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from sentkit.experiments.refs import PREFIX

log = logging.getLogger(__name__)

# training methods whose model does not depend on the seed (nothing is sampled): one seed is all there is
SEED_FREE_METHODS = frozenset({"glove-average"})


@dataclass(frozen=True)
class Train:
    """Train `method` with the cell's settings; the model folder is what later cells continue (``"@cell"``)."""

    method: str
    trains = True  # the cell writes a model folder

    def seed_free(self, settings: dict[str, Any]) -> bool:
        """Whether the cell's model is the same whatever its seed (one seed is all there is)."""
        return self.method in SEED_FREE_METHODS


@dataclass(frozen=True)
class AsIs:
    """Evaluate the model the cell's `model` setting names (a registry name, a folder, ``"@cell[/folder]"``), loaded
    with the other settings as `sentkit.load` takes them (`pooling`, `precision`; `dim`: the first N coordinates,
    e.g. a Matryoshka model at one of its trained widths; `quantize` int8 / binary with its `calibration`); nothing is
    trained, no model folder is written."""

    method: str = "pretrained"
    trains = False

    @staticmethod
    def load(settings: dict[str, Any]) -> Any:
        """The encoder of resolved `settings` (every ``"@cell"`` already a folder)."""
        import sentkit

        rest = dict(settings)
        if rest.get("precision") == "auto":  # evaluation's own rule, as `sentkit evaluate --precision auto`
            from sentkit.models.precision import for_evaluation
            from sentkit.models.transformer import usable_device

            rest["precision"], said = for_evaluation("auto", usable_device("auto"))
            if said:
                log.warning("%s", said)
        return sentkit.load(rest.pop("model"), **rest)

    def seed_free(self, settings: dict[str, Any]) -> bool:
        """A given model has one seed by nature, unless it is one seed of a trained run: another cell's model
        (``"@cell"``) or a run's ``.../seed-<k>/...`` folder."""
        model = str(settings.get("model", ""))
        return not model.startswith(PREFIX) and "/seed-" not in model


CellKind = Train | AsIs

KINDS: dict[str, AsIs] = {"pretrained": AsIs()}


def cell_kind(method: str) -> CellKind:
    """The kind of a cell whose `method` is `method`."""
    return KINDS.get(method) or Train(method)

"""``glove-average`` as a sentkit method: the other baselines' interface around
:class:`sentkit.baselines.glove.GloveAverage` (nothing is trained)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from sentkit.baselines.common import BaselineModel
from sentkit.baselines.configs import GloveAverageConfig


class GloveAverageModel(BaselineModel[GloveAverageConfig]):
    """Mean GloVe-50d vector of a sentence's words. Learned state: ``encoder_``, ``dim_``."""

    method = "glove-average"
    config_cls = GloveAverageConfig

    def fit(self, corpus: Any = None) -> GloveAverageModel:
        """Load the vectors; ``corpus`` is ignored (kept for the common interface)."""
        from sentkit.baselines.glove import GloveAverage

        self.encoder_ = GloveAverage(self.config.glove_root, lowercase=self.config.lowercase)
        self.dim_ = int(self.encoder_.dim_)
        return self

    def _encode(self, texts: list[str]) -> np.ndarray:
        self._check_fitted("encoder_")
        return self.encoder_._encode(texts)

    def _save_state(self, d: Path) -> dict[str, Any]:
        self._check_fitted("encoder_")
        if self.config.copy_vectors:
            self.encoder_.save(d / "glove", copy_vectors=True)
        return {"dim": self.dim_}

    def _load_state(self, d: Path, state: dict[str, Any]) -> None:
        from sentkit.baselines.glove import GloveAverage

        if self.config.copy_vectors:
            self.encoder_ = GloveAverage.load(d / "glove")
        else:
            self.encoder_ = GloveAverage(self.config.glove_root, lowercase=self.config.lowercase)
        self.dim_ = int(state["dim"])

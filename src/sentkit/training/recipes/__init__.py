"""Transformer methods: each is a `Recipe` (batch builder + objective) run by the one loop; their
names are listed in `sentkit.core.methods.METHODS` (`sentkit train --method NAME`, experiment grids)."""

from __future__ import annotations

from sentkit.training.recipe import load_trained
from sentkit.training.recipes.declutr import Declutr, DeclutrConfig
from sentkit.training.recipes.mlm import MLM, MLMConfig
from sentkit.training.recipes.simcse import SimCSE, SimCSEConfig
from sentkit.training.recipes.tsdae import TSDAE, TSDAEConfig

__all__ = [
    "MLM",
    "TSDAE",
    "Declutr",
    "DeclutrConfig",
    "MLMConfig",
    "SimCSE",
    "SimCSEConfig",
    "TSDAEConfig",
    "load_trained",
]

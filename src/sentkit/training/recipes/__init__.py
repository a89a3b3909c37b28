"""Transformer methods: each is a `Recipe` (batch builder + objective) run by the one loop.

Importing this package registers them for `sentkit train --method NAME` and experiment grids."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from sentkit.methods import Method, register_method
from sentkit.training.loop import train
from sentkit.training.recipe import Recipe
from sentkit.training.recipes.declutr import Declutr, DeclutrConfig
from sentkit.training.recipes.mlm import MLM, MLMConfig
from sentkit.training.recipes.simcse import SimCSE, SimCSEConfig
from sentkit.training.recipes.tsdae import TSDAE, TSDAEConfig

RECIPES: dict[str, type[Recipe]] = {r.name: r for r in (Declutr, MLM, SimCSE, TSDAE)}


def load_trained(path: Path) -> Any:
    """The encoder a transformer method saved (the same as sentence-transformers loads)."""
    from sentkit.models.encoder import TransformerEncoder

    return TransformerEncoder.from_pretrained(str(path))


for _name, _recipe in RECIPES.items():
    register_method(Method(_name, _recipe.config_cls, partial(train, recipe_cls=_recipe), load_trained, _recipe.description))

import sentkit.training.raw_text  # noqa: E402,F401  (registers the raw-text recipe, made of the methods above)

__all__ = ["MLM", "RECIPES", "TSDAE", "Declutr", "DeclutrConfig", "MLMConfig", "SimCSE", "SimCSEConfig", "TSDAEConfig", "load_trained"]

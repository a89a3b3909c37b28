"""Evaluation config and SentEval's two presets."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from sentkit.core.config import ConfigError, from_dict
from sentkit.core.registry import Registry

OPTIMIZERS = ("adam", "rmsprop", "sgd", "adagrad")


@dataclass
class EvalConfig:
    """Every knob of a run. Classifier fields follow SentEval's `params.classifier` names."""

    preset: str = "prototyping"
    kfold: int = 5
    nhid: int = 0  # 0: logistic regression; > 0: MLP with a sigmoid hidden layer
    optim: str = "rmsprop"  # "adam", "rmsprop", "sgd,lr=0.1", "adam,lr=0.01", ...
    batch_size: int = 128  # classifier minibatch size
    tenacity: int = 3  # dev evaluations without improvement tolerated (SentEval semantics)
    epoch_size: int = 2  # passes over the train set between two dev evaluations
    max_epoch: int = 200
    dropout: float = 0.0
    seed: int = 1111
    raw: bool = False  # pair tasks: feed the untokenized originals in raw/ (subword models)
    encode_batch_size: int = 128
    cache_dir: str | None = None  # embedding cache root; None: <data_dir>/../.sentkit_cache ...
    use_cache: bool = True
    device: str = "cpu"
    max_batch_bytes: int = 256 * 2**20  # memory budget of one batched classifier gather
    relatedness_epochs: int = 50  # epochs between dev evaluations (SentEval: 50)
    relatedness_max_epoch: int = 1000
    relatedness_tenacity: int = 3
    coco_projdim: int = 1000
    coco_margin: float = 0.2
    coco_max_epoch: int = 20
    tasks_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("kfold", "batch_size", "epoch_size", "max_epoch", "encode_batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.kfold < 2:
            raise ConfigError(f"kfold must be >= 2, got {self.kfold}")
        if self.nhid < 0 or self.tenacity < 0:
            raise ConfigError("nhid and tenacity must be >= 0")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"dropout must be in [0, 1), got {self.dropout}")
        parse_optim(self.optim)

    def classifier(self) -> dict[str, Any]:
        """SentEval's `params.classifier` dict."""
        return {
            "nhid": self.nhid,
            "optim": self.optim,
            "batch_size": self.batch_size,
            "tenacity": self.tenacity,
            "epoch_size": self.epoch_size,
            "max_epoch": self.max_epoch,
            "dropout": self.dropout,
        }


def parse_optim(spec: str) -> tuple[str, dict[str, float]]:
    """'adam' / 'sgd,lr=0.1' -> (name, params), like SentEval's utils.get_optimizer."""
    name, *rest = [s.strip() for s in spec.split(",")]
    if name not in OPTIMIZERS:
        from sentkit.core.registry import suggest

        raise ConfigError(
            f"unknown optimizer {name!r}.{suggest(name, list(OPTIMIZERS))} Known: {', '.join(OPTIMIZERS)}."
        )
    params: dict[str, float] = {}
    for item in rest:
        if "=" not in item:
            raise ConfigError(f"optimizer option {item!r} must look like key=value")
        k, v = item.split("=", 1)
        try:
            params[k.strip()] = float(v)
        except ValueError:
            raise ConfigError(f"optimizer option {k}: {v!r} is not a number") from None
    if name == "sgd" and "lr" not in params:
        raise ConfigError("sgd needs a learning rate, e.g. optim='sgd,lr=0.1'")
    return name, params


PRESETS: Registry[dict[str, Any]] = Registry("preset")
PRESETS.add(
    "prototyping", {"kfold": 5, "optim": "rmsprop", "batch_size": 128, "tenacity": 3, "epoch_size": 2, "nhid": 0}
)
PRESETS.add("literature", {"kfold": 10, "optim": "adam", "batch_size": 64, "tenacity": 5, "epoch_size": 4, "nhid": 0})


def make_config(preset: str = "prototyping", **overrides: Any) -> EvalConfig:
    """Preset values, then `overrides` (unknown keys raise with a suggestion)."""
    base = dict(PRESETS.get(preset))
    base["preset"] = preset
    base.update({k: v for k, v in overrides.items() if v is not None})
    return from_dict(EvalConfig, base, where="evaluate")


def with_overrides(cfg: EvalConfig, **overrides: Any) -> EvalConfig:
    return replace(cfg, **overrides)

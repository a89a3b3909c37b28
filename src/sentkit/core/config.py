"""Typed config dataclasses: build from dicts/TOML with unknown-key errors, save resolved."""

from __future__ import annotations

import dataclasses
import json
import tomllib
import types
import typing
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

from sentkit.core.errors import SentkitError
from sentkit.core.registry import suggest

C = TypeVar("C")


class ConfigError(SentkitError, ValueError):
    """A config value or key is invalid; the message says which and how to fix it."""


PRECISIONS = ("auto", "fp32", "bf16", "fp16")  # the training loop's arithmetic (TrainConfig.precision)


def check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise ConfigError(
            f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}."
            f"{suggest(precision, list(PRECISIONS))}"
        )


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Coerce `value` (possibly a CLI string) to the annotated type `tp`."""
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        is_none = value is None or (isinstance(value, str) and value.lower() in ("none", "null"))
        if is_none and type(None) in get_args(tp):
            return None
        last: Exception | None = None
        for a in args:
            try:
                return _coerce(value, a, key)
            except (ConfigError, ValueError, TypeError) as e:
                last = e
        if len(args) == 1 and isinstance(last, ConfigError):  # `int | None`: the int's own message
            raise last
        raise ConfigError(f"{key}: cannot read {value!r} as {tp}: {last}")
    if origin is typing.Literal:
        choices = get_args(tp)
        if value not in choices:
            raise ConfigError(
                f"{key}: {value!r} is not one of {list(choices)}.{suggest(str(value), [str(c) for c in choices])}"
            )
        return value
    if origin in (list, tuple):
        (inner, *_) = get_args(tp) or (Any,)
        if isinstance(value, str):
            value = [v for v in value.split(",") if v]
        return [_coerce(v, inner, key) for v in value] if inner is not Any else list(value)
    if origin is dict:
        if isinstance(value, str):
            value = json.loads(value)
        return dict(value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on"):
            return True
        if isinstance(value, str) and value.lower() in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{key}: expected true/false, got {value!r}")
    if tp is int:
        if isinstance(value, bool):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        if isinstance(value, float) and not value.is_integer():
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{key}: expected an integer, got {value!r}") from None
    if tp is float:
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{key}: expected a number, got {value!r}") from None
    if tp is str:
        if isinstance(value, Path):
            return str(value)
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    return value


def from_dict(cls: type[C], data: dict[str, Any], *, where: str = "config") -> C:
    """Build dataclass `cls` from `data`; unknown keys raise with the closest known key."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls} is not a dataclass")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        name = key.replace("-", "_")
        if name not in fields:
            raise ConfigError(
                f"{where}: unknown key {key!r}.{suggest(name, list(fields))} Known keys: {', '.join(sorted(fields))}."
            )
        kwargs[name] = _coerce(value, hints[name], f"{where}: {key}")
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise ConfigError(f"{where}: {e}") from None


def to_dict(cfg: Any) -> dict[str, Any]:
    """The resolved config as plain JSON-able data."""
    out = dataclasses.asdict(cfg)
    for k, v in list(out.items()):
        if isinstance(v, Path):
            out[k] = str(v)
    return out


def load_toml(path: str | Path) -> dict[str, Any]:
    """Read a TOML file; errors name the file."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {p} does not exist")
    try:
        with p.open("rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: invalid TOML: {e}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{p}: not UTF-8 text (byte {e.start}): TOML files are UTF-8") from None


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    """Parse `key=value` strings from the command line (values stay strings; coerced later)."""
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must look like key=value")
        k, v = item.split("=", 1)
        out[k.strip().replace("-", "_")] = v.strip()
    return out


def save_json(cfg: Any, path: str | Path) -> None:
    """Write the resolved config as JSON, atomically."""
    from sentkit.core.io import atomic_write_text

    data = to_dict(cfg) if dataclasses.is_dataclass(cfg) else cfg
    atomic_write_text(Path(path), json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")

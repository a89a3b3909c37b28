"""Name -> object registries with helpful errors (closest-name suggestions)."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from sentkit.errors import SentkitError

T = TypeVar("T")


def suggest(name: str, choices: list[str]) -> str:
    """Return a ' Did you mean ...?' hint for `name` among `choices` (or '')."""
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.5)
    if not close:
        lowered = {c.lower(): c for c in choices}
        close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.5)
        close = [lowered[c] for c in close]
    return f" Did you mean {close[0]!r}?" if close else ""


def loose_key(name: str) -> str:
    """`name` with case, '-', '_' and spaces ignored: the key lenient look-ups compare (task names)."""
    return name.replace("-", "").replace("_", "").replace(" ", "").lower()


class UnknownNameError(SentkitError, KeyError):
    """An unknown registry key; the message lists the choices and the closest one."""

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return str(self.args[0]) if self.args else ""


class Registry(Generic[T]):
    """A small named registry: `reg.register(name)(obj)` and `reg.get(name)`."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str, *, overwrite: bool = False) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            if name in self._items and not overwrite:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._items[name] = obj
            return obj

        return deco

    def add(self, name: str, obj: T, *, overwrite: bool = False) -> None:
        self.register(name, overwrite=overwrite)(obj)

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            names = sorted(self._items)
            raise UnknownNameError(
                f"unknown {self.kind} {name!r}.{suggest(name, names)} "
                f"Known {self.kind}s: {', '.join(names) or '(none)'}."
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))

    def names(self) -> list[str]:
        return sorted(self._items)

    def items(self) -> list[tuple[str, T]]:
        return sorted(self._items.items())

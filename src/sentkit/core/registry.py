"""Name -> object registries with helpful errors (closest-name suggestions), and the plug-ins that
installed distributions add to them through entry points (`Plugins`)."""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from sentkit.core.errors import SentkitError, one_line

T = TypeVar("T")
log = logging.getLogger(__name__)


def suggest(name: str, choices: list[str]) -> str:
    """Return a ' Did you mean ...?' hint for `name` among `choices` (or ''); a name that differs only in case
    gets its own spelling ("BF16" -> 'bf16')."""
    same = [c for c in choices if c.lower() == name.lower()]
    if same:
        return f" Did you mean {same[0]!r}?"
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


class Plugins:
    """The entry points of one group (``sentkit.methods``, ``sentkit.tasks``, ``sentkit.kinds``) of the
    installed distributions: each is imported and handed to `add(name, object)` at most once per
    process, when a registry first lists its names or misses a name (`load_all`), never at import time.
    One that fails to import, or that `add` refuses (a name taken, an object of the wrong type), is one
    warning naming its distribution, and is skipped: a broken plug-in never stops a command."""

    def __init__(self, group: str, what: str, add: Callable[[str, Any], None]) -> None:
        self.group = group
        self.what = what  # "method", "task", "task kind": what the warning calls one
        self._add = add
        self.loaded = False
        self._loading = False

    def load_all(self) -> None:
        """Import every entry point of the group not imported yet (once; a re-entrant call is a no-op)."""
        if self.loaded or self._loading:
            return
        from importlib.metadata import entry_points

        self._loading = True
        try:
            for ep in sorted(entry_points(group=self.group), key=lambda e: e.name):
                try:
                    self._add(ep.name, ep.load())
                except Exception as e:  # a plug-in's own bug: warn, skip it, go on
                    dist = f"{ep.dist.name} {ep.dist.version}" if ep.dist is not None else "(no distribution)"
                    log.warning(
                        "%s plug-in %r (entry point %s = %s of distribution %s) is skipped: %s; fix or uninstall %s",
                        self.what,
                        ep.name,
                        self.group,
                        ep.value,
                        dist,
                        one_line(f"{type(e).__name__}: {e}"),
                        dist.split(" ")[0],
                    )
        finally:
            self._loading = False
            self.loaded = True

    def reset(self) -> None:
        """Look at the entry points again at the next `load_all` (tests; a distribution installed since)."""
        self.loaded = False

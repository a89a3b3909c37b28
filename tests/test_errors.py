"""The one error contract: every exception class sentkit defines is a SentkitError, whose class
carries the exit code and the one line `sentkit` prints (checked on the real classes and on main)."""

from __future__ import annotations

import errno
import importlib
import inspect
import pkgutil

import pytest

import sentkit
from sentkit.cli.main import describe_error, main
from sentkit.errors import InputError, SentkitError


def sentkit_exception_classes() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(sentkit.__path__, "sentkit."):
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra that is not installed: its classes cannot be raised
            continue
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseException) and obj.__module__ == info.name:
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return list(found.values())


def test_every_sentkit_exception_is_a_sentkit_error() -> None:
    classes = sentkit_exception_classes()
    assert len(classes) >= 18, [c.__name__ for c in classes]  # the walk found the package's classes
    stray = [c.__name__ for c in classes if not issubclass(c, (SentkitError, KeyboardInterrupt))]
    assert not stray, f"exception classes outside the error contract (derive from SentkitError): {stray}"


def test_the_class_carries_the_exit_code_and_the_line() -> None:
    from sentkit.io import PathError
    from sentkit.training.distributed import RankFailed

    class Broken(SentkitError):
        exit_code = 1

        def user_line(self) -> str:
            return "the disk went away; write elsewhere"

    assert describe_error(Broken("ignored\ntext")) == ("the disk went away; write elsewhere", 1)
    assert describe_error(InputError("line 3 of x.tsv:\n  two columns expected")) == (
        "line 3 of x.tsv: two columns expected",
        2,
    )
    assert describe_error(RankFailed("rank 1 stopped"))[1] == 1
    assert describe_error(PathError(errno.ENOSPC, "no space", "--output", "x")) == ("--output x: no space", 1)
    assert describe_error(PathError(errno.EEXIST, "exists", "--output", "x"))[1] == 2
    assert isinstance(InputError("x"), ValueError)  # `except ValueError` in user code still catches it


def test_main_exits_with_the_class_exit_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from sentkit.cli.main import build_parser

    class Gone(SentkitError):
        exit_code = 1

    def fail(args: object) -> int:
        raise Gone("the store went away mid-run")

    args = build_parser().parse_args(["embed", "--model", "m", "--input", "i", "--output", "o.npy"])
    args.func = fail
    real = build_parser()
    monkeypatch.setattr(real, "parse_args", lambda argv=None: args)
    monkeypatch.setattr("sentkit.cli.main.build_parser", lambda: real)
    assert main(["embed"]) == 1
    assert capsys.readouterr().err.strip() == "sentkit embed: error: the store went away mid-run"

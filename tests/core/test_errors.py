"""The one error contract: every exception class sentkit defines is a SentkitError, whose class
carries the exit code and the one line `sentkit` prints (checked on the real classes and on main)."""

from __future__ import annotations

import ast
import errno
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import sentkit
from sentkit.cli.main import describe_error, main
from sentkit.core.errors import InputError, SentkitError


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
    from sentkit.core.io import PathError
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


# ----------------------------------------------------------------------------- user input is a SentkitError
PLAIN = ("ValueError", "TypeError", "FileNotFoundError")  # what sentkit raised for user input before InputError
# The plain raises that stay: each checks how sentkit's own code or a plug-in's calls it, never a value a user
# gives on the command line or in a file. (module, function, exception): the reason. A new one is reported as
# an internal error ("please report it"), so a check of user input must raise InputError (a ValueError),
# InputTypeError or MissingInputError (sentkit.core.errors) instead.
INTERNAL_CONTRACT = {
    ("core/config.py", "from_dict", "TypeError"): "a caller passed a class that is not a dataclass: code",
    ("core/registry.py", "Registry.register.deco", "ValueError"): "code registers a name twice",
    ("core/methods.py", "register_method", "ValueError"): "a plug-in's code registers a method name twice",
    ("core/methods.py", "method_target", "ValueError"): "METHODS or a plug-in's entry names no 'module:attr': code",
    ("core/methods.py", "get_method", "ValueError"): "a method's code is not a Method or names itself otherwise",
    ("core/methods.py", "_add_plugin", "TypeError"): "a plug-in's object is neither a Method nor a class: code",
    ("training/recipe.py", "Recipe.as_method", "ValueError"): "a Recipe's name disagrees with METHODS: code",
    ("hill/common.py", "HillModel.as_method", "ValueError"): "an estimator's name disagrees with METHODS: code",
    ("hill/seq2seq.py", "make_embedding", "ValueError"): "sentkit builds the pretrained matrix for its vocabulary",
    ("evaluation/runner.py", "register_kind", "ValueError"): "code registers a task kind twice",
    ("evaluation/classifier.py", "_make_groups", "ValueError"): "sentkit's protocols build every job",
    ("evaluation/tasks.py", "Split.__post_init__", "ValueError"): "sentkit's loaders build the splits",
    ("evaluation/tasks.py", "load_columns", "ValueError"): "called only for a spec with columns",
    ("data/sentences.py", "iter_document_sentences", "TypeError"): "Python API: the command line passes a path",
    ("core/interface.py", "as_text_list", "TypeError"): "Python API: encode() from code; the command line reads text",
    ("evaluation/report.py", "load_run", "TypeError"): "caught there, raised again as an InputError naming the file",
    ("evaluation/report.py", "_check_mteb", "TypeError"): "caught there, raised again as an InputError naming the file",
    ("explore/trust.py", "_module_dirs", "ValueError"): "caught by its caller, which says modules.json cannot be read",
    ("objectives/matryoshka.py", "matryoshka", "ValueError"): "a pure loss called by code; the user's matryoshka_dims "
    "and weights are refused first, in one line, by the config and the recipe's width check",
}


def plain_raises() -> dict[tuple[str, str, str], int]:
    """{(module path under src/sentkit, enclosing function's qualified name, exception): line} of every
    ``raise ValueError/TypeError/FileNotFoundError`` in sentkit's source."""
    root = Path(sentkit.__file__).parent
    found: dict[tuple[str, str, str], int] = {}

    def visit(node: ast.AST, where: list[str], rel: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, [*where, child.name], rel)
                continue
            if isinstance(child, ast.Raise) and child.exc is not None:
                exc = child.exc.func if isinstance(child.exc, ast.Call) else child.exc
                if isinstance(exc, ast.Name) and exc.id in PLAIN:
                    found.setdefault((rel, ".".join(where), exc.id), child.lineno)
            visit(child, where, rel)

    for f in sorted(root.rglob("*.py")):
        visit(ast.parse(f.read_text(encoding="utf-8")), [], f.relative_to(root).as_posix())
    return found


def test_user_input_errors_are_sentkit_errors() -> None:
    found = plain_raises()
    new = [f"src/sentkit/{m}:{line} ({fn}): raise {exc}" for (m, fn, exc), line in found.items()
           if (m, fn, exc) not in INTERNAL_CONTRACT]  # fmt: skip
    assert not new, (
        "plain raises of a standard error: a check of user input raises sentkit.core.errors.InputError "
        "(InputTypeError, MissingInputError); a check of how code calls sentkit goes in INTERNAL_CONTRACT "
        f"with its reason: {new}"
    )
    stale = sorted(set(INTERNAL_CONTRACT) - set(found))
    assert not stale, f"INTERNAL_CONTRACT lists raises that are gone: {stale}"


def test_the_user_input_classes_keep_their_standard_base() -> None:
    from sentkit.core.errors import InputTypeError, MissingInputError

    assert describe_error(MissingInputError("vocabulary file v.txt not found")) == (
        "vocabulary file v.txt not found",
        2,
    )
    assert isinstance(MissingInputError("x"), FileNotFoundError) and isinstance(InputTypeError("x"), TypeError)
    assert describe_error(InputTypeError("expected an encoder, got int"))[1] == 2


def test_a_plain_error_that_escapes_is_an_internal_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Where a ValueError was raised does not matter (sentkit's code or a library's): not a SentkitError,
    it is a bug, reported as one; the traceback with SENTKIT_DEBUG=1 or -vv."""
    from sentkit.cli import embed_commands

    def fail(args: object) -> int:
        from sentkit.core.methods import register_method

        register_method("declutr", "x:y")  # a plain ValueError raised in sentkit's own code: code calls it wrong
        return 0

    monkeypatch.setattr(embed_commands, "cmd_similarity", fail)
    assert main(["similarity", "--model", "m", "a", "b"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("sentkit similarity: internal error: ValueError: method 'declutr' is already registered")
    assert err.endswith("; please report it (rerun with SENTKIT_DEBUG=1 or -vv to see the traceback)")
    with pytest.raises(ValueError):
        main(["-vv", "similarity", "--model", "m", "a", "b"])

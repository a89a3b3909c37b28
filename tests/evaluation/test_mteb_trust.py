"""MTEB runs a user can trust (issue 34): a local copy of a task's dataset is checked against mteb's
metadata (a subset is refused, or filed apart with --allow-subset); missing data is found before the
model loads and told in one line plus a failures file; names are suggested as a user meant them; one
identity (name, revision) per set of weights, mteb's own for the published MiniLM. Offline: every
dataset is a folder built here; the oracles are mteb's own metadata and model registry, and
sentkit's folder digest."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sentkit.cli.main import main
from sentkit.evaluation import mteb_adapter as A

from .test_mteb import empty_hf_cache, mteb_args
from .test_mteb import files as files
from .test_user_tasks import _forget_user_tasks, write_beir

__all__ = ["_forget_user_tasks", "empty_hf_cache"]

# a `file.py:Enc` model that leaves a mark when it is loaded (its module imported) and another when it encodes
MARKED_ENCODER = """
import numpy as np
from pathlib import Path

Path({loaded!r}).write_text("loaded")

class Enc:
    prompts = {prompts!r}
    default_prompt_name = {default!r}
    def encode(self, texts):
        Path({encoded!r}).write_text("encoded")
        return np.stack([np.random.default_rng(sum(map(ord, t))).standard_normal(8).astype(np.float32)
                         for t in texts])
"""


def marked_model(folder: Path, prompts: dict[str, str] | None = None, default: str | None = None) -> tuple[str, Path]:
    """(model name, folder of the marks `loaded` and `encoded`)."""
    marks = folder / "marks"
    marks.mkdir(parents=True, exist_ok=True)
    p = folder / "marked_encoder.py"
    p.write_text(
        MARKED_ENCODER.format(
            loaded=str(marks / "loaded"), encoded=str(marks / "encoded"), prompts=prompts or {}, default=default
        )
    )
    return f"{p}:Enc", marks


def sts_copy(folder: Path, n: int, split: str = "test") -> Path:
    folder.mkdir(parents=True)
    rows = [
        {"sentence1": f"a sentence {i}", "sentence2": f"another sentence {i % 7}", "score": float(i % 5)}
        for i in range(n)
    ]
    (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def stderr_lines(capsys: pytest.CaptureFixture[str]) -> tuple[str, list[str]]:
    cap = capsys.readouterr()
    return cap.out, [ln for ln in cap.err.splitlines() if ln.strip()]


# ---------------------------------------------------------------------------------------------
# A local copy is checked
# ---------------------------------------------------------------------------------------------
def test_a_40_pair_sts12_copy_is_refused_before_the_model_loads(
    empty_hf_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import mteb

    want = mteb.get_task("STS12").metadata.n_samples["test"]  # the oracle: mteb's metadata (3,108 pairs)
    copy = sts_copy(tmp_path / "sts12", 40)
    model, marks = marked_model(tmp_path)
    out = tmp_path / "run" / "r.json"
    capsys.readouterr()
    assert main(["-q", "evaluate", "--model", model, "--mteb", f"STS12={copy}", "-o", str(out), "--no-cache"]) == 2
    _, err = stderr_lines(capsys)
    assert len(err) == 1
    assert err[0].startswith(
        f"sentkit evaluate: error: --mteb STS12={copy}: split test has 40 samples, MTEB's STS12 has {want:,}"
    )
    assert "hf download --repo-type dataset mteb/sts12-sts" in err[0] and "--allow-subset" in err[0]
    assert not (marks / "loaded").exists() and not out.parent.exists()  # nothing loaded, nothing written


def test_with_allow_subset_a_copy_is_filed_under_a_local_subset_revision(empty_hf_cache: Path, tmp_path: Path) -> None:
    import mteb

    copy = sts_copy(tmp_path / "sts12", 40)
    model, _ = marked_model(tmp_path)
    out = tmp_path / "run" / "r.json"
    assert (
        main(
            [
                "-q",
                "evaluate",
                "--model",
                model,
                "--mteb",
                f"STS12={copy}",
                "--allow-subset",
                "-o",
                str(out),
                "--no-cache",
            ]
        )
        == 0
    )
    section = json.loads(out.read_text())["mteb"]
    name, revision = A.model_identity(model)
    assert section["model"] == name == "sentkit/marked_encoder.Enc"
    rec = section["local_copies"]["STS12"]
    assert rec["subset"] is True and rec["path"] == str(copy.resolve())
    assert rec["sizes"] == {"test": 40} and rec["expected_sizes"] == mteb.get_task("STS12").metadata.n_samples
    assert rec["revision"] == revision + "_local_subset"
    file = out.parent / section["tasks"]["STS12"]["file"]
    assert file.parent.name == revision + "_local_subset"  # mteb's results folder says so
    dataset_revision = mteb.get_task("STS12").metadata.dataset["revision"]
    assert json.loads(file.read_text())["dataset_revision"] == f"local_subset_of_{dataset_revision}"


def test_a_complete_copy_is_accepted_and_filed_as_the_task(empty_hf_cache: Path, tmp_path: Path) -> None:
    import mteb

    task = mteb.get_task("STS12")
    copy = sts_copy(tmp_path / "sts12", task.metadata.n_samples["test"])
    model, _ = marked_model(tmp_path)
    out = tmp_path / "r.json"
    assert main(["-q", "evaluate", "--model", model, "--mteb", f"STS12={copy}", "-o", str(out), "--no-cache"]) == 0
    section = json.loads(out.read_text())["mteb"]
    assert section["local_copies"]["STS12"]["subset"] is False
    file = out.parent / section["tasks"]["STS12"]["file"]
    assert file.parent.name == A.model_identity(model)[1]
    assert json.loads(file.read_text())["dataset_revision"] == task.metadata.dataset["revision"]


def test_a_copy_of_another_revision_or_without_the_split_is_refused(
    empty_hf_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import mteb

    task = mteb.get_task("STS12")
    copy = sts_copy(tmp_path / "other", task.metadata.n_samples["test"])
    meta = copy / ".cache" / "huggingface" / "download" / "test.jsonl.metadata"  # as `hf download --local-dir` leaves
    meta.parent.mkdir(parents=True)
    meta.write_text("0" * 40 + "\netag\n1700000000.0\n")
    model, _ = marked_model(tmp_path)
    capsys.readouterr()
    assert main(["-q", "evaluate", "--model", model, "--mteb", f"STS12={copy}", "-o", str(tmp_path / "r.json")]) == 2
    _, err = stderr_lines(capsys)
    assert (
        len(err) == 1
        and f"it is revision {'0' * 40} of mteb/sts12-sts, MTEB's STS12 uses {task.metadata.dataset['revision']}"
        in err[0]
    )
    train_only = sts_copy(tmp_path / "train_only", 30, split="train")
    assert (
        main(["-q", "evaluate", "--model", model, "--mteb", f"STS12={train_only}", "-o", str(tmp_path / "r.json")]) == 2
    )
    _, err = stderr_lines(capsys)
    assert len(err) == 1 and "split test is missing (found: train)" in err[0]


def test_a_beir_folder_with_only_dev_qrels_gets_a_hint_that_works(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    beir = tmp_path / "beir"
    write_beir(beir)
    (beir / "qrels" / "test.tsv").rename(beir / "qrels" / "dev.tsv")
    model, marks = marked_model(tmp_path)
    capsys.readouterr()
    assert (
        main(["-q", "evaluate", "--model", model, "--mteb", f"retrieval:faq={beir}", "-o", str(tmp_path / "r.json")])
        == 2
    )
    _, err = stderr_lines(capsys)
    assert len(err) == 1 and "has dev.tsv (split dev), not test.tsv" in err[0] and 'split = "dev"' in err[0]
    assert not (marks / "loaded").exists()
    (tmp_path / "t.toml").write_text(f'[[task]]\nname = "faq"\ntype = "retrieval"\npath = "{beir}"\nsplit = "dev"\n')
    out = tmp_path / "r.json"
    assert (
        main(["-q", "evaluate", "--model", model, "--mteb", str(tmp_path / "t.toml"), "-o", str(out), "--no-cache"])
        == 0
    )
    assert set(json.loads(out.read_text())["mteb"]["tasks"]) == {"faq"}


# ---------------------------------------------------------------------------------------------
# Failures a user can read
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("quiet", [True, False])
def test_a_benchmark_without_its_data_is_one_line_and_a_file_before_the_model_loads(
    quiet: bool, empty_hf_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = A.registry_tasks("MTEB(eng, v2)")
    model, marks = marked_model(tmp_path)
    out = tmp_path / "run" / "r.json"
    capsys.readouterr()
    rc = main([*(["-q"] if quiet else []), "evaluate", "--model", model, "--mteb", "MTEB(eng, v2)", "-o", str(out)])
    stdout, err = stderr_lines(capsys)
    assert rc == 1
    failures = out.parent / "r.mteb-failures.txt"
    assert err == [
        f"sentkit evaluate: error: {len(bench)} of {len(bench)} MTEB tasks failed: {len(bench)} MTEB datasets "
        "of MTEB(eng, v2) are neither in the local cache nor reachable; where the hub is reachable run "
        "`sentkit data download --mteb 'MTEB(eng, v2)'` and copy the Hugging Face cache "
        f"(~/.cache/huggingface, or $HF_HOME) here; each task's reason and fix: {failures}"
    ]
    lines = failures.read_text().splitlines()
    assert [ln.split(":")[0] for ln in lines] == [t.metadata.name for t in bench]
    for t, ln in zip(bench, lines):  # each fix whole: nothing cut
        assert ln.endswith(f"--local-dir DIR` and pass --mteb {t.metadata.name}=DIR")
        assert f"{t.metadata.dataset['path']} --revision {t.metadata.dataset['revision']}" in ln
    res = json.loads(out.read_text())["mteb"]
    assert set(res["errors"]) == {t.metadata.name for t in bench} and res["failures_file"] == str(failures)
    assert not (marks / "loaded").exists()  # the model was never loaded
    assert not (out.parent / "mteb").exists() and "mteb/results" not in stdout  # no empty folder, no phantom files


def test_one_failure_during_the_run_is_told_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, files: Path
) -> None:
    import mteb

    real = mteb.evaluate

    def failing(model, task, **kw):
        if task.metadata.name == "pairs":
            raise ValueError("x" * 900)  # a long message: never cut
        return real(model, task, **kw)

    monkeypatch.setattr(mteb, "evaluate", failing)
    model, _ = marked_model(tmp_path)
    capsys.readouterr()
    assert (
        main(["-q", "evaluate", "--model", model, *mteb_args(files), "-o", str(tmp_path / "r.json"), "--no-cache"]) == 1
    )
    _, err = stderr_lines(capsys)
    final = [ln for ln in err if "x" * 900 in ln]
    assert len(final) == 1 and final[0] == err[-1]  # the message once, in the closing line, whole
    assert err[-1] == f"sentkit evaluate: error: 1 of 3 MTEB tasks failed: MTEB task pairs: ValueError: {'x' * 900}"


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("sts12", "STS12"),
        ("Banking77", "Banking77Classification"),
        ("scifact", "SciFact"),
        ("MTEB(eng,v2)", "MTEB(eng, v2)"),
        ("STS-B", "STSBenchmark"),  # not mteb's Chinese STSB
    ],
)
def test_closest_names_ignore_case_and_prefer_what_the_user_meant(
    typed: str, meant: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model, marks = marked_model(tmp_path)
    capsys.readouterr()
    assert main(["evaluate", "--model", model, "--mteb", typed, "-o", str(tmp_path / "r.json")]) == 2
    _, err = stderr_lines(capsys)
    assert len(err) == 1 and f"did you mean {meant!r}?" in err[0]
    assert not (marks / "loaded").exists()


def test_a_senteval_name_mteb_lacks_points_to_tasks() -> None:
    with pytest.raises(A.ConfigError, match=r"MR is a SentEval task: pass --tasks MR") as e:
        A.registry_tasks("mr")
    assert "did you mean" not in str(e.value)


# ---------------------------------------------------------------------------------------------
# One identity per set of weights
# ---------------------------------------------------------------------------------------------
def test_the_same_minilm_weights_have_one_identity_mtebs_own(tmp_path: Path) -> None:
    import mteb

    from sentkit.models.hub import resolve

    meta = mteb.get_model_meta("sentence-transformers/all-MiniLM-L6-v2")  # the oracle: mteb's model registry
    copy = tmp_path / "renamed-minilm"
    shutil.copytree(resolve("all-minilm-l6-v2"), copy)
    forms = ["all-minilm-l6-v2", resolve("all-minilm-l6-v2"), "sentence-transformers/all-MiniLM-L6-v2", str(copy)]
    assert {A.model_identity(f) for f in forms} == {(meta.name, meta.revision)}
    (copy / "config_sentence_transformers.json").write_text('{"prompts": {"query": "query: "}}')  # other settings
    name, revision = A.model_identity(str(copy))
    assert (name, revision) == ("sentkit/renamed-minilm", _digest(copy))
    assert A.model_identity("all-minilm-l6-v2", variant="pooling=cls")[1] != meta.revision  # another model


def _digest(folder: Path) -> str:
    from sentkit.core.identity import content_id

    return content_id(folder)[:40]


def test_a_folder_is_its_content_hash_wherever_it_is(tiny_model_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "elsewhere"
    shutil.copytree(tiny_model_dir, copy)
    assert A.model_identity(str(copy))[1] == A.model_identity(str(tiny_model_dir))[1] == _digest(tiny_model_dir)


def test_minilm_runs_are_filed_under_mtebs_name_and_revision_with_its_meta(files: Path, tmp_path: Path) -> None:
    import mteb

    from sentkit.models.hub import resolve

    meta = mteb.get_model_meta("sentence-transformers/all-MiniLM-L6-v2")
    copy = tmp_path / "minilm-copy"
    shutil.copytree(resolve("all-minilm-l6-v2"), copy)
    seen = set()
    for i, form in enumerate(["all-minilm-l6-v2", str(copy)]):
        out = tmp_path / f"run{i}" / "r.json"
        assert (
            main(
                [
                    "-q",
                    "evaluate",
                    "--model",
                    form,
                    "--mteb",
                    f"sts:pairs={files / 'sts.jsonl'}",
                    "-o",
                    str(out),
                    "--cache-dir",
                    str(tmp_path / "cache"),
                ]
            )
            == 0
        )
        section = json.loads(out.read_text())["mteb"]
        file = out.parent / section["tasks"]["pairs"]["file"]
        seen.add(file.relative_to(out.parent).as_posix())
        written = json.loads((file.parent / "model_meta.json").read_text())
        assert (written["name"], written["revision"]) == (meta.name, meta.revision)
        assert written["embed_dim"] == meta.embed_dim == 384 and written["n_parameters"] == meta.n_parameters
        assert written["max_tokens"] == meta.max_tokens and written["similarity_fn_name"] == "cosine"
    assert seen == {f"mteb/results/{meta.name.replace('/', '__')}/{meta.revision}/pairs.json"}


def test_model_meta_carries_the_encoders_prompts(files: Path, tmp_path: Path) -> None:
    prompts = {"query": "query: ", "document": "passage: "}
    model, _ = marked_model(tmp_path, prompts=prompts, default="query")
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "-q",
                "evaluate",
                "--model",
                model,
                "--mteb",
                f"sts:pairs={files / 'sts.jsonl'}",
                "-o",
                str(out),
                "--no-cache",
            ]
        )
        == 0
    )
    section = json.loads(out.read_text())["mteb"]
    written = json.loads((out.parent / section["tasks"]["pairs"]["file"]).with_name("model_meta.json").read_text())
    assert written["loader_kwargs"] == {"model_prompts": prompts, "default_prompt_name": "query"}
    assert written["embed_dim"] == 8 and section["model_meta"]["prompts"] == prompts
    assert section["model_meta"]["embed_dim"] == 8

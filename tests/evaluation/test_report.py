"""`sentkit report` (sentkit.evaluation.report) on results dicts built by hand, old formats included:
each average gives its task count and averages over different task sets are marked, failed tasks are
rows with a reason cut at a word, bold follows each row's direction, `--plot` draws MTEB's tasks, and
MTEB figures are mteb's unrounded scores (checked end to end against the hand-computed nDCG@10 of
the retrieval toy: mteb's own figure is rounded to 5 decimals)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from sentkit.cli.main import main
from sentkit.evaluation import mteb_adapter as A
from sentkit.evaluation.report import (
    DOWNSTREAM,
    differing_tasks,
    load_run,
    markdown_table,
    mteb_scores,
    plot_data,
    short_reason,
    side_by_side,
)

from .test_mteb import empty_hf_cache
from .test_user_tasks import _forget_user_tasks, write_beir
from .test_user_tasks import encoder as bow_encoder

__all__ = ["_forget_user_tasks", "empty_hf_cache"]  # autouse: user tasks declared by a test are forgotten after it


def run(
    name: str,
    results: dict[str, Any],
    *,
    errors: dict[str, str] | None = None,
    total_s: float = 10.0,
    mteb: dict[str, Any] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "model": {"name": name},
        "config": {"preset": "p"},
        "results": results,
        "timings": {"total_s": total_s},
    }
    if errors is not None:
        out["errors"] = errors
    if mteb is not None:
        out["mteb"] = mteb
    return out


def section(tasks: dict[str, tuple[str, float]], errors: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    """An MTEB section as `sentkit evaluate --mteb` writes it: {task: (type, main score)}."""
    return {
        "mteb_version": "2.x",
        "model": "sentkit/m",
        "revision": "r",
        "results_dir": "mteb",
        "tasks": {
            n: {"type": ty, "main_score_name": "m", "main_score": v, "scores": {"test": {"default": v}}}
            for n, (ty, v) in tasks.items()
        },
        "errors": errors or {},
        "average": {},
        **extra,
    }


def rows(table: str) -> dict[str, list[str]]:
    """{row label: its cells} of a Markdown table."""
    return {
        ln.split("|")[1].strip(): [c.strip() for c in ln.split("|")[2:-1]]
        for ln in table.splitlines()
        if ln.startswith("| ")
    }


def footnotes(table: str) -> list[str]:
    return [ln for ln in table.splitlines() if ln.startswith("†")]


# ---------------------------------------------------------------------------------------------
# Averages: how many tasks, and whether they can be compared
# ---------------------------------------------------------------------------------------------
def test_each_average_says_how_many_tasks_it_covers_and_the_best_is_bold():
    a = run(
        "a",
        {"MR": {"acc": 70.0}, "CR": {"acc": 80.0}, "Tense": {"acc": 60.0}},
        mteb=section({"STS12": ("STS", 50.0), "STS13": ("STS", 70.0), "faq": ("Retrieval", 30.0)}),
    )
    b = run(
        "b",
        {"MR": {"acc": 75.0}, "CR": {"acc": 85.0}, "Tense": {"acc": 50.0}},
        mteb=section({"STS12": ("STS", 40.0), "STS13": ("STS", 60.0), "faq": ("Retrieval", 35.0)}),
    )
    table = side_by_side([a, b], ["a", "b"])
    r = rows(table)
    assert r["**downstream avg**"] == ["75.00 (2 tasks)", "**80.00** (2 tasks)"]  # (70+80)/2, (75+85)/2
    assert r["**probing avg**"] == ["**60.00** (1 task)", "50.00 (1 task)"]
    assert r["**MTEB avg**"] == ["**50.00** (3 tasks)", "45.00 (3 tasks)"]  # (50+70+30)/3, (40+60+35)/3
    # over task types: STS (50+70)/2 = 60 and Retrieval 30 -> 45; STS 50 and Retrieval 35 -> 42.5
    assert r["MTEB avg over task types"] == ["**45.00** (3 tasks, 2 types)", "42.50 (3 tasks, 2 types)"]
    assert "†" not in table and footnotes(table) == []


def test_averages_over_different_task_sets_are_marked_not_comparable_and_not_bolded():
    a = run("a", {"MR": {"acc": 70.0}, "CR": {"acc": 80.0}}, mteb=section({"STS12": ("STS", 50.0)}))
    b = run(
        "b",
        {"MR": {"acc": 75.0}, "CR": {"acc": 85.0}, "TREC": {"acc": 95.0}},
        mteb=section({"STS12": ("STS", 40.0), "STS13": ("STS", 60.0), "faq": ("Retrieval", 35.0)}),
    )
    table = side_by_side([a, b], ["a", "b"])
    r = rows(table)
    assert r["**downstream avg**"] == ["75.00 (2 tasks)†", "85.00 (3 tasks)†"]  # (75+85+95)/3: not bold
    assert r["**MTEB avg**"] == ["50.00 (1 task)†", "45.00 (3 tasks)†"]
    notes = footnotes(table)
    assert notes == [
        "† downstream avg, downstream avg w/o SNLI: over different tasks, not comparable (a lacks TREC).",
        "† MTEB avg, MTEB avg over task types: over different tasks, not comparable (a lacks STS13, faq).",
        "† total time (s): over different tasks, not comparable (a lacks TREC, MTEB STS13, MTEB faq).",
    ]
    assert r["total time (s)"] == ["10.00†", "10.00†"]
    assert r["MR"] == ["70.00", "**75.00**"]  # a task's row compares one task: still bolded


def test_a_run_of_a_few_tasks_next_to_a_full_one_does_not_look_comparable():
    full = run(
        "full",
        {
            n: {"acc": 80.0}
            for n in DOWNSTREAM
            if n not in ("MRPC", "SICKR", "STSB", "COCO") and not n.startswith("STS")
        },
        total_s=100.0,
    )
    few = run("few", {"MR": {"acc": 90.0}, "CR": {"acc": 90.0}}, total_s=5.0)
    table = side_by_side([full, few], ["full", "few"])
    r = rows(table)
    n_full = len(full["results"])
    assert r["**downstream avg**"] == [f"80.00 ({n_full} tasks)†", "90.00 (2 tasks)†"]
    assert r["total time (s)"] == ["100.00†", "5.00†"]  # the short run is not "best": it ran less
    missing = [n for n in full["results"] if n not in ("MR", "CR")]
    assert footnotes(table) == [
        f"† downstream avg, total time (s): over different tasks, not comparable (few lacks {', '.join(missing)}).",
        "† downstream avg w/o SNLI: over different tasks, not comparable (few lacks "
        f"{', '.join(n for n in missing if n != 'SNLI')}).",
    ]


def test_differing_tasks_lists_what_each_run_lacks():
    assert differing_tasks([["a", "b"], ["b", "c"], None]) == [["c"], ["a"], []]
    assert differing_tasks([["a", "b"], ["b", "a"]]) == [[], []]


# ---------------------------------------------------------------------------------------------
# Bold follows each row's direction
# ---------------------------------------------------------------------------------------------
def test_total_time_bolds_the_fastest_run():
    a = run("a", {"MR": {"acc": 70.0}}, total_s=30.0)
    b = run("b", {"MR": {"acc": 75.0}}, total_s=12.5)
    r = rows(side_by_side([a, b], ["a", "b"]))
    assert r["total time (s)"] == ["30.00", "**12.50**"]
    assert r["MR"] == ["70.00", "**75.00**"]  # a score: higher is better
    # an MTEB run's time counts too: 12.5 + 40 > 30 (the same tasks: SentEval's MR and MTEB's STS12)
    b["mteb"] = section({"STS12": ("STS", 1.0)}, timings={"total_s": 40.0})
    a["mteb"] = section({"STS12": ("STS", 2.0)}, timings={"total_s": 1.0})
    assert rows(side_by_side([a, b], ["a", "b"]))["total time (s)"] == ["**31.00**", "52.50"]


# ---------------------------------------------------------------------------------------------
# Failed tasks
# ---------------------------------------------------------------------------------------------
MISSING = (
    "MTEB task SciFact: its dataset mteb/scifact (revision 0228b52cf27578f30900b9e5271d331663a030d7) is not in "
    "the local cache and cannot be fetched (ConnectionError: Couldn't reach 'mteb/scifact' on the Hub "
    "(LocalEntryNotFoundError)); where the hub is reachable run `sentkit data download --mteb SciFact` and "
    "copy the Hugging Face cache here"
)


@pytest.mark.parametrize(
    "message,want",
    [
        (MISSING, "its dataset mteb/scifact is not in the local cache and cannot be fetched"),
        (
            "FileNotFoundError: [Errno 2] No such file or directory: 'data/TREC/train_5500.label'",
            "[Errno 2] No such file or directory: 'data/TREC/train_5500.label'",
        ),
        ("interrupted", "interrupted"),
        (
            "MTEB task faq: ValueError: the encoder returned 3 rows\nfor 4 texts",
            "the encoder returned 3 rows for 4 texts",
        ),
        ("ValueError: " + " ".join(["embedding"] * 20), " ".join(["embedding"] * 8) + "…"),  # 79 characters and …
        ("x" * 100, "x" * 100),  # one word longer than a cell: kept whole, never cut inside
    ],
)
def test_a_failure_reason_is_short_and_never_cut_mid_word(message, want):
    assert short_reason(message) == want


def test_failed_tasks_are_rows_that_say_why(tmp_path):
    a = run(
        "a",
        {"MR": {"acc": 70.0}},
        errors={"TREC": "FileNotFoundError: [Errno 2] No such file: 'TREC/x'"},
        mteb=section({"STS12": ("STS", 50.0)}, {"SciFact": MISSING}),
    )
    b = run(
        "b",
        {"MR": {"acc": 75.0}, "TREC": {"acc": 60.0}},
        errors={},
        mteb=section({"STS12": ("STS", 40.0), "SciFact": ("Retrieval", 20.0)}),
    )
    table = side_by_side([a, b], ["a", "b"])
    r = rows(table)
    assert r["TREC"] == ["error: [Errno 2] No such file: 'TREC/x'", "**60.00**"]  # the only score: the best
    assert r["MTEB SciFact"] == [
        "error: its dataset mteb/scifact is not in the local cache and cannot be fetched",
        "**20.00**",
    ]
    assert "full message is in the results file" in table and "copy the Hugging Face cache" not in table
    assert "a lacks TREC" in table and "a lacks SciFact" in table  # the failures make the averages differ
    one = markdown_table(a)  # one run's table: the same rows
    assert "| TREC | error | [Errno 2] No such file: 'TREC/x' | |" in one
    assert (
        "| MTEB SciFact | error | its dataset mteb/scifact is not in the local cache and cannot be fetched | |" in one
    )
    # through the command, from files
    paths = []
    for label, r_ in (("a", a), ("b", b)):
        paths.append(tmp_path / f"{label}.json")
        paths[-1].write_text(json.dumps(r_))
    assert main(["report", *map(str, paths), "--labels", "a,b"]) == 0


def test_a_run_whose_mteb_tasks_all_failed_names_no_results_files_and_no_average():
    a = run("a", {"MR": {"acc": 70.0}}, mteb=section({}, {"SciFact": MISSING}))
    one = markdown_table(a)
    assert "| MTEB SciFact | error |" in one
    assert "results files" not in one and "MTEB average" not in one


def test_a_results_file_whose_errors_are_not_an_object_is_refused(tmp_path, capsys):
    p = tmp_path / "r.json"
    p.write_text(json.dumps(run("a", {"MR": {"acc": 70.0}}, errors=["TREC"])))  # type: ignore[arg-type]
    assert main(["report", str(p)]) == 2
    err = capsys.readouterr().err
    assert "'errors' is not an object" in err and str(p) in err and err.count("\n") == 1


# ---------------------------------------------------------------------------------------------
# MTEB figures: unrounded, averaged here
# ---------------------------------------------------------------------------------------------
def test_mteb_averages_are_computed_from_the_tasks_unrounded_scores():
    # the stored average is what an older sentkit computed from mteb's rounded figures; the report recomputes
    a = run(
        "a",
        {},
        mteb=section(
            {"faq": ("Retrieval", 48.0354), "STS12": ("STS", 40.0)}, average={"mean_task": 44.0175, "n_tasks": 2}
        ),
    )
    got = mteb_scores(a)
    assert got["mteb:faq"] == 48.0354 and got["avg:mteb"] == pytest.approx((48.0354 + 40.0) / 2, abs=1e-12)
    r = rows(side_by_side([a, run("b", {})], ["a", "b"]))
    assert r["MTEB faq"] == ["**48.04**", "—"] and r["**MTEB avg**"][0] == "**44.02** (2 tasks)"
    assert "44.02 over 2 tasks, 44.02 over 2 task types" in markdown_table(a)


def test_retrieval_means_are_the_unrounded_means_of_trec_evals_per_query_measures():
    per_query = {
        "q1": {"ndcg_cut_10": 0.5, "recall_1": 1.0, "P_5": 0.2, "map_cut_10": 0.25, "success_10": 1.0},
        "q2": {"ndcg_cut_10": 1 / 3, "recall_1": 0.0, "P_5": 0.4, "map_cut_10": 0.5, "success_10": 0.0},
    }
    got = A.retrieval_means(per_query)
    assert got == {
        "ndcg_at_10": pytest.approx((0.5 + 1 / 3) / 2, abs=0),
        "map_at_10": 0.375,
        "recall_at_1": 0.5,
        "precision_at_5": pytest.approx(0.3),
        "hit_rate_at_10": 0.5,
        "accuracy": 0.5,
    }


def test_keep_unrounded_hooks_retrieval_tasks_once_and_leaves_others(tmp_path: Path) -> None:
    write_beir(tmp_path / "beir")
    (tmp_path / "sts.tsv").write_text("text1\ttext2\tscore\na b\ta c\t1\nb c\tb d\t2\nc d\tc d\t3\n")
    retrieval, sts = A.resolve_tasks([f"retrieval:faq={tmp_path / 'beir'}", f"sts:pairs={tmp_path / 'sts.tsv'}"])
    hook = A.keep_unrounded(retrieval).task_specific_scores
    getattr(retrieval, A.UNROUNDED)[("test", "default")] = {"ndcg_at_10": 0.5}
    assert A.keep_unrounded(retrieval).task_specific_scores is hook  # wrapped once, a rerun starts afresh
    assert getattr(retrieval, A.UNROUNDED) == {}
    assert A.keep_unrounded(sts) is sts and not hasattr(sts, A.UNROUNDED)


def test_mteb_scores_in_the_results_file_are_unrounded(tmp_path: Path) -> None:
    """The retrieval toy with the `more` judgements (tests/evaluation/test_mteb.py): its nDCG@10 x 100 by
    hand is 94.878965...; mteb's own figure is rounded to 5 decimals (94.879); sentkit's results file
    and report carry the unrounded value, as sentkit's own retrieval does."""
    from .test_mteb import HAND_NDCG_MORE

    beir = tmp_path / "beir"
    write_beir(beir)
    (beir / "qrels" / "more.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td3\t1\nq1\td2\t1\nq2\td4\t1\nq2\td2\t1\n"
    )
    (tmp_path / "t.toml").write_text(
        f'[[task]]\nname = "faq-more"\ntype = "retrieval"\npath = "{beir}"\nsplit = "more"\n'
    )
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "-q",
                "evaluate",
                "--model",
                bow_encoder(tmp_path),
                "--task-file",
                str(tmp_path / "t.toml"),
                "--mteb",
                str(tmp_path / "t.toml"),
                "-o",
                str(out),
                "--no-cache",
            ]
        )
        == 0
    )
    res = json.loads(out.read_text())
    task = res["mteb"]["tasks"]["faq-more"]
    assert task["main_score"] == pytest.approx(HAND_NDCG_MORE, abs=1e-9)
    assert task["scores"]["more"]["default"] == pytest.approx(HAND_NDCG_MORE, abs=1e-9)
    assert task["main_score_mteb"] == pytest.approx(round(HAND_NDCG_MORE / 100, 5) * 100, abs=1e-9)  # 94.879
    assert abs(task["main_score_mteb"] - HAND_NDCG_MORE) > 1e-5  # the rounding the summary avoids
    assert task["main_score"] == pytest.approx(res["results"]["faq-more"]["ndcg_at_10"], abs=1e-9)
    assert res["mteb"]["average"]["mean_task"] == pytest.approx(HAND_NDCG_MORE, abs=1e-9)
    mteb_file = json.loads((out.parent / task["file"]).read_text())  # mteb's own file: as mteb writes it
    assert mteb_file["scores"]["more"][0]["ndcg_at_10"] == pytest.approx(round(HAND_NDCG_MORE / 100, 5), abs=1e-12)
    assert mteb_scores(load_run(out)) == {
        "mteb:faq-more": pytest.approx(HAND_NDCG_MORE, abs=1e-9),
        "avg:mteb": pytest.approx(HAND_NDCG_MORE, abs=1e-9),
        "avg:mteb_by_type": pytest.approx(HAND_NDCG_MORE, abs=1e-9),
    }


# ---------------------------------------------------------------------------------------------
# --plot, and old files
# ---------------------------------------------------------------------------------------------
def test_the_plot_includes_the_mteb_tasks(tmp_path, capsys):
    a = run("a", {"MR": {"acc": 70.0}}, errors={"CR": "boom"}, mteb=section({"STS12": ("STS", 48.0354)}))
    b = run("b", {"MR": {"acc": 75.0}, "CR": {"acc": 65.0}})
    names, values = plot_data([a, b])
    assert names == ["MR", "CR", "MTEB STS12"]
    assert values == [[70.0, None, 48.0354], [75.0, 65.0, None]]
    paths = []
    for label, r_ in (("a", a), ("b", b)):
        paths.append(tmp_path / f"{label}.json")
        paths[-1].write_text(json.dumps(r_))
    pytest.importorskip("matplotlib")
    png = tmp_path / "c.png"
    assert main(["report", *map(str, paths), "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_old_results_files_still_load_and_report(tmp_path):
    """Files written before failures, task counts and unrounded MTEB scores: no `errors`, no MTEB
    `tasks_requested` or `main_score_mteb`, SentEval-only ones without `timings`."""
    old_mteb = {
        "mteb_version": "2.1.0",
        "model": "sentkit/m",
        "revision": "r",
        "results_dir": "mteb",
        "tasks": {
            "STS12": {
                "type": "STS",
                "main_score_name": "cosine_spearman",
                "main_score": 61.5,
                "scores": {"test": {"default": 61.5}},
                "evaluation_time_s": 1.0,
                "file": "x",
            }
        },
        "errors": {},
        "average": {"mean_task": 61.5, "mean_type": 61.5, "by_type": {"STS": 61.5}, "n_tasks": 1},
    }
    files = {
        "old_mteb.json": {
            "model": {"name": "m"},
            "config": {"preset": "p"},
            "results": {"MR": {"acc": 70.0}},
            "timings": {"total_s": 3.0},
            "mteb": old_mteb,
        },
        "old.json": {"model": {"name": "o"}, "config": {"preset": "p"}, "results": {"MR": {"acc": 72.0}}},
    }
    runs = []
    for name, data in files.items():
        (tmp_path / name).write_text(json.dumps(data))
        runs.append(load_run(tmp_path / name))
    table = side_by_side(runs, ["m", "o"])
    r = rows(table)
    assert r["MR"] == ["70.00", "**72.00**"] and r["MTEB STS12"] == ["**61.50**", "—"]
    assert r["**downstream avg**"] == ["70.00 (1 task)", "**72.00** (1 task)"]
    assert r["**MTEB avg**"] == ["**61.50** (1 task)", "—"] and r["total time (s)"] == ["**3.00**", "—"]
    assert re.search(r"61\.50 over 1 task, 61\.50 over 1 task type", markdown_table(runs[0]))


# ---------------------------------------------------------------------------------------------
# Files this version writes: MTEB rows once, subsets marked and apart, settings in the label
# ---------------------------------------------------------------------------------------------
def written(tasks: dict[str, tuple[str, float]], subsets: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    """An MTEB section as this version's `sentkit evaluate --mteb` writes it: `tasks_requested`, each task's
    results `file`, and `local_copies` (those in `subsets` scored with --allow-subset, filed under the revision
    + _local_subset)."""
    out = section(tasks, tasks_requested=list(tasks), **extra)
    for n in tasks:
        rev = "r" + ("_local_subset" if n in subsets else "")
        out["tasks"][n]["file"] = f"mteb/results/sentkit__m/{rev}/{n}.json"
    out["local_copies"] = {n: {"path": f"/data/{n}", "subset": True, "revision": "r_local_subset"} for n in subsets}
    return out


def table_rows(table: str) -> list[str]:
    return [ln.split("|")[1].strip() for ln in table.splitlines() if ln.startswith("| ")]


def test_each_mteb_task_is_one_row_in_the_table_and_the_chart():
    a = run("a", {}, mteb=written({"STS12": ("STS", 50.0), "faq": ("Retrieval", 30.0)}))
    b = run("b", {}, mteb=written({"STS12": ("STS", 40.0)}))
    assert table_rows(side_by_side([a, b])).count("MTEB STS12") == 1
    assert table_rows(markdown_table(a)).count("MTEB STS12") == 1
    names, values = plot_data([a, b])
    assert names == ["MTEB STS12", "MTEB faq"] and values == [[50.0, 30.0], [40.0, None]]


def test_a_subset_score_is_marked_on_a_row_of_its_own_and_kept_out_of_the_averages():
    full = run("a", {}, mteb=written({"STS12": ("STS", 50.0), "STS13": ("STS", 70.0)}))
    part = run("b", {}, mteb=written({"STS12": ("STS", 90.0), "STS13": ("STS", 60.0)}, subsets=("STS12",)))
    table = side_by_side([full, part], ["a", "b"])
    r = rows(table)
    assert r["MTEB STS12"] == ["**50.00**", "—"] and r["MTEB STS12 (subset)"] == ["—", "**90.00**"]
    assert r["**MTEB avg**"] == ["60.00 (2 tasks)†", "60.00 (1 task)†"]  # b's average: STS13 alone
    assert any(ln.startswith("(subset): ") and "left out of the MTEB averages" in ln for ln in table.splitlines())
    names, values = plot_data([full, part])
    assert names == ["MTEB STS12", "MTEB STS12 (subset)", "MTEB STS13"]
    assert values[1] == [None, 90.0, 60.0]
    one = markdown_table(part)
    assert "| MTEB STS12 (subset) | 90.00 |" in one and "60.00 over 1 task," in one
    assert "(subset): " in one


def test_include_subsets_counts_them_in_the_averages_marked_not_comparable():
    full = run("a", {}, mteb=written({"STS12": ("STS", 50.0), "STS13": ("STS", 70.0)}))
    part = run("b", {}, mteb=written({"STS12": ("STS", 90.0), "STS13": ("STS", 60.0)}, subsets=("STS12",)))
    table = side_by_side([full, part], ["a", "b"], include_subsets=True)
    assert rows(table)["**MTEB avg**"] == ["60.00 (2 tasks)†", "75.00 (2 tasks)†"]
    assert "b lacks STS12; a lacks STS12 (subset)" in table or "a lacks STS12 (subset); b lacks STS12" in table
    assert "75.00 over 2 tasks" in markdown_table(part, include_subsets=True)


def test_the_printed_results_folders_are_where_mteb_wrote_the_files(tmp_path):
    part = run("b", {}, mteb=written({"STS12": ("STS", 90.0), "STS13": ("STS", 60.0)}, subsets=("STS12",)))
    text = markdown_table(part)
    line = next(ln for ln in text.splitlines() if ln.startswith("mteb's results files: "))
    assert "mteb/results/sentkit__m/r/" in line and "mteb/results/sentkit__m/r_local_subset/" in line
    # an end-to-end subset run: every folder the report names exists beside the results JSON
    files = [Path(t["file"]) for t in part["mteb"]["tasks"].values()]
    for f in files:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("{}")
    for folder in line.removeprefix("mteb's results files: ").split(" (")[0].split(", "):
        assert (tmp_path / folder).is_dir(), folder


def test_an_old_file_without_task_files_names_the_subset_revision_folder():
    part = run("b", {}, mteb=written({"STS12": ("STS", 90.0), "STS13": ("STS", 60.0)}, subsets=("STS12",)))
    for t in part["mteb"]["tasks"].values():
        del t["file"]
    text = markdown_table(part)
    assert "mteb/results/sentkit__m/r_local_subset/" in text and "mteb/results/sentkit__m/r/" in text


def test_model_settings_are_in_the_label_so_two_precisions_are_two_columns(tmp_path, capsys):
    runs = []
    for precision in ("fp32", "bf16"):
        r_ = run("all-minilm-l6-v2", {"MR": {"acc": 70.0 if precision == "fp32" else 69.0}})
        r_["model"]["settings"] = {"precision": precision, "pooling": "cls"}
        runs.append(r_)
    plain = run("all-minilm-l6-v2", {"MR": {"acc": 71.0}})
    table = side_by_side([*runs, plain])
    head = table.splitlines()[0]
    assert "all-minilm-l6-v2 [pooling=cls, fp32] (p)" in head and "all-minilm-l6-v2 [pooling=cls, bf16] (p)" in head
    assert "| all-minilm-l6-v2 (p) |" in head
    assert rows(table)["MR"] == ["70.00", "69.00", "**71.00**"]
    assert "`all-minilm-l6-v2` [pooling=cls, bf16]" in markdown_table(runs[1])
    paths = []
    for i, r_ in enumerate(runs):
        paths.append(tmp_path / f"{i}.json")
        paths[-1].write_text(json.dumps(r_))
    assert main(["report", *map(str, paths)]) == 0
    assert "[pooling=cls, bf16]" in capsys.readouterr().out


def test_a_subset_run_end_to_end_is_marked_and_names_the_folder_mteb_wrote(empty_hf_cache, tmp_path, capsys):
    """`sentkit evaluate --mteb STS12=<20-pair copy> --allow-subset`, then `sentkit report --detail`: the row is
    marked (subset), there is no MTEB average of full-data tasks, and every results folder the report prints is one
    mteb wrote (the revision + _local_subset)."""
    pytest.importorskip("mteb")
    from .test_mteb_trust import marked_model, sts_copy

    copy = sts_copy(tmp_path / "sts12", 40)
    model, _ = marked_model(tmp_path)
    out = tmp_path / "run" / "r.json"
    args = ["-q", "evaluate", "--model", model, "--mteb", f"STS12={copy}", "--allow-subset", "-o", str(out)]
    assert main([*args, "--no-cache"]) == 0
    capsys.readouterr()
    assert main(["report", str(out), "--detail"]) == 0
    text = capsys.readouterr().out
    assert "| MTEB STS12 (subset) |" in text and "MTEB average (mteb" not in text
    line = next(ln for ln in text.splitlines() if ln.startswith("mteb's results files: "))
    folders = line.removeprefix("mteb's results files: ").split(" (beside")[0].split(", ")
    assert folders and all(f.endswith("_local_subset/") for f in folders)
    for folder in folders:
        assert (out.parent / folder / "STS12.json").is_file(), folder
    capsys.readouterr()
    assert main(["report", str(out), "--detail", "--include-subsets"]) == 0  # the command line counts it on request
    assert "MTEB average (mteb" in capsys.readouterr().out

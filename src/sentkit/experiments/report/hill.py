"""The report's sections on Hill et al. (2016): the cells of the paper's models next to its Tables 3 and 4, the
paper's figures as cells (for the claims) and its Table 6's internal consistency beside this grid's."""

from __future__ import annotations

from sentkit.experiments import paper
from sentkit.experiments.grid import ExperimentSpec
from sentkit.experiments.report.scores import (
    SUPERVISED,
    UNSUPERVISED,
    alphas,
    consistency,
    score_means,
)
from sentkit.experiments.results import Runs, as_runs


def _hill_rows(all_results: Runs, spec: ExperimentSpec | None = None) -> dict[str, str]:
    """{cell: the Hill et al. table row it runs} for cells of the paper's models: the experiment
    file's cells (run or not), then any other cell of the results."""
    cells = [(c.name, c.method, c.settings) for c in spec.cells] if spec else []
    cells += [(r.cell, str(r.experiment.method), r.experiment.settings) for r in as_runs(all_results)]
    out: dict[str, str] = {}
    for cell, method, settings in cells:
        row = paper.hill_row(method, settings)
        if row is not None:
            out.setdefault(cell, row)
    return out


def paper_summary(
    all_results: Runs, spec: ExperimentSpec | None = None
) -> dict[str, dict[str, tuple[float, float, int]]]:
    """The paper's figures of each Hill et al. cell's row, as one-seed cells (for the claims)."""
    rows = _hill_rows(all_results, spec)
    return {c: {k: (v, 0.0, 1) for k, v in paper.hill_scores(row).items()} for c, row in rows.items()}


def hill_comparison(
    all_results: Runs, summary: dict[str, dict[str, tuple[float, float, int]]], spec: ExperimentSpec | None = None
) -> list[str]:
    """Markdown: cells of Hill et al.'s models next to every figure of the paper's Tables 3 and 4, then
    the paper's rows that no cell has results for (none when the grid has no Hill et al. model)."""
    if not _hill_rows(all_results, spec):
        return []
    rows = {c: r for c, r in _hill_rows(all_results).items() if c in summary}
    out = [
        "## Hill et al. (2016) models next to the paper",
        "",
        "Each cell: this run / the paper (`sentkit/experiments/paper.py`, checked against the paper's text). The "
        "paper trained on the Toronto Books Corpus (70m sentences, its section 2.4; 0.9B words, the label of its "
        "Table 3; the recurrent models for days on a GPU); these runs train on 209 Gutenberg books (~21M words) "
        "within about an hour of one CPU core. A cell "
        'whose input embeddings are fixed pre-trained vectors sits beside the paper\'s "+embs." row.',
        "",
    ]
    t3 = (*paper.HILL_TABLE3_KEYS, "avg:hill_table3")
    out += [
        "**Table 3** (supervised; accuracy, MSRP accuracy and F1). `avg` is the mean over the cohort, MSRP "
        "counted once as the mean of accuracy and F1.",
        "",
        "| cell | paper row | " + " | ".join(paper.HILL_TABLE3_COLUMNS) + " | avg |",
        "|" + "---|" * (2 + len(t3)),
    ]
    out += _paper_table(rows, summary, t3, set(paper.HILL_TABLE3))
    out += [
        "",
        "Rows with a cell of `—` have no results here (not run yet, or models this grid does not train: "
        "NMT and CaptionRep need parallel text or image features, C-PHRASE a parser).",
    ]
    t4 = (*paper.HILL_TABLE4_KEYS, "avg:hill_table4")
    out += [
        "",
        "**Table 4** (unsupervised; Spearman correlation of cosine similarity x 100). The paper's STS14 "
        "\"All\" is not the mean of its six subsets (CBOW's six average 61.5, its All is 64; SkipThought's "
        "39.5 and 27): it fits one correlation over all 3,750 pairs pooled, so ours is the suite's `concatenated` "
        "score (`STS14:pooled`), not SentEval's mean over subsets (the `STS14` column of *All scores*). The "
        "paper's SICK is train + test; ours is the SICK-R test set.",
        "",
        "| cell | paper row | " + " | ".join(paper.HILL_TABLE4_COLUMNS) + " | avg |",
        "|" + "---|" * (2 + len(t4)),
    ]
    out += _paper_table(rows, summary, t4, set(paper.HILL_TABLE4))
    return [*out, ""]


def _paper_table(
    rows: dict[str, str],
    summary: dict[str, dict[str, tuple[float, float, int]]],
    keys: tuple[str, ...],
    table: set[str],
) -> list[str]:
    lines = []
    for c, row in rows.items():
        p = paper.hill_scores(row) if row in table else {}
        lines.append(
            f"| {c} | {row} | " + " | ".join(f"{_num(summary[c].get(k))} / {_num(p.get(k))}" for k in keys) + " |"
        )
    for row in (r for r in paper.HILL_TABLE3 if r in table and r not in rows.values()):
        p = paper.hill_scores(row)
        lines.append(f"| — | {row} | " + " | ".join(f"— / {_num(p.get(k))}" for k in keys) + " |")
    return lines


def consistency_section(all_results: Runs, summary: dict[str, dict[str, tuple[float, float, int]]]) -> list[str]:
    """Markdown: Hill et al.'s Table 6 cohorts' Cronbach's alpha over this grid's Hill cells, beside
    the paper's figures and the same formula on the paper's Tables 3 and 4; then SentEval's wider cohorts."""
    means = score_means(summary)
    hill = {c: means[c] for c in _hill_rows(all_results) if c in means}
    ppr = {r: paper.hill_scores(r) for r in paper.HILL_TABLE3}
    both = (*paper.HILL_SUPERVISED, *paper.HILL_UNSUPERVISED)
    cohorts = [
        ("supervised: MSRP, MR, CR, SUBJ, MPQA, TREC", paper.HILL_SUPERVISED, (), "supervised"),
        ("unsupervised: STS14's six subsets, STS14 All, SICK", paper.HILL_UNSUPERVISED, (), "unsupervised"),
        ("all 14, correlations on their 0-1 scale", both, paper.HILL_UNSUPERVISED, "all"),
        ("all 14, every score in points", both, (), ""),
    ]
    out = [
        "## Internal consistency (Hill et al. 2016, Table 6)",
        "",
        f"Cronbach's alpha of Hill et al.'s task cohorts across the {len(hill)} cells that run one of the paper's "
        "models (higher: the tasks rank models alike), beside the paper's Table 6 and, as a check of the formula, "
        f"the same computation on the paper's own Tables 3 and 4 ({len(ppr)} rows). The paper's 0.81 for all 14 "
        "evaluations together is reproduced only with the correlations on their 0-1 scale next to accuracies "
        "in %, which is what that row does; the paper does not say how it scaled them.",
        "",
        "| cohort | this grid | paper (Table 6) | paper's Tables 3-4 recomputed |",
        "|---|---|---|---|",
    ]
    for label, cohort, rescale, key in cohorts:
        ours, theirs = alphas(hill, cohort, rescale).get("all"), alphas(ppr, cohort, rescale).get("all")
        out.append(f"| {label} | {_num(ours, 2)} | {_num(paper.HILL_ALPHA.get(key), 2)} | {_num(theirs, 2)} |")
    out += [
        "",
        "With one task left out of its cohort (the paper's consistency rank in brackets, 1 = most "
        "consistent with the other evaluations):",
        "",
        "| left out | this grid | paper (Table 6) | paper's Tables 3-4 recomputed |",
        "|---|---|---|---|",
    ]
    for cohort in (paper.HILL_SUPERVISED, paper.HILL_UNSUPERVISED):
        left, left_paper = alphas(hill, cohort), alphas(ppr, cohort)
        for t in cohort:
            a, rank = paper.HILL_ALPHA_WITHOUT[t]
            out.append(
                f"| {paper.HILL_LABELS[t]} (`{t}`) | {_num(left.get(f'without {t}'), 2)} | {a:.2f} ({rank}) | "
                f"{_num(left_paper.get(f'without {t}'), 2)} |"
            )
    out += ["", f"SentEval's wider cohorts (not the paper's), across all {len(summary)} cells:", ""]
    for label, cohort in (("supervised", SUPERVISED), ("unsupervised", UNSUPERVISED)):
        alpha = consistency(summary, cohort)
        if alpha:
            out.append(
                f"- {label} ({', '.join(k.split(' ', 1)[1] for k in alpha if k != 'all')}): Cronbach's alpha "
                f"{alpha['all']:.3f}; leaving one task out: "
                + ", ".join(f"{k.split(' ', 1)[1]} {v:.3f}" for k, v in alpha.items() if k != "all")
            )
        else:
            out.append(f"- {label}: needs at least two cells and two tasks")
    return [*out, ""]


def _num(v: tuple[float, float, int] | float | None, digits: int = 1) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "—"
    return f"{v[0] if isinstance(v, tuple) else v:.{digits}f}"

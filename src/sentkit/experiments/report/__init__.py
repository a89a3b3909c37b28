"""Regenerate a results report (Markdown + PNG charts) from an experiment's results files.

The report is made by job, one module each: `scores` (every score of a results file, the cohorts, the summary over
seeds, Cronbach's alpha), `costs` (wall-clock, CPU, the training CPU of a chain of cells), `tables` (headline,
best versions, all scores, probing, length bins, MTEB, diagnostics), `hill` (Hill et al. 2016's tables and
consistency), `scaling` (quality against compute), `charts` and `document` (a report as a whole). The names
below are importable from here as from their modules."""

from sentkit.experiments.report.costs import (
                                              Cost,
                                              cell_costs,
                                              cell_cpu,
                                              chain_costs,
                                              chain_train_cpu,
                                              cost_section,
                                              cost_totals,
                                              recipe_phase_cpu,
                                              train_seconds,
)
from sentkit.experiments.report.document import report_lines, write_report, write_reports
from sentkit.experiments.report.hill import consistency_section, hill_comparison, paper_summary
from sentkit.experiments.report.scaling import (
                                              SCALING_SCORES,
                                              Point,
                                              crossing,
                                              curve_points,
                                              scaling_section,
)
from sentkit.experiments.report.scores import (
                                              AVERAGE_HELP,
                                              AVERAGES,
                                              CHART_AVERAGES,
                                              PROBING,
                                              STS,
                                              SUPERVISED,
                                              UNSUPERVISED,
                                              Summary,
                                              alphas,
                                              cell_scores,
                                              consistency,
                                              cronbach_alpha,
                                              fixed_cells,
                                              summarise,
                                              unsupervised_scores,
)
from sentkit.experiments.report.tables import (
                                              BEST_OF,
                                              all_scores_section,
                                              best_versions,
                                              best_versions_table,
                                              collect_status,
                                              diagnostics_section,
                                              headline_table,
                                              length_section,
                                              mteb_section,
                                              probing_section,
                                              row_claim,
)

__all__ = ["AVERAGES", "AVERAGE_HELP", "BEST_OF", "CHART_AVERAGES", "PROBING", "SCALING_SCORES", "STS", "SUPERVISED",
           "UNSUPERVISED", "Cost", "Point", "Summary", "all_scores_section", "alphas", "best_versions",
           "best_versions_table", "cell_costs", "cell_cpu", "cell_scores", "chain_costs", "chain_train_cpu",
           "collect_status", "consistency", "consistency_section", "cost_section", "cost_totals", "cronbach_alpha",
           "crossing", "curve_points", "diagnostics_section", "fixed_cells", "headline_table", "hill_comparison",
           "length_section", "mteb_section", "paper_summary", "probing_section", "recipe_phase_cpu", "report_lines",
           "row_claim", "scaling_section", "summarise", "train_seconds", "unsupervised_scores", "write_report",
           "write_reports"]

"""Probing room: SentEval's ten probing tasks (Conneau et al. 2018) built from any corpus.

- :mod:`~sentkit.data.probing.parse`: the spaCy parse of a corpus's 5-28-token sentences, cached
  on disk in atomic shards (the slow part; resumable, checked against the corpus).
- :mod:`~sentkit.data.probing.analysis`: pure functions reading one parsed sentence (tense of the
  main clause, subject / object number, tree depth and top constituents of a Penn-Treebank-style
  tree projected from the dependency parse, the two coordinated clauses, the sentence filters).
- :mod:`~sentkit.data.probing.tasks`: one builder per task (a registry), each taking the analysed
  sentences, the corpus counts and a seeded Generator.
- :mod:`~sentkit.data.probing.build`: ``build_probing(corpus, out, ...)``, writing SentEval's
  probing files and a manifest; ``sentkit data build-probing`` is its command line.
- :mod:`~sentkit.data.probing.files`: the tasks' names, aliases and SentEval file names (which the
  evaluation room's task registry reads too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sentkit.core.lazy import lazy_exports

if TYPE_CHECKING:
    from sentkit.data.probing.build import BuildSettings, build_probing

__getattr__ = lazy_exports(__name__, {"BuildSettings": "build", "build_probing": "build"})

__all__ = ["BuildSettings", "build_probing"]

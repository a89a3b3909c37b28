"""One (cell, seed) of an experiment grid, run: its run folder (``<output>/<cell>/seed-<s>``, holding in
cell.json the cell as declared when the run started; refused, with the fix, once the experiment file
declares other settings), its model trained or resumed (``"@cell[/folder]"`` settings resolved to
other cells' model folders) or loaded as it is, then evaluated (its SentEval tasks, then its MTEB
tasks), and the results JSON that records what ran and what it cost, written to the run folder and
published to the committed `results` folder. The grid driver, which plans the runs, skips the
finished ones and retrains missing bases, is :mod:`sentkit.experiments.runner`."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentkit.core.config import ConfigError, from_dict
from sentkit.core.io import atomic_write_text
from sentkit.core.methods import get_method, read_marker
from sentkit.experiments.grid import CellSpec, ExperimentSpec
from sentkit.experiments.kinds import AsIs
from sentkit.experiments.refs import CellRef

log = logging.getLogger(__name__)

RESULTS = "results.json"

CELL = "cell.json"  # the cell as declared when its run started: a run of other settings is never taken as this one


@dataclass
class CellRun:
    cell: CellSpec
    seed: int
    folder: Path

    @property
    def results_path(self) -> Path:
        return self.folder / RESULTS

    @property
    def done(self) -> bool:
        return self.results_path.is_file()

    def published_path(self, spec: ExperimentSpec) -> Path | None:
        """Where the committed copy of this run's results lives (None without `results`)."""
        return None if spec.results is None else Path(spec.results) / self.cell.name / f"seed-{self.seed}.json"


def _ref(ref: CellRef | str) -> CellRef:
    parsed = CellRef.parse(ref) if isinstance(ref, str) else ref
    if parsed is None:
        raise ConfigError(f'{ref!r} is not a reference to a cell ("@cell" or "@cell/folder")')
    return parsed


def ref_run(spec: ExperimentSpec, ref: CellRef | str, seed: int) -> CellRun:
    """The run a setting ``"@cell[/folder]"`` of a run with `seed` names: that cell's run with the same seed, or
    its first seed when it has only others."""
    ref = _ref(ref)
    cell = next((c for c in spec.cells if c.name == ref.cell), None)
    if cell is None:
        raise ConfigError(f"setting {str(ref)!r} names no cell of experiment {spec.name!r}")
    seeds = spec.cell_seeds(cell)
    s = seed if seed in seeds else seeds[0]
    return CellRun(cell, s, Path(spec.output) / ref.cell / f"seed-{s}")


def model_of(spec: ExperimentSpec, ref: CellRef | str, seed: int) -> Path:
    """The trained model folder a setting ``"@cell"`` names: that cell's run with the same seed, or
    its first seed when it has only others (a base trained once, continued with several seeds).
    ``"@cell/sub/folder"`` names a folder inside it (a phase of the raw-text recipe: ``"@recipe/1-base"``)."""
    ref = _ref(ref)
    base = ref_run(spec, ref, seed)
    s, path = base.seed, base.folder / "model"
    if ref.sub is not None:  # a folder inside the run: a finished phase, or a snapshot saved while the run goes on
        if read_marker(path / ref.sub) is None:
            raise ConfigError(
                f"{ref} (seed {s}): {path / ref.sub} is not a model folder (yet): run cell {ref.cell!r} "
                f"(its phase or step {ref.sub.as_posix()!r}) first"
            )
        return path / ref.sub
    if read_marker(path) is None:
        raise ConfigError(f"{ref} (seed {s}) has no trained model yet at {path}: run cell {ref.cell!r} first")
    return path


def resolve_settings(spec: ExperimentSpec, run: CellRun) -> dict[str, Any]:
    """The cell's settings with every ``"@cell"`` value replaced by that cell's model folder."""
    refs = run.cell.refs
    return {k: str(model_of(spec, refs[k], run.seed)) if k in refs else v for k, v in run.cell.settings.items()}


def train_model(run: CellRun, spec: ExperimentSpec) -> tuple[Any, float, bool]:
    """Train (or resume) the cell's model; returns (encoder, training seconds, whether an earlier process
    trained it)."""
    import sentkit
    from sentkit.training.checkpoint import has_checkpoint

    settings = resolve_settings(spec, run)
    kind = run.cell.kind
    if isinstance(kind, AsIs):  # evaluated as it is: nothing to train
        return kind.load(settings), 0.0, False
    method = get_method(run.cell.method)
    out = run.folder / "model"
    if out.is_dir() and read_marker(out) is not None:  # methods write sentkit.json last
        log.info("%s seed %d: model already trained", run.cell.name, run.seed)
        model = sentkit.load(str(out))
        # re-evaluated only: keep the training time the model logged (0 when it logged none); its CPU
        # time was not measured by this process (run_cell records it as unknown)
        return model, logged_train_seconds(out, model), True
    data: dict[str, Any] = {"seed": run.seed, "out": str(out), **settings}
    if spec.corpus is not None:
        data.setdefault("corpus", spec.corpus)
    if has_checkpoint(out):
        data["resume"] = True
    cfg: Any = from_dict(method.config_cls, data, where=f"cell {run.cell.name}")
    t = time.perf_counter()
    path = method.train(cfg)
    seconds = time.perf_counter() - t
    # a resumed run: add the loop time its earlier processes spent on the steps the model kept
    from sentkit.training.metrics import training_history

    seconds += training_history(path).get("earlier_s", 0.0)
    return sentkit.load(str(path)), seconds, False


def logged_train_seconds(out: Path, model: Any) -> float:
    """The training seconds a finished model folder logged: a Hill et al. model's `train_stats_`, a
    transformer's `train_loop_seconds` (with the seconds of processes it resumed from); 0 if none."""
    stats = getattr(model, "train_stats_", None) or {}
    if "seconds" in stats:
        return float(stats["seconds"])
    marker = read_marker(out) or {}
    return float(marker.get("train_loop_seconds", 0.0)) + float(marker.get("resumed_seconds", 0.0) or 0.0)


def training_cpu(model: Path, this_process: float | None) -> float | None:
    """The one CPU cost of a cell's training: the CPU seconds of every process that trained the model, a
    resumed run's earlier processes included. A recipe of phases records it in its `sentkit.json`
    (``cpu_seconds``: its phases, each across the processes that ran it); any other run is this process's
    CPU plus the training loop's CPU in the processes it resumed from (``resumed_cpu_seconds``); None when
    an earlier process trained the model (`this_process` None) and it recorded no CPU time."""
    marker = read_marker(model) or {}
    if "cpu_seconds" in marker:
        return round(float(marker["cpu_seconds"]), 1)
    if this_process is None:
        return None
    return round(this_process + float(marker.get("resumed_cpu_seconds", 0.0) or 0.0), 1)


TRAINED_EARLIER = "trained_earlier"


def cache_key(spec: ExperimentSpec, run: CellRun, encoder: Any) -> str:
    """Embedding-cache key of a run: readable (experiment/cell/seed) and tied to the model itself
    (its content digest when it has one, else a digest of the cell's settings), so a retrained
    or re-configured cell never reads the embeddings of an earlier model."""
    from sentkit.core.identity import config_id, fingerprint

    # a transformer's fingerprint covers its weight files (size, mtime): a cell retrained with the
    # same settings gets a new key (the cache's spot check caught the old key's stale shards)
    fp = fingerprint(encoder, run.cell.name)
    if fp is None:
        fp = config_id(run.cell.settings)
    return f"{spec.name}/{run.cell.name}/seed-{run.seed}/{fp}"


def whole_cache_key(spec: ExperimentSpec, run: CellRun, encoder: Any) -> str | None:
    """The cache key of the whole vectors a cut or quantized model is made from (sentkit.evaluation.runner.store_plan):
    a cell scoring another cell's model (``"@cell"``), or the model a `pretrained` cell scores whole (`_uncut_run`),
    reads that cell's own cache, so that its widths and codes are scored without encoding again; None for a model
    whose vectors are its own, or whose whole vectors have no fingerprint (the cell's own key then holds them)."""
    from sentkit.core.identity import fingerprint
    from sentkit.core.interface import whole_vectors

    whole = whole_vectors(encoder)
    if whole is None:
        return None
    ref = run.cell.refs.get("model")
    base = ref_run(spec, ref, run.seed) if ref is not None and ref.sub is None else _uncut_run(spec, run)
    if fingerprint(whole.encoder, base.cell.name) is None:  # keyed by settings alone: another precision would share
        return None
    return cache_key(spec, base, whole.encoder)


CUT_SETTINGS = ("dim", "truncate_dim", "quantize", "calibration", "rescore", "rescore_multiplier")


def _uncut_run(spec: ExperimentSpec, run: CellRun) -> CellRun:
    """The run of another `pretrained` cell of `spec` that scores the same model as `run` whole (its settings but the
    cut and the codes, the same seed), whose cache `run`'s whole vectors are: `run` itself when there is none."""
    if run.cell.kind.trains:
        return run
    own = {k: v for k, v in run.cell.settings.items() if k not in CUT_SETTINGS}
    for cell in spec.cells:
        same = cell.name != run.cell.name and not cell.kind.trains and cell.settings == own
        if same and run.seed in spec.cell_seeds(cell):
            return ref_run(spec, f"@{cell.name}", run.seed)
    return run


def declared(run: CellRun) -> dict[str, Any]:
    """The (cell, seed, method, settings) a run folder must hold, as JSON writes them."""
    return {
        "cell": run.cell.name,
        "seed": run.seed,
        "method": run.cell.method,
        "settings": json.loads(json.dumps(run.cell.settings, default=str)),
    }


def ran(res: dict[str, Any]) -> dict[str, Any]:
    """The (cell, seed, method, settings) a results file says it ran."""
    exp = res.get("experiment") or {}
    return {k: exp.get(k) for k in ("cell", "seed", "method", "settings")}


def check_same_cell(run: CellRun) -> None:
    """Refuse a run folder that holds a run of other settings (the experiment file was edited since):
    its model or results would otherwise be taken for the cell as now declared."""
    recorded: dict[str, Any] | None = None
    path = run.folder / CELL
    if path.is_file():
        try:
            recorded = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise ConfigError(f"{path}: unreadable ({e}); delete it to run cell {run.cell.name!r} again") from e
    elif run.done:
        try:
            recorded = ran(json.loads(run.results_path.read_text()))
        except (OSError, ValueError, AttributeError) as e:
            raise ConfigError(
                f"{run.results_path}: not a results file ({e}); delete it to evaluate the cell again"
            ) from e
    want = declared(run)
    if recorded is None or recorded == want:
        return
    changed = [k for k in ("cell", "seed", "method") if recorded.get(k) != want[k]]
    old, new = recorded.get("settings") or {}, want["settings"]
    changed += [
        f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)
    ]
    raise ConfigError(
        f"{run.folder} holds a run of cell {run.cell.name!r} seed {run.seed} with other settings "
        f"({'; '.join(changed)}); move that folder away (or delete it) to run the cell as the "
        f"experiment file declares it now"
    )


def claim_folder(run: CellRun) -> None:
    """Create the run folder and record the cell it holds (check_same_cell reads it)."""
    run.folder.mkdir(parents=True, exist_ok=True)
    if not (run.folder / CELL).is_file():
        atomic_write_text(run.folder / CELL, json.dumps(declared(run), indent=2) + "\n")


def run_cell(run: CellRun, spec: ExperimentSpec, *, retrained: list[str] | None = None) -> dict[str, Any]:
    import sentkit

    claim_folder(run)
    mteb_tasks = _mteb_tasks(spec, run)  # names and task files checked before any training
    cpu0 = time.process_time()
    encoder, train_s, earlier = train_model(run, spec)
    cpu1 = time.process_time()
    fingerprint = cache_key(spec, run, encoder)
    whole = whole_cache_key(spec, run, encoder)
    res = sentkit.evaluate(
        encoder,
        tasks=spec.tasks,
        preset=spec.preset,
        data_dir=spec.data_dir,
        fingerprint=fingerprint,
        whole_fingerprint=whole,
        model_name=run.cell.name,
        **spec.eval_settings,
    )
    if mteb_tasks:
        res["mteb"] = _run_mteb(encoder, mteb_tasks, res, run, fingerprint, whole)
    # CPU seconds (all threads): what a run costs whatever else shares the machine; training across every process
    # of a resumed run (training_cpu). A model trained by an earlier process: unknown unless its folder recorded it.
    train_cpu = training_cpu(run.folder / "model", None if earlier else cpu1 - cpu0)
    cpu = {"train": train_cpu, "evaluate": round(time.process_time() - cpu1, 1)}
    res["experiment"] = {
        "name": spec.name,
        "cell": run.cell.name,
        "method": run.cell.method,
        "group": run.cell.group,
        "seed": run.seed,
        "settings": run.cell.settings,
        "train_seconds": round(train_s, 1),
        "train_seconds_across_resumes": True,
        "cpu_seconds": cpu,
    }
    if earlier:
        res["experiment"][TRAINED_EARLIER] = True
    if retrained:  # bases whose folders were gone (a fresh clone): trained again for this cell
        res["experiment"]["retrained_bases"] = retrained
    recipe = recipe_record(run.folder / "model")
    if recipe is not None:  # a recipe of phases (raw-text): each phase's settings and CPU seconds, committed with it
        res["experiment"]["recipe"] = recipe
    snap = snapshot_record(spec, run)
    if snap is not None:  # a model saved part-way through a run (`snapshots`): its step and the CPU it had cost
        res["experiment"]["snapshot"] = snap
    atomic_write_text(run.results_path, _dump(res))
    publish(run, spec, res)
    return res


def recipe_record(model: Path) -> dict[str, Any] | None:
    """The `recipe.json` a recipe of phases wrote in its model folder (the raw-text recipe), or None."""
    from sentkit.training.raw_text import RECIPE_FILE

    path = model / RECIPE_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def snapshot_record(spec: ExperimentSpec, run: CellRun) -> dict[str, Any] | None:
    """A `pretrained` cell evaluating a snapshot of another cell's run (``"@cell/snapshots/step-N"``): the step,
    the run's length and the CPU seconds the run had spent to that step (from the snapshot's sentkit.json)."""
    ref = run.cell.refs.get("model")
    if run.cell.kind.trains or ref is None:
        return None
    marker = read_marker(model_of(spec, ref, run.seed)) or {}
    return marker.get("snapshot")


def _mteb_tasks(spec: ExperimentSpec, run: CellRun) -> list[Any]:
    names = spec.cell_mteb(run.cell)
    if not names:
        return []
    from sentkit.evaluation import mteb_adapter

    return mteb_adapter.resolve_tasks(names)


def _run_mteb(
    encoder: Any, tasks: list[Any], res: dict[str, Any], run: CellRun, fingerprint: str, whole: str | None
) -> dict[str, Any]:
    """The cell's MTEB tasks through mteb, with the encode batch size and embedding cache of its SentEval run;
    mteb's results files in the run folder, under mteb/."""
    from sentkit.evaluation import mteb_adapter

    cfg = res["config"]
    return mteb_adapter.run(
        encoder,
        tasks,
        output_dir=run.folder / mteb_adapter.RESULTS_FOLDER,
        model_name=run.cell.name,
        fingerprint=fingerprint,
        whole_fingerprint=whole,
        batch_size=cfg["encode_batch_size"],
        cache_dir=cfg["cache_dir"],
        use_cache=cfg["use_cache"],
        results_root=run.folder,
    )


def _dump(res: dict[str, Any]) -> str:
    return json.dumps(res, indent=2, default=str) + "\n"


def publish(run: CellRun, spec: ExperimentSpec, res: dict[str, Any]) -> str:
    """Write `res` to the run's committed copy; returns "published", "unchanged" or "" (no `results`)."""
    dest = run.published_path(spec)
    if dest is None:
        return ""
    text = _dump(res)
    if dest.is_file() and dest.read_text() == text:
        return "unchanged"
    dest.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(dest, text)
    return "published"

"""Check sentkit on this machine's GPU(s) in one command (`bash scripts/gpu_check.sh`; a few minutes
on one GPU, one more check with two or more).

1. precision: the same DeCLUTR steps (dropout off, same start) in fp32, bf16 and fp16: the first
   step's loss (same weights, same batch) and the mean loss of the last quarter of the steps,
   compared at equal numbers of applied optimizer steps (a step that fp16's loss scaler skips
   applies nothing, so the fp16 run lags fp32 by the steps it skipped); the skipped steps and the
   scaler's final scale are reported;
2. resume: 2k steps straight, the same again, and k steps + --resume + k steps, dropout on, the
   default precision, deterministic kernels: the final weights bit for bit;
3. gradient caching with dropout on CUDA generators: the cached step against one graph over the
   same micro-batches and dropout seeds, and against the step without dropout (which must differ);
4. throughput: `encode` tokens/s and the bf16 training step's tokens/s, each as a share of the
   matmul rate of the same GPU measured in the same run with a plain square matmul (2 FLOPs per
   non-embedding parameter per token forward, 6 with backward); below the floor (`Sizes`) the
   check fails;
5. 2 processes: a run killed with kill -9 after a checkpoint and resumed, against the same run
   straight (NCCL with 2+ GPUs; gloo with --cpu; skipped with one GPU).

Nothing here needs pytest or the tests/ tree (scripts/check_support.py holds what they share).
Every check builds what it needs (corpus, models, token store, made once and shared) inside its
own guard: a check that crashes is a failed check and the others still run. Results: a table on
stdout and `OUT/gpu_check.json`, rewritten after every check (a run cut short keeps what it did);
OUT is --out, else $OUT when set, else <temp>/sentkit-gpu-check: never inside the repository
unless asked. The runs' folders are made under OUT and removed at the end (--keep keeps them), also
after an error, Ctrl-C or SIGTERM.

Exit status; each failure before the checks is one line on stderr:
  0  every check passed (or was skipped)
  1  a check failed (the table and gpu_check.json say which and why)
  2  a bad command line
  3  no GPU: no NVIDIA GPU here, or one that this CUDA build of torch cannot use
  4  no Python environment (.venv missing: scripts/gpu_check.sh says so)
  5  a package it needs is missing (torch, transformers, sentkit's dependencies)
  6  torch is a CPU-only build on a machine with an NVIDIA GPU: install a CUDA build
`--cpu` runs every check that can run on a CPU with a tiny model and a few steps: it is how the
test suite checks this script where there is no GPU.
"""

from __future__ import annotations

import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS (check 2); before CUDA starts

import argparse
import contextlib
import json
import math
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

PASSED, FAILED, USAGE, NO_GPU, NO_ENV, MISSING, CPU_TORCH = 0, 1, 2, 3, 4, 5, 6
CUDA_SETUP = "SENTKIT_TORCH_INDEX=https://download.pytorch.org/whl/cu128 bash scripts/setup.sh"
NAMES = {
    "precision": "precision: bf16 and fp16 losses against fp32",
    "resume": "resume bit for bit (dropout on)",
    "grad_cache": "gradient caching with dropout replay",
    "throughput": "throughput: encode and the training step",
    "two_procs": "2 processes: kill -9 and resume",
}


# ----------------------------------------------------------------------------- before any check
def nvidia_gpus() -> list[str]:
    """Names of the NVIDIA GPUs this machine has, whatever torch can use: `nvidia-smi -L`, else the
    driver's /proc/driver/nvidia/gpus; [] when neither shows one."""
    try:
        res = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        names = [line.split(":", 1)[1].split("(UUID")[0].strip() for line in res.stdout.splitlines()
                 if line.startswith("GPU ") and ":" in line]
        if res.returncode == 0 and names:
            return names
    except (OSError, subprocess.SubprocessError):
        pass
    gpus = Path("/proc/driver/nvidia/gpus")
    found = []
    for info in sorted(gpus.glob("*/information")) if gpus.is_dir() else []:
        model = [line.split(":", 1)[1].strip() for line in info.read_text(errors="replace").splitlines()
                 if line.startswith("Model:")]
        found.append(model[0] if model else info.parent.name)
    return found


def preflight(cpu: bool) -> tuple[int, str] | None:
    """(exit status, one line) when the checks cannot run here, else None."""
    try:
        import torch
    except ImportError as e:
        return MISSING, (f"torch is not installed for {sys.executable} ({e}); install it with `{CUDA_SETUP}` "
                         "(or plain `bash scripts/setup.sh` for the CPU build)")
    for module in ("numpy", "transformers", "tokenizers", "sentkit.training.loop"):
        try:
            __import__(module)
        except ImportError as e:
            return MISSING, f"{module.split('.')[0]} cannot be imported ({e}); install sentkit with `bash scripts/setup.sh`"
    if cpu:
        return None
    gpus = nvidia_gpus()
    if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
        if gpus:
            return CPU_TORCH, (f"torch {torch.__version__} is a CPU-only build, but this machine has an NVIDIA GPU "
                               f"({', '.join(sorted(set(gpus)))}); install a CUDA build of torch: `{CUDA_SETUP}`")
        return NO_GPU, (f"no GPU: no NVIDIA GPU here (nvidia-smi, /proc/driver/nvidia) and torch {torch.__version__} "
                        "is a CPU-only build; run it on a machine with a GPU (or --cpu to try the script itself)")
    if not torch.cuda.is_available():
        why = (f"the machine has {', '.join(sorted(set(gpus)))}: check the driver against CUDA {torch.version.cuda} "
               f"and CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')}") if gpus else \
            "no NVIDIA GPU here (nvidia-smi, /proc/driver/nvidia)"
        return NO_GPU, (f"no GPU: no CUDA GPU is visible to torch {torch.__version__} (CUDA build "
                        f"{torch.version.cuda or torch.version.hip}); {why}; run it on a machine with a GPU (or --cpu "
                        "to try the script itself)")
    return None


def default_out(env: Mapping[str, str] = os.environ) -> Path:
    """$OUT when set (the folder a remote run brings back), else <temp>/sentkit-gpu-check."""
    return Path(env["OUT"]) if env.get("OUT") else Path(tempfile.gettempdir()) / "sentkit-gpu-check"


# ----------------------------------------------------------------------------- setting up
class Sizes:
    """Model, corpus, step counts and throughput floors: BERT-base size on a GPU, a tiny BERT on the CPU.

    The floors are shares of the matmul rate measured in the same run below which the throughput
    check fails: set to catch a broken path (a step that runs on the CPU, synchronises per
    operation or recompiles every time), not to rank GPUs. Raise them once a GPU run's figures
    are in docs/benchmarks.md."""

    def __init__(self, cpu: bool, steps: int | None) -> None:
        self.cpu = cpu
        self.device = "cpu" if cpu else "cuda"
        self.hidden, self.layers, self.heads = (32, 2, 2) if cpu else (768, 12, 12)
        self.steps = steps or (4 if cpu else 20)  # even: the resume check cuts at half
        self.docs, self.words = (8, 300) if cpu else (128, 1500)
        self.batch = 4 if cpu else 16
        self.spans = (8, 32) if cpu else (32, 128)
        self.sentences = 300 if cpu else 20000
        self.matmul = 1024 if cpu else 8192
        # measured on the project's 2-core CPU (tiny model): encode 0.10-0.15, train step 0.010-0.015
        self.floors = {"encode": 0.01, "train": 0.001} if cpu else {"encode": 0.02, "train": 0.005}


class Workspace:
    """The corpus, models and token store the checks share, made on first use inside the check that
    needs them (a failure to make one is that check's failure, and is not retried by the next)."""

    def __init__(self, root: Path, sizes: Sizes) -> None:
        self.root, self.sizes = root, sizes
        self._made: dict[str, Any] = {}

    def _once(self, name: str, make: Callable[[], Any]) -> Any:
        if name not in self._made:
            try:
                self._made[name] = make()
            except Exception as e:
                self._made[name] = e
                raise
        value = self._made[name]
        if isinstance(value, Exception):
            raise RuntimeError(f"the {name} could not be made ({type(value).__name__}: {value})")
        return value

    @property
    def corpus(self) -> Path:
        from check_support import write_corpus

        return self._once("corpus", lambda: write_corpus(self.root / "corpus", self.sizes.docs, self.sizes.words))

    def model(self, dropout: float) -> Path:
        from check_support import bert_mlm

        s = self.sizes
        name = "model-dropout" if dropout else "model"
        return self._once(name, lambda: bert_mlm(self.root / name, hidden=s.hidden, layers=s.layers, heads=s.heads,
                                                 intermediate=4 * s.hidden, max_positions=512, dropout=dropout))

    @property
    def store(self) -> Path:
        """The corpus prepared for DeCLUTR (what every training run here shares, `prepared_dir`)."""
        def make() -> Path:
            from sentkit.training.loop import train
            from sentkit.training.recipes.declutr import Declutr

            train(self.config(self.root / "prepare", self.model(0.0)), Declutr, prepare_only=True)
            shutil.rmtree(self.root / "prepare", ignore_errors=True)
            return self.root / "store"

        return self._once("token store", make)  # type: ignore[no-any-return]

    def config(self, out: Path, model: Path, **kw: Any) -> Any:
        from sentkit.training.recipes.declutr import DeclutrConfig

        s = self.sizes
        base: dict[str, Any] = dict(corpus=str(self.corpus), out=str(out), model=str(model), max_steps=s.steps,
                                    batch_size=s.batch, min_span_len=s.spans[0], max_span_len=s.spans[1],
                                    checkpoint_every=s.steps // 2, log_every=1, progress=False, lr=1e-4,
                                    device=s.device, prepared_dir=str(self.root / "store"))
        return DeclutrConfig(**{**base, **kw})


def weights(out: Path) -> dict[str, Any]:
    import torch

    return torch.load(out / "checkpoint" / "state.pt", map_location="cpu", weights_only=False)["model"]  # type: ignore[no-any-return]


def max_diff(a: dict[str, Any], b: dict[str, Any]) -> float:
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


def steady_rate(rows: list[dict[str, Any]]) -> float:
    """Tokens/s over the second half of a run's steps (the first steps warm the GPU up)."""
    a, b = rows[len(rows) // 2], rows[-1]
    done = {k: float(r["tokens_per_s"]) * float(r["elapsed_s"]) for k, r in (("a", a), ("b", b))}
    span = float(b["elapsed_s"]) - float(a["elapsed_s"])
    return (done["b"] - done["a"]) / span if span > 0 else float(b["tokens_per_s"])


def losses_by_applied(rows: list[dict[str, Any]]) -> dict[int, float]:
    """{optimizer steps applied before a step: that step's loss}, from a run's metrics (one row per
    step). A step whose gradients the fp16 loss scaler found not finite applies nothing (its
    grad_norm is inf or nan), so the step after it starts from the same count: the first is kept."""
    out: dict[int, float] = {}
    applied = 0
    for r in rows:
        out.setdefault(applied, float(r["loss"]))
        applied += math.isfinite(float(r["grad_norm"]))
    return out


def compare_at_applied(ref: list[dict[str, Any]], got: list[dict[str, Any]]) -> dict[str, Any]:
    """`got`'s losses against `ref`'s at equal numbers of applied optimizer steps: the first step
    (no step applied: same weights, same batch) and the mean of the last quarter of the counts both
    runs reached (a mean: at equal counts a run that skipped steps sees other batches)."""
    a, b = losses_by_applied(ref), losses_by_applied(got)
    common = sorted(set(a) & set(b))
    tail = common[-max(1, len(common) // 4):]
    mean_a, mean_b = (sum(x[k] for k in tail) / len(tail) for x in (a, b))
    return {"skipped steps": sum(not math.isfinite(float(r["grad_norm"])) for r in got),
            "first step rel. diff": round(abs(b[0] - a[0]) / abs(a[0]), 5),
            "last steps compared (applied steps before them)": f"{tail[0]}-{tail[-1]}",
            "last steps rel. diff": round(abs(mean_b - mean_a) / abs(mean_a), 5), "applied": common[-1]}


@contextlib.contextmanager
def deterministic() -> Iterator[None]:
    """Kernels that give the same bits on every run: the math attention kernel, deterministic
    algorithms (cuBLAS workspace set at start-up)."""
    import torch

    flags = (torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.mem_efficient_sdp_enabled())
    torch.backends.cuda.enable_flash_sdp(False)
    torch.backends.cuda.enable_mem_efficient_sdp(False)
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(False)
        torch.backends.cuda.enable_flash_sdp(flags[0])
        torch.backends.cuda.enable_mem_efficient_sdp(flags[1])


def matmul_rate(dtype: Any, device: str, size: int) -> float:
    """Measured FLOP/s of one square matmul of `dtype`."""
    import torch

    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    reps = 20
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync()
    return 2 * size**3 * reps / (time.perf_counter() - t)


# ----------------------------------------------------------------------------- the checks
def check_precision(ws: Workspace) -> dict[str, Any]:
    import torch

    from sentkit.training.loop import train
    from sentkit.training.metrics import read_metrics
    from sentkit.training.recipes.declutr import Declutr

    steps = ws.sizes.steps
    rows = {}
    for prec in ("fp32", "bf16", "fp16"):
        out = ws.root / f"precision-{prec}"
        train(ws.config(out, ws.model(0.0), precision=prec, checkpoint_every=steps), Declutr)
        rows[prec] = read_metrics(out / "metrics.csv")
    scale = torch.load(ws.root / "precision-fp16" / "checkpoint" / "state.pt", weights_only=False)["scaler"]["scale"]
    detail: dict[str, Any] = {"fp32 losses": [round(float(r["loss"]), 4) for r in rows["fp32"]]}
    ok = all(math.isfinite(float(r["loss"])) for rs in rows.values() for r in rs)
    for prec, (first_tol, last_tol) in {"bf16": (0.02, 0.10), "fp16": (0.005, 0.10)}.items():
        cmp = compare_at_applied(rows["fp32"], rows[prec])
        applied = cmp.pop("applied")
        detail[prec] = {"losses": [round(float(r["loss"]), 4) for r in rows[prec]], **cmp}
        if prec == "fp16":
            detail[prec]["loss scale at the end"] = scale
        if applied < steps // 2:  # most steps skipped: nothing left to compare
            detail[prec]["note"] = f"only {applied} of {steps} steps were applied"
            ok = False
        ok = ok and cmp["first step rel. diff"] <= first_tol and cmp["last steps rel. diff"] <= last_tol
    detail["tolerances (first, last steps)"] = {"bf16": [0.02, 0.10], "fp16": [0.005, 0.10]}
    return {"ok": ok, **detail}


def check_resume(ws: Workspace) -> dict[str, Any]:
    from sentkit.training.loop import train
    from sentkit.training.recipes.declutr import Declutr

    k = ws.sizes.steps // 2
    model = ws.model(0.1)
    with deterministic():
        for name in ("straight", "again"):
            train(ws.config(ws.root / f"resume-{name}", model), Declutr)
        cut = ws.root / "resume-cut"
        train(ws.config(cut, model), Declutr, stop_at=k)
        train(ws.config(cut, model, resume=True), Declutr)
    a, b, c = (weights(ws.root / f"resume-{n}") for n in ("straight", "again", "cut"))
    same_run, resumed = max_diff(a, b), max_diff(a, c)
    why = "" if resumed == 0 else (" (two straight runs differ too: a kernel is not deterministic)" if same_run else
                                   " (a resume bug: two straight runs agree)")
    return {"ok": resumed == 0.0, "steps": f"{k} + resume + {k} vs {2 * k}",
            "max diff straight vs straight": same_run, "max diff straight vs resumed": resumed, "note": why.strip()}


def check_grad_cache(ws: Workspace) -> dict[str, Any]:
    from check_support import step_gradients
    from sentkit.training.distributed import DistInfo

    model, store = ws.model(0.1), str(ws.store)
    cfg = ws.config(ws.root / "unused", model, corpus=store, grad_accum=2, grad_cache=True)
    args = (str(model), store, cfg, list(range(ws.sizes.batch)), DistInfo())
    with deterministic():
        cached = step_gradients(*args, device=ws.sizes.device)
        oracle = step_gradients(*args, device=ws.sizes.device, reference=True)
        no_drop = step_gradients(*args, device=ws.sizes.device, dropout=0.0)
    scale = max(float(g.abs().max()) for g in oracle.values())
    diff = max(float((cached[n] - oracle[n]).abs().max()) for n in oracle)
    off = max(float((cached[n] - no_drop[n]).abs().max()) for n in oracle)
    return {"ok": diff <= 1e-4 * scale and off > 1e-3 * scale, "max |grad|": scale,
            "cached vs one graph": diff, "cached vs dropout off (must differ)": off}


def throughput_verdict(shares: dict[str, float], floors: dict[str, float]) -> tuple[bool, list[str]]:
    """Whether every share of the matmul rate reaches its floor, and the ones that do not."""
    low = [f"{k} {shares[k]:.4f} < floor {floors[k]}" for k in floors if not shares[k] >= floors[k]]
    return not low, low


def check_throughput(ws: Workspace) -> dict[str, Any]:
    import torch

    import sentkit
    from check_support import WORDS
    from sentkit.training.loop import train
    from sentkit.training.metrics import read_metrics
    from sentkit.training.recipes.declutr import Declutr

    s = ws.sizes
    model = ws.model(0.0)
    out = ws.root / "throughput-bf16"
    train(ws.config(out, model, precision="bf16", checkpoint_every=s.steps), Declutr)
    train_tokens = steady_rate(read_metrics(out / "metrics.csv"))
    rng = random.Random(1)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40))) for _ in range(s.sentences)]
    enc: Any = sentkit.load(str(model))  # a TransformerEncoder: its tokenizer and model are used
    enc.encode(texts[:256])
    tokens = sum(len(x) for x in enc.tokenizer(texts)["input_ids"])
    sync = torch.cuda.synchronize if s.device == "cuda" else (lambda: None)
    sync()
    t = time.perf_counter()
    enc.encode(texts, batch_size=128)
    sync()
    seconds = time.perf_counter() - t
    params = sum(p.numel() for n, p in enc.model.named_parameters() if "embeddings" not in n)
    fp32, bf16 = matmul_rate(torch.float32, s.device, s.matmul), matmul_rate(torch.bfloat16, s.device, s.matmul)
    shares = {"encode": 2 * params * tokens / seconds / fp32, "train": 6 * params * train_tokens / bf16}
    ok, low = throughput_verdict(shares, s.floors)
    return {"ok": ok, "encode sentences/s": round(len(texts) / seconds, 1), "encode tokens/s": round(tokens / seconds),
            "float32 matmul TFLOP/s": round(fp32 / 1e12, 3), "bf16 matmul TFLOP/s": round(bf16 / 1e12, 3),
            "encode share of fp32 matmul rate": round(shares["encode"], 4),
            "bf16 train step tokens/s": round(train_tokens),
            "bf16 train step share of bf16 matmul rate": round(shares["train"], 4),
            "floors (encode, train)": [s.floors["encode"], s.floors["train"]], "below the floor": low}


def check_two_processes(ws: Workspace) -> dict[str, Any]:
    from check_support import torchrun
    from sentkit.config import to_dict

    model = ws.model(0.1)
    _ = ws.store  # prepared once, before two processes start on it

    def job(name: str, **kw: Any) -> dict[str, Any]:
        cfg = ws.config(ws.root / f"procs-{name}", model, device="cpu" if ws.sizes.cpu else "auto",
                        **{k: v for k, v in kw.items() if k != "kill_at"})
        return {"method": "declutr", "config": to_dict(cfg), **({"kill_at": kw["kill_at"]} if "kill_at" in kw else {})}

    worker = SCRIPTS / "train_worker.py"
    k = ws.sizes.steps // 2
    first = torchrun(worker, json.dumps({"jobs": [job("straight"), job("cut", kill_at=k)]}), timeout=600)
    killed = first.returncode != 0 and "SIGKILL" in first.stderr
    second = torchrun(worker, json.dumps({"jobs": [job("cut", resume=True)]}), timeout=600)
    backend = "gloo (CPU)" if ws.sizes.cpu else "nccl"
    if second.returncode != 0 or not killed:
        return {"ok": False, "backend": backend, "killed launch exit": first.returncode,
                "resume exit": second.returncode, "stderr": (second.stderr or first.stderr)[-1500:]}
    diff = max_diff(weights(ws.root / "procs-straight"), weights(ws.root / "procs-cut"))
    return {"ok": diff <= 1e-6, "backend": backend, "killed rank reported": killed,
            "max diff straight vs killed+resumed": diff, "bit for bit": diff == 0.0}


CHECKS: dict[str, Callable[[Workspace], dict[str, Any]]] = {
    "precision": check_precision, "resume": check_resume, "grad_cache": check_grad_cache,
    "throughput": check_throughput, "two_procs": check_two_processes,
}


# ----------------------------------------------------------------------------- main
def gpu_facts() -> dict[str, Any]:
    import torch

    facts: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
                             "host": platform.node(), "date": time.strftime("%Y-%m-%d %H:%M")}
    if torch.cuda.is_available():
        facts["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        facts["bf16 native"] = torch.cuda.is_bf16_supported(including_emulation=False)
    return facts


def write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def _terminated(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds: the runs' folders are removed on the way out


def run(args: argparse.Namespace) -> int:
    import torch

    handler, threads = signal.signal(signal.SIGTERM, _terminated), torch.get_num_threads()
    if args.cpu:
        torch.set_num_threads(1)  # tiny models: one thread (on a shared machine, spinning threads only cost)
    try:
        return _run(args)
    finally:  # as they were (a caller in the same process, e.g. a test)
        signal.signal(signal.SIGTERM, handler)
        torch.set_num_threads(threads)


def _run(args: argparse.Namespace) -> int:
    import torch

    sizes = Sizes(args.cpu, args.steps)
    out = Path(args.out) if args.out else default_out()
    out.mkdir(parents=True, exist_ok=True)
    gpus = 0 if args.cpu else torch.cuda.device_count()
    results: dict[str, Any] = {"machine": gpu_facts(), "mode": "cpu" if args.cpu else "gpu", "finished": False,
                               "checks": {}}
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="gpu-check-runs-", dir=out))
    try:
        ws = Workspace(work, sizes)
        for key, fn in CHECKS.items():
            name = NAMES[key]
            if key == "two_procs" and not args.cpu and gpus < 2:
                results["checks"][name] = {"ok": None, "skipped": f"needs 2 GPUs ({gpus} visible)"}
                print(f"[SKIP] {name}: needs 2 GPUs ({gpus} visible)", flush=True)
                continue
            t = time.perf_counter()
            try:
                res = fn(ws)
            except Exception as e:  # a check that crashes (or cannot build what it needs) is a failed check
                first = str(e).splitlines()[0][:300] if str(e) else ""
                res = {"ok": False, "error": f"{type(e).__name__}: {first}"}
            res["seconds"] = round(time.perf_counter() - t, 1)
            results["checks"][name] = res
            write_json(out / "gpu_check.json", {**results, "seconds": round(time.perf_counter() - started, 1)})
            if not args.keep:  # a BERT-base run folder holds ~2 GB of checkpoints: keep only what later checks use
                for entry in work.iterdir():
                    if entry.is_dir() and entry.name not in ("corpus", "model", "model-dropout", "store"):
                        shutil.rmtree(entry, ignore_errors=True)
            print(f"[{'PASS' if res['ok'] else 'FAIL'}] {name} ({res['seconds']} s)", flush=True)
            for k, value in res.items():
                if k not in ("ok", "seconds"):
                    print(f"       {k}: {value}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    results.update(finished=True, seconds=round(time.perf_counter() - started, 1))
    write_json(out / "gpu_check.json", results)
    failed = [n for n, r in results["checks"].items() if r["ok"] is False]
    print(f"{len(results['checks']) - len(failed)} of {len(results['checks'])} checks passed or skipped in "
          f"{results['seconds']} s; results in {out / 'gpu_check.json'}" + (f"; the runs in {work}" if args.keep else ""))
    return FAILED if failed else PASSED


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0],
                                 epilog="Exit status: 0 passed, 1 a check failed, 2 bad command line, 3 no GPU, "
                                 "4 no Python environment, 5 a package missing, 6 a CPU-only torch on a GPU machine.")
    ap.add_argument("--cpu", action="store_true", help="every check that runs on a CPU, with a tiny model (tests the script)")
    ap.add_argument("--steps", type=int, default=None, help="training steps per run (even; default 20, --cpu 4)")
    ap.add_argument("--out", default=None, help="folder for gpu_check.json and the runs' folders "
                    "(default: $OUT when set, else <temp>/sentkit-gpu-check)")
    ap.add_argument("--keep", action="store_true", help="keep the runs' folders (models, checkpoints, metrics) under --out")
    args = ap.parse_args(argv)
    if args.steps is not None and (args.steps < 2 or args.steps % 2):
        ap.error("--steps must be an even number of at least 2")
    stop = preflight(args.cpu)
    if stop is not None:
        print(f"gpu_check: error: {stop[1]}", file=sys.stderr)
        return stop[0]
    return run(args)


if __name__ == "__main__":
    sys.exit(main())

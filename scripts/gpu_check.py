"""Check sentkit on this machine's GPU(s) in one command (`bash scripts/gpu_check.sh`; a few minutes
on one GPU, one more check with two or more).

1. precision: the same DeCLUTR steps (dropout off, same start) in fp32, bf16 and fp16: the first
   step's loss (same weights, same batch) and the mean loss of the last quarter of the steps,
   compared at equal numbers of applied optimizer steps (a step that fp16's loss scaler skips
   applies nothing, so the fp16 run lags fp32 by the steps it skipped); the skipped steps and the
   scaler's final scale are reported; and the same for MNTP steps of the GPT-2 decoder (bidirectional
   attention, LM head) in fp32 and bf16, with bf16's tolerances (``precision_decoder``);
2. resume: 2k steps straight, the same again, and k steps + --resume + k steps, dropout on, the
   default precision, deterministic kernels: the final weights bit for bit;
3. gradient caching with dropout on CUDA generators: the cached step against one graph over the
   same micro-batches and dropout seeds, and against the step without dropout (which must differ);
4. throughput, one check each (`THROUGHPUT`): the matmul rate of the GPU against its datasheet,
   `encode`, and the training steps of DeCLUTR, SimCSE, MLM and MNTP (a GPT-2 decoder from config),
   each as a share of the matmul rate of its own dtype measured in the same run ("model FLOPs
   utilisation"); below its floor the check fails. How the work is counted and why each floor
   catches a CPU fallback, a silent fp32 or a stall per step: "Throughput floors" below;
5. 2 processes: a run killed with kill -9 after a checkpoint and resumed, against the same run
   straight (NCCL with 2+ GPUs; gloo with --cpu; skipped with one GPU);
6. training memory (``train_memory``): two MNTP steps of the GPT-2 decoder built from a config, LoRA (rank 16) on
   a bf16 base with gradient checkpointing, through sentkit's loop on the GPU; the memory plan's estimate
   (`sentkit.training.plan`, less the CUDA context it adds) against ``torch.cuda.max_memory_allocated`` over the
   steps (less what was allocated before): the ratio is reported and must be within 25 %; with 2+ GPUs, the same
   for two FSDP steps of full fine-tuning on 2 processes (``distributed=fsdp``, each rank's peak); skipped on a
   CPU (``--cpu``: nothing to compare with max_memory_allocated) and the FSDP part with one GPU.

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
test suite checks this script where there is no GPU. `--only a,b` runs those checks alone.

Throughput floors. Each throughput run records, through hooks on the recipe and its module, the
token lengths of every sequence of every step and the masked tokens of the MLM loss; its work
is the matmul FLOPs of the model on those tokens (`forward_flops`): per layer and token
2 (4 d^2 + 2 d I) for the projections and the feed-forward, plus 4 s d for attention over s
positions, plus 2 (d^2 + d V) per masked token for the MLM head; a training step is 3 times its
forward (backward twice the forward), encode once. Padding, the embedding lookups and the small
heads (pooler, SimCSE's MLP) are not counted: the share is of the useful work. Divided by the
seconds of the second half of the run (wall-clock on a GPU; on a CPU the process's CPU time, which
other processes on a shared machine do not change) and by the matmul rate measured here, the
same way, of the dtype the work is meant to run in (bf16 for training, float32 for `encode`,
which has no autocast), it is the share of peak the run reached. On a GPU (a BERT-base, 15-30k
tokens a step, bf16, SDPA attention) a healthy step is expected near 0.2-0.4 of the measured bf16
rate and encode near 0.3-0.6 of the float32 rate; the floors (`Sizes.floors`) sit well below that
and above what a broken path can reach:
- a CPU fallback: a CPU's matmul rate is 1-3 % of a GPU's; far below every floor;
- a silent fp32 where bf16 was asked: a float32 step cannot beat the float32 matmul rate, 0.07
  of the bf16 one on an H100/H200 (67 / 989 TFLOP/s dense); the training floor is at least 1.25
  times the measured fp32 / bf16 ratio, so it fails even at perfect efficiency; and the dtypes
  of every Linear layer's outputs are recorded and must be bf16 (this also holds on a CPU);
- a stall per step (a synchronisation or host work that keeps the GPU idle, e.g. a sleep):
  `SENTKIT_GPU_CHECK_SLOW=NAME:FACTOR[,NAME:FACTOR]` stretches every measured step (every batch
  for encode) of those checks to FACTOR times its own duration (a sleep; a busy wait on the
  CPU-time clock), to show that the floor fails it; `NAME:sync` instead synchronises the GPU
  after every submodule's forward (a sync per operation: what the first GPU run should try);
  a plain synchronisation per step alone costs little at these batch sizes (the loop already
  reads the loss every step), which is why the batches are that large.
The measured bf16 matmul rate itself must reach half the datasheet's dense figure (`DATASHEET`,
by device name) where the device is listed (an H200 here measures 770-800 of its 989 TFLOP/s).
On a CPU (`--cpu`) the same shares are measured against the CPU's own matmul rates with a tiny
model, but no fixed floor holds across CPUs: the bf16 / float32 matmul ratio of one thread at 512
was 2-7 on the project's 2-core machine (on different days) and 6.2 on the CI machine (AMX),
and fixed CPU floors set here failed healthy steps there. So on a CPU each throughput check first
runs once unslowed (its reference run, same process, same clock, after a warm-up run: a process's
first training run of a model was 2-4 times slower than the next ones) and its floor is `Sizes.cpu_floor`
(0.25) of the share that reference reached: a step slowed 10 times reaches about 0.1 of it and
fails, a healthy one reaches about 1 and passes; the JSON holds the reference share beside the
floor. The CPU self-test thereby tests the mechanism (the work counted, the slowing, the verdict),
not the GPU floors' values, which only a GPU run can.
"""

from __future__ import annotations

import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS (check 2); before CUDA starts

import argparse
import contextlib
import functools
import json
import math
import platform
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
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
    "precision_decoder": "precision: a decoder's MNTP losses in bf16 against fp32",
    "resume": "resume bit for bit (dropout on)",
    "grad_cache": "gradient caching with dropout replay",
    "matmul": "throughput: the matmul rate against the datasheet",
    "encode": "throughput: encode",
    "encode_bf16": "throughput: encode in bf16 (its dtype, vectors against fp32)",
    "encode_fp16": "throughput: encode in fp16 (its dtype, vectors against fp32)",
    "declutr": "throughput: a DeCLUTR training step",
    "simcse": "throughput: a SimCSE training step",
    "mlm": "throughput: an MLM training step",
    "mntp": "throughput: an MNTP training step of a decoder (bf16)",
    "two_procs": "2 processes: kill -9 and resume",
    "train_memory": "training memory: the plan against max_memory_allocated",
}


# ----------------------------------------------------------------------------- before any check
def nvidia_gpus() -> list[str]:
    """Names of the NVIDIA GPUs this machine has, whatever torch can use: `nvidia-smi -L`, else the
    driver's /proc/driver/nvidia/gpus; [] when neither shows one."""
    try:
        res = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        names = [
            line.split(":", 1)[1].split("(UUID")[0].strip()
            for line in res.stdout.splitlines()
            if line.startswith("GPU ") and ":" in line
        ]
        if res.returncode == 0 and names:
            return names
    except (OSError, subprocess.SubprocessError):
        pass
    gpus = Path("/proc/driver/nvidia/gpus")
    found = []
    for info in sorted(gpus.glob("*/information")) if gpus.is_dir() else []:
        model = [
            line.split(":", 1)[1].strip()
            for line in info.read_text(errors="replace").splitlines()
            if line.startswith("Model:")
        ]
        found.append(model[0] if model else info.parent.name)
    return found


def preflight(cpu: bool) -> tuple[int, str] | None:
    """(exit status, one line) when the checks cannot run here, else None."""
    try:
        import torch
    except ImportError as e:
        return MISSING, (
            f"torch is not installed for {sys.executable} ({e}); install it with `{CUDA_SETUP}` "
            "(or plain `bash scripts/setup.sh` for the CPU build)"
        )
    for module in ("numpy", "transformers", "tokenizers", "sentkit.training.loop"):
        try:
            __import__(module)
        except ImportError as e:
            return (
                MISSING,
                f"{module.split('.')[0]} cannot be imported ({e}); install sentkit with `bash scripts/setup.sh`",
            )
    if cpu:
        return None
    gpus = nvidia_gpus()
    if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
        if gpus:
            return CPU_TORCH, (
                f"torch {torch.__version__} is a CPU-only build, but this machine has an NVIDIA GPU "
                f"({', '.join(sorted(set(gpus)))}); install a CUDA build of torch: `{CUDA_SETUP}`"
            )
        return NO_GPU, (
            f"no GPU: no NVIDIA GPU here (nvidia-smi, /proc/driver/nvidia) and torch {torch.__version__} "
            "is a CPU-only build; run it on a machine with a GPU (or --cpu to try the script itself)"
        )
    if not torch.cuda.is_available():
        why = (
            (
                f"the machine has {', '.join(sorted(set(gpus)))}: check the driver against CUDA {torch.version.cuda} "
                f"and CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')}"
            )
            if gpus
            else "no NVIDIA GPU here (nvidia-smi, /proc/driver/nvidia)"
        )
        return NO_GPU, (
            f"no GPU: no CUDA GPU is visible to torch {torch.__version__} (CUDA build "
            f"{torch.version.cuda or torch.version.hip}); {why}; run it on a machine with a GPU (or --cpu "
            "to try the script itself)"
        )
    return None


def default_out(env: Mapping[str, str] = os.environ) -> Path:
    """$OUT when set (the folder a remote run brings back), else <temp>/sentkit-gpu-check."""
    return Path(env["OUT"]) if env.get("OUT") else Path(tempfile.gettempdir()) / "sentkit-gpu-check"


# ----------------------------------------------------------------------------- setting up
class Sizes:
    """Model, corpus, step counts and throughput floors: BERT-base size on a GPU, a tiny BERT on the CPU.

    A floor is the share of the matmul rate measured in the same run (of the dtype the work is
    meant to run in) below which a throughput check fails; how they are set: the module's
    docstring, "Throughput floors". The throughput runs use larger batches than the other checks
    (enough tokens a step that a healthy GPU is busy computing, not waiting for the host)."""

    def __init__(self, cpu: bool, steps: int | None) -> None:
        self.cpu = cpu
        self.device = "cpu" if cpu else "cuda"
        # what the throughput checks time with: wall-clock on a GPU; on a CPU the process's CPU time, so that
        # other processes on a shared machine slow neither the matmul rate nor the steps measured against it
        self.clock: Callable[[], float] = time.process_time if cpu else time.perf_counter
        self.hidden, self.layers, self.heads = (32, 2, 2) if cpu else (768, 12, 12)
        self.steps = steps or (4 if cpu else 20)  # even: the resume check cuts at half
        self.docs, self.words = (8, 300) if cpu else (256, 1500)
        self.batch = 4 if cpu else 16
        self.spans = (8, 32) if cpu else (32, 128)
        self.sentences = 500 if cpu else 20000
        self.matmul = 512 if cpu else 8192
        # throughput runs: steps (the second half is measured), batch per method, text lengths
        self.tp_steps = max(self.steps, 8 if cpu else 30)
        self.tp_batch = (
            {"declutr": 4, "simcse": 8, "mlm": 8, "mntp": 8}
            if cpu
            else {"declutr": 64, "simcse": 128, "mlm": 128, "mntp": 128}
        )
        self.tp_len = 32 if cpu else 128  # SimCSE's max_len and MLM's / MNTP's seq_len
        self.encode_batch = 32 if cpu else 128
        # precision of the training runs: bf16 asked on the CPU; on a GPU the default ("auto": bf16 where native)
        self.precision = "bf16" if cpu else "auto"
        # GPU: healthy BERT-base steps are expected near 0.2-0.4 of the bf16 rate, encode 0.3-0.6 of the fp32 one.
        # CPU: no fixed floor holds across CPUs (docstring, "On a CPU"): each throughput check first runs once
        # unslowed (its reference), and its floor is `cpu_floor` of the share that reference reached
        self.floors = {"encode": 0.15, "declutr": 0.10, "simcse": 0.10, "mlm": 0.10, "mntp": 0.10}
        self.cpu_floor = 0.25


class Workspace:
    """The corpus, models and token store the checks share, made on first use inside the check that
    needs them (a failure to make one is that check's failure, and is not retried by the next)."""

    def __init__(self, root: Path, sizes: Sizes, slow: Mapping[str, float | str] | None = None) -> None:
        self.root, self.sizes = root, sizes
        self.slow = dict(slow or {})  # check -> its steps' stretch factor, or "sync" (SENTKIT_GPU_CHECK_SLOW)
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
        return self._once(
            name,
            lambda: bert_mlm(
                self.root / name,
                hidden=s.hidden,
                layers=s.layers,
                heads=s.heads,
                intermediate=4 * s.hidden,
                max_positions=512,
                dropout=dropout,
            ),
        )

    @property
    def decoder(self) -> Path:
        """A GPT-2 decoder of the BERT's size built from transformers' default config, random weights, the BERT's
        vocabulary (its [SEP] the end-of-sequence token): `--method clm`'s from-scratch base, what MNTP adapts."""

        def make() -> Path:
            import torch

            from sentkit.training.recipes.clm import CLMConfig, scratch_decoder

            s, path = self.sizes, self.root / "decoder"
            torch.manual_seed(0)
            model, tok = scratch_decoder(
                CLMConfig(
                    corpus=str(self.corpus),
                    out=str(path),
                    model=str(self.model(0.0)),
                    from_scratch=True,
                    family="gpt2",
                    layers=s.layers,
                    hidden=s.hidden,
                    heads=s.heads,
                    intermediate=4 * s.hidden,
                    max_positions=512,
                )
            )
            model.save_pretrained(path)
            tok.save_pretrained(path)
            return path

        return self._once("decoder", make)  # type: ignore[no-any-return]

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
        base: dict[str, Any] = dict(
            corpus=str(self.corpus),
            out=str(out),
            model=str(model),
            max_steps=s.steps,
            batch_size=s.batch,
            min_span_len=s.spans[0],
            max_span_len=s.spans[1],
            checkpoint_every=s.steps // 2,
            log_every=1,
            progress=False,
            lr=1e-4,
            device=s.device,
            prepared_dir=str(self.root / "store"),
        )
        return DeclutrConfig(**{**base, **kw})

    @property
    def rates(self) -> dict[str, float]:
        """The matmul rates (FLOP/s) of float32, bf16 and fp16 on this run's device, measured once."""
        import torch

        s = self.sizes
        return self._once(
            "matmul rates",
            lambda: {  # type: ignore[no-any-return]
                k: matmul_rate(dtype, s.device, s.matmul, clock=s.clock)
                for k, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16))
            },
        )

    def train_config(self, method: str, out: Path, model: Path) -> Any:
        """The config of a throughput run of `method`: the sizes' batch and lengths, `tp_steps`
        steps, the sizes' precision, one checkpoint (at the end); DeCLUTR reuses the shared store."""
        from sentkit.core.methods import method_target

        s = self.sizes
        if method == "declutr":
            return self.config(
                out,
                model,
                batch_size=s.tp_batch[method],
                max_steps=s.tp_steps,
                checkpoint_every=s.tp_steps,
                precision=s.precision,
            )
        per_method: dict[str, dict[str, Any]] = {
            "simcse": {"text_unit": "span", "max_len": s.tp_len},
            "mlm": {"seq_len": s.tp_len},
            "mntp": {"seq_len": s.tp_len},
        }
        return method_target(method).config_cls(
            corpus=str(self.corpus),
            out=str(out),
            model=str(model),
            max_steps=s.tp_steps,
            batch_size=s.tp_batch[method],
            checkpoint_every=s.tp_steps,
            log_every=1,
            progress=False,
            lr=1e-4,
            device=s.device,
            precision=s.precision,
            **per_method[method],
        )


def weights(out: Path) -> dict[str, Any]:
    import torch

    return torch.load(out / "checkpoint" / "state.pt", map_location="cpu", weights_only=False)["model"]  # type: ignore[no-any-return]


def max_diff(a: dict[str, Any], b: dict[str, Any]) -> float:
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


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
    tail = common[-max(1, len(common) // 4) :]
    mean_a, mean_b = (sum(x[k] for k in tail) / len(tail) for x in (a, b))
    return {
        "skipped steps": sum(not math.isfinite(float(r["grad_norm"])) for r in got),
        "first step rel. diff": round(abs(b[0] - a[0]) / abs(a[0]), 5),
        "last steps compared (applied steps before them)": f"{tail[0]}-{tail[-1]}",
        "last steps rel. diff": round(abs(mean_b - mean_a) / abs(mean_a), 5),
        "applied": common[-1],
    }


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


def matmul_rate(
    dtype: Any, device: str, size: int, reps: int = 10, tries: int = 3, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Measured FLOP/s of a square matmul of `dtype`: the best of `tries` timings (by `clock`) of
    `reps` products (the best: what the device reaches, not what a busy moment left of it)."""
    import torch

    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    best = math.inf
    for _ in range(tries):
        sync()
        t = clock()
        for _ in range(reps):
            a @ b
        sync()
        best = min(best, clock() - t)
    return 2 * size**3 * reps / best


# ----------------------------------------------------------------------------- throughput: work, peaks, probes
@dataclass(frozen=True)
class Shape:
    """The matmul shapes of a BERT-style encoder and its MLM head."""

    layers: int
    hidden: int
    intermediate: int
    vocab: int

    @classmethod
    def of(cls, config: Any) -> Shape:
        hidden = int(config.hidden_size)
        inner = getattr(config, "intermediate_size", None) or getattr(config, "n_inner", None) or 4 * hidden  # GPT-2
        return cls(int(config.num_hidden_layers), hidden, int(inner), int(config.vocab_size))


def forward_flops(shape: Shape, lengths: Sequence[int], masked: int = 0) -> float:
    """Matmul FLOPs of one forward pass over sequences of `lengths` tokens (no padding): per layer
    and token 2 (4 d^2 + 2 d I) for the Q, K, V and output projections and the feed-forward, plus
    4 s d for attention (QK^T and AV over the s positions of its sequence); plus the MLM head,
    2 (d^2 + d V), on each of the `masked` tokens. Biases, norms and embeddings are not counted."""
    d = shape.hidden
    per_token = 2 * (4 * d * d + 2 * d * shape.intermediate)
    body = sum(shape.layers * s * (per_token + 4 * s * d) for s in lengths)
    return float(body + masked * 2 * (d * d + d * shape.vocab))


def train_flops(shape: Shape, lengths: Sequence[int], masked: int = 0) -> float:
    """Matmul FLOPs of a training step: the forward and a backward of twice its work."""
    return 3 * forward_flops(shape, lengths, masked)


# Dense (no sparsity) peak TFLOP/s from NVIDIA's datasheets: (device-name pattern, bf16 tensor cores,
# float32 without tensor cores); the first pattern that matches `torch.cuda.get_device_name` is used
DATASHEET: tuple[tuple[str, float, float], ...] = (
    (r"H100.*PCIe", 756.0, 51.0),
    (r"H100.*NVL", 835.0, 60.0),
    (r"\b(G?H100|G?H200)\b", 989.0, 67.0),
    (r"\bA100\b", 312.0, 19.5),
    (r"\bL40S\b", 362.0, 91.6),
    (r"\bL4\b", 121.0, 30.3),
    (r"\bA10\b", 125.0, 31.2),
)


def datasheet_peak(name: str) -> dict[str, float] | None:
    """{"bf16": FLOP/s, "fp32": FLOP/s} of the device called `name` (DATASHEET), None if not listed."""
    for pattern, bf16, fp32 in DATASHEET:
        if re.search(pattern, name):
            return {"bf16": bf16 * 1e12, "fp32": fp32 * 1e12}
    return None


def train_floor(base: float, rates: Mapping[str, float], gpu: bool) -> float:
    """The training floor: `base`, on a GPU raised to 1.25 times the measured fp32 / bf16 matmul
    ratio where tensor cores make bf16 at least twice as fast, so that a step run in float32 fails
    even at perfect efficiency (on a CPU the recorded dtypes catch it: the rates are too close)."""
    ratio = rates["fp32"] / rates["bf16"]
    return max(base, 1.25 * ratio) if gpu and ratio < 0.5 else base


def parse_slow(value: str, names: Sequence[str]) -> dict[str, float | str]:
    """SENTKIT_GPU_CHECK_SLOW's `NAME:FACTOR[,NAME:FACTOR]` -> {name: factor}, or `NAME:sync` ->
    {name: "sync"} (a GPU synchronisation after every submodule's forward); ValueError on a bad one."""
    out: dict[str, float | str] = {}
    for item in filter(None, (x.strip() for x in value.split(","))):
        name, _, factor = item.partition(":")
        if name not in names:
            from sentkit.core.registry import suggest

            hint = suggest(name, list(names))
            raise ValueError(f"{name!r} is not a throughput check (one of {', '.join(names)}).{hint}")
        if factor == "sync":
            out[name] = factor
            continue
        try:
            number = float(factor)
        except ValueError:
            number = math.nan
        if not number > 1:
            raise ValueError(
                f"{item!r}: the factor must be a number above 1 (each step stretched to that many times "
                "its duration), e.g. declutr:10, or sync"
            )
        out[name] = number
    return out


class Probe:
    """What a throughput run records through hooks on a module: the time (by `clock`) at the start
    of each call, the work of each call (`shape_of_call(args, kwargs)`, or from the batches the
    recipe makes: `on_batch`) as (sequence lengths, masked tokens), and the dtypes of every Linear
    layer's outputs inside the module's own calls. Slowed (`factor` > 1), each call whose index is
    above `skip` first waits until the time since the previous call is `factor` times what it took
    (the device synchronised first): a stall per step; calls 0 .. skip are not held up. The wait is
    a sleep on the wall-clock, and a busy wait on a CPU-time clock (a sleep takes no CPU time):
    host work that holds the step up."""

    def __init__(
        self,
        clock: Callable[[], float] = time.perf_counter,
        factor: float = 1.0,
        skip: int = 0,
        shape_of_call: Callable[[Any, Any], tuple[list[int], int]] | None = None,
        sync: Callable[[], Any] | None = None,
    ) -> None:
        self.clock, self.factor, self.skip, self.shape_of_call = clock, factor, skip, shape_of_call
        self.sync = sync  # called after every submodule's forward inside the module's calls (a sync per operation)
        self.synced = 0
        self.times: list[float] = []  # the clock at the start of each call (after any wait)
        self.work: list[tuple[list[int], int]] = []  # (lengths, masked) of each call or batch
        self.dtypes: set[str] = set()
        self.waited = 0.0

    def on_batch(self, shape: tuple[list[int], int]) -> None:
        self.work.append(shape)

    def attach(self, module: Any) -> Any:
        """`module` with the hooks on (returned)."""
        import torch

        inside = [False]  # dtypes count inside `module`'s own calls only (not, e.g., a check of the base model)

        def record(_m: Any, _args: Any, output: Any) -> None:
            if inside[0] and isinstance(output, torch.Tensor):
                self.dtypes.add(str(output.dtype).removeprefix("torch."))

        def synchronise(_m: Any, _args: Any, _out: Any) -> None:
            if inside[0] and self.sync is not None:
                self.sync()
                self.synced += 1

        def enter(_m: Any, args: Any, kwargs: Any) -> None:
            if self.factor > 1 and len(self.times) > self.skip:  # this call's index is above skip
                self._stall(module)
            if self.shape_of_call is not None:
                self.work.append(self.shape_of_call(args, kwargs))
            self.times.append(self.clock())
            inside[0] = True

        def leave(_m: Any, _args: Any, _out: Any) -> None:
            inside[0] = False

        for m in module.modules():
            if isinstance(m, torch.nn.Linear):
                m.register_forward_hook(record)
            if self.sync is not None and m is not module and not any(True for _ in m.children()):
                m.register_forward_hook(synchronise)
        module.register_forward_pre_hook(enter, with_kwargs=True)
        module.register_forward_hook(leave)
        return module

    def _stall(self, module: Any) -> None:
        import torch

        if next(module.parameters()).device.type == "cuda":
            torch.cuda.synchronize()  # the GPU's work so far counts as the step's duration
        now = self.clock()
        wait = (self.factor - 1) * (now - self.times[-1])
        if self.clock is time.perf_counter:
            time.sleep(wait)
        else:
            while self.clock() < now + wait:
                pass
        self.waited += wait

    def rate(self, first: int, last: int, flops: Callable[[list[int], int], float]) -> tuple[float, int, float]:
        """(FLOP/s, tokens, seconds) of calls first .. last-1 (0-based): from the start of call
        `first` to the start of call `last`."""
        seconds = self.times[last] - self.times[first]
        work = self.work[first:last]
        return sum(flops(*w) for w in work) / seconds, sum(sum(w[0]) for w in work), seconds


# what a step of each method computes: (the token length of every sequence its encoder runs, masked tokens)
BATCH_SHAPES: dict[str, Callable[[Any], tuple[list[int], int]]] = {
    "declutr": lambda b: ([len(x) for x in b.seqs], int(b.counts.get("mlm", 0))),  # anchors and positives
    "simcse": lambda b: ([len(x) for x in b.seqs] * 2, 0),  # each text twice (two dropout views)
    "mlm": lambda b: ([int(b.ids.shape[1])] * int(b.ids.shape[0]), int((b.labels != -100).sum())),
    "mntp": lambda b: ([int(b.ids.shape[1])] * int(b.ids.shape[0]), int((b.labels != -100).sum())),
}


def probed(recipe_cls: type, probe: Probe, shape_of: Callable[[Any], tuple[list[int], int]]) -> type:
    """A subclass of `recipe_cls` whose batches (`shape_of` each) and module the probe sees (the
    loop is sentkit's own)."""

    class Probed(recipe_cls):  # type: ignore[valid-type,misc]
        def batch(self, store: Any, units: list[int], step: int) -> Any:
            out = super().batch(store, units, step)
            probe.on_batch(shape_of(out))
            return out

        def module(self) -> Any:
            return probe.attach(super().module())

    Probed.__name__ = Probed.__qualname__ = f"Probed{recipe_cls.__name__}"
    return Probed


def share_verdict(key: str, share: float, floor: float, what: str) -> dict[str, Any]:
    """The throughput part of a check's result: the share, its floor, and a line when below it."""
    ok, _ = throughput_verdict({key: share}, {key: floor})
    out: dict[str, Any] = {f"share of the {what}": round(share, 4), "floor": round(floor, 4)}
    if not ok:
        out["below the floor"] = (
            f"{key} reached {share:.4f} of the {what}, below its floor {floor:.4f}: a CPU "
            "fallback, a silent fp32 or a stall per step (docs/benchmarks.md, GPU check)"
        )
    return out


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


def check_precision_decoder(ws: Workspace) -> dict[str, Any]:
    """The same MNTP steps of the GPT-2 decoder (bidirectional, dropout off, same start) in fp32 and bf16: bf16's
    losses within the DeCLUTR check's bf16 tolerances of fp32's (a decoder's attention mask and LM head in bf16)."""
    import dataclasses

    from sentkit.training.loop import train
    from sentkit.training.metrics import read_metrics
    from sentkit.training.recipes.mntp import MNTP

    rows = {}
    for prec in ("fp32", "bf16"):
        out = ws.root / f"precision-decoder-{prec}"
        cfg = ws.train_config("mntp", out, ws.decoder)
        train(dataclasses.replace(cfg, precision=prec, max_steps=ws.sizes.steps, checkpoint_every=ws.sizes.steps), MNTP)
        rows[prec] = read_metrics(out / "metrics.csv")
    first_tol, last_tol = 0.02, 0.10
    cmp = compare_at_applied(rows["fp32"], rows["bf16"])
    cmp.pop("applied")
    ok = all(math.isfinite(float(r["loss"])) for rs in rows.values() for r in rs)
    ok = ok and cmp["first step rel. diff"] <= first_tol and cmp["last steps rel. diff"] <= last_tol
    return {
        "ok": ok,
        "fp32 losses": [round(float(r["loss"]), 4) for r in rows["fp32"]],
        "bf16": {"losses": [round(float(r["loss"]), 4) for r in rows["bf16"]], **cmp},
        "tolerances (first, last steps)": [first_tol, last_tol],
    }


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
    why = (
        ""
        if resumed == 0
        else (
            " (two straight runs differ too: a kernel is not deterministic)"
            if same_run
            else " (a resume bug: two straight runs agree)"
        )
    )
    return {
        "ok": resumed == 0.0,
        "steps": f"{k} + resume + {k} vs {2 * k}",
        "max diff straight vs straight": same_run,
        "max diff straight vs resumed": resumed,
        "note": why.strip(),
    }


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
    return {
        "ok": diff <= 1e-4 * scale and off > 1e-3 * scale,
        "max |grad|": scale,
        "cached vs one graph": diff,
        "cached vs dropout off (must differ)": off,
    }


def throughput_verdict(shares: dict[str, float], floors: dict[str, float]) -> tuple[bool, list[str]]:
    """Whether every share of the matmul rate reaches its floor, and the ones that do not."""
    low = [f"{k} {shares[k]:.4f} < floor {floors[k]}" for k in floors if not shares[k] >= floors[k]]
    return not low, low


def device_name(sizes: Sizes) -> str:
    import torch

    if sizes.device == "cuda":
        return str(torch.cuda.get_device_name())
    return f"CPU ({platform.processor() or platform.machine()})"


def peak_shares(ws: Workspace, rate: float, dtype: str) -> dict[str, Any]:
    """`rate` (FLOP/s) as a share of the datasheet peak of `dtype`, where the device is listed."""
    sheet = datasheet_peak(device_name(ws.sizes)) if ws.sizes.device == "cuda" else None
    return {f"share of the datasheet {dtype} peak": round(rate / sheet[dtype], 4)} if sheet else {}


def check_matmul(ws: Workspace) -> dict[str, Any]:
    """The matmul rates every throughput floor is a share of; on a listed GPU, bf16 at least half the datasheet's."""
    name, rates = device_name(ws.sizes), ws.rates
    sheet = datasheet_peak(name) if ws.sizes.device == "cuda" else None
    res: dict[str, Any] = {
        "device": name,
        "matmul size": ws.sizes.matmul,
        "float32 matmul TFLOP/s": round(rates["fp32"] / 1e12, 3),
        "bf16 matmul TFLOP/s": round(rates["bf16"] / 1e12, 3),
    }
    if sheet is None:
        return {"ok": True, **res, "note": "not in the datasheet table: the floors use the rates measured here"}
    shares = {k: rates[k] / sheet[k] for k in ("bf16", "fp32")}
    res.update(
        {
            "datasheet TFLOP/s (bf16, fp32)": [sheet["bf16"] / 1e12, sheet["fp32"] / 1e12],
            "bf16 share of the datasheet": round(shares["bf16"], 4),
            "fp32 share of the datasheet": round(shares["fp32"], 4),
        }
    )
    if shares["bf16"] < 0.5:
        res["below the floor"] = (
            f"bf16 matmuls reached {shares['bf16']:.3f} of the datasheet's dense peak, below "
            "0.5: the GPU is throttled, shared, a MIG slice, or bf16 runs without tensor cores"
        )
    return {"ok": shares["bf16"] >= 0.5, **res}


def encode_call_shape(args: Any, kwargs: Any) -> tuple[list[int], int]:
    """(the token lengths of a batch, 0) from a transformer's call: `input_ids` [b, L] and, when
    padded, `attention_mask`."""
    ids, mask = kwargs.get("input_ids", args[0] if args else None), kwargs.get("attention_mask")
    return (mask.sum(dim=1).tolist() if mask is not None else [int(ids.shape[1])] * int(ids.shape[0])), 0


def slowed(ws: Workspace, key: str) -> tuple[float, Callable[[], Any] | None]:
    """(stretch factor, sync per operation or None) that SENTKIT_GPU_CHECK_SLOW asks of check `key`."""
    import torch

    how = ws.slow.get(key, 1.0)
    if how == "sync":
        return 1.0, (torch.cuda.synchronize if ws.sizes.device == "cuda" else (lambda: None))
    return float(how), None


def slow_report(probe: Probe) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if probe.factor > 1:
        out.update({"slowed by": probe.factor, "seconds waited": round(probe.waited, 3)})
    if probe.sync is not None:
        out["synchronised after each operation"] = probe.synced
    return out


def check_encode(ws: Workspace) -> dict[str, Any]:
    """`encode` of synthetic sentences: its model FLOPs/s as a share of the float32 matmul rate."""
    return encode_run(ws, "encode", "fp32")


def check_encode_half(ws: Workspace, precision: str) -> dict[str, Any]:
    """`encode` in `precision` (bf16 or fp16: `sentkit.load(name, precision=...)`): every Linear of the model computes
    in that dtype (a silent float32 fails), its model FLOPs/s as a share of that dtype's matmul rate reaches the encode
    floor (a CPU fallback fails), and its vectors agree with float32's (cosine >= 0.99 for each text)."""
    return encode_run(ws, f"encode_{precision}", precision)


def encode_texts(ws: Workspace) -> list[str]:
    from check_support import WORDS

    rng = random.Random(1)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40))) for _ in range(ws.sizes.sentences)]


HALF_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}
MIN_HALF_COSINE = 0.99  # a text's vector in half precision against float32's


def encode_run(ws: Workspace, key: str, precision: str) -> dict[str, Any]:
    """One measured `encode` pass in `precision` (after a warm-up, and on a CPU after an unslowed reference pass that
    sets the floor); in half precision also the Linear dtypes and the agreement with float32's vectors."""
    import numpy as np

    import sentkit

    s = ws.sizes
    model = ws.model(0.0)
    texts = encode_texts(ws)
    enc: Any = sentkit.load(str(model), device=s.device, precision=precision)  # a TransformerEncoder: probed
    factor, sync = slowed(ws, key)
    probe = Probe(s.clock, shape_of_call=encode_call_shape, sync=sync)
    probe.attach(enc.model)
    probe.sync = None
    enc.encode(texts[:256], batch_size=s.encode_batch)  # warm-up: not measured, not slowed
    shape = Shape.of(enc.model.config)
    rate_of = ws.rates[precision]

    def measured_pass() -> tuple[float, int, float, int, Any]:
        first = len(probe.times)
        probe.skip = first
        vectors = enc.encode(texts, batch_size=s.encode_batch)
        last = len(probe.times) - 1
        return (*probe.rate(first, last, lambda lengths, _: forward_flops(shape, lengths)), last - first, vectors)

    reference: dict[str, Any] = {}
    floor = s.floors["encode"]
    what = f"{'float32' if precision == 'fp32' else precision} matmul rate"
    if s.cpu:  # the reference run: unslowed, its share sets the floor
        ref_rate = measured_pass()[0]
        floor = s.cpu_floor * ref_rate / rate_of
        reference = {"reference run's share (unslowed)": round(ref_rate / rate_of, 4)}
    probe.dtypes.clear()
    probe.factor, probe.sync = factor, sync
    rate, tokens, seconds, batches, vectors = measured_pass()
    verdict = share_verdict(key, rate / rate_of, floor, what)
    out: dict[str, Any] = {
        "ok": "below the floor" not in verdict,
        "batches measured": batches,
        "tokens/s": round(tokens / seconds),
        "model TFLOP/s": round(rate / 1e12, 4),
        **verdict,
        **reference,
        **peak_shares(ws, rate, "fp32" if precision == "fp32" else "bf16"),
        "Linear output dtypes": sorted(probe.dtypes),
        **slow_report(probe),
    }
    if precision != "fp32":
        if probe.dtypes != {HALF_DTYPES[precision]}:
            out["ok"] = False
            out["wrong dtype"] = (
                f"encode in {precision} ran its Linear layers in {', '.join(sorted(probe.dtypes)) or 'nothing'}, not "
                f"{HALF_DTYPES[precision]}: the model was not cast (a silent float32)"
            )
        ref = sentkit.load(str(model), device=s.device).encode(texts, batch_size=s.encode_batch)
        cos = (ref * vectors).sum(1) / np.linalg.norm(ref, axis=1) / np.linalg.norm(vectors, axis=1)
        out["cosine to float32 (min, mean)"] = [round(float(cos.min()), 5), round(float(cos.mean()), 5)]
        if not cos.min() >= MIN_HALF_COSINE:
            out["ok"] = False
            out["disagrees"] = f"a text's vector has cosine {cos.min():.4f} < {MIN_HALF_COSINE} to its float32 vector"
    return out


def check_train(ws: Workspace, method: str) -> dict[str, Any]:
    """A throughput run of `method` (sentkit's loop, the recipe probed): its model FLOPs/s over the
    second half of the steps as a share of the bf16 matmul rate, and every Linear output in bf16."""
    from transformers import AutoConfig

    from sentkit.core.methods import method_target
    from sentkit.training.loop import train

    s = ws.sizes
    model = ws.decoder if method == "mntp" else ws.model(0.0)  # MNTP adapts a decoder
    shape = Shape.of(AutoConfig.from_pretrained(model))
    half = s.tp_steps // 2
    rates = ws.rates

    def run_once(name: str, factor: float, sync: Callable[[], Any] | None) -> tuple[Probe, float, int, float]:
        cfg = ws.train_config(method, ws.root / name, model)
        probe = Probe(s.clock, factor, skip=half, sync=sync)  # slowed: the measured steps
        train(cfg, probed(method_target(method), probe, BATCH_SHAPES[method]))
        n = len(probe.times)
        if n != s.tp_steps or len(probe.work) != n:
            raise RuntimeError(f"{method}: {n} calls of the module and {len(probe.work)} batches in {s.tp_steps} steps")
        return probe, *probe.rate(half, n - 1, lambda lengths, masked: train_flops(shape, lengths, masked))

    reference: dict[str, Any] = {}
    if s.cpu:  # a warm-up run (a process's first run of a model is 2-4 times slower), then the reference run
        run_once(f"throughput-{method}-warm-up", 1.0, None)
        ref_share = run_once(f"throughput-{method}-reference", 1.0, None)[1] / rates["bf16"]
        floor = s.cpu_floor * ref_share
        reference = {"reference run's share (unslowed)": round(ref_share, 4)}
    else:
        floor = train_floor(s.floors[method], rates, gpu=True)
    probe, rate, tokens, seconds = run_once(f"throughput-{method}", *slowed(ws, method))
    n = len(probe.times)
    precision = s.precision
    verdict = share_verdict(method, rate / rates["bf16"], floor, "bf16 matmul rate")
    if probe.dtypes != {"bfloat16"}:
        got = ", ".join(sorted(probe.dtypes)) or "nothing"
        verdict["not bf16"] = (
            f"the step's Linear layers gave {got} where bf16 was asked (precision={precision}): "
            "autocast was not applied"
        )
    return {
        "ok": "not bf16" not in verdict and "below the floor" not in verdict,
        "precision asked": precision,
        "Linear output dtypes": sorted(probe.dtypes),
        "steps measured": f"{half + 1}-{n - 1} of {n}",
        "tokens per step": round(tokens / (n - 1 - half)),
        "tokens/s": round(tokens / seconds),
        "model TFLOP/s": round(rate / 1e12, 4),
        **verdict,
        **reference,
        **peak_shares(ws, rate, "bf16"),
        **slow_report(probe),
    }


def check_two_processes(ws: Workspace) -> dict[str, Any]:
    from check_support import torchrun
    from sentkit.core.config import to_dict

    model = ws.model(0.1)
    _ = ws.store  # prepared once, before two processes start on it

    def job(name: str, **kw: Any) -> dict[str, Any]:
        cfg = ws.config(
            ws.root / f"procs-{name}",
            model,
            device="cpu" if ws.sizes.cpu else "auto",
            **{k: v for k, v in kw.items() if k != "kill_at"},
        )
        return {"method": "declutr", "config": to_dict(cfg), **({"kill_at": kw["kill_at"]} if "kill_at" in kw else {})}

    worker = SCRIPTS / "train_worker.py"
    k = ws.sizes.steps // 2
    first = torchrun(worker, json.dumps({"jobs": [job("straight"), job("cut", kill_at=k)]}), timeout=600)
    killed = first.returncode != 0 and "SIGKILL" in first.stderr
    second = torchrun(worker, json.dumps({"jobs": [job("cut", resume=True)]}), timeout=600)
    backend = "gloo (CPU)" if ws.sizes.cpu else "nccl"
    if second.returncode != 0 or not killed:
        return {
            "ok": False,
            "backend": backend,
            "killed launch exit": first.returncode,
            "resume exit": second.returncode,
            "stderr": (second.stderr or first.stderr)[-1500:],
        }
    diff = max_diff(weights(ws.root / "procs-straight"), weights(ws.root / "procs-cut"))
    return {
        "ok": diff <= 1e-6,
        "backend": backend,
        "killed rank reported": killed,
        "max diff straight vs killed+resumed": diff,
        "bit for bit": diff == 0.0,
    }


# ----------------------------------------------------------------------------- training memory
MEMORY_WORKER = """
import json, os, sys
import torch
from sentkit.core.methods import method_target
from sentkit.training.loop import train

job = json.loads(sys.argv[1])
recipe = method_target(job["method"])
train(recipe.config_cls(**job["config"]), recipe, stop_at=job["stop_at"])
peak = torch.cuda.max_memory_allocated() if torch.cuda.is_available() else 0
print("PEAK " + json.dumps({"rank": int(os.environ.get("RANK", 0)), "peak": peak}), flush=True)
"""


def memory_ratio(planned: int, measured: int) -> dict[str, Any]:
    """The plan (less the CUDA context) against a measured max_memory_allocated: within 25 % passes."""
    ratio = planned / measured if measured > 0 else float("inf")
    return {
        "planned GB": round(planned / 1e9, 3),
        "measured GB": round(measured / 1e9, 3),
        "planned / measured": round(ratio, 3),
        "ok": 0.75 <= ratio <= 1.25,
    }


def memory_config(ws: Workspace, out: Path, **kw: Any) -> Any:
    """Two MNTP steps of the workspace's decoder (4 planned, the loop stopped after 2: no final save)."""
    from sentkit.training.recipes.mntp import MNTPConfig

    base: dict[str, Any] = dict(
        corpus=str(ws.corpus),
        out=str(out),
        model=str(ws.decoder),
        seq_len=ws.sizes.tp_len,
        batch_size=ws.sizes.tp_batch["mntp"],
        max_steps=4,
        checkpoint_every=1000,
        log_every=1,
        progress=False,
        device=ws.sizes.device,
    )
    return MNTPConfig(**{**base, **kw})


def planned_bytes(cfg: Any, model: Path, world_size: int) -> int:
    """The plan's total per process for `cfg`, less the CUDA context (which max_memory_allocated does not count)."""
    from sentkit.training.plan import CUDA_CONTEXT, ModelShape, RunSettings, plan

    shape = ModelShape.from_config(json.loads((model / "config.json").read_text()))
    return plan(shape, RunSettings.from_config(cfg, "mntp", shape, device="cuda", world_size=world_size)).total - (
        CUDA_CONTEXT
    )


def check_train_memory(ws: Workspace) -> dict[str, Any]:
    import torch

    from sentkit.training.loop import train
    from sentkit.training.recipes.mntp import MNTP

    cfg = memory_config(
        ws, ws.root / "memory-lora", lora_r=16, base_precision="bf16", gradient_checkpointing=True, precision="bf16"
    )
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    train(cfg, MNTP, stop_at=2)
    torch.cuda.synchronize()
    res = {
        "LoRA r=16, bf16 base, checkpointing": memory_ratio(
            planned_bytes(cfg, ws.decoder, 1), torch.cuda.max_memory_allocated() - before
        )
    }
    gpus = torch.cuda.device_count()
    if gpus < 2:
        res["FSDP"] = {"ok": None, "skipped": f"needs 2 GPUs ({gpus} visible)"}
    else:
        from check_support import torchrun
        from sentkit.core.config import to_dict

        fsdp = memory_config(ws, ws.root / "memory-fsdp", lora_r=0, distributed="fsdp", precision="bf16")
        worker = ws.root / "memory_worker.py"
        worker.write_text(MEMORY_WORKER)
        job = json.dumps({"method": "mntp", "config": to_dict(fsdp), "stop_at": 2})
        done = torchrun(worker, job, timeout=600)
        peaks = [json.loads(x[5:])["peak"] for x in done.stdout.splitlines() if x.startswith("PEAK ")]
        if done.returncode or len(peaks) != 2:
            res["FSDP"] = {"ok": False, "exit": done.returncode, "stderr": done.stderr[-1500:]}
        else:
            res["FSDP"] = memory_ratio(planned_bytes(fsdp, ws.decoder, 2), max(peaks))
    return {"ok": all(r["ok"] is not False for r in res.values()), **res}


GPU_ONLY = {"train_memory": "needs a GPU: the plan is compared with torch.cuda.max_memory_allocated"}

CHECKS: dict[str, Callable[[Workspace], dict[str, Any]]] = {
    "precision": check_precision,
    "precision_decoder": check_precision_decoder,
    "resume": check_resume,
    "grad_cache": check_grad_cache,
    "matmul": check_matmul,
    "encode": check_encode,
    **{f"encode_{p}": functools.partial(check_encode_half, precision=p) for p in ("bf16", "fp16")},
    **{m: functools.partial(check_train, method=m) for m in ("declutr", "simcse", "mlm", "mntp")},
    "two_procs": check_two_processes,
    "train_memory": check_train_memory,
}
THROUGHPUT = (
    "encode",
    "encode_bf16",
    "encode_fp16",
    "declutr",
    "simcse",
    "mlm",
    "mntp",
)  # the checks SENTKIT_GPU_CHECK_SLOW can slow


# ----------------------------------------------------------------------------- main
def gpu_facts() -> dict[str, Any]:
    import torch

    facts: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "host": platform.node(),
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
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
    results: dict[str, Any] = {
        "machine": gpu_facts(),
        "mode": "cpu" if args.cpu else "gpu",
        "finished": False,
        "checks": {},
    }
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="gpu-check-runs-", dir=out))
    try:
        ws = Workspace(work, sizes, args.slow)
        for key, fn in CHECKS.items():
            if args.only and key not in args.only:
                continue
            name = NAMES[key]
            if key == "two_procs" and not args.cpu and gpus < 2:
                results["checks"][name] = {"ok": None, "skipped": f"needs 2 GPUs ({gpus} visible)"}
                print(f"[SKIP] {name}: needs 2 GPUs ({gpus} visible)", flush=True)
                continue
            if key in GPU_ONLY and args.cpu:
                results["checks"][name] = {"ok": None, "skipped": GPU_ONLY[key]}
                print(f"[SKIP] {name}: {GPU_ONLY[key]}", flush=True)
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
                    if entry.is_dir() and entry.name not in ("corpus", "model", "model-dropout", "decoder", "store"):
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
    print(
        f"{len(results['checks']) - len(failed)} of {len(results['checks'])} checks passed or skipped in "
        f"{results['seconds']} s; results in {out / 'gpu_check.json'}" + (f"; the runs in {work}" if args.keep else "")
    )
    return FAILED if failed else PASSED


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        epilog="Exit status: 0 passed, 1 a check failed, 2 bad command line, 3 no GPU, "
        "4 no Python environment, 5 a package missing, 6 a CPU-only torch on a GPU machine. "
        "SENTKIT_GPU_CHECK_SLOW=NAME:FACTOR[,...] (NAME one of "
        f"{', '.join(THROUGHPUT)}) stretches that check's steps FACTOR times: its floor "
        "must fail it.",
    )
    ap.add_argument(
        "--cpu", action="store_true", help="every check that runs on a CPU, with a tiny model (tests the script)"
    )
    ap.add_argument("--steps", type=int, default=None, help="training steps per run (even; default 20, --cpu 4)")
    ap.add_argument(
        "--out",
        default=None,
        help="folder for gpu_check.json and the runs' folders (default: $OUT when set, else <temp>/sentkit-gpu-check)",
    )
    ap.add_argument(
        "--keep", action="store_true", help="keep the runs' folders (models, checkpoints, metrics) under --out"
    )
    ap.add_argument(
        "--only", default=None, metavar="CHECK[,CHECK]", help=f"run only these checks (of {', '.join(CHECKS)})"
    )
    args = ap.parse_args(argv)
    if args.steps is not None and (args.steps < 2 or args.steps % 2):
        ap.error("--steps must be an even number of at least 2")
    args.only = [x.strip() for x in args.only.split(",") if x.strip()] if args.only else None
    for key in args.only or []:
        if key not in CHECKS:
            from sentkit.core.registry import suggest

            ap.error(f"--only: no check {key!r} (checks: {', '.join(CHECKS)}).{suggest(key, list(CHECKS))}")
    try:
        args.slow = parse_slow(os.environ.get("SENTKIT_GPU_CHECK_SLOW", ""), THROUGHPUT)
    except ValueError as e:
        value = os.environ["SENTKIT_GPU_CHECK_SLOW"]
        print(f"gpu_check: error: SENTKIT_GPU_CHECK_SLOW={value!r}: {e}", file=sys.stderr)
        return USAGE
    stop = preflight(args.cpu)
    if stop is not None:
        print(f"gpu_check: error: {stop[1]}", file=sys.stderr)
        return stop[0]
    return run(args)


if __name__ == "__main__":
    sys.exit(main())

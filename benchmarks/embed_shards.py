"""Sharded `sentkit embed`: sentences per second against the number of processes, and sentkit's
single-process figure against sentence-transformers' multi-process pool, same input and model.

    python benchmarks/embed_shards.py [--n 10000] [--procs 2] [--model all-minilm-l6-v2] [--torchrun]
    python benchmarks/embed_shards.py --memory 2000000      # peak memory of the sharded path alone
    (either with --json FILE: the figures, as docs/benchmarks.md quotes them, also written there)

Every sentkit figure is the wall time of whole `sentkit embed` commands (start-up, model load,
reading and checking the input, writing and joining the .npy), the processes of a sharded run
started together; the torch threads of the machine's cores are split between them. The
sentence-transformers pool is timed from `start_multi_process_pool` (its workers load the model)
to the returned array, and, separately, its `encode` alone; the single-process
sentence-transformers `encode` (model load included) is timed too. Besides wall time, each run's
CPU seconds (all its processes, user + system) are counted: on a machine that other jobs share,
sentences per CPU-second is the figure that holds. OpenMP threads wait passively
(OMP_WAIT_POLICY=PASSIVE, for both libraries), so a starved thread does not spin. Prints a
Markdown table and the vectors' agreement.

`--memory N` measures what the sharded path itself holds: N texts through 2 shards and the join
into one .npy (384 dimensions, float32), with a stand-in encoder (constant vectors) so that no
model time is spent; it prints the peak resident memory of that process against the output's size.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts, here and in every child

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import gutenberg_sentences, machine


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def sentkit_run(
    src: Path, dst: Path, model: str, procs: int, *, shard: bool, block: int, torchrun: bool = False
) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of `sentkit embed --block BLOCK` over `procs` processes started together."""
    threads = max(1, (os.cpu_count() or 1) // procs)
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(threads),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    argv = ["-q", "embed", "--model", model, "--input", str(src), "--output", str(dst), "--block", str(block)]
    t, cpu = time.perf_counter(), children_cpu()
    if torchrun:
        # --standalone: torchrun's rendezvous on a free local port (two runs at once never collide)
        cmds = [
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",
                f"--nproc_per_node={procs}",
                "-m",
                "sentkit.cli.main",
                *argv,
            ]
        ]
    else:
        cmds = [
            [sys.executable, "-m", "sentkit.cli.main", *argv, *(["--shard", f"{i}/{procs}"] if shard else [])]
            for i in range(procs)
        ]
    running = [subprocess.Popen(c, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for c in cmds]
    for p in running:
        _, err = p.communicate()
        if p.returncode:
            raise SystemExit(f"sentkit embed failed: {err[-2000:]}")
    return time.perf_counter() - t, children_cpu() - cpu


def st_runs(texts: list[str], model_dir: str, workers: int) -> dict[str, tuple[float, float, np.ndarray]]:
    """sentence-transformers: one process (all cores), and a pool of `workers` CPU processes:
    {name: (wall s, CPU s, vectors)}."""
    import torch
    from sentence_transformers import SentenceTransformer

    out: dict[str, tuple[float, float, np.ndarray]] = {}
    torch.set_num_threads(os.cpu_count() or 1)
    t, cpu = time.perf_counter(), own_cpu()
    st = SentenceTransformer(model_dir, device="cpu")
    v = st.encode(texts, batch_size=32)
    out["sentence-transformers encode, 1 process (load + encode)"] = (time.perf_counter() - t, own_cpu() - cpu, v)
    os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))  # read by the spawned workers
    t, cpu = time.perf_counter(), own_cpu() + children_cpu()
    pool = st.start_multi_process_pool(["cpu"] * workers)
    t_enc = time.perf_counter()
    v = st.encode(texts, batch_size=32, pool=pool)
    done = time.perf_counter()
    st.stop_multi_process_pool(pool)  # joins the workers: their CPU time is counted from here
    out[f"sentence-transformers pool, {workers} processes (start + encode)"] = (
        done - t,
        own_cpu() + children_cpu() - cpu,
        v,
    )
    out[f"sentence-transformers pool, {workers} processes (encode only)"] = (done - t_enc, float("nan"), v)
    return out


def memory_child(n: int, json_path: str = "", dim: int = 384) -> None:
    """Embed n texts in 2 shards and join them, with constant vectors; print the peak RSS (and write the figures to
    `json_path`, if given)."""
    from sentkit.cli.embed_commands import _read_texts, _write_npy
    from sentkit.sharding.embed import Shard, embed_shard

    tmp = Path(tempfile.mkdtemp(prefix="embed-memory-"))
    src = tmp / "in.txt"
    with src.open("w", encoding="utf-8") as f:
        for i in range(n):
            f.write(f"sentence number {i} of the memory check, about as long as a short sentence\n")
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    def encode(texts: list[str]) -> np.ndarray:
        return np.full((len(texts), dim), 0.5, dtype=np.float32)

    t = time.perf_counter()
    for i in range(2):
        msg = embed_shard(
            tmp / "v.npy",
            Shard(i, 2),
            lambda: _read_texts(src, "text"),
            n,
            dim,
            encode,
            _write_npy,
            block=10000,
            dtype="float32",
            settings={},
            progress=False,
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    size = (tmp / "v.npy").stat().st_size
    print(f"{msg}; {time.perf_counter() - t:.0f} s")
    seconds = time.perf_counter() - t
    print(
        f"{n:,} texts x {dim} float32: output {size / 2**20:,.0f} MiB; peak RSS {peak / 1024:,.0f} MiB "
        f"({base / 1024:,.0f} MiB before embedding)"
    )
    shutil.rmtree(tmp)
    if json_path:
        figures = {
            "texts": n,
            "dim": dim,
            "output_mib": round(size / 2**20),
            "peak_rss_mib": round(peak / 1024),
            "rss_before_mib": round(base / 1024),
            "seconds": round(seconds, 1),
        }
        Path(json_path).write_text(json.dumps({"machine": machine(), "memory": figures}, indent=1) + "\n")


def main() -> None:
    if sys.argv[1:2] == ["--memory-child"]:
        memory_child(int(sys.argv[2]), *sys.argv[3:4])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--procs", default="2", help="comma-separated process counts for the sharded runs")
    ap.add_argument("--model", default="all-minilm-l6-v2")
    ap.add_argument("--st-workers", type=int, default=2)
    ap.add_argument("--torchrun", action="store_true", help="also time the largest count under torchrun")
    ap.add_argument("--memory", type=int, default=0, help="only the memory check, with this many texts")
    ap.add_argument("--json", default="", help="also write the figures here")
    args = ap.parse_args()
    if args.memory:
        child = [sys.executable, __file__, "--memory-child", str(args.memory), *([args.json] if args.json else [])]
        subprocess.run(child, check=True)
        return
    from sentkit.models.hub import resolve

    texts = [" ".join(t.split()) for t in gutenberg_sentences(args.n)]
    tmp = Path(tempfile.mkdtemp(prefix="embed-shards-"))
    src = tmp / "in.txt"
    src.write_text("\n".join(texts) + "\n", encoding="utf-8")
    rows: list[tuple[str, float, float, float]] = []

    def record(name: str, seconds: float, cpu: float) -> None:
        rows.append((name, seconds, cpu, os.getloadavg()[0]))
        print(f"{name}: {seconds:.1f} s, {len(texts) / seconds:.0f} sentences/s, {cpu:.1f} CPU s", flush=True)

    from sentkit.sharding.embed import part_rows

    # every run encodes the same blocks (the parts of the largest shard count), so that outputs can be equal bytes
    block = part_rows(len(texts), 10000, max(int(p) for p in args.procs.split(",")))
    record("sentkit embed, 1 process", *sentkit_run(src, tmp / "one.npy", args.model, 1, shard=False, block=block))
    one = np.load(tmp / "one.npy")
    same = []
    for procs in [int(p) for p in args.procs.split(",")]:
        dst = tmp / f"shards{procs}.npy"
        record(
            f"sentkit embed --shard i/{procs}, {procs} processes",
            *sentkit_run(src, dst, args.model, procs, shard=True, block=block),
        )
        same.append((tmp / "one.npy").read_bytes() == dst.read_bytes())
    if args.torchrun:
        procs = max(int(p) for p in args.procs.split(","))
        dst = tmp / "torchrun.npy"
        record(
            f"torchrun --nproc_per_node {procs} sentkit embed",
            *sentkit_run(src, dst, args.model, procs, shard=True, block=block, torchrun=True),
        )
        same.append((tmp / "one.npy").read_bytes() == dst.read_bytes())
    diffs = []
    for name, (seconds, cpu, v) in st_runs(texts, resolve(args.model), args.st_workers).items():
        record(name, seconds, cpu)
        diffs.append(float(np.abs(v - one).max()))
    print(f"\nmachine: {machine()}; load average {os.getloadavg()}")
    print(
        f"{len(texts)} sentences, model {args.model}; sharded outputs byte-identical to one process: {all(same)}; "
        f"max abs difference to sentence-transformers' vectors: {max(diffs):.1e}\n"
    )
    print("| run | wall s | sentences/s | CPU s | sentences per CPU-second | load (1 min) after |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, seconds, cpu, load in rows:
        per_cpu = f"{len(texts) / cpu:,.0f}" if cpu == cpu else "—"
        print(f"| {name} | {seconds:.1f} | {len(texts) / seconds:,.0f} | {cpu:.1f} | {per_cpu} | {load:.1f} |")
    shutil.rmtree(tmp)
    if args.json:
        out = {
            "machine": machine(),
            "sentences": len(texts),
            "block": block,
            "model": args.model,
            "sharded_byte_identical": all(same),
            "max_abs_diff_sentence_transformers": max(diffs),
            "runs": [
                {
                    "run": name,
                    "wall_s": round(seconds, 1),
                    "sentences_per_s": round(len(texts) / seconds),
                    "cpu_s": round(cpu, 1) if cpu == cpu else None,
                    "sentences_per_cpu_s": round(len(texts) / cpu) if cpu == cpu else None,
                    "load_after": round(load, 1),
                }
                for name, seconds, cpu, load in rows
            ],
        }
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()

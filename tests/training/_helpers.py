"""Shared by the training tests and the torchrun worker (plain functions, no pytest)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

from sentkit.data.store import TokenStore
from sentkit.methods import method_target
from sentkit.models.hub import load_mlm, position_limit
from sentkit.training.distributed import DistInfo, wrap
from sentkit.training.recipe import Recipe
from sentkit.training.recipes.declutr import DeclutrConfig
from sentkit.training.step import StepContext, forward_backward


def small_config(corpus: str, out: str, **kw: object) -> DeclutrConfig:
    base: dict[str, object] = dict(
        corpus=corpus, out=out, num_anchors=2, num_positives=2, min_span_len=8, max_span_len=32,
        batch_size=4, progress=False, checkpoint_every=1000, log_every=1,
    )
    base.update(kw)
    return DeclutrConfig(**base)  # type: ignore[arg-type]


def build(model_dir: str, cfg: Any, method: str | None = None, *, dropout: float | None = None,
          device: str = "cpu") -> tuple[Recipe, Any]:
    """(recipe, trainable module) of `method` (default: the one `cfg` configures) on the model at
    `model_dir`, on `device`, fp32."""
    method = method or next(n for n in ("declutr", "mlm", "simcse", "tsdae") if method_target(n).config_cls is type(cfg))
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


def step_gradients(model_dir: str, store_dir: str, cfg: Any, units: list[int], info: DistInfo, *,
                   method: str | None = None, step: int = 0, dropout: float | None = None,
                   reference: bool = False, device: str = "cpu") -> dict[str, torch.Tensor]:
    """Gradients of one step on `units` (this rank's share), averaged over ranks by DDP.

    `reference`: instead of the loop's step, back-propagate the whole step's loss through one graph
    built from the same micro-batches and dropout seeds (the oracle of gradient caching)."""
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


def one_graph_backward(ctx: StepContext, batch: Any, step: int) -> None:
    """The loss gradient caching must reproduce: every micro-batch forward kept in one graph, one
    contrastive loss over all their views, one backward."""
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


def save(obj: object, path: str | Path) -> None:
    torch.save(obj, path)


def prepare(corpus: str | Path, model_dir: str | Path, out: str | Path, **kw: Any) -> Path:
    from sentkit.data.store import prepare_store
    from sentkit.models.hub import load_tokenizer

    tok = load_tokenizer(str(model_dir))
    prepare_store(corpus, tok, out, show_progress=False, **kw)
    return Path(out)


def as_store(path: str | Path) -> TokenStore:
    return TokenStore(path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun(script: str | Path, *args: str, nproc: int = 2, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`script args` under torchrun: `nproc` processes on this machine (gloo on the CPU, one thread
    each). On a timeout the launcher and its workers are killed (a hung worker never outlives the test)."""
    import signal

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}", "--master_addr=127.0.0.1",
           f"--master_port={free_port()}", str(script), *args]
    with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)

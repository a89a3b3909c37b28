"""Batched re-implementation of SentEval's PyTorch classifier (senteval/tools/classifier.py).

SentEval trains one small model at a time. Here every model of a protocol (all folds x all L2
values) is trained at once as a stack of independent models, with the same semantics per model:

- init: `torch.manual_seed(seed)` then `nn.Linear` (kaiming-uniform), identical for every model
  (we draw the same numbers with a seeded `torch.Generator`);
- data order: `np.random.seed(seed)`; for `validation_split` first `permutation(n)` picks the
  dev part, then one `permutation(n_train)` per epoch; minibatches are consecutive slices
  (the last one shorter);
- loss: mean cross-entropy (SentEval's `size_average = False` is a no-op on modern torch);
- optimizer: SentEval's `get_optimizer` names with torch's defaults and update formulas,
  `weight_decay = l2reg`;
- early stopping: after every `epoch_size` epochs score dev accuracy; keep the best model;
  on a non-improving score stop if `count >= tenacity`, then `count += 1` (the count is never
  reset); loop while `nepoch <= max_epoch`.

Models that see the same minibatches (the L2 values of one fold) form a group and share every
gather and matrix product; a group is dropped once all its models have stopped. The maths runs
in numpy float32 with
closed-form gradients: these models are tiny, so per-operation overhead (about ten times
lower in numpy than in torch on CPU) dominates the cost.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from sentkit.evaluation.config import parse_optim

logger = logging.getLogger(__name__)

Params = dict[str, np.ndarray]  # one model's (or a grouped stack of models') parameters


@dataclass
class Job:
    """One classifier fit: rows of X to train on, and either dev rows or a validation split."""

    train: np.ndarray  # [n_train] int64 indices into X, in SentEval's order
    l2: float
    dev: np.ndarray | None = None  # [n_dev] indices into X
    validation_split: float | None = None


@dataclass
class TrainSpec:
    """Classifier hyper-parameters (SentEval's classifier config)."""

    nclasses: int
    nhid: int = 0
    optim: str = "adam"
    batch_size: int = 64
    tenacity: int = 5
    epoch_size: int = 4
    max_epoch: int = 200
    dropout: float = 0.0
    seed: int = 1111
    loss: str = "ce"  # "ce": cross-entropy on class ids; "mse_softmax": SentEval relatedness
    max_batch_bytes: int = 256 * 2**20


@dataclass
class FitResult:
    best_score: float
    params: Params  # single-model parameters (no leading model dim)
    nepoch: int = 0
    extra: dict[str, float] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Maths
# ---------------------------------------------------------------------------------------------
def init_params(inputdim: int, nclasses: int, nhid: int, seed: int) -> Params:
    """Parameters exactly as `torch.manual_seed(seed); nn.Linear(...)` (x2 for an MLP);
    weights stored [in, out]."""
    import torch

    g = torch.Generator().manual_seed(seed)

    def linear(fan_in: int, fan_out: int) -> tuple[np.ndarray, np.ndarray]:
        w = torch.empty(fan_out, fan_in)
        torch.nn.init.kaiming_uniform_(w, a=math.sqrt(5), generator=g)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        b = torch.empty(fan_out)
        torch.nn.init.uniform_(b, -bound, bound, generator=g)
        return np.ascontiguousarray(w.numpy().T), b.numpy().copy()

    if nhid == 0:
        w, b = linear(inputdim, nclasses)
        return {"w": w, "b": b}
    w1, b1 = linear(inputdim, nhid)
    w2, b2 = linear(nhid, nclasses)
    return {"w1": w1, "b1": b1, "w2": w2, "b2": b2}


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (np.tanh(0.5 * x) + 1.0)


def forward(params: Params, x: np.ndarray) -> np.ndarray:
    """Logits of one model (unstacked params). x [n, d] -> [n, C] (no dropout)."""
    if "w" in params:
        return x @ params["w"] + params["b"]
    return _sigmoid(x @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]


def predict(params: Params, X: np.ndarray, chunk: int = 65536) -> np.ndarray:
    """Logits of one model on X [n, d] -> [n, C]."""
    C = (params["w"] if "w" in params else params["w2"]).shape[-1]
    outs = [forward(params, X[s : s + chunk]) for s in range(0, X.shape[0], chunk)]
    return np.concatenate(outs) if outs else np.zeros((0, C), np.float32)


def _last_axis(op: np.ufunc, x: np.ndarray) -> np.ndarray:
    """`op.reduce(x, axis=-1, keepdims=True)`; for a short last axis (classes) as a few
    elementwise calls, which numpy runs much faster than a reduction over 2-5 elements."""
    C = x.shape[-1]
    if C > 16:
        return op.reduce(x, axis=-1, keepdims=True)  # type: ignore[no-any-return]
    out = x[..., 0].copy()
    for c in range(1, C):
        op(out, x[..., c], out=out)
    return out[..., None]


def softmax(z: np.ndarray) -> np.ndarray:
    """Softmax over the last axis."""
    e = np.exp(z - _last_axis(np.maximum, z))
    e /= _last_axis(np.add, e)
    return e


def relatedness_target(scores: np.ndarray, nclass: int = 5) -> np.ndarray:
    """SentEval / Tai et al. encoding of a score as a distribution over `nclass` classes:
    p[floor(y)] = y - floor(y), p[floor(y) - 1] = floor(y) - y + 1 (0-based)."""
    y = np.asarray(scores, dtype=np.float64)
    out = np.zeros((len(y), nclass), dtype=np.float32)
    fl = np.floor(y)
    for i in range(nclass):
        out[:, i] = np.where(i + 1 == fl + 1, y - fl, out[:, i])
        out[:, i] = np.where(i + 1 == fl, fl - y + 1, out[:, i])
    return out


# ---------------------------------------------------------------------------------------------
# Grouped layout: models that see the same minibatches (same train rows, same permutation
# stream; in SentEval's protocols the L2 values of one fold) form a group and share every
# gather. Parameters are stored [G, ..., K, ...] with K models per group:
#   w [G, d, K, C], b [G, K, C]; MLP: w1 [G, d, K, H], b1 [G, K, H], w2 [G, K, H, C], b2 [G, K, C].
# Per-model quantities (l2, step count, active flags) are [G, K] arrays.
# ---------------------------------------------------------------------------------------------
KAXIS = {"w": 2, "b": 1, "w1": 2, "b1": 1, "w2": 1, "b2": 1}


def _per_model(a: np.ndarray, key: str, ndim: int) -> np.ndarray:
    """Reshape a per-model [G, K] array to broadcast against parameter `key`."""
    shape = [1] * ndim
    shape[0], shape[KAXIS[key]] = a.shape[0], a.shape[1]
    return a.reshape(shape)


def group_params(single: Params, G: int, K: int) -> Params:
    """Repeat one model's parameters into the grouped layout."""
    out: Params = {}
    for k, v in single.items():
        if k in ("w", "w1"):  # [d, C] -> [G, d, K, C]
            out[k] = np.broadcast_to(v[None, :, None, :], (G, v.shape[0], K, v.shape[1])).copy()
        elif k == "w2":  # [H, C] -> [G, K, H, C]
            out[k] = np.broadcast_to(v[None, None], (G, K, *v.shape)).copy()
        else:  # [C] -> [G, K, C]
            out[k] = np.broadcast_to(v[None, None], (G, K, v.shape[0])).copy()
    return out


def model_params(params: Params, g: int, k: int) -> Params:
    """One model's parameters (unstacked) from the grouped layout."""
    out: Params = {}
    for key, v in params.items():
        out[key] = (v[g, :, k] if KAXIS[key] == 2 else v[g, k]).copy()
    return out


def forward_grouped(params: Params, xb: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """xb [G, n, d] -> (logits [G, n, K, C], hidden activations [G, n, K, H] or None)."""
    G, n, d = xb.shape
    if "w" in params:
        _, _, K, C = params["w"].shape
        z = np.matmul(xb, params["w"].reshape(G, d, K * C)).reshape(G, n, K, C)
        return z + params["b"][:, None], None
    _, _, K, H = params["w1"].shape
    h = _sigmoid(np.matmul(xb, params["w1"].reshape(G, d, K * H)).reshape(G, n, K, H) + params["b1"][:, None])
    z = np.matmul(h.transpose(0, 2, 1, 3), params["w2"]).transpose(0, 2, 1, 3)  # [G, n, K, C]
    return z + params["b2"][:, None], h


def _output_grad(p: np.ndarray, yb: np.ndarray, scale: np.ndarray | float, loss: str) -> np.ndarray:
    """d(mean loss)/d(logits). p [G, bs, K, C] softmax (overwritten for "ce"); yb [G, bs] ids
    or [G, bs, C] targets."""
    C = p.shape[-1]
    if loss == "ce":  # (p - onehot) * scale, in place (p is not needed afterwards)
        onehot = (np.arange(C, dtype=yb.dtype) == yb[..., None]).astype(p.dtype)  # [G, bs, C]
        np.subtract(p, onehot[:, :, None, :], out=p)
        p *= scale
        return p
    # MSE between softmax output and the target distribution, mean over bs * C
    gs = (p - yb[:, :, None, :]) * (scale * (2.0 / C))
    return p * (gs - _last_axis(np.add, gs * p))


def compute_grads(
    params: Params,
    xb: np.ndarray,
    yb: np.ndarray,
    mask: np.ndarray | None,
    loss: str,
    dropout: float = 0.0,
    rng: np.random.Generator | None = None,
) -> Params:
    """Gradients of each model's mean minibatch loss. xb [G, bs, d]; yb [G, bs] or
    [G, bs, C]; mask [G, bs] float (None: every row is real)."""
    G, bs, d = xb.shape
    if mask is None:
        scale: np.ndarray | float = 1.0 / bs
    else:
        scale = (mask / np.maximum(mask.sum(1, keepdims=True), 1.0)).astype(np.float32)[:, :, None, None]
    xt = xb.transpose(0, 2, 1)  # [G, d, bs]
    if "w" in params:
        _, _, K, C = params["w"].shape
        gl = _output_grad(softmax(forward_grouped(params, xb)[0]), yb, scale, loss)  # [G, bs, K, C]
        return {"w": np.matmul(xt, gl.reshape(G, bs, K * C)).reshape(G, d, K, C), "b": gl.sum(1)}
    _, _, K, H = params["w1"].shape
    pre = np.matmul(xb, params["w1"].reshape(G, d, K * H)).reshape(G, bs, K, H) + params["b1"][:, None]
    keep: np.ndarray | float = 1.0
    if dropout > 0:  # SentEval: Linear -> Dropout -> Sigmoid -> Linear
        assert rng is not None
        keep = (rng.random(pre.shape, dtype=np.float32) >= dropout).astype(np.float32) / (1 - dropout)
        pre = pre * keep
    h = _sigmoid(pre)  # [G, bs, K, H]
    hT = h.transpose(0, 2, 1, 3)  # [G, K, bs, H]
    z = np.matmul(hT, params["w2"]).transpose(0, 2, 1, 3) + params["b2"][:, None]
    gl = _output_grad(softmax(z), yb, scale, loss)  # [G, bs, K, C]
    glT = gl.transpose(0, 2, 1, 3)  # [G, K, bs, C]
    gh = np.matmul(glT, params["w2"].transpose(0, 1, 3, 2)).transpose(0, 2, 1, 3)  # [G, bs, K, H]
    gpre = gh * h * (1 - h) * keep
    return {
        "w1": np.matmul(xt, gpre.reshape(G, bs, K * H)).reshape(G, d, K, H),
        "b1": gpre.sum(1),
        "w2": np.matmul(hT.transpose(0, 1, 3, 2), glT),
        "b2": gl.sum(1),
    }


# ---------------------------------------------------------------------------------------------
# Optimizers (grouped, maskable) with torch's update formulas
# ---------------------------------------------------------------------------------------------
class StackedOptimizer:
    """Adam / RMSprop / Adagrad / SGD over grouped models, each with its own L2 and step count."""

    def __init__(self, spec: str, params: Params, l2: np.ndarray) -> None:
        self.name, opts = parse_optim(spec)
        defaults = {"adam": 1e-3, "rmsprop": 1e-2, "adagrad": 1e-2, "sgd": 0.0}
        self.lr = float(opts.get("lr", defaults[self.name]))
        self.beta1 = float(opts.get("beta1", 0.9))
        self.beta2 = float(opts.get("beta2", 0.999))
        self.alpha = float(opts.get("alpha", 0.99))
        self.eps = float(opts.get("eps", 1e-10 if self.name == "adagrad" else 1e-8))
        self.l2 = l2.astype(np.float32)  # [G, K]
        self.any_l2 = bool((self.l2 != 0).any())
        self.step_t = np.zeros(l2.shape, dtype=np.float64)  # steps taken per model
        self.same_t: int | None = 0  # the common step count while every model took every step
        self.state: dict[str, dict[str, np.ndarray]] = {
            k: {"m": np.zeros_like(v), "v": np.zeros_like(v)} for k, v in params.items()
        }

    def select(self, keep: np.ndarray) -> None:
        """Keep groups `keep` (indices into the leading axis)."""
        self.l2 = self.l2[keep]
        self.step_t = self.step_t[keep]
        for st in self.state.values():
            for k in st:
                st[k] = np.ascontiguousarray(st[k][keep])

    def step(self, params: Params, grads: Params, active: np.ndarray | None) -> None:
        """In-place update; `active` [G, K] bool: models that take this step (None: all)."""
        if active is not None and bool(active.all()):
            active = None
        if active is None:
            self.step_t += 1
            if self.same_t is not None:
                self.same_t += 1
            self._update(params, grads)
            return
        self.step_t += active
        self.same_t = None
        old = {k: v.copy() for k, v in params.items()}
        old_state = {k: {n: t.copy() for n, t in st.items()} for k, st in self.state.items()}
        self._update(params, grads)
        for k, p in params.items():
            a = _per_model(active, k, p.ndim)
            np.copyto(p, old[k], where=~a)
            for n in self.state[k]:
                np.copyto(self.state[k][n], old_state[k][n], where=~a)

    def _update(self, params: Params, grads: Params) -> None:
        if self.name == "adam":
            if self.same_t is not None:  # scalars: the common case, and cheaper
                step_size: np.ndarray | float = self.lr / (1 - self.beta1**self.same_t)
                bc2_sqrt: np.ndarray | float = math.sqrt(1 - self.beta2**self.same_t)
            else:
                t = np.maximum(self.step_t, 1)
                step_size = (self.lr / (1 - self.beta1**t)).astype(np.float32)  # [G, K]
                bc2_sqrt = np.sqrt(1 - self.beta2**t).astype(np.float32)
        for k, p in params.items():
            g = grads[k]
            if self.any_l2:
                g = g + _per_model(self.l2, k, p.ndim) * p
            st = self.state[k]
            if self.name == "adam":
                m, v = st["m"], st["v"]
                m += (1 - self.beta1) * (g - m)  # torch: exp_avg.lerp_(grad, 1 - beta1)
                v *= self.beta2
                v += (1 - self.beta2) * g * g
                if isinstance(step_size, np.ndarray):
                    denom = np.sqrt(v) / _per_model(np.asarray(bc2_sqrt), k, p.ndim) + self.eps
                    p -= _per_model(step_size, k, p.ndim) * (m / denom)
                else:
                    denom = np.sqrt(v)
                    denom /= bc2_sqrt
                    denom += self.eps
                    p -= step_size * (m / denom)
            elif self.name == "rmsprop":
                v = st["v"]
                v *= self.alpha
                v += (1 - self.alpha) * g * g
                p -= self.lr * (g / (np.sqrt(v) + self.eps))
            elif self.name == "adagrad":
                v = st["v"]
                v += g * g
                p -= self.lr * (g / (np.sqrt(v) + self.eps))
            else:  # sgd
                p -= self.lr * g


# ---------------------------------------------------------------------------------------------
# Data order (SentEval's numpy global RNG, reproduced with a local RandomState per stream)
# ---------------------------------------------------------------------------------------------
class _PermStream:
    """Permutations drawn after `np.random.seed(seed)`: `permutation(n_full)` first when a
    validation split is made, then one `permutation(n_train)` per epoch. Jobs with equal sizes
    draw equal permutations, so they share a stream."""

    def __init__(self, seed: int, n_full: int | None, n_train: int) -> None:
        self.rs = np.random.RandomState(seed)
        self.split_perm = self.rs.permutation(n_full) if n_full is not None else None
        self.n_train = n_train
        self.perms: dict[int, np.ndarray] = {}
        self.next_epoch = 0

    def epoch(self, e: int) -> np.ndarray:
        while self.next_epoch <= e:
            self.perms[self.next_epoch] = self.rs.permutation(self.n_train)
            self.perms.pop(self.next_epoch - 2, None)  # callers only look one epoch back
            self.next_epoch += 1
        return self.perms[e]


@dataclass
class _Group:
    jobs: list[int]  # job ids of the K models
    train: np.ndarray  # rows in SentEval's order (after the validation split)
    dev: np.ndarray
    stream: _PermStream


def _make_groups(jobs: list[Job], seed: int) -> list[_Group]:
    """Resolve validation splits; put jobs with identical data and order in one group. If the
    groups would have unequal sizes every job gets its own group."""
    streams: dict[tuple[int | None, int], _PermStream] = {}
    resolved = []
    for j in jobs:
        n = len(j.train)
        if j.dev is not None:
            key: tuple[int | None, int] = (None, n)
            s = streams.get(key) or _PermStream(seed, None, n)
            tr, dv = j.train, j.dev
        else:
            if not j.validation_split:
                raise ValueError("a job needs dev rows or a validation_split")
            cut = int(j.validation_split * n)
            key = (n, n - cut)
            s = streams.get(key) or _PermStream(seed, n, n - cut)
            assert s.split_perm is not None
            tr, dv = j.train[s.split_perm[cut:]], j.train[s.split_perm[:cut]]
        streams[key] = s
        resolved.append((np.asarray(tr, dtype=np.int64), np.asarray(dv, dtype=np.int64), s))
    by_key: dict[tuple[bytes, bytes, int], list[int]] = {}
    for i, (tr, dv, s) in enumerate(resolved):
        k = (hashlib.sha1(tr.tobytes()).digest(), hashlib.sha1(dv.tobytes()).digest(), id(s))
        by_key.setdefault(k, []).append(i)
    sizes = {len(v) for v in by_key.values()}
    members = list(by_key.values()) if len(sizes) == 1 else [[i] for i in range(len(jobs))]
    return [_Group(m, resolved[m[0]][0], resolved[m[0]][1], resolved[m[0]][2]) for m in members]


def _pad(rows: list[np.ndarray], fill: int = -1) -> np.ndarray:
    width = max((len(r) for r in rows), default=0)
    out = np.full((len(rows), width), fill, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


# ---------------------------------------------------------------------------------------------
# Scoring
# ---------------------------------------------------------------------------------------------
# (grouped params of the groups still training, their dev rows) -> scores [G, K]
DevScorer = Callable[[Params, list[np.ndarray]], np.ndarray]


def accuracy_scorer(X: np.ndarray, y: np.ndarray, max_bytes: int) -> DevScorer:
    """Dev accuracy of every model (ties -> first class, like torch's max)."""

    def score(params: Params, devs: list[np.ndarray]) -> np.ndarray:
        G = len(devs)
        K = next(iter(params.values())).shape[KAXIS[next(iter(params))]]
        out = np.zeros((G, K))
        width = max((len(d) for d in devs), default=1)
        chunk = max(1, int(max_bytes // max(1, width * X.shape[1] * 4)))
        for s in range(0, G, chunk):
            idx = _pad(devs[s : s + chunk])
            m = idx >= 0
            safe = np.where(m, idx, 0)
            sub = {k: v[s : s + chunk] for k, v in params.items()}
            pred = forward_grouped(sub, X[safe])[0].argmax(-1)  # [g, width, K]
            correct = ((pred == y[safe][:, :, None]) & m[:, :, None]).sum(1)
            out[s : s + len(idx)] = correct / np.maximum(1, m.sum(1))[:, None]
        return out

    return score


def single_model_scorer(fn: Callable[[Params, np.ndarray], float]) -> DevScorer:
    """Wrap `fn(one model's params, its dev rows) -> score` as a DevScorer."""

    def score(params: Params, devs: list[np.ndarray]) -> np.ndarray:
        K = next(iter(params.values())).shape[KAXIS[next(iter(params))]]
        return np.array([[fn(model_params(params, g, k), devs[g]) for k in range(K)] for g in range(len(devs))])

    return score


def _epoch_single_linear(
    X: np.ndarray,
    y: np.ndarray,
    order: np.ndarray,
    params: Params,
    opt: StackedOptimizer,
    bs: int,
    loss: str,
) -> None:
    """One epoch of a single linear model (G = K = 1) on 2-D views: the same maths as the
    grouped path with fewer numpy calls per step (relatedness runs ~70k such steps)."""
    assert opt.same_t is not None
    w = params["w"].reshape(params["w"].shape[1], -1)  # [d, C] view
    b = params["b"].reshape(-1)  # [C] view
    C = w.shape[1]
    slots = [
        (w, opt.state["w"]["m"].reshape(w.shape), opt.state["w"]["v"].reshape(w.shape)),
        (b, opt.state["b"]["m"].reshape(-1), opt.state["b"]["v"].reshape(-1)),
    ]
    l2 = float(opt.l2.reshape(-1)[0])
    nsteps = 0
    for s in range(0, len(order), bs):
        idx = order[s : s + bs]
        n = len(idx)
        xb = X[idx]  # [n, d]
        z = xb @ w
        z += b
        z -= z.max(1, keepdims=True)
        np.exp(z, out=z)
        z /= z.sum(1, keepdims=True)  # softmax p [n, C]
        if loss == "ce":
            z[np.arange(n), y[idx]] -= 1.0
            z *= 1.0 / n
            gl = z
        else:
            gs = (z - y[idx]) * (2.0 / (n * C))
            gl = z * (gs - (gs * z).sum(1, keepdims=True))
        grads = (xb.T @ gl, gl.sum(0))
        opt.same_t += 1
        nsteps += 1
        t = opt.same_t
        for (p, m, v), g in zip(slots, grads):
            if l2:
                g = g + l2 * p
            if opt.name == "adam":
                m += (1 - opt.beta1) * (g - m)
                v *= opt.beta2
                v += (1 - opt.beta2) * g * g
                denom = np.sqrt(v)
                denom /= math.sqrt(1 - opt.beta2**t)
                denom += opt.eps
                p -= (opt.lr / (1 - opt.beta1**t)) * (m / denom)
            elif opt.name == "rmsprop":
                v *= opt.alpha
                v += (1 - opt.alpha) * g * g
                p -= opt.lr * (g / (np.sqrt(v) + opt.eps))
            elif opt.name == "adagrad":
                v += g * g
                p -= opt.lr * (g / (np.sqrt(v) + opt.eps))
            else:
                p -= opt.lr * g
    opt.step_t += nsteps


# ---------------------------------------------------------------------------------------------
# The grouped trainer
# ---------------------------------------------------------------------------------------------
def fit_batched(
    X: np.ndarray,
    y: np.ndarray,
    jobs: list[Job],
    spec: TrainSpec,
    *,
    scorer: DevScorer | None = None,
) -> list[FitResult]:
    """Fit one classifier per job, all at once. X [N, d] float32; y [N] int64 (ce) or
    [N, C] float32 targets (mse_softmax). Returns each job's best dev score and parameters."""
    if not jobs:
        return []
    X = np.ascontiguousarray(X, dtype=np.float32)
    groups = _make_groups(jobs, spec.seed)
    if scorer is None:
        scorer = accuracy_scorer(X, y, spec.max_batch_bytes)
    G, K = len(groups), len(groups[0].jobs)
    params = group_params(init_params(X.shape[1], spec.nclasses, spec.nhid, spec.seed), G, K)
    l2 = np.array([[jobs[j].l2 for j in g.jobs] for g in groups])
    opt = StackedOptimizer(spec.optim, params, l2)
    rng = np.random.default_rng(spec.seed)

    live = list(range(G))  # groups still training (row r of the arrays = group live[r])
    training = np.ones((G, K), dtype=bool)  # models still training (all groups)
    best_score = np.full((G, K), -1.0)
    best: dict[tuple[int, int], Params] = {}
    count = np.zeros((G, K), dtype=np.int64)
    stopped_at = np.zeros((G, K), dtype=np.int64)
    nepoch = 0
    bs = spec.batch_size
    single = G == 1 and K == 1 and spec.nhid == 0  # fast path
    while live and nepoch <= spec.max_epoch:
        for e in range(nepoch, nepoch + spec.epoch_size):
            if single:
                _epoch_single_linear(X, y, groups[0].train[groups[0].stream.epoch(e)], params, opt, bs, spec.loss)
                continue
            orders = [groups[g].train[groups[g].stream.epoch(e)] for g in live]
            steps = max(-(-len(o) // bs) for o in orders)
            table = np.full((len(live), steps * bs), -1, dtype=np.int64)
            for r, o in enumerate(orders):
                table[r, : len(o)] = o
            tab = table.reshape(len(live), steps, bs)
            full_steps = min(len(o) for o in orders) // bs
            for s in range(steps):
                idx = tab[:, s]
                if s < full_steps:  # every group has a full minibatch
                    xb, yb = X[idx], y[idx]
                    active, mf = None, None
                else:
                    m: np.ndarray = idx >= 0
                    safe = np.where(m, idx, 0)
                    xb, yb = X[safe], y[safe]
                    has_rows = np.asarray(m.any(axis=1)).reshape(-1, 1)
                    active, mf = np.repeat(has_rows, K, axis=1), m.astype(np.float32)
                # (a stopped model in a live group keeps stepping: its best parameters are
                # saved already and its current ones are never read again)
                grads = compute_grads(params, xb, yb, mf, spec.loss, spec.dropout, rng)
                opt.step(params, grads, active)
        nepoch += spec.epoch_size
        scores = scorer(params, [groups[g].dev for g in live])
        keep: list[int] = []
        for r, g in enumerate(live):
            for k in range(K):
                if not training[g, k]:
                    continue
                sc = float(scores[r, k])
                if sc > best_score[g, k]:
                    best_score[g, k] = sc
                    best[g, k] = model_params(params, r, k)
                else:
                    if count[g, k] >= spec.tenacity:
                        training[g, k] = False
                        stopped_at[g, k] = nepoch
                    count[g, k] += 1
            if training[g].any():
                keep.append(r)
        if len(keep) < len(live):
            kt = np.array(keep, dtype=np.int64)
            params = {k: np.ascontiguousarray(v[kt]) for k, v in params.items()}
            opt.select(kt)
            live = [live[r] for r in keep]
    stopped_at[training] = nepoch
    out: list[FitResult | None] = [None] * len(jobs)
    for g, grp in enumerate(groups):
        for k, j in enumerate(grp.jobs):
            out[j] = FitResult(float(best_score[g, k]), best[g, k], int(stopped_at[g, k]))
    return [o for o in out if o is not None]

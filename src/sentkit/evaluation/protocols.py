"""SentEval's evaluation protocols on precomputed features (senteval/tools/validation.py,
relatedness.py, ranking.py, sts.py), built on the batched classifier."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from sentkit.evaluation.classifier import (
    FitResult,
    Job,
    TrainSpec,
    fit_batched,
    predict,
    relatedness_target,
    single_model_scorer,
    softmax,
)
from sentkit.evaluation.config import EvalConfig

logger = logging.getLogger(__name__)

# SentEval's L2 grid for its PyTorch classifier (usepytorch=True, the default):
# `[10**t for t in range(-5, -1)]`. (`[2**t ...]` is the C grid of its sklearn branch.)
L2_GRID = [10.0**t for t in range(-5, -1)]


def train_spec(cfg: EvalConfig, nclasses: int, *, nhid: int | None = None) -> TrainSpec:
    return TrainSpec(
        nclasses=nclasses,
        nhid=cfg.nhid if nhid is None else nhid,
        optim=cfg.optim,
        batch_size=cfg.batch_size,
        tenacity=cfg.tenacity,
        epoch_size=cfg.epoch_size,
        max_epoch=cfg.max_epoch,
        dropout=cfg.dropout,
        seed=cfg.seed,
        max_batch_bytes=cfg.max_batch_bytes,
    )


def _f32(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32)


def _tensor(x: np.ndarray, device: str) -> torch.Tensor:
    return torch.from_numpy(_f32(x)).to(device)


def _accuracy(params: dict[str, np.ndarray], X: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    pred = predict(params, X).argmax(-1)
    return float((pred == y).mean()) if len(y) else 0.0, pred


def stratified_folds(y: np.ndarray, k: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """sklearn's StratifiedKFold(k, shuffle=True, random_state=seed) (what SentEval uses)."""
    from sklearn.model_selection import StratifiedKFold

    skf = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    return [(tr, te) for tr, te in skf.split(np.zeros((len(y), 1)), y)]


def f1_binary(y: np.ndarray, pred: np.ndarray) -> float:
    tp = float(np.sum((pred == 1) & (y == 1)))
    fp = float(np.sum((pred == 1) & (y == 0)))
    fn = float(np.sum((pred == 0) & (y == 1)))
    return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)


# ---------------------------------------------------------------------------------------------
def inner_kfold(X: np.ndarray, y: np.ndarray, nclasses: int, cfg: EvalConfig) -> dict[str, Any]:
    """MR/CR/SUBJ/MPQA: outer k-fold; in each, inner k-fold picks L2; test on the outer fold."""
    Xt, yt = _f32(X), y.astype(np.int64)
    spec = train_spec(cfg, nclasses)
    outer = stratified_folds(y, cfg.kfold, 1111)  # SentEval hard-codes 1111 here
    jobs: list[Job] = []
    for tr, _ in outer:
        inner = stratified_folds(y[tr], cfg.kfold, 1111)
        for reg in L2_GRID:
            for itr, ite in inner:
                jobs.append(Job(train=tr[itr], dev=tr[ite], l2=reg))
    fits = fit_batched(Xt, yt, jobs, spec)
    per_fold = len(L2_GRID) * cfg.kfold
    devres, optregs = [], []
    for f in range(len(outer)):
        block = fits[f * per_fold : (f + 1) * per_fold]
        scores = [
            round(100 * float(np.mean([r.best_score for r in block[g * cfg.kfold : (g + 1) * cfg.kfold]])), 2)
            for g in range(len(L2_GRID))
        ]
        optregs.append(L2_GRID[int(np.argmax(scores))])
        devres.append(float(np.max(scores)))
    finals = fit_batched(
        Xt, yt, [Job(train=tr, l2=optregs[f], validation_split=0.05) for f, (tr, _) in enumerate(outer)], spec
    )
    testres = []
    for (_, te), fit in zip(outer, finals):
        acc, _ = _accuracy(fit.params, Xt[te], y[te])
        testres.append(round(100 * acc, 2))
    return {
        "devacc": round(float(np.mean(devres)), 2),
        "acc": round(float(np.mean(testres)), 2),
        "ndev": len(y),
        "ntest": len(y),
        "fold_acc": testres,
        "l2": optregs,
    }


def kfold_then_test(
    Xtr: np.ndarray, ytr: np.ndarray, Xte: np.ndarray, yte: np.ndarray, nclasses: int, cfg: EvalConfig
) -> dict[str, Any]:
    """TREC/MRPC: k-fold on train picks L2, refit on train (5% held out), score test."""
    X = np.concatenate([Xtr, Xte])
    Xt = _f32(X)
    yt = np.concatenate([ytr, yte]).astype(np.int64)
    spec = train_spec(cfg, nclasses)
    folds = stratified_folds(ytr, cfg.kfold, cfg.seed)
    jobs = [Job(train=tr, dev=te, l2=reg) for reg in L2_GRID for tr, te in folds]
    fits = fit_batched(Xt, yt, jobs, spec)
    k = len(folds)
    scores = [
        round(100 * float(np.mean([r.best_score for r in fits[g * k : (g + 1) * k]])), 2) for g in range(len(L2_GRID))
    ]
    optreg = L2_GRID[int(np.argmax(scores))]
    (final,) = fit_batched(Xt, yt, [Job(train=np.arange(len(ytr)), l2=optreg, validation_split=0.05)], spec)
    acc, pred = _accuracy(final.params, Xt[len(ytr) :], yte)
    return {
        "devacc": float(np.max(scores)),
        "acc": round(100 * acc, 2),
        "ndev": len(ytr),
        "ntest": len(yte),
        "pred": pred,
        "l2": optreg,
    }


def split_classifier(
    Xtr: np.ndarray,
    ytr: np.ndarray,
    Xdev: np.ndarray,
    ydev: np.ndarray,
    Xte: np.ndarray,
    yte: np.ndarray,
    nclasses: int,
    cfg: EvalConfig,
    *,
    noreg: bool = False,
    nhid: int | None = None,
) -> dict[str, Any]:
    """SST/SICK-E/SNLI/probing: pick L2 on dev, report test. The final refit of SentEval is
    the same deterministic fit as the search's, so its model is reused."""
    ntr, ndev = len(ytr), len(ydev)
    Xt = _f32(np.concatenate([Xtr, Xdev, Xte]))
    yt = np.concatenate([ytr, ydev, yte]).astype(np.int64)
    regs = [1e-9] if noreg else L2_GRID
    tr, dv = np.arange(ntr), np.arange(ntr, ntr + ndev)
    fits: list[FitResult] = fit_batched(
        Xt, yt, [Job(train=tr, dev=dv, l2=r) for r in regs], train_spec(cfg, nclasses, nhid=nhid)
    )
    scores = [round(100 * f.best_score, 2) for f in fits]
    best = int(np.argmax(scores))
    acc, _ = _accuracy(fits[best].params, Xt[ntr + ndev :], yte)
    return {
        "devacc": float(np.max(scores)),
        "acc": round(100 * acc, 2),
        "ndev": ndev,
        "ntest": len(yte),
        "l2": regs[best],
    }


# ---------------------------------------------------------------------------------------------
def pair_features(a: np.ndarray, b: np.ndarray, kind: str = "absdiff_prod") -> np.ndarray:
    """[|u-v|, u*v] (SentEval pair tasks) or [u, v, u*v, |u-v|] (SNLI). a, b [n, d]."""
    if kind == "snli":
        return np.hstack([a, b, a * b, np.abs(a - b)])
    return np.hstack([np.abs(a - b), a * b])


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import pearsonr

    if len(x) < 2 or np.std(x) == 0 or np.std(y) == 0:
        return 0.0
    r = float(pearsonr(x, y)[0])
    return 0.0 if r != r else r


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import spearmanr

    if len(x) < 2 or np.std(x) == 0 or np.std(y) == 0:
        return 0.0
    r = float(spearmanr(x, y)[0])
    return 0.0 if r != r else r


def relatedness(
    Ftr: np.ndarray,
    ytr: np.ndarray,
    Fdev: np.ndarray,
    ydev: np.ndarray,
    Fte: np.ndarray,
    yte: np.ndarray,
    cfg: EvalConfig,
) -> dict[str, Any]:
    """SICK-R/STS-B: softmax regression onto the 5-class score distribution, Adam, batch 64,
    50 epochs between dev evaluations, early stopping on dev Pearson (tenacity 3)."""
    ntr, ndev = len(ytr), len(ydev)
    Xt = _f32(np.concatenate([Ftr, Fdev, Fte]))
    Yt = np.concatenate([relatedness_target(ytr), relatedness_target(ydev), relatedness_target(yte)])
    r = np.arange(1, 6, dtype=np.float32)
    Xdev = Xt[ntr : ntr + ndev]

    def dev_pearson(params: dict[str, np.ndarray], dev_rows: np.ndarray) -> float:
        yhat = (softmax(predict(params, Xdev)) @ r).astype(np.float64)
        return _pearson(yhat, ydev)

    spec = TrainSpec(
        nclasses=5,
        nhid=0,
        optim="adam",
        batch_size=64,
        tenacity=cfg.relatedness_tenacity,
        epoch_size=cfg.relatedness_epochs,
        max_epoch=cfg.relatedness_max_epoch,
        seed=cfg.seed,
        loss="mse_softmax",
    )
    (fit,) = fit_batched(
        Xt,
        Yt,
        [Job(train=np.arange(ntr), dev=np.arange(ntr, ntr + ndev), l2=0.0)],
        spec,
        scorer=single_model_scorer(dev_pearson),
    )
    yhat = (softmax(predict(fit.params, Xt[ntr + ndev :])) @ r).astype(np.float64)
    return {
        "devpearson": fit.best_score,
        "pearson": _pearson(yhat, yte),
        "spearman": _spearman(yhat, yte),
        "mse": float(np.mean((yhat - yte) ** 2)),
        "ndev": ndev,
        "ntest": len(yte),
    }


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine with SentEval's nan_to_num (a zero vector scores 0). a, b [n, d] -> [n]."""
    a64, b64 = np.nan_to_num(a.astype(np.float64)), np.nan_to_num(b.astype(np.float64))
    num = (a64 * b64).sum(1)
    den = np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.nan_to_num(num / den)


# Pair lengths (the mean number of whitespace words of the two sentences) that STS scores are split by.
LENGTH_BINS: tuple[tuple[str, float, float], ...] = (("1-8", 0, 8.5), ("9-15", 8.5, 15.5), ("16+", 15.5, float("inf")))


def pair_lengths(a: Sequence[str], b: Sequence[str]) -> np.ndarray:
    """Mean whitespace word count of each pair's two sentences [n]."""
    return np.array([(len(x.split()) + len(y.split())) / 2 for x, y in zip(a, b)], dtype=np.float64)


def by_length(sys: np.ndarray, gold: np.ndarray, lengths: np.ndarray) -> dict[str, dict[str, float]]:
    """Spearman of cosine against gold within each pair-length bin (LENGTH_BINS), with its count."""
    out = {}
    for name, lo, hi in LENGTH_BINS:
        m = (lengths > lo) & (lengths <= hi)
        out[name] = {"spearman": _spearman(sys[m], gold[m]), "nsamples": int(m.sum())}
    return out


def sts_scores(
    subsets: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]], lengths: dict[str, np.ndarray] | None = None
) -> dict[str, Any]:
    """Cosine STS per subset (Pearson, Spearman, n) and over subsets: SentEval's 'all' mean and
    n-weighted mean, plus the 'concatenated' score over all pairs (later papers). With `lengths`
    (each subset's pair lengths), 'all' also holds the concatenated score per pair-length bin."""
    res: dict[str, Any] = {}
    sys_all, gold_all = [], []
    for name, (a, b, gold) in subsets.items():
        sys = cosine_rows(a, b)
        res[name] = {"pearson": _pearson(sys, gold), "spearman": _spearman(sys, gold), "nsamples": len(gold)}
        sys_all.append(sys)
        gold_all.append(gold)
    names = list(subsets)
    w = np.array([res[n]["nsamples"] for n in names], dtype=np.float64)
    pr = np.array([res[n]["pearson"] for n in names])
    sr = np.array([res[n]["spearman"] for n in names])
    cs, cg = np.concatenate(sys_all), np.concatenate(gold_all)
    res["all"] = {
        "pearson": {"mean": float(pr.mean()), "wmean": float(np.average(pr, weights=w))},
        "spearman": {"mean": float(sr.mean()), "wmean": float(np.average(sr, weights=w))},
        "concatenated": {"pearson": _pearson(cs, cg), "spearman": _spearman(cs, cg)},
    }
    if lengths is not None:
        res["all"]["by_length"] = by_length(cs, cg, np.concatenate([lengths[n] for n in names]))
    return res


# ---------------------------------------------------------------------------------------------
def _recalls(ranks: np.ndarray) -> tuple[float, float, float, float]:
    n = max(1, len(ranks))
    return (
        100.0 * float(np.sum(ranks < 1)) / n,
        100.0 * float(np.sum(ranks < 5)) / n,
        100.0 * float(np.sum(ranks < 10)) / n,
        float(np.floor(np.median(ranks)) + 1),
    )


def retrieval_ranks(img: np.ndarray, txt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ranks for image->text and text->image retrieval, 5 captions per image (rows of `img` are
    repeated 5 times, as SentEval stores them). img, txt [5N, p] L2-normalised."""
    ims = img[::5]  # [N, p]
    scores = ims @ txt.T  # [N, 5N]
    npts = ims.shape[0]
    order = np.argsort(-scores, axis=1, kind="stable")
    pos = np.empty_like(order)
    np.put_along_axis(pos, order, np.arange(order.shape[1])[None, :].repeat(npts, 0), axis=1)
    i2t = np.array([pos[i, 5 * i : 5 * i + 5].min() for i in range(npts)])
    st = txt @ ims.T  # [5N, N]
    order_t = np.argsort(-st, axis=1, kind="stable")
    t2i = np.array([int(np.where(order_t[j] == j // 5)[0][0]) for j in range(st.shape[0])])
    return i2t, t2i


def image_caption_retrieval(
    train: tuple[np.ndarray, np.ndarray],
    dev: tuple[np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    cfg: EvalConfig,
) -> dict[str, Any]:
    """COCO: linear projections of images and captions to `projdim`, pairwise ranking loss with
    30 contrastive samples, Adam, batch 128, early stopping on the dev recall sum (tenacity 3).
    Each pair is (sentence features [5N, d], image features [5N, d_img])."""
    g = torch.Generator().manual_seed(cfg.seed)
    rs = np.random.RandomState(cfg.seed)
    (ttxt, timg), (dtxt, dimg), (etxt, eimg) = train, dev, test
    # created without torch's global-RNG init, then initialised like nn.Linear from `g`
    img_proj = torch.nn.utils.skip_init(torch.nn.Linear, timg.shape[1], cfg.coco_projdim)
    sent_proj = torch.nn.utils.skip_init(torch.nn.Linear, ttxt.shape[1], cfg.coco_projdim)
    for lin in (img_proj, sent_proj):  # SentEval builds imgproj first
        with torch.no_grad():
            torch.nn.init.kaiming_uniform_(lin.weight, a=5**0.5, generator=g)
            bound = 1 / lin.weight.shape[1] ** 0.5
            torch.nn.init.uniform_(lin.bias, -bound, bound, generator=g)
    img_proj.to(cfg.device)
    sent_proj.to(cfg.device)
    params = [*img_proj.parameters(), *sent_proj.parameters()]
    opt = torch.optim.Adam(params)
    Tt, Ti = _tensor(ttxt, cfg.device), _tensor(timg, cfg.device)
    bs, nc, margin = 128, 30, cfg.coco_margin

    def norm(x: torch.Tensor) -> torch.Tensor:
        return x / x.pow(2).sum(-1, keepdim=True).sqrt()

    def evaluate(txt: np.ndarray, img: np.ndarray) -> dict[str, float]:
        with torch.no_grad():
            pt = norm(sent_proj(_tensor(txt, cfg.device))).cpu().numpy()
            pi = norm(img_proj(_tensor(img, cfg.device))).cpu().numpy()
        n = len(txt)
        nfold = 5 if n >= 25000 else 1
        size = n // nfold
        acc = np.zeros(8)
        for f in range(nfold):
            sl = slice(f * size, (f + 1) * size)
            i2t, t2i = retrieval_ranks(pi[sl], pt[sl])
            acc += np.array([*_recalls(i2t), *_recalls(t2i)]) / nfold
        keys = ["r1_i2t", "r5_i2t", "r10_i2t", "medr_i2t", "r1_t2i", "r5_t2i", "r10_t2i", "medr_t2i"]
        return dict(zip(keys, acc.tolist()))

    best, best_state, count, nepoch = -1.0, None, 0, 0
    while nepoch <= cfg.coco_max_epoch:
        perm = rs.permutation(len(Tt))
        for i in range(0, len(Tt), bs):
            idx = perm[i : i + bs]
            rest = np.concatenate([perm[:i], perm[i + bs :]])
            if len(rest) == 0:  # tiny train set (tests): contrast within the batch
                rest = idx
            ic = torch.from_numpy(rs.choice(rest, nc * len(idx)))
            sc = torch.from_numpy(rs.choice(rest, nc * len(idx)))
            ti = torch.from_numpy(idx)
            img = norm(img_proj(Ti[ti])).repeat_interleave(nc, 0)
            sen = norm(sent_proj(Tt[ti])).repeat_interleave(nc, 0)
            imgc, senc = norm(img_proj(Ti[ic])), norm(sent_proj(Tt[sc]))
            anchor = (img * sen).sum(1)
            loss = (
                torch.clamp(margin - anchor + (img * senc).sum(1), min=0).sum()
                + torch.clamp(margin - anchor + (sen * imgc).sum(1), min=0).sum()
            )
            opt.zero_grad()
            loss.backward()
            opt.step()
        nepoch += 1
        r = evaluate(dtxt, dimg)
        score = sum(r[k] for k in ("r1_i2t", "r5_i2t", "r10_i2t", "r1_t2i", "r5_t2i", "r10_t2i"))
        if score > best:
            best = score
            best_state = [p.detach().clone() for p in params]
        else:
            if count >= 3:
                break
            count += 1
    assert best_state is not None
    with torch.no_grad():
        for p, s in zip(params, best_state):
            p.copy_(s)
    out: dict[str, Any] = evaluate(etxt, eimg)
    out["devscore"] = best
    out["mean_recall"] = float(
        np.mean([out[k] for k in ("r1_i2t", "r5_i2t", "r10_i2t", "r1_t2i", "r5_t2i", "r10_t2i")])
    )
    out["ndev"], out["ntest"] = len(dtxt), len(etxt)
    return out


# ---------------------------------------------------------------------------------------------
# Retrieval (user tasks in BEIR's layout): exact cosine search, trec_eval / BEIR metrics
# ---------------------------------------------------------------------------------------------
def _unit(x: np.ndarray) -> np.ndarray:
    x64 = np.nan_to_num(x.astype(np.float64))
    n = np.linalg.norm(x64, axis=1, keepdims=True)
    return np.divide(x64, n, out=np.zeros_like(x64), where=n > 0)


def exact_search(
    queries: np.ndarray,
    docs: np.ndarray,
    query_ids: list[str],
    doc_ids: list[str],
    k: int,
    *,
    ignore_identical_ids: bool = True,
) -> dict[str, list[tuple[str, float]]]:
    """The `k` documents of highest cosine similarity for each query, best first; ties ordered as
    trec_eval orders them (document id, descending). A document whose id is the query's id is
    left out (BEIR's ``ignore_identical_ids``). queries [m, d], docs [n, d]."""
    q, dn = _unit(queries), _unit(docs)
    order_desc = np.argsort(np.argsort(np.array(doc_ids, dtype=object), kind="stable"), kind="stable")
    tie = -order_desc  # a larger id sorts first on a tie
    pos = {d: i for i, d in enumerate(doc_ids)}
    out: dict[str, list[tuple[str, float]]] = {}
    block = max(1, (1 << 22) // max(1, len(doc_ids)))
    for s in range(0, len(query_ids), block):
        scores = q[s : s + block] @ dn.T  # [b, n]
        for r, qid in enumerate(query_ids[s : s + block]):
            row = scores[r].copy()
            if ignore_identical_ids and qid in pos:
                row[pos[qid]] = -np.inf
            cand = np.arange(len(row))
            if len(row) > k:  # the k best and every document tied with the k-th
                cand = np.flatnonzero(row >= np.partition(row, len(row) - k)[len(row) - k])
            rank = cand[np.lexsort((tie[cand], -row[cand]))]
            top = [int(j) for j in rank[:k] if np.isfinite(row[j])]
            out[qid] = [(doc_ids[j], float(row[j])) for j in top]
    return out


def ir_metrics(
    qrels: dict[str, dict[str, int]],
    ranked: dict[str, list[tuple[str, float]]],
    *,
    ndcg_k: int = 10,
    mrr_k: int = 10,
    recall_k: int = 100,
) -> dict[str, float]:
    """BEIR's scores of a ranking (as fractions), as `beir.retrieval.evaluation` computes them:
    nDCG@k and Recall@k as pytrec_eval's ``ndcg_cut`` / ``recall`` (gain = the judged relevance,
    discount log2(rank + 1), ideal ranking from every judged document; relevant = relevance >= 1),
    averaged over the judged queries that were ranked; MRR@k as BEIR's custom ``mrr`` (1 / rank of
    the first document with relevance > 0 in the top k), summed and divided by the number of
    judged queries."""
    evaluated = [q for q in qrels if q in ranked]
    ndcg, recall, mrr = 0.0, 0.0, 0.0
    for q in evaluated:
        rels = qrels[q]
        docs = [d for d, _ in ranked[q]]
        dcg = sum(rels.get(d, 0) / np.log2(i + 2) for i, d in enumerate(docs[:ndcg_k]) if rels.get(d, 0) > 0)
        ideal = sorted((r for r in rels.values() if r > 0), reverse=True)[:ndcg_k]
        idcg = sum(r / np.log2(i + 2) for i, r in enumerate(ideal))
        ndcg += dcg / idcg if idcg > 0 else 0.0
        relevant = {d for d, r in rels.items() if r >= 1}
        recall += len(relevant & set(docs[:recall_k])) / len(relevant) if relevant else 0.0
        for i, d in enumerate(docs[:mrr_k]):
            if rels.get(d, 0) > 0:
                mrr += 1.0 / (i + 1)
                break
    n = max(1, len(evaluated))
    return {
        f"ndcg_at_{ndcg_k}": ndcg / n,
        f"mrr_at_{mrr_k}": mrr / max(1, len(qrels)),
        f"recall_at_{recall_k}": recall / n,
        "nqueries": len(evaluated),
    }

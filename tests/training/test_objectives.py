from __future__ import annotations

import itertools
import math

import pytest
import torch

from sentkit.models.pooling import cls_pool, mean_pool
from sentkit.objectives.contrastive import info_nce
from sentkit.objectives.mlm import IGNORE_INDEX, mask_tokens
from sentkit.training.schedule import slanted_triangular


def loop_nt_xent(anchors: torch.Tensor, positives: torch.Tensor, tau: float) -> float:
    """Plain-loop NT-Xent: each of the 2N rows against its partner, all others negatives."""
    z = torch.cat([anchors, positives]).double()
    n2 = z.shape[0]
    n = n2 // 2
    total = 0.0
    for i in range(n2):
        j = i + n if i < n else i - n

        def cos(a: torch.Tensor, b: torch.Tensor) -> float:
            return float(a @ b / (a.norm() * b.norm()))

        num = math.exp(cos(z[i], z[j]) / tau)
        den = sum(math.exp(cos(z[i], z[k]) / tau) for k in range(n2) if k != i)
        total += -math.log(num / den)
    return total / n2


@pytest.mark.parametrize("n,d,tau", [(1, 4, 0.05), (3, 8, 0.05), (6, 5, 0.5)])
def test_info_nce_matches_loop(n: int, d: int, tau: float) -> None:
    g = torch.Generator().manual_seed(n * 100 + d)
    a = torch.randn(n, d, generator=g)
    p = torch.randn(n, d, generator=g)
    assert float(info_nce(a, p, tau)) == pytest.approx(loop_nt_xent(a, p, tau), rel=1e-4)


@pytest.mark.parametrize("symmetric", [True, False])
def test_info_nce_is_float32_under_bf16_autocast(symmetric: bool) -> None:
    """Under autocast (bf16 training) the similarities stay float32: the loss equals the loop's, where a bf16
    matmul of the normalised embeddings is off by ~1e-2 at temperature 0.05 (checked below, so this can fail)."""
    g = torch.Generator().manual_seed(7)
    a, p = torch.randn(32, 256, generator=g), torch.randn(32, 256, generator=g)
    exact = float(info_nce(a.double(), p.double(), 0.05, symmetric=symmetric))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ours = float(info_nce(a, p, 0.05, symmetric=symmetric))
        z = torch.nn.functional.normalize(torch.cat([a, p]), dim=-1)
        assert (z @ z.T).dtype == torch.bfloat16  # what autocast would otherwise compute
    assert ours == pytest.approx(exact, abs=1e-5)
    half = torch.nn.functional.normalize(torch.cat([a, p]), dim=-1).bfloat16().float()
    if symmetric:
        assert abs(float(info_nce(half[:32], half[32:], 0.05)) - exact) > 1e-4


def test_info_nce_low_when_pairs_match() -> None:
    a = torch.eye(4) * 3
    assert float(info_nce(a, a.clone(), 0.05)) < 1e-6
    assert float(info_nce(a, a.roll(1, 0), 0.05)) > 10


def test_mean_pool_ignores_padding() -> None:
    h = torch.tensor([[[1.0, 1.0], [3.0, 5.0], [100.0, 100.0]]])
    m = torch.tensor([[1, 1, 0]])
    assert mean_pool(h, m).tolist() == [[2.0, 3.0]]
    assert cls_pool(h, m).tolist() == [[1.0, 1.0]]


def test_mlm_masking_rules() -> None:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 2000, (200, 100), generator=g)
    maskable = torch.ones_like(ids, dtype=torch.bool)
    maskable[:, 0] = False  # [CLS]
    maskable[:, -5:] = False  # [SEP] + padding
    out, labels = mask_tokens(ids, maskable, mask_token_id=103, vocab_size=30522, generator=g, probability=0.15)
    chosen = labels != IGNORE_INDEX
    assert not chosen[~maskable].any(), "special/padding tokens must never be chosen"
    assert (out[~maskable] == ids[~maskable]).all()
    assert (out[~chosen] == ids[~chosen]).all(), "unchosen tokens are untouched"
    assert (labels[chosen] == ids[chosen]).all()
    rate = chosen.sum().item() / maskable.sum().item()
    assert abs(rate - 0.15) < 0.01
    n = chosen.sum().item()
    as_mask = ((out == 103) & chosen).sum().item() / n
    kept = ((out == ids) & chosen).sum().item() / n
    assert abs(as_mask - 0.8) < 0.03
    # 10 % kept plus random replacements that happen to equal the original (negligible)
    assert abs(kept - 0.1) < 0.02
    assert abs(1 - as_mask - kept - 0.1) < 0.02


def test_slanted_triangular_shape() -> None:
    total = 100
    vals = [slanted_triangular(s, total, cut_frac=0.1, ratio=32) for s in range(total + 1)]
    assert vals[0] == pytest.approx(1 / 32)
    assert max(vals) == pytest.approx(1.0)
    assert vals.index(max(vals)) == 10
    assert all(x <= y for x, y in itertools.pairwise(vals[:11]))
    assert all(x >= y for x, y in itertools.pairwise(vals[10:]))
    assert vals[-1] == pytest.approx(1 / 32)

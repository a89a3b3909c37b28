"""Tiny random-initialised decoder language models of three families (GPT-2, Llama, Qwen2), each with a small
byte-level BPE tokenizer trained on the test corpus words and the special tokens of its family, saved as a causal-LM
checkpoint folder (what a Hugging Face decoder checkpoint is): what the decoder tests build their models from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

FAMILIES = ("gpt2", "llama", "qwen2")

# per family: (bos, eos, pad, unk, template of a single text); None: the family's tokenizer has none
SPECIALS: dict[str, tuple[str | None, str, str | None, str | None, str | None]] = {
    "gpt2": ("<|endoftext|>", "<|endoftext|>", None, "<|endoftext|>", None),  # no padding token, nothing added
    "llama": ("<s>", "</s>", None, "<unk>", "<s> $A"),  # a BOS before every text, no padding token
    "qwen2": (None, "<|endoftext|>", "<|endoftext|>", None, None),  # pads with its end-of-text token
}


def tiny_tokenizer(family: str) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    from check_support import make_docs

    bos, eos, pad, unk, template = SPECIALS[family]
    special = list(dict.fromkeys(t for t in (bos, eos, pad, unk) if t))
    tok = Tokenizer(models.BPE(unk_token=unk))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        [*make_docs(20, 200), "The river runs past the old stone bridge."],
        trainers.BpeTrainer(
            vocab_size=300,
            special_tokens=special,
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    if template is not None:
        tok.post_processor = processors.TemplateProcessing(
            single=template, pair=f"{template} $B:1", special_tokens=[(bos, tok.token_to_id(bos))]
        )
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    kw = {k: v for k, v in (("bos_token", bos), ("eos_token", eos), ("pad_token", pad), ("unk_token", unk)) if v}
    return PreTrainedTokenizerFast(tokenizer_object=tok, **kw)


def tiny_config(family: str, tok: Any, *, hidden: int = 32, layers: int = 2, heads: int = 4) -> Any:
    from transformers import GPT2Config, LlamaConfig, Qwen2Config

    ids = {
        "bos_token_id": tok.bos_token_id,
        "eos_token_id": tok.eos_token_id,
        "pad_token_id": tok.pad_token_id,
        "vocab_size": len(tok),
        "tie_word_embeddings": True,
    }
    if family == "gpt2":
        return GPT2Config(
            n_embd=hidden,
            n_layer=layers,
            n_head=heads,
            n_positions=64,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            **ids,
        )
    cls = LlamaConfig if family == "llama" else Qwen2Config
    return cls(
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads // 2,
        max_position_embeddings=64,
        **ids,
    )


def tiny_decoder(family: str, out: Path, *, seed: int = 0) -> Path:
    """A `family` causal LM (hidden 32, 2 layers, 4 heads) with random weights (torch seeded with `seed`) and its
    tiny tokenizer, saved at `out` as transformers saves a causal-LM checkpoint."""
    import torch
    from transformers import AutoModelForCausalLM

    from sentkit.core.logs import quiet_transformers

    tok = tiny_tokenizer(family)
    torch.manual_seed(seed)
    with quiet_transformers():
        AutoModelForCausalLM.from_config(tiny_config(family, tok)).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def decoder_recipe_config(config_cls: Any, corpus: Path, out: Path, model: Path, **kw: object) -> Any:
    """A decoder recipe's config (CLM, MNTP) for a tiny run: 4 sequences of 32 tokens, logs every step."""
    base: dict[str, object] = {
        "corpus": str(corpus),
        "out": str(out),
        "model": str(model),
        "progress": False,
        "log_every": 1,
        "batch_size": 4,
        "checkpoint_every": 1000,
        "seq_len": 32,
    }
    return config_cls(**{**base, **kw})


def decoder_recipe(recipe_cls: Any, cfg: Any) -> Any:
    """The recipe `recipe_cls` on `cfg`'s model, its random parts seeded (torch seed 0), 64 buffer rows."""
    import torch

    torch.manual_seed(0)
    lm, tok = recipe_cls.load_model(cfg, Path(cfg.out))
    return recipe_cls(cfg, lm, tok, 64)

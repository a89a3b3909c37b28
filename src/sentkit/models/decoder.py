"""Decoder (causal) language models as sentence encoders: which models are decoders, what their tokenizer needs
(a padding token, an end-of-sequence token for last-token pooling, right padding), position ids that do not
depend on the padding side, and the attention switch (causal or bidirectional).

- **Which**: a model whose family transformers lists among causal LMs and not among masked LMs (GPT-2, Llama,
  Qwen2, Mistral, Gemma, ...; BERT-style families, listed in both, stay encoders), and not an encoder-decoder.
- **Padding**: a tokenizer without a padding token (GPT-2, Llama) pads with its end-of-sequence token, as
  sentence-transformers and LLM2Vec do; padding is on the right, and the attention mask (built from lengths, never
  from token ids: the padding token may be a real end-of-sequence token of the text) keeps it out of every
  state. `position_ids` counts positions from each row's first token, so a left-padded batch gives the same
  states as a right-padded one and as one text at a time.
- **No end-of-sequence token**: a tokenizer without one takes the one its model's config names (``eos_token_id``,
  the first of a list), as generation would stop at it (`ensure_eos`); where neither names one, one error says how
  to give the tokenizer one.
- **End of sequence**: last-token pooling reads the state of the last token; decoder tokenizers of these families
  add no end-of-sequence token (GPT-2 adds nothing, Llama a BOS alone, Qwen2 nothing), so with ``last-token`` an
  EOS is appended to every text by the tokenizer itself (its post-processor, saved in tokenizer.json), so that
  sentence-transformers, which tokenizes with the saved tokenizer, appends it too. Other poolings add nothing.
- **Attention**: ``causal`` (the model's own) or ``bidirectional`` (LLM2Vec's first step): transformers 5's mask
  interface builds a bidirectional mask for any model whose config says ``is_causal = False``
  (`masking_utils.create_causal_mask`), and that flag is saved in the model's config.json, so the folder loads
  bidirectional again in sentkit and in sentence-transformers (>= 5.2 with transformers >= 5.2: nothing to pass,
  no remote code).
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from sentkit.core.config import ConfigError
from sentkit.core.registry import suggest

log = logging.getLogger(__name__)

ATTENTIONS = ("causal", "bidirectional")
DECODER_DEFAULT_POOLING = "mean"  # every token, the BOS too (LLM2Vec's leaves it out: ``mean-no-specials``)
EOS_POOLINGS = frozenset({"last-token"})  # poolings that need an end-of-sequence token after the text


def is_decoder_config(config: Any) -> bool:
    """Whether `config` is of a decoder-only language model (see the module docstring)."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    mtype = getattr(config, "model_type", "")
    return (
        mtype in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        and mtype not in MODEL_FOR_MASKED_LM_MAPPING_NAMES
        and not getattr(config, "is_encoder_decoder", False)
    )


def is_decoder_model(path: str) -> bool:
    """Whether the model at `path` (a folder, or a Hugging Face id as the loader would fetch it) is a decoder
    language model (False when its config cannot be read: the loader then says what is wrong with it)."""
    from transformers import AutoConfig

    from sentkit.core.logs import quiet_transformers

    try:
        with quiet_transformers():
            return is_decoder_config(AutoConfig.from_pretrained(path))
    except (OSError, ValueError):
        return False


def check_decoder(path: str, name_or_path: str) -> None:
    """The model at `path` must be a decoder language model; else one error naming its family."""
    from transformers import AutoConfig

    from sentkit.core.logs import quiet_transformers
    from sentkit.models.hub import not_found

    try:
        with quiet_transformers():
            config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise not_found(name_or_path, e) from None
    if not is_decoder_config(config):
        raise ConfigError(
            f"model {name_or_path} is a {config.model_type!r} model, not a decoder language model: this "
            "method adapts decoders (GPT-2, Llama, Qwen2, Mistral, ...); a masked LM trains with "
            "--method mlm, declutr, simcse or tsdae"
        )


def check_attention(attention: str) -> str:
    if attention not in ATTENTIONS:
        raise ConfigError(
            f"attention must be one of {', '.join(ATTENTIONS)}, got {attention!r}."
            f"{suggest(attention, list(ATTENTIONS))}"
        )
    return attention


def check_pooling(config: Any, pooling: str, attention: str | None = None) -> None:
    """Refuse CLS pooling of a causal decoder (`attention`, or the config's own when None): the first token's state
    is computed from that token alone, so every text starting with the same token would get one vector
    (bidirectional attention makes it a summary again)."""
    causal = (attention or attention_of(config)) == "causal"
    if pooling == "cls" and is_decoder_config(config) and causal:
        raise ConfigError(
            f"pooling=cls reads the first token, which a causal decoder ({config.model_type!r}) computes from itself "
            "alone: choose pooling mean, mean-no-specials (LLM2Vec's), last-token or weighted-mean (`--set "
            "pooling=mean` to train, `--pooling mean` to evaluate or embed), or bidirectional attention "
            "(`--set attention=bidirectional`, "
            "`--attention bidirectional`)"
        )


def attention_of(config: Any) -> str:
    """The attention a model's config asks for: ``bidirectional`` when it says ``is_causal = False``."""
    return "bidirectional" if getattr(config, "is_causal", True) is False else "causal"


def _configs(model: Any) -> list[Any]:
    base = getattr(model, "base_model", model)
    return list({id(c): c for c in (model.config, base.config)}.values())


def set_attention(model: Any, attention: str) -> None:
    """Make `model` (a decoder) attend causally or bidirectionally, through its config's ``is_causal`` (read by
    transformers' mask interface at every forward; saved with the model)."""
    check_attention(attention)
    if not is_decoder_config(model.config):
        raise ConfigError(
            f"attention={attention} applies to decoder language models (GPT-2, Llama, Qwen2, ...); this "
            f"is a {model.config.model_type!r} model, whose attention is fixed: leave attention unset"
        )
    for cfg in _configs(model):
        cfg.is_causal = attention == "causal"


def eos_appended(tokenizer: Any) -> bool:
    """Whether the tokenizer puts its end-of-sequence token after a text."""
    from sentkit.models.hub import special_affixes

    _, suffix = special_affixes(tokenizer)
    return bool(suffix) and suffix[-1] == tokenizer.eos_token_id


def append_eos(tokenizer: Any) -> None:
    """Make the tokenizer append its end-of-sequence token after every text (and after each of a pair), in its
    post-processor (kept by ``save_pretrained``); nothing when it already does."""
    from tokenizers import processors

    if eos_appended(tokenizer):
        return
    eos = tokenizer.eos_token
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if eos is None or backend is None:
        raise ConfigError(
            "last-token pooling of a decoder needs an end-of-sequence token appended to each text, and "
            "this tokenizer has none (or is not a fast tokenizer); choose pooling mean or weighted-mean"
        )
    from sentkit.models.hub import special_affixes

    prefix, suffix = (tokenizer.convert_ids_to_tokens(ids) for ids in special_affixes(tokenizer))
    single = " ".join([*prefix, "$A", *suffix, eos])
    specials = {t: int(tokenizer.convert_tokens_to_ids(t)) for t in (*prefix, *suffix, eos)}
    # one template: the special tokens the tokenizer put around a text, then the EOS (it replaces the
    # post-processor, whose only other work, byte-level offsets, changes no id)
    backend.post_processor = processors.TemplateProcessing(
        single=single, pair=f"{single} $B:1 {eos}:1", special_tokens=list(specials.items())
    )
    if not eos_appended(tokenizer):  # a tokenizer class that builds its post-processor another way
        raise ConfigError(
            f"could not make the {type(tokenizer).__name__} tokenizer append its end-of-sequence token; "
            "choose pooling mean or weighted-mean"
        )


def config_eos_id(config: Any, vocab_size: int) -> int | None:
    """The end-of-sequence id a model's config names (``eos_token_id``: an id, or the first of a list), None where it
    names none inside the vocabulary."""
    eos = getattr(config, "eos_token_id", None)
    if isinstance(eos, (list, tuple)):
        eos = eos[0] if eos else None
    return int(eos) if isinstance(eos, int) and 0 <= eos < vocab_size else None


def ensure_eos(model: Any, tokenizer: Any) -> None:
    """Give a decoder's tokenizer without an end-of-sequence token the one its model's config names
    (`config_eos_id`); a ConfigError in one line where the config names none either."""
    if tokenizer.eos_token is not None:
        return
    eos = config_eos_id(model.config, len(tokenizer))
    if eos is None:
        raise ConfigError(
            f"the tokenizer of this {model.config.model_type!r} decoder has no end-of-sequence token and its "
            "config.json names none (eos_token_id): set eos_token in the model folder's tokenizer_config.json "
            '(e.g. "eos_token": "</s>") or eos_token_id in its config.json'
        )
    tokenizer.eos_token = tokenizer.convert_ids_to_tokens(eos)
    log.info(
        "decoder tokenizer without an end-of-sequence token: using the config's eos_token_id %d (%r)",
        eos,
        tokenizer.eos_token,
    )


def prepare(model: Any, tokenizer: Any, pooling: str) -> None:
    """Ready a decoder and its tokenizer to encode (see the module docstring): an end-of-sequence token (the config's
    when the tokenizer has none, `ensure_eos`), a padding token (the EOS when it has none), right padding, an EOS
    after each text for `pooling` in `EOS_POOLINGS`, no key/value cache."""
    if tokenizer.eos_token is None and (tokenizer.pad_token is None or pooling in EOS_POOLINGS):
        ensure_eos(model, tokenizer)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
        log.info(
            "decoder tokenizer without a padding token: padding with its end-of-sequence token %r", tokenizer.eos_token
        )
    tokenizer.padding_side = "right"
    if pooling in EOS_POOLINGS:
        append_eos(tokenizer)
    for cfg in _configs(model):
        cfg.use_cache = False  # one forward per batch: no key/value cache to keep
        if getattr(cfg, "pad_token_id", None) is None:
            cfg.pad_token_id = int(tokenizer.pad_token_id)


def position_ids(mask: torch.Tensor) -> torch.Tensor:
    """Positions counted from each row's first token: mask [n, L] (1 = token) -> [n, L] (0 at padding before it)."""
    return (mask.long().cumsum(dim=1) - 1).clamp(min=0)


def decoder_inputs(ids: torch.Tensor, mask: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """The forward arguments of a decoder for ids and mask [n, L] (None: no padding): position ids from the mask, so
    that the padding side never changes a state."""
    if mask is None:
        return {"input_ids": ids}
    return {"input_ids": ids, "attention_mask": mask, "position_ids": position_ids(mask)}


def set_dropout(model: Any, p: float) -> None:
    """Dropout `p` in every layer of a decoder that has one: the attention weights' (``attention_dropout``: Llama,
    Qwen2, Mistral; what LLM2Vec's simcse_dropout sets) and every ``nn.Dropout`` (GPT-2's attention, residual and
    embedding dropout); recorded in its config, so the saved model says what it trained with."""
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = p
        elif isinstance(getattr(m, "attention_dropout", None), float):
            m.attention_dropout = p
    for cfg in _configs(model):
        for key in ("attention_dropout", "attn_pdrop", "resid_pdrop", "embd_pdrop"):
            if hasattr(cfg, key):
                setattr(cfg, key, p)


def dropout_of(model: Any) -> float:
    """The largest dropout probability in a model: of its ``nn.Dropout`` modules and its attention layers'
    ``attention_dropout`` (0.0: the model drops nothing, so two forwards of a text are equal)."""
    ps = [0.0]
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            ps.append(float(m.p))
        elif isinstance(getattr(m, "attention_dropout", None), float):
            ps.append(float(m.attention_dropout))
    return max(ps)


# ----------------------------------------------------------------------------- masked next-token prediction
MASK_TOKENS = ("blank", "eos", "new")  # LLM2Vec's mask_token_type: "_", the EOS, or a new "<mask>" token


def check_mask_token(kind: str) -> str:
    """`kind` if it is one of `MASK_TOKENS`, else the error a config key ``mask_token`` gives."""
    if kind not in MASK_TOKENS:
        raise ConfigError(
            f"mask_token must be one of {', '.join(MASK_TOKENS)}, got {kind!r}.{suggest(kind, list(MASK_TOKENS))}"
        )
    return kind


def set_mask_token(model: Any, tokenizer: Any, kind: str) -> None:
    """Give a decoder's tokenizer the mask token MNTP replaces chosen tokens with, as LLM2Vec does when it has none:
    ``blank`` the token "_" (LLM2Vec's choice for Llama and Mistral), ``eos`` its end-of-sequence token, ``new`` a new
    token "<mask>" (the embeddings grow by one row). A tokenizer with a mask token keeps it."""
    check_mask_token(kind)
    if tokenizer.mask_token is not None:
        return
    if kind == "new":
        tokenizer.add_special_tokens({"mask_token": "<mask>"})
        model.resize_token_embeddings(len(tokenizer))
        return
    token = "_" if kind == "blank" else tokenizer.eos_token
    tid = tokenizer.convert_tokens_to_ids(token) if token is not None else None
    if tid is None or (tid == tokenizer.unk_token_id and token != tokenizer.unk_token):
        raise ConfigError(
            f"mask_token={kind}: the tokenizer has no {token or 'end-of-sequence'!r} token; use --set mask_token=new"
        )
    tokenizer.mask_token = token


def mntp_sum(hidden: torch.Tensor, labels: torch.Tensor, head: Any) -> tuple[torch.Tensor, int]:
    """Masked next-token prediction (LLM2Vec): the summed cross-entropy of each masked token (label not -100) at
    position i predicted from the output at position i-1 through the LM head, and how many tokens that is (a token
    masked at position 0 has no output before it and is not counted). hidden [n, L, d], labels [n, L].

    The head runs even when nothing is masked (on zero rows), so its parameters always take part in the backward."""
    from sentkit.objectives.mlm import IGNORE_INDEX

    target = labels[:, 1:]
    sel = target != IGNORE_INDEX  # [n, L-1]
    logits = head(hidden[:, :-1][sel])  # [m, V]
    return torch.nn.functional.cross_entropy(logits.float(), target[sel], reduction="sum"), int(sel.sum())

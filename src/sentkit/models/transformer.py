"""TransformerEncoder: a transformer + pooling that embeds text and saves in sentence-transformers format."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sentkit.core.config import ConfigError
from sentkit.core.errors import InputError
from sentkit.core.interface import as_text_list, check_prompts, resolve_prompt
from sentkit.core.logs import quiet_transformers
from sentkit.models import decoder
from sentkit.models.hub import (
    load_tokenizer,
    not_found,
    position_limit,
    resolve,
    special_affixes,
)
from sentkit.models.loading import check_dim
from sentkit.models.pooling import (
    POOLINGS,
    layer_weights,
    load_with,
    pooling_of,
    recorded_pooling,
    saveable_poolings,
    text_mask,
)
from sentkit.models.precision import dtype_of
from sentkit.models.precision import resolve as resolve_precision

log = logging.getLogger(__name__)

# every flag of sentence-transformers' Pooling module (a pooling's own are in its `st_flags`)
ST_ALL_FLAGS = (
    "pooling_mode_cls_token",
    "pooling_mode_max_tokens",
    "pooling_mode_mean_tokens",
    "pooling_mode_mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens",
    "pooling_mode_lasttoken",
)


ST_DENSE_TYPE = "sentence_transformers.models.Dense"
DENSE_ACTIVATIONS = {"torch.nn.modules.linear.Identity": None, "torch.nn.modules.activation.Tanh": torch.tanh}


@dataclass
class DenseLayer:
    """A sentence-transformers ``Dense`` module: ``activation(x @ weight.T + bias)`` on the pooled
    vector. ``weight`` [out, in], ``bias`` [out]; ``activation`` is the class name ST saves
    (Identity or Tanh)."""

    weight: torch.Tensor
    bias: torch.Tensor | None
    activation: str = "torch.nn.modules.linear.Identity"

    def __post_init__(self) -> None:
        if self.activation not in DENSE_ACTIVATIONS:
            raise ConfigError(
                f"Dense activation {self.activation!r} is not supported; sentkit applies {', '.join(DENSE_ACTIVATIONS)}"
            )

    @property
    def out_features(self) -> int:
        return int(self.weight.shape[0])


def apply_dense(x: torch.Tensor, layers: Sequence[DenseLayer]) -> torch.Tensor:
    """The pooled vectors x [n, d] through each Dense layer in turn -> [n, out]."""
    for layer in layers:
        x = torch.nn.functional.linear(x, layer.weight.to(x), None if layer.bias is None else layer.bias.to(x))
        act = DENSE_ACTIVATIONS[layer.activation]
        if act is not None:
            x = act(x)
    return x


def pick_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def usable_device(device: str) -> torch.device:
    """`pick_device`, with a one-line error for a device that cannot be named or used here."""
    try:
        dev = pick_device(device)
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("no CUDA GPU is available")
        return dev
    except (RuntimeError, AssertionError) as e:
        raise InputError(f"device {device!r} cannot be used here: {str(e).splitlines()[0][:200]}") from None


class TransformerEncoder:
    """Encode text with a Hugging Face transformer and a pooling function.

    ``encode`` sorts texts by length so batches carry little padding, and returns float32
    ``[n, dim]`` in the input order. Texts longer than ``max_length`` are truncated, or, with
    ``chunk_long=True``, split into windows whose embeddings are averaged.

    ``prompts`` (name -> text) and ``default_prompt_name`` are sentence-transformers' (read from a folder's
    ``config_sentence_transformers.json``): ``encode(prompt_name=..., prompt=...)`` prepends one to every
    text (`sentkit.core.interface.resolve_prompt`); ``include_prompt=False`` (its Pooling module's flag) leaves
    the prompt's tokens out of the pooling; a pooling whose ``specials`` is False (``mean-no-specials``) leaves
    out the special tokens the tokenizer puts around every text (`sentkit.models.pooling.text_mask`).

    ``precision`` ("auto", "fp32", "bf16", "fp16"; None: fp32) is the transformer's arithmetic
    (`sentkit.models.precision`): the model is cast to it (in place), pooling and everything after it
    stay in float32; ``self.precision`` holds the one `auto` resolved to.

    ``truncate_dim`` (None: all) keeps the first N dimensions of every vector, as sentence-transformers'
    ``truncate_dim`` does: after every module of the model, its Normalize included (so a normalising model's cut
    vectors are not unit length; ``encode(normalize=True)`` normalises after the cut, as ST's
    ``normalize_embeddings``). A folder's ``config_sentence_transformers.json`` may give one; a value given here
    wins (ST's rule)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        pooling: str = "mean",
        max_length: int | None = None,
        device: str = "auto",
        name: str = "transformer",
        normalize: bool = False,
        dense: Sequence[DenseLayer] = (),
        prompts: dict[str, str] | None = None,
        default_prompt_name: str | None = None,
        include_prompt: bool = True,
        attention: str | None = None,
        precision: str | None = None,
        truncate_dim: int | None = None,
    ) -> None:
        self.model = model
        self.dense = list(dense)  # sentence-transformers Dense modules after the pooling (e.g. whitening)
        self.tokenizer = tokenizer
        self.pooling = pooling
        self.pool_fn = POOLINGS.get(pooling)
        self.attention = attention  # None: the model's own (a decoder's config may say bidirectional)
        if attention is not None:
            decoder.check_attention(attention)
        decoder.check_pooling(model.config, pooling, attention)  # CLS of a causal decoder: refused, as in training
        if decoder.is_decoder_config(model.config):  # padding token, EOS for last-token pooling, attention
            decoder.prepare(model, tokenizer, pooling)
        if attention is not None:
            decoder.set_attention(model, attention)
        limit = position_limit(model.config)  # positions after the padding index for RoBERTa, MPNet, ...
        self.max_length = min(max_length or limit, limit)
        self.device = usable_device(device)
        self.precision = resolve_precision(precision, self.device)
        dtype = dtype_of(self.precision)
        try:
            self.model.to(self.device).eval()
        except (RuntimeError, AssertionError) as e:  # e.g. "cuda" on a machine without a GPU
            raise InputError(f"device {device!r} cannot be used here: {str(e).splitlines()[0][:200]}") from None
        if any(p.is_floating_point() and p.dtype != dtype for p in self.model.parameters()):
            self.model.to(dtype)
        self.name = name
        self.normalize = normalize
        self.prefix, self.suffix = special_affixes(tokenizer)
        self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)
        self.prompts: dict[str, str] = check_prompts(prompts, default_prompt_name)
        self.default_prompt_name = default_prompt_name
        self.include_prompt = bool(include_prompt)
        self.truncate_dim = check_dim(truncate_dim, self.full_dim, name)

    # ---------------------------------------------------------------- loading
    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str,
        *,
        pooling: str | None = None,
        max_length: int | None = None,
        device: str = "auto",
        prompts: dict[str, str] | None = None,
        default_prompt_name: str | None = None,
        attention: str | None = None,
        precision: str | None = None,
        truncate_dim: int | None = None,
    ) -> TransformerEncoder:
        """Load a registry name, local directory (transformers or sentence-transformers layout) or HF id.

        `prompts` are merged over the folder's own (a name given here wins); `default_prompt_name`, when
        given, replaces the folder's (sentence-transformers' rules). `attention` ("causal" or
        "bidirectional") switches a decoder's attention (sentkit.models.decoder). `precision` (None: fp32)
        is the dtype the weights load in (sentkit.models.precision). `truncate_dim` (None: the folder's own
        ``truncate_dim`` in config_sentence_transformers.json, if any) keeps the first N dimensions."""
        from transformers import AutoModel

        resolved = resolve_precision(precision, usable_device(device))  # a bad name fails before any loading

        path = resolve(name_or_path)
        local = Path(path).is_dir()
        if local and not (Path(path) / "config.json").is_file():
            raise ConfigError(
                f"{path} is a folder but not a model directory (it has no config.json); give a "
                "directory saved by `sentkit train`, transformers or sentence-transformers"
            )
        try:
            st_pooling, st_max, st_norm, st_dense = _read_st_settings(Path(path))
            st_pooling = recorded_pooling(_recorded(Path(path)).get("pooling"), st_pooling)  # mean-no-specials
            st_prompts, st_default, st_include = read_st_prompts(Path(path))
            st_truncate = read_st_truncate_dim(Path(path))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise ConfigError(
                f"model directory {path}: its sentence-transformers settings cannot be read ({type(e).__name__}: {e})"
            ) from None
        tok = load_tokenizer(path)
        try:
            with quiet_transformers():
                model = AutoModel.from_pretrained(path, dtype=dtype_of(resolved))
        except Exception as e:  # a local directory: torn weights, bad config, ...; anything else: not found
            if local:
                first = (str(e).splitlines() or [""])[0][:200]
                raise ConfigError(f"model directory {path} cannot be loaded ({type(e).__name__}: {first})") from None
            if isinstance(e, (OSError, ValueError)):
                raise not_found(name_or_path, e) from None
            raise
        return cls(
            model,
            tok,
            pooling=pooling or st_pooling or "mean",
            max_length=max_length or st_max,
            device=device,
            name=name_or_path,
            normalize=st_norm,
            dense=st_dense,
            prompts={**st_prompts, **check_prompts(prompts, None)},
            default_prompt_name=default_prompt_name if default_prompt_name is not None else st_default,
            include_prompt=st_include,
            attention=attention,
            precision=resolved,
            truncate_dim=truncate_dim if truncate_dim is not None else st_truncate,
        )

    @property
    def full_dim(self) -> int:
        """The size of the model's whole vectors (before any `truncate_dim`)."""
        return self.dense[-1].out_features if self.dense else int(self.model.config.hidden_size) * self.pool_fn.width

    @property
    def dim(self) -> int:
        """The size of the vectors `encode` returns."""
        return self.truncate_dim or self.full_dim

    def whole(self) -> tuple[TransformerEncoder, Any]:
        """(this model giving its whole vectors, the cut that makes this model's from them): ``encode`` cuts after
        the model's Normalize and does not normalise again (`finish`), so the cut is the first columns. An
        evaluation caches the whole vectors once for every width (sentkit.core.interface.whole_vectors)."""
        import copy

        whole = copy.copy(self)
        whole.truncate_dim = None
        d = self.truncate_dim

        def cut(emb: np.ndarray) -> np.ndarray:
            return emb if d is None or d >= emb.shape[-1] else np.ascontiguousarray(emb[..., :d], dtype=np.float32)

        return whole, cut

    # ---------------------------------------------------------------- encoding
    @torch.inference_mode()
    def encode(
        self,
        texts: str | Sequence[str],
        batch_size: int = 32,
        *,
        token_budget: int | None = 4096,
        chunk_long: bool = False,
        show_progress: bool = False,
        normalize: bool | None = None,
        prompt_name: str | None = None,
        prompt: str | None = None,
    ) -> np.ndarray:
        """Embed a list of texts -> float32 [n, dim], or one ``str`` -> [dim] (sentence-transformers'
        convention); L2-normalised if the model's directory says so. Items that are not ``str`` raise
        TypeError naming their index.

        A batch holds `batch_size` texts, or up to `token_budget` tokens of shorter texts
        (`token_budget=None`: exactly `batch_size`). `prompt` (a text) or `prompt_name` (one of
        `prompts`) is prepended to every text; neither: the default prompt, if the model has one."""
        text = resolve_prompt(self.prompts, self.default_prompt_name, prompt_name=prompt_name, prompt=prompt)
        items, single = as_text_list(texts)
        out = self._encode(
            items,
            batch_size,
            token_budget=token_budget,
            chunk_long=chunk_long,
            show_progress=show_progress,
            normalize=normalize,
            prompt=text or None,
        )
        return out[0] if single else out

    def prompt_length(self, prompt: str) -> int:
        """The tokens of `prompt` at the start of a sequence (the leading special tokens included, as
        sentence-transformers counts them): what ``include_prompt=False`` leaves out of the pooling."""
        with quiet_transformers():
            ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        return len(self.prefix) + len(ids)

    def _encode(
        self,
        texts: list[str],
        batch_size: int,
        *,
        token_budget: int | None,
        chunk_long: bool,
        show_progress: bool,
        normalize: bool | None,
        prompt: str | None = None,
    ) -> np.ndarray:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"batch_size must be a positive integer, got {batch_size!r}")
        if token_budget is not None and token_budget < 1:
            raise InputError(f"token_budget must be None or positive, got {token_budget!r}")
        n = len(texts)
        if n == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        body = self.max_length - len(self.prefix) - len(self.suffix)
        head: list[int] = []  # the prompt's tokens at the start of every window of a chunked text
        if prompt and chunk_long:
            with quiet_transformers():
                head = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
            if len(head) >= body:
                raise ConfigError(
                    f"the prompt {prompt!r} is {len(head)} tokens, leaving no room for text in the "
                    f"model's {self.max_length}-token windows"
                )
            body -= len(head)
        elif prompt:  # prepended to the text, as sentence-transformers does
            texts = [prompt + t for t in texts]
        # the tokens left out of the pooling (include_prompt=False): the leading specials and the prompt
        skip = self.prompt_length(prompt) if prompt and not self.include_prompt else 0
        with quiet_transformers():
            ids = self.tokenizer(
                texts, add_special_tokens=False, truncation=not chunk_long, max_length=body if not chunk_long else None
            )["input_ids"]
        # Split every text into pieces of at most `body` tokens (one piece unless chunk_long).
        pieces: list[list[int]] = []
        owner: list[int] = []
        for i, seq in enumerate(ids):
            if not seq:
                pieces.append(list(head))
                owner.append(i)
                continue
            for s in range(0, len(seq), body):
                pieces.append(head + seq[s : s + body])
                owner.append(i)
        out = np.zeros((len(pieces), self.full_dim), dtype=np.float32)
        from tqdm.auto import tqdm

        bar = tqdm(total=len(pieces), desc="encode", unit="text", disable=not show_progress)
        lengths = [len(p) + len(self.prefix) + len(self.suffix) for p in pieces]
        for idx in length_batches(lengths, batch_size, token_budget):
            seqs = [self.prefix + pieces[j] + self.suffix for j in idx]
            batch = pad_batch(seqs, self.pad_id, self.device)
            inputs = (
                {"input_ids": batch["input_ids"]} if len({len(s) for s in seqs}) == 1 else batch
            )  # no padding: no mask
            if self.pool_fn.last_layer_only:
                hidden = self.model(**inputs).last_hidden_state.float()  # [b, L, d]; pooled in float32
            else:  # a pooling of other layers (first-last-avg)
                states = self.model(**inputs, output_hidden_states=True).hidden_states
                hidden = self.pool_fn.states([h.float() for h in states])
            mask = batch["attention_mask"]
            if not self.pool_fn.specials:  # the text's tokens alone (LLM2Vec's convention)
                mask = text_mask(mask, len(self.prefix), len(self.suffix))
            if skip:  # right-padded: the prompt is the first `skip` positions of every row
                hidden, mask = hidden[:, skip:], mask[:, skip:]
            emb = apply_dense(self.pool_fn(hidden, mask).float(), self.dense)  # [b, dim]
            out[idx] = emb.cpu().numpy()
            bar.update(len(idx))
        bar.close()
        if len(pieces) != n:  # average the windows of chunked texts
            summed = np.zeros((n, self.full_dim), dtype=np.float64)
            np.add.at(summed, np.asarray(owner), out)
            counts = np.bincount(np.asarray(owner), minlength=n)[:, None]
            out = (summed / counts).astype(np.float32)
        return finish(out, self.truncate_dim, module=self.normalize, asked=normalize)

    __call__ = encode

    # ---------------------------------------------------------------- saving
    def save(
        self,
        out: str | Path,
        *,
        extra: dict[str, Any] | None = None,
        model_card: str | None = None,
        method: str = "transformer",
    ) -> Path:
        """Write a directory that sentence-transformers and transformers both load unchanged. An encoder
        loaded in half precision is refused: its weights are rounded, and the folder would load in that
        dtype (transformers reads the dtype from config.json)."""
        if self.precision != "fp32":
            raise ConfigError(
                f"{self.name} was loaded in {self.precision}: saving it would write rounded weights that load in "
                f"{self.precision}; load it with precision='fp32' to save it"
            )
        save_st_directory(
            self.model,
            self.tokenizer,
            out,
            pooling=self.pooling,
            max_length=self.max_length,
            normalize=self.normalize,
            extra=extra,
            model_card=model_card,
            dense=self.dense,
            method=method,
            prompts=self.prompts,
            default_prompt_name=self.default_prompt_name,
            include_prompt=self.include_prompt,
            truncate_dim=self.truncate_dim,
        )
        return Path(out)


def length_batches(lengths: list[int], batch_size: int, token_budget: int | None = None) -> list[list[int]]:
    """Batches of indices, longest first, cut where the length changes when that wastes little.

    A batch holds `batch_size` texts, or more when they are short: up to `token_budget` tokens
    (large batches of short texts use the CPU's matrix units much better). Texts of equal length
    form unpadded batches (no attention mask needed); a length group too small to fill a quarter
    batch is merged with its neighbours and padded."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    cur: list[int] = []
    cap = batch_size
    for i in order:
        if cur and (len(cur) >= cap or (lengths[i] != lengths[cur[-1]] and len(cur) >= max(1, cap // 4))):
            batches.append(cur)
            cur = []
        if not cur:
            cap = max(batch_size, token_budget // max(1, lengths[i])) if token_budget else batch_size
        cur.append(i)
    if cur:
        batches.append(cur)
    return batches


def pad_batch(seqs: list[list[int]], pad_id: int, device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """Right-pad id lists -> {"input_ids": [n, L], "attention_mask": [n, L]}."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    return {"input_ids": ids.to(device), "attention_mask": mask.to(device)}


def _recorded(path: Path) -> dict[str, Any]:
    """The ``sentkit.json`` of a folder sentkit saved ({} for any other)."""
    from sentkit.core.methods import read_marker

    marker = read_marker(path) if path.is_dir() else None
    return marker if isinstance(marker, dict) else {}


def _read_st_settings(path: Path) -> tuple[str | None, int | None, bool, list[DenseLayer]]:
    """Pooling mode, max_seq_length, Normalize and Dense modules of a sentence-transformers
    directory, if it is one."""
    pooling = max_len = None
    normalize = False
    dense: list[DenseLayer] = []
    if not path.is_dir():
        return None, None, False, []
    modules = path / "modules.json"
    if modules.is_file():
        weights: list[float] | None = None
        for m in json.loads(modules.read_text()):
            kind = m.get("type", "")
            normalize = normalize or kind.endswith("Normalize")
            if kind.endswith("WeightedLayerPooling"):
                weights = _read_layer_weights(path / m["path"])
            elif kind.endswith("Pooling"):
                cfg_file = path / m["path"] / "config.json"
                if cfg_file.is_file():
                    cfg = json.loads(cfg_file.read_text())
                    pooling = pooling_of({k for k in ST_ALL_FLAGS if cfg.get(k)}, weights)
            elif kind.endswith("Dense"):
                dense.append(_read_dense(path / m["path"]))
    sbc = path / "sentence_bert_config.json"
    if sbc.is_file():
        max_len = json.loads(sbc.read_text()).get("max_seq_length")
    return pooling, max_len, normalize, dense


def read_st_prompts(path: Path) -> tuple[dict[str, str], str | None, bool]:
    """The prompts, default prompt name (``config_sentence_transformers.json``) and the Pooling
    module's ``include_prompt`` of a sentence-transformers folder ({}, None, True where it has none)."""
    prompts: dict[str, str] = {}
    default: str | None = None
    include = True
    cfg_file = path / "config_sentence_transformers.json"
    if path.is_dir() and cfg_file.is_file():
        cfg = json.loads(cfg_file.read_text())
        default = cfg.get("default_prompt_name")
        prompts = check_prompts(cfg.get("prompts") or {}, default, where=str(cfg_file))
    modules = path / "modules.json"
    if path.is_dir() and modules.is_file():
        for m in json.loads(modules.read_text()):
            pool_cfg = path / m.get("path", "") / "config.json"
            if m.get("type", "").endswith(".Pooling") and pool_cfg.is_file():
                include = bool(json.loads(pool_cfg.read_text()).get("include_prompt", True))
    return prompts, default, include


def read_st_truncate_dim(path: Path) -> int | None:
    """The ``truncate_dim`` a sentence-transformers folder's ``config_sentence_transformers.json`` gives (None: none),
    which SentenceTransformer(folder) applies unless it is given another."""
    cfg_file = path / "config_sentence_transformers.json"
    if not (path.is_dir() and cfg_file.is_file()):
        return None
    value = json.loads(cfg_file.read_text()).get("truncate_dim")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise InputError(f"{cfg_file}: truncate_dim must be a whole number or null, got {value!r}")
    return value


def finish(out: np.ndarray, truncate_dim: int | None, *, module: bool, asked: bool | None) -> np.ndarray:
    """A model's vectors `out` [n, full] as `encode` returns them, in sentence-transformers' order: the model's own
    Normalize (`module`; ``asked=False`` switches it off), then the cut to `truncate_dim`, then the normalisation asked
    for (``asked=True``, ST's ``normalize_embeddings``)."""
    if truncate_dim is not None and truncate_dim >= out.shape[1]:
        truncate_dim = None  # all of it: nothing to cut
    if (module if asked is None else asked) and (truncate_dim is None or asked is None):
        out /= np.linalg.norm(out, axis=1, keepdims=True).clip(min=1e-12)
    if truncate_dim is None:
        return out
    out = np.ascontiguousarray(out[:, :truncate_dim])
    if asked:
        out /= np.linalg.norm(out, axis=1, keepdims=True).clip(min=1e-12)
    return out


def base_prompt_settings(name_or_path: str) -> dict[str, Any]:
    """The prompt settings of the base a run trains from, as `save_st_directory` takes them
    (``prompts``, ``default_prompt_name``, ``include_prompt``): a folder's (or a registry name's) own,
    none for anything else."""
    path = Path(resolve(name_or_path))
    prompts, default, include = read_st_prompts(path) if path.is_dir() else ({}, None, True)
    return {"prompts": prompts, "default_prompt_name": default, "include_prompt": include}


def _read_layer_weights(folder: Path) -> list[float]:
    """The weights of a WeightedLayerPooling module over all hidden states (zeros before its layer_start)."""
    cfg = json.loads((folder / "config.json").read_text())
    from safetensors.torch import load_file

    w = [float(x) for x in load_file(str(folder / "model.safetensors"))["layer_weights"].tolist()]
    return [0.0] * int(cfg.get("layer_start", 0)) + w


def _write_layer_weights(folder: Path, dim: int, weights: list[float]) -> None:
    from safetensors.torch import save_file

    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps({"embedding_dimension": dim, "num_hidden_layers": len(weights) - 1, "layer_start": 0}, indent=2)
    )
    save_file({"layer_weights": torch.tensor(weights, dtype=torch.float32)}, str(folder / "model.safetensors"))


def _read_dense(folder: Path) -> DenseLayer:
    """A Dense module folder as sentence-transformers saves it (config.json, model.safetensors or
    pytorch_model.bin with linear.weight / linear.bias)."""
    cfg = json.loads((folder / "config.json").read_text())
    if (folder / "model.safetensors").is_file():
        from safetensors.torch import load_file

        state = load_file(str(folder / "model.safetensors"))
    else:
        state = torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    return DenseLayer(
        state["linear.weight"].float(),
        state.get("linear.bias"),
        cfg.get("activation_function", "torch.nn.modules.activation.Tanh"),
    )


def _write_dense(folder: Path, layer: DenseLayer) -> None:
    from safetensors.torch import save_file

    folder.mkdir()
    out_f, in_f = (int(x) for x in layer.weight.shape)
    (folder / "config.json").write_text(
        json.dumps(
            {
                "in_features": in_f,
                "out_features": out_f,
                "bias": layer.bias is not None,
                "activation_function": layer.activation,
            },
            indent=2,
        )
    )
    state = {"linear.weight": layer.weight.detach().float().contiguous()}
    if layer.bias is not None:
        state["linear.bias"] = layer.bias.detach().float().contiguous()
    save_file(state, str(folder / "model.safetensors"))


def point_st_at(folder: Path, sub: str) -> None:
    """Make `folder` load in sentence-transformers as its sub-folder `sub` (a sentence-transformers folder: a
    recipe's last phase): its modules.json with every module's path under `sub`, and `sub`'s prompts and similarity
    settings. Nothing is written when `sub` is not a sentence-transformers folder."""
    from sentkit.core.io import atomic_write_text

    modules_file = folder / sub / "modules.json"
    if not modules_file.is_file():
        return
    modules = json.loads(modules_file.read_text(encoding="utf-8"))
    for m in modules:
        m["path"] = f"{sub}/{m['path']}" if m.get("path") else sub
    atomic_write_text(folder / "modules.json", json.dumps(modules, indent=2) + "\n")
    settings = folder / sub / "config_sentence_transformers.json"
    if settings.is_file():
        atomic_write_text(folder / settings.name, settings.read_text(encoding="utf-8"))


def save_st_directory(
    model: Any,
    tokenizer: Any,
    out: str | Path,
    *,
    pooling: str,
    max_length: int,
    normalize: bool = False,
    extra: dict[str, Any] | None = None,
    model_card: str | None = None,
    method: str = "transformer",
    save_head: bool = False,
    dense: Sequence[DenseLayer] = (),
    prompts: dict[str, str] | None = None,
    default_prompt_name: str | None = None,
    include_prompt: bool = True,
    truncate_dim: int | None = None,
) -> None:
    """Save a transformer + pooling as a sentence-transformers directory, with its `prompts`,
    `default_prompt_name` and the Pooling's `include_prompt` (a base's, kept). Files are built in a
    temporary sibling folder, then each is renamed into place (a crash never leaves a torn file).

    ``save_head`` keeps a masked LM whole (base model and MLM head), so that the folder is also a
    masked-LM checkpoint that training can continue from; sentence-transformers and
    ``AutoModel`` read its base model. `method` is recorded in ``sentkit.json``."""
    from sentkit import __version__
    from sentkit.core.io import default_file_mode, make_temp_dir, remove_stale_temps
    from sentkit.core.methods import write_marker
    from sentkit.models.lora import merged

    model = merged(model)  # LoRA adapters folded into the weights (a copy; none: the model itself)
    out = Path(out)
    flags = POOLINGS.get(pooling).st_flags
    if not flags:
        raise ConfigError(
            f"pooling {pooling!r} has no sentence-transformers module, so a folder saved with it would "
            f"load with another pooling there; save with one of {', '.join(saveable_poolings())} and "
            f"{load_with(pooling)}"
        )
    if not POOLINGS.get(pooling).specials:
        log.warning(
            "pooling %s leaves the special tokens out, which sentence-transformers' Pooling cannot: %s records it "
            "in sentkit.json for sentkit, and SentenceTransformer(%s) pools with %s over every token",
            pooling,
            out,
            out,
            pooling_of(set(flags), None),
        )
    remove_stale_temps(out.parent, out.name)
    tmp = make_temp_dir(out)
    base = getattr(model, "base_model", model)
    pool = POOLINGS.get(pooling)
    layered = not pool.last_layer_only  # a WeightedLayerPooling reads the hidden states the model then returns
    saved_flag = getattr(base.config, "output_hidden_states", False)
    for cfg in {id(c): c for c in (base.config, model.config)}.values():
        cfg.output_hidden_states = layered or saved_flag
    try:
        with quiet_transformers():
            (model if save_head else base).save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
    finally:
        for cfg in {id(c): c for c in (base.config, model.config)}.values():
            cfg.output_hidden_states = saved_flag
    dim = int(base.config.hidden_size)
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]
    if layered:
        modules.append(
            {
                "idx": 1,
                "name": "1",
                "path": "1_WeightedLayerPooling",
                "type": "sentence_transformers.models.WeightedLayerPooling",
            }
        )
        _write_layer_weights(
            tmp / "1_WeightedLayerPooling", dim, layer_weights(pool, int(base.config.num_hidden_layers))
        )
    pool_dir = f"{len(modules)}_Pooling"
    modules.append(
        {
            "idx": len(modules),
            "name": str(len(modules)),
            "path": pool_dir,
            "type": "sentence_transformers.models.Pooling",
        }
    )
    for layer in dense:  # e.g. whitening, after the pooling and before any normalisation
        i = len(modules)
        modules.append({"idx": i, "name": str(i), "path": f"{i}_Dense", "type": ST_DENSE_TYPE})
        _write_dense(tmp / f"{i}_Dense", layer)
    if normalize:
        i = len(modules)
        modules.append(
            {"idx": i, "name": str(i), "path": f"{i}_Normalize", "type": "sentence_transformers.models.Normalize"}
        )
        (tmp / f"{i}_Normalize").mkdir()
    (tmp / "modules.json").write_text(json.dumps(modules, indent=2))
    (tmp / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": max_length, "do_lower_case": False}, indent=2)
    )
    (tmp / pool_dir).mkdir()
    prompts = check_prompts(prompts, default_prompt_name)
    pool_cfg: dict[str, Any] = {"word_embedding_dimension": dim, "include_prompt": bool(include_prompt)}
    pool_cfg.update({k: k in flags for k in ST_ALL_FLAGS})
    (tmp / pool_dir / "config.json").write_text(json.dumps(pool_cfg, indent=2))
    (tmp / "config_sentence_transformers.json").write_text(
        json.dumps(
            {
                "__version__": {"sentkit": __version__},
                "prompts": prompts,
                "default_prompt_name": default_prompt_name,
                "similarity_fn_name": "cosine",
                **({"truncate_dim": int(truncate_dim)} if truncate_dim is not None else {}),
            },
            indent=2,
        )
    )
    write_marker(tmp, method, pooling=pooling, max_length=max_length, **(extra or {}))
    (tmp / "README.md").write_text(model_card or f"# sentkit encoder\n\nPooling: {pooling}; max length {max_length}.\n")
    # transformers writes some files with mode 0600: give every file the user's normal mode
    for f in tmp.rglob("*"):
        if f.is_file():
            os.chmod(f, default_file_mode())
    # Move each finished file into place; other files already in `out` (checkpoints, logs) stay.
    out.mkdir(parents=True, exist_ok=True)
    from sentkit.core.methods import MARKER_FILE

    for entry in sorted(tmp.iterdir(), key=lambda e: (e.name == MARKER_FILE, e.name)):  # the marker last
        dest = out / entry.name
        if dest.is_dir():
            shutil.rmtree(dest)
        os.replace(entry, dest)
    tmp.rmdir()

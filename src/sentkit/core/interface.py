"""The one interface where training and evaluation meet, and the prompts an encoder prepends (with the
`--prompt-name` / `--prompt` flags every command that encodes takes).

Prompts follow sentence-transformers (ST): a model has named prompts (``{"query": "query: ", ...}``) and
maybe a ``default_prompt_name``; ``encode(texts, prompt_name=..., prompt=...)`` prepends one to every
text. `resolve_prompt` is the rule, `encode_with_prompt` the one call every caller uses (it works for
any encoder, prompted or not), `prompts_of` gives an encoder's prompts, `PromptedEncoder` gives any
encoder prompts (what ``sentkit.load(name, prompts=...)`` wraps non-transformers in).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from sentkit.core.config import ConfigError
from sentkit.core.errors import InputError, InputTypeError, SentkitError, UserCodeError
from sentkit.core.identity import derived_fingerprint as derived_fingerprint  # built in sentkit.core.identity
from sentkit.core.identity import prompted_fingerprint as prompted_fingerprint


@runtime_checkable
class Encoder(Protocol):
    """What every sentkit encoder (transformer, Hill models, wrapped callables) implements::

        encode(texts: str | Sequence[str], batch_size: int = 32, *, show_progress: bool = False)

    A list gives float32 ``[n, dim]`` (``[0, dim]`` for an empty list), one ``str`` a vector
    ``[dim]`` (sentence-transformers' convention); an item that is not ``str`` raises TypeError
    naming its index. Encoders may take more keyword arguments of their own."""

    def encode(
        self, texts: str | Sequence[str], batch_size: int = 32, *, show_progress: bool = False
    ) -> np.ndarray: ...


@runtime_checkable
class BagOfVectors(Protocol):
    """An encoder whose sentence vector is a sum or mean of rows of one table (averaged GloVe, CBOW /
    SkipGram, FastSent, wordpiece skip-gram): what frequency weighting (SIF, `sentkit.models.sif`) needs.

    ``token_ids(texts)`` gives, per text, the rows of ``token_table()`` [V, dim] its vector is made of."""

    def token_ids(self, texts: list[str]) -> list[list[int]]: ...

    def token_table(self) -> np.ndarray: ...


class CallableEncoder:
    """Wrap a plain callable `list[str] -> array [n, dim]` as an Encoder (same arguments as any)."""

    def __init__(self, fn: Callable[[list[str]], Any], name: str | None = None) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "callable")

    def encode(self, texts: str | Sequence[str], batch_size: int = 32, *, show_progress: bool = False) -> np.ndarray:
        """Call `fn` on batches of `batch_size` texts; checks the shape and returns float32."""
        items, single = as_text_list(texts)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"batch_size must be a positive integer, got {batch_size!r}")
        parts = [
            check_embeddings(self.fn(list(b)), len(b), what=f"encoder {self.name}") for b in batched(items, batch_size)
        ]
        if not parts:
            out = np.zeros((0, 0), dtype=np.float32)
        else:
            dims = {p.shape[1] for p in parts}
            if len(dims) != 1:
                raise InputError(f"encoder {self.name}: batches gave different dimensions {sorted(dims)}")
            out = np.concatenate(parts)
        return out[0] if single else out


class TextsOnlyEncoder(CallableEncoder):
    """An object whose `encode` takes only the texts (``encode(texts)``), given every Encoder
    argument: its `encode` is called on batches of `batch_size` texts. Its other attributes
    (``dim``, ``fingerprint``, ...) are the object's own."""

    def __init__(self, obj: Any) -> None:
        super().__init__(obj.encode, name=type(obj).__name__)
        self.wrapped = obj

    def __getattr__(self, name: str) -> Any:
        if name == "wrapped":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.wrapped, name)


def takes_encoder_arguments(fn: Callable[..., Any]) -> bool:
    """Whether `fn` accepts the Encoder's keyword arguments (``batch_size``, ``show_progress``)
    by name or through ``**kwargs``; a callable whose signature cannot be read is trusted."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return True
    named = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return {"batch_size", "show_progress"} <= named


def as_encoder(obj: Any, *, spec: str | None = None) -> Encoder:
    """Accept an Encoder, an object whose `encode` takes only the texts, or a callable
    `list[str] -> array`. With `spec` (the ``file.py:attr`` / ``module:attr`` the object was built
    from), the result is a `CodeEncoder`: what its ``encode`` raises is the user's code failing."""
    if hasattr(obj, "encode") and callable(obj.encode):
        enc: Any = obj if takes_encoder_arguments(obj.encode) else TextsOnlyEncoder(obj)
    elif callable(obj):
        enc = CallableEncoder(obj)
    else:
        raise InputTypeError(
            f"expected an object with encode(list[str]) -> array or a callable, got {type(obj).__name__}"
        )
    return CodeEncoder(enc, spec) if spec is not None else enc  # type: ignore[no-any-return]


class CodeEncoder:
    """An encoder built from a user's code (``file.py:attr``, ``module:attr``): an exception its
    ``encode`` raises (other than a `SentkitError`) becomes a `UserCodeError` naming `spec` and the
    exception (exit 1, not sentkit's "internal error"), the original as its cause. ``encode`` keeps
    the wrapped one's signature (prompts and Encoder arguments are passed on as before); every other
    attribute is the wrapped encoder's, read and set."""

    def __init__(self, encoder: Any, spec: str) -> None:
        self.wrapped = encoder
        self.spec = spec
        inner = encoder.encode

        @functools.wraps(inner)
        def encode(*args: Any, **kwargs: Any) -> Any:
            try:
                return inner(*args, **kwargs)
            except SentkitError:
                raise
            except Exception as e:
                raise UserCodeError(spec, e) from e

        self.encode = encode

    _OWN = frozenset({"wrapped", "spec", "encode"})

    def __setattr__(self, name: str, value: Any) -> None:
        if name in CodeEncoder._OWN:
            object.__setattr__(self, name, value)
        else:  # e.g. the prompts `sentkit.load(..., prompts=)` merges into a model that has its own
            setattr(self.wrapped, name, value)

    def __reduce__(self) -> tuple[Any, ...]:
        return (CodeEncoder, (self.wrapped, self.spec))

    def __getattr__(self, name: str) -> Any:
        if name == "wrapped":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.wrapped, name)


def as_text_list(texts: Any) -> tuple[list[str], bool]:
    """The texts of an ``encode`` call as a list, and whether a single string was given.

    Follows sentence-transformers: ``encode("one text")`` embeds one text (the caller returns a
    vector ``[dim]``), ``encode(["a", "b"])`` a matrix ``[2, dim]``. Items that are not strings raise
    TypeError naming their index (``str(None)`` would silently embed the text "None")."""
    if isinstance(texts, str):
        return [texts], True
    if isinstance(texts, (bytes, bytearray)):
        raise TypeError("encode() takes str or a list of str, got bytes; decode it first")
    try:
        items = list(texts)
    except TypeError:
        raise TypeError(f"encode() takes str or a list of str, got {type(texts).__name__}") from None
    for i, t in enumerate(items):
        if not isinstance(t, str):
            raise TypeError(f"encode(): item {i} is {type(t).__name__} ({t!r:.60}), not str")
    return items, False


def check_embeddings(emb: Any, n: int, *, what: str = "encoder") -> np.ndarray:
    """Validate an encoder's output: shape [n, dim], finite; returns float32."""
    arr = np.asarray(emb)
    if arr.ndim != 2 or arr.shape[0] != n:
        raise InputError(f"{what}: expected an array of shape [{n}, dim], got {arr.shape}")
    arr = arr.astype(np.float32, copy=False)
    if not np.isfinite(arr).all():
        bad = int((~np.isfinite(arr)).any(axis=1).sum())
        raise InputError(f"{what}: {bad} of {n} embeddings contain NaN or inf")
    return arr


def batched(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def encode_texts(
    fn: Callable[[list[str]], Any],
    texts: str | Sequence[str],
    batch_size: int,
    *,
    dim: int,
    show_progress: bool = False,
    desc: str = "encode",
) -> np.ndarray:
    """The one ``encode`` convention, around ``fn(list[str]) -> [n, dim]``: a single ``str`` gives a
    vector ``[dim]``, a list ``[n, dim]`` float32; texts go to ``fn`` length-sorted in batches of
    ``batch_size`` (a tqdm bar with ``show_progress``); non-string items raise TypeError."""
    from tqdm.auto import tqdm

    items, single = as_text_list(texts)
    if batch_size < 1:
        raise InputError(f"batch_size must be >= 1, got {batch_size}")
    out = np.zeros((len(items), dim), dtype=np.float32)
    order = np.argsort([len(t) for t in items], kind="stable")
    for s in tqdm(range(0, len(items), batch_size), desc=desc, unit=" batch", disable=not show_progress):
        idx = order[s : s + batch_size]
        out[idx] = np.asarray(fn([items[i] for i in idx]), dtype=np.float32)
    return out[0] if single else out


def sum_rows(
    ids: list[list[int]], table: np.ndarray, *, average: bool = False, accumulate: type = np.float32
) -> np.ndarray:
    """Sum (or mean) of ``table`` rows per list of ids; zeros for an empty list.

    ids: n lists; table: [V, d] -> float32 [n, d]. ``accumulate`` is the dtype the sums are taken in.
    """
    n, d = len(ids), int(table.shape[1])
    out = np.zeros((n, d), dtype=np.float32)
    lengths = np.fromiter((len(t) for t in ids), dtype=np.int64, count=n)
    nonempty = np.flatnonzero(lengths)
    if nonempty.size == 0:
        return out
    flat = np.fromiter((i for t in ids for i in t), dtype=np.int64, count=int(lengths.sum()))
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])[nonempty]
    sums = np.add.reduceat(table[flat].astype(accumulate), starts, axis=0)  # [k, d]
    if average:
        sums = sums / lengths[nonempty, None]
    out[nonempty] = sums
    return out


# ----------------------------------------------------------------------------- prompts
# sentence-transformers' SentenceTransformer always knows these prompt names (empty unless set)
ST_DEFAULT_PROMPTS = {"query": "", "document": ""}
# the names a document side reads, first found wins ("passage": E5 and others; "corpus": some)
DOCUMENT_PROMPT_NAMES = ("document", "passage", "corpus")
ROLES = ("query", "document")


def check_prompts(prompts: Any, default_prompt_name: str | None, *, where: str = "prompts") -> dict[str, str]:
    """`prompts` as a dict of str -> str (None values become "", as ST does); ConfigError for anything
    else, or for a `default_prompt_name` that is not one of its names (or ST's query/document)."""
    if prompts is None:
        prompts = {}
    if not isinstance(prompts, dict):
        raise ConfigError(f"{where} must be a mapping of prompt name to prompt text, got {type(prompts).__name__}")
    out: dict[str, str] = {}
    for k, v in prompts.items():
        if not isinstance(k, str) or not (v is None or isinstance(v, str)):
            raise ConfigError(f"{where}: prompt {k!r} -> {v!r}: names and texts must be strings")
        out[k] = v or ""
    known = sorted({**ST_DEFAULT_PROMPTS, **out})
    if default_prompt_name is not None and default_prompt_name not in known:
        from sentkit.core.registry import suggest

        raise ConfigError(
            f"default_prompt_name {default_prompt_name!r} is not one of the prompts ({', '.join(known)})."
            f"{suggest(default_prompt_name, known)} Name one of them (--prompt-name), or give the text "
            "itself (--prompt TEXT)"
        )
    return out


def resolve_prompt(
    prompts: dict[str, str],
    default_prompt_name: str | None,
    *,
    prompt_name: str | None = None,
    prompt: str | None = None,
) -> str | None:
    """The prompt text ``encode(prompt_name=..., prompt=...)`` prepends, as sentence-transformers picks
    it: an explicit `prompt` wins (over `prompt_name` too); else the text of `prompt_name`; else the
    default prompt's text; None when no prompt applies. "query" and "document" are always known
    (empty unless set, as in ST). An unknown `prompt_name` is a ConfigError naming the known ones."""
    if prompt is not None:
        return prompt
    known = {**ST_DEFAULT_PROMPTS, **prompts}
    if prompt_name is not None:
        if prompt_name not in known:
            from sentkit.core.registry import suggest

            raise ConfigError(
                f"unknown prompt name {prompt_name!r}: the model's prompts are "
                f"{', '.join(sorted(known))}.{suggest(prompt_name, sorted(known))} Pass one of them, "
                "or give the text itself with --prompt TEXT (prompt=... in Python)"
            )
        return known[prompt_name]
    if default_prompt_name is not None:
        return known.get(default_prompt_name)
    return None


def prompts_of(encoder: Any) -> tuple[dict[str, str], str | None]:
    """An encoder's prompts and default prompt name ({} and None for an encoder without prompts)."""
    prompts = getattr(encoder, "prompts", None)
    default = getattr(encoder, "default_prompt_name", None)
    return (dict(prompts) if isinstance(prompts, dict) else {}), (default if isinstance(default, str) else None)


def role_prompt_name(encoder: Any, role: str) -> str:
    """The prompt name a side of a search uses, in sentkit's retrieval tasks, neighbours and ``--mteb``
    alike: "query" for queries; for documents the first of "document", "passage", "corpus" that the
    encoder's own prompts set (else "document", ST's empty default).

    sentence-transformers' ``encode_document`` looks for the same names in its ``prompts``, which always
    hold an empty "document": an E5-style model (``query`` + ``passage``) gets no document prompt there,
    nor under mteb's sentence-transformers wrapper, while sentkit uses its ``passage`` prompt (as mteb's
    own E5 entries do: ``document`` = "passage: "); `warn_document_prompt` says so once."""
    if role == "query":
        return "query"
    if role != "document":
        raise InputError(f"role must be one of {ROLES}, got {role!r}")
    prompts, _ = prompts_of(encoder)
    name = next((n for n in DOCUMENT_PROMPT_NAMES if n in prompts), "document")
    warn_document_prompt(name, prompts.get(name, ""))
    return name


_DOCUMENT_WARNED: set[tuple[str, str]] = set()


def warn_document_prompt(name: str, text: str) -> None:
    """Once per (name, text): a document prompt other than "document" that sentence-transformers'
    ``encode_document`` (and mteb running a SentenceTransformer) would not use."""
    if name == "document" or not text or (name, text) in _DOCUMENT_WARNED:
        return
    _DOCUMENT_WARNED.add((name, text))
    import logging

    logging.getLogger(__name__).warning(
        "this model's prompts have no 'document' but %r (%r): sentkit encodes documents with it (retrieval "
        "tasks, neighbours, --mteb), while sentence-transformers' encode_document and mteb's "
        "SentenceTransformer wrapper use their empty 'document' prompt; for the same document vectors there, "
        'add "document": %r to the prompts in config_sentence_transformers.json',
        name,
        text,
        text,
    )


def takes_prompts(encoder: Any) -> bool:
    """Whether `encoder.encode` takes ``prompt_name`` and ``prompt`` itself."""
    try:
        params = inspect.signature(encoder.encode).parameters
    except (TypeError, ValueError, AttributeError):
        return False
    return "prompt_name" in params and "prompt" in params


def encode_with_prompt(
    encoder: Any,
    texts: str | Sequence[str],
    *,
    prompt_name: str | None = None,
    prompt: str | None = None,
    **kwargs: Any,
) -> np.ndarray:
    """``encoder.encode(texts, **kwargs)`` with a prompt, for any encoder: one that takes prompts gets
    `prompt_name` / `prompt`; any other gets the resolved prompt's text prepended to every text (an
    encoder without prompts knows only ST's empty "query" and "document")."""
    if takes_prompts(encoder):
        return encoder.encode(texts, prompt_name=prompt_name, prompt=prompt, **kwargs)  # type: ignore[no-any-return]
    text = resolve_prompt(*prompts_of(encoder), prompt_name=prompt_name, prompt=prompt)
    if text:
        items, single = as_text_list(texts)
        texts = [text + t for t in items]
        out = np.asarray(encoder.encode(texts, **kwargs))
        return out[0] if single else out
    return encoder.encode(texts, **kwargs)  # type: ignore[no-any-return]


def prompt_used(encoder: Any, *, prompt_name: str | None = None, prompt: str | None = None) -> str | None:
    """The prompt text an ``encode_with_prompt(encoder, ..., prompt_name=, prompt=)`` call prepends
    (None or "" for none): what caches of its vectors must be keyed on."""
    return resolve_prompt(*prompts_of(encoder), prompt_name=prompt_name, prompt=prompt)


class PromptedEncoder:
    """Any encoder given prompts (sentence-transformers' rules, `resolve_prompt`): the prompt's text is
    prepended to every text before the wrapped encoder sees it. Other attributes (``fingerprint``,
    ``dim``, ...) are the wrapped encoder's: caches key on the prompt text used (`prompted_fingerprint`)."""

    def __init__(
        self, encoder: Any, prompts: dict[str, str] | None = None, default_prompt_name: str | None = None
    ) -> None:
        self.wrapped = encoder
        self.prompts = check_prompts(prompts, default_prompt_name)
        self.default_prompt_name = default_prompt_name

    def encode(
        self,
        texts: str | Sequence[str],
        batch_size: int = 32,
        *,
        show_progress: bool = False,
        prompt_name: str | None = None,
        prompt: str | None = None,
        **kwargs: Any,
    ) -> np.ndarray:
        text = resolve_prompt(self.prompts, self.default_prompt_name, prompt_name=prompt_name, prompt=prompt)
        items, single = as_text_list(texts)
        if text:
            items = [text + t for t in items]
        args = (
            {"batch_size": batch_size, "show_progress": show_progress}
            if takes_encoder_arguments(self.wrapped.encode)
            else {}
        )
        out = np.asarray(self.wrapped.encode(items, **args, **kwargs))
        return out[0] if single else out

    def __getattr__(self, name: str) -> Any:
        if name == "wrapped":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.wrapped, name)


# ----------------------------------------------------------------------------- the command-line flags
PROMPT_CUSTOM = "custom"  # the prompt name `--prompt TEXT` is given under where a default is needed (evaluate)


def add_prompt_flags(
    p: Any, *, what: str = "every text", default: str = "the model's default_prompt_name, if any"
) -> None:
    """`--prompt-name NAME` / `--prompt TEXT`, the same on every command that encodes (docs/evaluation.md,
    "Prompts")."""
    p.add_argument(
        "--prompt-name",
        default=None,
        metavar="NAME",
        help=f"prepend the model's prompt NAME (from its config_sentence_transformers.json, e.g. query) to "
        f"{what}; default: {default}",
    )
    p.add_argument(
        "--prompt",
        default=None,
        metavar="TEXT",
        help=f"prepend TEXT to {what} (wins over --prompt-name, as in sentence-transformers)",
    )


def prompt_load_kwargs(args: Any) -> dict[str, Any]:
    """What `--prompt-name` / `--prompt` give `sentkit.load` where they set the model's default prompt
    (evaluate): `--prompt TEXT` becomes the prompt named "custom", made the default."""
    if getattr(args, "prompt", None) is not None:
        return {"prompts": {PROMPT_CUSTOM: args.prompt}, "default_prompt_name": PROMPT_CUSTOM}
    if getattr(args, "prompt_name", None) is not None:
        return {"default_prompt_name": args.prompt_name}
    return {}


class PostProcessed:
    """An encoder whose vectors are another's (`wrapped`), computed whole with the prompt asked, then changed by
    `post` (a cut to the first N dimensions, quantized codes as floats). Other attributes are the wrapped encoder's;
    the fingerprint is the wrapped one's with `tag` (None where that has none). Subclasses set `wrapped` and give
    `post` and `tag`."""

    wrapped: Any
    codes = False  # `post` makes codes of the float vectors (what a binary search rescores with is before it)

    def post(self, emb: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def tag(self) -> str:
        raise NotImplementedError

    def encode(
        self,
        texts: Any,
        batch_size: int = 32,
        *,
        show_progress: bool = False,
        prompt_name: str | None = None,
        prompt: str | None = None,
        **kwargs: Any,
    ) -> Any:
        items, single = as_text_list(texts)
        args = {"batch_size": batch_size, "show_progress": show_progress}
        if not takes_encoder_arguments(self.wrapped.encode):
            args = {}
        raw = encode_with_prompt(self.wrapped, items, prompt_name=prompt_name, prompt=prompt, **args, **kwargs)
        out = self.post(np.asarray(raw, dtype=np.float32))
        return out[0] if single else out

    def fingerprint(self) -> str | None:
        return derived_fingerprint(self.tag(), self.wrapped)

    def __getattr__(self, name: str) -> Any:
        if name == "wrapped":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.wrapped, name)


Step = Callable[[np.ndarray], np.ndarray]


def _identity_step(emb: np.ndarray) -> np.ndarray:
    return emb


def _then(first: Step, second: Step) -> Step:
    return lambda emb: second(first(emb))


@dataclass(frozen=True)
class WholeVectors:
    """`encoder`'s vectors are whole ones, changed after encoding into another encoder's (`whole_vectors`): `step`
    turns them into that encoder's vectors; `float_step` into the float vectors its codes were made from (the same as
    `step` for an encoder that is not quantized), what a binary search rescores candidates with."""

    encoder: Any
    step: Step
    float_step: Step


def whole_vectors(enc: Any) -> WholeVectors | None:
    """How `enc`'s vectors are made from another encoder's whole ones, where they are: `PostProcessed` wrappers
    (quantized codes, a cut of a model that is not a transformer) and a model's own cut to its first dimensions
    (``truncate_dim``, through its ``whole()``: ``(encoder of the whole vectors, the cut)``); None for any other
    encoder. What lets an evaluation cache one set of vectors and score every width and code of a model from it."""
    if isinstance(enc, PostProcessed):
        inner = whole_vectors(enc.wrapped)
        before: Step
        floats: Step
        if inner is None:
            base, before, floats = enc.wrapped, _identity_step, _identity_step
        else:
            base, before, floats = inner.encoder, inner.step, inner.float_step
        return WholeVectors(base, _then(before, enc.post), floats if enc.codes else _then(floats, enc.post))
    # the class's own `whole` only: a wrapper that delegates attributes (a PromptedEncoder) changes the vectors
    if callable(getattr(type(enc), "whole", None)) and getattr(enc, "truncate_dim", None) is not None:
        base, cut = enc.whole()
        return WholeVectors(base, cut, cut)
    return None

"""DeCLUTR (Giorgi et al., ACL 2021): spans of the same document are positives, every other span
of the batch a negative (the other anchors of a document are its hard negatives); NT-Xent summed
with MLM on the anchors; mean pooling.

On a decoder language model (GPT-2, Llama, Qwen2, ...; its paper: the objective extends "any transformer-based
language model"), the MLM term is masked next-token prediction through the LM head (LLM2Vec's MNTP), with the mask
token that `mask_token` picks when the tokenizer has none."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from sentkit.core.config import ConfigError
from sentkit.data.corpus import Fix
from sentkit.models.decoder import check_mask_token, is_decoder_config
from sentkit.models.mlm import MaskedLM
from sentkit.models.pooling import POOLINGS
from sentkit.objectives.contrastive import info_nce
from sentkit.objectives.matryoshka import MatryoshkaSettings, matryoshka_card
from sentkit.objectives.mlm import mask_sequence
from sentkit.objectives.spans import STRATEGIES, SpanSettings, sample_spans
from sentkit.training.batching import pad_with_labels
from sentkit.training.config import TrainConfig
from sentkit.training.recipe import (
    Batch,
    Recipe,
    Seeds,
    StepOut,
    StoreSpec,
    TrainModule,
    freeze_unused,
    in_order,
)

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- config
@dataclass
class DeclutrConfig(MatryoshkaSettings, TrainConfig):
    """Every setting of a DeCLUTR run. Defaults are the paper's, except the offline base model, and
    that long documents are cut into pieces (so a few books give enough documents for a batch)."""

    # documents: "auto" pieces are twice the paper's minimum length (num_anchors * max_span_len * 4);
    # "none" never cuts
    max_doc_tokens: int | Literal["auto", "none"] = "auto"
    # spans
    num_anchors: int = 2
    num_positives: int = 2
    min_span_len: int = 32
    max_span_len: int = 512
    strategy: Literal["default", "adjacent", "subsuming"] = "default"
    # objective
    temperature: float = 0.05
    contrastive: bool = True
    mlm: bool = True
    mlm_probability: float = 0.15
    mask_token: str = "blank"  # a decoder base without one: blank ("_"), eos or new ("<mask>"), as --method mntp

    POSITIVE_INTS: ClassVar[tuple[str, ...]] = (
        *TrainConfig.POSITIVE_INTS,
        "num_anchors",
        "num_positives",
        "min_span_len",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.strategy not in STRATEGIES:
            raise ConfigError(f"strategy must be one of {STRATEGIES}, got {self.strategy!r}")
        if not (self.contrastive or self.mlm):
            raise ConfigError("at least one of contrastive and mlm must be on")
        if self.min_span_len > self.max_span_len:
            raise ConfigError(f"min_span_len ({self.min_span_len}) exceeds max_span_len ({self.max_span_len})")
        if not self.temperature > 0:
            raise ConfigError("temperature must be positive")
        if not 0 < self.mlm_probability < 1:
            raise ConfigError("mlm_probability must be in (0, 1)")
        check_mask_token(self.mask_token)
        if isinstance(self.max_doc_tokens, int) and self.max_doc_tokens < 1:
            raise ConfigError(f"max_doc_tokens must be at least 1 (or auto / none), got {self.max_doc_tokens}")

    def spans(self, max_len: int | None = None) -> SpanSettings:
        hi = min(self.max_span_len, max_len) if max_len else self.max_span_len
        return SpanSettings(self.num_anchors, self.num_positives, min(self.min_span_len, hi), hi, self.strategy)

    def doc_tokens(self, spans: SpanSettings) -> int | None:
        """The resolved piece length: None (never cut) or a number of tokens."""
        if self.max_doc_tokens == "none":
            return None
        if self.max_doc_tokens == "auto":
            return 2 * spans.min_doc_tokens
        return int(self.max_doc_tokens)


# ----------------------------------------------------------------------------- data of a step
@dataclass
class SpanBatch(Batch):
    """Anchors first (num_units * A), then positives (num_units * A * P); MLM labels per anchor."""

    seqs: list[list[int]] | None = None
    labels: list[list[int] | None] | None = None
    per_unit: int = 2  # A
    num_positives: int = 2  # P


class DeclutrModule(TrainModule):
    def __init__(self, mlm_model: Any, pooling: str, mlm: bool, pad_id: int, contrastive: bool = True) -> None:
        super().__init__()
        self.model = MaskedLM(mlm_model, pooling)
        self.mlm_model = mlm_model
        self.mlm = mlm
        self.contrastive = contrastive
        self.pad_id = pad_id
        if not mlm:  # the head takes no part: keep DDP from waiting for its gradients
            freeze_unused(mlm_model, mlm_model.base_model)

    def forward(self, batch: Batch, group: Sequence[int], seeds: Seeds) -> StepOut:
        """Embed the anchors of documents `group` and their positives -> views (anchors [k, d],
        mean of each anchor's P positives [k, d]) and the anchors' summed MLM loss. Without the
        contrastive loss only the anchors are encoded and there are no views."""
        assert isinstance(batch, SpanBatch) and batch.seqs is not None and batch.labels is not None
        a_per, p = batch.per_unit, batch.num_positives
        n_anchor = batch.num_units * a_per
        anchors = [u * a_per + j for u in group for j in range(a_per)]
        idx = anchors + ([n_anchor + a * p + j for a in anchors for j in range(p)] if self.contrastive else [])
        seqs = [batch.seqs[i] for i in idx]
        labels = [batch.labels[i] if self.mlm else None for i in idx]
        mlm_sum = torch.zeros((), device=next(self.parameters()).device)

        def run(chunk: list[int]) -> torch.Tensor:
            nonlocal mlm_sum
            ids, mask, lab = pad_with_labels(
                [seqs[i] for i in chunk], [labels[i] for i in chunk], self.pad_id, mlm_sum.device
            )
            emb, s, _ = self.model(ids, mask if len({len(seqs[i]) for i in chunk}) > 1 else None, lab)
            mlm_sum = mlm_sum + s
            return emb.float()

        emb = in_order(self.run_chunks([len(s) for s in seqs], seeds, run), len(seqs))  # [k + k*P, d]
        k = len(anchors)
        views = (emb[:k], emb[k:].view(k, p, -1).mean(dim=1)) if self.contrastive else None
        return StepOut(views, {"mlm": mlm_sum} if self.mlm else {})


# --------------------------------------------------------------------------- is the base strong enough for these spans?
WEAK_MLM_LOSS = 4.0  # nats: the plain study's base ended at 5.9 (perplexity ~380); trained BERTs are near 2
ANISOTROPIC = 0.6  # mean cosine of random pairs: the plain base 0.70, where the paper's spans hurt


def _main_process() -> bool:
    import torch.distributed as dist

    return not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0


@torch.no_grad()
def base_report(
    mlm_model: Any,
    tokenizer: Any,
    store: Any,
    prefix: list[int],
    suffix: list[int],
    *,
    max_len: int = 512,
    samples: int = 128,
    seed: int = 0,
) -> dict[str, float]:
    """What a start-up check needs to know of the base on this corpus, from `samples` random windows of
    sentence length: the corpus's mean sentence length in tokens (tokens between sentence-final marks),
    the anisotropy of the base's mean-pooled vectors (mean cosine of all pairs of different windows) and
    its masked-LM loss on them (15 % masked; NaN without a mapped MLM head). Windows fit `max_len`, the
    model's positions (special tokens included)."""
    from sentkit.models.mlm import MaskedLM
    from sentkit.objectives.mlm import IGNORE_INDEX, mask_tokens

    rng = np.random.default_rng(seed)
    marks = [
        i for i in tokenizer.convert_tokens_to_ids([".", "!", "?"]) if i is not None and i != tokenizer.unk_token_id
    ]
    docs = rng.choice(len(store), size=4 * samples, replace=len(store) < 4 * samples)
    ends = total = 0
    for d in docs[:64]:
        toks = store.doc(int(d))
        ends += int(np.isin(toks, marks).sum())
        total += len(toks)
    sent_len = total / max(ends, 1)
    width = int(np.clip(round(sent_len), 1, max(1, min(64, max_len - len(prefix) - len(suffix)))))
    windows = []
    for d in docs:
        toks = store.doc(int(d))
        if len(toks) > width:
            s = int(rng.integers(len(toks) - width))
            windows.append(prefix + toks[s : s + width].tolist() + suffix)
        if len(windows) == samples:
            break
    if len(windows) < 2:  # documents too short to say anything
        return {"sentence_tokens": sent_len, "anisotropy": float("nan"), "mlm_loss": float("nan")}
    was_training = mlm_model.training
    mlm_model.eval()
    try:
        model = MaskedLM(mlm_model, "mean")
        ids = torch.tensor(windows, dtype=torch.long, device=next(mlm_model.parameters()).device)
        emb = torch.nn.functional.normalize(model(ids, None, None)[0].float(), dim=1)
        cos = emb @ emb.T
        n = len(windows)
        anisotropy = float((cos.sum() - cos.diagonal().sum()) / max(n * (n - 1), 1))
        loss = float("nan")
        if model.head is not None and tokenizer.mask_token_id is not None:
            maskable = torch.ones_like(ids, dtype=torch.bool)
            maskable[:, : len(prefix)] = False
            maskable[:, ids.shape[1] - len(suffix) :] = False
            gen = torch.Generator().manual_seed(seed)
            masked, labels = mask_tokens(
                ids.cpu(),
                maskable.cpu(),
                mask_token_id=int(tokenizer.mask_token_id),
                vocab_size=int(mlm_model.config.vocab_size),
                generator=gen,
            )
            total_loss, count = model.mlm_sum(model.hidden(masked.to(ids.device), None), labels.to(ids.device))
            loss = float(total_loss) / max(count, 1) if int((labels != IGNORE_INDEX).sum()) else float("nan")
    finally:
        mlm_model.train(was_training)
    return {"sentence_tokens": round(sent_len, 1), "anisotropy": round(anisotropy, 3), "mlm_loss": round(loss, 2)}


def _checkpoint_keys(folder: Path) -> list[str] | None:
    """The weight names in a model folder's checkpoint (safetensors or PyTorch, sharded or not), read without
    loading the weights; None when it has none sentkit can read."""
    import json

    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if (folder / index).is_file():
            return list(json.loads((folder / index).read_text()).get("weight_map", {}))
    if (folder / "model.safetensors").is_file():
        from safetensors import safe_open

        with safe_open(str(folder / "model.safetensors"), "pt") as f:
            return list(f.keys())
    if (folder / "pytorch_model.bin").is_file():
        return list(torch.load(folder / "pytorch_model.bin", map_location="cpu", mmap=True, weights_only=True))
    return None


def base_has_mlm_head(name_or_path: str, mlm_model: Any) -> bool | None:
    """Whether the base's own weights hold an MLM head (`mlm_model`'s modules beside its base model: BERT's
    ``cls``, RoBERTa's ``lm_head``); False for a sentence-transformers folder of the bare encoder, whose head
    `load_mlm` initialised fresh. None when it cannot be told (not a local folder)."""
    from sentkit.models.hub import resolve

    folder = Path(resolve(name_or_path)) if name_or_path else None
    head = {n for n, _ in mlm_model.named_children() if n != getattr(mlm_model, "base_model_prefix", None)}
    keys = _checkpoint_keys(folder) if folder is not None and folder.is_dir() and head else None
    return None if keys is None else any(k.split(".", 1)[0] in head for k in keys)


def mean_anchor_tokens(spans: SpanSettings) -> float:
    """The expected anchor length: Beta(4, 2) has mean 2/3 (objectives/spans.py)."""
    return spans.min_span_len + (spans.max_span_len - spans.min_span_len) * 2 / 3


def warn_weak_base(report: dict[str, float], spans: SpanSettings) -> bool:
    """Log the base's numbers; warn (and return True) when anchors far longer than the corpus's sentences
    (over twice their length on average) meet a weak base: a masked-LM loss above WEAK_MLM_LOSS or, for a
    base without a mapped MLM head, mean-pooled vectors more anisotropic than ANISOTROPIC. (Anisotropy
    alone does not tell a weak base: well-trained masked LMs are anisotropic too.)"""
    sent, anchor = report["sentence_tokens"], mean_anchor_tokens(spans)
    log.info(
        "base on this corpus: masked-LM loss %.2f, anisotropy %.2f (mean cosine of random windows); sentences "
        "of %.0f tokens, anchors of %.0f on average (spans %d-%d)",
        report["mlm_loss"],
        report["anisotropy"],
        sent,
        anchor,
        spans.min_span_len,
        spans.max_span_len,
    )
    loss = report["mlm_loss"]
    if loss == loss:  # the base has an MLM head: its loss says how well it knows this text
        weak = f"masked-LM loss {loss:.1f} > {WEAK_MLM_LOSS:g}" if loss > WEAK_MLM_LOSS else ""
    else:
        weak = f"anisotropy {report['anisotropy']:.2f} > {ANISOTROPIC:g}" if report["anisotropy"] > ANISOTROPIC else ""
    if weak and anchor > 2 * sent:
        log.warning(
            "this base looks too weak for spans of %d-%d tokens (%s): its anchors average %.0f tokens, over twice this "
            "corpus's sentences (%.0f; STS sentences average about 12). In sentkit's plain study such a base lost 2 "
            "points of unsupervised STS with the paper's spans and gained 7 with sentence-length ones. Consider --set "
            "min_span_len=4 --set max_span_len=32, or the raw-text recipe (sentkit train --method raw-text; "
            "docs/methods.md)",
            spans.min_span_len,
            spans.max_span_len,
            weak,
            anchor,
            sent,
        )
        return True
    return False


# ----------------------------------------------------------------------------- the method
class Declutr(Recipe):
    name = "declutr"
    config_cls = DeclutrConfig
    unit_name = "document"

    def __init__(self, cfg: DeclutrConfig, mlm_model: Any, tokenizer: Any, max_len: int) -> None:
        super().__init__(cfg, mlm_model, tokenizer, max_len)
        self.cfg: DeclutrConfig = cfg
        self.span_settings = cfg.spans(max_len - len(self.prefix) - len(self.suffix))
        if self.span_settings.max_span_len < cfg.max_span_len:
            log.info(
                "max_span_len lowered to %d to fit the model's %d positions", self.span_settings.max_span_len, max_len
            )
        if cfg.mlm and tokenizer.mask_token_id is None:
            raise ConfigError(f"model {cfg.model!r} has no mask token; use --set mlm=false")
        cfg.check_matryoshka_width(int(mlm_model.config.hidden_size) * POOLINGS.get(cfg.pooling).width)
        self.special = sorted(set(tokenizer.all_special_ids) - {tokenizer.unk_token_id})
        self.next_token = is_decoder_config(mlm_model.config)  # a decoder: token 0 has no output before it
        self.loss_names = (("contrastive",) if cfg.contrastive else ()) + (("mlm",) if cfg.mlm else ())

    @classmethod
    def load_model(cls, cfg: Any, out: Path) -> tuple[Any, Any]:
        """The base (`Recipe.load_model`); a decoder's tokenizer is given a mask token for the MLM term."""
        from sentkit.models.decoder import set_mask_token

        model, tokenizer = super().load_model(cfg, out)
        if cfg.mlm and is_decoder_config(model.config):
            set_mask_token(model, tokenizer, cfg.mask_token)
        return model, tokenizer

    @property
    def has_contrastive(self) -> bool:
        return self.cfg.contrastive

    def store_spec(self) -> StoreSpec:
        s = self.span_settings
        return StoreSpec("document", s.min_doc_tokens, self.cfg.doc_tokens(s))

    def units(self, store: Any) -> int:
        # the check's thresholds are a masked LM's (its MLM loss, its anisotropy): a decoder's say nothing of them
        if not getattr(self, "_checked", False) and _main_process() and not self.next_token:
            self._checked = True
            report = base_report(self.mlm_model, self.tokenizer, store, self.prefix, self.suffix, max_len=self.max_len)
            if report["mlm_loss"] == report["mlm_loss"] and base_has_mlm_head(self.cfg.model, self.mlm_model) is False:
                # the loss of the head load_mlm just made (random, untrained) says nothing of the encoder
                log.info(
                    "masked-LM loss %.2f is that of a fresh MLM head (%s has none): not a sign of a weak base",
                    report["mlm_loss"],
                    self.cfg.model,
                )
                report["mlm_loss"] = float("nan")
            warn_weak_base(report, self.span_settings)
        return len(store)

    def length_rule(self) -> Any:
        from sentkit.data.store import LengthRule

        return LengthRule(self.cfg.num_anchors, self.cfg.min_span_len)

    def more_units_fix(self, store: Any, want: int) -> Fix | None:
        """Cutting documents into pieces of the minimum length, when that gives `want` of them."""
        spec = self.store_spec()
        pieces = int((store.lengths() // spec.min_tokens).sum() * self.cfg.corpus_fraction)
        if (spec.max_tokens is None or spec.max_tokens > spec.min_tokens) and pieces >= want:
            return Fix({"max_doc_tokens": spec.min_tokens}, f"cuts documents into about {pieces} pieces")
        return None

    def batch(self, store: Any, units: list[int], step: int) -> SpanBatch:
        """Spans (and anchor MLM masks) of `units`, seeded per (seed, step, document)."""
        cfg, spans = self.cfg, self.span_settings
        anchors: list[list[int]] = []
        positives: list[list[int]] = []
        labels: list[list[int] | None] = []
        special = np.asarray(self.special)
        for d in units:
            rng = np.random.default_rng([cfg.seed, step, d, 0x5A])
            toks = store.doc(d)
            s = sample_spans(len(toks), spans, rng)
            for a, ps in zip(s.anchors, s.positives):
                body = toks[a.start : a.end]
                ids = self.prefix + body.tolist() + self.suffix
                if cfg.mlm:
                    maskable = (
                        [False] * len(self.prefix) + (~np.isin(body, special)).tolist() + [False] * len(self.suffix)
                    )
                    if self.next_token:  # nothing predicts a decoder's first token
                        maskable[0] = False
                    gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
                    ids, lab = mask_sequence(
                        ids,
                        maskable,
                        mask_token_id=int(self.tokenizer.mask_token_id),
                        vocab_size=int(self.mlm_model.config.vocab_size),
                        generator=gen,
                        probability=cfg.mlm_probability,
                    )
                    labels.append(lab)
                else:
                    labels.append(None)
                anchors.append(ids)
                positives.extend(self.prefix + toks[p.start : p.end].tolist() + self.suffix for p in ps)
        seqs = anchors + positives
        counts = (
            {"mlm": float(sum(sum(1 for t in lb if t != -100) for lb in labels if lb is not None))} if cfg.mlm else {}
        )
        return SpanBatch(
            len(units),
            counts,
            sum(len(x) for x in seqs),
            seqs,
            labels + [None] * len(positives),
            spans.num_anchors,
            spans.num_positives,
        )

    def module(self) -> TrainModule:
        return DeclutrModule(self.mlm_model, self.cfg.pooling, self.cfg.mlm, self.pad_id, self.cfg.contrastive)

    def contrastive(self, a: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        return self.cfg.matryoshka_loss(partial(info_nce, temperature=self.cfg.temperature), a, p)

    def encoder_settings(self) -> dict[str, Any]:
        return {"pooling": self.cfg.pooling, **self.cfg.matryoshka_marker()}

    def card(self, steps: int, store: Any) -> str:
        c, s = self.cfg, self.span_settings
        return (
            f"Continued pretraining of `{c.model}` with the DeCLUTR objective (Giorgi et al., ACL 2021) for {steps} "
            f"steps on `{c.corpus}` ({len(store)} documents, {store.meta.get('num_tokens', 0):,} tokens).\n\n"
            f"- pooling: {c.pooling}; anchors {c.num_anchors}, positives {c.num_positives}, spans "
            f"{s.min_span_len}-{s.max_span_len} tokens ({c.strategy}); temperature {c.temperature}\n"
            f"- losses: contrastive={c.contrastive}, mlm={c.mlm}; batch {c.batch_size} documents, lr {c.lr}\n"
            + matryoshka_card(c)
        )

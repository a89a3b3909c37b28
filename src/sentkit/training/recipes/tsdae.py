"""TSDAE (Wang, Reimers & Gurevych, Findings of EMNLP 2021): delete 60 % of a sentence's words, encode
what is left into one pooled vector, and make a decoder reconstruct the whole sentence from that
vector alone (its only memory, through cross-attention). The decoder is built from the encoder's
architecture and shares all its weights except the cross-attention, as in their setup; its
output layer is the masked LM's head. With LoRA (``lora_r``) the decoder shares the encoder's adapted layers
themselves (frozen weight and adapters), so encoder and decoder still compute with the same weights; the
cross-attention, which only the decoder has and which is not saved, trains in full.

A decoder language model as the base: its own causal LM with cross-attention added is the decoder (causal even when
the encoder attends bidirectionally), its LM head the output layer; transformers gives cross-attention to some
decoder families (GPT-2) and not to others (Llama, Qwen2, Mistral), which are refused with that reason."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F

from sentkit.core.config import ConfigError
from sentkit.models.decoder import is_decoder_config
from sentkit.models.mlm import MaskedLM
from sentkit.objectives.noise import delete_words, word_ids
from sentkit.training.batching import pad_with_labels
from sentkit.training.recipe import Batch, Seeds, StepOut, TrainModule
from sentkit.training.recipes.texts import TextConfig, TextRecipe

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- config
@dataclass
class TSDAEConfig(TextConfig):
    """Defaults follow the paper and sentence-transformers' TSDAE example: CLS pooling, deletion
    ratio 0.6, batch 8, constant lr 3e-5, no weight decay, decoder tied to the encoder."""

    pooling: Literal["mean", "cls"] = "cls"
    deletion_ratio: float = 0.6
    max_len: int = 64
    batch_size: int = 8
    lr: float = 3e-5
    weight_decay: float = 0.0
    schedule: Literal["slanted_triangular", "linear", "constant"] = "constant"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 <= self.deletion_ratio < 1:
            raise ConfigError(f"deletion_ratio must be in [0, 1), got {self.deletion_ratio}")


# ----------------------------------------------------------------------------- decoder
def tied_decoder(mlm_model: Any) -> Any:
    """A causal-LM decoder with cross-attention of the masked LM's architecture, every parameter of
    which the masked LM also has (same name and shape) being the masked LM's own tensor."""
    import copy

    from transformers import AutoModelForCausalLM

    from sentkit.core.logs import quiet_transformers

    cfg = copy.deepcopy(mlm_model.config)
    cfg.is_decoder = True
    cfg.add_cross_attention = True
    if is_decoder_config(cfg):
        cfg.is_causal = True  # the reconstruction reads left to right, whatever the encoder's attention
    try:
        with quiet_transformers():
            decoder = AutoModelForCausalLM.from_config(cfg)
    except ValueError:
        raise ConfigError(
            f"TSDAE needs a decoder with cross-attention of the model's architecture; transformers has none for "
            f"{cfg.model_type!r} (it has one for bert, roberta, electra, xlm-roberta, camembert, ...)"
        ) from None
    if is_decoder_config(cfg) and not any(
        "crossattention" in n or "cross_attn" in n for n, _ in decoder.named_modules()
    ):
        raise ConfigError(
            f"TSDAE's decoder reads the sentence vector through cross-attention, and transformers' {cfg.model_type!r} "
            "has none (GPT-2 has it): train this decoder with --method declutr, simcse, mntp or llm2vec"
        )
    # a layer LoRA wraps in the encoder (sentkit.models.lora) is shared whole: the decoder computes with the same
    # frozen weight and the same adapters, so tying stays exact under LoRA; the rest is tied tensor by tensor
    from sentkit.models.lora import is_lora_layer

    shared = 0
    for name, module in list(mlm_model.named_modules()):
        if not is_lora_layer(module):
            continue
        parent, _, child = name.rpartition(".")
        try:
            owner = decoder.get_submodule(parent) if parent else decoder
        except AttributeError:
            continue
        own = getattr(owner, child, None)
        base = module.get_base_layer()
        if own is not None and type(own) is type(base) and own.weight.shape == base.weight.shape:
            setattr(owner, child, module)
            shared += 1
    if shared:
        log.debug("TSDAE's decoder shares %d LoRA layers of the encoder", shared)
    modules = dict(decoder.named_modules())
    tied = 0
    for name, param in mlm_model.named_parameters(remove_duplicate=False):
        module_name, _, attr = name.rpartition(".")
        target = modules.get(module_name)
        own = getattr(target, attr, None) if target is not None else None
        if isinstance(own, torch.nn.Parameter) and own.shape == param.shape:
            setattr(target, attr, param)
            tied += 1
    if not tied:
        raise ConfigError(f"could not tie a {cfg.model_type} decoder to the encoder: no parameter names match")
    return decoder


# ----------------------------------------------------------------------------- data and model
@dataclass
class DenoisingBatch(Batch):
    """Per text: the noisy encoder input and the original (decoder input and target)."""

    noisy: list[list[int]] | None = None
    original: list[list[int]] | None = None


class TSDAEModule(TrainModule):
    def __init__(self, mlm_model: Any, pooling: str, pad_id: int) -> None:
        super().__init__()
        self.model = MaskedLM(mlm_model, pooling)
        self.mlm_model = mlm_model
        self.decoder = tied_decoder(mlm_model)
        from sentkit.models.mlm import enable_checkpointing, is_checkpointing

        if is_checkpointing(mlm_model):  # gradient_checkpointing: the decoder's layers too
            enable_checkpointing(self.decoder)
        self.decoder_base = self.decoder.base_model
        assert self.model.head is not None, "TSDAE's decoder output is the masked LM's head"
        self.pad_id = pad_id

    def reconstruction(self, memory: torch.Tensor, targets: list[list[int]], seeds: Seeds) -> torch.Tensor:
        """Summed cross-entropy of predicting each original text token by token (teacher forcing)
        from `memory` [n, d], the pooled vectors of their noisy versions."""
        device = memory.device
        total = torch.zeros((), device=device)
        lengths = [len(t) - 1 for t in targets]

        def run(chunk: list[int]) -> torch.Tensor:
            ids, _, _ = pad_with_labels([targets[i] for i in chunk], [None] * len(chunk), self.pad_id, device)
            inp, lab = ids[:, :-1], ids[:, 1:]  # [c, L-1]: predict token t+1 from tokens <= t
            valid = torch.zeros_like(lab, dtype=torch.bool)
            for r, i in enumerate(chunk):
                valid[r, : lengths[i]] = True
            hidden = self.decoder_base(
                input_ids=inp, encoder_hidden_states=memory[chunk].unsqueeze(1), use_cache=False
            ).last_hidden_state  # causal: padding after a text never reaches it
            assert self.model.head is not None
            logits = self.model.head(hidden[valid])  # [m, V]
            return F.cross_entropy(logits.float(), lab[valid], reduction="sum")

        for _, s in self.run_chunks(lengths, seeds, run, offset=1 << 20):
            total = total + s
        return total

    def forward(self, batch: Batch, group: Sequence[int], seeds: Seeds) -> StepOut:
        assert isinstance(batch, DenoisingBatch) and batch.noisy is not None and batch.original is not None
        noisy = [batch.noisy[i] for i in group]
        device = next(self.parameters()).device
        parts = self.run_chunks(
            [len(s) for s in noisy], seeds, lambda chunk: self._encode([noisy[i] for i in chunk], device)
        )
        order = [i for idx, _ in parts for i in idx]
        memory = torch.cat([t for _, t in parts])[torch.argsort(torch.tensor(order)).to(device)]  # [k, d]
        return StepOut(None, {"reconstruction": self.reconstruction(memory, [batch.original[i] for i in group], seeds)})

    def _encode(self, seqs: list[list[int]], device: torch.device) -> torch.Tensor:
        ids, mask, _ = pad_with_labels(seqs, [None] * len(seqs), self.pad_id, device)
        return self.model(ids, mask if len({len(s) for s in seqs}) > 1 else None, None)[0]  # type: ignore[no-any-return]


# ----------------------------------------------------------------------------- the method
class TSDAE(TextRecipe):
    name = "tsdae"
    config_cls = TSDAEConfig

    def __init__(self, cfg: TSDAEConfig, mlm_model: Any, tokenizer: Any, max_len: int) -> None:
        super().__init__(cfg, mlm_model, tokenizer, max_len)
        self.cfg: TSDAEConfig = cfg
        self.continues = continuation_ids(tokenizer)
        self.loss_names = ("reconstruction",)

    def batch(self, store: Any, units: list[int], step: int) -> DenoisingBatch:
        noisy, original = [], []
        for u in units:
            ids = self.text_ids(store, u, step, 0x75)
            rng = np.random.default_rng([self.cfg.seed, step, u, 0xDE1])
            kept = delete_words(ids, word_ids(ids, self.continues), self.cfg.deletion_ratio, rng)
            noisy.append(self.prefix + kept.tolist() + self.suffix)
            original.append(self.prefix + ids.tolist() + self.suffix)
        targets = float(sum(len(o) - 1 for o in original))
        return DenoisingBatch(
            len(units),
            {"reconstruction": targets},
            sum(len(s) for s in noisy) + sum(len(s) - 1 for s in original),
            noisy,
            original,
        )

    def module(self) -> TrainModule:
        return TSDAEModule(self.mlm_model, self.cfg.pooling, self.pad_id)

    def card(self, steps: int, store: Any) -> str:
        c = self.cfg
        return (
            f"TSDAE (Wang, Reimers & Gurevych, Findings of EMNLP 2021) from `{c.model}` for {steps} steps on "
            f"`{c.corpus}` ({len(store)} {c.text_unit}s of at most {c.max_len} tokens).\n\n"
            f"- pooling: {c.pooling}; deletion ratio {c.deletion_ratio} (whole words); decoder tied to the encoder, "
            f"cross-attention to the pooled vector only\n- batch {c.batch_size} texts, lr {c.lr} ({c.schedule})\n"
        )


def continuation_ids(tokenizer: Any) -> np.ndarray:
    """[V] bool: True for tokens that continue the word before them (WordPiece "##x"; for byte-level
    BPE and SentencePiece, pieces without the word-start marker)."""
    vocab = tokenizer.get_vocab()
    size = max(len(tokenizer), max(vocab.values()) + 1)
    out = np.zeros(size, dtype=bool)
    pieces = list(vocab.items())
    if any(t.startswith("##") for t, _ in pieces):
        for t, i in pieces:
            out[i] = t.startswith("##")
        return out
    marker = "\u2581" if any(t.startswith("\u2581") for t, _ in pieces) else "\u0120"
    special = set(tokenizer.all_special_tokens)
    for t, i in pieces:
        out[i] = not t.startswith(marker) and t not in special and t.isalnum()
    return out

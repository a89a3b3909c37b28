"""The memory plan of a training run: the peak bytes one process holds, from the model's config and the run's
settings, before anything is loaded (`sentkit train ... --plan`, and one line at the start of every run).

Pure functions over two descriptions: `ModelShape` (read from a Hugging Face config: a model folder's config.json
or a config object; no weights) and `RunSettings` (batch, lengths, precision, LoRA, gradient checkpointing,
distributed and world size; built from a method's config by `RunSettings.from_config`). `plan` returns a `Plan`
with bytes for weights, gradients, optimizer state, activations and a fixed runtime overhead; `fits` and
`cheapest_fix` say whether it fits a budget and the first change, in order of cost, that makes it fit.

Where each term comes from (the functions' docstrings give each formula):

- parameters: the layer shapes of the three families sentkit trains (BERT-style encoders with an MLM head,
  GPT-2, Llama-style decoders: Llama, Mistral, Qwen2), as transformers builds them; checked against the models
  transformers builds from the same configs (tests/training/test_plan.py);
- LoRA: r (in + out) parameters per adapted linear layer (Hu et al. 2022), on every linear layer of the base
  (`sentkit.models.lora.add_lora`: peft's ``all-linear``, not the LM head, not BERT's pooler); checked against
  peft's count;
- optimizer: AdamW's two float32 moments per trainable parameter (Loshchilov & Hutter 2019; torch's AdamW);
  sentkit keeps every trainable weight in float32 (half precision is autocast, or a frozen half base under
  LoRA), so there is no separate float32 master copy;
- activations: the tensors a transformer block saves for its backward pass, per token, after Korthikanti et al.
  2022 ("Reducing Activation Recomputation in Large Transformer Models", section 4.1: 34 s b h + 5 a s^2 b bytes
  per layer in 16-bit with dropout), written out per tensor so that float32, autocast, gated MLPs, GQA, LoRA's
  dropout copies and the attention kernel each count; with gradient checkpointing, each block's input plus one
  block recomputed (Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost");
- overhead: a CPU process's resident memory once torch, transformers and sentkit's training code are imported
  (`CPU_BASELINE`, measured), or the CUDA context on a GPU (`CUDA_CONTEXT`, which
  `torch.cuda.max_memory_allocated` does not count).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sentkit.core.errors import InputError

GB = 10**9  # what "24GB" means (a GiB is 2**30)

# The resident memory of a `sentkit train` process before its model: torch, transformers, sentkit's training code,
# the tokenizer and the corpus reader. Measured on the project's machine (x86_64, torch 2.13.0+cpu, 2026-12-07) as
# the peak RSS (ru_maxrss) of `sentkit train` on a 0.7M-parameter BERT for 2 steps of 2 x 32 tokens less its
# weights, gradients and AdamW state: 446 MB (mlm) and 429 MB (simcse); importing only torch, transformers and the
# loop gives 388 MB.
CPU_BASELINE = 440 * 2**20
# The CUDA context and kernels of torch on an H100 (CUDA 12): about 0.5 GB of device memory that
# torch.cuda.max_memory_allocated does not count (nvidia-smi does).
CUDA_CONTEXT = 512 * 2**20

LLAMA_LIKE = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "gemma", "gemma2", "phi3")


# ----------------------------------------------------------------------------- the model
@dataclass(frozen=True)
class ModelShape:
    """The sizes of a transformer that decide its memory, read from its config (`from_config`).

    family: ``bert`` (a post-LN encoder with an MLM head: BERT, RoBERTa, XLM-R, ELECTRA, ...), ``gpt2``, or
    ``llama`` (RMSNorm, a gated MLP, rotary positions, grouped-query attention: Llama, Mistral, Qwen2, ...)."""

    family: str
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int
    kv_heads: int = 0  # 0: heads
    head_dim: int = 0  # 0: hidden // heads
    positions: int = 0  # learned position embeddings (0: rotary, none to learn)
    type_vocab: int = 0  # BERT's token type embeddings
    tied: bool = True  # the LM head shares the input embeddings
    attention_bias: bool = False  # a llama-style model's q/k/v/o biases (Qwen2: q/k/v)
    dropout: bool = True  # the model drops out (hidden or attention dropout above 0): its masks are saved
    model_type: str = ""

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | Any) -> ModelShape:
        """From a Hugging Face config: a dict (config.json's content) or a `PretrainedConfig`."""
        c: Mapping[str, Any] = config if isinstance(config, Mapping) else config.to_dict()

        def first(*keys: str, default: Any = None) -> Any:
            for k in keys:
                if c.get(k) is not None:
                    return c[k]
            return default

        model_type = str(c.get("model_type", ""))
        family = "gpt2" if model_type == "gpt2" else "llama" if model_type in LLAMA_LIKE else "bert"
        hidden = first("hidden_size", "n_embd", "d_model", "dim")
        layers = first("num_hidden_layers", "n_layer", "num_layers")
        heads = first("num_attention_heads", "n_head")
        vocab = first("vocab_size")
        if None in (hidden, layers, heads, vocab):
            raise InputError(
                f"the model's config ({model_type or 'no model_type'}) lacks a size the memory plan needs "
                "(hidden_size, num_hidden_layers, num_attention_heads, vocab_size)"
            )
        return cls(
            family=family,
            hidden=int(hidden),
            layers=int(layers),
            heads=int(heads),
            intermediate=int(first("intermediate_size", "n_inner", "ffn_dim", default=4 * int(hidden))),
            vocab=int(vocab),
            kv_heads=int(first("num_key_value_heads", default=0) or 0),
            head_dim=int(first("head_dim", default=0) or 0),
            positions=0 if family == "llama" else int(first("max_position_embeddings", "n_positions", default=0)),
            type_vocab=int(c.get("type_vocab_size", 0) or 0) if family == "bert" else 0,
            tied=bool(c.get("tie_word_embeddings", family != "llama")),
            attention_bias=bool(c.get("attention_bias", False)) or model_type == "qwen2",
            dropout=any(
                float(c.get(k) or 0) > 0
                for k in (
                    "hidden_dropout_prob",
                    "attention_probs_dropout_prob",
                    "resid_pdrop",
                    "attn_pdrop",
                    "attention_dropout",
                    "dropout",
                )
            ),
            model_type=model_type,
        )

    @property
    def hd(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def kv(self) -> int:
        """Width of the keys (and of the values): kv_heads x head_dim."""
        return (self.kv_heads or self.heads) * self.hd

    def block_linears(self) -> list[tuple[int, int]]:
        """(in, out) of every linear layer of one block, as transformers builds it (GPT-2's Conv1D included)."""
        h, i, q = self.hidden, self.intermediate, self.heads * self.hd
        if self.family == "llama":
            return [(h, q), (h, self.kv), (h, self.kv), (q, h), (h, i), (h, i), (i, h)]
        if self.family == "gpt2":
            return [(h, 3 * h), (h, h), (h, i), (i, h)]
        return [(h, h), (h, h), (h, h), (h, h), (h, i), (i, h)]

    def block_parameters(self) -> int:
        """One block: its linear layers (biases: BERT and GPT-2 everywhere; llama-style only with attention_bias,
        on q/k/v/o for Llama, q/k/v for Qwen2) and its two norms (LayerNorm: weight and bias; RMSNorm: weight)."""
        lin = self.block_linears()
        weights = sum(a * b for a, b in lin)
        if self.family == "llama":
            biases = 0
            if self.attention_bias:
                biases = sum(b for _, b in lin[:3]) + (0 if self.model_type == "qwen2" else lin[3][1])
            return weights + biases + 2 * self.hidden
        return weights + sum(b for _, b in lin) + 4 * self.hidden

    def embedding_parameters(self) -> int:
        """Token, position and token-type embeddings, and BERT's embedding LayerNorm."""
        h = self.hidden
        return (self.vocab + self.positions + self.type_vocab) * h + (2 * h if self.family == "bert" else 0)

    def head_parameters(self) -> int:
        """The LM head and final norm: BERT's MLM head (dense h x h, LayerNorm, the decoder tied or not, its bias
        over the vocabulary); GPT-2's final LayerNorm (the head tied); Llama's final RMSNorm and its untied head."""
        h, v = self.hidden, self.vocab
        untied = 0 if self.tied else v * h
        if self.family == "bert":
            return h * h + h + 2 * h + v + untied
        if self.family == "gpt2":
            return 2 * h + untied
        return h + untied

    def parameters(self) -> int:
        """Every parameter of the model sentkit trains (AutoModelForMaskedLM / AutoModelForCausalLM)."""
        return self.embedding_parameters() + self.layers * self.block_parameters() + self.head_parameters()

    def lora_parameters(self, r: int) -> int:
        """LoRA of rank r on every linear layer of every block: r (in + out) each (A: r x in, B: out x r)."""
        return self.layers * r * sum(a + b for a, b in self.block_linears()) if r > 0 else 0


# ----------------------------------------------------------------------------- the run
@dataclass(frozen=True)
class RunSettings:
    """What a run does that decides its memory (`from_config` reads it from a method's config).

    A step puts `batch_size` units through the model, `batch_size / (world_size x grad_accum)` per micro-batch
    on each process; a unit is `seqs_per_unit` sequences of up to `seq_len` tokens (DeCLUTR: its anchors and their
    positives; SimCSE: each text twice; MLM / MNTP / CLM: one packed sequence); `head_share` of the tokens go
    through the LM head (the masked ones; all of them for CLM)."""

    method: str
    batch_size: int
    seq_len: int
    seqs_per_unit: int = 1
    head_share: float = 0.0
    grad_accum: int = 1
    grad_cache: bool = False
    precision: str = "fp32"  # the compute precision, resolved: fp32, bf16 or fp16
    lora_r: int = 0
    base_precision: str = "fp32"  # resolved: fp32, bf16 or fp16
    gradient_checkpointing: bool = False
    distributed: str = "ddp"
    world_size: int = 1
    device: str = "cpu"  # cpu or cuda
    token_budget: int = 0  # padded tokens per forward chunk (0: the loop's default for the device)
    lora_dropout: bool = True
    extra_trainable: int = 0  # a method's own trainable layers (SimCSE's MLP)
    contrastive: bool = False  # GradCache applies (a contrastive loss over the step)

    @property
    def local_units(self) -> int:
        """Units in one micro-batch of one process."""
        return max(1, self.batch_size // (self.world_size * self.grad_accum))

    @property
    def budget(self) -> int:
        return self.token_budget or (16384 if self.device == "cuda" else 1024)

    @classmethod
    def from_config(
        cls,
        cfg: Any,
        method: str,
        shape: ModelShape,
        *,
        device: str = "cpu",
        world_size: int = 1,
        decoder: bool | None = None,
    ) -> RunSettings:
        """From a transformer method's config (a `TrainConfig` subclass, or the llm2vec recipe's phases through
        `method` mntp / simcse with its keys), resolving what the loop resolves: `precision` auto (bf16 on a GPU,
        fp32 on a CPU), `lora_r` None (rank 16 for a decoder over 1B parameters), `base_precision` auto (bf16 for a
        decoder with adapters on a GPU)."""
        get = getter(cfg)
        decoder = shape.family != "bert" if decoder is None else decoder
        if method == "declutr":
            a, p = int(get("num_anchors", 2)), int(get("num_positives", 2))
            contrastive, mlm = bool(get("contrastive", True)), bool(get("mlm", True))
            per = a * (1 + p) if contrastive else a
            seq = int(get("max_span_len", 512))
            share = float(get("mlm_probability", 0.15)) * a / per if mlm else 0.0
        elif method in ("simcse", "tsdae"):
            per, seq, share, contrastive = 2, int(get("max_len", 32)), 0.0, method == "simcse"
            if method == "tsdae":
                share = 0.5  # the decoder predicts every token of its half
        elif method in ("mlm", "mntp", "clm"):
            per, seq, contrastive = 1, int(get("seq_len", 128)), False
            share = 1.0 if method == "clm" else float(get("mlm_probability", 0.15))
        else:
            raise InputError(
                f"the memory plan covers the transformer loop's methods (declutr, simcse, tsdae, mlm, mntp, clm, "
                f"llm2vec), not {method!r}"
            )
        if shape.positions:
            seq = min(seq, shape.positions)
        precision = str(get("precision", "auto"))
        if precision == "auto":
            precision = "bf16" if device == "cuda" else "fp32"
        r = get("lora_r", None)
        if r is None:
            r = 16 if decoder and shape.parameters() > 1_000_000_000 else 0
        base = str(get("base_precision", "auto"))
        if base == "auto":
            base = "bf16" if r and decoder and device == "cuda" and precision == "bf16" else "fp32"
        if base != "fp32" and r:
            precision = base
        extra = 0
        if method == "simcse" and get("pooling", "cls") == "cls" and bool(get("mlp", True)):
            extra = shape.hidden * shape.hidden + shape.hidden
        return cls(
            method=method,
            batch_size=int(get("batch_size", 16)),
            seq_len=seq,
            seqs_per_unit=per,
            head_share=share,
            grad_accum=int(get("grad_accum", 1)),
            grad_cache=bool(get("grad_cache", False)),
            precision=precision,
            lora_r=int(r),
            base_precision=base if r else "fp32",
            gradient_checkpointing=bool(get("gradient_checkpointing", False)),
            distributed=str(get("distributed", "ddp")),
            world_size=int(world_size),
            device=device,
            token_budget=int(get("token_budget", None) or 0),
            lora_dropout=float(get("lora_dropout", 0.05)) > 0,
            extra_trainable=extra,
            contrastive=contrastive,
        )


def getter(cfg: Any) -> Any:
    """`get(key, default)` over a config dataclass or a mapping."""
    if isinstance(cfg, Mapping):
        return lambda k, d=None: cfg.get(k, d)
    return lambda k, d=None: getattr(cfg, k, d)


# ----------------------------------------------------------------------------- the plan
@dataclass(frozen=True)
class Plan:
    """Peak bytes one process holds, by kind; `total` is their sum (the plan's peak)."""

    weights: int
    gradients: int
    optimizer: int
    activations: int
    overhead: int
    parameters: int
    trainable: int
    settings: RunSettings

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.activations + self.overhead

    def rows(self) -> list[tuple[str, int]]:
        return [
            ("weights", self.weights),
            ("gradients", self.gradients),
            ("optimizer state", self.optimizer),
            ("activations", self.activations),
            ("overhead", self.overhead),
            ("total per process", self.total),
        ]


def nbytes(precision: str) -> int:
    return 4 if precision == "fp32" else 2


def residual_bytes(shape: ModelShape, s: RunSettings) -> int:
    """Bytes of an element of the residual stream: 4, as autocast keeps it float32 (float32 embeddings, and a
    post-LN encoder's LayerNorm, which autocast runs in float32, writes it); 2 for a pre-norm decoder (GPT-2,
    Llama) on a half-precision base, whose embeddings and sums stay in that precision."""
    return 2 if s.lora_r and s.base_precision != "fp32" and shape.family != "bert" else 4


def layer_activations(shape: ModelShape, s: RunSettings, tokens: int, seq: int) -> int:
    """Bytes one block saves for its backward pass over `tokens` tokens in sequences of `seq` (Korthikanti et
    al. 2022, section 4.1, written per saved tensor; e = bytes of the compute dtype, f = bytes of the residual
    stream and the norms' inputs (`residual_bytes`), m = 1 byte for a dropout mask):

    - attention: the projections' input (e h; under autocast each of q, k, v casts it anew: 3 e h), q, k, v
      (e (h + 2 kv)), the attention output before the output projection (e h), the dropout mask after it (m h);
      the scores, a s per token, only where the attention kernel materialises them (torch's math kernel, which
      the CPU runs under dropout; not the flash / memory-efficient kernels of a GPU): the softmax output (e),
      with dropout its mask (m) and output (e);
    - MLP: its input (e h) and, plain, the activation's input and output (2 e I) and a dropout mask (m h); gated
      (Llama), the gate and up outputs, the activation's output and the product (4 e I);
    - the two norms' inputs (2 f h);
    - LoRA: each adapted layer saves the dropout copy of its input and its mask ((f + 1) x its input width, with
      lora_dropout > 0) and, under autocast, the adapter's own cast of it (e x its input width).
    Korthikanti's 34 s b h + 5 a s^2 b is this with e = f = 2, I = 4 h, dropout, no GQA, no LoRA."""
    h, i = shape.hidden, shape.intermediate
    half = s.precision != "fp32"
    e, f = (2 if half else 4), residual_bytes(shape, s)
    m = 1 if shape.dropout else 0
    attn = e * ((3 if half else 1) * h + (shape.heads * shape.hd + 2 * shape.kv) + h) + m * h
    if s.device != "cuda" and m:  # the math kernel (a CPU under dropout): the scores are saved
        attn += shape.heads * seq * (e + (m + e if m else 0))
    mlp = e * (h + 4 * i) if shape.family == "llama" else e * (h + 2 * i) + m * h
    norms = 2 * f * h
    per_input = ((f + 1) if s.lora_dropout else 0) + (e if half else 0)
    lora = per_input * sum(a for a, _ in shape.block_linears()) if s.lora_r else 0
    return tokens * (attn + mlp + norms + lora)


def plan(shape: ModelShape, s: RunSettings) -> Plan:
    """The peak of one process: weights + gradients + optimizer state + activations + overhead.

    - weights: float32 (4 bytes) for every parameter; under LoRA with a half base, the frozen base in 2 bytes and
      the adapters in 4. FSDP (world N): 4 P / N sharded, plus what is gathered whole in the compute dtype: the
      root (embeddings, head) for the step, and two blocks (the one running and the one prefetched); on a CPU, where
      host memory is the run's memory, also the whole float32 model twice, which rank 0 holds when it saves the
      encoder (`sentkit.training.fsdp.plain_module`: the gathered state dict and the unsharded module it loads into;
      the plan is of the process that peaks highest).
    - gradients: 4 bytes per trainable parameter; DDP (world > 1) adds its gradient buckets (another 4 bytes per
      trainable parameter; `gradient_as_bucket_view` is off); FSDP: 4 T / N plus one block's and the root's
      unsharded gradients before their reduce-scatter.
    - optimizer: AdamW's exp_avg and exp_avg_sq, 8 bytes per trainable parameter (/ N under FSDP).
    - activations (`activation_bytes`).
    - overhead: `CPU_BASELINE` on a CPU, `CUDA_CONTEXT` on a GPU."""
    p = shape.parameters()
    lora = shape.lora_parameters(s.lora_r)
    trainable = (lora if s.lora_r else p) + s.extra_trainable
    total_params = p + lora + s.extra_trainable
    fsdp = s.distributed == "fsdp" and s.world_size > 1 and not s.lora_r
    if fsdp:
        n, e = s.world_size, nbytes(s.precision)
        root = shape.embedding_parameters() + shape.head_parameters()
        weights = math.ceil(4 * total_params / n) + e * (root + 2 * shape.block_parameters())
        if s.device != "cuda":  # rank 0 gathers the whole float32 model to save it, in host memory
            weights += 2 * 4 * total_params
        grads = math.ceil(4 * trainable / n) + 4 * (root + shape.block_parameters())
        opt = math.ceil(8 * trainable / n)
    else:
        base_bytes = nbytes(s.base_precision) if s.lora_r else 4
        weights = base_bytes * p + 4 * (lora + s.extra_trainable)
        grads = 4 * trainable * (2 if s.world_size > 1 else 1)
        opt = 8 * trainable
    overhead = CUDA_CONTEXT if s.device == "cuda" else CPU_BASELINE
    return Plan(weights, grads, opt, activation_bytes(shape, s), overhead, total_params, trainable, s)


def activation_bytes(shape: ModelShape, s: RunSettings) -> int:
    """What the graph of one micro-batch holds at its peak, the start of the backward pass:

    - tokens: the micro-batch's units x sequences per unit x `seq_len` (padded to the longest, the worst case;
      DeCLUTR's spans at their longest), every forward chunk's graph held until the backward (the loop sums the
      chunks' losses), one micro-batch at a time (GradCache and gradient accumulation run a backward per
      micro-batch);
    - the blocks (`layer_activations`); with gradient checkpointing each block keeps only its input (f h per
      token, `residual_bytes`) and one block of one chunk is recomputed whole during the backward;
    - the embeddings' output and its dropout mask ((f + m) h per token);
    - the LM head over `head_share` of the tokens: log_softmax's float32 output (4 V) kept for the backward, and
      during the backward of one chunk its gradient (4 V) and the logits' gradient in the compute dtype (e V);
    - the backward's working memory: the gradients flowing through one block of one chunk (the backward runs the
      chunks' graphs one after the other), about that block's activations;
    - autocast's copies of the weights (a half-precision step on float32 weights): each chunk's graph saves the
      e-byte copy of every weight its linear layers used (`torch.autocast` casts them once per autocast region,
      and the loop opens one per chunk); with checkpointing, only the head's and one recomputed block's."""
    tokens = s.local_units * s.seqs_per_unit * s.seq_len
    per_chunk = max(1, s.budget // s.seq_len) * s.seq_len  # a chunk: whole sequences within the token budget
    chunk = min(tokens, per_chunk)
    chunks = max(1, math.ceil(tokens / per_chunk))
    e = nbytes(s.precision)
    m = 1 if shape.dropout else 0
    one = layer_activations(shape, s, chunk, s.seq_len)  # one block over one chunk
    if s.gradient_checkpointing:
        blocks = shape.layers * tokens * residual_bytes(shape, s) * shape.hidden + one
    else:
        blocks = shape.layers * layer_activations(shape, s, tokens, s.seq_len)
    emb = tokens * (residual_bytes(shape, s) + m) * shape.hidden
    head = math.ceil(tokens * s.head_share) * 4 * shape.vocab + math.ceil(chunk * s.head_share) * (4 + e) * shape.vocab
    working = one
    copies = 0
    if e == 2 and not (s.lora_r and s.base_precision != "fp32") and s.distributed != "fsdp":
        block_w = sum(a * b for a, b in shape.block_linears())
        head_w = shape.vocab * shape.hidden if s.head_share else 0
        held = (0 if s.gradient_checkpointing else shape.layers * block_w) + head_w
        copies = e * (chunks * held + (block_w if s.gradient_checkpointing else 0))
    return blocks + emb + head + working + copies


# ----------------------------------------------------------------------------- budgets and fixes
def parse_size(text: str) -> int:
    """Bytes from "24GB" (10^9), "24GiB" (2^30), "80G" (GiB, as nvidia-smi and torch count), "512MB", "512MiB",
    "1TB" or a plain number of bytes; anything else is an InputError."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(i?)([bB]?)\s*", text or "")
    if not m or (m.group(3) and not m.group(2)) or (not m.group(2) and m.group(4)):
        raise InputError(
            f"--gpu-memory: cannot read {text!r} as a size; write it like 24GB, 24GiB, 80G or a number of bytes"
        )
    value, unit, binary, b = float(m.group(1)), m.group(2).upper(), m.group(3), m.group(4)
    power = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4}[unit]
    base = 1024 if binary or (unit and not b) else 1000
    size = int(value * base**power)
    if size <= 0:
        raise InputError(f"--gpu-memory: {text!r} is no memory; give a positive size such as 24GB")
    return size


def fits(p: Plan, budget: int) -> bool:
    return p.total <= budget


@dataclass(frozen=True)
class Fix:
    """A change of settings (config keys -> values, and processes when `world_size` changes) and its plan."""

    changes: dict[str, Any]
    plan: Plan
    world_size: int = 1

    def text(self) -> str:
        sets = " ".join(f"--set {k}={_value(v)}" for k, v in self.changes.items())
        if self.world_size > 1:
            sets += f" on {self.world_size} processes (torchrun --nproc_per_node {self.world_size})"
        return sets


def _value(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def candidates(s: RunSettings) -> list[tuple[dict[str, Any], int]]:
    """The changes `cheapest_fix` tries (config keys -> values, and the number of processes), in order of cost:
    each alone first, then each added to the first option of every kind before it. The kinds: gradient
    checkpointing (the same result, about a third more compute); LoRA rank 16, with a bf16 base on a GPU (on a
    CPU the base stays float32); a smaller micro-batch through gradient accumulation, with GradCache for a
    contrastive method (the same effective batch and, with GradCache, the same negatives; 2, 4, ... micro-batches);
    FSDP over more processes (2, 4, ... 64; not with LoRA, which FSDP does not take)."""
    kinds: list[list[tuple[dict[str, Any], int]]] = []
    if not s.gradient_checkpointing:
        kinds.append([({"gradient_checkpointing": True}, s.world_size)])
    if not s.lora_r and s.distributed != "fsdp":
        half = {"base_precision": "bf16"} if s.device == "cuda" else {}
        kinds.append([({"lora_r": 16} | half, s.world_size)])
    accum = []
    k = s.grad_accum * 2
    while k <= s.batch_size // s.world_size and s.batch_size % (s.world_size * k) == 0:
        accum.append(({"grad_accum": k} | ({"grad_cache": True} if s.contrastive else {}), s.world_size))
        k *= 2
    if accum:
        kinds.append(accum)
    if not s.lora_r:
        shards = [
            ({"distributed": "fsdp"}, n)
            for n in (2, 4, 8, 16, 32, 64)
            if n > s.world_size and s.batch_size % (n * s.grad_accum) == 0
        ]
        if shards:
            kinds.append(shards)
    out = [option for kind in kinds for option in kind]
    for i in range(1, len(kinds)):
        before: dict[str, Any] = {}
        for kind in kinds[:i]:
            before |= kind[0][0]
        for changes, world in kinds[i]:
            if "lora_r" in before and changes.get("distributed") == "fsdp":
                continue
            out.append((before | changes, world))
    return out


def apply(s: RunSettings, changes: dict[str, Any], world_size: int) -> RunSettings:
    """`s` with config `changes` made and `world_size` processes."""
    r = dataclasses.replace(s, world_size=world_size)
    for k, v in changes.items():
        r = dataclasses.replace(r, **{k: v})
        if k == "base_precision":  # a half base computes in its precision
            r = dataclasses.replace(r, precision=v)
    return r


def cheapest_fix(shape: ModelShape, s: RunSettings, budget: int) -> Fix | None:
    """The first change of `candidates` whose plan fits `budget`, with that plan; None if none fits."""
    for changes, world in candidates(s):
        p = plan(shape, apply(s, changes, world))
        if fits(p, budget):
            return Fix(changes, p, world if world != s.world_size else 1)
    return None


# ----------------------------------------------------------------------------- text
def gb(n: int) -> str:
    return f"{n / GB:.1f} GB" if n >= GB / 10 else f"{n / GB:.2f} GB"


def table(p: Plan) -> str:
    """The plan as a table of bytes by kind, and what it assumed."""
    s = p.settings
    lora = f"LoRA r={s.lora_r} on a {s.base_precision} base" if s.lora_r else "every weight trains"
    lines = [f"{name:18s} {gb(v):>10s}" for name, v in p.rows()]
    what = (
        f"{s.method}: batch {s.batch_size} ({s.local_units} units a micro-batch on each of {s.world_size} "
        f"process{'es' if s.world_size > 1 else ''}), {s.seqs_per_unit} x {s.seq_len} tokens a unit, "
        f"{s.precision}, {lora}, "
        f"gradient checkpointing {'on' if s.gradient_checkpointing else 'off'}, {s.distributed}, {s.device}; "
        f"{p.trainable:,} of {p.parameters:,} parameters train"
    )
    return "\n".join([what, *lines])


def verdict(shape: ModelShape, p: Plan, budget: int) -> str:
    """ "fits" / "does not fit; cheapest change: ..." for `budget` bytes."""
    if fits(p, budget):
        return f"fits in {gb(budget)} (~{gb(p.total)} per process)"
    fix = cheapest_fix(shape, p.settings, budget)
    if fix is None:
        return (
            f"does not fit in {gb(budget)} (~{gb(p.total)} per process); no change tried fits "
            "(checkpointing, LoRA, a smaller micro-batch, FSDP up to 64 processes)"
        )
    return (
        f"does not fit in {gb(budget)} (~{gb(p.total)} per process); cheapest change: {fix.text()} "
        f"(est. {gb(fix.plan.total)})"
    )


def summary_line(p: Plan) -> str:
    """The line every run starts with."""
    return (
        f"memory plan: ~{gb(p.total)} per process (weights {gb(p.weights)}, grads {gb(p.gradients)}, "
        f"optimizer {gb(p.optimizer)}, activations {gb(p.activations)})"
    )


def run_line(cfg: Any, method: str, model_config: Any, device: str, world_size: int) -> str:
    """`summary_line` of a run about to train (the loop's first line); a plan that cannot be made says why in the
    line instead of stopping the run (the plan only informs)."""
    try:
        shape = ModelShape.from_config(model_config)
        return summary_line(
            plan(shape, RunSettings.from_config(cfg, method, shape, device=device, world_size=world_size))
        )
    except Exception as e:  # informative only: the run goes on
        return f"memory plan: not available ({type(e).__name__}: {e})"

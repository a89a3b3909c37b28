"""FSDP (``--set distributed=fsdp``, torchrun as for DDP): each rank keeps a shard of every parameter,
gradient and optimizer state instead of a whole copy (torch's FSDP2, `torch.distributed.fsdp.fully_shard`).

What differs from DDP is only what this module (and `sentkit.training.checkpoint`'s sharded
checkpoints) provides; the loop, the step, the gather of global negatives and gradient caching are
the same code:

- `shard`: every transformer block (each module of the outermost homogeneous ``nn.ModuleList`` s of
  the model: BERT's ``encoder.layer``, GPT-2's ``h``, Llama's ``layers``, a TSDAE decoder's layers)
  is its own FSDP unit (blocks that share weights, as TSDAE's tied decoder and encoder layers, one
  unit together), then the root (the `TrainModule`: embeddings, heads, whatever the objective
  adds). A block's parameters are gathered just before it runs and freed after it (forward and
  backward), so at most one block is whole at a time besides the root.
- Precision: in a half-precision run (bf16 / fp16) the gathered parameters are cast to that dtype for
  compute and gradients are reduced in float32 (`MixedPrecisionPolicy`); the sharded master weights
  and the optimizer state stay float32. A float32 run has no policy (the same numbers as DDP).
- Gradient synchronisation: DDP's ``no_sync`` is FSDP's ``set_requires_gradient_sync(False)`` on
  the micro-batches before the last one of a step (`sentkit.training.distributed.sync_gradients`):
  gradients accumulate unsharded and are reduce-scattered once, averaged over ranks as DDP averages
  them, so the loss and the gradient are those of one process on the whole batch. The embeddings'
  gather for global negatives does not touch parameters and works unchanged.
- The saved encoder: `plain_module` gathers the full float32 state dict on rank 0 (CPU) and loads it
  into an unsharded twin of the module, which the existing save path writes as a plain
  transformers / sentence-transformers folder.

One process with ``distributed=fsdp`` runs unsharded (nothing to shard over), but writes and resumes
the same sharded (torch.distributed.checkpoint) checkpoints, so a run may go on with another number
of processes (the checkpoint is resharded on load). Gradient checkpointing works
under FSDP (torch's non-reentrant checkpoint re-gathers a block's shards for the recompute; the
same gradients). Not supported, refused in one line: LoRA adapters (a frozen, possibly
half-precision base beside float32 adapters in one unit; the config refuses lora_r > 0, `shard`
the adapters a large decoder gets by default) and fp16 (its loss scaler would see only this rank's
gradient shard, so ranks could disagree on skipping a step)."""

from __future__ import annotations

import copy
import weakref
from typing import Any

import torch
from torch import nn

from sentkit.training.distributed import DistInfo

# module -> its unsharded twin with parameters on the meta device (see `shard`)
_TWINS: weakref.WeakKeyDictionary[nn.Module, nn.Module] = weakref.WeakKeyDictionary()


def transformer_blocks(module: nn.Module) -> list[nn.Module]:
    """The transformer blocks of `module`: the elements of each outermost ``nn.ModuleList`` whose
    elements are all of one class and hold parameters (encoder layers, decoder layers), found
    generically so that every Hugging Face architecture and a method's own decoder are covered."""
    blocks: list[nn.Module] = []
    taken: set[int] = set()

    def visit(m: nn.Module) -> None:
        for child in m.children():
            if id(child) in taken:
                continue
            if (
                isinstance(child, nn.ModuleList)
                and len(child) > 0
                and len({type(c) for c in child}) == 1
                and all(any(True for _ in c.parameters()) for c in child)
            ):
                for c in child:
                    if id(c) not in taken:
                        taken.add(id(c))
                        blocks.append(c)
                continue
            visit(child)

    visit(module)
    return blocks


def shard_units(module: nn.Module) -> list[list[nn.Module]]:
    """The FSDP units of `module` below its root: its transformer blocks, blocks that share a parameter put in one
    unit (TSDAE's decoder layers are tied to the encoder's: each pair is one unit), in the blocks' order."""
    blocks = transformer_blocks(module)
    owner: dict[int, int] = {}  # parameter id -> the first block that holds it
    parent = list(range(len(blocks)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i, block in enumerate(blocks):
        for p in block.parameters():
            j = owner.setdefault(id(p), i)
            if root(j) != root(i):
                parent[root(i)] = root(j)
    units: dict[int, list[nn.Module]] = {}
    for i, block in enumerate(blocks):
        units.setdefault(root(i), []).append(block)
    return list(units.values())


def _twin(module: nn.Module) -> nn.Module:
    """A copy of `module` whose parameters are on the meta device (no memory; ties kept) and whose
    buffers are real: filled from a full state dict when the encoder is saved."""
    memo: dict[int, Any] = {
        id(p): nn.Parameter(torch.empty_like(p, device="meta"), requires_grad=p.requires_grad)
        for p in module.parameters()
    }
    return copy.deepcopy(module, memo)


def shard(module: nn.Module, info: DistInfo, device: torch.device, precision: str) -> nn.Module:
    """`module` with every transformer block, then the root, sharded over the ranks (in place;
    returned). One process: unchanged (see the module docstring)."""
    from sentkit.core.config import ConfigError
    from sentkit.models.lora import has_lora

    if has_lora(module):  # lora_r unset: a decoder over 1B parameters gets adapters (the config refuses lora_r > 0)
        raise ConfigError(
            "distributed=fsdp does not support LoRA adapters (lora_r unset adds them to a decoder over 1B "
            "parameters): set lora_r=0, or distributed=ddp"
        )
    if not info.active:
        return module
    import warnings

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    # FSDP2 warns of every view a forward returns (an in-place op on one would skip its pre-backward hook): a
    # method's views are only read out of place (the gather, the losses)
    warnings.filterwarnings("ignore", message="FSDP2-wrapped module .* returned a view tensor", category=UserWarning)
    _TWINS[module] = _twin(module)
    mesh = init_device_mesh(device.type, (info.world_size,))
    kw: dict[str, Any] = {"mesh": mesh}
    if precision in ("bf16", "fp16"):
        half = torch.bfloat16 if precision == "bf16" else torch.float16
        kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=half, reduce_dtype=torch.float32)
    for unit in shard_units(module):
        fully_shard(unit if len(unit) > 1 else unit[0], **kw)
    fully_shard(module, **kw)
    return module


def is_sharded(model: nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def plain_module(model: nn.Module, info: DistInfo) -> nn.Module | None:
    """The module whole and unsharded, for saving: itself (or DDP's inner module) when not sharded;
    under FSDP a collective (every rank calls it) that returns an unsharded float32 twin on rank 0
    and None on the others."""
    from sentkit.training.distributed import unwrap

    if not is_sharded(model):
        return unwrap(model) if info.is_main else None
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if not info.is_main:
        return None
    twin = copy.deepcopy(_TWINS[model])
    made: dict[int, nn.Parameter] = {}
    for m in twin.modules():
        for name, p in list(m._parameters.items()):
            if p is not None:
                if id(p) not in made:
                    made[id(p)] = nn.Parameter(torch.empty_like(p, device="cpu"), requires_grad=p.requires_grad)
                m._parameters[name] = made[id(p)]
    twin.load_state_dict(full)
    return twin

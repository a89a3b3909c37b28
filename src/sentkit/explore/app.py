"""The web layer: a FastAPI app serving the page (plain HTML/JS/CSS from the package, nothing
from a CDN) and a small JSON API over :class:`~sentkit.explore.core.Explorer`.

Every answer is JSON; bad input is ``{"error": message}`` with status 400, and a failure of the
server's own code is status 500 with a one-line message (the traceback goes to the log only).

The page is safe to leave running, as Jupyter is: every start makes a random token
(:func:`new_token`), printed in the page's URL (``/?token=...``). The page's script keeps it in
``sessionStorage`` (per tab and per origin, port included) and sends it in the ``X-Sentkit-Token``
header of every API request; the server sets no cookie (cookies are not kept apart by port, so
every other server on 127.0.0.1 the browser visits would receive it). Every API request without
the token, whatever its origin, gets 401: other programs and other users of the machine, and pages
of other sites. ``/`` itself is the package's page, holding no data and no token. Host headers
other than this machine's loopback names and the ``--allow-host`` names are refused (400: DNS
rebinding), whatever the address it listens on. Requests that change state (every POST) are also
refused with 403 when a browser says they come from another site (their ``Origin`` is not this
server's, or ``Sec-Fetch-Site`` is not same-origin). A request body over :data:`MAX_BODY_BYTES`
gets 413 and a URL over :data:`MAX_URL_BYTES` gets 414, before anything reads them; every answer
forbids framing (:data:`SECURITY_HEADERS`). Models the page adds never run or unpickle anything
(:mod:`sentkit.explore.trust`).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import math
import re
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sentkit.core.config import ConfigError
from sentkit.explore.core import USER_ERRORS, Explorer, error_text

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")

MAX_BODY_BYTES = 1024 * 1024  # a request body (JSON): a pasted text for spans is the largest
MAX_URL_BYTES = 8 * 1024  # path and query string of a request
MAX_NAME_CHARS = 4096  # a path or model name in a request (PATH_MAX)
# Sent with every answer: no page of another site (or another port) may frame this one, nor run
# scripts or fetch from anywhere but this server.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

Name = Annotated[str, Field(max_length=MAX_NAME_CHARS)]


class ModelBody(BaseModel):
    name: Name = ""


class PathBody(BaseModel):
    path: Name = ""


class NeighboursBody(BaseModel):
    query: str = ""  # its length is checked by Explorer.neighbours (MAX_QUERY_CHARS)
    models: list[str] = []
    k: int = 10


class SpansBody(BaseModel):
    tokenizer: Name = ""
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


def is_loopback(host: str) -> bool:
    """Whether listening on ``host`` keeps the server on this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


HOST_NAME = re.compile(r"^(\*\.)?[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?$|^\[?[0-9a-f:.]+\]?$")


def allowed_hosts(host: str, allow: Sequence[str] = ()) -> list[str]:
    """Host headers the server answers: the loopback names, the bound address when it is a loopback
    one, and ``allow`` (``--allow-host``). Listening beyond this machine (0.0.0.0, ::, an address or
    name of a network interface) needs ``allow``: the Host check stays on for every address, which
    refuses DNS-rebinding pages that reach the server under another name. ConfigError otherwise."""
    names = [*LOCAL_HOSTS]
    if is_loopback(host):
        names.append(host.lower())
    elif not allow:
        raise ConfigError(
            f"--host {host or '*'} listens beyond this machine: give the names browsers will use to "
            "reach it with --allow-host NAME (repeatable, e.g. --allow-host box.lan --allow-host "
            "192.168.1.5); requests naming any other host are refused"
        )
    for name in allow:
        n = name.strip().lower()
        if n in ("*", ""):
            raise ConfigError(
                f"--allow-host {name!r}: give a host name or address; answering every Host header "
                "would let web pages reach the server through DNS rebinding"
            )
        if not HOST_NAME.match(n):
            raise ConfigError(
                f"--allow-host {name!r}: give a host name or address as browsers send it (box.lan, "
                "192.168.1.5, *.example.lan), without scheme, port or path"
            )
        names.append(n)
    return sorted(set(names))


TOKEN_HEADER = "X-Sentkit-Token"
TOKEN_PARAM = "token"
OPEN = ("/static/",)  # the package's own files: no user data, no token needed


def new_token() -> str:
    """A random token for one start of the server (Jupyter's scheme)."""
    return secrets.token_urlsafe(32)


def token_matches(given: str | None, token: str) -> bool:
    """Whether ``given`` is ``token``, compared in constant time."""
    return given is not None and hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8"))


SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
NO_TOKEN_PAGE = (
    "<!doctype html><title>sentkit explore</title><p>This page needs the token of the server: open "
    "the URL <code>sentkit explore</code> printed when it started (it ends in <code>?token=...</code>)."
)


def too_large(headers: Mapping[str, str], raw_path: bytes, query_string: bytes) -> tuple[int, str] | None:
    """The status and reason to refuse a request for its size before reading its body, or None: a
    URL over :data:`MAX_URL_BYTES` (414), a ``Content-Length`` over :data:`MAX_BODY_BYTES` or not a
    number (413, 400)."""
    if len(raw_path) + len(query_string) > MAX_URL_BYTES:
        return 414, f"the URL is over {MAX_URL_BYTES:,} bytes; send data in a POST body"
    length = headers.get("content-length")
    if length is None:
        return None
    if not length.strip().isdigit():
        return 400, "Content-Length is not a number"
    if int(length) > MAX_BODY_BYTES:
        return 413, f"the request body is {int(length):,} bytes; the limit is {MAX_BODY_BYTES:,} (1 MiB)"
    return None


async def send_refusal(send: Send, status: int, why: str) -> None:
    """A one-line JSON refusal (``{"error": "refused: ..."}``) sent straight from the ASGI layer."""
    body = json.dumps({"error": f"refused: {why}"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


class SizeLimits:
    """Refuse a request whose URL or body is too large (:func:`too_large`), before the app reads it:
    a declared ``Content-Length`` is refused at once, a body sent in chunks as soon as it passes
    :data:`MAX_BODY_BYTES` (at most that much is ever held), and a client that leaves mid-body ends it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        why = too_large(headers, scope.get("raw_path") or scope["path"].encode(), scope.get("query_string", b""))
        if why is not None:
            log.warning("refused %s %s: %s", scope["method"], scope["path"][:100], why[1])
            await send_refusal(send, *why)
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left: nothing to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                log.warning("refused %s %s: a body over %d bytes", scope["method"], scope["path"][:100], MAX_BODY_BYTES)
                await send_refusal(send, 413, f"the request body is over {MAX_BODY_BYTES:,} bytes (1 MiB)")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body: list[Message] = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replay() -> Message:
            return body.pop() if body else await receive()

        await self.app(scope, replay, send)


class ExploreApp(FastAPI):
    """The FastAPI app with :data:`SECURITY_HEADERS` on every answer, refusals of the Host check
    and Starlette's own error pages included."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                have = {k.lower() for k, _ in message.get("headers", [])}
                extra = [
                    (k.lower().encode(), v.encode())
                    for k, v in SECURITY_HEADERS.items()
                    if k.lower().encode() not in have
                ]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await super().__call__(scope, receive, send_with_headers)


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


def create_app(explorer: Explorer, *, token: str | None = None, hosts: Sequence[str] = LOCAL_HOSTS) -> FastAPI:
    """The explorer's app. ``token``: what every request must carry (a new one when None; read it
    back as ``app.state.token``); ``hosts``: accepted Host headers (see :func:`allowed_hosts`)."""
    app = ExploreApp(title="sentkit explore", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.token = token = token or new_token()

    def refuse(request: Request, status: int, why: str) -> Response:
        log.warning("refused %s %s: %s", request.method, request.url.path, why)
        return JSONResponse({"error": f"refused: {why}"}, status_code=status)

    app.add_middleware(SizeLimits)  # inside the token check: a body is read only for whoever has the token

    @app.middleware("http")
    async def _guard(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        why = cross_origin(request.method, request.headers, request.url.scheme)
        if why is not None:
            return refuse(request, 403, f"{why}; use the page this server serves")
        path = request.url.path
        if path == "/":  # the package's page: no data, no token in it; a wrong token in its URL is said at once
            given = request.query_params.get(TOKEN_PARAM)
            if given is not None and not token_matches(given, token):
                log.warning("refused %s /: a wrong token", request.method)
                return HTMLResponse(NO_TOKEN_PAGE, status_code=401, headers={"Cache-Control": "no-store"})
        elif not path.startswith(OPEN) and not token_matches(request.headers.get(TOKEN_HEADER), token):
            return refuse(
                request,
                401,
                f"no token or a wrong one: send the token of the URL `sentkit explore` "
                f"printed in the {TOKEN_HEADER} header",
            )
        return await call_next(request)

    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(hosts))  # outermost: the Host check is first
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        parts = [
            f"{'.'.join(str(x) for x in e.get('loc', ())[1:]) or 'body'}: {e.get('msg', '')}" for e in exc.errors()
        ]
        return JSONResponse({"error": "bad request: " + "; ".join(parts)}, status_code=400)

    page = (STATIC / "index.html").read_text(encoding="utf-8")

    @app.get("/")
    def index() -> HTMLResponse:
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})  # sets no cookie: the script keeps the token

    @app.get("/api/state")
    def state() -> JSONResponse:
        return answer(lambda: {**explorer.status(), "span_models": explorer.span_models(), "sources": explorer.results})

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
        settings = body.model_dump(include={"num_anchors", "num_positives", "min_span_len", "max_span_len", "strategy"})
        return answer(
            lambda: explorer.spans(
                tokenizer=body.tokenizer or explorer.span_models()[0],
                document=body.document,
                text=body.text,
                seed=body.seed,
                settings=settings,
            )
        )

    @app.post("/api/results")
    def open_results(body: PathBody) -> JSONResponse:
        return answer(lambda: explorer.open_results(body.path))

    return app

"""Run the app with uvicorn: in the foreground (the CLI) or in a thread (tests, benchmarks)."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from sentkit.core.config import ConfigError

ALL_INTERFACES = ("0.0.0.0", "::", "")


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on (host, port); port 0 picks a free one. It listens at once, so a client that
    reads the announced URL before the server's loop starts waits in the backlog instead of being refused."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit this: without it, answers on a kept-alive connection (as
    # browsers use) waited ~40 ms more for the client's delayed ACK (Nagle).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as e:
        sock.close()
        raise ConfigError(
            f"cannot listen on {host}:{port} ({e.strerror or e}); pass another --port (0 picks a free one) or --host"
        ) from None
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    if host in ALL_INTERFACES:
        host = "127.0.0.1"
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def page_url(url: str, token: str | None) -> str:
    """The page's address with the server's token (what the user opens)."""
    return f"{url}?token={token}" if token else url


def _server(app: Any) -> Any:
    import uvicorn

    return uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))


@dataclass
class RunningServer:
    """A server answering in a background thread; ``stop()`` ends it. ``url``: its root;
    ``token``: the app's token (``page`` is the URL with it)."""

    url: str
    server: Any
    thread: threading.Thread
    token: str | None = None

    @property
    def page(self) -> str:
        return page_url(self.url, self.token)

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)


def start_in_thread(app: Any, host: str = "127.0.0.1", port: int = 0, timeout: float = 30.0) -> RunningServer:
    """Serve ``app`` from a daemon thread; returns once it accepts connections."""
    sock = bind(host, port)
    server = _server(app)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="sentkit-explore-server")
    thread.start()
    end = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > end:
            raise RuntimeError("the explore server did not start")
        time.sleep(0.02)
    return RunningServer(url_of(sock), server, thread, getattr(app.state, "token", None))


def serve(app: Any, host: str, port: int, *, open_browser: bool = False, announce: Any = print) -> None:
    """Serve in the foreground until Ctrl-C; ``announce`` gets the URL line (with the app's token)."""
    sock = bind(host, port)
    url = page_url(url_of(sock), getattr(app.state, "token", None))
    announce(f"sentkit explore: serving on {url}  (Ctrl-C to stop)")
    if open_browser:
        import webbrowser

        threading.Timer(0.5, webbrowser.open, args=(url,)).start()
    _server(app).run(sockets=[sock])

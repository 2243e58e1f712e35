"""The server under the app: uvicorn's, with a listening socket opened before any index, an HTTP
protocol that cuts off a trickled request head, and a graceful stop on Ctrl-C, SIGTERM or SIGHUP
that answers every request the server has received."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import select
import signal
import socket
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Iterator, cast

from fastapi import FastAPI

from openqa.errors import OpenQAError

if TYPE_CHECKING:
    import uvicorn

#: Seconds the server waits for requests still arriving after Ctrl-C, SIGTERM or SIGHUP before answering
#: them with a 503 (requests being scored get theirs within ``POLL_SECONDS``): with ``FLUSH_SECONDS``
#: and ``CLOSE_SECONDS`` for a job stuck between checkpoints, the server is gone within 4 s, leaving a
#: loaded machine a second of the 5 s promised.
GRACE_SECONDS = 2
#: Seconds a stopping server keeps a connection between requests open for a request its client may be
#: sending (answered with a 503, where closing the socket over its bytes would reset it): within the grace.
IDLE_SECONDS = 1.0
#: Seconds the requests a stopping server cut off after the grace period have to write their 503s.
FLUSH_SECONDS = 0.2
#: The signals that stop the server (SIGHUP: its terminal closed).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: Tries, and seconds each, to fill a stopping server's listening queue with a connection of its own
#: (``_drained``): on loopback a connection is made at once, unless a client took the place first.
PLUG_TRIES = 5
PLUG_SECONDS = 0.05
#: Seconds a client may take to send a request's line and headers (a trickle is cut off).
HEADER_SECONDS = 10.0


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port``, or a one-line error when the port is taken (before any
    index is opened or any address printed)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise OpenQAError(f"cannot listen on {host!r}: {exc.strerror}") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port left in TIME_WAIT by a stopped server
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise OpenQAError(f"cannot listen on {host}:{port}: {exc.strerror} (another server there? "
                          "stop it or choose another --port)") from None
    return sock


def header_timed(seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (h11) that closes a connection whose request line and headers have not
    all arrived ``seconds`` after it opened or after the request's first byte (uvicorn times out an
    idle kept-alive connection, not a trickled head, so each such client would hold a socket for ever).
    When the server stops, a connection between requests is closed ``IDLE_SECONDS`` later, not at
    once: a request its client has just sent (not read yet) is answered, where closing the socket
    over its unread bytes would reset it."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderTimed(H11Protocol):
        timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.start_timer()

        def start_timer(self) -> None:
            if self.timer is None:
                self.timer = self.loop.call_later(seconds, self.head_late)

        def stop_timer(self) -> None:
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None

        def data_received(self, data: bytes) -> None:
            before = self.cycle
            if before is None or before.response_complete:  # these bytes begin a request's head
                self.start_timer()
            super().data_received(data)
            if self.cycle is not before:  # its head arrived in full
                self.stop_timer()

        def shutdown(self) -> None:
            if self.cycle is None or self.cycle.response_complete:
                self.loop.call_later(IDLE_SECONDS, self.stop_when_idle)
            else:
                super().shutdown()

        def stop_when_idle(self) -> None:
            """uvicorn's shutdown of this connection: closed if no request came meanwhile, else after
            answering the one that came."""
            if not self.transport.is_closing():
                super().shutdown()

        def head_late(self) -> None:
            self.timer = None
            if not self.transport.is_closing():
                self.transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            self.stop_timer()
            super().connection_lost(exc)

    return HeaderTimed


def server_config(app: FastAPI) -> uvicorn.Config:
    """uvicorn's settings for serving ``app``: its log at info, the protocol that cuts off a trickled
    head (``header_timed``), a graceful stop of ``GRACE_SECONDS``, and no proxy headers: uvicorn
    would otherwise take a connection from 127.0.0.1 to come from whatever address its
    ``X-Forwarded-For`` names, so any local user (or anyone through an SSH tunnel) could pick the key
    the workers are shared by. A client is its address, or the header ``--client-header`` names."""
    import uvicorn

    return uvicorn.Config(app, log_level="info", lifespan="off", timeout_graceful_shutdown=GRACE_SECONDS,
                          http=header_timed(HEADER_SECONDS), proxy_headers=False)


class CutOffSaid(logging.Filter):
    """uvicorn's ``ERROR: Cancel N running task(s), timeout graceful shutdown exceeded``, logged on
    every graceful stop that cuts a request off after ``GRACE_SECONDS`` (a client still sending its
    body): that is the stop working as documented (the request gets its 503), so it is said as an
    INFO line of what happened instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == "Cancel %s running task(s), timeout graceful shutdown exceeded":
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.msg = f"%s request(s) still open {GRACE_SECONDS} s after the stop began: answered 503 (the server stops)"
        return True


class GracefulServer:
    """uvicorn's server whose first Ctrl-C, SIGTERM or SIGHUP stops it gracefully and whose second
    one stops it at once; the signals are not raised again after the stop, so the caller decides the
    exit status (``forced``). The first signal calls ``on_stop`` (the jobs in flight stop at their
    next checkpoint and their requests get a 503 saying the server stops); a client still sending
    its request after ``GRACE_SECONDS`` gets that 503 too.

    Every request the server has received is answered: the connections still waiting in the
    listening socket's queue are taken over before it closes (closing it would reset them), one
    that comes as it closes is refused (not taken in and reset), and the 503s of the requests cut
    off after the grace period are written before the server returns."""

    def __init__(self, app: FastAPI, on_stop: Callable[[], None]) -> None:
        import uvicorn

        class Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:
                originals = {sig: signal.signal(sig, self.handle_exit) for sig in STOP_SIGNALS}
                try:
                    yield
                finally:
                    for sig, handler in originals.items():
                        signal.signal(sig, handler)

            def handle_exit(self, sig: int, frame: Any) -> None:
                self.force_exit = self.should_exit
                self.should_exit = True
                on_stop()

            async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
                if not self.force_exit:
                    await admit(self, sockets or [])
                await super().shutdown(sockets)
                if self.server_state.tasks and not self.force_exit:  # the cut-off requests write their 503s
                    await asyncio.wait(set(self.server_state.tasks), timeout=FLUSH_SECONDS)

        self.server = Server(server_config(app))
        said = logging.getLogger("uvicorn.error")  # uvicorn's own log (its Config set it up just now)
        if not any(isinstance(f, CutOffSaid) for f in said.filters):
            said.addFilter(CutOffSaid())

    def run(self, sock: socket.socket) -> bool:
        """Serve on ``sock`` until stopped; whether the stop was forced (a second signal)."""
        self.server.run(sockets=[sock])
        return self.server.force_exit


async def admit(server: uvicorn.Server, sockets: list[socket.socket]) -> None:
    """Stop listening on ``sockets`` (uvicorn's started ``server`` over them), first taking over the
    connections still waiting in their queues (closing a listening socket resets those: their
    clients, who had sent a request, would get no answer), and turning away the ones that come
    meanwhile before their handshake (``_drained``), so that they are refused, not reset. The
    server's protocol (``header_timed``) gives the ones taken over a moment to send their requests
    before it closes them."""
    loop = asyncio.get_running_loop()
    waiting, plugs = [], []
    for sock in sockets:
        loop.remove_reader(sock.fileno())  # the loop accepts no more from it: what waits is taken here
        taken, plug = _drained(sock)
        waiting += taken
        plugs += [plug] if plug else []
    for listening in server.servers:
        listening.close()
    for plug in plugs:
        plug.close()
    make = cast(Callable[..., asyncio.Protocol], server.config.http_protocol_class)  # as uvicorn makes its protocols
    protocol = partial(make, config=server.config, server_state=server.server_state, app_state=server.lifespan.state)
    for conn in waiting:
        await loop.connect_accepted_socket(protocol, conn)


def _drained(sock: socket.socket) -> tuple[list[socket.socket], socket.socket | None]:
    """The connections waiting in the queue of the listening ``sock``, accepted, and a connection of
    the server's own left alone in that queue (None where none got in), to be closed after ``sock``.

    A client may finish its handshake between the last accept and the close, and the close resets
    it. So the queue is first cut to one connection (Linux: a backlog of 0 holds one) and then
    filled with the server's own: the kernel drops a later client's handshake while the queue is
    full, and by the time the client tries again the socket is closed, so it is refused."""
    taken = _accepted(sock)
    try:
        sock.listen(0)
        address = _loopback(sock)
    except OSError:  # not a listening TCP socket after all: what waits is taken, as before
        return taken, None
    for _ in range(PLUG_TRIES):
        plug = socket.socket(sock.family, socket.SOCK_STREAM)
        plug.setblocking(False)
        plug.connect_ex(address)
        if select.select([], [plug], [], PLUG_SECONDS)[1] and not plug.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
            return taken, plug  # in the queue: it fills it until the socket closes
        plug.close()  # a client took the one place first (or the plug was refused): take that client, try again
        taken += _accepted(sock)
    return taken, None


def _loopback(sock: socket.socket) -> tuple[Any, ...]:
    """The address a connection from this machine reaches the listening ``sock`` at."""
    host, port, *rest = sock.getsockname()
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1" if sock.family == socket.AF_INET else "::1"
    return (host, port, *rest)


def _accepted(sock: socket.socket) -> list[socket.socket]:
    """The connections waiting in the queue of the listening ``sock`` (non-blocking), accepted."""
    out: list[socket.socket] = []
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:  # none left (BlockingIOError), or the socket is gone
            return out
        conn.setblocking(False)
        out.append(conn)

"""The request guard in front of the app (ASGI middleware): the Host header checked (DNS
rebinding), HEAD answered as GET, and a request body read in full before the app sees it, with its
size and time limits and the check that a ``/v1`` body is a JSON text."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import threading
from typing import Any, Iterable, cast

from starlette.datastructures import Headers
from starlette.routing import Match, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from openqa.data.pasted import MAX_CHARS
from openqa.serve.engines import RequestError, stopping
from openqa.serve.schemas import error_response

#: Request bodies over this many bytes are refused (413) unread: a question at ``MAX_CHARS`` with
#: every character JSON-escaped as ``\\uXXXX`` (6 bytes) still fits.
MAX_BODY = 6 * MAX_CHARS + 16 * 1024
#: Seconds a request body may take to arrive in full (a client trickling bytes gets a 408).
BODY_SECONDS = 20.0


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict, refusing a key given twice (a parser would keep the last)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise RequestError(f"option {key} is given twice" if len(key) == 1 else f"{key!r} is given twice")
        out[key] = value
    return out


def check_json(body: bytes) -> None:
    """Refuse (400) a body that is empty, not UTF-8, not JSON, gives a key twice or holds a lone
    surrogate (``"\\ud800"`` parses, but is no character and cannot be written back as UTF-8)."""
    if not body.strip():
        raise RequestError('empty request body: send a JSON object, such as {"text": "..."} or {"question": "...", "options": {...}}')
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(f"the request body is not UTF-8 (byte {exc.start})") from None
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise RequestError(f"the request body is not valid JSON ({exc.msg} at character {exc.pos}); "
                           "send a JSON object with Content-Type: application/json") from None
    except RecursionError:
        raise RequestError("the request body is nested too deeply: send a JSON object of strings and numbers") from None
    except ValueError as exc:  # an integer of more digits than Python converts (4,300)
        raise RequestError(f"the request body holds a number too long to read ({exc})") from None
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RequestError(f"the request holds a lone surrogate ({exc.object[exc.start:exc.end]!r}): "
                           "text must be valid Unicode") from None


def host_name(header: str) -> str:
    """The name in a Host header, without port, brackets or trailing dot, lower-cased."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    name = header.rsplit(":", 1)[0] if header.count(":") == 1 else header
    return name.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class Guard:
    """ASGI middleware in front of the app: refuses a Host header that names no address of this
    server (403: a page elsewhere whose name was rebound to this address must not reach the API),
    answers HEAD as GET without the body, and reads a request body before the app sees it, refusing
    one over ``limit`` bytes (413: at once when its Content-Length says so, else as soon as the bytes
    received pass it), one that does not arrive within ``BODY_SECONDS`` (408) and, for a ``/v1``
    route that takes a POST, one that is not a JSON text (``check_json``; any other path or method
    gets the router's 404 or 405, whatever its body). A JSON body is handed on labelled as JSON, so
    a client that sent JSON as a form (``curl -d``) is understood. Once the server is ``stopping``,
    every answer says ``Connection: close``: a kept-alive client then sends its next request on a new
    connection (refused once the server has stopped listening) instead of on one the server is
    about to close (which its request would find reset)."""

    def __init__(self, app: ASGIApp, limit: int, hosts: Iterable[str], any_ip: bool, router: Router,
                 stopping: threading.Event) -> None:
        self.app = app
        self.limit = limit
        self.hosts = {host_name(host) for host in hosts}
        self.any_ip = any_ip
        self.router = router
        self.stopping = stopping

    def routed(self, scope: Scope) -> bool:
        """Whether a route of the app takes this path with this method."""
        return any(route.matches(scope)[0] is Match.FULL for route in self.router.routes)

    def host_allowed(self, header: str | None) -> bool:
        if header is None:
            return True  # HTTP/1.0 without a Host: no browser sends that
        name = host_name(header)
        return name in self.hosts or (self.any_ip and _is_ip(name))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = True
            if message["type"] == "http.response.start" and self.stopping.is_set():
                message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            await send(message)

        try:
            await self.guarded(scope, receive, sending)
        except asyncio.CancelledError:  # the server stops (its grace period is over): a 503, no traceback
            if not started:
                await error_response(503, str(stopping()))(scope, receive, sending)
        return None

    async def guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        host = headers.get("host")
        if not self.host_allowed(host):
            names = ", ".join(sorted(self.hosts))
            return await error_response(403, f"host {host!r} is not served here: this server answers to {names}"
                                     " (its operator can add names with --allow-host)")(scope, receive, send)
        if "content-length" in headers and "transfer-encoding" in headers:
            # which one frames the body is ambiguous (request smuggling): refuse, and close the connection
            refused = error_response(400, "a request may not give both Content-Length and Transfer-Encoding")
            refused.headers["connection"] = "close"
            return await refused(scope, receive, send)
        if scope["method"] == "HEAD":
            scope, send = {**scope, "method": "GET"}, _without_body(send)
        if scope["method"] in ("GET", "HEAD", "OPTIONS") or not self.routed(scope):
            return await self.app(scope, receive, send)
        try:
            body = await asyncio.wait_for(self.read(headers, receive), BODY_SECONDS)
            if body is None:
                return None  # the client went away
            if scope["path"].startswith("/v1/"):
                check_json(body)
                scope = {**scope, "headers": [(k, v) for k, v in scope["headers"] if k != b"content-type"]
                         + [(b"content-type", b"application/json")]}
        except asyncio.TimeoutError:
            return await error_response(408, f"the request body did not arrive within {BODY_SECONDS:g} s")(scope, receive, send)
        except RequestError as exc:
            return await error_response(exc.status, str(exc))(scope, receive, send)
        received = [{"type": "http.request", "body": body, "more_body": False}]

        async def replay() -> Message:
            return received.pop() if received else await receive()

        return await self.app(scope, replay, send)

    async def read(self, headers: Headers, receive: Receive) -> bytes | None:
        """The whole body (None if the client disconnected), or a 413 past ``limit`` bytes."""
        too_large = RequestError(f"request body too large (at most {self.limit} bytes)", 413)
        length = headers.get("content-length", "0")
        if length.isdigit() and int(length) > self.limit:
            raise too_large
        chunks: list[bytes] = []
        size, message = 0, cast(Message, {"more_body": True})
        while message.get("more_body"):
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                raise too_large
        return b"".join(chunks)


def _without_body(send: Send) -> Send:
    """``send`` for a HEAD request: the GET's status and headers, no body bytes."""

    async def head(message: Message) -> None:
        if message["type"] == "http.response.body":
            message = {**message, "body": b""}
        await send(message)

    return head

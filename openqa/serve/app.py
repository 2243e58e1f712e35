"""``openqa serve``: a JSON API (versioned under ``/v1``) and a web page over the functions below.

Each endpoint parses a request, calls one function (``parse_block``, ``make_question``, the
``Engines`` that hold the opened methods) and returns its record. Bad input gets a 4xx status and
a one-line JSON error, ``{"error": "..."}``, never a traceback: 400 for what ``openqa answer``
refuses (empty question, fewer than two options, a repeated letter), for an unknown method or
language and for a body that is empty, not JSON, not UTF-8, holds a lone surrogate, is nested too
deeply or holds a number too long to read; 403 for a
Host header that does not name this server (DNS rebinding); 404 for a method this server does
not offer (the message names the ``openqa index`` command that builds its index) or a path it
does not have, 405 for an HTTP method a path does not take (whatever the body); 408 for a body
that does not arrive in time; 413 for a question over its method's size limit or an oversized
body; 422 for a request of the wrong shape (types are strict: ``"5"`` is no number); 503 for a
request over its method's time limit, whose index is being rebuilt, or in flight when the server
stops. The event loop only moves bytes: parsing and scoring run in
threads. The API docs at ``/docs`` load Swagger UI from the package ``fastapi-offline``, so they
work without a network, as does the page.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_redoc_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from starlette.exceptions import HTTPException

from openqa import __version__
from openqa.errors import OpenQAError
from openqa.methods import Request as MethodRequest
from openqa.serve.engines import CLOSE_SECONDS, Engines
from openqa.serve.guard import MAX_BODY, Guard
from openqa.serve.results import add_results
from openqa.serve.routes import add_api
from openqa.serve.schemas import error_response
from openqa.serve.transport import GracefulServer, listen
from openqa.workspace import Context

STATIC = Path(__file__).parent / "static"
#: Host names every server answers to when bound to loopback.
LOOPBACK = ("localhost", "127.0.0.1", "::1")
#: Where ``fastapi-offline`` serves the docs' scripts and styles.
OFFLINE_DOCS = "/static-offline-docs"
#: A page that may load only from this server (inline code and blob workers included, as ReDoc needs).
SAME_ORIGIN = "default-src 'self' 'unsafe-inline' data: blob:"
#: CSS hiding the ReDoc bundle's remote logo.
NO_LOGO = 'img[src^="http"] { display: none; }'


def _validation_message(exc: RequestValidationError) -> tuple[int, str]:
    """The first problem of a request of the wrong shape, on one line (400 for a body that is not JSON)."""
    first = exc.errors()[0]
    if first["type"] == "json_invalid":
        return 400, f"the request body is not valid JSON ({first.get('ctx', {}).get('error', first['msg'])})"
    where = ".".join(str(part) for part in first["loc"] if part != "body") or "body"
    return 422, f"{where}: {first['msg']}"


#: A request header's name as ``--client-header`` takes it.
HEADER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}")


def check_client_header(name: str | None) -> None:
    """Refuse a ``--client-header`` that cannot be a request header's name."""
    if name is not None and not HEADER_NAME.fullmatch(name):
        raise OpenQAError(f"--client-header {name!r} is not a header name (letters, digits and -, e.g. X-Client-Id)")


def create_app(engines: Engines, hosts: Iterable[str] = LOOPBACK, any_ip: bool = False, results: Path | None = None,
               client_header: str | None = None) -> FastAPI:
    """The API and the page over ``engines`` (opened methods), answering requests whose Host header
    names one of ``hosts`` (or, with ``any_ip``, any IP address); with ``results``, also the
    read-only results page over that folder of eval records (``openqa.evaluate.browse``); with
    ``client_header``, clients are told apart for fair sharing by that request header (set by a
    trusted reverse proxy) instead of their address."""
    check_client_header(client_header)
    app = FastAPIOffline(
        title="openqa", version=__version__,
        description="Solve medical licensing exam questions with evidence from the MedQA textbooks. "
                    "No authentication: bind to 127.0.0.1 (the default) unless you mean to share it.",
        swagger_ui_parameters={"validatorUrl": None}, redoc_url=None,
    )

    app.state.client_header = client_header
    app.add_middleware(Guard, limit=MAX_BODY, hosts=hosts, any_ip=any_ip, router=app.router, stopping=engines.stopping)

    @app.exception_handler(OpenQAError)
    async def _refused(request: Request, exc: OpenQAError) -> JSONResponse:
        return error_response(getattr(exc, "status", 400), engines.public(str(exc)))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(*_validation_message(exc))

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        messages = {404: f"no such page: {request.method} {request.url.path}",
                    405: f"{request.method} is not allowed on {request.url.path}"}
        return error_response(exc.status_code, messages.get(exc.status_code, str(exc.detail)))

    @app.exception_handler(Exception)
    async def _crashed(request: Request, exc: Exception) -> JSONResponse:  # uvicorn logs the traceback
        return error_response(500, f"internal error ({type(exc).__name__}); the server's log has the details")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        """ReDoc from ``fastapi-offline``'s files, told by its Content-Security-Policy to load nothing
        from elsewhere (its bundle would fetch the Redocly logo from a CDN; that image is hidden)."""
        root = request.scope.get("root_path", "")
        page = get_redoc_html(openapi_url=f"{root}{app.openapi_url}", title="openqa - ReDoc", with_google_fonts=False,
                              redoc_js_url=f"{root}{OFFLINE_DOCS}/redoc.standalone.js",
                              redoc_favicon_url=f"{root}{OFFLINE_DOCS}/favicon.png")
        html = bytes(page.body).decode().replace("</head>", f"<style>{NO_LOGO}</style></head>", 1)
        return HTMLResponse(html, headers={"Content-Security-Policy": SAME_ORIGIN})

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    if results is not None:
        add_results(app, Path(results), engines)
    add_api(app, engines)
    return app


def serve(ctx: Context, langs: list[str], methods: list[str], host: str, port: int,
          allow_hosts: list[str] | None = None, request: MethodRequest = MethodRequest(), results: Path | None = None,
          client_header: str | None = None) -> None:
    """Open the methods once, then serve the page and the API on ``host:port`` until Ctrl-C (a
    second Ctrl-C stops at once and raises ``KeyboardInterrupt``). Requests must name this server
    in their Host header: ``host`` (any IP address when it is a wildcard), loopback names when it
    is loopback, or one of ``allow_hosts``. ``request`` gives the methods what they need beyond
    an index (the LLM reader's model and settings); ``client_header`` is the request header a
    trusted reverse proxy sets to tell its users apart (see ``create_app``)."""
    check_client_header(client_header)  # refused before the port and the methods are opened
    sock = listen(host, port)
    wildcard = host in ("0.0.0.0", "::", "")
    hosts = [host, *(LOOPBACK if wildcard or host in LOOPBACK else ()), *(allow_hosts or [])]
    forced = False
    with sock:
        engines = Engines(ctx, langs, methods, request)
        try:
            for offer in engines.describe():
                state = "ready" if offer["available"] else f"not available: {offer['error']}"
                ctx.notify(f"{offer['method']} ({offer['lang']}) {state}")
            shown = f"[{host}]" if ":" in host else host
            ctx.notify(f"page at http://{shown}:{port}/ and API docs at http://{shown}:{port}/docs"
                       + ("" if host in LOOPBACK else "; no authentication: anyone who reaches this address can use it"))
            if results is not None:
                ctx.notify(f"results of {results} at http://{shown}:{port}/results")
            app = create_app(engines, hosts, any_ip=wildcard, results=results, client_header=client_header)
            forced = GracefulServer(app, engines.stop).run(sock)
        finally:
            engines.close(0.0 if forced else CLOSE_SECONDS)
    if forced:
        raise KeyboardInterrupt

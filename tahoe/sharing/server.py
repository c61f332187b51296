"""The Delta Sharing server: a FastAPI app of the protocol (spec "REST APIs") over tahoe's log core;
`create_app(config)` builds it, `serve` (`tahoe sharing serve`) runs it with uvicorn.

  1. Routers under the configured endpoint (`routes.listing`, `routes.table`, `routes.credentials`,
     `routes.files`, `routes.oauth`) over one `ServerContext`.
  2. Errors as `{"errorCode", "message"}`; messages never carry storage locations, 500s carry nothing.
  3. `ops`: request ids, audit, metrics, /healthz, /readyz (200 once every table is warmed), timeouts.
  4. Authentication fails closed (`auth`): only `allowAnonymous: true` lets requests without a token in.
  5. `--workers N` processes share one socket; replicas share a PostgreSQL store (see `ServerContext`)."""

from __future__ import annotations

import contextlib
import logging
import os
import threading

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .config import ServerConfig, load_config
from .context import ServerContext
from .errors import SharingError, public_message
from .routes import credentials, files, listing, oauth, table
from .ops import OpsMiddleware, add_ops_routes, install_log_redaction
from .routes.files import FILE_CHUNK
from .metrics import MULTIPROC_ENV

__all__ = ["create_app", "serve", "FILE_CHUNK"]

log = logging.getLogger("tahoe.sharing")


def _err(status: int, code: str, message: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"errorCode": code, "message": public_message(message)}, status_code=status,
                        headers=headers)


def create_app(config: ServerConfig, workers: int = 1) -> FastAPI:
    """The app for `config`; `workers`: how many processes serve it (see `ServerContext`)."""
    ctx = ServerContext(config, workers)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        """Load every table's latest snapshot in the background, so first queries are warm;
        /readyz answers 200 once that is done."""
        install_log_redaction()

        def run():
            for st in ctx.tables.values():
                try:
                    st.prepare(st.snapshot())
                except Exception:  # a broken table answers its own errors when asked
                    pass
                ctx.warmed += 1
            ctx.ready = True
            ctx.metrics.set_ready(True)
        ctx.metrics.set_ready(False)
        threading.Thread(target=run, name="sharing-warm-up", daemon=True).start()
        # pyarrow imports pandas on its first `pa.array` when pandas is installed (~0.4 s): pay it
        # before serving rather than in the first request (meanwhile the warm-up reads the logs)
        with contextlib.suppress(ImportError):
            import pandas  # noqa: F401
        try:
            yield
        finally:
            ctx.close()

    open_docs = config.docs == "open"
    app = FastAPI(title="tahoe Delta Sharing server", version="1", lifespan=lifespan,
                  description="Delta Sharing protocol server over Delta tables (tahoe).",
                  openapi_url="/openapi.json" if open_docs else None,
                  docs_url="/docs" if open_docs else None, redoc_url="/redoc" if open_docs else None)
    app.state.sharing = ctx
    for router in (listing.router, table.router, credentials.router, files.router, oauth.router):
        app.include_router(router, prefix=config.endpoint)
    add_ops_routes(app, ctx)
    app.add_middleware(OpsMiddleware, ctx=ctx)

    @app.exception_handler(SharingError)
    async def _sharing_error(request: Request, e: SharingError):
        headers = dict(e.headers or {})
        if e.status == 401:
            headers["WWW-Authenticate"] = "Bearer"
        return _err(e.status, e.code, e.message, headers or None)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, e: RequestValidationError):
        errs = e.errors()
        if any(er.get("type") == "json_invalid" for er in errs):
            return _err(400, "MALFORMED_REQUEST", "the request body is not valid JSON")
        parts = []
        for er in errs[:3]:
            loc = ".".join(str(x) for x in er.get("loc", ()) if x not in ("body", "query", "path", "header"))
            parts.append(f"{loc or 'request'}: {er.get('msg')}")
        return _err(400, "INVALID_PARAMETER_VALUE", "; ".join(parts))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, e: StarletteHTTPException):
        if e.status_code == 404:
            return _err(404, "RESOURCE_DOES_NOT_EXIST", "no such resource")
        if e.status_code == 405:
            return _err(405, "METHOD_NOT_ALLOWED", "method not allowed")
        return _err(e.status_code, "INVALID_PARAMETER_VALUE", str(e.detail))

    @app.exception_handler(Exception)
    async def _internal(request: Request, e: Exception):
        log.exception("internal error on %s", request.url.path)
        return _err(500, "INTERNAL_ERROR", "")

    return app


CONFIG_ENV = "TAHOE_SHARING_CONFIG"      # how `serve` hands the config file to its worker processes
WORKERS_ENV = "TAHOE_SHARING_WORKERS"


def app_from_env() -> FastAPI:
    """The app of one worker process of `serve(..., workers=N)`: the config file named by
    $TAHOE_SHARING_CONFIG, loaded in the worker."""
    return create_app(load_config(os.environ[CONFIG_ENV]), int(os.environ.get(WORKERS_ENV, "1")))


def serve(config: ServerConfig, host: str | None = None, port: int | None = None, workers: int = 1,
          config_path: str | None = None) -> None:
    """Run the server with uvicorn. `workers` > 1: that many processes accept on the same
    socket, each loading `config_path` (already loaded here as `config`, which created its
    signing key file if it had none, so that every worker signs with the same key); their
    metrics are added up through a multiprocess directory made here."""
    import shutil
    import sys
    import tempfile

    import uvicorn

    for w in config.warnings:
        sys.stderr.write(f"warning: {w}\n")
    if config.allow_anonymous:
        sys.stderr.write("warning: allowAnonymous is true: requests without a token read every share\n")

    # loop/http "auto": uvloop and httptools (dependencies) when installed, else asyncio and h11
    level = os.environ.get("TAHOE_SHARING_LOG_LEVEL", "warning")
    kw = dict(host=host or config.host, port=port or config.port, log_level=level,
              timeout_graceful_shutdown=30, server_header=False)
    if workers > 1:
        if config_path is None:
            raise ValueError("several workers need the config file's path (each worker loads it)")
        os.environ[CONFIG_ENV] = os.path.abspath(config_path)
        os.environ[WORKERS_ENV] = str(workers)
        metrics_dir = None
        if config.metrics_enabled and not os.environ.get(MULTIPROC_ENV):
            metrics_dir = tempfile.mkdtemp(prefix="tahoe-sharing-metrics-")
            os.environ[MULTIPROC_ENV] = metrics_dir
        try:
            uvicorn.run(f"{__name__}:app_from_env", factory=True, workers=workers, **kw)
        finally:
            if metrics_dir:
                shutil.rmtree(metrics_dir, ignore_errors=True)
        return
    uvicorn.run(create_app(config), **kw)

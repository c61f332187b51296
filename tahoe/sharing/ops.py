"""What an operator runs the sharing server with: the request middleware, the operational endpoints, OpenAPI
docs, and an access log that never shows a secret.

  1. `OpsMiddleware` (pure ASGI): a request id (`X-Request-Id`, the proxy's when well-formed), one audit
     record and the metrics per request; `requestTimeoutSeconds` answers 503 `REQUEST_TIMEOUT` with
     `Retry-After` when no answer has started (a streaming answer is never cut).
  2. `GET /healthz`, `GET /readyz` (503 with what is missing until tables and state store are ready),
     `GET /metrics` (Prometheus; `metrics.bearerToken`): at the root, never audited.
  3. `openApiDocs`: `off`; `auth` (default: `/openapi.json` for authenticated callers); `open`.
  4. `RedactQueries`: drops query strings from uvicorn's access log."""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
import secrets
import time
from typing import Any

from fastapi import Depends, Request
from fastapi.responses import JSONResponse, Response

from .audit import now_iso
from .context import AUDIT_KEY, CLIENT_KEY, STREAM_KEY, ServerContext, current_principal
from .limits import client_address

__all__ = ["OpsMiddleware", "add_ops_routes", "RedactQueries", "install_log_redaction", "OPS_PATHS"]

OPS_PATHS = frozenset(("/healthz", "/readyz", "/metrics"))
_REQUEST_ID = re.compile(r"[A-Za-z0-9._\-]{1,128}")
_HINT_CHARS = 1024


class OpsMiddleware:
    def __init__(self, app, ctx: ServerContext):
        self.app = app
        self.ctx = ctx
        self.timeout = ctx.config.request_timeout_seconds
        self.trusted = ctx.config.trusted_proxies
        self.replica = ctx.config.replica_id

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] in OPS_PATHS:
            await self.app(scope, receive, send)
            return
        ctx = self.ctx
        t0 = time.perf_counter()
        rid = ua = xff = None
        for k, v in scope["headers"]:
            if k == b"x-request-id":
                rid = v.decode("latin-1")
            elif k == b"user-agent":
                ua = v.decode("latin-1")[:256]
            elif k == b"x-forwarded-for":
                xff = v.decode("latin-1")
        if rid is None or not _REQUEST_ID.fullmatch(rid):
            rid = secrets.token_hex(8)
        peer = scope.get("client")
        client = client_address(peer[0] if peer else None, xff, self.trusted)
        rec: dict[str, Any] = {}
        scope[AUDIT_KEY] = rec
        scope[CLIENT_KEY] = client
        state = {"status": 500, "bytes": 0, "version": None, "started": False, "timed_out": False}
        rid_header = (b"x-request-id", rid.encode())

        async def send_wrapper(message):
            if state["timed_out"]:
                return    # the client already has its 503
            if message["type"] == "http.response.start":
                state["started"] = True
                state["status"] = message["status"]
                headers = list(message.get("headers", ()))
                for k, v in headers:
                    if k == b"delta-table-version":
                        state["version"] = v
                headers.append(rid_header)
                message = {**message, "headers": headers}
                ctx.metrics.stream(1)
                state["streaming"] = True
            elif message["type"] == "http.response.body":
                state["bytes"] += len(message.get("body", b""))
            await send(message)

        handle = None
        if self.timeout:
            handle = asyncio.get_running_loop().call_later(self.timeout, self._on_timeout, state, send, rid_header)
        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            if handle is not None:
                handle.cancel()
            if state.get("streaming"):
                ctx.metrics.stream(-1)
            holder = scope.get(STREAM_KEY)
            if holder is not None:
                ctx.limiter.exit_stream(holder)
            self._record(scope, rec, state, rid, client, ua, time.perf_counter() - t0)

    def _on_timeout(self, state: dict, send, rid_header) -> None:
        if state["started"]:
            return
        state["timed_out"] = True
        state["status"] = 503

        async def answer():
            body = (b'{"errorCode":"REQUEST_TIMEOUT","message":"the request took longer than '
                    + str(self.timeout).encode() + b' seconds (requestTimeoutSeconds)"}')
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"application/json"), (b"retry-after", b"1"),
                                    (b"content-length", str(len(body)).encode()), rid_header]})
            await send({"type": "http.response.body", "body": body})
        asyncio.ensure_future(answer())

    def _record(self, scope, rec: dict, state: dict, rid: str, client, ua, seconds: float) -> None:
        ctx = self.ctx
        route = scope.get("route")
        operation = getattr(route, "name", None) or "unknown"
        params = scope.get("path_params") or {}
        share = rec.get("share") or params.get("share")
        status = state["status"]
        is_file = operation in ("get_file", "head_file")
        file_bytes = state["bytes"] if is_file and status in (200, 206) else 0
        if is_file and status == 302 and rec.get("grantedBytes"):
            file_bytes = state["bytes"] = rec["grantedBytes"]   # served by the store through the redirect
        if file_bytes and rec.get("recipientName"):
            ctx.limiter.add_bytes(rec.pop("recipientName"), file_bytes)
        rec.pop("recipientName", None)
        refused = rec.get("refused") or ("timeout" if state["timed_out"] else None)
        ctx.metrics.request(operation, status, share, seconds, rec.get("files"), file_bytes, rec.get("authFailure"),
                            refused)
        if ctx.audit is None:
            return
        out = {"time": now_iso(), "requestId": rid, "replica": self.replica, "recipient": rec.get("recipient"),
               "share": share, "schema": rec.get("schema") or params.get("schema"),
               "table": rec.get("table") or params.get("table"), "operation": operation}
        if state["version"] is not None:
            out["version"] = int(state["version"])
        for k in ("startingVersion", "endingVersion", "timestamp", "limitHint", "files", "redirected"):
            if rec.get(k) is not None:
                out[k] = rec[k]
        for k in ("predicateHints", "jsonPredicateHints"):
            v = rec.get(k)
            if v is not None:
                v = v if isinstance(v, str) else repr(v)
                out[k] = v if len(v) <= _HINT_CHARS else v[:_HINT_CHARS] + "…"
        out.update({"bytes": state["bytes"], "status": status, "latencyMs": round(seconds * 1000, 3),
                    "client": client, "userAgent": ua})
        if rec.get("authFailure"):
            out["authFailure"] = rec["authFailure"]
        if refused:
            out["refused"] = refused
        ctx.audit.write(out)


def audit_fields(request, **fields) -> None:
    """Add `fields` (those that are not None) to the request's audit record."""
    rec = request.scope.get(AUDIT_KEY)
    if rec is not None:
        for k, v in fields.items():
            if v is not None:
                rec[k] = v


def add_ops_routes(app, ctx: ServerContext) -> None:
    @app.get("/healthz", include_in_schema=False)
    def healthz():
        return {"status": "ok"}

    @app.get("/readyz", include_in_schema=False)
    def readyz():
        problems = []
        if not ctx.ready:
            problems.append(f"warming up: {ctx.warmed} of {len(ctx.tables)} tables loaded")
        try:
            ctx.store.query("SELECT 1")
        except Exception as e:  # noqa: BLE001 - the store's own words, without its password
            from .store import describe_url

            problems.append(f"the state store {describe_url(ctx.store.url)} does not answer: {type(e).__name__}")
        if ctx.recipients.last_error:
            problems.append("the recipients file is malformed (serving its last good copy)")
        if problems and not (ctx.ready and len(problems) == 1 and problems[0].startswith("the recipients")):
            return JSONResponse({"status": "not ready", "problems": problems}, status_code=503)
        return {"status": "ready", "warnings": problems} if problems else {"status": "ready"}

    @app.get("/metrics", include_in_schema=False)
    def metrics(request: Request):
        if not ctx.metrics.enabled:
            return JSONResponse({"errorCode": "RESOURCE_DOES_NOT_EXIST", "message": "metrics are off"},
                                status_code=404)
        want = ctx.config.metrics_bearer_token
        if want:
            got = request.headers.get("authorization", "")
            if not hmac.compare_digest(got.encode(), f"Bearer {want}".encode()):
                return JSONResponse({"errorCode": "UNAUTHENTICATED", "message": "metrics need their bearer token"},
                                    status_code=401, headers={"WWW-Authenticate": "Bearer"})
        body, ctype = ctx.metrics.exposition()
        return Response(body, media_type=ctype)

    if ctx.config.docs == "auth":
        @app.get("/openapi.json", include_in_schema=False)
        def openapi(p: Any = Depends(current_principal)):
            return JSONResponse(app.openapi())


class RedactQueries(logging.Filter):
    """Drops the query string from the path of uvicorn's access-log lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str) and "?" in args[2]:
            record.args = args[:2] + (args[2].split("?", 1)[0] + "?<query redacted>",) + args[3:]
        return True


def install_log_redaction() -> None:
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactQueries) for f in access.filters):
        access.addFilter(RedactQueries())

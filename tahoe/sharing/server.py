"""The Delta Sharing server: FastAPI routes of the protocol (spec "REST APIs") over tahoe's log core.

Owns: authentication (per-recipient bearer tokens stored as SHA-256, compared in constant time;
the config's `authorization.bearerToken`), authorization (a recipient sees only granted shares; an
ungranted share answers exactly like a missing one), request validation, error mapping to
`{"errorCode", "message"}` (500s carry no internals), listing pagination with signed page tokens,
`/version`, `/metadata`, `/query` (predicates, limit, time travel, streaming ranges, pagination,
refresh tokens), `/changes`, and serving the server's own signed file URLs (GET with Range, HEAD).

`create_app(config)` builds the app; `python -m tahoe sharing serve --config FILE` runs it.
A config with neither `authorization.bearerToken` nor a recipient file serves everyone (as the
reference server without authorization does); `serve` warns about it.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import itertools
import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Optional

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import TableNotFoundError, UnsupportedFeatureError, VersionNotFoundError
from ..read.changes import CdfNotEnabledError, check_cdf_enabled
from ..log.delta_log import parse_timestamp
from .config import RecipientStore, ServerConfig, TableConfig, hash_token, valid_name
from .predicates import FileContext, parse_json_predicate, parse_sql_predicates
from .signing import BadToken, Signer
from .tables import Capabilities, SharedTable, SharingError, dumps, iter_file_rows, now_s, rel_ok

__all__ = ["create_app"]

log = logging.getLogger("tahoe.sharing")
NDJSON = "application/x-ndjson; charset=utf-8"
BATCH_LINES = 1000
FILE_CHUNK = 1 << 20
MAX_LIST = 500


@dataclass(frozen=True)
class Principal:
    name: str
    all_shares: bool
    shares: tuple[str, ...] = ()

    def grants(self, share: str) -> bool:
        s = share.lower()
        return self.all_shares or any(g == "*" or g.lower() == s for g in self.shares)


class QueryBody(BaseModel):
    """Body of `/query` (every field optional)."""
    model_config = ConfigDict(extra="allow")
    predicateHints: Optional[list[str]] = None
    jsonPredicateHints: Optional[Any] = None
    limitHint: Optional[int] = None
    version: Optional[int] = None
    timestamp: Optional[str] = None
    startingVersion: Optional[int] = None
    endingVersion: Optional[int] = None
    maxFiles: Optional[int] = None
    pageToken: Optional[str] = None
    includeRefreshToken: Optional[bool] = None
    refreshToken: Optional[str] = None


def _err(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"errorCode": code, "message": message}, status_code=status)


def _not_found(what: str) -> SharingError:
    return SharingError(404, "RESOURCE_DOES_NOT_EXIST", what)


def _bad(message: str) -> SharingError:
    return SharingError(400, "INVALID_PARAMETER_VALUE", message)


def _bool_param(v: Optional[str]) -> bool:
    if v is None or v == "":
        return False
    s = v.strip().lower()
    if s in ("true", "1"):
        return True
    if s in ("false", "0"):
        return False
    raise _bad(f"not a boolean: {v!r}")


def _batched(lines: Iterable[str], first: int = 2) -> Iterator[bytes]:
    """NDJSON in chunks of BATCH_LINES lines; the first `first` lines (protocol, metaData) go out
    at once so the first byte does not wait for a full batch."""
    buf: list[str] = []
    limit = first
    for line in lines:
        buf.append(line)
        if len(buf) >= limit:
            yield ("\n".join(buf) + "\n").encode()
            buf = []
            limit = BATCH_LINES
    if buf:
        yield ("\n".join(buf) + "\n").encode()


def data_change_lines(st: SharedTable, fmt: str, base: str, vc, expires: int) -> Iterator[str]:
    """A version's add and remove lines that change data (`dataChange=false` rearrangements such
    as compaction are left out), with the version and its commit timestamp."""
    for kind, actions in (("add", vc.adds), ("remove", vc.removes)):
        for a in actions:
            if a.get("dataChange", True):
                yield st.file_line(fmt, base, a, expires, wrapper=kind, version=vc.version,
                                   timestamp=vc.timestamp, action=kind)


def paged_lines(head: list[str], files: Iterable[str], page_size: int | None, end_stream: bool,
                expires: int, next_token: Callable[[int], str]) -> Iterator[str]:
    """The head lines (protocol, metaData), then at most `page_size` file lines, then — only when
    the client asked for one — an endStreamAction, with a token for the next page when more lines
    remain (`next_token(number of file lines on this page)`)."""
    yield from head
    n = 0
    more = False
    for line in files:
        if page_size is not None and n >= page_size:
            more = True
            break
        yield line
        n += 1
    if end_stream:
        esa: dict[str, Any] = {"minUrlExpirationTimestamp": expires * 1000}
        if more:
            esa["nextPageToken"] = next_token(n)
        yield dumps({"endStreamAction": esa})


def create_app(config: ServerConfig) -> FastAPI:
    signer = Signer(config.signing_key)
    recipients = RecipientStore(config.recipients_file)
    tables = {key: SharedTable(t, signer, config.presigned_url_timeout_seconds)
              for key, t in config.tables_by_key().items()}
    bearer_hash = hash_token(config.bearer_token) if config.bearer_token else None
    prefix = config.endpoint
    bearer = HTTPBearer(auto_error=False, description="A recipient's bearer token")

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        """Load every table's latest snapshot in the background, so first queries are warm."""
        def run():
            for st in tables.values():
                try:
                    snap = st.snapshot()
                    st.size_and_count(snap)
                    st.check_paths(snap)
                    if not st.is_s3:
                        st._static_parquet(snap)
                except Exception:  # a broken table answers its own errors when asked
                    pass
        threading.Thread(target=run, name="sharing-warm-up", daemon=True).start()
        # pyarrow imports pandas on its first `pa.array` when pandas is installed (~0.4 s): pay it
        # before serving rather than in the first request (meanwhile the warm-up reads the logs)
        with contextlib.suppress(ImportError):
            import pandas  # noqa: F401
        yield

    app = FastAPI(title="tahoe Delta Sharing server", version="1", lifespan=lifespan,
                  description="Delta Sharing protocol server over Delta tables (tahoe).")

    # --- errors -----------------------------------------------------------------------------------
    @app.exception_handler(SharingError)
    async def _sharing_error(request: Request, e: SharingError):
        return _err(e.status, e.code, e.message)

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

    # --- auth -------------------------------------------------------------------------------------
    def principal(creds: Optional[HTTPAuthorizationCredentials] = Depends(bearer)) -> Principal:
        token = creds.credentials if creds is not None and creds.scheme.lower() == "bearer" else None
        recs = recipients.all()
        if bearer_hash is None and not recs and not (config.recipients_file and os.path.exists(config.recipients_file)):
            return Principal("anonymous", True)
        if not token:
            raise SharingError(401, "UNAUTHENTICATED", "a bearer token is required")
        h = hash_token(token)
        found: Principal | None = None
        expired = False
        if bearer_hash is not None and hmac.compare_digest(bearer_hash, h):
            found = Principal("bearer", True)
        now_ms = int(time.time() * 1000)
        for r in recs:
            if hmac.compare_digest(r.token_sha256, h) and found is None:
                if r.active(now_ms):
                    found = Principal(r.name, False, tuple(r.shares))
                else:
                    expired = True
        if found is None:
            raise SharingError(401, "UNAUTHENTICATED",
                               "the bearer token has expired or was revoked" if expired else "invalid bearer token")
        return found

    # --- lookups ----------------------------------------------------------------------------------
    def find_share(p: Principal, share: str):
        if not valid_name(share):
            raise _not_found(f"share {share!r} does not exist")
        s = config.share(share)
        if s is None or not p.grants(s.name):
            raise _not_found(f"share {share} does not exist")
        return s

    def find_schema(p: Principal, share: str, schema: str):
        s = find_share(p, share)
        sc = next((x for x in s.schemas if x.name.lower() == schema.lower()), None)
        if sc is None:
            raise _not_found(f"schema {share}.{schema} does not exist")
        return s, sc

    def find_table(p: Principal, share: str, schema: str, table: str) -> SharedTable:
        _, sc = find_schema(p, share, schema)
        t = next((x for x in sc.tables if x.name.lower() == table.lower()), None)
        if t is None:
            raise _not_found(f"table {share}.{schema}.{table} does not exist")
        return tables[t.key]

    def page(p: Principal, kind: str, items: list[dict], max_results: Optional[int], page_token: Optional[str]):
        if max_results is None:
            max_results = MAX_LIST
        if max_results < 0 or max_results > MAX_LIST:
            raise _bad(f"maxResults must be between 0 and {MAX_LIST}")
        offset = 0
        if page_token:
            try:
                offset = int(signer.read_token(page_token, k=kind, r=p.name)["o"])
            except (BadToken, KeyError, TypeError, ValueError):
                raise _bad("invalid pageToken") from None
        chunk = items[offset:offset + max_results]
        out: dict[str, Any] = {"items": chunk}
        nxt = offset + len(chunk)
        if nxt < len(items):
            out["nextPageToken"] = signer.token({"k": kind, "r": p.name, "o": nxt})
        return out

    def table_item(t: TableConfig, share_id: str | None) -> dict:
        d = {"name": t.name, "schema": t.schema, "share": t.share, "id": t.id}
        if share_id:
            d["shareId"] = share_id
        return d

    MaxResults = Query(None, description="0..500, default 500")
    PageToken = Query(None, max_length=4096)

    # --- listing ----------------------------------------------------------------------------------
    @app.get(prefix + "/shares", tags=["listing"])
    def list_shares(maxResults: Optional[int] = MaxResults, pageToken: Optional[str] = PageToken,
                    p: Principal = Depends(principal)):
        items = [{"name": s.name, **({"id": s.id} if s.id else {})} for s in config.shares if p.grants(s.name)]
        return page(p, "shares", items, maxResults, pageToken)

    @app.get(prefix + "/shares/{share}", tags=["listing"])
    def get_share(share: str, p: Principal = Depends(principal)):
        s = find_share(p, share)
        return {"share": {"name": s.name, **({"id": s.id} if s.id else {})}}

    @app.get(prefix + "/shares/{share}/schemas", tags=["listing"])
    def list_schemas(share: str, maxResults: Optional[int] = MaxResults, pageToken: Optional[str] = PageToken,
                     p: Principal = Depends(principal)):
        s = find_share(p, share)
        items = [{"name": sc.name, "share": s.name} for sc in s.schemas]
        return page(p, f"schemas:{s.name.lower()}", items, maxResults, pageToken)

    @app.get(prefix + "/shares/{share}/schemas/{schema}/tables", tags=["listing"])
    def list_tables(share: str, schema: str, maxResults: Optional[int] = MaxResults,
                    pageToken: Optional[str] = PageToken, p: Principal = Depends(principal)):
        s, sc = find_schema(p, share, schema)
        items = [table_item(t, s.id) for t in sc.tables]
        return page(p, f"tables:{s.name.lower()}.{sc.name.lower()}", items, maxResults, pageToken)

    @app.get(prefix + "/shares/{share}/all-tables", tags=["listing"])
    def list_all_tables(share: str, maxResults: Optional[int] = MaxResults, pageToken: Optional[str] = PageToken,
                        p: Principal = Depends(principal)):
        s = find_share(p, share)
        items = [table_item(t, s.id) for sc in s.schemas for t in sc.tables]
        return page(p, f"all-tables:{s.name.lower()}", items, maxResults, pageToken)

    # --- table calls --------------------------------------------------------------------------------
    def guard(fn, *args, **kw):
        """Run fn mapping core errors to protocol errors."""
        try:
            return fn(*args, **kw)
        except SharingError:
            raise
        except (VersionNotFoundError, CdfNotEnabledError) as e:
            raise _bad(str(e)) from None
        except UnsupportedFeatureError as e:
            raise SharingError(400, "UNSUPPORTED_OPERATION", str(e)) from None
        except TableNotFoundError:
            raise _not_found("the table's data does not exist") from None
        except (ValueError, TypeError) as e:
            raise _bad(str(e)) from None

    def version_at_or_after(st: SharedTable, ts: str) -> int:
        ms = parse_timestamp(ts)
        stamps = st.log.commit_timestamps()
        for v, t in stamps:
            if t >= ms:
                return v
        raise _bad(f"there is no version at or after {ts} (latest version {stamps[-1][0]})")

    def version_at_or_before(st: SharedTable, ts: str) -> int:
        ms = parse_timestamp(ts)
        best = None
        for v, t in st.log.commit_timestamps():
            if t <= ms:
                best = v
        if best is None:
            raise _bad(f"there is no version at or before {ts}")
        return best

    def check_ts(ts: str) -> None:
        try:
            parse_timestamp(ts)
        except ValueError as e:
            raise _bad(str(e)) from None

    def url_expiry() -> int:
        """URL expiry in epoch seconds: at least the configured timeout from now, rounded up to
        the minute so that the URLs of one minute are identical (and their lines cacheable)."""
        return -(-(now_s() + config.presigned_url_timeout_seconds) // 60) * 60

    def base_url(request: Request) -> str:
        if config.public_url:
            return config.public_url.rstrip("/")
        return str(request.base_url).rstrip("/") + prefix

    def table_version(st: SharedTable, startingTimestamp: Optional[str]) -> int:
        if startingTimestamp is not None:
            check_ts(startingTimestamp)
            v = guard(version_at_or_after, st, startingTimestamp)
            if v < st.cfg.start_version:
                v = st.cfg.start_version
            return v
        return guard(st.latest_version)

    @app.get(prefix + "/shares/{share}/schemas/{schema}/tables/{table}/version", tags=["table"])
    def get_table_version(share: str, schema: str, table: str,
                          startingTimestamp: Optional[str] = Query(None, max_length=64),
                          p: Principal = Depends(principal)):
        st = find_table(p, share, schema, table)
        v = table_version(st, startingTimestamp)
        return Response(status_code=200, headers={"Delta-Table-Version": str(v)})

    @app.head(prefix + "/shares/{share}/schemas/{schema}/tables/{table}", tags=["table"])
    def head_table_version(share: str, schema: str, table: str, p: Principal = Depends(principal)):
        st = find_table(p, share, schema, table)
        return Response(status_code=200, headers={"Delta-Table-Version": str(guard(st.latest_version))})

    def caps_headers(fmt: str, end_stream: bool = False) -> dict:
        v = f"responseformat={fmt}"
        if end_stream:
            v += ";includeendstreamaction=true"
        return {"delta-sharing-capabilities": v}

    @app.get(prefix + "/shares/{share}/schemas/{schema}/tables/{table}/metadata", tags=["table"])
    def get_table_metadata(share: str, schema: str, table: str,
                           delta_sharing_capabilities: Optional[str] = Header(None, max_length=1024),
                           p: Principal = Depends(principal)):
        st = find_table(p, share, schema, table)
        caps = Capabilities.parse(delta_sharing_capabilities)
        snap = guard(st.snapshot)
        fmt = st.choose_format(caps, snap)
        body = st.protocol_line(fmt, snap) + "\n" + st.metadata_line(fmt, snap) + "\n"
        return Response(body, media_type=NDJSON,
                        headers={"Delta-Table-Version": str(snap.version), **caps_headers(fmt)})

    # --- query ------------------------------------------------------------------------------------
    def query_hash(body: QueryBody) -> str:
        d = body.model_dump(exclude={"pageToken", "maxFiles", "refreshToken", "includeRefreshToken"})
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:24]

    def file_filter(st: SharedTable, snap, body: QueryBody):
        preds = []
        if config.evaluate_json_predicate_hints and body.jsonPredicateHints is not None:
            pj = parse_json_predicate(body.jsonPredicateHints)
            if pj is not None:
                preds.append(pj)
        if config.evaluate_predicate_hints and body.predicateHints:
            try:
                ps = parse_sql_predicates(body.predicateHints, snap.schema)
            except Exception:
                ps = None
            if ps is not None:
                preds.append(ps)
        if not preds:
            return None
        from ..protocol import column_mapping

        try:
            physical = {k.lower(): v for k, v in
                        column_mapping.logical_to_physical_names(snap.schema, snap.column_mapping_mode).items()}
        except Exception:
            return None
        pcols = {c.lower() for c in snap.partition_columns}

        def keep(row: dict) -> bool:
            stats = None
            if row.get("stats"):
                try:
                    stats = json.loads(row["stats"])
                except ValueError:
                    stats = None
            ctx = FileContext(row.get("partitionValues"), stats, physical, pcols)
            return all(pr.may_match(ctx) for pr in preds)
        return keep

    def limited(rows: Iterator[dict], limit: Optional[int]) -> Iterator[dict]:
        if limit is None:
            yield from rows
            return
        total = 0
        for r in rows:
            if total >= limit:
                return
            yield r
            n = None
            if r.get("stats"):
                try:
                    n = json.loads(r["stats"]).get("numRecords")
                except (ValueError, AttributeError):
                    n = None
            if isinstance(n, int):
                total += n

    @app.post(prefix + "/shares/{share}/schemas/{schema}/tables/{table}/query", tags=["table"])
    def query_table(share: str, schema: str, table: str, request: Request, body: Optional[QueryBody] = None,
                    delta_sharing_capabilities: Optional[str] = Header(None, max_length=1024),
                    p: Principal = Depends(principal)):
        st = find_table(p, share, schema, table)
        body = body or QueryBody()
        caps = Capabilities.parse(delta_sharing_capabilities)
        n_set = sum(x is not None for x in (body.version, body.timestamp, body.startingVersion))
        if n_set > 1:
            raise _bad("give at most one of version, timestamp and startingVersion")
        for name in ("version", "startingVersion", "endingVersion", "limitHint"):
            v = getattr(body, name)
            if v is not None and v < 0:
                raise _bad(f"{name} must be non-negative")
        if body.maxFiles is not None and body.maxFiles <= 0:
            raise _bad("maxFiles must be positive")
        if body.endingVersion is not None and body.startingVersion is None:
            raise _bad("endingVersion needs startingVersion")
        if body.startingVersion is not None and body.endingVersion is not None \
                and body.startingVersion > body.endingVersion:
            raise _bad("startingVersion is after endingVersion")
        time_travel = body.version is not None or body.timestamp is not None or body.startingVersion is not None
        if time_travel and not st.cfg.history_shared:
            raise _bad("reading a version, a timestamp or a version range needs the table's history to be shared")
        qh = query_hash(body)
        pinned = None
        offset = 0
        if body.pageToken:
            try:
                tok = signer.read_token(body.pageToken, k="query", r=p.name, t=st.cfg.key, q=qh)
                pinned, offset = int(tok["v"]), int(tok["o"])
            except (BadToken, KeyError, TypeError, ValueError):
                raise _bad("invalid pageToken") from None
        elif body.refreshToken:
            try:
                tok = signer.read_token(body.refreshToken, k="refresh", r=p.name, t=st.cfg.key)
                pinned = int(tok["v"])
            except (BadToken, KeyError, TypeError, ValueError):
                raise _bad("invalid refreshToken") from None
        base = base_url(request)
        expires = url_expiry()

        if body.startingVersion is not None:
            return query_range(st, caps, body, base, expires, p, qh, pinned, offset)

        if body.timestamp is not None:
            check_ts(body.timestamp)
            version = guard(st.log.version_at_timestamp, body.timestamp)
        else:
            version = body.version if body.version is not None else pinned
        if version is not None and version < st.cfg.start_version and time_travel:
            raise _bad(f"version {version} is before the table's shared start version {st.cfg.start_version}")
        snap = guard(st.snapshot, version)
        fmt = st.choose_format(caps, snap)
        keep = file_filter(st, snap, body)
        tt_version = snap.version if (body.version is not None or body.timestamp is not None) else None
        tt_ts = snap.timestamp if tt_version is not None else None
        limit = body.limitHint if keep is None else None
        # fail fast on files outside the table before any byte is sent
        guard(st.check_paths, snap)

        paginate = body.maxFiles is not None or body.pageToken is not None
        end_stream = paginate or caps.include_end_stream_action or bool(body.includeRefreshToken)
        page_size = min(body.maxFiles or config.query_table_page_size_limit, config.query_table_page_size_limit) \
            if paginate else None

        def lines() -> Iterator[str]:
            yield st.protocol_line(fmt, snap)
            yield st.metadata_line(fmt, snap, version=tt_version)
            whole = keep is None and not paginate and tt_version is None
            if whole and limit is not None:
                yield from st.whole_lines(snap, fmt, base, expires, limit)
                if end_stream:
                    yield end_stream_line(0, False)
                return
            if whole and limit is None:
                ckey = (snap.version, fmt, base, expires)
                cached = st.cached_lines(ckey)
                if cached is not None:
                    yield from cached
                else:
                    rendered = []
                    for line in st.whole_lines(snap, fmt, base, expires):
                        rendered.append(line)
                        yield line
                    st.store_lines(ckey, rendered)
                if end_stream:
                    yield end_stream_line(0, False)
                return
            rows: Iterator[dict] = iter_file_rows(snap, fmt)
            if keep is not None:
                rows = (r for r in rows if keep(r))
            rows = limited(rows, limit)
            if paginate:
                rows = itertools.islice(rows, offset, None)
            n = 0
            more = False
            for r in rows:
                if page_size is not None and n >= page_size:
                    more = True
                    break
                yield st.file_line(fmt, base, r, expires, version=tt_version, timestamp=tt_ts)
                n += 1
            if end_stream:
                yield end_stream_line(n, more)

        def end_stream_line(n: int, more: bool) -> str:
            esa: dict[str, Any] = {"minUrlExpirationTimestamp": expires * 1000}
            if more:
                esa["nextPageToken"] = signer.token({"k": "query", "r": p.name, "t": st.cfg.key, "q": qh,
                                                     "v": snap.version, "o": offset + n})
            if body.includeRefreshToken:
                esa["refreshToken"] = signer.token({"k": "refresh", "r": p.name, "t": st.cfg.key,
                                                    "v": snap.version, "exp": now_s() + 86400})
            return dumps({"endStreamAction": esa})

        headers = {"Delta-Table-Version": str(snap.version), **caps_headers(fmt, end_stream)}
        return StreamingResponse(_batched(lines()), media_type=NDJSON, headers=headers)

    def query_range(st: SharedTable, caps: Capabilities, body: QueryBody, base: str, expires: int,
                    p: Principal, qh: str, pinned: Optional[int], offset: int):
        start = body.startingVersion
        if start < st.cfg.start_version:
            raise _bad(f"startingVersion {start} is before the table's shared start version {st.cfg.start_version}")
        latest = guard(st.latest_version)
        if start > latest:
            raise _bad(f"startingVersion {start} is after the latest version {latest}")
        end = min(body.endingVersion if body.endingVersion is not None else latest, latest)
        if pinned is not None:
            end = min(end, pinned)
        start_snap = guard(st.snapshot, start)
        fmt = st.choose_format(caps, start_snap)
        from ..read.changes import table_changes

        changes = guard(lambda: list(table_changes(st.log, start, end)))
        paginate = body.maxFiles is not None or body.pageToken is not None
        end_stream = paginate or caps.include_end_stream_action or bool(body.includeRefreshToken)
        page_size = min(body.maxFiles or config.query_table_page_size_limit, config.query_table_page_size_limit) \
            if paginate else None

        def file_lines() -> Iterator[str]:
            for vc in changes:
                if vc.metadata is not None and vc.version != start:
                    yield st.metadata_line(fmt, start_snap, metadata=vc.metadata, version=vc.version, with_size=False)
                yield from data_change_lines(st, fmt, base, vc, expires)

        head = [st.protocol_line(fmt, start_snap), st.metadata_line(fmt, start_snap, version=start, with_size=False)]
        lines = paged_lines(head, itertools.islice(file_lines(), offset, None) if paginate else file_lines(),
                            page_size, end_stream, expires,
                            lambda n: signer.token({"k": "query", "r": p.name, "t": st.cfg.key, "q": qh,
                                                    "v": end, "o": offset + n}))
        headers = {"Delta-Table-Version": str(start), **caps_headers(fmt, end_stream)}
        return StreamingResponse(_batched(lines), media_type=NDJSON, headers=headers)

    # --- changes ----------------------------------------------------------------------------------
    @app.get(prefix + "/shares/{share}/schemas/{schema}/tables/{table}/changes", tags=["table"])
    def get_table_changes(share: str, schema: str, table: str, request: Request,
                          startingVersion: Optional[int] = Query(None, ge=0),
                          startingTimestamp: Optional[str] = Query(None, max_length=64),
                          endingVersion: Optional[int] = Query(None, ge=0),
                          endingTimestamp: Optional[str] = Query(None, max_length=64),
                          includeHistoricalMetadata: Optional[str] = Query(None, max_length=8),
                          maxFiles: Optional[int] = Query(None, ge=1),
                          pageToken: Optional[str] = Query(None, max_length=4096),
                          delta_sharing_capabilities: Optional[str] = Header(None, max_length=1024),
                          p: Principal = Depends(principal)):
        st = find_table(p, share, schema, table)
        caps = Capabilities.parse(delta_sharing_capabilities)
        historical = _bool_param(includeHistoricalMetadata)
        if (startingVersion is None) == (startingTimestamp is None):
            raise _bad("give exactly one of startingVersion and startingTimestamp")
        if endingVersion is not None and endingTimestamp is not None:
            raise _bad("give at most one of endingVersion and endingTimestamp")
        if not st.cfg.history_shared:
            raise _bad("reading changes needs the table's history to be shared")
        for ts in (startingTimestamp, endingTimestamp):
            if ts is not None:
                check_ts(ts)
        latest = guard(st.latest_version)
        start = startingVersion if startingVersion is not None else guard(version_at_or_after, st, startingTimestamp)
        if endingTimestamp is not None:
            end = guard(version_at_or_before, st, endingTimestamp)
        else:
            end = endingVersion if endingVersion is not None else latest
        end = min(end, latest)
        if start < st.cfg.start_version:
            raise _bad(f"startingVersion {start} is before the table's shared start version {st.cfg.start_version}")
        if start > latest:
            raise _bad(f"startingVersion {start} is after the latest version {latest}")
        if start > end:
            raise _bad(f"the starting version {start} is after the ending version {end}")
        qh = hashlib.sha256(f"{start}:{end}:{historical}".encode()).hexdigest()[:24]
        offset = 0
        if pageToken:
            try:
                tok = signer.read_token(pageToken, k="changes", r=p.name, t=st.cfg.key, q=qh)
                offset = int(tok["o"])
            except (BadToken, KeyError, TypeError, ValueError):
                raise _bad("invalid pageToken") from None
        changes = guard(check_cdf_enabled, st.log, start, end)
        start_snap = guard(st.snapshot, start)
        end_snap = guard(st.snapshot, end)
        fmt = st.choose_format(caps, end_snap)
        base = base_url(request)
        expires = url_expiry()
        paginate = maxFiles is not None or pageToken is not None
        end_stream = paginate or caps.include_end_stream_action

        def file_lines() -> Iterator[str]:
            for vc in changes:
                if historical and vc.metadata is not None and vc.version != start:
                    yield st.metadata_line(fmt, start_snap, metadata=vc.metadata, version=vc.version, with_size=False)
                if vc.cdcs:
                    for c in vc.cdcs:
                        yield st.file_line(fmt, base, c, expires, wrapper="cdf", version=vc.version,
                                           timestamp=vc.timestamp, action="cdc")
                    continue
                yield from data_change_lines(st, fmt, base, vc, expires)

        head = [st.protocol_line(fmt, end_snap),
                st.metadata_line(fmt, start_snap, version=start if historical else None, with_size=False)]
        lines = paged_lines(head, itertools.islice(file_lines(), offset, None) if paginate else file_lines(),
                            maxFiles, end_stream, expires,
                            lambda n: signer.token({"k": "changes", "r": p.name, "t": st.cfg.key,
                                                    "q": qh, "o": offset + n}))
        headers = {"Delta-Table-Version": str(start), **caps_headers(fmt, end_stream)}
        return StreamingResponse(_batched(lines), media_type=NDJSON, headers=headers)

    # --- the server's own file URLs -------------------------------------------------------------------
    def _deny() -> JSONResponse:
        return _err(403, "PERMISSION_DENIED", "the file URL is invalid or has expired")

    def serve_file(table_key: str, rel_b64: str, request: Request,
                 x_amz_expires: Optional[str] = Query(None, alias="X-Amz-Expires", max_length=32),
                 x_amz_signature: Optional[str] = Query(None, alias="X-Amz-Signature", max_length=128),
                 range_header: Optional[str] = Header(None, alias="Range", max_length=256)):
        if len(table_key) > 64 or len(rel_b64) > 8192:
            return _deny()
        try:
            rel = signer.verify_file(table_key, rel_b64, x_amz_expires or "", x_amz_signature or "")
        except BadToken:
            return _deny()
        st = tables.get(table_key)
        if st is None or st.is_s3 or not rel_ok(rel):
            return _deny()
        root = st.log.table_root
        full = os.path.join(root, *rel.split("/"))
        real_root = os.path.realpath(root)
        real = os.path.realpath(full)
        if not real.startswith(real_root + os.sep):
            return _deny()
        try:
            size = os.path.getsize(real)
        except OSError:
            return _err(404, "RESOURCE_DOES_NOT_EXIST", "the file no longer exists")
        headers = {"Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        start, end = 0, size - 1
        status = 200
        if range_header:
            rng = _parse_range(range_header, size)
            if rng is None:
                return Response(status_code=416, headers={"Content-Range": f"bytes */{size}"})
            start, end = rng
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        length = max(0, end - start + 1)
        headers["Content-Length"] = str(length)
        if request.method == "HEAD":
            return Response(status_code=status, headers=headers)
        # Read and sent in 1 MB pieces: on loopback (uvloop + httptools) 1-4 MB pieces send ~1.3 GB/s
        # and reading a 35 MB range whole several times slower; a client that drops the body
        # (fsspec's `exists` is a GET it never reads) costs a piece or two.
        if length <= FILE_CHUNK:
            with open(real, "rb") as f:
                f.seek(start)
                data = f.read(length)
            return Response(data, status_code=status, headers=headers)

        def chunks() -> Iterator[bytes]:
            with open(real, "rb") as f:
                f.seek(start)
                left = length
                while left > 0:
                    b = f.read(min(FILE_CHUNK, left))
                    if not b:
                        break
                    left -= len(b)
                    yield b
        return StreamingResponse(chunks(), status_code=status, headers=headers)

    @app.get(prefix + "/files/{table_key}/{rel_b64}", tags=["files"], operation_id="get_file")
    def get_file(table_key: str, rel_b64: str, request: Request,
                 x_amz_expires: Optional[str] = Query(None, alias="X-Amz-Expires", max_length=32),
                 x_amz_signature: Optional[str] = Query(None, alias="X-Amz-Signature", max_length=128),
                 range_header: Optional[str] = Header(None, alias="Range", max_length=256)):
        """A data or deletion-vector file through a signed URL this server issued (Range supported)."""
        return serve_file(table_key, rel_b64, request, x_amz_expires, x_amz_signature, range_header)

    @app.head(prefix + "/files/{table_key}/{rel_b64}", tags=["files"], operation_id="head_file")
    def head_file(table_key: str, rel_b64: str, request: Request,
                  x_amz_expires: Optional[str] = Query(None, alias="X-Amz-Expires", max_length=32),
                  x_amz_signature: Optional[str] = Query(None, alias="X-Amz-Signature", max_length=128),
                  range_header: Optional[str] = Header(None, alias="Range", max_length=256)):
        return serve_file(table_key, rel_b64, request, x_amz_expires, x_amz_signature, range_header)

    return app


def _parse_range(h: str, size: int) -> tuple[int, int] | None:
    h = h.strip()
    if not h.lower().startswith("bytes=") or "," in h:
        return None
    spec = h[6:].strip()
    a, _, b = spec.partition("-")
    try:
        if a == "":
            n = int(b)
            if n <= 0:
                return None
            return max(0, size - n), size - 1
        start = int(a)
        end = int(b) if b else size - 1
    except ValueError:
        return None
    if start < 0 or start >= size or end < start:
        return None
    return start, min(end, size - 1)


def serve(config: ServerConfig, host: str | None = None, port: int | None = None) -> None:
    import sys

    import uvicorn

    if not config.bearer_token and not (config.recipients_file and os.path.exists(config.recipients_file)):
        sys.stderr.write("warning: no authorization.bearerToken and no recipients: every request is allowed "
                         "(add a recipient with `tahoe sharing recipient add`)\n")

    # loop/http "auto": uvloop and httptools (dependencies) when installed, else asyncio and h11
    uvicorn.run(create_app(config), host=host or config.host, port=port or config.port,
                log_level=os.environ.get("TAHOE_SHARING_LOG_LEVEL", "warning"))

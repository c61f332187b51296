"""Table routes (spec "Query Table Version", "Query Table Metadata", "Read Data from a Table",
"Get Query Info", "Read Change Data Feed from a Table"): `/version` (and HEAD), `/metadata`,
`/query` (predicate hints, limitHint, time travel, startingVersion ranges with historical
protocols, pagination pinned to a version, refresh tokens, endStreamAction, asynchronous queries
with `asyncquery=true` and an idempotencyKey — see `queries`), `/queries/{queryId}` and
`/changes` (historical metadata and protocols), in parquet or delta response format as the
`delta-sharing-capabilities` header negotiates, file ids hashed as `fileidhash` asks (echoed back).
Every response carries `Delta-Table-Version`.

Responses stream NDJSON in batches of lines; the file URLs in them are bound to the caller. A
failure after the first lines went out is told in-band, as an endStreamAction's `errorMessage`,
to clients that asked `includeendstreamaction=true`; to others the connection is dropped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import logging
from typing import Any, Callable, Iterable, Iterator, Optional

from fastapi import APIRouter, Depends, Header, Path, Query, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ConfigDict

from ...read.changes import check_cdf_enabled, table_changes
from ..auth import Principal
from ..context import AUDIT_KEY, ServerContext, current_principal, get_context
from ..ops import audit_fields
from ..errors import SharingError, bad_request
from ..predicates import FileContext, parse_json_predicate, parse_sql_predicates
from ..queries import PENDING, body_digest
from ..signing import BadToken, FileUrls
from ..tables import Capabilities, SharedTable, dumps, iter_file_rows, now_s
from ...protocol import column_mapping

__all__ = ["router", "QueryBody", "QueryInfoBody"]

router = APIRouter(tags=["table"])
log = logging.getLogger("tahoe.sharing")
POLL_WAIT_SECONDS = 0.5   # how long Get Query Info waits for a running query before answering "pending"

NDJSON = "application/x-ndjson; charset=utf-8"
BATCH_LINES = 1000
TABLE = "/shares/{share}/schemas/{schema}/tables/{table}"


class QueryBody(BaseModel):
    """Body of `/query` (every field optional). `idempotencyKey` is required with
    `asyncquery=true`; `includeHistoricalProtocol` matters for `startingVersion` ranges in delta
    format."""
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
    idempotencyKey: Optional[str] = None
    includeHistoricalProtocol: Optional[bool] = None


class QueryInfoBody(BaseModel):
    """Body of `POST …/queries/{queryId}` (Get Query Info): the page to read."""
    model_config = ConfigDict(extra="allow")
    maxFiles: Optional[int] = None
    pageToken: Optional[str] = None


def _bool_param(v: Optional[str]) -> bool:
    if v is None or v == "":
        return False
    s = v.strip().lower()
    if s in ("true", "1"):
        return True
    if s in ("false", "0"):
        return False
    raise bad_request(f"not a boolean: {v!r}")


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


def _caps_headers(caps: Capabilities, fmt: str, end_stream: bool = False) -> dict:
    h = {"delta-sharing-capabilities": caps.response_header(fmt, end_stream)}
    if caps.file_id_hash is not None:
        h["fileidhash"] = caps.file_id_hash
    return h


def _ndjson(lines: Iterable[str], version: int, caps: Capabilities, fmt: str, end_stream: bool) -> StreamingResponse:
    headers = {"Delta-Table-Version": str(version), **_caps_headers(caps, fmt, end_stream)}
    return StreamingResponse(_batched(lines), media_type=NDJSON, headers=headers)


def data_change_lines(st: SharedTable, fmt: str, urls: FileUrls, vc, scheme: str) -> Iterator[str]:
    """A version's add and remove lines that change data (`dataChange=false` rearrangements such
    as compaction are left out), with the version and its commit timestamp."""
    for kind, actions in (("add", vc.adds), ("remove", vc.removes)):
        for a in actions:
            if a.get("dataChange", True):
                yield st.file_line(fmt, urls, a, wrapper=kind, version=vc.version, timestamp=vc.timestamp,
                                   action=kind, id_scheme=scheme)


def paged_lines(ctx: ServerContext, st: SharedTable, head: list[str], files: Iterable[str], page_size: int | None,
                end_stream: bool, error_in_band: bool, expires: int, next_token: Callable[[int], str],
                extra: Optional[dict] = None, audit: Optional[dict] = None) -> Iterator[str]:
    """The head lines (protocol, metaData), then at most `page_size` file lines, then — only when
    the client asked for one — an endStreamAction, with a token for the next page when more lines
    remain (`next_token(number of file lines on this page)`) and the `extra` members (a refresh
    token).

    A failure after the head went out (a file outside the table found in a later version, storage
    refusing to sign, ...) cannot change the HTTP status any more: with `error_in_band` (the client
    asked `includeendstreamaction=true`) the response ends with an endStreamAction carrying the
    `errorMessage` (no next page); otherwise the connection is dropped mid-response, so a client
    never takes a partial answer for a whole one (and clients that do not expect the action never
    see one)."""
    yield from head
    n = 0
    more = False
    if audit is not None:
        audit["files"] = 0
    try:
        for line in files:
            if page_size is not None and n >= page_size:
                more = True
                break
            yield line
            n += 1
            if audit is not None:
                audit["files"] = n
    except Exception as e:
        if not error_in_band:
            raise
        yield dumps({"endStreamAction": {"errorMessage": stream_error_message(ctx, st, e),
                                         "minUrlExpirationTimestamp": expires * 1000}})
        return
    if end_stream:
        esa: dict[str, Any] = {"minUrlExpirationTimestamp": expires * 1000}
        if more:
            esa["nextPageToken"] = next_token(n)
        if extra:
            esa.update(extra)
        yield dumps({"endStreamAction": esa})


def stream_error_message(ctx: ServerContext, st: SharedTable, e: Exception) -> str:
    """What a recipient is told of a failure in the middle of a response: a protocol error's code
    and message (storage locations taken out), anything else only as an internal error (logged)."""
    if isinstance(e, SharingError):
        return f"{e.code}: {ctx.public(st, e.message)}"
    try:   # the log core's errors, mapped as they are before a response starts
        ctx.guard(st, _raise, e)
    except SharingError as mapped:
        if mapped.status < 500:
            return f"{mapped.code}: {mapped.message}"
    except Exception:
        pass
    log.error("query of %s failed mid-response", ctx.shared_name(st.cfg), exc_info=e)
    return "INTERNAL_ERROR: the server failed while sending the response"


def _raise(e: Exception):
    raise e


def _page_size(ctx: ServerContext, max_files: Optional[int]) -> int:
    """Files per page: what the client asked, at most the server's queryTablePageSizeLimit."""
    limit = ctx.config.query_table_page_size_limit
    return min(max_files or limit, limit)


# --- version and metadata ---------------------------------------------------------------------------
def _table_version(ctx: ServerContext, st: SharedTable, starting_timestamp: Optional[str]) -> int:
    if starting_timestamp is not None:
        ctx.check_timestamp(starting_timestamp)
        v = ctx.guard(st, ctx.version_at_or_after, st, starting_timestamp)
        return max(v, st.cfg.start_version)
    return ctx.guard(st, st.latest_version)


@router.get(TABLE + "/version")
def get_table_version(share: str, schema: str, table: str,
                      startingTimestamp: Optional[str] = Query(None, max_length=64),
                      p: Principal = Depends(current_principal), ctx: ServerContext = Depends(get_context)):
    st = ctx.find_table(p, share, schema, table)
    v = _table_version(ctx, st, startingTimestamp)
    return Response(status_code=200, headers={"Delta-Table-Version": str(v)})


@router.head(TABLE)
def head_table_version(share: str, schema: str, table: str, p: Principal = Depends(current_principal),
                       ctx: ServerContext = Depends(get_context)):
    st = ctx.find_table(p, share, schema, table)
    return Response(status_code=200, headers={"Delta-Table-Version": str(ctx.guard(st, st.latest_version))})


@router.get(TABLE + "/metadata")
def get_table_metadata(share: str, schema: str, table: str,
                       delta_sharing_capabilities: Optional[str] = Header(None, max_length=1024),
                       p: Principal = Depends(current_principal), ctx: ServerContext = Depends(get_context)):
    st = ctx.find_table(p, share, schema, table)
    caps = Capabilities.parse(delta_sharing_capabilities)
    snap = ctx.guard(st, st.snapshot)
    fmt = st.choose_format(caps, snap)
    body = st.protocol_line(fmt, snap) + "\n" + ctx.guard(st, st.metadata_line, fmt, snap) + "\n"
    return Response(body, media_type=NDJSON, headers={"Delta-Table-Version": str(snap.version),
                                                      **_caps_headers(caps, fmt)})


# --- query ------------------------------------------------------------------------------------------
def _query_hash(body: QueryBody) -> str:
    d = body.model_dump(exclude={"pageToken", "maxFiles", "refreshToken", "includeRefreshToken", "idempotencyKey"})
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:24]


def _file_filter(ctx: ServerContext, snap, body: QueryBody) -> Optional[Callable[[dict], bool]]:
    """A predicate over file rows from the request's hints (those the config lets the server
    evaluate); None when nothing is to be filtered. Hints that do not parse filter nothing."""
    preds = []
    if ctx.config.evaluate_json_predicate_hints and body.jsonPredicateHints is not None:
        pj = parse_json_predicate(body.jsonPredicateHints)
        if pj is not None:
            preds.append(pj)
    if ctx.config.evaluate_predicate_hints and body.predicateHints:
        try:
            ps = parse_sql_predicates(body.predicateHints, snap.schema)
        except Exception:
            ps = None
        if ps is not None:
            preds.append(ps)
    if not preds:
        return None

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
        fc = FileContext(row.get("partitionValues"), stats, physical, pcols)
        return all(pr.may_match(fc) for pr in preds)
    return keep


def _limited(rows: Iterator[dict], limit: Optional[int]) -> Iterator[dict]:
    """Rows until their summed numRecords reach `limit` (files without stats count 0)."""
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


def _check_query(st: SharedTable, body: QueryBody) -> bool:
    """Validate the body's arguments; True when it reads history (a version, a timestamp or a
    version range)."""
    if sum(x is not None for x in (body.version, body.timestamp, body.startingVersion)) > 1:
        raise bad_request("give at most one of version, timestamp and startingVersion")
    for name in ("version", "startingVersion", "endingVersion", "limitHint"):
        v = getattr(body, name)
        if v is not None and v < 0:
            raise bad_request(f"{name} must be non-negative")
    if body.maxFiles is not None and body.maxFiles <= 0:
        raise bad_request("maxFiles must be positive")
    if body.endingVersion is not None and body.startingVersion is None:
        raise bad_request("endingVersion needs startingVersion")
    if body.startingVersion is not None and body.endingVersion is not None \
            and body.startingVersion > body.endingVersion:
        raise bad_request("startingVersion is after endingVersion")
    time_travel = body.version is not None or body.timestamp is not None or body.startingVersion is not None
    if time_travel and not st.cfg.history_shared:
        raise bad_request("reading a version, a timestamp or a version range needs the table's history to be shared")
    return time_travel


class Answer:
    """A `/query` answer before its file URLs are signed: the `Delta-Table-Version` header, the
    response format, the head lines (protocol, metaData) and the other lines from an offset for a
    response's URL signer. `pin` is the version page tokens pin; `refresh_version` the snapshot a
    refresh token pins (snapshot answers only). `materialize()` does the expensive part at once
    (what an asynchronous query runs in the background), so that later reads only sign URLs."""
    version: int
    fmt: str
    head: list[str]
    pin: int
    refresh_version: Optional[int] = None

    def lines(self, urls: FileUrls, offset: int, paged: bool) -> Iterator[str]:
        raise NotImplementedError

    def materialize(self) -> "Answer":
        return self


class SnapshotAnswer(Answer):
    """The files of one snapshot (latest, or time travel), pruned by the hints and limitHint."""

    def __init__(self, st: SharedTable, snap, fmt: str, scheme: str, keep, limit: Optional[int],
                 tt_version: Optional[int], tt_ts: Optional[int], head: list[str]):
        self.st, self.snap, self.fmt, self.scheme = st, snap, fmt, scheme
        self.keep, self.limit, self.tt_version, self.tt_ts = keep, limit, tt_version, tt_ts
        self.version = self.pin = self.refresh_version = snap.version
        self.head = head
        self.rows: Optional[list[dict]] = None

    def _rows(self) -> Iterator[dict]:
        rows: Iterator[dict] = iter_file_rows(self.snap, self.fmt)
        if self.keep is not None:
            rows = (r for r in rows if self.keep(r))
        return _limited(rows, self.limit)

    def materialize(self) -> "SnapshotAnswer":
        self.rows = list(self._rows())
        return self

    def lines(self, urls: FileUrls, offset: int, paged: bool) -> Iterator[str]:
        st, snap, fmt = self.st, self.snap, self.fmt
        whole = self.rows is None and self.keep is None and not paged and self.tt_version is None
        if whole and self.limit is not None:
            yield from st.whole_lines(snap, fmt, urls, self.limit, self.scheme)
        elif whole:
            ckey = (snap.version, fmt, self.scheme, urls.base, urls.expires, urls.holder)
            cached = st.cached_lines(ckey)
            if cached is not None:
                yield from cached
            else:
                rendered = []
                for line in st.whole_lines(snap, fmt, urls, scheme=self.scheme):
                    rendered.append(line)
                    yield line
                st.store_lines(ckey, rendered)
        else:
            rows = self.rows if self.rows is not None else self._rows()
            for r in itertools.islice(rows, offset, None):
                yield st.file_line(fmt, urls, r, version=self.tt_version, timestamp=self.tt_ts, id_scheme=self.scheme)


class RangeAnswer(Answer):
    """The data changes of versions start..end (`startingVersion` queries, for streaming), with
    the metaData — and, when asked in delta format, the protocol — of later versions that change
    them."""

    def __init__(self, st: SharedTable, start_snap, changes: list, fmt: str, scheme: str, start: int, end: int,
                 historical_protocol: bool, head: list[str]):
        self.st, self.start_snap, self.changes, self.fmt, self.scheme = st, start_snap, changes, fmt, scheme
        self.start, self.historical_protocol = start, historical_protocol
        self.version, self.pin, self.head = start, end, head

    def lines(self, urls: FileUrls, offset: int, paged: bool) -> Iterator[str]:
        return itertools.islice(version_lines(self.st, self.fmt, urls, self.changes, self.start_snap, self.start,
                                              self.scheme, True, self.historical_protocol), offset, None)


def version_lines(st: SharedTable, fmt: str, urls: FileUrls, changes: list, start_snap, start: int, scheme: str,
                  metadata: bool, protocols: bool, cdf: bool = False) -> Iterator[str]:
    """The lines of versions after the head, in order: per version its protocol (`protocols`) and
    metaData (`metadata`) when it changes them, then its data files (cdc files where the version
    has them and `cdf`, else its data-changing adds and removes)."""
    for vc in changes:
        if protocols and vc.protocol is not None and vc.version != start:
            yield st.protocol_line(fmt, start_snap, protocol=vc.protocol, version=vc.version)
        if metadata and vc.metadata is not None and vc.version != start:
            yield st.metadata_line(fmt, start_snap, metadata=vc.metadata, version=vc.version, with_size=False)
        if cdf and vc.cdcs:
            for c in vc.cdcs:
                yield st.file_line(fmt, urls, c, wrapper="cdf", version=vc.version, timestamp=vc.timestamp,
                                   action="cdc", id_scheme=scheme)
            continue
        yield from data_change_lines(st, fmt, urls, vc, scheme)


def _answer(ctx: ServerContext, st: SharedTable, caps: Capabilities, body: QueryBody, pinned: Optional[int],
            time_travel: bool) -> Answer:
    """The answer to a (validated) query: the snapshot or version range loaded, the format chosen,
    the files selected lazily."""
    if body.startingVersion is not None:
        return _range_answer(ctx, st, caps, body, pinned)
    if body.timestamp is not None:
        ctx.check_timestamp(body.timestamp)
        version = ctx.guard(st, st.log.version_at_timestamp, body.timestamp)
    else:
        version = body.version if body.version is not None else pinned
    if version is not None and version < st.cfg.start_version and time_travel:
        raise bad_request(f"version {version} is before the table's shared start version {st.cfg.start_version}")
    snap = ctx.guard(st, st.snapshot, version)
    fmt = st.choose_format(caps, snap)
    keep = _file_filter(ctx, snap, body)
    tt_version = snap.version if (body.version is not None or body.timestamp is not None) else None
    tt_ts = snap.timestamp if tt_version is not None else None
    # fail fast (before any byte is sent) on files outside the table and unreadable metadata
    ctx.guard(st, st.check_paths, snap)
    head = [st.protocol_line(fmt, snap), ctx.guard(st, st.metadata_line, fmt, snap, version=tt_version)]
    return SnapshotAnswer(st, snap, fmt, caps.id_scheme(fmt), keep, body.limitHint if keep is None else None,
                          tt_version, tt_ts, head)


def _range_answer(ctx: ServerContext, st: SharedTable, caps: Capabilities, body: QueryBody,
                  pinned: Optional[int]) -> RangeAnswer:
    start = body.startingVersion
    if start < st.cfg.start_version:
        raise bad_request(f"startingVersion {start} is before the table's shared start version {st.cfg.start_version}")
    latest = ctx.guard(st, st.latest_version)
    if start > latest:
        raise bad_request(f"startingVersion {start} is after the latest version {latest}")
    end = min(body.endingVersion if body.endingVersion is not None else latest, latest)
    if pinned is not None:
        end = min(end, pinned)
    start_snap = ctx.guard(st, st.snapshot, start)
    fmt = st.choose_format(caps, start_snap)
    changes = ctx.guard(st, lambda: list(table_changes(st.log, start, end)))
    # historical protocols exist in delta format only (parquet lines have no room for them)
    historical = bool(body.includeHistoricalProtocol) and fmt == "delta"
    head = [st.protocol_line(fmt, start_snap, version=start if historical else None),
            ctx.guard(st, st.metadata_line, fmt, start_snap, version=start, with_size=False)]
    return RangeAnswer(st, start_snap, changes, fmt, caps.id_scheme(fmt), start, end, historical, head)


def _respond(ctx: ServerContext, p: Principal, st: SharedTable, caps: Capabilities, ans: Answer, urls: FileUrls,
             max_files: Optional[int], paged: bool, offset: int, include_refresh: bool,
             next_token: Callable[[int], str], audit: Optional[dict] = None) -> StreamingResponse:
    """The NDJSON response of an answer (one page of it when `paged`)."""
    end_stream = paged or caps.include_end_stream_action or include_refresh
    extra = None
    if include_refresh and ans.refresh_version is not None:
        extra = {"refreshToken": ctx.signer.token({"k": "refresh", "r": p.id, "t": st.cfg.key,
                                                   "v": ans.refresh_version,
                                                   "exp": now_s() + ctx.config.refresh_token_ttl_seconds})}
    lines = paged_lines(ctx, st, ans.head, ans.lines(urls, offset, paged), _page_size(ctx, max_files) if paged else None,
                        end_stream, caps.include_end_stream_action, urls.expires, next_token, extra, audit)
    return _ndjson(lines, ans.version, caps, ans.fmt, end_stream)


@router.post(TABLE + "/query")
def query_table(share: str, schema: str, table: str, request: Request, body: Optional[QueryBody] = None,
                delta_sharing_capabilities: Optional[str] = Header(None, max_length=1024),
                fileidhash: Optional[str] = Header(None, max_length=32),
                p: Principal = Depends(current_principal), ctx: ServerContext = Depends(get_context)):
    st = ctx.find_table(p, share, schema, table)
    body = body or QueryBody()
    audit_fields(request, startingVersion=body.startingVersion, endingVersion=body.endingVersion,
                 timestamp=body.timestamp, limitHint=body.limitHint,
                 predicateHints=json.dumps(body.predicateHints) if body.predicateHints else None,
                 jsonPredicateHints=body.jsonPredicateHints)
    caps = Capabilities.parse(delta_sharing_capabilities, fileidhash)
    time_travel = _check_query(st, body)
    qh = _query_hash(body)
    pinned = None
    offset = 0
    if body.pageToken:
        if caps.async_query:
            raise bad_request("pageToken is not used to submit an asynchronous query: read the pages of its answer "
                              "with Get Query Info (POST .../queries/{queryId})")
        try:
            tok = ctx.signer.read_token(body.pageToken, k="query", r=p.id, t=st.cfg.key, q=qh)
            pinned, offset = int(tok["v"]), int(tok["o"])
        except (BadToken, KeyError, TypeError, ValueError):
            raise bad_request("invalid pageToken") from None
    elif body.refreshToken:
        try:
            tok = ctx.signer.read_token(body.refreshToken, k="refresh", r=p.id, t=st.cfg.key)
            pinned = int(tok["v"])
        except (BadToken, KeyError, TypeError, ValueError):
            raise bad_request("invalid refreshToken") from None
    if caps.async_query:
        return _submit(ctx, request, p, st, caps, body, pinned, time_travel)
    ans = _answer(ctx, st, caps, body, pinned, time_travel)
    return _respond(ctx, p, st, caps, ans, ctx.file_urls(request, p), body.maxFiles,
                    body.maxFiles is not None or body.pageToken is not None, offset, bool(body.includeRefreshToken),
                    lambda n: ctx.signer.token({"k": "query", "r": p.id, "t": st.cfg.key, "q": qh,
                                                "v": ans.pin, "o": offset + n, "exp": ctx.page_token_expiry()}),
                    request.scope.get(AUDIT_KEY))


# --- asynchronous queries -----------------------------------------------------------------------------
def _spec_objects(spec: dict) -> tuple[QueryBody, Capabilities]:
    """The request body and capabilities an asynchronous query was submitted with."""
    c = spec["caps"]
    caps = Capabilities(formats=list(c["formats"]), reader_features=set(c["reader_features"]),
                        include_end_stream_action=bool(c["include_end_stream_action"]), async_query=c["async_query"],
                        file_id_hash=c["file_id_hash"])
    return QueryBody(**spec["body"]), caps


def _rebuild(ctx: ServerContext, st: SharedTable) -> Callable[[dict], Answer]:
    """How a replica computes an asynchronous query another replica accepted: from its spec,
    pinned to the version it was submitted at."""
    def run(spec: dict) -> Answer:
        body, caps = _spec_objects(spec)
        return _answer(ctx, st, caps, body, spec["pinned"], spec["time_travel"]).materialize()
    return run


def _submit(ctx: ServerContext, request: Request, p: Principal, st: SharedTable, caps: Capabilities, body: QueryBody,
            pinned: Optional[int], time_travel: bool):
    """Start an asynchronous query (or find the one of the same idempotency key): its queryId
    with status pending — or, when the same key's query has already finished, its answer. The
    query is pinned to the table's version now, so that any replica computes the same answer."""
    if not body.idempotencyKey:
        raise bad_request("idempotencyKey is required for async query")
    digest = body_digest((body.model_dump(exclude={"idempotencyKey"}), caps.formats, sorted(caps.reader_features),
                          caps.file_id_hash, pinned))
    if pinned is None and body.version is None and body.timestamp is None:
        pinned = ctx.guard(st, st.latest_version)
    c = dataclasses.asdict(caps)
    c["reader_features"] = sorted(c["reader_features"])
    spec = {"body": body.model_dump(), "caps": c, "pinned": pinned, "time_travel": time_travel}
    q, new = ctx.queries.submit(p.id, st.cfg.key, digest, body.idempotencyKey, spec,
                                lambda: _answer(ctx, st, caps, body, pinned, time_travel).materialize())
    if not new and q.done():
        return _read_async(ctx, request, p, st, q, caps, QueryInfoBody())
    return _pending(ctx, st, q, caps, body, pinned)


def _pending(ctx: ServerContext, st: SharedTable, q, caps: Capabilities, body: QueryBody, pinned: Optional[int]):
    """`{"queryStatus": {"queryId", "status": "pending"}}`, with the version the query reads as far
    as it is known without running it (the answer's own header is authoritative)."""
    if body.version is not None:
        version = body.version
    elif body.startingVersion is not None:
        version = body.startingVersion
    elif pinned is not None:
        version = pinned
    else:
        version = ctx.guard(st, st.latest_version)
    line = dumps({"queryStatus": {"queryId": q.id, "status": PENDING}})
    return Response(line + "\n", media_type=NDJSON, headers={
        "Delta-Table-Version": str(version),
        "delta-sharing-capabilities": f"responseformat={caps.formats[0]};asyncquery=true"})


def _read_async(ctx: ServerContext, request: Request, p: Principal, st: SharedTable, q, caps: Capabilities,
                info: QueryInfoBody):
    """A page of a finished asynchronous query's answer, its file URLs signed now (or the error
    the query failed with)."""
    ans: Answer = ctx.guard(st, q.result)
    body, _ = _spec_objects(q.spec)
    qd = hashlib.sha256(q.id.encode()).hexdigest()[:24]
    offset = 0
    if info.pageToken:
        try:
            offset = int(ctx.signer.read_token(info.pageToken, k="async-page", r=p.id, q=qd)["o"])
        except (BadToken, KeyError, TypeError, ValueError):
            raise bad_request("invalid pageToken") from None
    max_files = info.maxFiles if info.maxFiles is not None else body.maxFiles
    return _respond(ctx, p, st, caps, ans, ctx.file_urls(request, p), max_files,
                    max_files is not None or info.pageToken is not None, offset, bool(body.includeRefreshToken),
                    lambda n: ctx.signer.token({"k": "async-page", "r": p.id, "q": qd, "o": offset + n,
                                                "exp": ctx.page_token_expiry()}),
                    request.scope.get(AUDIT_KEY))


@router.post(TABLE + "/queries/{query_id}")
def get_query_info(share: str, schema: str, table: str, request: Request,
                   query_id: str = Path(..., max_length=2048), body: Optional[QueryInfoBody] = None,
                   delta_sharing_capabilities: Optional[str] = Header(None, max_length=1024),
                   p: Principal = Depends(current_principal), ctx: ServerContext = Depends(get_context)):
    """Get Query Info: an asynchronous query's status while it runs (briefly waiting for it), then
    its answer, page by page (`maxFiles`, `pageToken`)."""
    st = ctx.find_table(p, share, schema, table)
    info = body or QueryInfoBody()
    if info.maxFiles is not None and info.maxFiles <= 0:
        raise bad_request("maxFiles must be positive")
    q = ctx.queries.get(query_id, p.id, st.cfg.key, _rebuild(ctx, st))
    body_of_query, caps = _spec_objects(q.spec)
    if Capabilities.parse(delta_sharing_capabilities).include_end_stream_action \
            and not caps.include_end_stream_action:
        caps = dataclasses.replace(caps, include_end_stream_action=True)
    if not q.done(wait=POLL_WAIT_SECONDS):
        return _pending(ctx, st, q, caps, body_of_query, q.spec.get("pinned"))
    return _read_async(ctx, request, p, st, q, caps, info)


# --- changes ----------------------------------------------------------------------------------------
@router.get(TABLE + "/changes")
def get_table_changes(share: str, schema: str, table: str, request: Request,
                      startingVersion: Optional[int] = Query(None, ge=0),
                      startingTimestamp: Optional[str] = Query(None, max_length=64),
                      endingVersion: Optional[int] = Query(None, ge=0),
                      endingTimestamp: Optional[str] = Query(None, max_length=64),
                      includeHistoricalMetadata: Optional[str] = Query(None, max_length=8),
                      includeHistoricalProtocol: Optional[str] = Query(None, max_length=8),
                      maxFiles: Optional[int] = Query(None, ge=1),
                      pageToken: Optional[str] = Query(None, max_length=4096),
                      delta_sharing_capabilities: Optional[str] = Header(None, max_length=1024),
                      fileidhash: Optional[str] = Header(None, max_length=32),
                      p: Principal = Depends(current_principal), ctx: ServerContext = Depends(get_context)):
    st = ctx.find_table(p, share, schema, table)
    audit_fields(request, startingVersion=startingVersion, endingVersion=endingVersion,
                 timestamp=startingTimestamp or endingTimestamp)
    caps = Capabilities.parse(delta_sharing_capabilities, fileidhash)
    historical = _bool_param(includeHistoricalMetadata)
    historical_protocol = _bool_param(includeHistoricalProtocol)
    if (startingVersion is None) == (startingTimestamp is None):
        raise bad_request("give exactly one of startingVersion and startingTimestamp")
    if endingVersion is not None and endingTimestamp is not None:
        raise bad_request("give at most one of endingVersion and endingTimestamp")
    if not st.cfg.history_shared:
        raise bad_request("reading changes needs the table's history to be shared")
    for ts in (startingTimestamp, endingTimestamp):
        if ts is not None:
            ctx.check_timestamp(ts)
    latest = ctx.guard(st, st.latest_version)
    start = startingVersion if startingVersion is not None else \
        ctx.guard(st, ctx.version_at_or_after, st, startingTimestamp)
    if endingTimestamp is not None:
        end = ctx.guard(st, ctx.version_at_or_before, st, endingTimestamp)
    else:
        end = endingVersion if endingVersion is not None else latest
    end = min(end, latest)
    if start < st.cfg.start_version:
        raise bad_request(f"startingVersion {start} is before the table's shared start version {st.cfg.start_version}")
    if start > latest:
        raise bad_request(f"startingVersion {start} is after the latest version {latest}")
    if start > end:
        raise bad_request(f"the starting version {start} is after the ending version {end}")
    qh = hashlib.sha256(f"{start}:{end}:{historical}:{historical_protocol}:{caps.file_id_hash}".encode()).hexdigest()[:24]
    offset = 0
    if pageToken:
        try:
            tok = ctx.signer.read_token(pageToken, k="changes", r=p.id, t=st.cfg.key, q=qh)
            offset = int(tok["o"])
        except (BadToken, KeyError, TypeError, ValueError):
            raise bad_request("invalid pageToken") from None
    changes = ctx.guard(st, check_cdf_enabled, st.log, start, end)
    start_snap = ctx.guard(st, st.snapshot, start)
    end_snap = ctx.guard(st, st.snapshot, end)
    fmt = st.choose_format(caps, end_snap)
    scheme = caps.id_scheme(fmt)
    # historical protocols exist in delta format only; then the head is the starting version's
    protocols = historical_protocol and fmt == "delta"
    urls = ctx.file_urls(request, p)
    paginate = maxFiles is not None or pageToken is not None
    end_stream = paginate or caps.include_end_stream_action
    files = version_lines(st, fmt, urls, changes, start_snap, start, scheme, historical, protocols, cdf=True)
    head = [st.protocol_line(fmt, start_snap, version=start) if protocols else st.protocol_line(fmt, end_snap),
            ctx.guard(st, st.metadata_line, fmt, start_snap, version=start if historical else None, with_size=False)]
    lines = paged_lines(ctx, st, head, itertools.islice(files, offset, None) if paginate else files,
                        _page_size(ctx, maxFiles) if paginate else None, end_stream, caps.include_end_stream_action,
                        urls.expires, lambda n: ctx.signer.token({"k": "changes", "r": p.id, "t": st.cfg.key,
                                                                  "q": qh, "o": offset + n,
                                                                  "exp": ctx.page_token_expiry()}),
                        audit=request.scope.get(AUDIT_KEY))
    return _ndjson(lines, start, caps, fmt, end_stream)

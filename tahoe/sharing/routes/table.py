"""Table routes (spec "Query Table Version", "Query Table Metadata", "Read Data from a Table",
"Read Change Data Feed from a Table"): `/version` (and HEAD), `/metadata`, `/query` (predicate
hints, limitHint, time travel, startingVersion ranges, pagination pinned to a version, refresh
tokens, endStreamAction) and `/changes`, in parquet or delta response format as the
`delta-sharing-capabilities` header negotiates. Every response carries `Delta-Table-Version`.

Responses stream NDJSON in batches of lines; the file URLs in them are bound to the caller.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from typing import Any, Callable, Iterable, Iterator, Optional

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ConfigDict

from ...read.changes import check_cdf_enabled, table_changes
from ..auth import Principal
from ..context import ServerContext, current_principal, get_context
from ..errors import bad_request
from ..predicates import FileContext, parse_json_predicate, parse_sql_predicates
from ..signing import BadToken, FileUrls
from ..tables import Capabilities, SharedTable, dumps, iter_file_rows, now_s

__all__ = ["router", "QueryBody"]

router = APIRouter(tags=["table"])

NDJSON = "application/x-ndjson; charset=utf-8"
BATCH_LINES = 1000
TABLE = "/shares/{share}/schemas/{schema}/tables/{table}"


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


def _caps_headers(fmt: str, end_stream: bool = False) -> dict:
    v = f"responseformat={fmt}"
    if end_stream:
        v += ";includeendstreamaction=true"
    return {"delta-sharing-capabilities": v}


def _ndjson(lines: Iterable[str], version: int, fmt: str, end_stream: bool) -> StreamingResponse:
    headers = {"Delta-Table-Version": str(version), **_caps_headers(fmt, end_stream)}
    return StreamingResponse(_batched(lines), media_type=NDJSON, headers=headers)


def data_change_lines(st: SharedTable, fmt: str, urls: FileUrls, vc) -> Iterator[str]:
    """A version's add and remove lines that change data (`dataChange=false` rearrangements such
    as compaction are left out), with the version and its commit timestamp."""
    for kind, actions in (("add", vc.adds), ("remove", vc.removes)):
        for a in actions:
            if a.get("dataChange", True):
                yield st.file_line(fmt, urls, a, wrapper=kind, version=vc.version, timestamp=vc.timestamp,
                                   action=kind)


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
    return Response(body, media_type=NDJSON, headers={"Delta-Table-Version": str(snap.version), **_caps_headers(fmt)})


# --- query ------------------------------------------------------------------------------------------
def _query_hash(body: QueryBody) -> str:
    d = body.model_dump(exclude={"pageToken", "maxFiles", "refreshToken", "includeRefreshToken"})
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
    from ...protocol import column_mapping

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


@router.post(TABLE + "/query")
def query_table(share: str, schema: str, table: str, request: Request, body: Optional[QueryBody] = None,
                delta_sharing_capabilities: Optional[str] = Header(None, max_length=1024),
                p: Principal = Depends(current_principal), ctx: ServerContext = Depends(get_context)):
    st = ctx.find_table(p, share, schema, table)
    body = body or QueryBody()
    caps = Capabilities.parse(delta_sharing_capabilities)
    time_travel = _check_query(st, body)
    qh = _query_hash(body)
    pinned = None
    offset = 0
    if body.pageToken:
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
    urls = ctx.file_urls(request, p)

    if body.startingVersion is not None:
        return _query_range(ctx, st, caps, body, urls, p, qh, pinned, offset)

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
    limit = body.limitHint if keep is None else None
    # fail fast (before any byte is sent) on files outside the table and unreadable metadata
    ctx.guard(st, st.check_paths, snap)
    head = [st.protocol_line(fmt, snap), ctx.guard(st, st.metadata_line, fmt, snap, version=tt_version)]

    paginate = body.maxFiles is not None or body.pageToken is not None
    end_stream = paginate or caps.include_end_stream_action or bool(body.includeRefreshToken)
    page_size = _page_size(ctx, body.maxFiles) if paginate else None

    def end_stream_line(n: int, more: bool) -> str:
        esa: dict[str, Any] = {"minUrlExpirationTimestamp": urls.expires * 1000}
        if more:
            esa["nextPageToken"] = ctx.signer.token({"k": "query", "r": p.id, "t": st.cfg.key, "q": qh,
                                                     "v": snap.version, "o": offset + n})
        if body.includeRefreshToken:
            esa["refreshToken"] = ctx.signer.token({"k": "refresh", "r": p.id, "t": st.cfg.key,
                                                    "v": snap.version, "exp": now_s() + 86400})
        return dumps({"endStreamAction": esa})

    def lines() -> Iterator[str]:
        yield from head
        whole = keep is None and not paginate and tt_version is None
        if whole and limit is not None:
            yield from st.whole_lines(snap, fmt, urls, limit)
        elif whole:
            ckey = (snap.version, fmt, urls.base, urls.expires, urls.holder)
            cached = st.cached_lines(ckey)
            if cached is not None:
                yield from cached
            else:
                rendered = []
                for line in st.whole_lines(snap, fmt, urls):
                    rendered.append(line)
                    yield line
                st.store_lines(ckey, rendered)
        if whole:
            if end_stream:
                yield end_stream_line(0, False)
            return
        rows: Iterator[dict] = iter_file_rows(snap, fmt)
        if keep is not None:
            rows = (r for r in rows if keep(r))
        rows = _limited(rows, limit)
        if paginate:
            rows = itertools.islice(rows, offset, None)
        n = 0
        more = False
        for r in rows:
            if page_size is not None and n >= page_size:
                more = True
                break
            yield st.file_line(fmt, urls, r, version=tt_version, timestamp=tt_ts)
            n += 1
        if end_stream:
            yield end_stream_line(n, more)

    return _ndjson(lines(), snap.version, fmt, end_stream)


def _query_range(ctx: ServerContext, st: SharedTable, caps: Capabilities, body: QueryBody, urls: FileUrls,
                 p: Principal, qh: str, pinned: Optional[int], offset: int):
    """`/query` with startingVersion (streaming): the data changes of versions start..end."""
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
    paginate = body.maxFiles is not None or body.pageToken is not None
    end_stream = paginate or caps.include_end_stream_action or bool(body.includeRefreshToken)
    page_size = _page_size(ctx, body.maxFiles) if paginate else None

    def file_lines() -> Iterator[str]:
        for vc in changes:
            if vc.metadata is not None and vc.version != start:
                yield st.metadata_line(fmt, start_snap, metadata=vc.metadata, version=vc.version, with_size=False)
            yield from data_change_lines(st, fmt, urls, vc)

    head = [st.protocol_line(fmt, start_snap),
            ctx.guard(st, st.metadata_line, fmt, start_snap, version=start, with_size=False)]
    lines = paged_lines(head, itertools.islice(file_lines(), offset, None) if paginate else file_lines(),
                        page_size, end_stream, urls.expires,
                        lambda n: ctx.signer.token({"k": "query", "r": p.id, "t": st.cfg.key, "q": qh,
                                                    "v": end, "o": offset + n}))
    return _ndjson(lines, start, fmt, end_stream)


# --- changes ----------------------------------------------------------------------------------------
@router.get(TABLE + "/changes")
def get_table_changes(share: str, schema: str, table: str, request: Request,
                      startingVersion: Optional[int] = Query(None, ge=0),
                      startingTimestamp: Optional[str] = Query(None, max_length=64),
                      endingVersion: Optional[int] = Query(None, ge=0),
                      endingTimestamp: Optional[str] = Query(None, max_length=64),
                      includeHistoricalMetadata: Optional[str] = Query(None, max_length=8),
                      maxFiles: Optional[int] = Query(None, ge=1),
                      pageToken: Optional[str] = Query(None, max_length=4096),
                      delta_sharing_capabilities: Optional[str] = Header(None, max_length=1024),
                      p: Principal = Depends(current_principal), ctx: ServerContext = Depends(get_context)):
    st = ctx.find_table(p, share, schema, table)
    caps = Capabilities.parse(delta_sharing_capabilities)
    historical = _bool_param(includeHistoricalMetadata)
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
    qh = hashlib.sha256(f"{start}:{end}:{historical}".encode()).hexdigest()[:24]
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
    urls = ctx.file_urls(request, p)
    paginate = maxFiles is not None or pageToken is not None
    end_stream = paginate or caps.include_end_stream_action

    def file_lines() -> Iterator[str]:
        for vc in changes:
            if historical and vc.metadata is not None and vc.version != start:
                yield st.metadata_line(fmt, start_snap, metadata=vc.metadata, version=vc.version, with_size=False)
            if vc.cdcs:
                for c in vc.cdcs:
                    yield st.file_line(fmt, urls, c, wrapper="cdf", version=vc.version, timestamp=vc.timestamp,
                                       action="cdc")
                continue
            yield from data_change_lines(st, fmt, urls, vc)

    head = [st.protocol_line(fmt, end_snap),
            ctx.guard(st, st.metadata_line, fmt, start_snap, version=start if historical else None, with_size=False)]
    lines = paged_lines(head, itertools.islice(file_lines(), offset, None) if paginate else file_lines(),
                        _page_size(ctx, maxFiles) if paginate else None, end_stream, urls.expires,
                        lambda n: ctx.signer.token({"k": "changes", "r": p.id, "t": st.cfg.key,
                                                    "q": qh, "o": offset + n}))
    return _ndjson(lines, start, fmt, end_stream)

"""File serving through the server's own signed URLs: GET with a single `Range`, and HEAD. A URL
is honoured only while its signature verifies, it has not expired, and its holder may still read
the table (a revoked, rotated, expired or deleted recipient's URLs answer 403). Local tables:
paths are resolved inside the table root (symlinks too); nothing outside it is ever served.
Tables on object stores (S3, Azure Blob, GCS): once those checks pass, the answer is `302 Found`
to a URL of the object the store signed (S3 pre-signed, Azure SAS, GCS V4 signed; GET, or HEAD
for a HEAD) that expires after `REDIRECT_SECONDS` — clients follow it with their Range header,
the bytes come from the store, and a recipient revoked meanwhile can no longer get one. (Stores
check a signed URL's expiry when a request starts, so a download under way finishes.) For a
recipient with a byte quota, a redirect counts the bytes it grants (the range, else the object's
size) against the quota, and the audit record's `bytes` says so."""

from __future__ import annotations

import os
from typing import Iterator, Optional

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from ..context import AUDIT_KEY, ServerContext, admit, get_context
from ..signing import BadToken
from ..tables import rel_ok

__all__ = ["router", "FILE_CHUNK", "REDIRECT_SECONDS", "S3_REDIRECT_SECONDS"]

router = APIRouter(tags=["files"])

FILE_CHUNK = 1 << 20
FILE = "/files/{table_key}/{rel_b64}"
# lifetime of the store-signed URL a verified file URL of an object-store table redirects to: long
# enough for the client to follow the redirect, short enough that it is not worth keeping
REDIRECT_SECONDS = 60
S3_REDIRECT_SECONDS = REDIRECT_SECONDS


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"errorCode": code, "message": message}, status_code=status)


def _deny() -> JSONResponse:
    return _error(403, "PERMISSION_DENIED", "the file URL is invalid, has expired or was revoked")


def parse_range(h: str, size: int) -> tuple[int, int] | None:
    """(first, last) byte of a single `bytes=` range within `size`, or None if unsatisfiable."""
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


def _granted_bytes(st, target: str, range_header: Optional[str]) -> Optional[int]:
    """The bytes a redirect to `target` lets the client read — the range asked for when it names
    both ends, else the object's size (one HEAD to the store) from the range's start; None when
    the object is gone. Asked only for recipients with a byte quota: the store serves the bytes,
    so the quota counts what the redirect grants."""
    if range_header:
        h = range_header.strip().lower()
        a, _, b = h[6:].partition("-") if h.startswith("bytes=") and "," not in h else ("", "", "")
        if a.strip().isdigit() and b.strip().isdigit() and int(b) >= int(a):
            return int(b) - int(a) + 1
    status = st.log.store.status(target)
    if status is None:
        return None
    rng = parse_range(range_header, status.size) if range_header else None
    return (rng[1] - rng[0] + 1) if rng else status.size


def _serve_file(ctx: ServerContext, table_key: str, rel_b64: str, request: Request, credential: Optional[str],
                expires: Optional[str], signature: Optional[str], range_header: Optional[str]) -> Response:
    if len(table_key) > 64 or len(rel_b64) > 8192:
        return _deny()
    st = ctx.tables.get(table_key)
    if st is None:
        return _deny()
    rec = request.scope.get(AUDIT_KEY)
    if rec is not None:
        rec.update(share=st.cfg.share, schema=st.cfg.schema, table=st.cfg.name)
    holder: list = []

    def bindings(cred: str):
        holder.append(cred)
        return ctx.auth.bindings_of(cred, st.cfg.share)
    try:
        rel = ctx.signer.verify_file(table_key, rel_b64, credential or "", expires or "", signature or "",
                                     bindings)
    except BadToken:
        if rec is not None:
            rec["authFailure"] = "bad_file_url"
        return _deny()
    if not rel_ok(rel):
        return _deny()
    name = ctx.auth.name_of(holder[0])
    if rec is not None:
        rec["recipient"] = name
    r = ctx.recipients.get(name) if holder[0].startswith("r:") else None
    if r is not None:
        admit(ctx, request, r)
        if rec is not None:
            rec["recipientName"] = name     # the middleware counts the bytes sent against its quota
    if st.is_object_store:
        target = st.root.rstrip("/") + "/" + rel
        granted = None
        if request.method == "GET" and r is not None and ctx.limiter.limit(r, "bytesPerDay"):
            granted = _granted_bytes(st, target, range_header)
            if granted is None:
                return _error(404, "RESOURCE_DOES_NOT_EXIST", "the file no longer exists")
        location = st.log.store.sign(target, "HEAD" if request.method == "HEAD" else "GET", REDIRECT_SECONDS)
        if rec is not None:
            rec["redirected"] = True
            if granted is not None:
                rec["grantedBytes"] = granted   # counted against the byte quota by the middleware
        return Response(status_code=302, headers={"Location": location, "Cache-Control": "no-store"})
    root = st.log.table_root
    real_root = os.path.realpath(root)
    real = os.path.realpath(os.path.join(root, *rel.split("/")))
    if not real.startswith(real_root + os.sep):
        return _deny()
    try:
        size = os.path.getsize(real)
    except OSError:
        return _error(404, "RESOURCE_DOES_NOT_EXIST", "the file no longer exists")
    headers = {"Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
    start, end = 0, size - 1
    status = 200
    if range_header:
        rng = parse_range(range_header, size)
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


Credential = Query(None, alias="X-Amz-Credential", max_length=1024)
Expires = Query(None, alias="X-Amz-Expires", max_length=32)
Signature = Query(None, alias="X-Amz-Signature", max_length=128)
Range = Header(None, alias="Range", max_length=256)


@router.get(FILE, operation_id="get_file")
def get_file(table_key: str, rel_b64: str, request: Request, x_amz_credential: Optional[str] = Credential,
             x_amz_expires: Optional[str] = Expires, x_amz_signature: Optional[str] = Signature,
             range_header: Optional[str] = Range, ctx: ServerContext = Depends(get_context)):
    """A data or deletion-vector file through a signed URL this server issued (Range supported)."""
    return _serve_file(ctx, table_key, rel_b64, request, x_amz_credential, x_amz_expires, x_amz_signature,
                       range_header)


@router.head(FILE, operation_id="head_file")
def head_file(table_key: str, rel_b64: str, request: Request, x_amz_credential: Optional[str] = Credential,
              x_amz_expires: Optional[str] = Expires, x_amz_signature: Optional[str] = Signature,
              range_header: Optional[str] = Range, ctx: ServerContext = Depends(get_context)):
    return _serve_file(ctx, table_key, rel_b64, request, x_amz_credential, x_amz_expires, x_amz_signature,
                       range_header)

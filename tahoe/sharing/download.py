"""Downloading the files a sharing server hands out (pre-signed URLs: the URL carries the
authority, no `Authorization` header is sent), fast and robustly.

Owns: `Fetcher.get(url, start, length)` — a whole file or a byte range read straight into one
preallocated buffer over a kept-alive `http.client` connection per thread and host (the fastest
way Python has to move bytes off a socket; no per-chunk objects), through the environment's
HTTP(S) proxy when one is set; dropped connections and short bodies resumed with a `Range`
request from the first missing byte; 429/5xx answers and refused connections retried with
backoff (`retry`); 3xx redirects followed. An answer of 401/403 (also 400 from a store
saying the request expired) raises `UrlRefused`: the caller decides whether the URL has expired
and must be refreshed (see `reader.UrlBook`). Counters (`bytes`, `retries`, `resumes`) for
progress bars and tests.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
from typing import Callable, Optional
from urllib.parse import urljoin, urlsplit
from urllib.request import getproxies, proxy_bypass

from ..errors import DeltaError
from .retry import DEFAULT_RETRIES, backoff_sleep, retryable_status

__all__ = ["Fetcher", "DownloadError", "UrlRefused", "safe_url"]

_READ = 1 << 20


class DownloadError(DeltaError):
    """A file could not be downloaded (after the retries)."""

    def __init__(self, message: str, status: Optional[int] = None):
        super().__init__(message)
        self.status = status


class UrlRefused(DownloadError):
    """The store refused the URL (401/403, or 400 naming an expired request): expired or revoked."""


def safe_url(url: str) -> str:
    """A URL without its query string (which holds the signature): for messages."""
    p = urlsplit(url)
    return f"{p.scheme}://{p.netloc}{p.path}"


class _Retry(Exception):
    """Internal: the attempt failed in a retryable way."""

    def __init__(self, why: str, retry_after: Optional[str] = None):
        super().__init__(why)
        self.retry_after = retry_after


class Fetcher:
    """Thread-safe; each thread keeps its own connections."""

    def __init__(self, num_retries: int = DEFAULT_RETRIES, timeout: float = 120.0,
                 on_bytes: Optional[Callable[[int], None]] = None):
        self.num_retries = num_retries
        self.timeout = timeout
        self.on_bytes = on_bytes
        self._local = threading.local()
        self._lock = threading.Lock()
        self._ssl = None
        self.bytes = 0
        self.retries = 0
        self.resumes = 0
        self.requests = 0

    # --- connections ----------------------------------------------------------------------------
    def _conns(self) -> dict:
        c = getattr(self._local, "conns", None)
        if c is None:
            c = self._local.conns = {}
        return c

    def _connection(self, scheme: str, host: str, port: Optional[int]) -> http.client.HTTPConnection:
        key = (scheme, host, port)
        conns = self._conns()
        conn = conns.get(key)
        if conn is None:
            conn = self._connect(scheme, host, port)
            conns[key] = conn
        return conn

    def _connect(self, scheme: str, host: str, port: Optional[int]) -> http.client.HTTPConnection:
        proxy = None if proxy_bypass(host) else getproxies().get(scheme)
        if scheme == "https":
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            if proxy:
                p = urlsplit(proxy)
                conn = http.client.HTTPSConnection(p.hostname, p.port or 80, timeout=self.timeout, context=self._ssl)
                conn.set_tunnel(host, port or 443)
            else:
                conn = http.client.HTTPSConnection(host, port or 443, timeout=self.timeout, context=self._ssl)
        elif scheme == "http":
            if proxy:
                p = urlsplit(proxy)
                conn = http.client.HTTPConnection(p.hostname, p.port or 80, timeout=self.timeout)
                conn._tahoe_proxy = True  # type: ignore[attr-defined]  (absolute URLs in requests)
            else:
                conn = http.client.HTTPConnection(host, port or 80, timeout=self.timeout)
        else:
            raise DownloadError(f"cannot download {scheme}: URLs (only http and https)")
        return conn

    def _drop(self, scheme: str, host: str, port: Optional[int]) -> None:
        conn = self._conns().pop((scheme, host, port), None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for conn in self._conns().values():
            conn.close()
        self._conns().clear()

    # --- download -------------------------------------------------------------------------------
    def get(self, url: str, start: int = 0, length: Optional[int] = None, size_hint: Optional[int] = None) -> memoryview:
        """The bytes of `url` (from `start`, `length` of them; None: to the end). `size_hint`,
        the expected size of a whole file, lets the first request allocate at once."""
        buf: Optional[bytearray] = None
        got = 0
        total: Optional[int] = length
        attempt = 0
        redirects = 0
        while True:
            first = start + got
            rng = None
            if got or start or length is not None:
                rng = f"bytes={first}-" + ("" if total is None else str(start + total - 1))
            try:
                status, headers, resp, conn_key = self._open(url, rng)
            except _Retry as e:
                attempt = self._backoff(url, attempt, str(e), e.retry_after)
                continue
            try:
                if status in (301, 302, 303, 307, 308):
                    loc = headers.get("Location")
                    resp.read()
                    redirects += 1
                    if not loc or redirects > 5:
                        raise DownloadError(f"too many or empty redirects for {safe_url(url)}", status)
                    url = urljoin(url, loc)
                    continue
                if status in (200, 206):
                    if status == 200 and (got or start):
                        # the server ignored the Range: read from the beginning again
                        if got:
                            self.resumes += 1
                        skip = first
                    else:
                        skip = 0
                    clen = headers.get("Content-Length")
                    if buf is None:
                        if total is None:
                            if clen is not None:
                                total = int(clen) - skip if status == 200 else int(clen)
                            elif size_hint is not None and not start:
                                total = size_hint
                        buf = bytearray(total if total is not None else 0)
                    got = self._read_body(resp, buf, got, total, skip, clen)
                    if total is None:
                        total = got
                    if got >= total:
                        return memoryview(buf)[:total]
                    raise _Retry(f"the connection closed after {got} of {total} bytes")
                body = resp.read(4096)
                if status in (401, 403) or (status == 400 and b"xpired" in body):
                    raise UrlRefused(f"the store refused {safe_url(url)} ({status}): the URL expired or was "
                                     f"revoked", status)
                if retryable_status(status):
                    raise _Retry(f"{status} from {safe_url(url)}", headers.get("Retry-After"))
                if status == 416 and got and total is not None and got >= total:
                    return memoryview(buf)[:total]
                raise DownloadError(f"cannot download {safe_url(url)}: {status} "
                                    f"{body[:200].decode('utf-8', 'replace')}", status)
            except _Retry as e:
                self._drop(*conn_key)
                if got:
                    self.resumes += 1
                attempt = self._backoff(url, attempt, str(e), e.retry_after)
            except (OSError, http.client.HTTPException) as e:
                self._drop(*conn_key)
                if got:
                    self.resumes += 1
                attempt = self._backoff(url, attempt, f"{type(e).__name__}: {e}")
            except BaseException:
                self._drop(*conn_key)
                raise

    def _backoff(self, url: str, attempt: int, why: str, retry_after: Optional[str] = None) -> int:
        if attempt >= self.num_retries:
            raise DownloadError(f"cannot download {safe_url(url)} after {attempt} retries: {why}")
        with self._lock:
            self.retries += 1
        backoff_sleep(attempt, retry_after)
        return attempt + 1

    def _open(self, url: str, rng: Optional[str]):
        p = urlsplit(url)
        host, port = p.hostname or "", p.port
        key = (p.scheme, host, port)
        target = p.path or "/"
        if p.query:
            target += "?" + p.query
        headers = {"Host": p.netloc, "Accept-Encoding": "identity", "User-Agent": "tahoe-sharing"}
        if rng:
            headers["Range"] = rng
        for fresh in (False, True):
            conn = self._connection(*key)
            req_target = url if getattr(conn, "_tahoe_proxy", False) else target
            try:
                with self._lock:
                    self.requests += 1
                conn.request("GET", req_target, headers=headers)
                resp = conn.getresponse()
                return resp.status, resp.headers, resp, key
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                # a kept-alive connection the server closed meanwhile: once more on a fresh one
                self._drop(*key)
                if fresh:
                    raise _Retry(f"{type(e).__name__}: {e}") from None
            except (OSError, http.client.HTTPException) as e:
                self._drop(*key)
                if isinstance(e, (socket.gaierror,)):
                    raise DownloadError(f"cannot resolve the host of {safe_url(url)}: {e}") from None
                raise _Retry(f"{type(e).__name__}: {e}") from None
        raise _Retry("no connection")  # pragma: no cover

    def _read_body(self, resp, buf: bytearray, got: int, total: Optional[int], skip: int, clen) -> int:
        """Read the response body into `buf` from offset `got` (skipping `skip` leading bytes of
        it); the new count of bytes held. Grows `buf` when the size was unknown."""
        while skip > 0:
            chunk = resp.read(min(skip, _READ))
            if not chunk:
                return got
            skip -= len(chunk)
        if total is None:  # unknown size (chunked): read to the end
            while True:
                chunk = resp.read(_READ)
                if not chunk:
                    return got
                buf.extend(chunk)
                got += len(chunk)
                self._count(len(chunk))
        view = memoryview(buf)
        while got < total:
            n = resp.readinto(view[got:min(total, got + (8 << 20))])
            if not n:
                break
            got += n
            self._count(n)
        if got >= total and clen is not None and resp.length:
            resp.read()  # drain anything beyond (a server sending more than asked)
        return got

    def _count(self, n: int) -> None:
        with self._lock:
            self.bytes += n
        if self.on_bytes is not None:
            self.on_bytes(n)

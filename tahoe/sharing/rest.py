"""The recipient's REST calls to a Delta Sharing server (spec "REST APIs"), as the official connector makes
them, over httpx.

  1. One request with the profile's credentials (a 401 renews an OAuth token once); retries on 429, 5xx and
     dropped connections (`retry`).
  2. Errors: `SharingHTTPError` (status, `errorCode`, message; also a `requests` HTTPError), a missing
     `Delta-Table-Version` a LookupError, an `errorMessage` mid-response a `SharingStreamError`.
  3. Pages followed to the end (`pageToken`, `maxFiles`); every page's protocol and metaData checked.
  4. Asynchronous queries (spec `asyncquery`): see `RestClient.query`.
  5. Capabilities: `responseformat` parquet and delta, reader features `READER_FEATURES`,
     `includeendstreamaction=true`, `includeHistoricalProtocol=true` for delta-format changes."""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional
from urllib.parse import quote

import orjson

from ..errors import DeltaError
from .credentials import credentials_for
from .model import DeltaSharingProfile, Schema, Share, Table
from .retry import DEFAULT_RETRIES, backoff_sleep, retryable_status
from ..version import __version__

try:  # the official connector raises requests' HTTPError: be catchable as one where requests exists
    from requests.exceptions import HTTPError as _CompatHTTPError
except ImportError:  # pragma: no cover - requests not installed
    class _CompatHTTPError(OSError):  # type: ignore[no-redef]
        def __init__(self, *args, response=None, **kw):
            super().__init__(*args)
            self.response = response

__all__ = ["SharingHTTPError", "SharingConnectionError", "SharingStreamError", "SharingQueryTimeout", "RestClient",
           "TableResponse", "READER_FEATURES", "capabilities_header", "parse_capabilities", "USER_AGENT",
           "ASYNC_TIMEOUT"]

# the Delta reader features this client implements in delta response format (header spelling)
READER_FEATURES = ("deletionvectors", "columnmapping", "timestampntz")


def _user_agent() -> str:
    import platform

    import pyarrow

    return f"tahoe-sharing/{__version__} PyArrow/{pyarrow.__version__} Python/{platform.python_version()}"


USER_AGENT = _user_agent()


class SharingHTTPError(DeltaError, _CompatHTTPError):
    """An error answer of the sharing server: `status_code`, `error_code` (the server's
    `errorCode`), `message`; `response` is the HTTP response (as on requests' HTTPError)."""

    def __init__(self, message: str, status_code: int, error_code: str = "", server_message: str = "",
                 response: Any = None):
        _CompatHTTPError.__init__(self, message, response=response)
        self.status_code = status_code
        self.error_code = error_code
        self.message = server_message

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""

    def __reduce__(self):
        # pickled from Spark executors to the driver: the HTTP response does not travel
        return (type(self), (str(self), self.status_code, self.error_code, self.message))


class SharingConnectionError(DeltaError, ConnectionError):
    """The server could not be reached (after the retries)."""


class SharingStreamError(SharingHTTPError):
    """The server failed in the middle of an answer and said so in its endStreamAction
    (`errorMessage`), or the answer was cut short: what was received is not the whole answer."""


class SharingQueryTimeout(DeltaError, TimeoutError):
    """An asynchronous query was still pending after the client's `async_timeout`."""


ASYNC_TIMEOUT = 600.0   # seconds an asynchronous query may stay pending before the client gives up


def capabilities_header(formats: str, async_query: Optional[bool] = None) -> str:
    """The `delta-sharing-capabilities` value asking for `formats` ("parquet", "delta" or
    "delta,parquet") — with `asyncquery=true|false` when `async_query` is not None."""
    parts = [f"responseformat={formats}"]
    if "delta" in formats:
        parts.append("readerfeatures=" + ",".join(READER_FEATURES))
    parts.append("includeendstreamaction=true")
    if async_query is not None:
        parts.append(f"asyncquery={'true' if async_query else 'false'}")
    return ";".join(parts)


def parse_capabilities(value: Optional[str]) -> dict[str, list[str]]:
    """A capabilities header as {key: [values]} (keys lower-cased)."""
    out: dict[str, list[str]] = {}
    for part in (value or "").split(";"):
        if "=" in part:
            k, v = part.split("=", 1)
            out[k.strip().lower()] = [x.strip().lower() for x in v.split(",") if x.strip()]
    return out


@dataclass
class TableResponse:
    """A `/query` or `/changes` answer, all pages joined: the table version header, the response
    format, the protocol and metaData values (as the first lines hold them), the other lines in
    order (files, and metaData lines of later versions), and what the endStreamAction said."""
    version: int
    format: str
    protocol: dict
    metadata: dict
    lines: list[dict] = field(default_factory=list)
    refresh_token: Optional[str] = None
    min_url_expiration: Optional[int] = None
    pages: int = 1
    query_id: Optional[str] = None     # the asynchronous query that computed it, if any


def _q(name: str) -> str:
    return quote(name, safe="")


def _table_path(t: Table) -> str:
    return f"/shares/{_q(t.share)}/schemas/{_q(t.schema)}/tables/{_q(t.name)}"


# endpoints that advertised asynchronous queries (`asyncquery=true` in a response's capabilities)
_ASYNC_ENDPOINTS: set[str] = set()


class RestClient:
    """REST calls of one profile. Thread-safe (one httpx connection pool)."""

    def __init__(self, profile: Any, num_retries: int = DEFAULT_RETRIES, timeout: float = 300.0,
                 async_query: Optional[bool] = None, async_timeout: float = ASYNC_TIMEOUT):
        import httpx

        self.profile = DeltaSharingProfile.of(profile)
        self.credentials = credentials_for(self.profile)
        self.num_retries = num_retries
        self.async_query = async_query
        self.async_timeout = async_timeout
        self.polls = 0
        self._http = httpx.Client(timeout=httpx.Timeout(timeout, connect=30.0), follow_redirects=True,
                                  headers={"User-Agent": USER_AGENT})
        self._lock = threading.Lock()
        self.requests = 0
        self.retries = 0

    def close(self) -> None:
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- one request ----------------------------------------------------------------------------
    def request(self, method: str, path: str, *, params: Optional[dict] = None, json_body: Any = None,
                headers: Optional[dict] = None):
        """The response (status < 400) of a request to the endpoint, retried per `retry`."""
        import httpx

        url = self.profile.endpoint + path
        renewed = False
        attempt = 0
        while True:
            auth = self.credentials.header()
            h = {"Authorization": auth, **(headers or {})}
            try:
                with self._lock:
                    self.requests += 1
                r = self._http.request(method, url, params=params, json=json_body, headers=h)
            except httpx.TransportError as e:
                if attempt < self.num_retries:
                    self._count_retry()
                    backoff_sleep(attempt)
                    attempt += 1
                    continue
                raise SharingConnectionError(f"cannot reach the sharing server at {self.profile.endpoint} "
                                             f"({type(e).__name__}: {e}) after {attempt} retries") from None
            if r.status_code == 401 and not renewed and self.credentials.invalidate(auth):
                renewed = True
                continue
            if retryable_status(r.status_code) and attempt < self.num_retries:
                self._count_retry()
                backoff_sleep(attempt, r.headers.get("Retry-After"))
                attempt += 1
                continue
            if r.status_code >= 400:
                raise self._error(method, path, r)
            return r

    def _count_retry(self) -> None:
        with self._lock:
            self.retries += 1

    def _error(self, method: str, path: str, r) -> SharingHTTPError:
        code, msg = "", ""
        try:
            d = r.json()
            if isinstance(d, dict):
                code, msg = str(d.get("errorCode") or ""), str(d.get("message") or "")
        except ValueError:
            msg = r.text[:500]
        hint = self.credentials.expired_hint() if r.status_code == 401 else ""
        text = f"{r.status_code} {r.reason_phrase} for {method} {path}: {code + ': ' if code else ''}{msg}{hint}"
        return SharingHTTPError(text, r.status_code, code, msg, response=r)

    def get_json(self, path: str, params: Optional[dict] = None) -> dict:
        return self.request("GET", path, params=params).json()

    # --- listing --------------------------------------------------------------------------------
    def list_all(self, path: str) -> list[dict]:
        items: list[dict] = []
        token = None
        while True:
            d = self.get_json(path, {"pageToken": token} if token else None)
            items.extend(d.get("items") or [])
            token = d.get("nextPageToken")
            if not token:
                return items

    def list_shares(self) -> list[Share]:
        return [Share.from_json(x) for x in self.list_all("/shares")]

    def list_schemas(self, share: Share) -> list[Schema]:
        return [Schema.from_json(x) for x in self.list_all(f"/shares/{_q(share.name)}/schemas")]

    def list_tables(self, schema: Schema) -> list[Table]:
        return [Table.from_json(x) for x in
                self.list_all(f"/shares/{_q(schema.share)}/schemas/{_q(schema.name)}/tables")]

    def list_all_tables(self) -> list[Table]:
        shares = self.list_shares()
        out: list[Table] = []
        for s in shares:
            try:
                out.extend(Table.from_json(x) for x in self.list_all(f"/shares/{_q(s.name)}/all-tables"))
            except SharingHTTPError as e:
                if e.status_code != 404:
                    raise
                for sc in self.list_schemas(s):
                    out.extend(self.list_tables(sc))
        return out

    # --- table ----------------------------------------------------------------------------------
    @staticmethod
    def _version_header(r) -> int:
        v = r.headers.get("Delta-Table-Version")
        if v is None:
            raise LookupError("Missing delta-table-version header")
        return int(v)

    def table_version(self, table: Table, starting_timestamp: Optional[str] = None) -> int:
        params = {"startingTimestamp": starting_timestamp} if starting_timestamp is not None else None
        return self._version_header(self.request("GET", _table_path(table) + "/version", params=params))

    def metadata(self, table: Table, formats: Optional[str] = None) -> TableResponse:
        """`/metadata` (asking for `formats` when given; no header means parquet)."""
        headers = {"delta-sharing-capabilities": capabilities_header(formats)} if formats else None
        r = self.request("GET", _table_path(table) + "/metadata", headers=headers)
        version = self._version_header(r)
        lines = [orjson.loads(x) for x in r.content.splitlines() if x.strip()]
        proto = next((x["protocol"] for x in lines if "protocol" in x), None)
        md = next((x["metaData"] for x in lines if "metaData" in x), None)
        if proto is None or md is None:
            raise SharingHTTPError("the server's /metadata answer lacks a protocol or metaData line", 500,
                                   response=r)
        return TableResponse(version, _format_of(r), proto, md)

    def temporary_credentials(self, table: Table, location: Optional[str] = None) -> dict:
        """`…/temporary-table-credentials`: the `credentials` object (`location`,
        `awsTempCredentials` / `azureUserDelegationSas` / `gcpOauthToken`, `expirationTime`)."""
        body = {"location": location} if location is not None else {}
        d = self.request("POST", _table_path(table) + "/temporary-table-credentials", json_body=body).json()
        creds = d.get("credentials") if isinstance(d, dict) else None
        if not isinstance(creds, dict) or not creds.get("location"):
            raise SharingHTTPError("the server's temporary-table-credentials answer has no credentials", 500)
        return creds

    def _use_async(self) -> bool:
        if self.async_query is not None:
            return self.async_query
        return self.profile.endpoint in _ASYNC_ENDPOINTS

    def query(self, table: Table, body: dict, formats: str, page_size: Optional[int] = None) -> TableResponse:
        """`/query` with `body`, every page read (`page_size`: maxFiles per page) — as an
        asynchronous query when the server supports them: submitted with `asyncquery=true` and a fresh
        `idempotencyKey`, `…/queries/{queryId}` polled (50 ms to 1 s, at most `async_timeout` seconds), then
        read page by page. `async_query=None` uses them once the server advertised `asyncquery=true`."""
        body = dict(body)
        if page_size is not None:
            body["maxFiles"] = int(page_size)
        use_async = self._use_async()
        path = _table_path(table) + "/query"
        if use_async:
            return self._async_query(table, path, body, formats, page_size)
        headers = {"delta-sharing-capabilities": capabilities_header(formats, False)}

        def page(token: Optional[str]):
            b = dict(body)
            if token:
                b["pageToken"] = token
            return self.request("POST", path, json_body=b, headers=headers)
        return self._paged(page)

    def _async_query(self, table: Table, path: str, body: dict, formats: str,
                     page_size: Optional[int]) -> TableResponse:
        headers = {"delta-sharing-capabilities": capabilities_header(formats, True)}
        submitted = self.request("POST", path, json_body={**body, "idempotencyKey": uuid.uuid4().hex},
                                 headers=headers)
        query_id = self._pending(submitted)
        if query_id is None:   # answered at once: a synchronous answer (pages through /query)
            sync_headers = {"delta-sharing-capabilities": capabilities_header(formats, False)}

            def sync_page(token: Optional[str]):
                if token is None:
                    return submitted
                return self.request("POST", path, json_body={**body, "pageToken": token}, headers=sync_headers)
            return self._paged(sync_page)
        info_path = f"{_table_path(table)}/queries/{_q(query_id)}"
        info = {"maxFiles": int(page_size)} if page_size is not None else {}
        deadline = time.monotonic() + self.async_timeout
        delay = 0.05
        while True:
            with self._lock:
                self.polls += 1
            r = self.request("POST", info_path, json_body=info, headers=headers)
            if self._pending(r) is None:
                break
            if time.monotonic() > deadline:
                raise SharingQueryTimeout(f"the asynchronous query of {table.share}.{table.schema}.{table.name} was "
                                          f"still pending after {self.async_timeout:g} s")
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
        ready = r

        def page(token: Optional[str]):
            if token is None:
                return ready
            return self.request("POST", info_path, json_body={**info, "pageToken": token}, headers=headers)
        resp = self._paged(page)
        resp.query_id = query_id
        return resp

    @staticmethod
    def _pending(r) -> Optional[str]:
        """The queryId of an answer that says the query is still running; None for an answer."""
        first = r.content.split(b"\n", 1)[0].strip()
        if b'"queryStatus"' not in first[:32]:
            return None
        status = orjson.loads(first).get("queryStatus") or {}
        if str(status.get("status", "pending")).lower() != "pending":
            msg = status.get("errorMessage") or status.get("message") or ""
            raise SharingHTTPError(f"the asynchronous query {status.get('queryId')} failed ({status.get('status')})"
                                   f"{': ' + msg if msg else ''}", 500, "", str(msg), response=r)
        qid = status.get("queryId")
        if not isinstance(qid, str) or not qid:
            raise SharingHTTPError("the server's queryStatus has no queryId", 500, response=r)
        return qid

    def changes(self, table: Table, params: dict, formats: str, page_size: Optional[int] = None) -> TableResponse:
        """`/changes` with `params` (query string), every page read."""
        params = {k: v for k, v in params.items() if v is not None}
        if page_size is not None:
            params["maxFiles"] = int(page_size)
        if "delta" in formats:
            params.setdefault("includeHistoricalProtocol", "true")
        headers = {"delta-sharing-capabilities": capabilities_header(formats)}

        def page(token: Optional[str]):
            p = dict(params)
            if token:
                p["pageToken"] = token
            return self.request("GET", _table_path(table) + "/changes", params=p, headers=headers)
        return self._paged(page)

    def _paged(self, fetch) -> TableResponse:
        out: Optional[TableResponse] = None
        token: Optional[str] = None
        while True:
            r = fetch(token)
            version = self._version_header(r)
            fmt = _format_of(r)
            caps = parse_capabilities(r.headers.get("delta-sharing-capabilities"))
            if caps.get("asyncquery") == ["true"]:
                _ASYNC_ENDPOINTS.add(self.profile.endpoint)
            raw = r.content.splitlines()
            lines = [orjson.loads(x) for x in raw if x.strip()]
            esa = lines.pop()["endStreamAction"] if lines and "endStreamAction" in lines[-1] else None
            if esa is not None and esa.get("errorMessage"):
                raise SharingStreamError(f"the server failed while answering {r.request.method} {r.url.path}: "
                                         f"{esa['errorMessage']}", 500, "", str(esa["errorMessage"]), response=r)
            if esa is None and caps.get("includeendstreamaction") == ["true"]:
                raise SharingStreamError(f"the answer to {r.request.method} {r.url.path} was cut short (it lacks "
                                         f"the endStreamAction the server announced)", 500, response=r)
            if len(lines) < 2 or "protocol" not in lines[0] or "metaData" not in lines[1]:
                raise SharingHTTPError("the server's answer does not start with protocol and metaData lines",
                                       500, response=r)
            if out is None:
                out = TableResponse(version, fmt, lines[0]["protocol"], lines[1]["metaData"], lines[2:])
            else:
                if fmt != out.format or lines[0]["protocol"] != out.protocol:
                    raise SharingHTTPError("the pages of one answer differ in format or protocol", 500, response=r)
                out.lines.extend(lines[2:])
                out.pages += 1
            token = None
            if esa:
                if esa.get("refreshToken"):
                    out.refresh_token = esa["refreshToken"]
                m = esa.get("minUrlExpirationTimestamp")
                if m is not None:
                    out.min_url_expiration = m if out.min_url_expiration is None else min(out.min_url_expiration, m)
                token = esa.get("nextPageToken") or None
            if not token:
                return out


def _format_of(r) -> str:
    caps = parse_capabilities(r.headers.get("delta-sharing-capabilities"))
    fmts = caps.get("responseformat") or ["parquet"]
    return "delta" if "delta" in fmts else "parquet"

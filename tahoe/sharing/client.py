"""A small Delta Sharing client (parquet response format): profile file → shares, schemas and
tables; a table's rows as Arrow/pandas; its change data feed as Arrow.

    c = SharingClient("profile.share")
    c.list_all_tables()
    load_as_arrow("profile.share#share.schema.table", version=3, predicate_hints=["p = 'a'"], limit=10)

Files are downloaded through the URLs the server returns (in parallel), partition columns are
added from `partitionValues` typed by the table schema. Predicate hints are only hints: the rows
are not filtered here (as the official client). Tables that need reader features (deletion vectors,
column mapping) are refused by the server in this format.
"""

from __future__ import annotations

import io
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Optional
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["Profile", "SharingClient", "SharingClientError", "load_as_arrow", "load_as_pandas",
           "load_changes_as_arrow"]


class SharingClientError(Exception):
    """The server answered with an error (`status`, `error_code`, message)."""

    def __init__(self, status: int, error_code: str, message: str):
        super().__init__(f"{status} {error_code}: {message}")
        self.status = status
        self.error_code = error_code


@dataclass(frozen=True)
class Profile:
    endpoint: str
    bearer_token: str
    expiration_time: Optional[str] = None

    @classmethod
    def read(cls, path_or_dict: Any) -> "Profile":
        d = path_or_dict if isinstance(path_or_dict, dict) else json.load(open(path_or_dict))
        if d.get("shareCredentialsVersion") != 1:
            raise ValueError(f"unsupported shareCredentialsVersion {d.get('shareCredentialsVersion')!r}")
        return cls(d["endpoint"].rstrip("/"), d["bearerToken"], d.get("expirationTime"))

    @classmethod
    def from_file(cls, path: str) -> "Profile":
        return cls.read(path)


def _split_url(table_url: str) -> tuple[str, str, str, str]:
    profile, _, name = table_url.rpartition("#")
    parts = name.split(".")
    if not profile or len(parts) != 3:
        raise ValueError(f"table URL must be '<profile>#<share>.<schema>.<table>', got {table_url!r}")
    return profile, parts[0], parts[1], parts[2]


class SharingClient:
    def __init__(self, profile: Any):
        import httpx

        self.profile = profile if isinstance(profile, Profile) else Profile.read(profile)
        self._http = httpx.Client(timeout=120.0, headers={
            "Authorization": f"Bearer {self.profile.bearer_token}", "User-Agent": "tahoe-sharing-client/1"})

    def close(self) -> None:
        self._http.close()

    # --- REST -----------------------------------------------------------------------------------
    def _check(self, r) -> None:
        if r.status_code >= 400:
            try:
                d = r.json()
                raise SharingClientError(r.status_code, d.get("errorCode", ""), d.get("message", ""))
            except ValueError:
                raise SharingClientError(r.status_code, "", r.text[:200]) from None

    def _get_json(self, path: str, params: dict | None = None) -> dict:
        r = self._http.get(self.profile.endpoint + path, params=params)
        self._check(r)
        return r.json()

    def _list(self, path: str) -> list[dict]:
        items: list[dict] = []
        token = None
        while True:
            d = self._get_json(path, {"pageToken": token} if token else None)
            items.extend(d.get("items", []))
            token = d.get("nextPageToken")
            if not token:
                return items

    @staticmethod
    def _q(name: str) -> str:
        return quote(name, safe="")

    def list_shares(self) -> list[dict]:
        return self._list("/shares")

    def list_schemas(self, share: str) -> list[dict]:
        return self._list(f"/shares/{self._q(share)}/schemas")

    def list_tables(self, share: str, schema: str) -> list[dict]:
        return self._list(f"/shares/{self._q(share)}/schemas/{self._q(schema)}/tables")

    def list_all_tables(self) -> list[dict]:
        return [t for s in self.list_shares() for t in self._list(f"/shares/{self._q(s['name'])}/all-tables")]

    def _table_path(self, share: str, schema: str, table: str) -> str:
        return f"/shares/{self._q(share)}/schemas/{self._q(schema)}/tables/{self._q(table)}"

    def table_version(self, share: str, schema: str, table: str) -> int:
        r = self._http.get(self.profile.endpoint + self._table_path(share, schema, table) + "/version")
        self._check(r)
        return int(r.headers["Delta-Table-Version"])

    def _ndjson(self, method: str, path: str, **kw) -> tuple[int, list[dict]]:
        r = self._http.request(method, self.profile.endpoint + path, **kw)
        self._check(r)
        return int(r.headers.get("Delta-Table-Version", -1)), [json.loads(x) for x in r.text.splitlines() if x.strip()]

    def query(self, share: str, schema: str, table: str, body: dict) -> tuple[int, list[dict]]:
        return self._ndjson("POST", self._table_path(share, schema, table) + "/query", json=body)

    def changes(self, share: str, schema: str, table: str, params: dict) -> tuple[int, list[dict]]:
        return self._ndjson("GET", self._table_path(share, schema, table) + "/changes", params=params)

    # --- data -----------------------------------------------------------------------------------
    def _download(self, url: str) -> pa.Table:
        import httpx

        r = httpx.get(url, timeout=300.0)
        if r.status_code != 200:
            raise SharingClientError(r.status_code, "FILE_DOWNLOAD_FAILED", f"cannot download a data file: {r.status_code}")
        return pq.read_table(io.BytesIO(r.content))

    def _read_files(self, files: list[dict], schema, partition_cols: list[str], extra=None) -> pa.Table:
        from ..protocol.partition_values import parse_partition_value
        from ..protocol.schema import to_arrow_type

        fields = [f for f in schema.fields]
        out_schema = pa.schema([pa.field(f.name, to_arrow_type(f.type)) for f in fields])

        def one(f: dict) -> pa.Table:
            t = self._download(f["url"])
            cols = []
            for fld, af in zip(fields, out_schema):
                if fld.name in partition_cols:
                    raw = (f.get("partitionValues") or {}).get(fld.name)
                    cols.append(pa.repeat(pa.scalar(parse_partition_value(raw, fld.type), af.type), t.num_rows))
                elif fld.name in t.column_names:
                    cols.append(t.column(fld.name).cast(af.type))
                else:
                    cols.append(pa.nulls(t.num_rows, af.type))
            res = pa.table(cols, schema=out_schema)
            if extra is not None:
                res = extra(f, t, res)
            return res

        with ThreadPoolExecutor(8) as ex:
            parts = list(ex.map(one, files))
        if not parts:
            return out_schema.empty_table() if extra is None else extra(None, None, out_schema.empty_table())
        return pa.concat_tables(parts)


def _meta(lines: list[dict]):
    from ..protocol.schema import StructType

    md = next(x["metaData"] for x in lines if "metaData" in x)
    return StructType.from_json(md["schemaString"]), list(md.get("partitionColumns") or [])


def load_as_arrow(table_url: str, version: Optional[int] = None, predicate_hints: Optional[list[str]] = None,
                  limit: Optional[int] = None, timestamp: Optional[str] = None,
                  json_predicate_hints: Optional[str] = None) -> pa.Table:
    """The rows of a shared table (a version or timestamp when the table's history is shared)."""
    profile, share, schema, table = _split_url(table_url)
    c = SharingClient(profile)
    try:
        body: dict[str, Any] = {}
        for k, v in (("predicateHints", predicate_hints), ("jsonPredicateHints", json_predicate_hints),
                     ("limitHint", limit), ("version", version), ("timestamp", timestamp)):
            if v is not None:
                body[k] = v
        _, lines = c.query(share, schema, table, body)
        sch, pcols = _meta(lines)
        files = [x["file"] for x in lines if "file" in x]
        t = c._read_files(files, sch, pcols)
        return t.slice(0, limit) if limit is not None else t
    finally:
        c.close()


def load_as_pandas(table_url: str, **kw):
    return load_as_arrow(table_url, **kw).to_pandas()


def load_changes_as_arrow(table_url: str, starting_version: Optional[int] = None,
                          ending_version: Optional[int] = None, starting_timestamp: Optional[str] = None,
                          ending_timestamp: Optional[str] = None) -> pa.Table:
    """CDF rows with `_change_type`, `_commit_version` (int64), `_commit_timestamp` (int64 ms)."""
    profile, share, schema, table = _split_url(table_url)
    c = SharingClient(profile)
    try:
        params = {k: v for k, v in (("startingVersion", starting_version), ("endingVersion", ending_version),
                                    ("startingTimestamp", starting_timestamp),
                                    ("endingTimestamp", ending_timestamp)) if v is not None}
        _, lines = c.changes(share, schema, table, params)
        sch, pcols = _meta(lines)
        files = []
        for x in lines:
            for kind in ("add", "remove", "cdf"):
                if kind in x:
                    files.append({**x[kind], "_kind": kind})

        def extra(f, raw, res: pa.Table) -> pa.Table:
            n = res.num_rows
            if f is None:
                ct = pa.array([], pa.string())
                ver = pa.array([], pa.int64())
                ts = pa.array([], pa.int64())
            else:
                if f["_kind"] == "cdf":
                    ct = raw.column("_change_type").cast(pa.string())
                else:
                    ct = pa.array(["insert" if f["_kind"] == "add" else "delete"] * n, pa.string())
                ver = pa.array([f["version"]] * n, pa.int64())
                ts = pa.array([f["timestamp"]] * n, pa.int64())
            return res.append_column("_change_type", ct).append_column("_commit_version", ver) \
                .append_column("_commit_timestamp", ts)
        return c._read_files(files, sch, pcols, extra)
    finally:
        c.close()

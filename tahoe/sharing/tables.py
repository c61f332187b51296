"""One shared table as the server sees it: its log (with a cache of the latest snapshot), the
response format a request gets, and the NDJSON lines of metadata, files and changes in both
response formats (spec "API Response Format in Parquet" / "... in Delta").

Owns: format negotiation from the `delta-sharing-capabilities` header, file URL minting (the
server's own signed URLs, bound to the requesting holder, for every table — see `signing`; for
tables on an object store (S3, Azure, GCS) the server answers such a URL with a redirect to a
short-lived URL the store signed, `routes.files`, so revoking a recipient ends its downloads too;
with the config's `fileUrls: store`, the store's own signed URLs go into the response directly,
as the reference server does), rewriting deletion vectors to `storageType: "p"` with their own
signed URL, and refusing file paths that point outside the table.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from ..log import DeltaLog
from ..log.segment import list_log
from ..protocol.filenames import LogFileKind
from ..protocol.table_features import reader_features_of
from ..storage import resolve_data_path
from .config import TableConfig
from .errors import SharingError
from .signing import FILE_ID_HASHES, FileUrls, b64d, b64e, file_id
from ..protocol.deletion_vectors import DeletionVectorDescriptor
from ..storage.options import kind_of, parse_location

__all__ = ["Capabilities", "SharedTable", "dumps", "iter_file_rows", "now_s", "rel_ok"]


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_enc = json.encoder.encode_basestring  # a JSON string literal (C implementation)


def dumps(obj: Any) -> str:
    return _ENCODER.encode(obj)


@dataclass
class Capabilities:
    """The `delta-sharing-capabilities` request header (spec "Delta Sharing Capabilities
    Header"): keys and values case-insensitive, `key=v1,v2` pairs separated by `;`, unknown keys
    ignored. `async_query` is None when the client did not mention `asyncquery`; `file_id_hash`
    is the `fileidhash` scheme asked (None: the response format's own)."""
    formats: list[str] = field(default_factory=lambda: ["parquet"])
    reader_features: set[str] = field(default_factory=set)
    include_end_stream_action: bool = False
    async_query: bool | None = None
    file_id_hash: str | None = None

    @classmethod
    def parse(cls, header: str | None, file_id_hash: str | None = None) -> "Capabilities":
        """The capabilities of a request; `file_id_hash` is the value of a separate `fileidhash`
        request header, if any (it must agree with a `fileidhash` capability)."""
        caps = cls()
        for part in (header or "").lower().split(";"):
            if "=" not in part:
                continue
            k, v = part.split("=", 1)
            vals = [x.strip() for x in v.split(",") if x.strip()]
            k = k.strip()
            if k == "responseformat" and vals:
                caps.formats = vals
            elif k == "readerfeatures":
                caps.reader_features = set(vals)
            elif k == "includeendstreamaction":
                caps.include_end_stream_action = bool(vals) and vals[0] == "true"
            elif k == "asyncquery":
                if vals not in (["true"], ["false"]):
                    raise SharingError(400, "INVALID_PARAMETER_VALUE", f"asyncquery must be true or false, got {v.strip()!r}")
                caps.async_query = vals[0] == "true"
            elif k == "fileidhash":
                caps.file_id_hash = _file_id_hash(v)
        if file_id_hash is not None:
            h = _file_id_hash(file_id_hash)
            if caps.file_id_hash is not None and caps.file_id_hash != h:
                raise SharingError(400, "INVALID_PARAMETER_VALUE",
                                   "the fileidhash header and the fileidhash capability disagree")
            caps.file_id_hash = h
        return caps

    def id_scheme(self, fmt: str) -> str:
        """How file ids are hashed in a response of format `fmt`: as asked, else the format's own."""
        return self.file_id_hash or fmt

    def response_header(self, fmt: str, end_stream: bool = False) -> str:
        """The `delta-sharing-capabilities` response header: the format answered, and echoed
        back what was honoured (`includeendstreamaction`, `fileidhash`, `asyncquery`)."""
        v = f"responseformat={fmt}"
        if end_stream:
            v += ";includeendstreamaction=true"
        if self.file_id_hash is not None:
            v += f";fileidhash={self.file_id_hash}"
        if self.async_query is not None:
            v += ";asyncquery=true"
        return v


def _file_id_hash(v: str) -> str:
    h = v.strip().lower()
    if h not in FILE_ID_HASHES:
        raise SharingError(400, "INVALID_PARAMETER_VALUE",
                           f"unsupported fileidhash {v.strip()!r}: supported values are {', '.join(FILE_ID_HASHES)}")
    return h


# Reader features a recipient must list to read a table in delta format.
_GATED = {"deletionVectors": "deletionvectors", "columnMapping": "columnmapping"}


def _up_to_limit(static: list[tuple], limit: int | None) -> Iterator[tuple]:
    """The (b64 path, tail, numRecords) entries of a snapshot's files until their summed numRecords
    reach `limit` (None: all of them), as the protocol's `limitHint` asks."""
    total = 0
    for entry in static:
        if limit is not None:
            if total >= limit:
                return
            total += entry[2] or 0
        yield entry


def _table_features(snap) -> set[str]:
    feats = set(reader_features_of(snap.protocol))
    if snap.column_mapping_mode != "none":
        feats.add("columnMapping")
    return feats


class SharedTable:
    """A configured table; thread-safe; snapshots cached per version (latest re-checked by listing
    the log from the cached version on)."""

    def __init__(self, cfg: TableConfig, url_ttl: int, metrics=None, store_urls: bool = False):
        self.cfg = cfg
        # `fileUrls: store`: the store's own signed URLs in responses (object stores only)
        self.store_urls = store_urls
        self.metrics = metrics          # metrics.Metrics: snapshot cache lookups and load times
        self.key = cfg.key
        self._root: str | None = None
        self.url_ttl = url_ttl
        self._lock = threading.Lock()
        self._log: DeltaLog | None = None
        self._snaps: dict[int, Any] = {}
        self._latest: int | None = None
        self._line_cache: tuple[tuple, list[str]] | None = None
        self._load_lock = threading.Lock()
        self._sizes: dict[tuple, tuple[int, int]] = {}
        self._paths_ok: set[tuple] = set()
        self._static: dict[tuple, list[tuple[str, str, int | None]]] = {}
        self._static_lock = threading.Lock()

    @property
    def log(self) -> DeltaLog:
        with self._lock:
            if self._log is None:
                self._log = DeltaLog.for_table(self.cfg.location, self.cfg.storage_options or None)
            return self._log

    @property
    def root(self) -> str:
        if self._root is None:
            self._root = self.log.table_root
        return self._root

    @property
    def is_object_store(self) -> bool:
        return kind_of(self.root) in ("s3", "azure", "gcs")

    is_s3 = is_object_store   # the name before Azure and GCS tables were served

    @property
    def direct(self) -> bool:
        """Whether file URLs of this table are the store's own signed URLs (`fileUrls: store`)."""
        return self.store_urls and self.is_object_store

    def store_url(self, rel: str, expires: int, method: str = "GET") -> str:
        """The store's signed URL of the file at `rel` (within the table), valid until `expires`
        (epoch seconds)."""
        return self.log.store.sign(self.root.rstrip("/") + "/" + rel, method, max(1, expires - now_s()))

    def latest_version(self) -> int:
        log = self.log
        start = self._latest or 0
        files = [f for f in list_log(log.store, log.log_dir, start) if f.name.kind == LogFileKind.COMMIT]
        if not files:
            if start:
                files = [f for f in list_log(log.store, log.log_dir, 0) if f.name.kind == LogFileKind.COMMIT]
            if not files:
                # a checkpoint-only log: let the snapshot decide
                return log.snapshot().version
        v = files[-1].version
        self._latest = max(v, self._latest or 0)
        return v

    def snapshot(self, version: int | None = None):
        if version is None:
            version = self.latest_version()
        with self._lock:
            s = self._snaps.get(version)
        if self.metrics is not None:
            self.metrics.cache_lookup(s is not None)
        if s is None:
            with self._load_lock:  # one load at a time per table: concurrent askers wait for it
                with self._lock:
                    s = self._snaps.get(version)
                if s is None:
                    t0 = time.perf_counter()
                    s = self.log.snapshot(version)
                    if self.metrics is not None:
                        self.metrics.table_loaded(self.cfg.share, time.perf_counter() - t0)
                    with self._lock:
                        if len(self._snaps) > 8:
                            self._snaps.pop(next(iter(self._snaps)))
                        self._snaps[version] = s
        return s

    def size_and_count(self, snap) -> tuple[int, int]:
        """(sizeInBytes, numFiles) of a snapshot, computed once per version."""
        key = (id(snap), snap.version)
        got = self._sizes.get(key)
        if got is None:
            ft = snap.files_table(["size"])
            got = (int(pa.compute.sum(ft.column("size")).as_py() or 0), ft.num_rows)
            if len(self._sizes) > 16:
                self._sizes.clear()
            self._sizes[key] = got
        return got

    def check_paths(self, snap) -> None:
        """SharingError if an active file of `snap` lies outside the table (checked once per version)."""
        key = (id(snap), snap.version)
        if key in self._paths_ok:
            return
        pc = pa.compute
        paths = snap.files_table(["path"]).column("path")
        odd = pc.match_substring_regex(paths, r"^[A-Za-z][A-Za-z0-9+.\-]*:|^/|\.\.|\\")
        if pc.any(odd).as_py():
            for pth in pc.filter(paths, odd).to_pylist():
                self._rel_path(pth)
        if len(self._paths_ok) > 16:
            self._paths_ok.clear()
        self._paths_ok.add(key)

    def prepare(self, snap) -> None:
        """Compute what every query of `snap` needs (size and count, the path check, the parquet
        lines' request-independent parts), so that the first request finds it ready."""
        self.size_and_count(snap)
        self.check_paths(snap)
        self._static_parquet(snap, "parquet")

    def _static_parquet(self, snap, scheme: str) -> list[tuple[str, str]]:
        """Per active file of a snapshot, the parts of its parquet-format line that
        do not depend on the request: (b64 path, the JSON after the URL up to the expiration
        value), file ids hashed by `scheme`. Built once per version, so a request only signs and
        joins."""
        return self._per_version(snap, "parquet:" + scheme, lambda: self._build_static_parquet(snap, scheme))

    def _build_static_parquet(self, snap, scheme: str) -> list[tuple[str, str]]:
        # column-wise rather than through iter_file_rows: this runs on every table's first query
        pc = pa.compute
        ft = snap.files_table(PARQUET_COLUMNS)
        n = ft.num_rows
        paths = ft.column("path").combine_chunks()
        stats = ft.column("stats").combine_chunks()
        pvs = ft.column("partitionValues").combine_chunks()
        path_list = paths.to_pylist()
        if len(pvs.values) == 0:
            pv_json = pa.scalar("{}")
        else:
            pv_json = pa.array([dumps(pv) if pv else "{}" for pv in _column_values(pvs, n)], pa.string())
        has_stats = pc.fill_null(pc.greater(pc.utf8_length(stats), 0), False)
        stats_part = pc.if_else(has_stats, pc.binary_join_element_wise(',"stats":', _json_strings(stats), ""), "")
        tails = pc.binary_join_element_wise(
            '","id":"', pa.array([file_id(p, scheme) for p in path_list], pa.string()), '","partitionValues":', pv_json,
            ',"size":', pc.cast(ft.column("size").combine_chunks(), pa.string()), stats_part,
            ',"expirationTimestamp":', "")
        b64s = [b64e(rel.encode("utf-8")) for rel in self._rel_paths(paths, path_list)]
        return list(zip(b64s, tails.to_pylist(), _num_records_column(stats)))

    def _per_version(self, snap, fmt: str, build):
        """The request-independent lines of `snap` in `fmt`, built once per snapshot version (one
        version kept per format; concurrent first requests build it once)."""
        key = (id(snap), snap.version, fmt)
        got = self._static.get(key)
        if got is not None:
            return got
        with self._static_lock:
            got = self._static.get(key)
            if got is not None:
                return got
            got = build()
            with self._lock:
                for k in [k for k in self._static if k[2] == fmt]:
                    del self._static[k]
                self._static[key] = got
        return got

    def parquet_lines(self, snap, urls: FileUrls, limit: int | None = None, scheme: str = "parquet") -> Iterator[str]:
        """The `file` lines of a whole snapshot in parquet format (no filter, no time travel);
        with `limit`, files stop once their summed numRecords reach it."""
        static = self._static_parquet(snap, scheme)
        if self.direct:
            yield from self._direct_parquet_lines(static, urls, limit)
            return
        head = '{"file":{"url":"' + _enc(urls.prefix(self.key))[1:-1]
        q = _enc(urls.query)[1:-1]
        end = f"{urls.expires * 1000}}}}}"
        sign = urls.signer(self.key)
        for b64, tail, _ in _up_to_limit(static, limit):
            yield "".join((head, b64, q, sign(b64), tail, end))

    def _direct_parquet_lines(self, static, urls: FileUrls, limit: int | None) -> Iterator[str]:
        end = f"{urls.expires * 1000}}}}}"
        for b64, tail, _ in _up_to_limit(static, limit):
            url = self.store_url(b64d(b64).decode("utf-8"), urls.expires)
            yield "".join(('{"file":{"url":"', _enc(url)[1:-1], tail, end))

    def _static_delta(self, snap, scheme: str) -> list[tuple]:
        """Per active file of a snapshot, the request-independent parts of its
        delta-format line: (b64 path, file id, (dv b64 path, dv file id, dv JSON tail) or None,
        the add's other fields as JSON members, numRecords), ids hashed by `scheme`. Built once
        per version."""
        return self._per_version(snap, "delta:" + scheme, lambda: self._build_static_delta(snap, scheme))

    def _build_static_delta(self, snap, scheme: str) -> list[tuple]:
        got = []
        for r in iter_file_rows(snap, "delta"):
            path = r["path"]
            a = {k: v for k, v in r.items() if v is not None and k != "path"}
            a.setdefault("modificationTime", 0)
            a.setdefault("dataChange", True)
            a.setdefault("partitionValues", {})
            dv_part = None
            dv = a.get("deletionVector")
            if dv and dv.get("storageType") != "i":
                d = DeletionVectorDescriptor.from_dict(dv)
                rel = d.relative_path() if d.storage_type == "u" else self._rel_path(d.path_or_inline_dv)
                tail = ""
                if d.offset is not None:
                    tail += f',"offset":{int(d.offset)}'
                tail += f',"sizeInBytes":{int(d.size_in_bytes)},"cardinality":{int(d.cardinality)}}}'
                dv_part = (b64e(rel.encode("utf-8")), file_id(rel, scheme), tail)
                del a["deletionVector"]
            rest = dumps(a)[1:-1]
            got.append((b64e(self._rel_path(path).encode("utf-8")), file_id(path, scheme), dv_part, rest,
                        _num_records(r.get("stats"))))
        return got

    def delta_lines(self, snap, urls: FileUrls, limit: int | None = None, scheme: str = "delta") -> Iterator[str]:
        """The `file` lines of a whole snapshot in delta format (no filter, no time travel)."""
        static = self._static_delta(snap, scheme)
        url_head = _enc(urls.prefix(self.key))[1:-1]
        q = _enc(urls.query)[1:-1]
        exp = f',"expirationTimestamp":{urls.expires * 1000},"deltaSingleAction":{{"add":{{"path":"'
        sign = urls.signer(self.key)
        if self.direct:
            def url_of(b64: str) -> str:
                return _enc(self.store_url(b64d(b64).decode("utf-8"), urls.expires))[1:-1]
        else:
            def url_of(b64: str) -> str:
                return "".join((url_head, b64, q, sign(b64)))
        total = 0
        for b64, fid, dv, rest, n in static:
            if limit is not None:
                if total >= limit:
                    return
                total += n or 0
            parts = ['{"file":{"id":"', fid, '"']
            if dv is not None:
                parts += [',"deletionVectorFileId":"', dv[1], '"']
            parts += [exp, url_of(b64), '"']
            if dv is not None:
                parts += [',"deletionVector":{"storageType":"p","pathOrInlineDv":"', url_of(dv[0]), '"', dv[2]]
            if rest:
                parts += [",", rest]
            parts.append("}}}}")
            yield "".join(parts)

    def whole_lines(self, snap, fmt: str, urls: FileUrls, limit: int | None = None,
                    scheme: str | None = None) -> Iterator[str]:
        if fmt == "parquet":
            return self.parquet_lines(snap, urls, limit, scheme or fmt)
        return self.delta_lines(snap, urls, limit, scheme or fmt)

    def cached_lines(self, key: tuple) -> list[str] | None:
        c = self._line_cache
        return c[1] if c is not None and c[0] == key else None

    def store_lines(self, key: tuple, lines: list[str]) -> None:
        self._line_cache = (key, lines)

    # --- format ---------------------------------------------------------------------------------
    def choose_format(self, caps: Capabilities, snap) -> str:
        feats = _table_features(snap)
        gated = {f for f in feats if f in _GATED}
        missing = sorted(f for f in gated if _GATED[f] not in caps.reader_features)
        if "delta" in caps.formats and "parquet" in caps.formats:
            fmt = "parquet" if not feats and snap.protocol.min_reader_version < 2 else "delta"
        elif "delta" in caps.formats:
            fmt = "delta"
        elif "parquet" in caps.formats:
            fmt = "parquet"
        else:
            raise SharingError(400, "INVALID_PARAMETER_VALUE",
                               f"unsupported responseformat {','.join(caps.formats)}: use parquet or delta")
        if missing:
            raise SharingError(400, "UNSUPPORTED_OPERATION",
                               f"table {self.cfg.name} needs reader features {', '.join(missing)} that the client "
                               f"did not declare: read it with a client that supports them "
                               f"(responseformat=delta;readerfeatures=...)")
        return fmt

    # --- lines ----------------------------------------------------------------------------------
    def protocol_line(self, fmt: str, snap, protocol=None, version: int | None = None) -> str:
        """The protocol line: in delta format the table's Delta protocol (`protocol`, else the
        snapshot's), with the version it was committed at when `version` is given (historical
        protocols); in parquet format always reader version 1."""
        if fmt == "delta":
            p: dict[str, Any] = {"deltaProtocol": (protocol or snap.protocol).to_dict()}
            if version is not None:
                p["version"] = version
            return dumps({"protocol": p})
        return dumps({"protocol": {"minReaderVersion": 1}})

    # --- access modes ---------------------------------------------------------------------------
    @property
    def access_modes(self) -> list[str]:
        """How recipients may read the table (spec "Access Modes"): `url` (pre-signed file URLs
        from /query) always, `dir` (temporary credentials for the table's directory) when the
        configuration allows it."""
        return list(self.cfg.access_modes)

    def access_fields(self) -> dict[str, Any]:
        """The access-mode members of table and metaData objects: `accessModes`, and the table's
        `location` only for directory access (a url-only table keeps its location private).
        `auxiliaryLocations` never appears: a shared table's files all lie under its location
        (files elsewhere are refused)."""
        out: dict[str, Any] = {"accessModes": self.access_modes}
        if "dir" in self.cfg.access_modes:
            out["location"] = self.dir_location
        return out

    @property
    def dir_location(self) -> str:
        """The table's root as recipients with directory access see it: its configured s3://
        location, without a trailing slash; an Azure table as `abfss://container@account.dfs.
        core.windows.net/path` (the URI that names its storage account)."""
        loc = parse_location(self.cfg.location)
        if loc.kind == "azure":
            acct = self.log.store.azure_account(loc)
            key = loc.key.strip("/")
            return f"abfss://{loc.bucket}@{acct}.dfs.core.windows.net" + (f"/{key}" if key else "")
        return re.sub(r"(?i)^s3[an]?://", "s3://", self.cfg.location).rstrip("/")

    def metadata_line(self, fmt: str, snap, metadata=None, version: int | None = None,
                      with_size: bool = True) -> str:
        md = metadata if metadata is not None else snap.metadata
        extra: dict[str, Any] = {}
        if version is not None:
            extra["version"] = version
        if with_size:
            extra["size"], extra["numFiles"] = self.size_and_count(snap)
        extra.update(self.access_fields())
        if fmt == "delta":
            return dumps({"metaData": {"deltaMetadata": md.to_dict(), **extra}})
        d = {"id": md.id}
        if md.name is not None:
            d["name"] = md.name
        if md.description is not None:
            d["description"] = md.description
        d.update({"format": md.format.to_dict(), "schemaString": md.schema_string,
                  "partitionColumns": list(md.partition_columns), "configuration": dict(md.configuration)})
        d.update(extra)
        return dumps({"metaData": d})

    # --- URLs -----------------------------------------------------------------------------------
    def _rel_path(self, path: str) -> str:
        """The file's path within the table root; SharingError if it lies outside."""
        root = self.root
        if ":" not in path and not path.startswith("/") and "\\" not in path:
            rel = unquote(path) if "%" in path else path
        else:
            full = resolve_data_path(root, path)
            if self.is_object_store:
                prefix = root.rstrip("/") + "/"
                if not full.startswith(prefix):
                    raise SharingError(400, "UNSUPPORTED_OPERATION",
                                       f"table {self.cfg.name} references files outside its location")
                rel = full[len(prefix):]
            else:
                rel = os.path.relpath(os.path.normpath(full), root).replace(os.sep, "/")
        if rel.startswith("/") or ".." in rel.split("/") or "\x00" in rel:
            raise SharingError(400, "UNSUPPORTED_OPERATION",
                               f"table {self.cfg.name} references files outside its location")
        return rel

    def _rel_paths(self, paths: pa.Array, values: list[str]) -> list[str]:
        """`_rel_path` of a column of paths (`values`: the same as a list); the usual plain relative
        ones are taken as they are."""
        out = list(values)
        odd = pa.compute.match_substring_regex(paths, r"[:\\%\x00]|^/|(^|/)\.\.(/|$)")
        for i in pa.compute.indices_nonzero(odd).to_pylist():
            out[i] = self._rel_path(out[i])
        return out

    def url_for(self, urls: FileUrls, path: str) -> str:
        if self.direct:
            return self.store_url(self._rel_path(path), urls.expires)
        return urls.url(self.key, self._rel_path(path))

    def dv_for(self, urls: FileUrls, dv: dict | None, scheme: str = "delta") -> tuple[dict | None, str | None]:
        """The deletion vector rewritten to an absolute signed URL ('p'), and its file id."""
        if not dv:
            return None, None
        if dv.get("storageType") == "i":
            return dv, None

        d = DeletionVectorDescriptor.from_dict(dv)
        if d.storage_type == "u":
            rel = d.relative_path()
        else:
            rel = self._rel_path(d.path_or_inline_dv)
        url = self.url_for(urls, rel)
        out = {"storageType": "p", "pathOrInlineDv": url, "sizeInBytes": d.size_in_bytes,
               "cardinality": d.cardinality}
        if d.offset is not None:
            out["offset"] = d.offset
        return out, file_id(rel, scheme)

    def file_size(self, path: str) -> int:
        try:
            full = resolve_data_path(self.log.table_root, path)
            store = self.log.store
            st = store.status(full)
            return int(st.size) if st is not None else 0
        except Exception:
            return 0

    # --- file lines -----------------------------------------------------------------------------
    def file_line(self, fmt: str, urls: FileUrls, add: dict, wrapper: str = "file",
                  version: int | None = None, timestamp: int | None = None, action: str = "add",
                  id_scheme: str | None = None) -> str:
        """One file line. Parquet: `{wrapper: {url, id, partitionValues, size, stats?, version?,
        timestamp?, expirationTimestamp}}`; delta: `{"file": {id, deltaSingleAction: {action: ...}}}`.
        Ids are hashed by `id_scheme` (default: the format's own)."""
        path = add["path"]
        url = self.url_for(urls, path)
        scheme = id_scheme or fmt
        fid = file_id(path, scheme)
        exp_ms = urls.expires * 1000
        if fmt == "delta":
            a = {k: v for k, v in add.items() if v is not None}
            a["path"] = url
            out: dict[str, Any] = {"id": fid}
            if a.get("deletionVector"):
                dv, dvid = self.dv_for(urls, a["deletionVector"], scheme)
                a["deletionVector"] = dv
                if dvid:
                    out["deletionVectorFileId"] = dvid
            if action in ("add", "remove") and "size" not in a:
                a["size"] = self.file_size(path)
            if action == "add":
                a.setdefault("modificationTime", 0)
                a.setdefault("dataChange", True)
                a.setdefault("partitionValues", {})
            if version is not None:
                out["version"] = version
            if timestamp is not None:
                out["timestamp"] = timestamp
            out["expirationTimestamp"] = exp_ms
            out["deltaSingleAction"] = {action: a}
            return dumps({"file": out})
        size = add.get("size")
        if size is None:
            size = self.file_size(path)
        # hand-assembled (this is the hot loop of /query): the same JSON json.dumps would give
        pv = add.get("partitionValues")
        parts = ['{"', wrapper, '":{"url":', _enc(url), ',"id":"', fid, '","partitionValues":',
                 dumps(pv) if pv else "{}", ',"size":', str(int(size))]
        stats = add.get("stats")
        if stats and wrapper in ("file", "add"):
            parts += [',"stats":', _enc(stats)]
        if version is not None:
            parts += [',"version":', str(int(version))]
        if timestamp is not None:
            parts += [',"timestamp":', str(int(timestamp))]
        parts += [',"expirationTimestamp":', str(exp_ms), "}}"]
        return "".join(parts)


PARQUET_COLUMNS = ["path", "partitionValues", "size", "stats"]
DELTA_COLUMNS = ["path", "partitionValues", "size", "modificationTime", "dataChange", "stats", "tags",
                 "deletionVector", "baseRowId", "defaultRowCommitVersion"]


def _column_values(arr: pa.Array, n: int) -> list:
    """A column as Python values, fast paths for what is usually empty (all-null columns, maps
    without entries)."""
    if arr.null_count == n:
        return [None] * n
    if pa.types.is_map(arr.type):
        if len(arr.values) == 0:
            return [{} if v else None for v in arr.is_valid().to_pylist()]
        return [None if v is None else dict(v) for v in arr.to_pylist()]
    return arr.to_pylist()


def iter_file_rows(snap, fmt: str = "delta") -> Iterator[dict]:
    """The active files of a snapshot as dicts, batch by batch (cheap to start streaming); only
    the columns the response format needs; null fields of a deletion vector dropped."""
    names = PARQUET_COLUMNS if fmt == "parquet" else DELTA_COLUMNS
    ft = snap.files_table(names)
    for batch in ft.to_batches(max_chunksize=2000):
        n = batch.num_rows
        cols = [_column_values(batch.column(name), n) for name in names]
        dv_i = names.index("deletionVector") if "deletionVector" in names else None
        for values in zip(*cols):
            r = dict(zip(names, values))
            if dv_i is not None:
                dv = values[dv_i]
                if isinstance(dv, dict):
                    r["deletionVector"] = {k: v for k, v in dv.items() if v is not None}
            yield r


_NUM_RECORDS = re.compile(r'"numRecords"\s*:\s*(\d+)')


def _num_records(stats: str | None) -> int | None:
    """numRecords of a stats JSON string (a regex: json-parsing every file's stats is slow)."""
    if not stats:
        return None
    m = _NUM_RECORDS.search(stats)
    return int(m.group(1)) if m else None


def _json_strings(arr: pa.Array) -> pa.Array:
    """Each string as a JSON string literal, as `_enc` writes it, vectorised (rows holding control
    characters, rare in stats, go through `_enc`)."""
    pc = pa.compute
    out = pc.binary_join_element_wise(
        '"', pc.replace_substring(pc.replace_substring(arr, "\\", "\\\\"), '"', '\\"'), '"', "")
    ctrl = pc.fill_null(pc.match_substring_regex(arr, r"[\x00-\x1f]"), False)
    if pc.any(ctrl).as_py():
        values = out.to_pylist()
        raw = arr.to_pylist()
        for i in pc.indices_nonzero(ctrl).to_pylist():
            values[i] = _enc(raw[i])
        out = pa.array(values, pa.string())
    return out


def _num_records_column(stats: pa.Array) -> list[int | None]:
    """`_num_records` of a column of stats strings, in one vectorised pass."""
    if stats.null_count == len(stats):
        return [None] * len(stats)
    found = pa.compute.struct_field(pa.compute.extract_regex(stats, _NUM_RECORDS.pattern.replace("(", "(?P<n>", 1)), "n")
    try:
        return found.cast(pa.int64()).to_pylist()
    except pa.ArrowInvalid:   # beyond int64
        return [_num_records(s) for s in stats.to_pylist()]


def now_s() -> int:
    return int(time.time())


def rel_ok(rel: str) -> bool:
    if not rel or rel.startswith("/") or "\\" in rel or "\x00" in rel:
        return False
    parts = rel.split("/")
    return ".." not in parts and "." not in parts and posixpath.normpath(rel) == rel

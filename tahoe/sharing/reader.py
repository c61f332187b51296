"""The recipient's data plane: the files of a `/query` or `/changes` answer turned into Arrow.

  1. `RemoteFile` and `TableInfo`: one file line of either response format, and the answer's schema; in
     delta format `readerFeatures` outside `SUPPORTED_READER_FEATURES` raise UnsupportedFeatureError.
  2. `UrlBook`: each file's current URL, refreshed through the `refreshToken` (or by asking again) when
     about to expire or refused, one refresh at a time.
  3. `ScanReader`: parallel downloads, at most `workers + 2` files in flight, read with tahoe's own reader,
     predicate and limit applied; `stream` decodes piece by piece in the consuming thread (Spark tasks).
  4. `ScanReader.changes`: change data via `tahoe.read.changes.version_change_rows`."""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import DeltaError, UnsupportedFeatureError
from ..protocol import column_mapping
from ..protocol.deletion_vectors import DeletionVectorDescriptor, deleted_mask, load_deletion_vector
from ..protocol.schema import StructType
from ..protocol.table_features import canonical_feature_name
from ..read.arrow_reader import ArrowFileReader
from ..read.changes import VersionChanges, change_schema, version_change_rows
from .download import DownloadError, Fetcher, UrlRefused
from .rest import TableResponse

__all__ = ["RemoteFile", "TableInfo", "UrlBook", "ScanReader", "SUPPORTED_READER_FEATURES", "remote_files",
           "DEFAULT_WORKERS"]

# reader features this client implements (the first three change how rows are read; the others
# only concern the log, which the server reads for us)
SUPPORTED_READER_FEATURES = ("deletionVectors", "columnMapping", "timestampNtz", "v2Checkpoint",
                             "vacuumProtocolCheck")
DEFAULT_WORKERS = 8
_NUM_RECORDS = re.compile(r'"numRecords"\s*:\s*(\d+)')


@dataclass
class RemoteFile:
    """One data file of an answer (see the module docstring)."""
    id: str
    url: str
    size: int
    partition_values: dict
    kind: str = "add"               # add | remove | cdc
    stats: Optional[str] = None
    dv: Optional[dict] = None       # deletion vector descriptor (delta format)
    dv_id: Optional[str] = None
    expires_ms: Optional[int] = None
    version: Optional[int] = None
    timestamp: Optional[int] = None
    data_change: bool = True

    @property
    def num_records(self) -> Optional[int]:
        if not self.stats:
            return None
        m = _NUM_RECORDS.search(self.stats)
        return int(m.group(1)) if m else None

    @property
    def live_records(self) -> Optional[int]:
        """Rows after the deletion vector (None when the stats do not tell)."""
        n = self.num_records
        if n is None:
            return None
        return n - int((self.dv or {}).get("cardinality") or 0)


_KIND = {"file": "add", "add": "add", "remove": "remove", "cdf": "cdc", "cdc": "cdc"}


def remote_files(resp: TableResponse) -> tuple[list[RemoteFile], list[dict]]:
    """The files of an answer, in its order, and the metaData values of later versions (range
    queries and `includeHistoricalMetadata` answers carry them)."""
    files: list[RemoteFile] = []
    metas: list[dict] = []
    for line in resp.lines:
        if "metaData" in line:
            metas.append(line["metaData"])
            continue
        if resp.format == "delta":
            f = line.get("file")
            if f is None:
                continue
            action = f.get("deltaSingleAction") or {}
            kind, a = next(((k, v) for k, v in action.items() if k in ("add", "remove", "cdc")), (None, None))
            if a is None:
                continue
            dv = a.get("deletionVector") or None
            files.append(RemoteFile(
                id=str(f.get("id") or a["path"]), url=a["path"], size=int(a.get("size") or 0),
                partition_values=a.get("partitionValues") or {}, kind=kind, stats=a.get("stats"), dv=dv,
                dv_id=f.get("deletionVectorFileId") or (dv.get("pathOrInlineDv") if dv else None),
                expires_ms=f.get("expirationTimestamp"), version=f.get("version"),
                timestamp=f.get("timestamp"), data_change=bool(a.get("dataChange", True))))
            continue
        key = next((k for k in ("file", "add", "remove", "cdf") if k in line), None)
        if key is None:
            continue
        f = line[key]
        files.append(RemoteFile(
            id=str(f.get("id") or f["url"]), url=f["url"], size=int(f.get("size") or 0),
            partition_values=f.get("partitionValues") or {}, kind=_KIND[key], stats=f.get("stats"),
            expires_ms=f.get("expirationTimestamp"), version=f.get("version"), timestamp=f.get("timestamp")))
    return files, metas


@dataclass
class TableInfo:
    """How to read an answer's files: logical schema, partition columns, column-mapping mode."""
    schema: StructType
    partition_columns: list
    mode: str
    format: str
    metadata: dict = field(default_factory=dict)

    @classmethod
    def of(cls, resp: TableResponse) -> "TableInfo":
        proto, md = resp.protocol, resp.metadata
        if resp.format == "delta":
            check_reader_features(proto.get("deltaProtocol") or {})
            for line in resp.lines:   # the protocols of later versions (includeHistoricalProtocol)
                if "protocol" in line:
                    check_reader_features(line["protocol"].get("deltaProtocol") or {})
            md = md.get("deltaMetadata") or {}
        elif int(proto.get("minReaderVersion", 1)) > 3:
            raise UnsupportedFeatureError(f"the table needs reader version {proto.get('minReaderVersion')}; "
                                          f"tahoe's sharing client reads versions 1 to 3")
        return cls.from_metadata(md, resp.format)

    @classmethod
    def from_metadata(cls, md: dict, fmt: str) -> "TableInfo":
        schema = StructType.from_json(md["schemaString"])
        conf = md.get("configuration") or {}
        mode = column_mapping.mode(conf) if fmt == "delta" else "none"
        return cls(schema, list(md.get("partitionColumns") or []), mode, fmt, md)

    def arrow_reader(self) -> ArrowFileReader:
        return ArrowFileReader(None, "", self.schema, self.partition_columns, self.mode)


def check_reader_features(protocol: dict) -> None:
    """Refuse a delta-format protocol whose reader features this client does not implement."""
    rv = int(protocol.get("minReaderVersion", 1))
    if rv > 3:
        raise UnsupportedFeatureError(f"the table needs reader version {rv}; tahoe's sharing client reads 1 to 3")
    feats = [canonical_feature_name(f) for f in (protocol.get("readerFeatures") or [])]
    missing = sorted(f for f in feats if f not in SUPPORTED_READER_FEATURES)
    if missing:
        raise UnsupportedFeatureError(
            f"the table needs reader feature(s) {', '.join(missing)}, which tahoe's sharing client does not "
            f"implement (it reads: {', '.join(SUPPORTED_READER_FEATURES)})")


class UrlBook:
    """Current URLs by file id (and deletion-vector id), refreshed when they expire."""

    def __init__(self, files: Iterable[RemoteFile], refresh: Optional[Callable[[], TableResponse]] = None):
        self._lock = threading.Lock()
        self._refresh_fn = refresh
        self._urls: dict[str, tuple[str, Optional[int]]] = {}
        self._dvs: dict[str, str] = {}
        self._issued = time.time()
        self.generation = 0
        self.refreshes = 0
        self._take(files)

    def _take(self, files: Iterable[RemoteFile]) -> None:
        for f in files:
            self._urls[f.id] = (f.url, f.expires_ms)
            if f.dv_id and f.dv and f.dv.get("storageType") == "p":
                self._dvs[f.dv_id] = f.dv["pathOrInlineDv"]

    def _expiring(self, exp_ms: Optional[int]) -> bool:
        if exp_ms is None:
            return False
        now = time.time()
        life = max(0.0, exp_ms / 1000 - self._issued)
        margin = min(30.0, life / 4)
        return now >= exp_ms / 1000 - margin

    def url(self, file_id: str) -> tuple[str, int]:
        """(URL, generation) of a file, refreshed first when it is about to expire."""
        with self._lock:
            url, exp = self._urls[file_id]
            gen = self.generation
        if self._refresh_fn is not None and self._expiring(exp):
            self.refresh(gen)
            with self._lock:
                url, _ = self._urls[file_id]
                gen = self.generation
        return url, gen

    def dv_url(self, dv_id: str) -> tuple[str, int]:
        with self._lock:
            return self._dvs[dv_id], self.generation

    def refresh(self, seen_generation: int) -> bool:
        """Fetch new URLs unless someone did since `seen_generation`; False when this answer
        cannot be refreshed."""
        if self._refresh_fn is None:
            return False
        with self._lock:
            if self.generation != seen_generation:
                return True
            resp = self._refresh_fn()
            files, _ = remote_files(resp)
            known = set(self._urls)
            fresh = {f.id for f in files}
            lost = known - fresh
            if lost:
                raise DownloadError(f"refreshing the file URLs: the server no longer lists {len(lost)} of the "
                                    f"files being read (e.g. id {next(iter(lost))})")
            self._issued = time.time()
            self._take(files)
            self.generation += 1
            self.refreshes += 1
            return True


def ordered_map(fn: Callable[[Any], Any], items: Iterable[Any], workers: int, ahead: int) -> Iterator[Any]:
    """fn over items on a thread pool, results in order, at most `ahead` submitted beyond the
    one being consumed. Leaving the iteration early cancels what has not started."""
    it = iter(items)
    ex = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="tahoe-sharing")
    futs: deque = deque()
    try:
        for item in it:
            futs.append(ex.submit(fn, item))
            if len(futs) >= ahead:
                break
        while futs:
            res = futs.popleft().result()
            nxt = next(it, _END)
            if nxt is not _END:
                futs.append(ex.submit(fn, nxt))
            yield res
    finally:
        for f in futs:
            f.cancel()
        ex.shutdown(wait=False, cancel_futures=True)


_END = object()


class ScanReader:
    """Reads the files of one answer (see the module docstring)."""

    def __init__(self, info: TableInfo, book: UrlBook, fetcher: Optional[Fetcher] = None,
                 workers: int = DEFAULT_WORKERS, on_file: Optional[Callable[[RemoteFile], None]] = None):
        self.info = info
        self.book = book
        self.fetcher = fetcher or Fetcher()
        self.workers = workers
        self.on_file = on_file
        self.reader = info.arrow_reader()

    @property
    def schema(self) -> pa.Schema:
        return self.reader.out_schema

    # --- one file -------------------------------------------------------------------------------
    def _with_refresh(self, get_url: Callable[[], tuple[str, int]], fetch: Callable[[str], Any]):
        url, gen = get_url()
        try:
            return fetch(url)
        except UrlRefused:
            if not self.book.refresh(gen):
                raise
        url, _ = get_url()
        try:
            return fetch(url)
        except UrlRefused as e:
            raise DownloadError(f"{e} (also after refreshing the URLs: access was revoked?)", e.status) from None

    def fetch(self, rf: RemoteFile) -> memoryview:
        """The bytes of a data file."""
        return self._with_refresh(lambda: self.book.url(rf.id),
                                  lambda url: self.fetcher.get(url, size_hint=rf.size or None))

    def keep_mask(self, rf: RemoteFile, num_rows: int) -> Optional[np.ndarray]:
        """Rows of the file its deletion vector keeps (None: no deletion vector)."""
        if not rf.dv:
            return None
        try:
            d = DeletionVectorDescriptor.from_dict(rf.dv)
        except DeltaError as e:
            raise DeltaError(f"file {rf.id}: invalid deletion vector: {e}") from None
        if d.storage_type == "u":
            raise DeltaError(f"file {rf.id}: the server sent a deletion vector by relative path ('u'), which a "
                             f"recipient cannot reach; a sharing server must send it as a URL ('p')")

        def read_range(_path: str, start: int, length: int) -> bytes:
            return bytes(self._with_refresh(lambda: self.book.dv_url(rf.dv_id),
                                            lambda url: self.fetcher.get(url, start, length)))
        bitmap = load_deletion_vector(d, "", read_range)
        return ~deleted_mask(bitmap, num_rows)

    def _open(self, rf: RemoteFile, data) -> pq.ParquetFile:
        try:
            return pq.ParquetFile(pa.BufferReader(pa.py_buffer(data)))
        except (pa.ArrowInvalid, OSError) as e:
            raise DeltaError(f"file {rf.id} is not a readable parquet file: {e}") from None

    def read_file(self, rf: RemoteFile) -> list[pa.Table]:
        """The logical rows of one file, deletion vector applied, one table per row group."""
        pf = self._open(rf, self.fetch(rf))
        keep = self.keep_mask(rf, pf.metadata.num_rows)
        deleted = None if keep is None else ~keep
        out = list(self.reader.read_parquet(pf, f"<file {rf.id}>", rf.partition_values, deleted))
        if self.on_file is not None:
            self.on_file(rf)
        return out

    # --- a snapshot -----------------------------------------------------------------------------
    def batches(self, files: list[RemoteFile], row_filter=None, limit: Optional[int] = None,
                batch_rows: int = 1 << 17) -> Iterator[pa.RecordBatch]:
        """Record batches of the files' rows in the files' order (`row_filter`: a tahoe.expressions
        expression rows must satisfy; `limit`: at most that many rows, later files not read)."""
        if limit is not None and row_filter is None:
            files = _enough(files, limit)
        if limit == 0:
            return
        left = limit
        for tables in ordered_map(self.read_file, files, self.workers, self.workers + 2):
            for t in tables:
                if row_filter is not None:
                    t = _apply_filter(t, row_filter)
                if left is not None:
                    if t.num_rows > left:
                        t = t.slice(0, left)
                    left -= t.num_rows
                for b in t.to_batches(max_chunksize=batch_rows):
                    if b.num_rows:
                        yield b
                if left is not None and left <= 0:
                    return

    def _prefetch(self, rf: RemoteFile) -> tuple[pq.ParquetFile, Optional[np.ndarray]]:
        pf = self._open(rf, self.fetch(rf))
        keep = self.keep_mask(rf, pf.metadata.num_rows)
        return pf, None if keep is None else ~keep

    def stream(self, files: list[RemoteFile], batch_rows: int = 1 << 17) -> Iterator[pa.RecordBatch]:
        """Record batches of the files' rows in the files' order, as `batches` without filter or
        limit, for a consumer that is itself one of several in parallel (a Spark task): files
        (and their deletion vectors) download `workers` at a time ahead of the one being read,
        and each is decoded in the consuming thread a piece of `batch_rows` rows at a time, as
        it is consumed, instead of whole files decoded ahead by the download threads."""
        for rf, (pf, deleted) in zip(files, ordered_map(self._prefetch, files, self.workers, self.workers + 1)):
            for t in self.reader.read_parquet(pf, f"<file {rf.id}>", rf.partition_values, deleted,
                                              batch_rows=batch_rows):
                for b in t.to_batches(max_chunksize=batch_rows):
                    if b.num_rows:
                        yield b
            if self.on_file is not None:
                self.on_file(rf)

    # --- change data ----------------------------------------------------------------------------
    def _read_change_file(self, rf: RemoteFile) -> dict:
        pf = self._open(rf, self.fetch(rf))
        rows = pa.concat_tables(list(self.reader.read_parquet(pf, f"<file {rf.id}>", rf.partition_values, None))) \
            if pf.metadata.num_row_groups else self.reader.out_schema.empty_table()
        out: dict[str, Any] = {"path": rf.id, "partitionValues": rf.partition_values, "dataChange": rf.data_change,
                               "deletionVector": rf.dv, "_rows": rows}
        if rf.kind == "cdc":
            if "_change_type" not in pf.schema_arrow.names:
                raise DeltaError(f"change file {rf.id} has no _change_type column")
            out["_change_types"] = pf.read(columns=["_change_type"]).column("_change_type").cast(pa.string())
        else:
            out["_keep"] = self.keep_mask(rf, rows.num_rows)
        if self.on_file is not None:
            self.on_file(rf)
        return out

    def changes(self, files: list[RemoteFile], timestamps_as_ms: bool,
                batch_rows: int = 1 << 17) -> Iterator[pa.RecordBatch]:
        """CDF record batches of the files (add/remove/cdc with version and timestamp), version
        by version. `_commit_timestamp` is int64 milliseconds when `timestamps_as_ms` (the
        parquet response format, as the official connector), else timestamp[us, UTC]."""
        schema = self.change_schema(timestamps_as_ms)
        order = sorted(range(len(files)), key=lambda i: (files[i].version if files[i].version is not None else -1, i))
        ordered = [files[i] for i in order]
        src = _Prepared()
        current: Optional[VersionChanges] = None

        def flush(vc: VersionChanges):
            for t in version_change_rows(src, vc):
                if timestamps_as_ms:
                    ts = t.column("_commit_timestamp").cast(pa.int64())
                    t = t.set_column(t.num_columns - 1, "_commit_timestamp",
                                     pc.divide(ts, pa.scalar(1000, pa.int64())))
                t = t.cast(schema)
                for b in t.to_batches(max_chunksize=batch_rows):
                    if b.num_rows:
                        yield b

        for rf, action in zip(ordered, ordered_map(self._read_change_file, ordered, self.workers, self.workers + 2)):
            if rf.version is None:
                raise DeltaError(f"change file {rf.id} has no version")
            if current is None or current.version != rf.version:
                if current is not None:
                    yield from flush(current)
                current = VersionChanges(rf.version, int(rf.timestamp or 0))
            {"add": current.adds, "remove": current.removes, "cdc": current.cdcs}[rf.kind].append(action)
        if current is not None:
            yield from flush(current)

    def change_schema(self, timestamps_as_ms: bool) -> pa.Schema:
        s = change_schema(self.reader.out_schema)
        if timestamps_as_ms:
            s = s.set(s.get_field_index("_commit_timestamp"), pa.field("_commit_timestamp", pa.int64()))
        return s


class _Prepared:
    """`ChangeFiles` over actions whose rows were read ahead (by `ScanReader._read_change_file`)."""

    def rows(self, action: dict) -> pa.Table:
        return action["_rows"]

    def change_types(self, action: dict) -> pa.Array:
        return action["_change_types"]

    def keep(self, action: dict, num_rows: int) -> np.ndarray:
        k = action.get("_keep")
        return np.ones(num_rows, dtype=bool) if k is None else k


def _enough(files: list[RemoteFile], limit: int) -> list[RemoteFile]:
    """The leading files that hold at least `limit` rows by their stats (all of them when the
    stats do not tell)."""
    total = 0
    for i, f in enumerate(files):
        if total >= limit:
            return files[:i]
        n = f.live_records
        if n is None:
            return files
        total += n
    return files


def _apply_filter(t: pa.Table, expr) -> pa.Table:
    """The rows of `t` where the hints' expression is TRUE (tahoe.expressions semantics)."""
    from ..expressions import matches
    from .predicates import PredicateError

    try:
        return t.filter(matches(expr, t))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, DeltaError) as e:
        raise PredicateError(f"cannot apply the predicate hints to the rows: {e}") from None

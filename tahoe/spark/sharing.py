"""The `deltaSharing` Python data source: shared tables in Spark with no JVM jar (`register(spark)`, or
`tahoe.spark.register`, which registers `delta` too).

  1. Options are the official Spark connector's (`DeltaSharingOptions`), checked by `_Conf`; any other option,
     or a streaming option in a batch read, is refused by name.
  2. Reads: the driver asks the server for the files (pushed filters sent as `jsonPredicateHints`) and packs
     them into input partitions of about 128 MB; executors read them with `tahoe.sharing.reader`.
  3. Change data has `_change_type`, `_commit_version` and `_commit_timestamp`, as the official connector.
  4. Streaming as the official `DeltaSharingSource`: offsets `{sourceVersion, tableId, tableVersion, index,
     isStartingVersion}`, a pure function of the table's history; `Trigger.AvailableNow` supported.
  5. A version that removes files fails the stream unless `ignoreDeletes`, `ignoreChanges` or
     `skipChangeCommits` (`_filter_changes`)."""

from __future__ import annotations

import json
import re
import time
from typing import Any, Iterator, Optional

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition

from ..errors import DeltaError
from ..protocol.geospatial import to_spark_arrow
from ..sharing.client import Request, parse_url
from ..sharing.model import DeltaSharingProfile, Table
from ..sharing.reader import RemoteFile, ScanReader, TableInfo, UrlBook, remote_files
from ..sharing.rest import RestClient
from .options import PUSHDOWN_OPTION as _PUSHDOWN_OPTION, SESSION_TIME_ZONE_OPTION as _TIME_ZONE_OPTION
from .scan import pack_by_size

__all__ = ["DeltaSharingDataSource", "DefaultSource", "register", "SharingOptionError"]

_MAX_FILES_DEFAULT = 1000
_MAX_VERSIONS_PER_RPC_DEFAULT = 100
_VERSION_POLL_SECONDS = 1.0
_EXECUTOR_THREADS = 2

_CREDENTIAL_OPTIONS = {"sharecredentialsversion": "shareCredentialsVersion", "sharecredentialstype": "type",
                       "endpoint": "endpoint", "tokenendpoint": "tokenEndpoint", "clientid": "clientId",
                       "clientsecret": "clientSecret", "scope": "scope", "bearertoken": "bearerToken",
                       "expirationtime": "expirationTime"}
_COMMON = {"path", "responseformat"} | set(_CREDENTIAL_OPTIONS)
_BATCH = {"versionasof", "timestampasof"}
_CDF = {"readchangefeed", "readchangedata", "startingversion", "startingtimestamp", "endingversion",
        "endingtimestamp"}
_STREAM = {"startingversion", "startingtimestamp", "maxfilespertrigger", "maxbytespertrigger", "maxversionsperrpc",
           "ignoredeletes", "ignorechanges", "skipchangecommits", "readchangefeed", "readchangedata"}
_NAMES = {n.lower(): n for n in [
    "path", "responseFormat", "versionAsOf", "timestampAsOf", "readChangeFeed", "readChangeData", "startingVersion",
    "startingTimestamp", "endingVersion", "endingTimestamp", "maxFilesPerTrigger", "maxBytesPerTrigger",
    "maxVersionsPerRpc", "ignoreDeletes", "ignoreChanges", "skipChangeCommits", "shareCredentialsVersion",
    "shareCredentialsType", "endpoint", "tokenEndpoint", "clientId", "clientSecret", "scope", "bearerToken",
    "expirationTime"]}


class SharingOptionError(DeltaError, ValueError):
    """An option of `format("deltaSharing")` that is unknown, misplaced or has a bad value."""


def _bool(v: Any, name: str) -> bool:
    s = str(v).strip().lower()
    if s in ("true", "false"):
        return s == "true"
    raise SharingOptionError(f"Invalid value '{v}' for option '{name}', must be 'true' or 'false'")


def _nonneg(v: Any, name: str, positive: bool = False) -> int:
    try:
        n = int(str(v).strip())
    except ValueError:
        n = -1
    if n < (1 if positive else 0):
        raise SharingOptionError(f"Invalid value '{v}' for option '{name}', must be "
                                 f"{'a positive integer' if positive else 'an integer greater than or equal to zero'}")
    return n


_SIZE = re.compile(r"^\s*(\d+)\s*([kmgtp]?)b?\s*$", re.I)


def _bytes(v: Any, name: str) -> int:
    m = _SIZE.match(str(v))
    if not m or int(m.group(1)) <= 0:
        raise SharingOptionError(f"Invalid value '{v}' for option '{name}', must be a size configuration such as '10g'")
    return int(m.group(1)) * (1024 ** " kmgtp".index(m.group(2).lower() or " "))


def _timestamp(v: Any, name: str, time_zone: str | None = None) -> str:
    """A timestamp option as the ISO-8601 UTC string the protocol takes (`2022`, `2022-01-01`,
    `2022-01-01 00:00:00`, with or without an offset; without one it is wall-clock time in the
    session time zone, as the official connector casts it — `tahoe.protocol.timestamps`)."""
    from ..protocol.timestamps import to_instant

    try:
        d = to_instant(str(v).strip(), time_zone)
    except (ValueError, TypeError):
        raise SharingOptionError(f"The provided timestamp ({v}) for option '{name}' cannot be converted to a valid "
                                 f"timestamp") from None
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond // 1000:03d}Z"


class _Conf:
    """The options of one load, checked (names case-insensitive). Batch: `versionAsOf`, `timestampAsOf`,
    `readChangeFeed` (`readChangeData`) with `startingVersion`/`startingTimestamp`/`endingVersion`/
    `endingTimestamp`. Streaming: `startingVersion` (or `latest`), `startingTimestamp`, `maxFilesPerTrigger`
    (1000), `maxBytesPerTrigger`, `maxVersionsPerRpc` (100), `ignoreDeletes`, `ignoreChanges`,
    `skipChangeCommits`, `readChangeFeed`. Both: `responseFormat` (unset: the server chooses) and the profile
    as options (`shareCredentialsVersion`, `shareCredentialsType`, `endpoint`, `bearerToken`,
    `expirationTime`, `tokenEndpoint`, `clientId`, `clientSecret`, `scope`; the path then `share.schema.table`)."""

    def __init__(self, options: Any, mode: str):
        """`mode`: "batch", "stream", or "any" (the schema, asked before Spark says which)."""
        opts = {str(k).lower(): v for k, v in dict(options).items()}
        # set by tahoe's load wrapper where it turned the session's filter pushdown on
        # (tahoe.spark.calls): only then may the batch reader take pushed filters
        self.pushdown = str(opts.pop(_PUSHDOWN_OPTION.lower(), "")).strip().lower() == "true"
        # set by tahoe's load wrapper: the session time zone, where zone-less timestamps are read
        tz = opts.pop(_TIME_ZONE_OPTION.lower(), None)
        streaming = mode == "stream"
        allowed = _COMMON | _STREAM | _BATCH | _CDF if mode == "any" else \
            _COMMON | (_STREAM if streaming else _BATCH | _CDF)
        for k in opts:
            if k not in _NAMES:
                raise SharingOptionError(f"unknown option '{k}' for format('deltaSharing'); known options: "
                                         f"{', '.join(sorted(_NAMES.values()))}")
            if k not in allowed:
                raise SharingOptionError(f"option '{_NAMES[k]}' applies only to "
                                         f"{'batch' if streaming else 'streaming'} reads of format('deltaSharing')")
        self.raw = opts
        path = opts.get("path")
        if not path:
            raise SharingOptionError("format('deltaSharing') needs a table path: "
                                     ".load('<profile-file>#<share>.<schema>.<table>')")
        self.profile, self.table = _profile_and_table(str(path), opts)
        fmt = opts.get("responseformat")
        if fmt is not None and str(fmt) not in ("parquet", "delta"):
            raise SharingOptionError(f"Invalid value '{fmt}' for option 'responseFormat', The user input must be one "
                                     f"of:{{parquet, delta}}.")
        self.formats = str(fmt) if fmt is not None else "delta,parquet"
        self.cdf = _bool(opts.get("readchangefeed", "false"), "readChangeFeed") or \
            _bool(opts.get("readchangedata", "false"), "readChangeData")
        self.version_as_of = _nonneg(opts["versionasof"], "versionAsOf") if "versionasof" in opts else None
        self.timestamp_as_of = _timestamp(opts["timestampasof"], "timestampAsOf", tz) if "timestampasof" in opts else None
        if self.version_as_of is not None and self.timestamp_as_of is not None:
            raise SharingOptionError("Please either provide 'versionAsOf' or 'timestampAsOf'.")
        sv = opts.get("startingversion")
        self.starting_latest = str(sv).strip().lower() == "latest" if sv is not None else False
        self.starting_version = None if sv is None or self.starting_latest else _nonneg(sv, "startingVersion")
        self.starting_timestamp = _timestamp(opts["startingtimestamp"], "startingTimestamp", tz) \
            if "startingtimestamp" in opts else None
        if sv is not None and self.starting_timestamp is not None:
            raise SharingOptionError("Please either provide 'startingVersion' or 'startingTimestamp'.")
        self.ending_version = _nonneg(opts["endingversion"], "endingVersion") if "endingversion" in opts else None
        self.ending_timestamp = _timestamp(opts["endingtimestamp"], "endingTimestamp", tz) \
            if "endingtimestamp" in opts else None
        if mode == "batch":
            if self.cdf and (self.version_as_of is not None or self.timestamp_as_of is not None):
                raise SharingOptionError("versionAsOf/timestampAsOf cannot be combined with readChangeFeed")
            if not self.cdf and (_CDF - {"readchangefeed", "readchangedata"}) & set(opts):
                raise SharingOptionError("startingVersion, startingTimestamp, endingVersion and endingTimestamp "
                                         "need readChangeFeed=true in a batch read")
            if self.cdf and self.starting_version is None and self.starting_timestamp is None:
                raise SharingOptionError("readChangeFeed needs startingVersion or startingTimestamp")
            if self.starting_latest:
                raise SharingOptionError("startingVersion 'latest' applies only to streaming reads")
        self.max_files = _nonneg(opts["maxfilespertrigger"], "maxFilesPerTrigger", True) \
            if "maxfilespertrigger" in opts else None
        self.max_bytes = _bytes(opts["maxbytespertrigger"], "maxBytesPerTrigger") if "maxbytespertrigger" in opts else None
        self.max_versions = _nonneg(opts["maxversionsperrpc"], "maxVersionsPerRpc", True) \
            if "maxversionsperrpc" in opts else _MAX_VERSIONS_PER_RPC_DEFAULT
        self.ignore_deletes = _bool(opts.get("ignoredeletes", "false"), "ignoreDeletes")
        self.ignore_changes = _bool(opts.get("ignorechanges", "false"), "ignoreChanges")
        self.skip_change_commits = _bool(opts.get("skipchangecommits", "false"), "skipChangeCommits")


def _profile_and_table(path: str, opts: dict) -> tuple[DeltaSharingProfile, Table]:
    creds = {_CREDENTIAL_OPTIONS[k]: v for k, v in opts.items() if k in _CREDENTIAL_OPTIONS}
    if creds:
        name = path.rsplit("#", 1)[-1]
        parts = name.split(".")
        if len(parts) != 3 or not all(parts):
            raise SharingOptionError(f"Invalid table path '{path}': with credentials given as options the path is "
                                     f"'<share>.<schema>.<table>'")
        doc = dict(creds)
        if "shareCredentialsVersion" in doc:
            doc["shareCredentialsVersion"] = int(doc["shareCredentialsVersion"])
        else:
            doc["shareCredentialsVersion"] = 2 if doc.get("type") not in (None, "bearer_token") else 1
        return DeltaSharingProfile.from_json(doc), Table(parts[2], parts[0], parts[1])
    try:
        profile, share, schema, table = parse_url(path)
    except ValueError as e:
        raise SharingOptionError(str(e)) from None
    return DeltaSharingProfile.of(profile), Table(table, share, schema)


def _spark_schema(info: TableInfo, cdf: bool):
    from pyspark.sql.types import LongType, StringType, StructField, StructType as SparkStruct, TimestampType

    from ..protocol.schema import StructType, is_void
    from .types import to_spark_schema

    s = to_spark_schema(StructType([f for f in info.schema.fields if not is_void(f.type)]), strip_metadata=True,
                        nullable=True)
    if cdf:
        s = SparkStruct(list(s.fields) + [StructField("_change_type", StringType(), True),
                                          StructField("_commit_version", LongType(), True),
                                          StructField("_commit_timestamp", TimestampType(), True)])
    return s


class DeltaSharingDataSource(DataSource):
    """`format("deltaSharing")` (see the module docstring)."""

    @classmethod
    def name(cls) -> str:
        return "deltaSharing"

    def schema(self):
        conf = _Conf(self.options, "any")
        rest = RestClient(conf.profile)
        try:
            if not conf.cdf and (conf.version_as_of is not None or conf.timestamp_as_of is not None):
                # the schema of that version: its protocol and metaData lines (no files asked for)
                body = {"limitHint": 0}
                if conf.version_as_of is not None:
                    body["version"] = conf.version_as_of
                else:
                    body["timestamp"] = conf.timestamp_as_of
                resp = rest.query(conf.table, body, conf.formats)
                info = TableInfo.of(resp)
            else:
                resp = rest.metadata(conf.table, conf.formats if conf.formats != "parquet" else None)
                info = TableInfo.of(resp)
        finally:
            rest.close()
        return _spark_schema(info, conf.cdf)

    def reader(self, schema):
        conf = _Conf(self.options, "batch")
        return _FilteringBatchReader(conf, schema) if conf.pushdown else _BatchReader(conf, schema)

    def streamReader(self, schema):
        return _StreamReader(_Conf(self.options, "stream"), schema)


DefaultSource = DeltaSharingDataSource


class _Files(InputPartition):
    """What one task reads: files of one answer (and how to refresh their URLs)."""

    def __init__(self, files: list[RemoteFile], info: TableInfo, request: Request, refresh_token: Optional[str],
                 fmt: str, cdf: bool):
        super().__init__(None)
        self.files = files
        self.info = info
        self.request = request
        self.refresh_token = refresh_token
        self.fmt = fmt
        self.cdf = cdf


def _pack(files: list[RemoteFile], cdf: bool) -> list[list[RemoteFile]]:
    """Files grouped into partitions of about `PARTITION_BYTES` (`pack_by_size`, as Spark packs
    file splits); change data keeps each version's files together."""
    if cdf:
        groups: dict[int, list[RemoteFile]] = {}
        for f in files:
            groups.setdefault(f.version if f.version is not None else -1, []).append(f)
        pieces = [(g, sum(f.size for f in g)) for _, g in sorted(groups.items())]
    else:
        pieces = [([f], f.size) for f in files]
    return [[f for g in part for f in g] for part in pack_by_size(pieces)]


def _read_partition(p: _Files, spark_schema_json: str) -> Iterator:
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType as SparkStruct

    target = to_arrow_schema(SparkStruct.fromJson(json.loads(spark_schema_json)), timezone="UTC")
    book = UrlBook(p.files, p.request.refresher(p.refresh_token, p.fmt))
    reader = ScanReader(p.info, book, workers=_EXECUTOR_THREADS)
    if p.cdf:
        order = {f.id: i for i, f in enumerate(p.files)}
        batches = reader.changes(sorted(p.files, key=lambda f: (f.version or 0, order[f.id])), timestamps_as_ms=False)
    else:
        batches = reader.stream(p.files)
    import pyarrow as pa

    for b in batches:
        if b.schema.equals(target):
            yield b
            continue
        t = pa.Table.from_batches([b])
        t = t.select(target.names) if target.names else t
        yield from to_spark_arrow(t, target).cast(target).to_batches()
    reader.fetcher.close()


class _BatchReader(DataSourceReader):
    def __init__(self, conf: _Conf, schema):
        self.conf = conf
        self.schema_json = schema.json()
        self.hints: list[dict] = []

    def _request(self) -> Request:
        c = self.conf
        if c.cdf:
            args = {"startingVersion": c.starting_version, "startingTimestamp": c.starting_timestamp,
                    "endingVersion": c.ending_version, "endingTimestamp": c.ending_timestamp}
            return Request(c.profile, c.table, "changes", {k: v for k, v in args.items() if v is not None}, c.formats)
        body: dict[str, Any] = {}
        if self.hints:
            tree = self.hints[0] if len(self.hints) == 1 else {"op": "and", "children": list(self.hints)}
            body["jsonPredicateHints"] = json.dumps(tree)
        if c.version_as_of is not None:
            body["version"] = c.version_as_of
        elif c.timestamp_as_of is not None:
            body["timestamp"] = c.timestamp_as_of
        else:
            body["includeRefreshToken"] = True
        return Request(c.profile, c.table, "query", body, c.formats)

    def partitions(self):
        req = self._request()
        resp = req.run()
        info = TableInfo.of(resp)
        files, _ = remote_files(resp)
        parts = [_Files(g, info, req, resp.refresh_token, resp.format, self.conf.cdf) for g in _pack(files, self.conf.cdf)]
        return parts or [_Files([], info, req, None, resp.format, self.conf.cdf)]

    def read(self, partition: _Files):
        return _read_partition(partition, self.schema_json)


class _FilteringBatchReader(_BatchReader):
    """A batch reader that takes Spark's pushed filters — only where the session has filter
    pushdown on (Spark refuses a reader with `pushFilters` otherwise), which tahoe's load wrapper
    sees to and says (`_PUSHDOWN_OPTION`); elsewhere (a session whose driver never ran tahoe's
    calls) the plain reader reads without hints."""

    def pushFilters(self, filters):
        # Spark applies every filter to the rows anyway; the ones that convert go to the server as
        # jsonPredicateHints (file pruning)
        for f in filters:
            node = filter_to_json(f, self.schema_json)
            if node is not None:
                self.hints.append(node)
            yield f


# --- pushed filters -> JSON predicate hints -----------------------------------------------------------

def filter_to_json(f: Any, schema_json: str) -> Optional[dict]:
    """A Spark pushed filter as a JSON predicate node (spec "JSON predicates for Filtering") —
    through tahoe's expression engine: `tahoe.spark.skipping.pushed_filter`, then
    `tahoe.expressions.to_sharing_json` over the read schema (`schema_json`, Spark's JSON) — or
    None when it has no exact JSON form (such filters are simply not sent). Columns whose values
    JSON predicates cannot say exactly are left out: decimals (only `double` exists) and
    TIMESTAMP_NTZ (a `timestamp` is an instant). Imported lazily: the executors never need it."""
    from ..errors import AnalysisException
    from ..expressions.sharing_json import to_sharing_json
    from ..protocol.schema import TIMESTAMP_NTZ, DecimalType, StructType
    from .skipping import pushed_filter

    expr = pushed_filter(f)
    if expr is None:
        return None
    schema = StructType.from_json(schema_json)
    types = {fd.name: fd.type for fd in schema.fields if not isinstance(fd.type, DecimalType) and fd.type != TIMESTAMP_NTZ}
    try:
        return to_sharing_json(expr, types)
    except AnalysisException:
        return None


# --- streaming ----------------------------------------------------------------------------------------

class _Fetched:
    """One server answer of the stream: what reading its files needs."""

    def __init__(self, info: TableInfo, request: Request, resp):
        self.info, self.request, self.resp = info, request, resp


class _Item:
    """One step of the stream: a file of a version (`index` its place among the version's files
    ordered by id), or a version's marker (index -1, no file) so that versions without files
    still move the offset. Its position is (version, index)."""
    __slots__ = ("version", "index", "file", "is_last", "snapshot", "src")

    def __init__(self, version: int, index: int, file: Optional[RemoteFile], is_last: bool, snapshot: bool,
                 src: _Fetched):
        self.version, self.index, self.file, self.is_last, self.snapshot, self.src = \
            version, index, file, is_last, snapshot, src


def _offset(table_id: str, version: int, index: int, starting: bool) -> dict:
    return {"sourceVersion": 1, "tableId": table_id, "tableVersion": int(version), "index": int(index),
            "isStartingVersion": bool(starting)}


try:  # Trigger.AvailableNow (PySpark >= 4.2)
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow as _AvailableNow
except ImportError:  # pragma: no cover
    _AvailableNow = object  # type: ignore[misc,assignment]


class _StreamReader(DataSourceStreamReader, _AvailableNow):
    def __init__(self, conf: _Conf, schema):
        self.conf = conf
        self.schema_json = schema.json()
        self._rest = RestClient(conf.profile)
        md = self._rest.metadata(conf.table, conf.formats if conf.formats != "parquet" else None)
        self.info = TableInfo.of(md)
        self.table_id = str(self.info.metadata.get("id") or "")
        self.schema_string = self.info.metadata.get("schemaString")
        self._latest: Optional[int] = None
        self._latest_at = 0.0
        self._frozen: Optional[int] = None
        self._cache: dict[tuple, list[_Item]] = {}

    # --- offsets ------------------------------------------------------------------------------
    def _latest_version(self) -> int:
        if self._frozen is not None:
            return self._frozen
        now = time.monotonic()
        if self._latest is None or now - self._latest_at >= _VERSION_POLL_SECONDS:
            self._latest = self._rest.table_version(self.conf.table)
            self._latest_at = now
        return self._latest

    def prepareForTriggerAvailableNow(self) -> None:
        self._latest = None
        self._frozen = self._latest_version()

    def initialOffset(self) -> dict:
        c = self.conf
        if c.starting_version is not None:
            return _offset(self.table_id, c.starting_version, -1, False)
        if c.starting_timestamp is not None:
            return _offset(self.table_id, self._rest.table_version(c.table, c.starting_timestamp), -1, False)
        if c.starting_latest:
            return _offset(self.table_id, self._latest_version() + 1, -1, False)
        return _offset(self.table_id, self._latest_version(), -1, True)

    def _check(self, off: dict) -> dict:
        if int(off.get("sourceVersion", 0)) > 1:
            raise DeltaError(f"the checkpoint's offset format {off.get('sourceVersion')} is newer than this "
                             f"reader's (1)")
        if self.table_id and off.get("tableId") and off["tableId"] != self.table_id:
            t = self.conf.table
            raise DeltaError(f"the checkpoint belongs to table id {off['tableId']}, not to the shared table "
                             f"{t.share}.{t.schema}.{t.name} (id {self.table_id}): use a new checkpoint location")
        return off

    def getDefaultReadLimit(self):
        from pyspark.sql.streaming.datasource import ReadMaxBytes, ReadMaxFiles

        if self.conf.max_files is None and self.conf.max_bytes is not None:
            return ReadMaxBytes(self.conf.max_bytes)
        return ReadMaxFiles(self.conf.max_files or _MAX_FILES_DEFAULT)

    def latestOffset(self, start: dict, limit) -> dict:
        """The offset after the items `limit` admits (at least one file; a version's cdc files
        all together), or `start` when nothing is new."""
        from pyspark.sql.streaming.datasource import ReadMaxBytes, ReadMaxFiles

        start = self._check(start)
        items = self._after(start)
        max_files = max_bytes = None
        if isinstance(limit, ReadMaxFiles):
            max_files, max_bytes = limit.max_files, self.conf.max_bytes
        elif isinstance(limit, ReadMaxBytes):
            max_files, max_bytes = self.conf.max_files, limit.max_bytes
        files = size = 0
        last = None
        i = 0
        while i < len(items):
            it = items[i]
            if it.file is not None:
                if files and ((max_files is not None and files + 1 > max_files)
                              or (max_bytes is not None and size + it.file.size > max_bytes)):
                    break
                files += 1
                size += it.file.size
                while it.file.kind == "cdc" and i + 1 < len(items) and items[i + 1].file is not None \
                        and items[i + 1].file.kind == "cdc" and items[i + 1].version == it.version:
                    i += 1
                    it = items[i]
                    files += 1
                    size += it.file.size
            last = it
            i += 1
        if last is None:
            return start
        if last.is_last:
            return _offset(self.table_id, last.version + 1, -1, False)
        return _offset(self.table_id, last.version, last.index, last.snapshot)

    # --- what lies between offsets ------------------------------------------------------------
    def _after(self, start: dict, end: Optional[dict] = None) -> list[_Item]:
        """The items after `start` (exclusive) that the server has now, and — with `end` — at or
        before it."""
        v, i, starting = int(start["tableVersion"]), int(start["index"]), bool(start["isStartingVersion"])
        out: list[_Item] = []
        if starting:
            out += [it for it in self._snapshot(v) if it.file is None or it.index > i]
            v, i = v + 1, -1
        top = self._latest_version()
        if end is not None:
            top = min(top, int(end["tableVersion"]))
        lo = v
        while lo <= top:
            hi = min(top, lo + self.conf.max_versions - 1)
            out += [it for it in self._changes(lo, hi)
                    if it.version > v or (it.version == v and (it.file is None or it.index > i))]
            lo = hi + 1
        if end is not None:
            pos = (int(end["tableVersion"]), int(end["index"]))
            out = [it for it in out if (it.version, it.index) <= pos]
        return out

    def _snapshot(self, version: int) -> list[_Item]:
        key = ("snapshot", version)
        if key not in self._cache:
            req = Request(self.conf.profile, self.conf.table, "query", {"version": version}, self.conf.formats)
            resp = req.run(self._rest)
            src = _Fetched(TableInfo.of(resp), req, resp)
            self._check_schema(src.info.metadata.get("schemaString"), version)
            files, _ = remote_files(resp)
            files.sort(key=lambda f: f.id)
            items = [_Item(version, n, f, n + 1 == len(files), True, src) for n, f in enumerate(files)]
            self._remember(key, items or [_Item(version, -1, None, True, True, src)])
        return self._cache[key]

    def _changes(self, lo: int, hi: int) -> list[_Item]:
        key = ("changes", lo, hi)
        if key in self._cache:
            return self._cache[key]
        c = self.conf
        kind = "changes" if c.cdf else "query"
        req = Request(c.profile, c.table, kind, {"startingVersion": lo, "endingVersion": hi}, c.formats)
        resp = req.run(self._rest)
        src = _Fetched(TableInfo.of(resp), req, resp)
        files, metas = remote_files(resp)
        for m in [resp.metadata] + metas:
            self._check_schema((m.get("deltaMetadata") or m).get("schemaString"), m.get("version", lo))
        by_version: dict[int, list[RemoteFile]] = {}
        for f in files:
            if f.version is None:
                raise DeltaError(f"the server sent file {f.id} of a version range without its version")
            by_version.setdefault(int(f.version), []).append(f)
        items: list[_Item] = []
        for v in range(lo, hi + 1):
            fs = by_version.get(v, [])
            if not c.cdf:
                fs = self._filter_changes(v, fs)
            elif any(f.kind == "cdc" for f in fs):
                fs = [f for f in fs if f.kind == "cdc"]
            fs.sort(key=lambda f: (f.id, f.kind))
            items.append(_Item(v, -1, None, not fs, False, src))
            items += [_Item(v, n, f, n + 1 == len(fs), False, src) for n, f in enumerate(fs)]
        return self._remember(key, items)

    def _filter_changes(self, version: int, files: list[RemoteFile]) -> list[RemoteFile]:
        """The added files of a version the stream reads (module docstring, rule 5): removes fail
    the stream unless `ignoreDeletes` (versions that only remove), `ignoreChanges` (added files read again) or
    `skipChangeCommits` (the version skipped)."""
        adds = [f for f in files if f.kind == "add"]
        removes = [f for f in files if f.kind == "remove"]
        if not removes:
            return adds
        c = self.conf
        if c.skip_change_commits:
            return []
        if adds and not c.ignore_changes:
            raise DeltaError(f"Detected a data update (for example a rewrite) in the source table at version "
                             f"{version}. This is currently not supported. If you'd like to ignore updates, set the "
                             f"option 'skipChangeCommits' to 'true'.")
        if not adds and not (c.ignore_deletes or c.ignore_changes):
            raise DeltaError(f"Detected deleted data from the source table at version {version}. This is currently "
                             f"not supported. If you'd like to ignore deletes, set the option 'ignoreDeletes' to "
                             f"'true'.")
        return adds

    def _check_schema(self, schema_string: Optional[str], version: Any) -> None:
        """A later schema must keep every column of the stream's schema with its type (added
        columns are fine: they are not read)."""
        if schema_string is None or self.schema_string is None or schema_string == self.schema_string:
            return
        from ..protocol.schema import StructType

        new = {f.name.lower(): f.type for f in StructType.from_json(schema_string).fields}
        for f in StructType.from_json(self.schema_string).fields:
            if new.get(f.name.lower()) != f.type:
                raise DeltaError(f"the shared table's schema at version {version} no longer has column {f.name} "
                                 f"as {f.type}: the stream cannot read it; restart the query with a new checkpoint")

    def _remember(self, key: tuple, items: list[_Item]) -> list[_Item]:
        if len(self._cache) > 32:
            self._cache.clear()
        self._cache[key] = items
        return items

    # --- batches ------------------------------------------------------------------------------
    def partitions(self, start: dict, end: dict):
        start, end = self._check(start), self._check(end)
        if start == end:
            return []
        groups: dict[int, tuple[_Fetched, list[RemoteFile]]] = {}
        for it in self._after(start, end):
            if it.file is not None:
                groups.setdefault(id(it.src), (it.src, []))[1].append(it.file)
        return [_Files(g, src.info, src.request, src.resp.refresh_token, src.resp.format, self.conf.cdf)
                for src, files in groups.values() for g in _pack(files, self.conf.cdf)]

    def __getstate__(self):
        # what read() needs in the executors: not the driver's client, cache or polling state
        return {"conf": self.conf, "schema_json": self.schema_json}

    def read(self, partition: _Files):
        return _read_partition(partition, self.schema_json)

    def commit(self, end: dict) -> None:
        v = int(end["tableVersion"])
        done = [k for k in self._cache
                if (k[0] == "snapshot" and not end["isStartingVersion"]) or (k[0] == "changes" and k[2] < v)]
        for k in done:
            del self._cache[k]

    def stop(self) -> None:
        self._rest.close()


_registered: set[int] = set()


def register(spark) -> None:
    """Register `format("deltaSharing")` on a session (once per session)."""
    key = id(spark)
    if key in _registered:
        return
    from .session import configure

    configure(spark)
    spark.dataSource.register(DeltaSharingDataSource)
    _registered.add(key)

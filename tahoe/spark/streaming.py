"""Structured Streaming on `format("delta")`: the table as a streaming source (`DeltaStreamReader`, delta-spark's
DeltaSource semantics) and as an exactly-once sink (`DeltaStreamWriter`).

  1. The snapshot first, then each later version's `dataChange` adds; `startingVersion` (or `latest`) /
     `startingTimestamp` start at a version's changes; `excludeRegex` leaves out matching paths.
  2. Offsets are delta-spark's DeltaSourceOffset JSON, a pure function of the log; another table id fails
     with DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE.
  3. A batch admits `maxFilesPerTrigger` (1000) files and about `maxBytesPerTrigger`; `AvailableNow` supported.
  4. A version removing data fails (DELTA_SOURCE_IGNORE_DELETE / DELTA_SOURCE_TABLE_IGNORE_CHANGES) unless
     `ignoreDeletes`, `ignoreChanges` / `ignoreFileDeletion` or `skipChangeCommits`.
  5. Schema changes: see `DeltaStreamReader`; `readChangeFeed` streams change rows; cleaned-up versions fail
     (DELTA_MISSING_FILES_UNEXPECTED_VERSION) unless `failOnDataLoss=false`.
  6. The sink commits a micro-batch as one `STREAMING UPDATE` with a `txn` action, once; modes append, complete.
  7. Two sinks, one commit (`commit_micro_batch`): `DeltaStreamWriter` (the Python data source: rows written by
     pyarrow in Python workers) and `NativeStreamSink` (a `foreachBatch` function the `start` wrapper installs on
     a classic session whose JVM reaches the table: Spark's own parquet writer, `tahoe.spark.write`)."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Iterator, Optional

from pyspark.sql.datasource import DataSourceStreamArrowWriter, DataSourceStreamReader

from ..errors import DeltaError, StreamingSourceError, VersionNotFoundError
from ..log import DeltaLog
from ..protocol.filenames import LogFileKind, commit_file_name
from ..read.changes import (
    ChangeUnit, VersionChanges, parse_version_changes, starting_version_for_timestamp, version_units,
)
from .scan import ChangesPartition, TableFiles, change_partitions, spark_read_schema
from .options import stream_read_options

__all__ = ["DeltaStreamReader", "DeltaStreamWriter", "NativeStreamSink", "NativeStreamSource", "checkpoint_query_id", "source_offset", "QUERY_ID_PROPERTY", "BATCH_ID_PROPERTY"]

_MAX_FILES_DEFAULT = 1000
QUERY_ID_PROPERTY = "sql.streaming.queryId"     # Spark's StreamExecution.QUERY_ID_KEY (a task property)
BATCH_ID_PROPERTY = "streaming.sql.batchId"     # Spark's MicroBatchExecution.BATCH_ID_KEY

try:  # Trigger.AvailableNow (PySpark >= 4.2)
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow as _AvailableNow
except ImportError:  # pragma: no cover
    _AvailableNow = object  # type: ignore[misc,assignment]


def source_offset(table_id: str, version: int, index: int, is_starting_version: bool) -> dict:
    """A DeltaSourceOffset as delta-spark serializes it: the last file read is the `index`-th action of
    version `version`'s commit (of the snapshot when `is_starting_version`); -1 is before the first."""
    return {"sourceVersion": 1, "reservoirId": table_id, "reservoirVersion": int(version), "index": int(index),
            "isStartingVersion": bool(is_starting_version)}


@dataclasses.dataclass
class _Item:
    """One step of the stream: a file (an add action, or a change unit) at position (version,
    index), or a version's marker (index -1, nothing to read) so that versions without files still
    move the offset; `error` — the stream must stop here (rules 4, 5)."""
    version: int
    index: int
    action: Optional[dict] = None
    unit: Optional[ChangeUnit] = None
    is_last: bool = False
    snapshot: bool = False
    error: Optional[Exception] = None

    @property
    def readable(self) -> bool:
        return self.action is not None or self.unit is not None

    @property
    def size(self) -> int:
        a = self.action if self.action is not None else (self.unit.action if self.unit is not None else {})
        return int(a.get("size") or 0)


class DeltaStreamReader(DataSourceStreamReader, _AvailableNow):
    """`spark.readStream.format("delta")` (see the module docstring). Schema: the stream reads in the table's
    schema when it was created; a metaData action met on the way is compared with it:

      1. a column renamed or dropped under column mapping stops the stream with
         DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE_USE_SCHEMA_LOG (no `schemaTrackingLocation`: restart with a
         new checkpoint location and a startingVersion after the change);
      2. data the stream's schema cannot read stops it with DELTA_SCHEMA_CHANGED_WITH_VERSION
         (DELTA_SCHEMA_CHANGED_WITH_STARTING_OPTIONS when started with startingVersion / startingTimestamp);
      3. the failure is raised only once no earlier version is left to read."""

    def __init__(self, options: dict, schema):
        o = stream_read_options(options)
        self.opts = o
        self.cdf = o["cdf"]
        self.log = DeltaLog.for_table(o["path"], o["storage_options"])
        snap = self.log.snapshot()
        if spark_read_schema(snap, self.cdf).json() != schema.json():
            raise StreamingSourceError(
                f"Detected schema change: streaming source schema: {schema.simpleString()}, data schema: "
                f"{spark_read_schema(snap, self.cdf).simpleString()}. The table's schema changed after the streaming "
                f"DataFrame was created: create it again (spark.readStream...load()) and start the query.",
                "DELTA_SCHEMA_CHANGED")
        self.read_snapshot = snap
        self.table_id = snap.metadata.id
        data = [f.name for f in schema.fields if not (self.cdf and f.name in ("_change_type", "_commit_version",
                                                                              "_commit_timestamp"))]
        self.files = TableFiles(snap, o["storage_options"], schema, data, time_zone=o["time_zone"])
        self._exclude = re.compile(o["exclude_regex"]) if o["exclude_regex"] else None
        self._frozen: Optional[int] = None
        self._versions: dict[int, list[_Item]] = {}
        self._snapshots: dict[int, list[_Item]] = {}
        self._stamps: dict[int, int] = {}
        self._checked_starts: set = set()

    def __getstate__(self):
        # what read() needs in the executors: not the driver's log, caches and options
        return {"files": self.files}

    # --- offsets --------------------------------------------------------------------------------
    def _latest_version(self) -> int:
        if self._frozen is not None:
            return self._frozen
        from ..log.segment import list_log

        commits = [f.version for f in list_log(self.log.store, self.log.log_dir, self.read_snapshot.version)
                   if f.name.kind == LogFileKind.COMMIT]
        return commits[-1] if commits else self.read_snapshot.version

    def prepareForTriggerAvailableNow(self) -> None:
        self._frozen = None
        self._frozen = self._latest_version()

    def initialOffset(self) -> dict:
        o = self.opts
        sv = o["starting_version"]
        if sv == "latest":
            return source_offset(self.table_id, self._latest_version() + 1, -1, False)
        if sv is not None:
            latest = self._latest_version()
            if sv > latest and not o["allow_out_of_range"]:
                raise VersionNotFoundError(
                    f"Cannot time travel Delta table to version {sv}. Available versions: [0, {latest}] "
                    f"(option startingVersion of the stream on {self.log.table_root})")
            return source_offset(self.table_id, sv, -1, False)
        if o["starting_timestamp"] is not None:
            v = starting_version_for_timestamp(self.log, o["starting_timestamp"], o["allow_out_of_range"],
                                               time_zone=o["time_zone"])
            return source_offset(self.table_id, v, -1, False)
        return source_offset(self.table_id, self.read_snapshot.version, -1, True)

    def _parse(self, off: dict) -> tuple[int, int, bool]:
        sv = int(off.get("sourceVersion", 1))
        if sv == 2 or sv < 1:
            raise StreamingSourceError(f"sourceVersion({sv}) is invalid", "DELTA_INVALID_SOURCE_VERSION")
        if sv > 3:
            raise StreamingSourceError(f"Unsupported format. Expected version should be smaller than or equal to 3 "
                                       f"but was {sv}. Please upgrade to newer version of Delta.",
                                       "DELTA_INVALID_FORMAT_FROM_SOURCE_VERSION")
        rid = off.get("reservoirId")
        if rid != self.table_id:
            raise StreamingSourceError(
                f"The streaming query was reading from an unexpected Delta table (id = '{self.table_id}'). It used to "
                f"read from another Delta table (id = '{rid}') according to checkpoint. This may happen when you "
                f"changed the code to read from a new table or you deleted and re-created a table. Please revert your "
                f"change or delete your streaming query checkpoint to restart from scratch.",
                "DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE")
        index = int(off["index"])
        if index == -100:   # delta-spark's in-memory BASE_INDEX, should a v3 offset carry it
            index = -1
        if index < -1:
            raise StreamingSourceError(f"the offset {json.dumps(off)} marks a schema change (index {index}), which "
                                       f"only delta-spark's schema tracking writes: use a new checkpoint",
                                       "DELTA_INVALID_SOURCE_VERSION")
        return int(off["reservoirVersion"]), index, bool(off["isStartingVersion"])

    def getDefaultReadLimit(self):
        from pyspark.sql.streaming.datasource import ReadMaxBytes, ReadMaxFiles

        if self.opts["max_files"] is None and self.opts["max_bytes"] is not None:
            return ReadMaxBytes(self.opts["max_bytes"])
        return ReadMaxFiles(self.opts["max_files"] or _MAX_FILES_DEFAULT)

    def latestOffset(self, start: dict, limit) -> dict:
        """The offset after what `limit` admits from `start` on (rule 3), or `start` when nothing
        is new."""
        from pyspark.sql.streaming.datasource import ReadMaxBytes, ReadMaxFiles

        v0, i0, s0 = self._parse(start)
        max_files = max_bytes = None
        if isinstance(limit, ReadMaxFiles):
            max_files, max_bytes = limit.max_files, self.opts["max_bytes"]
        elif isinstance(limit, ReadMaxBytes):
            max_files, max_bytes = self.opts["max_files"], limit.max_bytes
        files = size = 0
        last: Optional[_Item] = None
        current_version = None
        for it in self._after(v0, i0, s0):
            if it.error is not None:
                if last is None or self._offset_after(last) == self._offset_after_start(v0, i0, s0):
                    raise it.error   # nothing before it left to read
                break
            if it.readable:
                whole_version = self.cdf and not it.snapshot and it.version == current_version
                if files and not whole_version and ((max_files is not None and files >= max_files)
                                                    or (max_bytes is not None and size >= max_bytes)):
                    break
                files += 1
                size += it.size
                current_version = it.version
            last = it
        if last is None:
            return start
        return self._offset_after(last)

    def _offset_after(self, it: _Item) -> dict:
        if it.is_last:
            return source_offset(self.table_id, it.version + 1, -1, False)
        return source_offset(self.table_id, it.version, it.index, it.snapshot)

    def _offset_after_start(self, v: int, i: int, starting: bool) -> dict:
        return source_offset(self.table_id, v, i, starting)

    # --- what lies between offsets ----------------------------------------------------------------
    def _after(self, v: int, i: int, starting: bool, end: Optional[tuple[int, int, bool]] = None) -> Iterator[_Item]:
        """The items after offset (v, i, starting), exclusive, up to the latest version (or up to
        and including `end`), lazily in stream order."""
        self._check_start(v, starting)
        top = self._latest_version()
        if end is not None:
            top = min(top, end[0])

        def before_end(it: _Item) -> bool:
            if end is None:
                return True
            ev, ei, es = end
            if it.snapshot != es:
                return it.snapshot   # snapshot items come before every version item
            return (it.version, it.index) <= (ev, ei)

        if starting:
            for it in self._snapshot_items(v):
                if it.index > i or not it.readable:
                    if not before_end(it):
                        return
                    yield it
            v, i = v + 1, -1
        if end is not None and end[2]:
            return
        version = v
        while version <= top:
            items = self._version_items(version)
            if items and items[0].version != version:   # versions cleaned up: the stream skipped ahead
                version = items[0].version
            for it in items:
                if it.version == v and it.index <= i and not (it.index == -1 and i == -1):
                    continue   # read already (a version's marker only moves an offset at its start)
                if not before_end(it):
                    return
                yield it
            version += 1

    def _check_start(self, v: int, starting: bool) -> None:
        """Once per start offset: data written in the schema in effect at the start reads in the
        stream's schema (rule 5)."""
        if (v, starting) in self._checked_starts:
            return
        if v <= self.read_snapshot.version:
            md = self.read_snapshot.metadata if v == self.read_snapshot.version else None
            if md is None:
                try:
                    md = self.log.snapshot(v).metadata
                except DeltaError:
                    md = None   # a version no longer reconstructable: its commits are checked one by one
            err = self._schema_error(md, v) if md is not None else None
            if err is not None:
                raise err
        self._checked_starts.add((v, starting))

    def _schema_error(self, md, version: int) -> Optional[StreamingSourceError]:
        """The error a metaData action in effect at `version` stops the stream with (rule 5), or
        None: delta-spark's `checkReadIncompatibleSchemaChanges`."""
        from ..protocol import column_mapping
        from ..protocol.schema import is_read_compatible

        rs = self.read_snapshot
        new, old = (rs.metadata, md) if version < rs.version else (md, rs.metadata)
        if column_mapping.renames_or_drops(new.schema, column_mapping.mode(new.configuration),
                                           old.schema, column_mapping.mode(old.configuration)):
            return StreamingSourceError(
                f"Streaming read is not supported on tables with read-incompatible schema changes (e.g. rename or "
                f"drop or datatype changes).\ntahoe does not implement 'schemaTrackingLocation' (delta-spark's "
                f"non-additive schema evolution for Delta stream processing): restart the stream with a new "
                f"checkpoint location and a startingVersion after version {version}.\nRead schema: "
                f"{rs.schema.to_json()}. Incompatible data schema: {md.schema.to_json()}.",
                "DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE_USE_SCHEMA_LOG")
        if md.schema_string == rs.metadata.schema_string or \
                is_read_compatible(md.schema, rs.schema, forbid_tighten_nullability=True):
            return None
        starting = self.opts["starting_version"] is not None or self.opts["starting_timestamp"] is not None
        advice = (f" If the issue persists after\nchanging to a new checkpoint directory, you may need to change the "
                  f"existing\n'startingVersion' or 'startingTimestamp' option to start from a version newer than\n"
                  f"{version} with a new checkpoint directory." if starting else "")
        return StreamingSourceError(
            f"Detected schema change in version {version}:\nstreaming source schema: {rs.schema.to_json()}\n\n"
            f"data file schema: {md.schema.to_json()}\n\nPlease try restarting the query. If this issue repeats "
            f"across query restarts without\nmaking progress, you have made an incompatible schema change and need "
            f"to start your\nquery from scratch using a new checkpoint directory.{advice}\n",
            "DELTA_SCHEMA_CHANGED_WITH_STARTING_OPTIONS" if starting else "DELTA_SCHEMA_CHANGED_WITH_VERSION")

    def _timestamp(self, version: int) -> int:
        if version not in self._stamps:
            self._stamps = dict(self.log.commit_timestamps())
        return self._stamps[version]

    def _snapshot_items(self, version: int) -> list[_Item]:
        if version not in self._snapshots:
            snap = self.read_snapshot if version == self.read_snapshot.version else self.log.snapshot(version)
            adds = sorted((a for a in snap.files_table().to_pylist() if self._included(a["path"])),
                          key=lambda a: (a.get("modificationTime") or 0, a["path"]))
            items = []
            ts = snap.timestamp if self.cdf else 0
            for n, a in enumerate(adds):
                a = {k: (dict(x) if k in ("partitionValues", "deletionVector", "tags") and x else x) for k, x in a.items()}
                unit = ChangeUnit(version, ts, "insert", a) if self.cdf else None
                items.append(_Item(version, n, None if self.cdf else a, unit, n + 1 == len(adds), True))
            self._snapshots.clear()
            self._snapshots[version] = items or [_Item(version, -1, is_last=True, snapshot=True)]
        return self._snapshots[version]

    def _included(self, path: str) -> bool:
        return self._exclude is None or self._exclude.search(path) is None

    def _version_items(self, version: int) -> list[_Item]:
        if version not in self._versions:
            if len(self._versions) > 256:
                self._versions.clear()
            self._versions[version] = self._read_version(version)
        return self._versions[version]

    def _read_version(self, version: int) -> list[_Item]:
        from ..log.replay import read_commit

        path = self.log.store.join(self.log.log_dir, commit_file_name(version))
        try:
            actions = list(read_commit(self.log.store, path))
        except FileNotFoundError:
            return self._missing(version)
        if not actions and not self.log.store.exists(path):
            return self._missing(version)
        vc = parse_version_changes(version, self._timestamp(version) if self.cdf else 0, actions)
        marker = _Item(version, -1)
        if vc.metadata is not None:
            marker.error = self._schema_error(vc.metadata, version)
            if marker.error is not None:
                return [marker]
        if self.cdf:
            units = [u for u in version_units(vc) if self._included(u.action.get("path", ""))]
            items = [marker] + [_Item(version, n, None, u) for n, u in enumerate(units)]
        else:
            items = [marker] + self._added_files(vc, actions)
        items[-1].is_last = True
        return items

    def _missing(self, version: int) -> list[_Item]:
        """A version the log no longer has (rule 5)."""
        from ..log.segment import list_log

        commits = [f.version for f in list_log(self.log.store, self.log.log_dir, 0) if f.name.kind == LogFileKind.COMMIT]
        later = [c for c in commits if c > version]
        if not later:   # not committed yet (cannot happen below the latest version)
            return [_Item(version, -1, is_last=True)]
        if not self.opts["fail_on_data_loss"]:
            return self._version_items(later[0])
        return [_Item(version, -1, error=StreamingSourceError(
            f"The stream from your Delta table was expecting process data from version {version}, but the earliest "
            f"available version in the _delta_log directory is {later[0]}. The files in the transaction log may have "
            f"been deleted due to log cleanup. In order to avoid losing data, we recommend that you restart your "
            f"stream with a new checkpoint location and to increase your delta.logRetentionDuration setting, if you "
            f"have explicitly set it below 30 days. If you would like to ignore the missed data and continue your "
            f"stream from where it left off, you can set the .option(\"failOnDataLoss\", \"false\") as part of your "
            f"readStream statement.", "DELTA_MISSING_FILES_UNEXPECTED_VERSION"))]

    def _added_files(self, vc: VersionChanges, actions: list[dict]) -> list[_Item]:
        """The files version `vc` contributes to a (non-CDF) stream: its data-changing adds, with
        their action index — or an error / nothing when it removes data (rule 4)."""
        o = self.opts
        removed = [r for r in vc.removes if r.get("dataChange", True)]
        adds = [(n, a["add"]) for n, a in enumerate(actions)
                if isinstance(a.get("add"), dict) and a["add"].get("dataChange", True)]
        if removed:
            allow_changes = o["ignore_changes"] or o["ignore_file_deletion"] or o["skip_change_commits"]
            allow_deletes = allow_changes or o["ignore_deletes"]
            where = self.log.table_root
            if adds and not allow_changes:
                return [_Item(vc.version, -1, error=StreamingSourceError(
                    f"Detected a data update (for example {removed[0]['path']}) in the source table at version "
                    f"{vc.version}. This is currently not supported. If you'd like to ignore updates, set the option "
                    f"'skipChangeCommits' to 'true'. If you would like the data update to be reflected, please restart "
                    f"this query with a fresh checkpoint directory. The source table can be found at path {where}.",
                    "DELTA_SOURCE_TABLE_IGNORE_CHANGES"))]
            if not adds and not allow_deletes:
                return [_Item(vc.version, -1, error=StreamingSourceError(
                    f"Detected deleted data (for example {removed[0]['path']}) from streaming source at version "
                    f"{vc.version}. This is currently not supported. If you'd like to ignore deletes, set the option "
                    f"'ignoreDeletes' to 'true'. The source table can be found at path {where}.",
                    "DELTA_SOURCE_IGNORE_DELETE"))]
            if o["skip_change_commits"]:
                return []
        return [_Item(vc.version, n, a) for n, a in adds if self._included(a["path"])]

    # --- batches --------------------------------------------------------------------------------
    def readable_between(self, start: dict, end: dict) -> list[_Item]:
        """The items with rows after offset `start`, up to and including `end`, in stream order."""
        s, e = self._parse(start), self._parse(end)
        return [] if s == e else [it for it in self._after(*s, end=e) if it.readable]

    def partitions(self, start: dict, end: dict):
        items = self.readable_between(start, end)
        if not items:
            return []
        if self.cdf:
            return change_partitions([it.unit for it in items])
        return self.files.partitions([(it.action["path"], dict(it.action.get("partitionValues") or {}),
                                       it.action.get("deletionVector") or None, it.size) for it in items])

    def read(self, partition):
        if isinstance(partition, ChangesPartition):
            return self.files.read_changes(partition)
        return self.files.read(partition)

    def commit(self, end: dict) -> None:
        v, _, starting = self._parse(end)
        for k in [k for k in self._versions if k < v]:
            del self._versions[k]
        if not starting:
            self._snapshots.clear()

    def stop(self) -> None:
        self._versions.clear()
        self._snapshots.clear()


class NativeStreamSource:
    """`spark.readStream.format("delta")` read natively (`tahoe.spark.calls` rule 7, classic sessions): Spark's v1
    streaming `Source`, implemented here and called by the query's thread through py4j's callback server.

      1. Offsets, admission (`maxFilesPerTrigger`, `maxBytesPerTrigger`, AvailableNow), schema checks and the
         errors are `DeltaStreamReader`'s, made at the query's first call as the data source makes it at start;
         an offset's JSON is the data source's text, so a checkpoint moves between the two sources.
      2. A micro-batch's files are read by Spark's parquet reader (`tahoe.spark.read.read_snapshot`: partition
         values, deletion vectors, column mapping) and handed to Spark as a streaming relation."""

    class Java:
        implements = ["org.apache.spark.sql.execution.streaming.Source",
                      "org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl",
                      "org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow"]

    def __init__(self, spark, options: dict, schema, table_root: str):
        import threading

        self.spark = spark
        self.options = dict(options)
        self.declared = schema
        self.table_root = table_root
        self._reader: Optional[DeltaStreamReader] = None
        self._jschema = None
        self._lock = threading.Lock()

    @property
    def reader(self) -> DeltaStreamReader:
        with self._lock:
            if self._reader is None:
                self._reader = DeltaStreamReader(self.options, self.declared)
            return self._reader

    def _offset(self, off: dict):
        from .internals import jvm_offset

        return jvm_offset(self.spark, json.dumps(off))

    # --- java.lang.Object, Source, SupportsAdmissionControl, SupportsTriggerAvailableNow ----------------------
    def toString(self) -> str:
        return f"DeltaSource[{self.table_root}]"

    def hashCode(self) -> int:
        return id(self) & 0x7FFFFFFF

    def equals(self, other) -> bool:
        return other is self

    def schema(self):
        if self._jschema is None:
            self._jschema = self.spark._jsparkSession.parseDataType(self.declared.json())
        return self._jschema

    def initialOffset(self):
        return self._offset(self.reader.initialOffset())

    def deserializeOffset(self, text: str):
        from .internals import jvm_offset

        return jvm_offset(self.spark, text)

    def getDefaultReadLimit(self):
        from .internals import jvm_read_limit

        return jvm_read_limit(self.spark, self.reader.getDefaultReadLimit())

    def latestOffset(self, start, limit):
        from .internals import python_read_limit

        r = self.reader
        begin = json.loads(start.json()) if start is not None else r.initialOffset()
        return self._offset(r.latestOffset(begin, python_read_limit(limit)))

    def getOffset(self):
        from .internals import jvm_read_limit

        r = self.reader
        jvm = self.spark._jvm
        return jvm.scala.Some(self.latestOffset(None, jvm_read_limit(self.spark, r.getDefaultReadLimit())))

    def reportLatestOffset(self):
        return None

    def prepareForTriggerAvailableNow(self) -> None:
        self.reader.prepareForTriggerAvailableNow()

    def getBatch(self, start, end):
        from .internals import jvm_streaming_batch

        r = self.reader
        items = r.readable_between(json.loads(start.get().json()) if start.isDefined() else r.initialOffset(),
                                   json.loads(end.json()))
        return jvm_streaming_batch(self.batch([it.action for it in items]))

    def commit(self, end) -> None:
        self.reader.commit(json.loads(end.json()))

    def stop(self) -> None:
        if self._reader is not None:
            self._reader.stop()

    # --- the rows -----------------------------------------------------------------------------------------
    def batch(self, adds: list[dict], snap=None):
        """A DataFrame of the rows of `adds` (add actions of the table), in the declared schema
        (`snap`: the snapshot whose schema reads them, else the stream's)."""
        import pyarrow as pa

        from ..log.file_actions import ADD_SCHEMA
        from .read import read_snapshot

        names = ["path", "partitionValues", "size", "stats", "deletionVector"]
        files = pa.Table.from_pylist([{n: a.get(n) for n in names} for a in adds],
                                     schema=pa.schema([ADD_SCHEMA.field(n) for n in names]))
        df = read_snapshot(self.spark, snap if snap is not None else self.reader.read_snapshot, files=files)
        wanted = [f.name for f in self.declared.fields]
        if df.columns != wanted:
            df = df.select(*[f"`{n}`" for n in wanted])
        return df

    def reads_as_declared(self, snap) -> bool:
        """Whether the native read of `snap`'s files gives the declared columns and types."""
        got = self.batch([], snap).schema
        return [(f.name, f.dataType) for f in got.fields] == [(f.name, f.dataType) for f in self.declared.fields]


# --- the sink ----------------------------------------------------------------------------------------

def checkpoint_query_id(checkpoint: Optional[str], storage_options: dict) -> Optional[str]:
    """The query id Spark keeps in the checkpoint's `metadata` file (the same across restarts), or
    None when there is no checkpoint or it says none."""
    if not checkpoint:
        return None
    from ..storage import store_for

    try:
        store, where = store_for(checkpoint, storage_options)
        data = store.read(store.join(where, "metadata"))
        return json.loads(data.decode("utf-8").splitlines()[0])["id"]
    except (OSError, ValueError, KeyError, IndexError, DeltaError):
        return None


class DeltaStreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("delta")` (see the module docstring). Made for every micro-batch:
    its plan is the batch's."""

    def __init__(self, path: str, options: dict, schema, overwrite: bool):
        from .options import check_properties_apply
        from .options import SAVE_MODE_OPTION
        from .write import prepare_datasource_write

        self.complete = overwrite
        self.checkpoint = next((v for k, v in options.items() if k.lower() == "checkpointlocation"), None)
        opts = {k: v for k, v in options.items() if k.lower() != "checkpointlocation"}
        opts[SAVE_MODE_OPTION] = "overwrite" if overwrite else "append"
        self.ds = prepare_datasource_write(path, opts, schema, overwrite)
        plan = self.ds.plan
        if plan.read_version >= 0 and any(k.lower().startswith("delta.") for k in opts):
            check_properties_apply(opts, DeltaLog.for_table(plan.table_root, plan.storage_options)
                                   .snapshot(version=plan.read_version))

    def write(self, iterator):
        from pyspark import TaskContext

        from .write import datasource_write_task

        msg = datasource_write_task(self.ds, iterator)
        ctx = TaskContext.get()
        msg.query_id = ctx.getLocalProperty(QUERY_ID_PROPERTY) if ctx is not None else None
        msg.batch_id = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
        msg.ds = self.ds
        return msg

    def _query_id(self, messages: list) -> str:
        ids = {m.query_id for m in messages if getattr(m, "query_id", None)}
        if len(ids) > 1:
            raise DeltaError(f"the tasks of one micro-batch name different streaming queries: {sorted(ids)}")
        if ids:
            return ids.pop()
        qid = checkpoint_query_id(self.checkpoint, self.ds.plan.storage_options)   # no task ran
        if qid is not None:
            return qid
        raise DeltaError("the Delta sink cannot tell this streaming query's id (no task of the micro-batch ran and "
                         "the checkpoint location gives none): give the query option('checkpointLocation', ...)")

    def commit(self, messages, batchId: int) -> None:
        from ..write.commit import commit_micro_batch

        from ..protocol.actions import AddFile
        from ..write.plan import merge_identity_marks
        from .write import guarded_commit

        messages = [m for m in messages if m is not None]
        plans = [m.ds for m in messages if getattr(m, "ds", None) is not None]
        ds = plans[0] if plans else self.ds
        adds = [a for m in messages for a in m.adds]

        files = [AddFile.from_dict(json.loads(a)["add"]) for a in adds]
        marks = merge_identity_marks(ds.plan.schema, [getattr(m, "marks", {}) for m in messages])
        query_id = self._query_id(messages)
        log = DeltaLog.for_table(ds.plan.table_root, ds.plan.storage_options)
        guarded_commit(ds, lambda: commit_micro_batch(ds.plan, log, files, marks, query_id, int(batchId),
                                                      "Complete" if self.complete else "Append"), str(batchId))

    def abort(self, messages, batchId: int) -> None:
        from .write import datasource_abort

        messages = [m for m in messages if m is not None]
        plans = [m.ds for m in messages if getattr(m, "ds", None) is not None]
        datasource_abort(plans[0] if plans else self.ds, messages, str(batchId))


class NativeStreamSink:
    """`df.writeStream.format("delta")` as a `foreachBatch` function (rule 7; `tahoe.spark.calls` installs it
    where the native write path reaches the table). For micro-batch `batch_id` of query Q (Spark's
    `sql.streaming.queryId`, which the checkpoint keeps across restarts):

      1. the batch is planned as `DeltaStreamWriter` plans it (`prepare_datasource_write`: the same options,
         the same planner); a table that already records batch `batch_id` of Q is left alone (a replay);
      2. its rows are written by Spark's parquet writer (`write_dataframe`: shaped, checked, staged, moved,
         stats from the footers) — empty files dropped, as the data source's empty tasks write none;
      3. ONE `STREAMING UPDATE` version with txn (Q, batch_id) — `commit_micro_batch`, which deletes the files
         when the table recorded the batch meanwhile or the commit surely did not land."""

    def __init__(self, path: str, options: dict, complete: bool):
        from .options import SAVE_MODE_OPTION

        self.path = path
        self.complete = complete
        self.checkpoint = next((v for k, v in options.items() if k.lower() == "checkpointlocation"), None)
        self.options = {k: v for k, v in options.items() if k.lower() not in ("checkpointlocation", "path")}
        self.options[SAVE_MODE_OPTION] = "overwrite" if complete else "append"

    def query_id(self, df, storage_options: dict) -> str:
        qid = None
        try:
            qid = df.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
        except Exception:  # noqa: BLE001 - asked of the checkpoint instead
            qid = None
        qid = qid or checkpoint_query_id(self.checkpoint, storage_options)
        if not qid:
            raise DeltaError("the Delta sink cannot tell this streaming query's id (Spark set no "
                             f"{QUERY_ID_PROPERTY} and the checkpoint location gives none): give the query "
                             f"option('checkpointLocation', ...)")
        return qid

    def __call__(self, df, batch_id) -> None:
        from ..write.commit import commit_micro_batch, delete_data_files
        from .options import check_properties_apply
        from .write import prepare_datasource_write, write_dataframe

        batch_id = int(batch_id)
        ds = prepare_datasource_write(self.path, self.options, df.schema, self.complete)
        plan = ds.plan
        query_id = self.query_id(df, plan.storage_options)
        log = DeltaLog.for_table(plan.table_root, plan.storage_options)
        if plan.read_version >= 0:
            snap = log.snapshot(version=plan.read_version)
            done = snap.txn_version(query_id)
            if done is not None and done >= batch_id:
                return   # a replay of a batch the table holds: nothing to write (rule 1)
            if any(k.lower().startswith("delta.") for k in self.options):
                check_properties_apply(self.options, snap)
        adds, marks = write_dataframe(df, log, plan)
        empty = [a for a in adds if a.num_records == 0]
        if empty:
            delete_data_files(log.store, log.table_root, empty)
            adds = [a for a in adds if a.num_records != 0]
        commit_micro_batch(plan, log, adds, marks, query_id, batch_id, "Complete" if self.complete else "Append")

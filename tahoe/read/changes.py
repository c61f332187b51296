"""Table changes between versions, the change data feed (spec "Change Data Files", "Add CDC File"), Spark-free:
`table_changes`, `resolve_change_range`, `plan_changes` (the `ChangeUnit`s a read runs) and the Arrow rows
(`unit_rows`, `read_changes_arrow`, `version_change_rows`). Rules:
  1. A version's timestamp is `DeltaLog.commit_timestamps`' (inCommitTimestamp when enabled).
  2. A version with `cdc` actions reads those files only; else `dataChange` adds are inserts, removes deletes.
  3. Only where `delta.enableChangeDataFeed` holds at every version: else CdfNotEnabledError
     (DELTA_MISSING_CHANGE_DATA).
  4. A schema change in the range the read schema cannot read fails
     (DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE / _INCOMPATIBLE_DATA_SCHEMA); added columns pass.
  5. Ranges as delta-spark's CDCReader (`resolve_change_range`), with `allow_out_of_range`
     (`spark.databricks.delta.changeDataFeed.timestampOutOfRange.enabled`).
  6. The read schema: the end version's under column mapping, else the read snapshot's (`change_read_snapshot`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Iterator
from typing import Protocol as _Interface

import numpy as np
import pyarrow as pa

from ..errors import ChangeDataFeedError, ChangeDataRangeError, VersionNotFoundError
from ..protocol import column_mapping
from ..protocol.actions import Metadata, Protocol
from ..protocol.filenames import LogFileKind
from ..protocol.properties import bool_property
from ..protocol.schema import StructType, is_read_compatible
from ..log.delta_log import parse_timestamp
from ..log.replay import read_commit
from ..log.segment import list_log
from ..protocol.deletion_vectors import DeletionVectorDescriptor, deleted_mask, load_deletion_vector
from ..storage import resolve_data_path
from .arrow_reader import ArrowFileReader

__all__ = ["VersionChanges", "CdfNotEnabledError", "table_changes", "cdf_enabled_at",
           "check_cdf_enabled", "read_changes_arrow", "CDF_COLUMNS", "ChangeFiles", "version_change_rows",
           "tag_changes", "change_schema", "ChangeUnit", "version_units", "unit_rows", "ChangePlan",
           "plan_changes", "resolve_change_range", "starting_version_for_timestamp", "StoreChangeFiles",
           "check_change_schemas", "CDF_TIMESTAMP_OUT_OF_RANGE_CONF", "schema_readable", "parse_version_changes",
           "change_read_snapshot", "plan_change_read"]

CDF_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")
CDF_TIMESTAMP_OUT_OF_RANGE_CONF = "spark.databricks.delta.changeDataFeed.timestampOutOfRange.enabled"


class CdfNotEnabledError(ChangeDataFeedError):
    """The change data feed was not enabled (`delta.enableChangeDataFeed`) over the asked range
    (delta-spark's DELTA_MISSING_CHANGE_DATA, its message word for word). With tahoe,
    `DESCRIBE HISTORY` is `tahoe history PATH` (or `tahoe.Table(path).history()`) and the
    property is set with `tahoe set-property PATH delta.enableChangeDataFeed=true` (or
    `tahoe.Table(path).set_properties({...})`)."""

    def __init__(self, message: str):
        super().__init__(message, "DELTA_MISSING_CHANGE_DATA")


@dataclass
class VersionChanges:
    """The actions of one commit, parsed (raw action dicts, as written in the log)."""
    version: int
    timestamp: int
    adds: list[dict] = field(default_factory=list)
    removes: list[dict] = field(default_factory=list)
    cdcs: list[dict] = field(default_factory=list)
    metadata: Metadata | None = None
    protocol: Protocol | None = None
    commit_info: dict[str, Any] | None = None


def _commits_in_range(log, start_version: int, end_version: int | None):
    if start_version < 0:
        raise ValueError(f"start version must be >= 0, got {start_version}")
    stamps = dict(log.commit_timestamps())
    files = [f for f in list_log(log.store, log.log_dir, start_version)
             if f.name.kind == LogFileKind.COMMIT and (end_version is None or f.version <= end_version)]
    if not files or files[0].version != start_version:
        raise VersionNotFoundError(f"version {start_version} of {log.table_root} is not in the log "
                                   f"(available: {min(stamps) if stamps else '-'}..{max(stamps) if stamps else '-'})")
    if end_version is not None and files[-1].version != end_version:
        raise VersionNotFoundError(f"version {end_version} of {log.table_root} is not in the log "
                                   f"(latest is {files[-1].version})")
    return files, stamps


def parse_version_changes(version: int, timestamp: int, actions: Iterable[dict]) -> VersionChanges:
    """One commit's actions (parsed JSON lines) as a VersionChanges."""
    vc = VersionChanges(version, timestamp)
    for obj in actions:
        if "add" in obj and isinstance(obj["add"], dict):
            vc.adds.append(obj["add"])
        elif "remove" in obj and isinstance(obj["remove"], dict):
            vc.removes.append(obj["remove"])
        elif "cdc" in obj and isinstance(obj["cdc"], dict):
            vc.cdcs.append(obj["cdc"])
        elif "metaData" in obj and isinstance(obj["metaData"], dict):
            vc.metadata = Metadata.from_dict(obj["metaData"])
        elif "protocol" in obj and isinstance(obj["protocol"], dict):
            vc.protocol = Protocol.from_dict(obj["protocol"])
        elif "commitInfo" in obj and isinstance(obj["commitInfo"], dict):
            vc.commit_info = obj["commitInfo"]
    return vc


def table_changes(log, start_version: int, end_version: int | None = None) -> Iterator[VersionChanges]:
    """The commits `start_version..end_version` (inclusive; None: up to the latest), in order."""
    if end_version is not None and end_version < start_version:
        raise ValueError(f"start version {start_version} is after end version {end_version}")

    files, stamps = _commits_in_range(log, start_version, end_version)
    for f in files:
        yield parse_version_changes(f.version, stamps.get(f.version, f.status.modification_time),
                                    read_commit(log.store, f.path))


def _cdf_on(md: Metadata | None) -> bool:
    return md is not None and bool(bool_property(md.configuration, "delta.enableChangeDataFeed"))


def cdf_enabled_at(log, version: int) -> bool:
    """Whether the metadata in effect at `version` has the change data feed enabled."""
    return _cdf_on(log.snapshot(version).metadata)


def _not_recorded(version: int, start: int, end: int) -> CdfNotEnabledError:
    # delta-spark's DELTA_MISSING_CHANGE_DATA message, word for word (its lines joined with "\n"
    # as Spark joins an error class's message lines)
    return CdfNotEnabledError(
        f"Error getting change data for range [{start} , {end}] as change data was not\n"
        f"recorded for version [{version}]. If you've enabled change data feed on this table,\n"
        f"use `DESCRIBE HISTORY` to see when it was first enabled.\n"
        f"Otherwise, to start recording change data, use `ALTER TABLE table_name SET TBLPROPERTIES\n"
        f"(delta.enableChangeDataFeed=true)`.")


def check_cdf_enabled(log, start_version: int, end_version: int | None = None,
                      start_metadata: Metadata | None = None) -> list[VersionChanges]:
    """The changes of the range, after checking CDF was on at every version of it (else
    CdfNotEnabledError naming the first version where it was off)."""
    changes = list(table_changes(log, start_version, end_version))
    end = changes[-1].version if changes else start_version
    md = start_metadata if start_metadata is not None else log.snapshot(start_version).metadata
    if not _cdf_on(md):
        raise _not_recorded(start_version, start_version, end)
    for vc in changes:
        if vc.metadata is not None and not _cdf_on(vc.metadata):
            raise _not_recorded(vc.version, start_version, end)
    return changes


# --- ranges ----------------------------------------------------------------------------------------

def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _after_latest(log, ts: int, latest: tuple[int, int]) -> VersionNotFoundError:
    return VersionNotFoundError(
        f"[DELTA_TIMESTAMP_GREATER_THAN_COMMIT] The provided timestamp ({_iso(ts)}) is after the latest version "
        f"available to this table ({log.table_root}). Please use a timestamp before or at {_iso(latest[1])}.")


def starting_version_for_timestamp(log, timestamp: Any, can_exceed_latest: bool = False,
                                   stamps: list[tuple[int, int]] | None = None, *,
                                   time_zone: str | None = None) -> int:
    """The first version committed at or after `timestamp` (the earliest version when it is
    older than the log) — delta-spark's `getStartingVersionFromTimestamp`, used by change feed
    reads and streaming sources. A timestamp after the latest commit is an error
    (DELTA_TIMESTAMP_GREATER_THAN_COMMIT), or the latest version + 1 with `can_exceed_latest`.
    A zone-less `timestamp` is wall-clock time in `time_zone` (the Spark session's; UTC by default)."""
    ts = parse_timestamp(timestamp, time_zone)
    stamps = stamps if stamps is not None else log.commit_timestamps()
    for v, t in stamps:
        if t >= ts:
            return v
    if can_exceed_latest:
        return stamps[-1][0] + 1
    raise _after_latest(log, ts, stamps[-1])


def resolve_change_range(log, latest_version: int, starting_version: Any = None, ending_version: Any = None,
                         starting_timestamp: Any = None, ending_timestamp: Any = None,
                         allow_out_of_range: bool = False, *, time_zone: str | None = None) -> tuple[int, int] | None:
    """(start, end) versions, inclusive, of a change feed read on a table whose latest version (the
    read's snapshot) is `latest_version` — or None when the range holds no version and that is
    not an error. A start is required (a version, or a timestamp: the first version committed at or after it);
    an end is a version or a timestamp (the last version at or before it), else `latest_version`; an end past
    the latest means the latest; a start after it, or an end before the start, is an error. With
    `allow_out_of_range` a start after the latest gives no rows and an end timestamp after the latest commit
    means the latest version. Zone-less timestamps are wall-clock time in
    `time_zone` (the Spark session's, as delta-spark casts them; UTC by default)."""
    if starting_version is not None and starting_timestamp is not None:
        raise ChangeDataRangeError("Multiple starting arguments provided for CDC read. Please provide one of either "
                                   "startingTimestamp or startingVersion.", "DELTA_MULTIPLE_CDC_BOUNDARY")
    if ending_version is not None and ending_timestamp is not None:
        raise ChangeDataRangeError("Multiple ending arguments provided for CDC read. Please provide one of either "
                                   "endingTimestamp or endingVersion.", "DELTA_MULTIPLE_CDC_BOUNDARY")
    stamps = None
    start_ts = end_ts = None
    if starting_version is not None:
        start = _version(starting_version, "startingVersion")
    elif starting_timestamp is not None:
        start_ts = _timestamp(starting_timestamp, "startingTimestamp", time_zone)
        stamps = log.commit_timestamps()
        start = starting_version_for_timestamp(log, start_ts, allow_out_of_range, stamps)
    else:
        raise ChangeDataRangeError("No startingVersion or startingTimestamp provided for CDC read.",
                                   "DELTA_NO_START_FOR_CDC_READ")
    if ending_version is not None:
        end = _version(ending_version, "endingVersion")
    elif ending_timestamp is not None:
        end_ts = _timestamp(ending_timestamp, "endingTimestamp", time_zone)
        stamps = stamps if stamps is not None else log.commit_timestamps()
        if end_ts > stamps[-1][1]:
            if not allow_out_of_range:
                raise _after_latest(log, end_ts, stamps[-1])
            end = stamps[-1][0]
        else:
            end = log.version_at_timestamp(end_ts)
    else:
        end = latest_version
    if start > latest_version:
        if allow_out_of_range:
            return None
        raise ChangeDataRangeError(
            f"Provided Start version({start}) for reading change data is invalid. Start version cannot be greater "
            f"than the latest version of the table({latest_version}).")
    if start_ts is not None and end_ts is not None:
        if start_ts > end_ts:
            raise ChangeDataRangeError(f"CDC range from start {start} to end {end} was invalid. End cannot be before "
                                       f"start.", "DELTA_INVALID_CDC_RANGE")
        if end == start - 1:   # both timestamps between the same two commits
            return None
    if end < start:
        raise ChangeDataRangeError(f"CDC range from start {start} to end {end} was invalid. End cannot be before "
                                   f"start.", "DELTA_INVALID_CDC_RANGE")
    return start, min(end, latest_version)


def change_read_snapshot(log, snapshot, start: int | None, end: int | None, end_given: bool):
    """The snapshot whose schema a batch change feed read of versions `start..end` (from
    `resolve_change_range`; None: no version) is read in, delta-spark's batch CDF schema mode: on a table with
    column mapping at the start, the given end or the snapshot, the end version's schema (`endVersion`,
    `spark.databricks.delta.changeDataFeed.defaultSchemaModeForColumnMappingTable`); else the snapshot's.
    `end_given`: the read named its end (a version or a timestamp)."""
    if start is None or end is None:
        return snapshot

    def mapped(version: int) -> bool:
        md = snapshot.metadata if version == snapshot.version else log.snapshot(version).metadata
        return column_mapping.mode(md.configuration) != "none"

    end_version = end if end_given else snapshot.version
    if not (mapped(snapshot.version) or mapped(start) or (end_given and mapped(end))):
        return snapshot
    return snapshot if end_version == snapshot.version else log.snapshot(end_version)


def _version(v: Any, name: str) -> int:
    try:
        n = int(str(v).strip())
    except ValueError:
        n = -1
    if n < 0:
        raise ChangeDataRangeError(f"Invalid value '{v}' for option '{name}', must be a non-negative integer")
    return n


def _timestamp(v: Any, name: str, time_zone: str | None = None) -> int:
    try:
        return parse_timestamp(v if not isinstance(v, str) else v.strip(), time_zone)
    except (ValueError, TypeError):
        raise ChangeDataRangeError(f"The provided timestamp ({v}) for option '{name}' cannot be converted to a "
                                   f"valid timestamp.", "DELTA_TIMESTAMP_INVALID") from None


# --- what to read ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ChangeUnit:
    """One file's contribution to the change feed of one version (what one task reads):
    kind "cdc" (a change data file: its rows with their `_change_type`), "insert" (an added
    file's kept rows), "delete" (a removed file's kept rows) or "dv" (a file removed and re-added
    with another deletion vector: `previous` is the remove; the rows whose status changed)."""
    version: int
    timestamp: int                 # ms
    kind: str
    action: dict
    previous: dict | None = None

    @property
    def size(self) -> int:
        return int(self.action.get("size") or 0)


def _noop_merge(commit_info: dict | None) -> bool:
    """delta-spark's `shouldSkipFileActionsInCommit`: a MERGE whose metrics say it inserted,
    updated and deleted no row rewrote files without changing data — no change rows."""
    if not commit_info or commit_info.get("operation") != "MERGE":
        return False
    m = commit_info.get("operationMetrics") or {}
    return all(str(m.get(k)) == "0" for k in ("numTargetRowsInserted", "numTargetRowsUpdated",
                                              "numTargetRowsDeleted"))


def version_units(vc: VersionChanges) -> list[ChangeUnit]:
    """The units of one version (rule 2 of the module docstring), in log order."""
    v, ts = vc.version, vc.timestamp
    if vc.cdcs:
        return [ChangeUnit(v, ts, "cdc", c) for c in vc.cdcs]
    if _noop_merge(vc.commit_info):
        return []
    adds = {a["path"]: a for a in vc.adds if a.get("dataChange", True)}
    removes = {r["path"]: r for r in vc.removes if r.get("dataChange", True)}
    out = [ChangeUnit(v, ts, "dv", a, removes[p]) if p in removes else ChangeUnit(v, ts, "insert", a)
           for p, a in adds.items()]
    out += [ChangeUnit(v, ts, "delete", r) for p, r in removes.items() if p not in adds]
    return out


class ChangeFiles(_Interface):
    """Where the rows of a version's files come from (a table's storage, or URLs of a sharing
    server): `rows(action)` — the file's logical rows, deletion vector NOT applied; `change_types
    (action)` — a cdc file's `_change_type` column; `keep(action, n)` — the rows of an `n`-row file
    its action's deletion vector keeps (a boolean mask). Actions are matched by their `path`."""

    def rows(self, action: dict) -> pa.Table: ...

    def change_types(self, action: dict) -> pa.Array: ...

    def keep(self, action: dict, num_rows: int) -> np.ndarray: ...


class StoreChangeFiles:
    """`ChangeFiles` of a table's own storage, through an ArrowFileReader."""

    def __init__(self, reader):
        self.reader = reader

    def rows(self, action: dict) -> pa.Table:
        return self.reader.read_file(action["path"], action.get("partitionValues"), None)

    def change_types(self, action: dict) -> pa.Array:
        import pyarrow.parquet as pq

        r = self.reader
        full = resolve_data_path(r.table_root, action["path"])
        pf = pq.ParquetFile(r.store.open_input_file(full))
        return pf.read(columns=["_change_type"]).column("_change_type").cast(pa.string())

    def keep(self, action: dict, num_rows: int) -> np.ndarray:
        dv = action.get("deletionVector")
        if not dv:
            return np.ones(num_rows, dtype=bool)
        bitmap = load_deletion_vector(DeletionVectorDescriptor.from_dict(dv), self.reader.table_root,
                                      self.reader.store.read_range)
        return ~deleted_mask(bitmap, num_rows)


def tag_changes(t: pa.Table, change_type: str | pa.Array, version: int, ts: int) -> pa.Table:
    """`t` with the CDF columns appended: `_change_type`, `_commit_version` (int64) and
    `_commit_timestamp` (timestamp[us, UTC] of `ts` ms)."""
    n = t.num_rows
    ct = change_type if isinstance(change_type, (pa.Array, pa.ChunkedArray)) else pa.array([change_type] * n, pa.string())
    t = t.append_column("_change_type", ct)
    t = t.append_column("_commit_version", pa.array(np.full(n, version, dtype=np.int64)))
    return t.append_column("_commit_timestamp", pa.array(np.full(n, ts * 1000, dtype=np.int64)).cast(pa.timestamp("us", tz="UTC")))


def unit_rows(files: ChangeFiles, u: ChangeUnit) -> list[pa.Table]:
    """The CDF rows of one unit, tagged (`tag_changes`); empty tables are left out."""
    rows = files.rows(u.action)
    if u.kind == "cdc":
        out = [tag_changes(rows, files.change_types(u.action), u.version, u.timestamp)]
    elif u.kind == "dv":
        keep = files.keep(u.action, rows.num_rows)
        old_keep = files.keep(u.previous or {}, rows.num_rows)
        out = []
        ins, dele = keep & ~old_keep, old_keep & ~keep
        if ins.any():
            out.append(tag_changes(rows.filter(pa.array(ins)), "insert", u.version, u.timestamp))
        if dele.any():
            out.append(tag_changes(rows.filter(pa.array(dele)), "delete", u.version, u.timestamp))
    else:
        keep = files.keep(u.action, rows.num_rows)
        out = [tag_changes(rows if keep.all() else rows.filter(pa.array(keep)), u.kind, u.version, u.timestamp)]
    return [t for t in out if t.num_rows]


def version_change_rows(files: ChangeFiles, vc: VersionChanges) -> list[pa.Table]:
    """The CDF rows of one version (rule 2 of the module docstring), tagged (`tag_changes`)."""
    return [t for u in version_units(vc) for t in unit_rows(files, u)]


def change_schema(data_schema: pa.Schema) -> pa.Schema:
    """The schema of CDF rows: the table's columns, then the three CDF columns."""
    return data_schema.append(pa.field("_change_type", pa.string())) \
        .append(pa.field("_commit_version", pa.int64())) \
        .append(pa.field("_commit_timestamp", pa.timestamp("us", tz="UTC")))


# --- planning a read -------------------------------------------------------------------------------

@dataclass
class ChangePlan:
    """A checked change feed read: versions `start..end` (None: no version, no rows) read in the
    schema of the snapshot `read` (its schema, partition columns and column mapping), as `units`."""
    read: Any                       # the read Snapshot
    start: int | None
    end: int | None
    units: list[ChangeUnit]

    @property
    def schema(self) -> StructType:
        return self.read.schema


def _schema_of(md: Metadata) -> tuple[StructType, str]:
    return md.schema, column_mapping.mode(md.configuration)


def schema_readable(md: Metadata, md_version: int, read_md: Metadata, read_version: int) -> bool:
    """Whether data written under `md` (in effect at `md_version`) reads in the schema of `read_md`
    (the read snapshot, at `read_version`) — rule 4 of the module docstring."""
    schema, mode = _schema_of(md)
    rschema, rmode = _schema_of(read_md)
    if md_version <= read_version:   # the read schema is the later one: only added columns between
        return (not column_mapping.renames_or_drops(rschema, rmode, schema, mode)
                and is_read_compatible(schema, rschema, forbid_tighten_nullability=True))
    return (not column_mapping.renames_or_drops(schema, mode, rschema, rmode)
            and is_read_compatible(rschema, schema, forbid_tighten_nullability=False))


def check_change_schemas(changes: list[VersionChanges], start_metadata: Metadata, read_md: Metadata,
                         read_version: int, start: int, end: int) -> None:
    """Rule 4 of the module docstring: every schema change after the first version of the range,
    and the start version's schema, readable under the read schema."""
    def fail(version: int, schema_change: bool) -> ChangeDataFeedError:
        what = "schema change" if schema_change else "data schema"
        advice = (f"If possible, please query table changes separately from version {start} to {version} - 1, "
                  f"and from version {version} to {end}." if schema_change else
                  f"If possible, read the changes with the schema of a version at or after {version} (open the "
                  f"table at that version).")
        return ChangeDataFeedError(
            f"Retrieving table changes between version {start} and {end} failed because of an incompatible {what}. "
            f"Your read schema is {read_md.schema.to_json()} at version {read_version}, but we found an "
            f"incompatible {what} at version {version}. {advice}",
            "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE" if schema_change
            else "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA")

    for vc in changes:
        if vc.version > start and vc.metadata is not None and not schema_readable(vc.metadata, vc.version, read_md,
                                                                              read_version):
            raise fail(vc.version, True)
    if not schema_readable(start_metadata, start, read_md, read_version):
        raise fail(start, False)


def plan_changes(log, read_snapshot, start: int | None, end: int | None) -> ChangePlan:
    """Plan the read of versions `start..end` (from `resolve_change_range`; None: nothing) in the
    schema of `read_snapshot`: the CDF check (rule 3), the schema check (rule 4), the units."""
    if start is None or end is None:
        return ChangePlan(read_snapshot, None, None, [])
    start_md = log.snapshot(start).metadata if start != read_snapshot.version else read_snapshot.metadata
    changes = check_cdf_enabled(log, start, end, start_md)
    check_change_schemas(changes, start_md, read_snapshot.metadata, read_snapshot.version, start, end)
    return ChangePlan(read_snapshot, start, end, [u for vc in changes for u in version_units(vc)])


def plan_change_read(log, snapshot, starting_version: Any = None, ending_version: Any = None,
                     starting_timestamp: Any = None, ending_timestamp: Any = None,
                     allow_out_of_range: bool = False, *, time_zone: str | None = None) -> ChangePlan:
    """A batch change feed read on a table whose latest version is `snapshot`'s, planned: the range
    (`resolve_change_range`), the read schema (`change_read_snapshot`), the checks and units
    (`plan_changes`)."""
    rng = resolve_change_range(log, snapshot.version, starting_version, ending_version, starting_timestamp,
                               ending_timestamp, allow_out_of_range, time_zone=time_zone)
    start, end = rng or (None, None)
    read = change_read_snapshot(log, snapshot, start, end,
                                ending_version is not None or ending_timestamp is not None)
    return plan_changes(log, read, start, end)


def change_reader(plan: ChangePlan, columns: Iterable[str] | None = None, *, time_zone: str | None = None):
    """The ArrowFileReader for a plan's files (the read schema; `columns` of it, or all; zone-less
    timestamp partition values read in `time_zone`)."""
    snap = plan.read
    return ArrowFileReader(snap.store, snap.table_root, snap.schema, snap.partition_columns,
                           snap.column_mapping_mode, columns, time_zone=time_zone)


def read_changes_arrow(log, start_version: int | None = None, end_version: int | None = None, *,
                       starting_timestamp: Any = None, ending_timestamp: Any = None, read_snapshot=None,
                       allow_out_of_range: bool = False, threads: int = 4, time_zone: str | None = None) -> pa.Table:
    """CDF rows of `start_version..end_version` (inclusive; or timestamps, see
    `resolve_change_range`) on the table as of `read_snapshot` (default: the latest version), in
    the schema rule 6 of the module docstring gives: the
    table's columns plus `_change_type` (string), `_commit_version` (int64) and
    `_commit_timestamp` (timestamp[us, UTC]), version by version in log order. Refuses ranges where
    CDF was off (CdfNotEnabledError) and ranges that span a column drop, rename or type change."""
    from concurrent.futures import ThreadPoolExecutor

    snap = read_snapshot if read_snapshot is not None else log.snapshot()
    plan = plan_change_read(log, snap, start_version, end_version, starting_timestamp, ending_timestamp,
                            allow_out_of_range, time_zone=time_zone)
    reader = change_reader(plan, time_zone=time_zone)
    schema = change_schema(reader.out_schema)
    files = StoreChangeFiles(reader)
    if threads > 1 and len(plan.units) > 1:
        with ThreadPoolExecutor(max_workers=threads) as ex:
            parts = [t for ts in ex.map(lambda u: unit_rows(files, u), plan.units) for t in ts]
    else:
        parts = [t for u in plan.units for t in unit_rows(files, u)]
    if not parts:
        return schema.empty_table()
    return pa.concat_tables([p.cast(schema) for p in parts])

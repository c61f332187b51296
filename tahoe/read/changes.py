"""Table changes between versions (spec "Change Data Files", "Add CDC File"), Spark-free.

Owns: walking the commits of a version range (`table_changes`), deciding whether the change data
feed was enabled over that range (`cdf_enabled_at`, `check_cdf_enabled`), and materializing CDF rows
as Arrow (`read_changes_arrow`; `version_change_rows` over any `ChangeFiles` source — the sharing
client feeds it files downloaded through a server's URLs). Used by the sharing server's `/changes`
and by the sharing client.

Rules:
  1. A version's timestamp is its commit timestamp as `DeltaLog.commit_timestamps` defines it
     (inCommitTimestamp when enabled, else file mtime made strictly increasing).
  2. A version that holds `cdc` actions takes its change rows from those files only; otherwise its
     `dataChange` adds are inserts and its `dataChange` removes are deletes. A file removed and
     re-added in the same version (a deletion-vector update) yields only the rows whose
     deleted/kept status changed.
  3. Changes are served only where `delta.enableChangeDataFeed` is true in the metadata in effect
     at every version of the range; elsewhere `CdfNotEnabledError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator
from typing import Protocol as _Interface

import numpy as np
import pyarrow as pa

from ..errors import DeltaError, VersionNotFoundError
from ..protocol.actions import Metadata, Protocol
from ..protocol.filenames import LogFileKind
from ..protocol.properties import bool_property

__all__ = ["VersionChanges", "CdfNotEnabledError", "table_changes", "cdf_enabled_at",
           "check_cdf_enabled", "read_changes_arrow", "CDF_COLUMNS", "ChangeFiles", "version_change_rows",
           "tag_changes", "change_schema"]

CDF_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


class CdfNotEnabledError(DeltaError):
    """The change data feed was not enabled (`delta.enableChangeDataFeed`) over the asked range."""


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
    from ..log.segment import list_log   # here: readers of shared tables' change data need no log

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


def table_changes(log, start_version: int, end_version: int | None = None) -> Iterator[VersionChanges]:
    """The commits `start_version..end_version` (inclusive; None: up to the latest), in order."""
    if end_version is not None and end_version < start_version:
        raise ValueError(f"start version {start_version} is after end version {end_version}")
    from ..log.replay import read_commit

    files, stamps = _commits_in_range(log, start_version, end_version)
    for f in files:
        vc = VersionChanges(f.version, stamps.get(f.version, f.status.modification_time))
        for obj in read_commit(log.store, f.path):
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
        yield vc


def _cdf_on(md: Metadata | None) -> bool:
    return md is not None and bool(bool_property(md.configuration, "delta.enableChangeDataFeed"))


def cdf_enabled_at(log, version: int) -> bool:
    """Whether the metadata in effect at `version` has the change data feed enabled."""
    return _cdf_on(log.snapshot(version).metadata)


def check_cdf_enabled(log, start_version: int, end_version: int | None = None) -> list[VersionChanges]:
    """The changes of the range, after checking CDF was on at every version of it (else
    CdfNotEnabledError naming the first version where it was off)."""
    changes = list(table_changes(log, start_version, end_version))
    md = log.snapshot(start_version).metadata
    for vc in changes:
        if vc.metadata is not None:
            md = vc.metadata
        if not _cdf_on(md):
            raise CdfNotEnabledError(
                f"change data feed is not enabled at version {vc.version} of {log.table_root}: "
                "set delta.enableChangeDataFeed=true to read changes")
    return changes


# --- rows ------------------------------------------------------------------------------------------

class ChangeFiles(_Interface):
    """Where the rows of a version's files come from (a table's storage, or URLs of a sharing
    server): `rows(action)` — the file's logical rows, deletion vector NOT applied; `change_types
    (action)` — a cdc file's `_change_type` column; `keep(action, n)` — the rows of an `n`-row file
    its action's deletion vector keeps (a boolean mask). Actions are matched by their `path`."""

    def rows(self, action: dict) -> pa.Table: ...

    def change_types(self, action: dict) -> pa.Array: ...

    def keep(self, action: dict, num_rows: int) -> np.ndarray: ...


class _StoreFiles:
    """`ChangeFiles` of a table's own storage, through an ArrowFileReader."""

    def __init__(self, reader):
        self.reader = reader

    def rows(self, action: dict) -> pa.Table:
        return self.reader.read_file(action["path"], action.get("partitionValues"), None)

    def change_types(self, action: dict) -> pa.Array:
        import pyarrow.parquet as pq

        from ..storage import resolve_data_path

        r = self.reader
        full = resolve_data_path(r.table_root, action["path"])
        pf = pq.ParquetFile(r.store.filesystem.open_input_file(r.store.to_fs_path(full)))
        return pf.read(columns=["_change_type"]).column("_change_type").cast(pa.string())

    def keep(self, action: dict, num_rows: int) -> np.ndarray:
        from ..protocol.deletion_vectors import DeletionVectorDescriptor, deleted_mask, load_deletion_vector

        dv = action.get("deletionVector")
        if not dv:
            return np.ones(num_rows, dtype=bool)
        bitmap = load_deletion_vector(DeletionVectorDescriptor.from_dict(dv), self.reader.table_root,
                                      self.reader._read_range)
        return ~deleted_mask(bitmap, num_rows)


def tag_changes(t: pa.Table, change_type: str | pa.Array, version: int, ts: int) -> pa.Table:
    """`t` with the CDF columns appended: `_change_type`, `_commit_version` (int64) and
    `_commit_timestamp` (timestamp[us, UTC] of `ts` ms)."""
    n = t.num_rows
    ct = change_type if isinstance(change_type, (pa.Array, pa.ChunkedArray)) else pa.array([change_type] * n, pa.string())
    t = t.append_column("_change_type", ct)
    t = t.append_column("_commit_version", pa.array(np.full(n, version, dtype=np.int64)))
    return t.append_column("_commit_timestamp", pa.array(np.full(n, ts * 1000, dtype=np.int64)).cast(pa.timestamp("us", tz="UTC")))


def version_change_rows(files: ChangeFiles, vc: VersionChanges) -> list[pa.Table]:
    """The CDF rows of one version (rule 2 of the module docstring), tagged (`tag_changes`)."""
    out: list[pa.Table] = []
    if vc.cdcs:
        for c in vc.cdcs:
            out.append(tag_changes(files.rows(c), files.change_types(c), vc.version, vc.timestamp))
        return out
    adds = {a["path"]: a for a in vc.adds if a.get("dataChange", True)}
    removes = {r["path"]: r for r in vc.removes if r.get("dataChange", True)}
    for path, a in adds.items():
        rows = files.rows(a)
        keep = files.keep(a, rows.num_rows)
        if path in removes:  # DV update: only the rows whose status changed
            old_keep = files.keep(removes[path], rows.num_rows)
            ins = keep & ~old_keep
            dele = old_keep & ~keep
            if ins.any():
                out.append(tag_changes(rows.filter(pa.array(ins)), "insert", vc.version, vc.timestamp))
            if dele.any():
                out.append(tag_changes(rows.filter(pa.array(dele)), "delete", vc.version, vc.timestamp))
            continue
        out.append(tag_changes(rows.filter(pa.array(keep)), "insert", vc.version, vc.timestamp))
    for path, r in removes.items():
        if path in adds:
            continue
        rows = files.rows(r)
        keep = files.keep(r, rows.num_rows)
        out.append(tag_changes(rows.filter(pa.array(keep)), "delete", vc.version, vc.timestamp))
    return out


def change_schema(data_schema: pa.Schema) -> pa.Schema:
    """The schema of CDF rows: the table's columns, then the three CDF columns."""
    return data_schema.append(pa.field("_change_type", pa.string())) \
        .append(pa.field("_commit_version", pa.int64())) \
        .append(pa.field("_commit_timestamp", pa.timestamp("us", tz="UTC")))


def read_changes_arrow(log, start_version: int, end_version: int | None = None) -> pa.Table:
    """CDF rows of `start_version..end_version` (inclusive): the table's columns (schema of the
    end version) plus `_change_type` (string), `_commit_version` (int64) and `_commit_timestamp`
    (timestamp[us, UTC]). Refuses ranges where CDF was off (CdfNotEnabledError)."""
    from .arrow_reader import ArrowFileReader

    changes = check_cdf_enabled(log, start_version, end_version)
    end = changes[-1].version
    snap = log.snapshot(end)
    reader = ArrowFileReader(log.store, log.table_root, snap.schema, snap.partition_columns,
                             snap.column_mapping_mode)
    files = _StoreFiles(reader)
    parts: list[pa.Table] = []
    for vc in changes:
        parts.extend(version_change_rows(files, vc))
    schema = change_schema(reader.out_schema)
    if not parts:
        return schema.empty_table()
    return pa.concat_tables([p.cast(schema) for p in parts])

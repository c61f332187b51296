"""RESTORE: bring a table back to an earlier version in ONE new commit (delta-spark's RestoreTableCommand;
delta-rs's `DeltaTable.restore`).

  1. The commit (`RESTORE`, parameters `version`, `timestamp`) adds back the restored version's files the
     latest lacks and removes the others, compared by (path, deletion vector).
  2. The restored metaData is committed with the latest identity high-water marks and the union of both
     protocols (lowered only with `protocol_downgrade_allowed`).
  3. Refused, nothing committed: a version not older than the latest or not rebuildable
     (VersionNotFoundError); missing data or DV files (DataFilesMissingError) unless `ignore_missing_files`.
  4. Metrics as delta-spark names them (tableSizeAfterRestore, numRestoredFiles, ...)."""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import pyarrow as pa

from ..errors import DataFilesMissingError, InvalidOptionError, VersionNotFoundError
from ..log import DeltaLog, Snapshot
from ..log.delta_log import parse_timestamp
from ..log.replay import file_keys, root_uri
from ..log.snapshot import add_files_from_table
from ..protocol.deletion_vectors import DeletionVectorDescriptor
from ..protocol.properties import (
    IDENTITY_HIGH_WATER_MARK, advance_identity_high_water_mark, identity_columns, int_property,
)
from ..protocol.table_features import is_feature_supported, merge_protocols, reader_features_of, writer_features_of
from ..protocol.timestamps import now_ms
from ..storage import resolve_data_path
from ..txn import Transaction
from ..txn.checkpoint_protection import CHECKPOINT_PROTECTION_KEY

__all__ = ["restore", "RESTORE_METRICS", "restore_target_version"]

RESTORE_METRICS = ("tableSizeAfterRestore", "numOfFilesAfterRestore", "numRemovedFiles",
                   "numRestoredFiles", "removedFilesSize", "restoredFilesSize")

Progress = Callable[[str, int, int], None]


def restore_target_version(log: DeltaLog, latest: Snapshot, version: int | None, timestamp: Any) -> int:
    """The version RESTORE goes back to, checked as delta-spark checks it."""
    if (version is None) == (timestamp is None):
        raise InvalidOptionError("RESTORE needs either a version or a timestamp (not both)")
    if version is not None:
        if isinstance(version, bool) or not isinstance(version, int):
            raise InvalidOptionError(f"version needs to be an int but got {version!r}")
        if version < 0:
            raise VersionNotFoundError(f"Cannot restore table to version {version}. Available versions: "
                                       f"[0, {latest.version}].", error_class="DELTA_CANNOT_RESTORE_TABLE_VERSION")
        target = version
    else:
        try:
            target = log.version_at_timestamp(timestamp)
        except VersionNotFoundError as e:
            if e.error_class != "DELTA_TIMESTAMP_GREATER_THAN_COMMIT":
                raise
            raise VersionNotFoundError(
                f"Cannot restore table to timestamp ({timestamp}) as it is after the latest version available. "
                f"Please use a timestamp before ({log.commit_timestamps()[-1][1]} ms, version {latest.version})",
                error_class="DELTA_CANNOT_RESTORE_TIMESTAMP_GREATER") from None
    if target > latest.version:
        raise VersionNotFoundError(
            f"Cannot restore table to version {target}. Available versions: [0, {latest.version}].",
            error_class="DELTA_CANNOT_RESTORE_TABLE_VERSION")
    if target == latest.version:
        raise VersionNotFoundError(
            f"Version to restore ({target}) should be less than the last available version "
            f"({latest.version}) of {log.table_root}")
    return target


def _merged_high_water_marks(restored: Snapshot, latest: Snapshot):
    """The restored schema with each identity column's high-water mark at least the latest one."""
    schema = restored.schema
    current = identity_columns(latest.schema)
    for name in identity_columns(schema):
        f = current.get(name)
        hwm = f.metadata.get(IDENTITY_HIGH_WATER_MARK) if f is not None else None
        if hwm is not None:
            schema = advance_identity_high_water_mark(schema, name, int(hwm)) or schema
    return schema


def _missing(store, table_root: str, adds: list, max_workers: int = 16) -> list[str]:
    """Paths (data files and on-disk deletion vectors of `adds`) that do not exist."""
    paths: list[str] = []
    for a in adds:
        paths.append(resolve_data_path(table_root, a.path))
        dv: DeletionVectorDescriptor | None = a.deletion_vector
        if dv is not None and dv.is_on_disk:
            paths.append(dv.absolute_path(table_root))
    paths = list(dict.fromkeys(paths))
    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(paths) or 1))) as ex:
        there = list(ex.map(store.exists, paths))
    return [p for p, ok in zip(paths, there) if not ok]


def restore(table: str | DeltaLog, version: int | None = None, timestamp: Any = None, *,
            ignore_missing_files: bool = False, protocol_downgrade_allowed: bool = False,
            storage_options: dict | None = None, progress: Progress | None = None) -> dict[str, Any]:
    """RESTORE `table` to `version` or to the version as of `timestamp` (see the module
    docstring). Returns delta-spark's metrics plus `version` (the RESTORE commit)."""
    log = table if isinstance(table, DeltaLog) else DeltaLog.for_table(table, storage_options)
    latest = log.snapshot()
    target = restore_target_version(log, latest, version, timestamp)
    restored = log.snapshot(version=target)
    root = root_uri(log.table_root)

    def keyed(snap: Snapshot) -> tuple[pa.Table, list[str]]:
        t = snap.files_table()
        return t, file_keys(t.column("path"), t.column("deletionVector"), root).to_pylist()

    now_files, now_keys = keyed(latest)
    then_files, then_keys = keyed(restored)
    now_set, then_set = set(now_keys), set(then_keys)
    to_add = then_files.filter(pa.array([k not in now_set for k in then_keys], pa.bool_()))
    to_remove = now_files.filter(pa.array([k not in then_set for k in now_keys], pa.bool_()))
    adds = [dataclasses.replace(a, data_change=True) for a in add_files_from_table(to_add)]
    if progress is not None:
        progress("checking files", 0, len(adds))
    if adds and not ignore_missing_files:
        missing = _missing(log.store, log.table_root, adds)
        if missing:
            shown = ", ".join(missing[:100]) + (" ..." if len(missing) > 100 else "")
            raise DataFilesMissingError(
                f"cannot restore {log.table_root} to version {target}: {len(missing)} file(s) it references "
                f"are missing (vacuumed or deleted): {shown}. Restoring it partially is possible with "
                f"ignore_missing_files=True (on Spark: spark.sql.files.ignoreMissingFiles=true; on the command line: "
                f"--ignore-missing-files)")
    if progress is not None:
        progress("checking files", len(adds), len(adds))
    now = now_ms()
    removes = [a.remove(now) for a in add_files_from_table(to_remove)]

    ts_param = None
    if timestamp is not None:
        ts_param = timestamp if isinstance(timestamp, str) else time.strftime(
            "%Y-%m-%d %H:%M:%S", time.gmtime(parse_timestamp(timestamp) / 1000))
    txn = Transaction(log, "RESTORE", {"version": target if version is not None else None,
                                       "timestamp": ts_param}, snapshot=latest)
    txn.read_whole_table()
    md = restored.metadata
    schema = _merged_high_water_marks(restored, latest)
    if schema != restored.schema:
        md = dataclasses.replace(md, schema_string=schema.to_json())
    protected = int_property(latest.configuration, CHECKPOINT_PROTECTION_KEY) or 0
    if (not protocol_downgrade_allowed and is_feature_supported(latest.protocol, "checkpointProtection")
            and protected > (int_property(md.configuration, CHECKPOINT_PROTECTION_KEY) or 0)):
        # the protocol keeps checkpointProtection, so the history it protects stays protected: the
        # restored metaData keeps the latest delta.requireCheckpointProtectionBeforeVersion
        md = dataclasses.replace(md, configuration={**md.configuration, CHECKPOINT_PROTECTION_KEY: str(protected)})
    txn.update_metadata(md)
    now_features = reader_features_of(latest.protocol) | writer_features_of(latest.protocol)
    if protocol_downgrade_allowed:
        txn.allow_feature_removal(now_features - reader_features_of(restored.protocol)
                                  - writer_features_of(restored.protocol))
        txn.update_protocol(restored.protocol)
    else:
        txn.update_protocol(merge_protocols(restored.protocol, now_features))
    txn.add_files(adds)
    txn.remove_files(removes)
    sizes_add = pa.compute.sum(to_add.column("size")).as_py() or 0
    sizes_rm = pa.compute.sum(to_remove.column("size")).as_py() or 0
    metrics = {
        "tableSizeAfterRestore": restored.size_in_bytes,
        "numOfFilesAfterRestore": restored.num_files,
        "numRemovedFiles": len(removes),
        "numRestoredFiles": len(adds),
        "removedFilesSize": int(sizes_rm),
        "restoredFilesSize": int(sizes_add),
    }
    committed = txn.commit(operation_metrics=metrics)
    return {**metrics, "version": committed, "restoredVersion": target}

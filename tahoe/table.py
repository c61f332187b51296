"""`tahoe.Table`: the Spark-free facade over one Delta table, in the spirit of delta-rs's `DeltaTable`.

  1. Open at the latest version, a version or a timestamp; schema, protocol, metadata, files, history.
  2. Read rows as Arrow or pandas (`to_arrow(filter=...)` skips files by partition values and stats).
  3. Create and evolve (`Table.create`, `set_properties`, `add_constraint`, `transaction`, ...), one commit
     each (`tahoe.txn.table_ops`).
  4. Maintenance with delta-rs's names where it has them: `vacuum`, `restore`, `clone`, `drop_feature`,
     `generate`, `optimize` (`optimize.compact()` / `z_order()`), `reorg`, `cluster_by`."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Iterable

import pyarrow as pa

from .log import DeltaLog, Snapshot

if TYPE_CHECKING:
    from .read import Scan
    from .write.dml import TableMerger

# A file listing (`files`, `files_reader`, `file_uris`) imports the log core and the file planner
# only (tests/test_startup.py, rule 5: whole-process listings are timed against delta-rs, and the
# transaction, writer, expression and maintenance modules cost ~0.17 s of imports): every other
# method imports what it uses when it runs.

__all__ = ["Table"]


class Table:
    def __init__(self, uri: str, version: int | None = None, timestamp: Any = None,
                 storage_options: dict | None = None):
        self.uri = uri
        self.storage_options = storage_options
        self.log = DeltaLog.for_table(uri, storage_options)
        self.snapshot: Snapshot = self.log.snapshot(version=version, timestamp=timestamp)

    @classmethod
    def _from_snapshot(cls, log: DeltaLog, snapshot: Snapshot) -> "Table":
        t = cls.__new__(cls)
        t.uri = log.table_root
        t.storage_options = None
        t.log = log
        t.snapshot = snapshot
        return t

    # --- the version -------------------------------------------------------------------------
    @property
    def version(self) -> int:
        return self.snapshot.version

    @property
    def table_root(self) -> str:
        return self.log.table_root

    def load_version(self, version: int) -> "Table":
        return Table._from_snapshot(self.log, self.log.snapshot(version=version))

    def load_as_of(self, timestamp: Any) -> "Table":
        return Table._from_snapshot(self.log, self.log.snapshot(timestamp=timestamp))

    def refresh(self) -> "Table":
        self.snapshot = self.log.snapshot()
        return self

    # --- metadata ----------------------------------------------------------------------------
    @property
    def schema(self):
        return self.snapshot.schema

    @property
    def protocol(self):
        return self.snapshot.protocol

    @property
    def metadata(self):
        return self.snapshot.metadata

    @property
    def partition_columns(self) -> list[str]:
        return self.snapshot.partition_columns

    def files(self, columns: Iterable[str] | None = None, filter: Any = None) -> pa.Table:
        """The active files (Arrow, ADD_SCHEMA columns); with `filter` (see `to_arrow`) only the
        files that may hold a matching row."""
        from .read import plan_files

        return plan_files(self.snapshot, filter, columns=columns)

    def files_reader(self, columns: Iterable[str] | None = None, filter: Any = None) -> pa.RecordBatchReader:
        """`files(columns, filter)` as a stream of record batches: a table's checkpoint is read,
        reconciled and filtered a batch at a time, so listing a table of millions of files holds
        one batch (32,768 rows of the checkpoint) and the commits after the checkpoint, not the
        whole list."""
        from .log.file_actions import ADD_SCHEMA
        from .read.scan import plan_file_batches

        names = list(columns) if columns is not None else ADD_SCHEMA.names
        for c in names:
            if c not in ADD_SCHEMA.names:
                raise ValueError(f"unknown add column '{c}'; known: {', '.join(ADD_SCHEMA.names)}")
        tables = plan_file_batches(self.snapshot, filter, columns=columns)
        return pa.RecordBatchReader.from_batches(pa.schema([ADD_SCHEMA.field(c) for c in names]),
                                                 (b for t in tables for b in t.to_batches()))

    def file_uris(self, filter: Any = None) -> list[str]:
        from .storage import resolve_data_path

        return [resolve_data_path(self.table_root, p)
                for p in self.files(["path"], filter=filter).column("path").to_pylist()]

    def history(self, limit: int | None = None) -> list[dict]:
        return [e.to_dict() for e in self.log.history(limit)]

    # --- rows --------------------------------------------------------------------------------
    def scan(self, columns: Iterable[str] | None = None, filter: Any = None, **kw) -> Scan:
        """A `tahoe.read.Scan` of this version (plan the files, then read them)."""
        from .read import Scan

        return Scan(self.snapshot, columns=columns, filter=filter, **kw)

    def to_arrow(self, columns: Iterable[str] | None = None, filter: Any = None) -> pa.Table:
        """The rows (all columns, or `columns`). `filter` — SQL text (`"day = 'mon' AND id > 10"`),
        a `tahoe.expressions` tree, or delta-rs DNF tuples (`[("day", "=", "mon")]`) — keeps the
        rows where it is TRUE and opens only the files whose partition values and stats allow a
        match (AnalysisException for an unknown column, ParseException for bad SQL)."""
        return self.scan(columns, filter=filter).to_arrow()

    def to_pandas(self, columns: Iterable[str] | None = None, filter: Any = None):
        return self.to_arrow(columns, filter=filter).to_pandas()

    # --- the change data feed (tahoe.read.changes) --------------------------------------------
    def changes(self, start: int | None = None, end: int | None = None, *, starting_timestamp: Any = None,
                ending_timestamp: Any = None, columns: Iterable[str] | None = None, filter: Any = None,
                allow_out_of_range: bool = False) -> pa.Table:
        """The change data feed of versions `start..end` (inclusive; `end` defaults to this
        table's version) or of the versions committed between the timestamps: the table's columns
        (in this version's schema) plus `_change_type` (insert, delete, update_preimage,
        update_postimage), `_commit_version` and `_commit_timestamp`, version by version. Rows
        come from the versions' change data files where they have them, else from their added
        and removed files (deletion vectors accounted for). Errors as delta-spark's: CDF off in
        the range (`CdfNotEnabledError`, DELTA_MISSING_CHANGE_DATA), a start after this version
        or an end before the start (`ChangeDataRangeError`), a column dropped, renamed or retyped
        inside the range (`ChangeDataFeedError`); `allow_out_of_range` gives no rows for a start
        after this version and reads to this version for an end timestamp after it. `columns`
        keeps those columns (CDF columns included); `filter` (SQL text or a tahoe expression)
        keeps the rows where it is TRUE."""
        from .expressions import Scope, as_expression, matches
        from .read.changes import read_changes_arrow

        if start is None and starting_timestamp is None:
            start = 0
        t = read_changes_arrow(self.log, start, end, starting_timestamp=starting_timestamp,
                               ending_timestamp=ending_timestamp, read_snapshot=self.snapshot,
                               allow_out_of_range=allow_out_of_range)
        expr = as_expression(filter)
        if expr is not None and t.num_rows:
            t = t.filter(matches(expr, Scope.of(t)))
        if columns is not None:
            by_lower = {n.lower(): n for n in t.column_names}
            missing = [c for c in columns if c.lower() not in by_lower]
            if missing:
                raise ValueError(f"unknown column(s) {missing}; the change feed has {t.column_names}")
            t = t.select([by_lower[c.lower()] for c in columns])
        return t

    def load_cdf(self, starting_version: int = 0, ending_version: int | None = None,
                 starting_timestamp: str | None = None, ending_timestamp: str | None = None,
                 columns: list[str] | None = None, predicate: str | None = None,
                 allow_out_of_range: bool = False) -> pa.RecordBatchReader:
        """delta-rs's `DeltaTable.load_cdf`, same arguments (a timestamp is used when its version
        is not given): the change data feed (see `changes`) as a RecordBatchReader."""
        t = self.changes(None if starting_timestamp is not None and not starting_version else starting_version,
                         ending_version, starting_timestamp=starting_timestamp,
                         ending_timestamp=ending_timestamp if ending_version is None else None,
                         columns=columns, filter=predicate, allow_out_of_range=allow_out_of_range)
        return pa.RecordBatchReader.from_batches(t.schema, t.to_batches())

    # --- creating and evolving (tahoe.txn) -----------------------------------------------------
    @classmethod
    def create(cls, uri: str, schema: Any, partition_columns: Iterable[str] = (),
               properties: dict | None = None, name: str | None = None,
               description: str | None = None, storage_options: dict | None = None,
               mode: str = "error", protocol: Any = None, cluster_by: Iterable[str] | None = None) -> "Table":
        """Create a table (`schema`: a StructType, a pyarrow schema, Delta JSON or a DDL column
        list such as "id BIGINT, name STRING"); mode "error" | "ignore" | "overwrite".
        `cluster_by`: clustering columns (liquid clustering; not with partition columns)."""
        from . import txn

        log = DeltaLog.for_table(uri, storage_options)
        snap = txn.create_table(log, schema, partition_columns, properties, name=name,
                                description=description, mode=mode, protocol=protocol, cluster_by=cluster_by)
        return cls._from_snapshot(log, snap)

    @property
    def clustering_columns(self) -> list[str]:
        """The table's clustering columns ([] when it is not clustered)."""
        from . import txn

        return txn.table_clustering_columns(self.snapshot)

    def cluster_by(self, columns: Iterable[str] | None) -> "Table":
        """ALTER TABLE ... CLUSTER BY (columns), or CLUSTER BY NONE with None: one commit; the
        next OPTIMIZE clusters by the new columns."""
        from . import txn

        return self._evolved(txn.cluster_by(self.log, columns))

    # --- DML (tahoe.write.dml), each one commit -------------------------------------------------
    def delete(self, predicate: str | None = None) -> dict:
        """DELETE the rows where `predicate` (Spark SQL) is TRUE, all rows when None; delta-spark's
        DELETE metrics and `version`. The table moves to the new version."""
        from .write import dml

        return self._after(dml.delete(self.log, predicate))

    def update(self, updates: dict[str, str] | None = None, new_values: dict[str, Any] | None = None,
               predicate: str | None = None) -> dict:
        """UPDATE: `updates` column -> SQL expression, or `new_values` column -> Python value, on
        the rows where `predicate` is TRUE (all when None); delta-spark's metrics and `version`."""
        from .write import dml

        return self._after(dml.update(self.log, updates, new_values, predicate))

    def merge(self, source: Any, predicate: str, source_alias: str | None = None,
              target_alias: str | None = None, merge_schema: bool = False) -> "TableMerger":
        """MERGE `source` (Arrow or pandas) ON `predicate`: add deltalake's clauses
        (`when_matched_update`, `when_matched_update_all`, `when_matched_delete`,
        `when_not_matched_insert[_all]`, `when_not_matched_by_source_update/_delete`), then
        `execute()` (delta-spark's MERGE metrics and `version`; the table moves to it)."""
        from .write.dml import TableMerger
        from .write.files import to_arrow_table

        merger = TableMerger(self.log, to_arrow_table(source), predicate, source_alias, target_alias,
                             merge_schema, None)
        merger.on_commit = self.refresh
        return merger

    def _after(self, metrics: dict) -> dict:
        self.refresh()
        return metrics

    # --- maintenance (tahoe.write.optimize) -----------------------------------------------------
    @property
    def optimize(self) -> "TableOptimizer":
        """OPTIMIZE: `t.optimize(where=..., zorder_by=...)` (delta-spark's metrics), or as
        delta-rs's `dt.optimize`: `t.optimize.compact(...)`, `t.optimize.z_order(columns, ...)`."""
        return TableOptimizer(self)

    def reorg(self, where: Any = None, apply: str = "purge", max_concurrent_tasks: int | None = None,
              progress: Any = None) -> dict:
        """REORG TABLE ... [WHERE where] APPLY (PURGE): rewrite the files carrying deletion vectors
        so that their deleted rows are physically gone (history operation REORG). Returns
        delta-spark's OPTIMIZE metrics (and `version`). `apply` is "purge" (the only one tahoe
        implements; UPGRADE UNIFORM is refused)."""
        from .errors import UnsupportedFeatureError
        from .write.optimize import reorg_purge

        if str(apply).strip().lower() != "purge":
            raise UnsupportedFeatureError(
                f"REORG TABLE ... APPLY ({apply}) is not implemented by tahoe: only APPLY (PURGE) is")
        m = reorg_purge(self.log, where, max_workers=max_concurrent_tasks, progress=progress)
        self.refresh()
        return m

    def _evolved(self, snap: Snapshot) -> "Table":
        self.snapshot = snap
        return self

    def set_properties(self, properties: dict) -> "Table":
        from . import txn

        return self._evolved(txn.set_properties(self.log, properties))

    def unset_properties(self, keys: Iterable[str], if_exists: bool = False) -> "Table":
        from . import txn

        return self._evolved(txn.unset_properties(self.log, keys, if_exists=if_exists))

    def add_constraint(self, name: str, expression: str, validate: Any = None) -> "Table":
        """Add a CHECK constraint; `validate(expression) -> int` counts existing violating rows
        (nonzero: ConstraintViolationError, nothing committed)."""
        from . import txn

        return self._evolved(txn.add_constraint(self.log, name, expression, validate=validate))

    def drop_constraint(self, name: str, if_exists: bool = True) -> "Table":
        from . import txn

        return self._evolved(txn.drop_constraint(self.log, name, if_exists=if_exists))

    def add_feature(self, name: str) -> "Table":
        from . import txn

        return self._evolved(txn.add_feature(self.log, name))

    def upgrade_protocol(self, reader_version: int | None = None, writer_version: int | None = None) -> "Table":
        from . import txn

        return self._evolved(txn.upgrade_protocol(self.log, reader_version, writer_version))

    def update_schema(self, schema: Any, merge: bool = True) -> "Table":
        from . import txn

        return self._evolved(txn.update_schema(self.log, schema, merge=merge))

    def rename_column(self, column: str, new_name: str) -> "Table":
        from . import txn

        return self._evolved(txn.rename_column(self.log, column, new_name))

    def drop_column(self, column: str) -> "Table":
        from . import txn

        return self._evolved(txn.drop_column(self.log, column))

    # --- maintenance (tahoe.maintenance) ------------------------------------------------------
    def vacuum(self, retention_hours: float | None = None, dry_run: bool = True,
               enforce_retention_duration: bool = True, *, full: bool = False,
               keep_versions: list[int] | None = None, max_workers: int | None = None) -> list[str]:
        """VACUUM, as delta-rs's `DeltaTable.vacuum`: the files (relative paths) no version inside
        the retention window needs — listed only (`dry_run=True`, the default), or deleted.
        `full=False` (delta-rs's default) looks only at the log's tombstones; `full=True` lists
        the directory too and also removes files no commit ever named (delta-spark's VACUUM).
        See `tahoe.maintenance.vacuum`."""
        from .maintenance.vacuum import vacuum as vacuum_table

        result = vacuum_table(self.log, retention_hours, dry_run,
                              enforce_retention_duration=enforce_retention_duration,
                              full=full, keep_versions=keep_versions, max_workers=max_workers)
        if not dry_run:
            self.refresh()
        return result.paths

    def restore(self, target: Any, *, ignore_missing_files: bool = False,
                protocol_downgrade_allowed: bool = False) -> dict:
        """RESTORE the table to version `target` (int) or to the version as of `target` (datetime,
        ISO string, epoch ms), in one new commit; returns delta-spark's RESTORE metrics. See
        `tahoe.maintenance.restore`."""
        from .maintenance.restore import restore as restore_table

        if isinstance(target, bool):
            raise TypeError("restore target must be a version (int) or a timestamp")
        kw = {"version": target} if isinstance(target, int) else {"timestamp": target}
        metrics = restore_table(self.log, ignore_missing_files=ignore_missing_files,
                                protocol_downgrade_allowed=protocol_downgrade_allowed, **kw)
        self.refresh()
        return metrics

    def clone(self, target: str, shallow: bool = False, replace: bool = False,
              properties: dict[str, str] | None = None, target_storage_options: dict | None = None) -> "Table":
        """CLONE this version of the table to `target` (shallow: the target's log names this
        table's files; deep: the files are copied). Returns the new table. See
        `tahoe.maintenance.clone`."""
        from .maintenance.clone import clone as clone_table

        opts = target_storage_options if target_storage_options is not None else self.storage_options
        metrics = clone_table(self.log, target, version=self.snapshot.version, shallow=shallow,
                              replace=replace, properties=properties, target_storage_options=opts)
        log = DeltaLog.for_table(target, opts)
        return Table._from_snapshot(log, log.snapshot(version=metrics["version"]))

    def drop_feature(self, name: str, truncate_history: bool = False) -> "Table":
        """DROP FEATURE `name` as current delta-spark does (see `tahoe.maintenance.features`)."""
        from .maintenance.features import drop_feature as drop_table_feature

        drop_table_feature(self.log, name, truncate_history)
        return self.refresh()

    def generate(self, mode: str) -> dict:
        """delta-spark's `generate("symlink_format_manifest")`: manifests under
        `_symlink_format_manifest/` (see `tahoe.uniform.symlink_manifest`)."""
        from .uniform.symlink_manifest import generate as generate_manifest

        return generate_manifest(self.log, mode)

    def transaction(self, operation: str, operation_parameters: dict | None = None,
                    isolation_level: str | None = None, engine_info: str | None = None,
                    max_retries: int = 50):
        """A `tahoe.txn.Transaction` reading this table's snapshot."""
        from . import txn

        return txn.Transaction(self.log, operation, operation_parameters, snapshot=self.snapshot,
                           isolation_level=isolation_level, engine_info=engine_info,
                           max_retries=max_retries)

    def detail(self) -> dict:
        """The table's details, like delta-spark's DESCRIBE DETAIL."""
        from .protocol.table_features import reader_features_of, writer_features_of

        snap = self.snapshot
        md = snap.metadata
        p = snap.protocol
        return {
            "format": "delta",
            "id": md.id,
            "name": md.name,
            "description": md.description,
            "location": self.table_root,
            "createdAt": md.created_time,
            "lastModified": snap.timestamp,
            "version": snap.version,
            "partitionColumns": list(md.partition_columns),
            "numFiles": snap.num_files,
            "sizeInBytes": snap.size_in_bytes,
            "properties": dict(md.configuration),
            "minReaderVersion": p.min_reader_version,
            "minWriterVersion": p.min_writer_version,
            "tableFeatures": sorted(reader_features_of(p) | writer_features_of(p)),
        }

    def __repr__(self) -> str:
        return f"Table({self.table_root!r}, version={self.snapshot.version})"


_DELTA_RS_REFUSED = ("max_spill_size", "max_temp_directory_size", "min_commit_interval", "writer_properties",
                     "commit_properties", "post_commithook_properties")


class TableOptimizer:
    """OPTIMIZE of one table (`Table.optimize`): call it for delta-spark's behaviour and metrics,
    or use `compact` / `z_order` as delta-rs's `TableOptimizer` (same arguments and metrics keys;
    delta-rs options tahoe does not implement are refused by name)."""

    def __init__(self, table: Table):
        self.table = table

    def __call__(self, where: Any = None, zorder_by: Iterable[str] | None = None, target_size: Any = None,
                 min_file_size: Any = None, max_concurrent_tasks: int | None = None, progress: Any = None,
                 settings: Any = None) -> dict:
        """OPTIMIZE [WHERE where] [ZORDER BY zorder_by] (clustered tables: clustering) without
        Spark; returns delta-spark's OptimizeMetrics as a dict plus `version`. `target_size`: the
        output file size in bytes (or '256mb'; default the table's delta.targetFileSize, else
        1 GiB), also the size under which a file is compacted unless `min_file_size` says
        otherwise. `settings`: a `tahoe.write.optimize.OptimizeSettings` for the other knobs."""

        from .write.optimize import OptimizeSettings, optimize

        s = settings or OptimizeSettings()
        if target_size is not None:
            s = dataclasses.replace(s, max_file_size=target_size)
        if min_file_size is not None:
            s = dataclasses.replace(s, min_file_size=min_file_size)
        if isinstance(zorder_by, str):
            zorder_by = [zorder_by]
        m = optimize(self.table.log, where, list(zorder_by or []), settings=s, max_workers=max_concurrent_tasks,
                     progress=progress)
        self.table.refresh()
        return m

    def _refuse(self, given: dict) -> None:
        from .errors import UnsupportedFeatureError

        for name in _DELTA_RS_REFUSED:
            if given.get(name) is not None:
                raise UnsupportedFeatureError(f"optimize option '{name}' (delta-rs) is not implemented by tahoe")

    def compact(self, partition_filters: Any = None, target_size: int | None = None,
                max_concurrent_tasks: int | None = None, max_spill_size: int | None = None,
                max_temp_directory_size: int | None = None, min_commit_interval: Any = None,
                writer_properties: Any = None, *, commit_properties: Any = None,
                post_commithook_properties: Any = None) -> dict:
        """delta-rs's `optimize.compact`: bin-packing of the files matching `partition_filters`
        (DNF tuples or SQL on partition columns) into files of about `target_size` bytes (default
        the table's delta.targetFileSize, else 100 MB as delta-rs). Returns delta-rs's metrics."""
        from .write.optimize import delta_rs_metrics

        self._refuse(locals())
        return delta_rs_metrics(self(partition_filters, None, target_size or self._default_target(),
                                     max_concurrent_tasks=max_concurrent_tasks))

    def z_order(self, columns: Iterable[str], partition_filters: Any = None, target_size: int | None = None,
                max_concurrent_tasks: int | None = None, max_spill_size: int | None = None,
                max_temp_directory_size: int | None = None, min_commit_interval: Any = None,
                writer_properties: Any = None, *, commit_properties: Any = None,
                post_commithook_properties: Any = None) -> dict:
        """delta-rs's `optimize.z_order`: every file of each selected partition rewritten in
        Z-order of `columns`. Returns delta-rs's metrics."""
        from .write.optimize import delta_rs_metrics

        self._refuse(locals())
        cols = [columns] if isinstance(columns, str) else list(columns)
        return delta_rs_metrics(self(partition_filters, cols, target_size or self._default_target(),
                                     max_concurrent_tasks=max_concurrent_tasks))

    def _default_target(self) -> Any:
        from .protocol.properties import text_property

        return text_property(self.table.snapshot.configuration, "delta.targetFileSize") or 100 * 1024 * 1024

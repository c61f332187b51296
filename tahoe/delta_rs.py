"""delta-rs's Python API without Spark: `DeltaTable`, `write_deltalake`, `Field`, `TableFeatures`, with
deltalake's names, arguments and return values, so that a deltalake user's script runs with
`deltalake` replaced by `tahoe`.

  1. `DeltaTable` is `tahoe.Table` with deltalake's accessors (`version()`, `schema()`,
     `metadata()`, `protocol()`, `load_as_version`, `to_pyarrow_table`, ...) and its operations:
     `delete`, `update`, `merge` (a `TableMerger` with deltalake's clause names), `optimize`,
     `vacuum`, `restore`, `history`, `load_cdf`, `create_checkpoint`, `alter`.
  2. Each operation runs tahoe's own (`tahoe.write.dml`, `tahoe.write.optimize`,
     `tahoe.maintenance`, `tahoe.txn`), one commit as delta-spark records it, and answers with
     deltalake's metrics (`num_deleted_rows`, ...); the table then shows the new version.
  3. deltalake options tahoe does not implement (`writer_properties`, `commit_properties`, ...)
     are refused by name when given, never ignored.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from .errors import InvalidTableOperationError, SchemaError, UnsupportedFeatureError
from .expressions import Scope, and_, as_expression, evaluate_predicate, parse
from .log import DeltaLog
from .log.checkpoints import write_checkpoint
from .log.metadata_cleanup import cleanup_expired_logs
from .protocol.schema import StructField, StructType, from_arrow_schema, parse_data_type
from .table import Table, TableOptimizer
from .txn import Transaction, add_constraint, add_feature, drop_constraint, set_properties, update_schema
from .write import dml
from .write.files import to_arrow_table
from .write.writer import write_table

__all__ = ["DeltaTable", "TableMerger", "TableAlterer", "write_deltalake", "Field", "TableFeatures"]


def _refuse(**given: Any) -> None:
    """UnsupportedFeatureError naming the first deltalake option given that tahoe does not implement."""
    for name, value in given.items():
        if value is not None and value is not False:
            raise UnsupportedFeatureError(f"deltalake option '{name}' is not implemented by tahoe")


def Field(name: str, type: Any, nullable: bool = True, metadata: Mapping[str, Any] | None = None) -> StructField:  # noqa: N802
    """deltalake's `Field(name, type, nullable, metadata)`: a column; `type` a Delta type name
    (`"integer"`, `"string"`, `"decimal(10,2)"`) or a tahoe DataType."""
    dt = parse_data_type(type) if isinstance(type, (str, dict)) else type
    return StructField(name, dt, nullable, dict(metadata or {}))


class TableFeatures(enum.Enum):
    """deltalake's `TableFeatures`, valued by the protocol's feature names."""
    AppendOnly = "appendOnly"
    ChangeDataFeed = "changeDataFeed"
    CheckConstraints = "checkConstraints"
    ColumnMapping = "columnMapping"
    DeletionVectors = "deletionVectors"
    DomainMetadata = "domainMetadata"
    GeneratedColumns = "generatedColumns"
    IcebergCompatV1 = "icebergCompatV1"
    IdentityColumns = "identityColumns"
    Invariants = "invariants"
    RowTracking = "rowTracking"
    TimestampNanos = "timestampNanos"
    TimestampWithoutTimezone = "timestampNtz"
    V2Checkpoint = "v2Checkpoint"
    VariantType = "variantType"
    VariantTypePreview = "variantType-preview"


# --- deltalake's metrics, from delta-spark's (what tahoe's operations answer) -----------------------

_DELETE = {"num_added_files": "numAddedFiles", "num_removed_files": "numRemovedFiles",
           "num_deleted_rows": "numDeletedRows", "num_copied_rows": "numCopiedRows",
           "execution_time_ms": "executionTimeMs", "scan_time_ms": "scanTimeMs", "rewrite_time_ms": "rewriteTimeMs"}
_UPDATE = {"num_added_files": "numAddedFiles", "num_removed_files": "numRemovedFiles",
           "num_updated_rows": "numUpdatedRows", "num_copied_rows": "numCopiedRows",
           "execution_time_ms": "executionTimeMs", "scan_time_ms": "scanTimeMs"}
_MERGE = {"num_source_rows": "numSourceRows", "num_target_rows_inserted": "numTargetRowsInserted",
          "num_target_rows_updated": "numTargetRowsUpdated", "num_target_rows_deleted": "numTargetRowsDeleted",
          "num_target_rows_copied": "numTargetRowsCopied", "num_output_rows": "numOutputRows",
          "num_target_files_added": "numTargetFilesAdded", "num_target_files_removed": "numTargetFilesRemoved",
          "execution_time_ms": "executionTimeMs", "scan_time_ms": "scanTimeMs", "rewrite_time_ms": "rewriteTimeMs"}


def _renamed(metrics: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    return {ours: int(metrics.get(theirs) or 0) for ours, theirs in names.items()}


class TableMerger(dml.TableMerger):
    """deltalake's `TableMerger` (`DeltaTable.merge`): the clauses of `tahoe.write.dml.TableMerger`;
    `execute()` answers with deltalake's MERGE metrics and moves the table to the new version."""

    def __init__(self, table: "DeltaTable", source: pa.Table, predicate: str, source_alias: str | None,
                 target_alias: str | None, merge_schema: bool):
        super().__init__(table.log, source, predicate, source_alias, target_alias, merge_schema, None)
        self.on_commit = table.update_incremental

    def execute(self) -> dict[str, Any]:
        return _renamed(super().execute(), _MERGE)


class DeltaTableOptimizer(TableOptimizer):
    """deltalake's `TableOptimizer`: `compact` and `z_order` answer with its metrics (no `version`)."""

    def compact(self, *args: Any, **kwargs: Any) -> dict:
        m = super().compact(*args, **kwargs)
        m.pop("version", None)
        return m

    def z_order(self, *args: Any, **kwargs: Any) -> dict:
        m = super().z_order(*args, **kwargs)
        m.pop("version", None)
        return m


class TableAlterer:
    """deltalake's `TableAlterer` (`DeltaTable.alter`): table DDL, each call one commit (several
    constraints, features or columns given at once: one commit each, as delta-spark's ALTER TABLE)."""

    def __init__(self, table: "DeltaTable"):
        self.table = table

    def _done(self) -> None:
        self.table.update_incremental()

    def add_columns(self, fields: StructField | list[StructField], *, commit_properties: Any = None,
                    post_commithook_properties: Any = None) -> None:
        _refuse(commit_properties=commit_properties, post_commithook_properties=post_commithook_properties)
        new = [fields] if isinstance(fields, StructField) else list(fields)
        schema = self.table.snapshot.schema
        for f in new:
            if schema.get(f.name, case_insensitive=True) is not None:
                raise SchemaError(f"column '{f.name}' already exists in the table's schema {schema.names}")
        update_schema(self.table.log, StructType(list(schema.fields) + new), merge=True)
        self._done()

    def add_constraint(self, constraints: Mapping[str, str], *, commit_properties: Any = None,
                       post_commithook_properties: Any = None) -> None:
        """CHECK constraints, name -> SQL; existing rows are checked first (ConstraintViolationError)."""
        _refuse(commit_properties=commit_properties, post_commithook_properties=post_commithook_properties)
        if not isinstance(constraints, Mapping) or not constraints:
            raise TypeError("constraints must be a non-empty dict of constraint name -> SQL expression")
        for name, expression in constraints.items():
            add_constraint(self.table.log, name, expression, validate=self.table.count_violations)
        self._done()

    def drop_constraint(self, name: str, raise_if_not_exists: bool = True, *, commit_properties: Any = None,
                        post_commithook_properties: Any = None) -> None:
        _refuse(commit_properties=commit_properties, post_commithook_properties=post_commithook_properties)
        drop_constraint(self.table.log, name, if_exists=not raise_if_not_exists)
        self._done()

    def set_table_properties(self, properties: Mapping[str, str], raise_if_not_exists: bool = True, *,
                             commit_properties: Any = None, post_commithook_properties: Any = None) -> None:
        """Unknown `delta.*` keys are refused whatever `raise_if_not_exists` says (tahoe never writes
        a property it does not know)."""
        _refuse(commit_properties=commit_properties, post_commithook_properties=post_commithook_properties)
        set_properties(self.table.log, dict(properties))
        self._done()

    def add_feature(self, feature: TableFeatures | str | list[TableFeatures | str],
                    allow_protocol_versions_increase: bool = False, *, commit_properties: Any = None,
                    post_commithook_properties: Any = None) -> None:
        """Table features by deltalake's enum or the protocol's names; raising the protocol to
        table features (writer 7, reader 3) only with `allow_protocol_versions_increase`."""
        _refuse(commit_properties=commit_properties, post_commithook_properties=post_commithook_properties)
        names = [f.value if isinstance(f, TableFeatures) else str(f)
                 for f in (feature if isinstance(feature, list) else [feature])]
        p = self.table.snapshot.protocol
        if not allow_protocol_versions_increase and p.min_writer_version < 7:
            raise InvalidTableOperationError(
                f"adding {names} raises the protocol ({p.min_reader_version}, {p.min_writer_version}) to table "
                f"features; pass allow_protocol_versions_increase=True")
        for name in names:
            add_feature(self.table.log, name)
        self._done()

    def _update_metadata(self, operation: str, parameters: dict, **changes: Any) -> None:
        snap = self.table.log.snapshot()
        txn = Transaction(self.table.log, operation, parameters, snapshot=snap)
        txn.update_metadata(dataclasses.replace(snap.metadata, **changes))
        txn.commit()
        self._done()

    def set_table_name(self, name: str, *, commit_properties: Any = None, post_commithook_properties: Any = None) -> None:
        _refuse(commit_properties=commit_properties, post_commithook_properties=post_commithook_properties)
        self._update_metadata("UPDATE TABLE METADATA",
                              {"metadataUpdate": json.dumps({"name": name, "description": None})}, name=name)

    def set_table_description(self, description: str, *, commit_properties: Any = None,
                              post_commithook_properties: Any = None) -> None:
        _refuse(commit_properties=commit_properties, post_commithook_properties=post_commithook_properties)
        self._update_metadata("UPDATE TABLE METADATA",
                              {"metadataUpdate": json.dumps({"name": None, "description": description})},
                              description=description)

    def set_column_metadata(self, column: str, metadata: Mapping[str, str], *, commit_properties: Any = None,
                            post_commithook_properties: Any = None) -> None:
        _refuse(commit_properties=commit_properties, post_commithook_properties=post_commithook_properties)
        md = self.table.log.snapshot().metadata
        f = md.schema.field(column)
        changed = f.with_metadata({**f.metadata, **metadata})
        schema = StructType([changed if g.name == f.name else g for g in md.schema.fields])
        self._update_metadata("UPDATE FIELD METADATA", {"fields": json.dumps([changed.to_json_obj()])},
                              schema_string=schema.to_json())

    def drop_column_not_null(self, column_name: str, **_: Any) -> None:
        raise UnsupportedFeatureError("deltalake's alter.drop_column_not_null is not implemented by tahoe")


class DeltaTable(Table):
    """delta-rs's `DeltaTable`, Spark-free (see the module docstring). `tahoe.Table` is the same
    table with tahoe's accessors as properties (`t.version`, `t.schema`)."""

    def __init__(self, table_uri: str | os.PathLike, version: int | None = None,
                 storage_options: dict | None = None, without_files: bool = False,
                 log_buffer_size: int | None = None, skip_stats: bool = False):
        # without_files: tahoe reads the file list only when asked for it, whatever the flag says
        _refuse(log_buffer_size=log_buffer_size, skip_stats=skip_stats)
        super().__init__(os.fspath(table_uri), version=version, storage_options=storage_options)

    # --- the version and its metadata, as methods ---------------------------------------------------
    def version(self) -> int:  # type: ignore[override]
        return self.snapshot.version

    def schema(self) -> StructType:  # type: ignore[override]
        return self.snapshot.schema

    def metadata(self):  # type: ignore[override]
        """The metaData action: `id`, `name`, `description`, `partition_columns`, `created_time`,
        `configuration`."""
        return self.snapshot.metadata

    def protocol(self):  # type: ignore[override]
        """`min_reader_version`, `min_writer_version`, `reader_features`, `writer_features`."""
        return self.snapshot.protocol

    @property
    def table_uri(self) -> str:
        root = self.table_root
        return (Path(root).as_uri() if "://" not in root else root.rstrip("/")) + "/"

    @staticmethod
    def is_deltatable(table_uri: str | os.PathLike, storage_options: dict | None = None) -> bool:
        return DeltaLog.for_table(os.fspath(table_uri), storage_options).exists()

    @classmethod
    def create(cls, table_uri: str | os.PathLike, schema: Any, mode: str = "error",  # type: ignore[override]
               partition_by: list[str] | str | None = None, name: str | None = None,
               description: str | None = None, configuration: Mapping[str, str | None] | None = None,
               storage_options: dict | None = None, *, commit_properties: Any = None,
               post_commithook_properties: Any = None, raise_if_key_not_exists: bool = True) -> "DeltaTable":
        """A new table of `schema` (pyarrow or tahoe); mode "error", "ignore", "overwrite", or
        "append" (an existing table of the same schema is kept)."""
        _refuse(commit_properties=commit_properties, post_commithook_properties=post_commithook_properties)
        uri = os.fspath(table_uri)
        if mode == "append":
            if cls.is_deltatable(uri, storage_options):
                t = cls(uri, storage_options=storage_options)
                want = from_arrow_schema(schema) if isinstance(schema, pa.Schema) else schema
                if t.schema() != want:
                    raise SchemaError(f"table {uri} exists with another schema: {t.schema().simple_string()}")
                return t
            mode = "error"
        parts = [partition_by] if isinstance(partition_by, str) else list(partition_by or [])
        props = {k: v for k, v in (configuration or {}).items() if v is not None}
        Table.create(uri, schema, parts, props, name=name, description=description,
                     storage_options=storage_options, mode=mode)
        return cls(uri, storage_options=storage_options)

    def load_as_version(self, version: int | str | datetime) -> None:
        """Move this table to `version` (a number, or the version as of a timestamp)."""
        self.snapshot = (self.log.snapshot(version=version) if isinstance(version, int)
                         else self.log.snapshot(timestamp=version))

    def update_incremental(self) -> None:
        """Move this table to the latest version."""
        self.refresh()

    def count_violations(self, expression: str) -> int:
        """The rows of this version for which `expression` (Spark SQL) is not TRUE — FALSE or NULL
        violate a CHECK constraint (spec "CHECK Constraints")."""
        rows = self.to_arrow()
        if not rows.num_rows:
            return 0
        ok = evaluate_predicate(parse(expression), Scope.of(rows))
        return rows.num_rows - int(pc.sum(pc.fill_null(ok, False).cast(pa.int64())).as_py() or 0)

    def transaction_version(self, app_id: str) -> int | None:
        return self.snapshot.txn_version(app_id)

    # --- reading ------------------------------------------------------------------------------------
    def _read_filter(self, partitions: Any, filters: Any) -> Any:
        given = [as_expression(f) for f in (partitions, filters) if f is not None]
        return None if not given else given[0] if len(given) == 1 else and_(*given)

    def to_pyarrow_table(self, partitions: Any = None, columns: list[str] | None = None,
                         filesystem: Any = None, filters: Any = None) -> pa.Table:
        """The rows; `partitions` and `filters`: DNF tuples (or SQL text) as deltalake takes them."""
        _refuse(filesystem=filesystem)
        return self.to_arrow(columns, filter=self._read_filter(partitions, filters))

    def to_pandas(self, partitions: Any = None, columns: list[str] | None = None,  # type: ignore[override]
                  filesystem: Any = None, filters: Any = None, types_mapper: Any = None):
        return self.to_pyarrow_table(partitions, columns, filesystem, filters).to_pandas(types_mapper=types_mapper)

    def file_uris(self, partition_filters: Any = None) -> list[str]:  # type: ignore[override]
        return super().file_uris(filter=partition_filters)

    def partitions(self, partition_filters: Any = None) -> list[dict[str, str | None]]:
        """The distinct partition values of the active files."""
        seen: dict[tuple, dict] = {}
        for pv in self.files(["partitionValues"], filter=partition_filters).column("partitionValues").to_pylist():
            d = dict(pv or [])
            seen.setdefault(tuple(sorted(d.items())), d)
        return list(seen.values())

    # --- writing ------------------------------------------------------------------------------------
    def delete(self, predicate: str | None = None, writer_properties: Any = None, *, commit_properties: Any = None,
               post_commithook_properties: Any = None) -> dict[str, Any]:
        """DELETE the rows matching `predicate` (all when None); deltalake's DELETE metrics."""
        _refuse(writer_properties=writer_properties, commit_properties=commit_properties,
                post_commithook_properties=post_commithook_properties)
        metrics = dml.delete(self.log, predicate)
        self.update_incremental()
        return _renamed(metrics, _DELETE)

    def update(self, updates: Mapping[str, str] | None = None, new_values: Mapping[str, Any] | None = None,
               predicate: str | None = None, writer_properties: Any = None, error_on_type_mismatch: bool = True, *,
               commit_properties: Any = None, post_commithook_properties: Any = None) -> dict[str, Any]:
        """UPDATE: `updates` column -> SQL, `new_values` column -> Python value; deltalake's metrics."""
        _refuse(writer_properties=writer_properties, commit_properties=commit_properties,
                post_commithook_properties=post_commithook_properties,
                error_on_type_mismatch_false=not error_on_type_mismatch or None)
        metrics = dml.update(self.log, updates, new_values, predicate)
        self.update_incremental()
        return _renamed(metrics, _UPDATE)

    def merge(self, source: Any, predicate: str, source_alias: str | None = None, target_alias: str | None = None,
              merge_schema: bool = False, error_on_type_mismatch: bool = True, writer_properties: Any = None,
              streamed_exec: bool = True, max_spill_size: int | None = None,
              max_temp_directory_size: int | None = None, *, commit_properties: Any = None,
              post_commithook_properties: Any = None) -> TableMerger:
        """A MERGE of `source` ON `predicate`: add deltalake's clauses, then `execute()`.
        (`streamed_exec` is delta-rs's choice of how to read the source; tahoe reads it once either way.)"""
        _refuse(writer_properties=writer_properties, max_spill_size=max_spill_size,
                max_temp_directory_size=max_temp_directory_size, commit_properties=commit_properties,
                post_commithook_properties=post_commithook_properties,
                error_on_type_mismatch_false=not error_on_type_mismatch or None)
        return TableMerger(self, to_arrow_table(source), predicate, source_alias, target_alias, merge_schema)

    @property
    def optimize(self) -> DeltaTableOptimizer:  # type: ignore[override]
        return DeltaTableOptimizer(self)

    @property
    def alter(self) -> TableAlterer:
        return TableAlterer(self)

    def restore(self, target: int | datetime | str, *, ignore_missing_files: bool = False,
                protocol_downgrade_allowed: bool = False, commit_properties: Any = None,
                post_commithook_properties: Any = None) -> dict[str, Any]:
        """RESTORE to a version (or the version as of a timestamp); deltalake's metrics."""
        _refuse(commit_properties=commit_properties, post_commithook_properties=post_commithook_properties)
        m = super().restore(target, ignore_missing_files=ignore_missing_files,
                            protocol_downgrade_allowed=protocol_downgrade_allowed)
        return {"numRemovedFile": m["numRemovedFiles"], "numRestoredFile": m["numRestoredFiles"]}

    def vacuum(self, retention_hours: int | None = None, dry_run: bool = True,  # type: ignore[override]
               enforce_retention_duration: bool = True, *, commit_properties: Any = None,
               post_commithook_properties: Any = None, full: bool = False,
               keep_versions: list[int] | None = None) -> list[str]:
        """VACUUM: the files (relative paths) deleted, or with `dry_run` the files it would delete."""
        _refuse(commit_properties=commit_properties, post_commithook_properties=post_commithook_properties)
        return super().vacuum(retention_hours, dry_run, enforce_retention_duration, full=full,
                              keep_versions=keep_versions)

    def count(self) -> int:
        """The number of rows of this version (deletion vectors applied)."""
        first = self.snapshot.schema.names[:1]
        return self.to_arrow(first).num_rows

    def create_checkpoint(self) -> None:
        write_checkpoint(self.log, self.snapshot.version)

    def cleanup_metadata(self) -> None:
        """Delete the log files older than `delta.logRetentionDuration` (spec "Metadata Cleanup")."""
        cleanup_expired_logs(self.log)

    def generate(self) -> None:  # type: ignore[override]
        """The symlink-format manifests of the table (`_symlink_format_manifest/`)."""
        super().generate("symlink_format_manifest")

    def __repr__(self) -> str:
        return f"DeltaTable({self.table_root!r}, version={self.snapshot.version})"


def write_deltalake(table_or_uri: str | os.PathLike | Table, data: Any, *, partition_by: list[str] | str | None = None,
                    mode: str = "error", name: str | None = None, description: str | None = None,
                    configuration: Mapping[str, str | None] | None = None, schema_mode: str | None = None,
                    storage_options: dict | None = None, predicate: str | None = None,
                    target_file_size: int | None = None, writer_properties: Any = None,
                    commit_properties: Any = None, post_commithook_properties: Any = None) -> None:
    """deltalake's `write_deltalake`: `tahoe.write_table` with deltalake's argument names and its
    default mode ("error": refuse an existing table). A `DeltaTable` given moves to the new version."""
    _refuse(target_file_size=target_file_size, writer_properties=writer_properties,
            commit_properties=commit_properties, post_commithook_properties=post_commithook_properties)
    table = table_or_uri if isinstance(table_or_uri, Table) else None
    uri: Any = table.log if table is not None else os.fspath(table_or_uri)
    parts: Iterable[str] | None = [partition_by] if isinstance(partition_by, str) else partition_by
    props = {k: v for k, v in (configuration or {}).items() if v is not None} or None
    write_table(uri, data, mode=mode, partition_by=parts, schema_mode=schema_mode, predicate=predicate,
                properties=props, name=name, description=description,
                storage_options=None if table is not None else storage_options)
    if table is not None:
        table.refresh()


"""deltalake's (delta-rs's) Python API without Spark — `DeltaTable`, `write_deltalake` and its
top-level names — so that a deltalake script runs with `deltalake` replaced by `tahoe`.

  1. `DeltaTable` is `tahoe.Table` with deltalake's accessors, operations (`delete`, `update`,
     `merge`, `optimize`, `vacuum`, `restore`, `alter`, `repair`, ...) and file lists.
  2. Each operation is tahoe's own, one commit as delta-spark records it, answered with
     deltalake's metrics; the table then shows the new version.
  3. `CommitProperties` / `PostCommitHookProperties` go to the operation's transaction,
     `WriterProperties` / `target_file_size` to every file it writes; what tahoe lacks
     (`QueryBuilder`, `statistics_truncate_length`, ...) is refused by name.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import inspect
import json
import os
import time
import warnings
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from .errors import InvalidOptionError, InvalidTableOperationError, SchemaError, UnsupportedFeatureError
from .expressions import Scope, and_, as_expression, evaluate_predicate, parse
from .log import DeltaLog
from .log.snapshot import add_files_from_table
from .log.checkpoints import write_checkpoint
from .log.compaction import compact_log
from .log.metadata_cleanup import cleanup_expired_logs
from .maintenance.convert import convert_to_delta
from .maintenance.repair import repair as fsck
from .protocol.actions import AddFile, RemoveFile, SetTransaction
from .protocol.schema import StructField, StructType, from_arrow_schema, parse_data_type
from .read.add_actions import add_actions_table, selection_vectors
from .read.dataset import to_pyarrow_dataset
from .table import Table, TableOptimizer
from .txn import Transaction as LogTransaction, add_constraint, add_feature, drop_constraint, set_properties, update_schema
from .txn.commit_properties import commit_properties as txn_commit_properties
from .write import dml
from .write.files import to_arrow_table
from .write.writer import write_table
from .write.writer_properties import STATISTICS_LEVELS, ColumnTuning, ParquetTuning, write_settings

__all__ = ["DeltaTable", "TableMerger", "TableAlterer", "write_deltalake", "Field", "TableFeatures", "Schema",
           "CommitProperties", "PostCommitHookProperties", "WriterProperties", "ColumnProperties",
           "BloomFilterProperties", "Transaction", "AddAction", "RemoveAction", "DeltaTableConfig",
           "convert_to_deltalake", "QueryBuilder", "VariantType", "init_tracing", "enable_nanosecond_timestamps"]


@dataclasses.dataclass(init=False)
class CommitProperties:
    """deltalake's `CommitProperties`: `custom_metadata` as top-level commitInfo keys,
    `max_commit_retries`, `app_transactions` written as `txn` actions (`tahoe.txn.commit_properties`)."""

    def __init__(self, custom_metadata: dict[str, Any] | None = None, max_commit_retries: int | None = None,
                 app_transactions: list["Transaction"] | None = None) -> None:
        self.custom_metadata = custom_metadata
        self.max_commit_retries = max_commit_retries
        self.app_transactions = app_transactions


@dataclasses.dataclass(init=False)
class PostCommitHookProperties:
    """deltalake's `PostCommitHookProperties`: `create_checkpoint=False` skips the checkpoint
    `delta.checkpointInterval` makes due; `cleanup_expired_logs` True cleans up expired logs after
    the commit, False never, None as `delta.enableExpiredLogCleanup` says (`tahoe.txn.commit_properties`)."""

    def __init__(self, create_checkpoint: bool = True, cleanup_expired_logs: bool | None = None) -> None:
        self.create_checkpoint = create_checkpoint
        self.cleanup_expired_logs = cleanup_expired_logs


@dataclasses.dataclass
class Transaction:
    """deltalake's `Transaction` (an application transaction for `CommitProperties.app_transactions`)."""
    app_id: str
    version: int
    last_updated: int | None = None


# deltalake's codecs: levels (range, default) of those that take one
_CODECS = ("UNCOMPRESSED", "SNAPPY", "GZIP", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW")
_LEVELS = {"GZIP": ((0, 10), 6), "BROTLI": ((0, 11), 1), "ZSTD": ((1, 22), 1)}
_ENCODINGS = ("PLAIN", "RLE", "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY", "BYTE_STREAM_SPLIT")


class BloomFilterProperties:
    """deltalake's parquet bloom filter of a column (inside `ColumnProperties`): `fpp` the false
    positive probability (0 < fpp < 1, default 0.05), `ndv` the distinct values (default 1,000,000)."""

    def __init__(self, set_bloom_filter_enabled: bool | None, fpp: float | None = None, ndv: int | None = None) -> None:
        if fpp is not None and (fpp <= 0 or fpp >= 1):
            raise ValueError("fpp must be between 0 and 1 exclusive")
        self.set_bloom_filter_enabled = set_bloom_filter_enabled
        self.fpp = fpp
        self.ndv = ndv

    def __str__(self) -> str:
        return f"set_bloom_filter_enabled: {self.set_bloom_filter_enabled}, fpp: {self.fpp}, ndv: {self.ndv}"


class ColumnProperties:
    """deltalake's per-column parquet settings: `dictionary_enabled`, `statistics_enabled`
    ("NONE", "CHUNK" or "PAGE": column chunk statistics, plus the page index), a bloom filter, and
    the `encoding` of a column that is not dictionary-encoded."""

    def __init__(self, dictionary_enabled: bool | None = None, statistics_enabled: str | None = None,
                 bloom_filter_properties: BloomFilterProperties | None = None, encoding: str | None = None) -> None:
        self.dictionary_enabled = dictionary_enabled
        self.statistics_enabled = statistics_enabled
        self.bloom_filter_properties = bloom_filter_properties
        self.encoding = encoding
        if isinstance(encoding, str) and self.dictionary_enabled:
            raise ValueError("Cannot specify dictionary_enabled=True and encoding")

    def __str__(self) -> str:
        return (f"dictionary_enabled: {self.dictionary_enabled}, statistics_enabled: {self.statistics_enabled}, "
                f"bloom_filter_properties: {self.bloom_filter_properties}, encoding: {self.encoding}")


class WriterProperties:
    """deltalake's parquet writer settings, for every data file an operation writes
    (`tahoe.write.writer_properties`). As deltalake: `compression` unset writes uncompressed files;
    a level applies to GZIP (0-10), BROTLI (0-11) and ZSTD (1-22), else their default (6, 1, 1).
    Refused by name when passed: the Hadoop-framed `LZ4` codec, GZIP level 10 and
    `statistics_truncate_length` (pyarrow's writer has none of them; `LZ4_RAW` is written)."""

    def __init__(self, data_page_size_limit: int | None = None, dictionary_page_size_limit: int | None = None,
                 data_page_row_count_limit: int | None = None, write_batch_size: int | None = None,
                 max_row_group_size: int | None = None, compression: str | None = None,
                 compression_level: int | None = None, statistics_truncate_length: int | None = None,
                 default_column_properties: ColumnProperties | None = None,
                 column_properties: dict[str, ColumnProperties] | None = None) -> None:
        self.data_page_size_limit = data_page_size_limit
        self.dictionary_page_size_limit = dictionary_page_size_limit
        self.data_page_row_count_limit = data_page_row_count_limit
        self.write_batch_size = write_batch_size
        self.max_row_group_size = max_row_group_size
        self.compression: str | None = None
        self.statistics_truncate_length = statistics_truncate_length
        self.default_column_properties = default_column_properties
        self.column_properties = column_properties
        if compression_level is not None and compression is None:
            raise ValueError("Providing a compression level without the compression type is not possible, "
                             "please provide the compression as well.")
        if isinstance(compression, str):
            codec = compression.upper()
            if codec not in _CODECS:
                raise ValueError(f"{compression} is not a valid Compression. Valid values are: {list(_CODECS)}")
            if codec in _LEVELS:
                (low, high), default = _LEVELS[codec]
                if compression_level is not None and not low <= compression_level <= high:
                    raise ValueError(f"Compression level for {codec} should fall between {low}-{high}")
                codec = f"{codec}({default if compression_level is None else compression_level})"
            self.compression = codec

    def __str__(self) -> str:
        cols = ", ".join(f"column '{k}': {v}" for k, v in self.column_properties.items()) \
            if self.column_properties else None
        return (f"WriterProperties(data_page_size_limit: {self.data_page_size_limit}, dictionary_page_size_limit: "
                f"{self.dictionary_page_size_limit}, data_page_row_count_limit: {self.data_page_row_count_limit}, "
                f"write_batch_size: {self.write_batch_size}, max_row_group_size: {self.max_row_group_size}, "
                f"compression: {self.compression}, statistics_truncate_length: {self.statistics_truncate_length},"
                f"default_column_properties: {self.default_column_properties}, column_properties: {cols})")


def _column_tuning(cp: Any, where: str) -> ColumnTuning:
    if not isinstance(cp, ColumnProperties):
        raise TypeError(f"{where} must be a ColumnProperties, not {type(cp).__name__}")
    stats = cp.statistics_enabled.upper() if isinstance(cp.statistics_enabled, str) else cp.statistics_enabled
    if stats is not None and stats not in STATISTICS_LEVELS:
        raise ValueError(f"{where}: statistics_enabled must be one of {list(STATISTICS_LEVELS)}, not {cp.statistics_enabled!r}")
    enc = cp.encoding.upper() if isinstance(cp.encoding, str) else cp.encoding
    if enc is not None and enc not in _ENCODINGS:
        raise ValueError(f"{cp.encoding} is not a valid Encoding. Valid values are: {list(_ENCODINGS)}")
    bloom = None
    bp = cp.bloom_filter_properties
    if bp is not None and (bp.set_bloom_filter_enabled or (bp.set_bloom_filter_enabled is None and
                                                           (bp.fpp is not None or bp.ndv is not None))):
        bloom = {"ndv": int(bp.ndv if bp.ndv is not None else 1_000_000),
                 "fpp": float(bp.fpp if bp.fpp is not None else 0.05)}
    return ColumnTuning(cp.dictionary_enabled, stats, enc, bloom)


def _tuning(wp: Any) -> ParquetTuning | None:
    """deltalake's `WriterProperties` as tahoe's parquet writer settings; what pyarrow cannot write
    refused by name."""
    if wp is None:
        return None
    if not isinstance(wp, WriterProperties):
        raise TypeError(f"writer_properties must be a WriterProperties, not {type(wp).__name__}")
    if wp.statistics_truncate_length is not None:
        raise UnsupportedFeatureError(
            "deltalake's WriterProperties(statistics_truncate_length=...) is not implemented by tahoe: pyarrow's "
            "parquet writer cannot truncate min/max statistics (they are written whole)")
    codec, level = "none", None
    if wp.compression is not None:
        name, _, rest = wp.compression.partition("(")
        level = int(rest.rstrip(")")) if rest else None
        if name == "LZ4":
            raise UnsupportedFeatureError(
                "deltalake's WriterProperties(compression='LZ4') (the deprecated Hadoop LZ4 framing) is not "
                "implemented by tahoe: pyarrow's parquet writer cannot write it; use LZ4_RAW, ZSTD, SNAPPY or GZIP")
        if name == "GZIP" and level == 10:
            raise UnsupportedFeatureError(
                "deltalake's WriterProperties(compression='GZIP', compression_level=10) is not implemented by "
                "tahoe: pyarrow's gzip (zlib) levels are 0-9")
        codec = {"UNCOMPRESSED": "none"}.get(name, name.lower())
    cols = {str(k): _column_tuning(v, f"column_properties[{k!r}]") for k, v in (wp.column_properties or {}).items()}
    default = _column_tuning(wp.default_column_properties, "default_column_properties") \
        if wp.default_column_properties is not None else ColumnTuning()
    return ParquetTuning(codec, level, wp.data_page_size_limit, wp.dictionary_page_size_limit,
                         wp.data_page_row_count_limit, wp.write_batch_size, wp.max_row_group_size, default, cols)


@dataclasses.dataclass
class AddAction:
    """deltalake's `deltalake.transaction.AddAction`: a data file, already written in the table's
    directory, for `DeltaTable.create_write_transaction`."""
    path: str
    size: int
    partition_values: Mapping[str, str | None]
    modification_time: int
    data_change: bool
    stats: str


@dataclasses.dataclass
class RemoveAction:
    """deltalake's `RemoveAction`: a file to remove in `DeltaTable.create_write_transaction`."""
    path: str
    data_change: bool
    deletion_timestamp: int
    size: int | None = None
    partition_values: dict[str, str | None] | None = None


class DeltaTableConfig(tuple):
    """deltalake's (deprecated) `DeltaTableConfig`: `without_files`, `log_buffer_size`, `skip_stats`."""

    def __new__(cls, without_files: bool, log_buffer_size: int, skip_stats: bool = False) -> "DeltaTableConfig":
        return super().__new__(cls, (without_files, log_buffer_size, skip_stats))

    without_files = property(lambda self: self[0])
    log_buffer_size = property(lambda self: self[1])
    skip_stats = property(lambda self: self[2])

    def __repr__(self) -> str:
        return (f"DeltaTableConfig(without_files={self[0]}, log_buffer_size={self[1]}, "
                f"skip_stats={self[2]})")


def _is_default(value: Any) -> bool:
    if value is None or value is False:
        return True
    if isinstance(value, CommitProperties):
        return True     # taken by the operation's transaction (`_with_commit_properties`)
    if isinstance(value, (PostCommitHookProperties, WriterProperties)):
        return True     # taken by the operation (`_with_commit_properties`)
    return False


def _file_filter(name: str, deprecated: Any, file_pruning_predicate: Any) -> Any:
    """deltalake's deprecated file filter argument (`partitions`, `partition_filters`) merged
    into `file_pruning_predicate`, with its DeprecationWarning."""
    if deprecated is None:
        return file_pruning_predicate
    if file_pruning_predicate is not None:
        raise ValueError(f"`{name}` is deprecated; pass only `file_pruning_predicate`")
    warnings.warn(f"`{name}` is deprecated; pass the filters to `file_pruning_predicate` instead",
                  DeprecationWarning, stacklevel=3)
    return deprecated


def _commit_context(props: Any, hooks: Any = None) -> contextlib.AbstractContextManager:
    """deltalake's `CommitProperties` and `PostCommitHookProperties` for the transaction an
    operation opens."""
    if props is None and hooks is None:
        return contextlib.nullcontext()
    if props is not None and not isinstance(props, CommitProperties):
        raise TypeError(f"commit_properties must be a CommitProperties, not {type(props).__name__}")
    if hooks is not None and not isinstance(hooks, PostCommitHookProperties):
        raise TypeError(f"post_commithook_properties must be a PostCommitHookProperties, not {type(hooks).__name__}")
    txns = [SetTransaction(str(t.app_id), int(t.version), t.last_updated)
            for t in (props.app_transactions if props is not None else None) or ()]
    return txn_commit_properties(props.custom_metadata if props is not None else None, txns,
                                 props.max_commit_retries if props is not None else None,
                                 hooks.create_checkpoint if hooks is not None else True,
                                 hooks.cleanup_expired_logs if hooks is not None else None)


@contextlib.contextmanager
def _operation_context(commit_properties: Any = None, post_commithook_properties: Any = None,
                       writer_properties: Any = None, target_file_size: int | None = None,
                       table_target: bool = False) -> Any:
    """An operation's deltalake properties: the commit's for its first transaction, the writer's
    for every data file it writes."""
    tuning = _tuning(writer_properties)
    with _commit_context(commit_properties, post_commithook_properties):
        if tuning is None and target_file_size is None and not table_target:
            yield
            return
        with write_settings(tuning, target_file_size, table_target):
            yield


def _with_commit_properties(fn: Any, table_target: bool = False) -> Any:
    """Run `fn` with its `commit_properties`, `post_commithook_properties` and `writer_properties`
    arguments set for the transaction it opens and the files it writes (`table_target`: files roll
    at the table's `delta.targetFileSize` when it is set, as delta-rs's DML writes them)."""
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        given = sig.bind_partial(*args, **kwargs).arguments
        with _operation_context(given.get("commit_properties"), given.get("post_commithook_properties"),
                                given.get("writer_properties"), table_target=table_target):
            return fn(*args, **kwargs)
    return wrapper


def _dml(fn: Any) -> Any:
    """`_with_commit_properties` for an operation that rewrites data files (DELETE, UPDATE)."""
    return _with_commit_properties(fn, table_target=True)


def _refuse(**given: Any) -> None:
    """UnsupportedFeatureError naming the first deltalake option given that tahoe does not implement
    (CommitProperties, PostCommitHookProperties and WriterProperties are taken by the operation)."""
    for name, value in given.items():
        if not _is_default(value):
            raise UnsupportedFeatureError(f"deltalake option '{name}' is not implemented by tahoe")


class QueryBuilder:
    """deltalake's `QueryBuilder` runs DataFusion SQL over registered tables: tahoe has no SQL
    engine outside Spark. Refused by name; read with `DeltaTable.to_pyarrow_table(filters=...)`,
    or run SQL on Spark (`tahoe.spark`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise UnsupportedFeatureError(
            "deltalake's QueryBuilder (DataFusion SQL) is not implemented by tahoe: read with "
            "DeltaTable.to_pyarrow_table(columns=..., filters=...) or run SQL with Spark (tahoe.spark)")


def VariantType() -> Any:  # noqa: N802
    """deltalake's `VariantType()`: the Delta `variant` type (for `Field(name, VariantType())`)."""
    return parse_data_type("variant")


def init_tracing(endpoint: str | None = None) -> None:
    """deltalake's OpenTelemetry tracing of its Rust core: tahoe has none. Refused by name."""
    raise UnsupportedFeatureError("deltalake's init_tracing (OpenTelemetry tracing of delta-rs's Rust core) is not "
                                  "implemented by tahoe; tahoe logs through Python's logging ('tahoe' loggers)")


def enable_nanosecond_timestamps() -> None:
    """deltalake's experimental nanosecond timestamps (feature `timestampNanos`): refused by name."""
    raise UnsupportedFeatureError("deltalake's enable_nanosecond_timestamps (table feature timestampNanos) is not "
                                  "implemented by tahoe")


def Schema(fields: list[StructField]) -> StructType:  # noqa: N802
    """deltalake's `Schema(fields)`: the table schema as tahoe's StructType (`Schema.from_arrow`,
    `to_arrow` as `from_arrow_schema` / `to_arrow_schema`)."""
    return StructType(list(fields))


Schema.from_arrow = from_arrow_schema  # type: ignore[attr-defined]
Schema.from_json = StructType.from_json  # type: ignore[attr-defined]


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
          "num_target_files_scanned": "numTargetFilesAfterSkipping",
          "num_target_files_skipped_during_scan": "numTargetFilesSkipped",
          "num_target_files_added": "numTargetFilesAdded", "num_target_files_removed": "numTargetFilesRemoved",
          "execution_time_ms": "executionTimeMs", "scan_time_ms": "scanTimeMs", "rewrite_time_ms": "rewriteTimeMs"}


def _renamed(metrics: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    return {ours: int(metrics.get(theirs) or 0) for ours, theirs in names.items()}


class TableMerger(dml.TableMerger):
    """deltalake's `TableMerger` (`DeltaTable.merge`): the clauses of `tahoe.write.dml.TableMerger`;
    `execute()` answers with deltalake's MERGE metrics and moves the table to the new version."""

    def __init__(self, table: "DeltaTable", source: pa.Table, predicate: str, source_alias: str | None,
                 target_alias: str | None, merge_schema: bool, commit_properties: Any = None,
                 post_commithook_properties: Any = None, writer_properties: Any = None):
        super().__init__(table.log, source, predicate, source_alias, target_alias, merge_schema, None)
        self.on_commit = table.update_incremental
        self.commit_properties = commit_properties
        self.post_commithook_properties = post_commithook_properties
        self.writer_properties = writer_properties

    def execute(self) -> dict[str, Any]:
        """deltalake's MERGE metrics; `num_target_files_scanned` the target files the MERGE read,
        `num_target_files_skipped_during_scan` those it pruned (by partition values and stats)."""
        with _operation_context(self.commit_properties, self.post_commithook_properties, self.writer_properties,
                                table_target=True):
            m = super().execute()
        m["numTargetFilesSkipped"] = int(m.get("numTargetFilesBeforeSkipping") or 0) - \
            int(m.get("numTargetFilesAfterSkipping") or 0)
        return _renamed(m, _MERGE)


class DeltaTableOptimizer(TableOptimizer):
    """deltalake's `TableOptimizer`: `compact` and `z_order` answer with its metrics (no `version`)."""

    def _run(self, op: Any, args: tuple, kwargs: dict) -> dict:
        given = inspect.signature(op).bind(*args, **kwargs).arguments
        taken = {k: given.pop(k, None) for k in ("commit_properties", "post_commithook_properties",
                                                 "writer_properties")}
        with _operation_context(**taken):
            m = op(**given)
        m.pop("version", None)
        return m

    def compact(self, *args: Any, **kwargs: Any) -> dict:
        return self._run(super().compact, args, kwargs)

    def z_order(self, *args: Any, **kwargs: Any) -> dict:
        return self._run(super().z_order, args, kwargs)


class TableAlterer:
    """deltalake's `TableAlterer` (`DeltaTable.alter`): table DDL, each call one commit (several
    constraints, features or columns given at once: one commit each, as delta-spark's ALTER TABLE)."""

    def __init__(self, table: "DeltaTable"):
        self.table = table

    def _done(self) -> None:
        self.table.update_incremental()

    @_with_commit_properties
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

    @_with_commit_properties
    def add_constraint(self, constraints: Mapping[str, str], *, commit_properties: Any = None,
                       post_commithook_properties: Any = None) -> None:
        """CHECK constraints, name -> SQL; existing rows are checked first (ConstraintViolationError)."""
        _refuse(commit_properties=commit_properties, post_commithook_properties=post_commithook_properties)
        if not isinstance(constraints, Mapping) or not constraints:
            raise TypeError("constraints must be a non-empty dict of constraint name -> SQL expression")
        for name, expression in constraints.items():
            add_constraint(self.table.log, name, expression, validate=self.table.count_violations)
        self._done()

    @_with_commit_properties
    def drop_constraint(self, name: str, raise_if_not_exists: bool = True, *, commit_properties: Any = None,
                        post_commithook_properties: Any = None) -> None:
        _refuse(commit_properties=commit_properties, post_commithook_properties=post_commithook_properties)
        drop_constraint(self.table.log, name, if_exists=not raise_if_not_exists)
        self._done()

    @_with_commit_properties
    def set_table_properties(self, properties: Mapping[str, str], raise_if_not_exists: bool = True, *,
                             commit_properties: Any = None, post_commithook_properties: Any = None) -> None:
        """Unknown `delta.*` keys are refused whatever `raise_if_not_exists` says (tahoe never writes
        a property it does not know)."""
        _refuse(commit_properties=commit_properties, post_commithook_properties=post_commithook_properties)
        set_properties(self.table.log, dict(properties))
        self._done()

    @_with_commit_properties
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
        txn = LogTransaction(self.table.log, operation, parameters, snapshot=snap)
        txn.update_metadata(dataclasses.replace(snap.metadata, **changes))
        txn.commit()
        self._done()

    @_with_commit_properties
    def set_table_name(self, name: str, *, commit_properties: Any = None, post_commithook_properties: Any = None) -> None:
        _refuse(commit_properties=commit_properties, post_commithook_properties=post_commithook_properties)
        self._update_metadata("UPDATE TABLE METADATA",
                              {"metadataUpdate": json.dumps({"name": name, "description": None})}, name=name)

    @_with_commit_properties
    def set_table_description(self, description: str, *, commit_properties: Any = None,
                              post_commithook_properties: Any = None) -> None:
        _refuse(commit_properties=commit_properties, post_commithook_properties=post_commithook_properties)
        self._update_metadata("UPDATE TABLE METADATA",
                              {"metadataUpdate": json.dumps({"name": None, "description": description})},
                              description=description)

    @_with_commit_properties
    def set_column_metadata(self, column: str, metadata: Mapping[str, str], *, commit_properties: Any = None,
                            post_commithook_properties: Any = None) -> None:
        _refuse(commit_properties=commit_properties, post_commithook_properties=post_commithook_properties)
        md = self.table.log.snapshot().metadata
        f = md.schema.field(column)
        changed = f.with_metadata({**f.metadata, **metadata})
        schema = StructType([changed if g.name == f.name else g for g in md.schema.fields])
        self._update_metadata("UPDATE FIELD METADATA", {"fields": json.dumps([changed.to_json_obj()])},
                              schema_string=schema.to_json())

    @_with_commit_properties
    def drop_column_not_null(self, column_name: str, commit_properties: Any = None,
                             post_commithook_properties: Any = None) -> None:
        """ALTER COLUMN ... DROP NOT NULL on a top-level column (as deltalake: a nested path or a
        column that is already nullable is refused); operation "CHANGE COLUMN"."""
        _refuse(commit_properties=commit_properties, post_commithook_properties=post_commithook_properties)
        md = self.table.log.snapshot().metadata
        f = md.schema.get(column_name)
        if f is None:
            raise SchemaError(f"No column with the name '{column_name}' in the schema {md.schema.names}")
        if f.nullable:
            raise InvalidTableOperationError(f"Column '{column_name}' is already nullable")
        changed = f.with_nullable(True)
        schema = StructType([changed if g.name == f.name else g for g in md.schema.fields])
        self._update_metadata("CHANGE COLUMN", {"column": json.dumps(changed.to_json_obj(), separators=(",", ":"))},
                              schema_string=schema.to_json())


class DeltaTable(Table):
    """delta-rs's `DeltaTable`, Spark-free (see the module docstring). `tahoe.Table` is the same
    table with tahoe's accessors as properties (`t.version`, `t.schema`)."""

    def __init__(self, table_uri: str | os.PathLike, version: int | None = None,
                 storage_options: dict | None = None, without_files: bool = False,
                 log_buffer_size: int | None = None, skip_stats: bool = False):
        # as deltalake 1.6: the three tuning flags are deprecated and ignored, with its warnings
        for given, message in ((without_files, "The 'without_files' parameter is deprecated and ignored. "
                                "Table loading materializes active-file metadata."),
                               (log_buffer_size is not None, "The 'log_buffer_size' parameter is deprecated and "
                                "ignored. Log buffering is managed internally."),
                               (skip_stats, "The 'skip_stats' parameter is deprecated and ignored. "
                                "Table loading retains file statistics.")):
            if given:
                warnings.warn(message, DeprecationWarning, stacklevel=2)
        super().__init__(os.fspath(table_uri), version=version, storage_options=storage_options)

    @property
    def table_config(self) -> DeltaTableConfig:
        """deltalake's deprecated `table_config`: the effective defaults, with its warning."""
        warnings.warn("The 'table_config' property is deprecated and will be removed in a future release. "
                      "It reports effective defaults; deprecated constructor options are ignored.",
                      DeprecationWarning, stacklevel=2)
        return DeltaTableConfig(False, 8, False)

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
    @_with_commit_properties
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

    def to_arrow(self, columns: Iterable[str] | None = None, filter: Any = None) -> pa.Table:
        return Table.scan(self, columns, filter=filter).to_arrow()

    def scan(self, columns: list[str] | None = None, predicate: str | None = None) -> pa.RecordBatchReader:  # type: ignore[override]
        """deltalake's `scan`: the rows matching `predicate` (SQL; deletion vectors and column
        mapping applied) as a lazy RecordBatchReader. (`tahoe.Table.scan` is tahoe's Scan.)"""
        s = Table.scan(self, columns, filter=predicate)
        names = {n.lower(): n for n in s.schema.names}
        order = [names[c.lower()] for c in columns if c.lower() in names] if columns is not None else s.schema.names
        schema = pa.schema([s.schema.field(n) for n in order])      # deltalake: the order asked for
        return pa.RecordBatchReader.from_batches(
            schema, (b for t in s.to_batches() for b in t.select(order).to_batches()))

    def to_pyarrow_table(self, partitions: Any = None, columns: list[str] | None = None,
                         filesystem: Any = None, filters: Any = None) -> pa.Table:
        """The rows; `partitions` (deprecated, as in deltalake) and `filters`: DNF tuples, SQL text
        or a `pyarrow.dataset.Expression`; `columns` in the order given (duplicates kept)."""
        _refuse(filesystem=filesystem)
        if partitions is not None:
            warnings.warn("`partitions` is deprecated; use `filters` instead", DeprecationWarning, stacklevel=2)
        expression = filters if isinstance(filters, pc.Expression) else None
        read_cols = None if columns is None else list(dict.fromkeys(columns))
        if expression is not None and read_cols is not None:
            read_cols = None     # the expression may name columns not asked for
        t = self.to_arrow(read_cols, filter=self._read_filter(partitions, None if expression is not None else filters))
        if expression is not None:
            t = t.filter(expression)
        return t if columns is None else t.select(list(columns))

    def to_pandas(self, partitions: Any = None, columns: list[str] | None = None,  # type: ignore[override]
                  filesystem: Any = None, filters: Any = None, types_mapper: Any = None):
        return self.to_pyarrow_table(partitions, columns, filesystem, filters).to_pandas(types_mapper=types_mapper)

    def file_uris(self, partition_filters: Any = None, *,  # type: ignore[override]
                  file_pruning_predicate: Any = None) -> list[str]:
        where = _file_filter("partition_filters", partition_filters, file_pruning_predicate)
        return super().file_uris(filter=self._read_filter(where, None))

    def partitions(self, partition_filters: Any = None, *,
                   file_pruning_predicate: Any = None) -> list[dict[str, str | None]]:
        """The distinct partition values of the active files."""
        where = self._read_filter(_file_filter("partition_filters", partition_filters, file_pruning_predicate), None)
        seen: dict[tuple, dict] = {}
        for pv in self.files(["partitionValues"], filter=where).column("partitionValues").to_pylist():
            d = dict(pv or [])
            seen.setdefault(tuple(sorted(d.items())), d)
        return list(seen.values())

    # --- writing ------------------------------------------------------------------------------------
    @_dml
    def delete(self, predicate: str | None = None, writer_properties: Any = None, *, commit_properties: Any = None,
               post_commithook_properties: Any = None) -> dict[str, Any]:
        """DELETE the rows matching `predicate` (all when None); deltalake's DELETE metrics."""
        _refuse(writer_properties=writer_properties, commit_properties=commit_properties,
                post_commithook_properties=post_commithook_properties)
        metrics = dml.delete(self.log, predicate)
        self.update_incremental()
        return _renamed(metrics, _DELETE)

    @_dml
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
        _commit_context(commit_properties, post_commithook_properties)   # a wrong type refused now,
        _tuning(writer_properties)                                        # not at execute()
        return TableMerger(self, to_arrow_table(source), predicate, source_alias, target_alias, merge_schema,
                           commit_properties, post_commithook_properties, writer_properties)

    @property
    def optimize(self) -> DeltaTableOptimizer:  # type: ignore[override]
        return DeltaTableOptimizer(self)

    @property
    def alter(self) -> TableAlterer:
        return TableAlterer(self)

    @_with_commit_properties
    def restore(self, target: int | datetime | str, *, ignore_missing_files: bool = False,
                protocol_downgrade_allowed: bool = False, commit_properties: Any = None,
                post_commithook_properties: Any = None) -> dict[str, Any]:
        """RESTORE to a version (or the version as of a timestamp); deltalake's metrics."""
        _refuse(commit_properties=commit_properties, post_commithook_properties=post_commithook_properties)
        m = super().restore(target, ignore_missing_files=ignore_missing_files,
                            protocol_downgrade_allowed=protocol_downgrade_allowed)
        return {"numRemovedFile": m["numRemovedFiles"], "numRestoredFile": m["numRestoredFiles"]}

    @_with_commit_properties
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

    def compact_logs(self, starting_version: int, ending_version: int) -> None:
        """A log compaction file `<start>.<end>.compacted.json` of commits start..end (spec "Log
        Compaction Files"); a range that is empty or reaches past the log is refused."""
        compact_log(self.log, starting_version, ending_version)

    # --- the file list ---------------------------------------------------------------------------
    def get_add_actions(self, flatten: bool = False) -> pa.Table:
        """One row per active file: `path`, `size_bytes`, `modification_time`, `num_records`, the
        stats as `null_count` / `min` / `max` structs and the partition values as `partition`
        (`flatten=True`: `min.x`, `partition.p` columns), typed by the table's schema."""
        return add_actions_table(self.snapshot, flatten)

    def deletion_vectors(self) -> pa.RecordBatchReader:
        """The files with a deletion vector: `filepath` (URI) and `selection_vector` (True = the
        row is live), one entry per row of the file."""
        def rows(add: AddFile) -> int:
            import pyarrow.parquet as pq
            from .storage import resolve_data_path

            with self.snapshot.store.open_input_file(resolve_data_path(self.table_root, add.path), add.size) as f:
                return pq.ParquetFile(f).metadata.num_rows
        return selection_vectors(self.snapshot, rows).to_reader()

    def to_pyarrow_dataset(self, partitions: Any = None, filesystem: Any = None, parquet_read_options: Any = None,
                           schema: pa.Schema | None = None, as_large_types: bool = False,
                           file_pruning_predicate: Any = None):
        """The version as a `pyarrow.dataset.Dataset`; tables with deletion vectors or column
        mapping are refused with deltalake's DeltaProtocolError (`to_pyarrow_table` reads them).
        `partitions` / `file_pruning_predicate`: DNF tuples or SQL selecting the files."""
        where = self._read_filter(_file_filter("partitions", partitions, file_pruning_predicate), None)
        files = self.files(["path", "partitionValues"], filter=where)
        return to_pyarrow_dataset(self.snapshot, files, filesystem, parquet_read_options, schema, as_large_types)

    # --- repairing and committing files -------------------------------------------------------------
    @_with_commit_properties
    def repair(self, dry_run: bool = False, *, commit_properties: Any = None,
               post_commithook_properties: Any = None) -> dict[str, Any]:
        """FSCK: remove the active files whose data file is missing, one commit ("FSCK");
        `{"dry_run": ..., "files_removed": [paths]}`."""
        _refuse(commit_properties=commit_properties, post_commithook_properties=post_commithook_properties)
        metrics = fsck(self.log, dry_run=dry_run)
        self.update_incremental()
        return metrics

    @_with_commit_properties
    def create_write_transaction(self, actions: list[Any], mode: str, schema: Any,
                                 partition_by: list[str] | str | None = None, partition_filters: Any = None, *,
                                 commit_properties: Any = None, post_commithook_properties: Any = None) -> None:
        """Commit files already written in the table's directory (`AddAction`) and removals
        (`RemoveAction`, with mode "append" only) as one WRITE; mode "overwrite" removes the
        files of `partition_filters` (all without) itself. The table moves to the new version."""
        _refuse(commit_properties=commit_properties, post_commithook_properties=post_commithook_properties)
        if mode not in ("append", "overwrite"):
            raise InvalidOptionError(f"create_write_transaction mode must be 'append' or 'overwrite', got {mode!r}")
        snap = self.log.snapshot()
        parts = [partition_by] if isinstance(partition_by, str) else list(partition_by or [])
        if parts != list(snap.partition_columns):
            raise SchemaError(f"partition_by {parts} differs from the table's partition columns "
                              f"{list(snap.partition_columns)}")
        given = from_arrow_schema(schema) if isinstance(schema, pa.Schema) else \
            from_arrow_schema(pa.schema(schema)) if not isinstance(schema, StructType) else schema
        if given.simple_string() != snap.schema.simple_string():
            raise SchemaError(f"the schema given ({given.simple_string()}) differs from the table's "
                              f"({snap.schema.simple_string()}); tahoe does not change a table's schema here")
        adds = [a for a in actions if hasattr(a, "stats")]
        removes = [a for a in actions if not hasattr(a, "stats")]
        if removes and mode != "append":
            raise InvalidOptionError("RemoveAction is only allowed with mode='append' (mode='overwrite' removes "
                                     "the files of partition_filters itself)")
        both = {a.path for a in adds} & {r.path for r in removes}
        if both:
            raise InvalidTableOperationError(f"a path cannot be both added and removed in one transaction: {sorted(both)}")
        txn = LogTransaction(self.log, "WRITE", {"mode": mode.capitalize(), "partitionBy": json.dumps(parts)},
                           snapshot=snap)
        if mode == "overwrite":
            old = self.files(filter=self._read_filter(partition_filters, None))
            txn.read_files(old)
            txn.remove_files(add_files_from_table(old))
        now = int(time.time() * 1000)
        txn.remove_files([RemoveFile(r.path, r.deletion_timestamp or now, bool(r.data_change), False,
                                     dict(r.partition_values) if r.partition_values is not None else None, r.size)
                          for r in removes])
        txn.add_files([AddFile(a.path, dict(a.partition_values), int(a.size), int(a.modification_time),
                               bool(a.data_change), a.stats) for a in adds])
        txn.commit()
        self.update_incremental()

    def __repr__(self) -> str:
        return f"DeltaTable({self.table_root!r}, version={self.snapshot.version})"


def write_deltalake(table_or_uri: str | os.PathLike | Table, data: Any, *, partition_by: list[str] | str | None = None,
                    mode: str = "error", name: str | None = None, description: str | None = None,
                    configuration: Mapping[str, str | None] | None = None, schema_mode: str | None = None,
                    storage_options: dict | None = None, predicate: str | None = None,
                    target_file_size: int | None = None, writer_properties: Any = None,
                    commit_properties: Any = None, post_commithook_properties: Any = None) -> None:
    """deltalake's `write_deltalake`: `tahoe.write_table` with deltalake's argument names and its
    default mode ("error": refuse an existing table). A `DeltaTable` given moves to the new version.
    Data files roll at about `target_file_size` bytes of unencoded data (else the table's
    `delta.targetFileSize`), as delta-rs estimates them; `writer_properties` tune the parquet."""
    with _operation_context(commit_properties, post_commithook_properties, writer_properties,
                            target_file_size, table_target=True):
        _write_deltalake(table_or_uri, data, partition_by, mode, name, description, configuration, schema_mode,
                         storage_options, predicate)


def _write_deltalake(table_or_uri: Any, data: Any, partition_by: Any, mode: str, name: str | None,
                     description: str | None, configuration: Any, schema_mode: str | None,
                     storage_options: dict | None, predicate: str | None) -> None:
    table = table_or_uri if isinstance(table_or_uri, Table) else None
    uri: Any = table.log if table is not None else os.fspath(table_or_uri)
    parts: Iterable[str] | None = [partition_by] if isinstance(partition_by, str) else partition_by
    props = {k: v for k, v in (configuration or {}).items() if v is not None} or None
    write_table(uri, data, mode=mode, partition_by=parts, schema_mode=schema_mode, predicate=predicate,
                properties=props, name=name, description=description,
                storage_options=None if table is not None else storage_options)
    if table is not None:
        table.refresh()



@_with_commit_properties
def convert_to_deltalake(uri: str | os.PathLike, mode: str = "error", partition_by: Any = None,
                         partition_strategy: str | None = None, name: str | None = None,
                         description: str | None = None, configuration: Mapping[str, str | None] | None = None,
                         storage_options: dict | None = None, *, collect_stats: bool = True,
                         commit_properties: Any = None, post_commithook_properties: Any = None) -> None:
    """deltalake's `convert_to_deltalake`: CONVERT TO DELTA of the parquet files under `uri`
    (`tahoe.convert_to_delta`); `partition_by` a pyarrow schema of the hive partition columns.
    The `directory` partition strategy (paths without `col=`) is refused."""
    _refuse(commit_properties=commit_properties, post_commithook_properties=post_commithook_properties)
    if partition_by is not None and partition_strategy is None:
        raise ValueError("Partition strategy has to be provided with partition_by.")
    if partition_strategy not in (None, "hive"):
        raise UnsupportedFeatureError(f"deltalake's partition_strategy={partition_strategy!r} is not implemented by "
                                      f"tahoe (only 'hive': paths like col=value/)")
    if mode not in ("error", "ignore"):
        raise InvalidOptionError(f"mode must be 'error' or 'ignore', got {mode!r}")
    props = {k: v for k, v in (configuration or {}).items() if v is not None} or None
    convert_to_delta(os.fspath(uri), partition_by, collect_stats=collect_stats, mode=mode, name=name,
                     description=description, configuration=props, storage_options=storage_options)

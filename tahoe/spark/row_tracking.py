"""`_metadata.row_id` and `_metadata.row_commit_version` on reads of row-tracking tables, as delta-spark exposes
them (spec "Row Tracking"): the materialized value when the file holds one, else the file's `baseRowId` + row
position, or its `defaultRowCommitVersion`.

  1. `with_row_metadata` gives the native scan a hidden `_metadata` struct (file_path, file_size,
     file_modification_time, row_index, row_id, row_commit_version, base_row_id, default_row_commit_version):
     `select("_metadata.row_id")` resolves it, `*` and `df.schema` do not show it.
  2. Hidden with Catalyst's `Project.hiddenOutputTag` through the classic session's JVM (`_hide`).
  3. On Spark Connect a reference to these fields fails with an error saying why (`connect_error`).
  4. Unused, the struct is pruned away by Spark's optimizer: it costs nothing."""

from __future__ import annotations

from typing import Any
from ..protocol.properties import ROW_COMMIT_VERSION_COLUMN_PROP, ROW_ID_COLUMN_PROP, bool_property, text_property
from ..protocol.table_features import is_feature_supported
from ..storage import resolve_data_path
from .internals import with_hidden_output
from .read import FILE_COLUMN, ROW_COLUMN, hadoop_uri, read_snapshot
from .session import session_time_zone
from .skipping import plan_files
from .types import col

__all__ = ["row_tracking_columns", "with_row_metadata", "read_table", "connect_error", "METADATA", "ROW_FIELDS"]

METADATA = "_metadata"
ROW_FIELDS = ("row_id", "row_commit_version", "base_row_id", "default_row_commit_version")
CONNECT_REFUSAL = (
    "tahoe cannot give `_metadata.{field}` over Spark Connect: Delta's row tracking metadata "
    "(`_metadata.row_id`, `_metadata.row_commit_version`) is a hidden `_metadata` column that tahoe adds "
    "to the query plan of a classic SparkSession through its JVM (Catalyst's hidden-output tag), which a "
    "Spark Connect client cannot reach, and Spark's Python data sources cannot declare metadata columns. "
    "Read the row-tracking table on a classic SparkSession (or with tahoe's Spark-free API) for row ids "
    "and row commit versions.")


def row_tracking_columns(snap) -> tuple[str, str] | None:
    """(materialized row id column, materialized row commit version column) of a table whose rows
    have ids (the rowTracking feature supported, not suspended, the column names assigned); else
    None."""
    conf = snap.configuration
    names = (text_property(conf, ROW_ID_COLUMN_PROP), text_property(conf, ROW_COMMIT_VERSION_COLUMN_PROP))
    if is_feature_supported(snap.protocol, "rowTracking") and not bool_property(conf, "delta.rowTrackingSuspended") \
            and all(names):
        return names[0], names[1]
    return None


def _hide(spark, df, visible: list[str]) -> Any:
    """`df` (columns `visible` + METADATA) as a DataFrame of `visible` whose METADATA is hidden
    metadata output: a projection below a Project outputting `visible` only and carrying Catalyst's
    `Project.hiddenOutputTag` (how Spark hides a join's columns), through `tahoe.spark.internals`."""
    return with_hidden_output(spark, df, METADATA)


def with_row_metadata(spark, snap, files, df) -> Any:
    """`df` — `read_snapshot(spark, snap, files=files, file_row=True, extra_columns=<the
    materialized columns>)` — with the hidden `_metadata` struct of the module docstring and
    without the helper columns; `files`: the files table it read (path, size, modificationTime,
    baseRowId, defaultRowCommitVersion)."""
    from pyspark.sql import functions as F

    names = row_tracking_columns(snap)
    helpers = {FILE_COLUMN, ROW_COLUMN, *(names or ())}
    visible = [c for c in df.columns if c not in helpers]
    if names is None or not hasattr(spark, "_jsparkSession") or FILE_COLUMN not in df.columns:
        return df.select(*[col(c) for c in visible])
    rid, rcv = names
    uris = [hadoop_uri(resolve_data_path(snap.table_root, p)) for p in files.column("path").to_pylist()]

    def per_file(values: list, typ: str):
        return F.element_at(F.map_from_arrays(F.lit(uris).cast("array<string>"), F.lit(values).cast(f"array<{typ}>")),
                            F.col(FILE_COLUMN))

    base = per_file(files.column("baseRowId").to_pylist(), "bigint")
    default_version = per_file(files.column("defaultRowCommitVersion").to_pylist(), "bigint")
    meta = F.struct(
        F.col(FILE_COLUMN).alias("file_path"),
        per_file(files.column("size").to_pylist(), "bigint").alias("file_size"),
        F.timestamp_millis(per_file(files.column("modificationTime").to_pylist(), "bigint")).alias("file_modification_time"),
        F.col(ROW_COLUMN).alias("row_index"),
        F.coalesce(col(rid), base + F.col(ROW_COLUMN)).alias("row_id"),
        base.alias("base_row_id"),
        F.coalesce(col(rcv), default_version).alias("row_commit_version"),
        default_version.alias("default_row_commit_version"),
    ).alias(METADATA, metadata={"__metadata_col": True})
    return _hide(spark, df.select(*[col(c) for c in visible], meta), visible)


def read_table(spark, snap, filters=None) -> Any:
    """The native scan of `snap` (`read_snapshot`, files skipped by `filters`) — on a row-tracking
    table of a classic session with the hidden `_metadata` struct of the module docstring."""
    from pyspark.sql.types import LongType

    names = row_tracking_columns(snap)
    if names is None or not hasattr(spark, "_jsparkSession"):
        return read_snapshot(spark, snap, filters)
    files = plan_files(snap, filters, session_time_zone(spark), spark)
    info = snap.files_table(["path", "size", "modificationTime", "baseRowId", "defaultRowCommitVersion"])
    wanted = set(files.column("path").to_pylist())
    if len(wanted) != info.num_rows:
        import pyarrow as pa

        info = info.filter(pa.array([p in wanted for p in info.column("path").to_pylist()], pa.bool_()))
    df = read_snapshot(spark, snap, files=files, file_row=True, extra_columns={n: LongType() for n in names})
    return with_row_metadata(spark, snap, info, df)


def _unresolved_row_field(exc: BaseException) -> str | None:
    """The `_metadata` row-tracking field an UNRESOLVED_COLUMN error of Spark names, else None."""
    try:
        condition = exc.getCondition() or ""   # type: ignore[attr-defined]
        params = exc.getMessageParameters() or {}   # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - not a PySpark error
        return None
    if not condition.startswith("UNRESOLVED_COLUMN"):
        return None
    parts = [p.strip("`").lower() for p in str(params.get("objectName", "")).split("`.`")]
    if len(parts) >= 2 and parts[-2] == METADATA and parts[-1] in ROW_FIELDS:
        return parts[-1]
    return None


def connect_error(original, self, rpc_error) -> Any:
    """Spark Connect's client turning a server error into an exception (`_handle_rpc_error`): an
    UNRESOLVED_COLUMN naming `_metadata.row_id` (or another row-tracking field) is raised again
    with CONNECT_REFUSAL first — an exception of tahoe's UnsupportedFeatureError and of Spark's
    class alike, Spark's report kept as a note and `.spark_error`."""
    try:
        return original(self, rpc_error)
    except Exception as e:  # noqa: BLE001 - rewritten only for the row-tracking fields
        field = _unresolved_row_field(e)
        if field is None:
            raise
        from ..errors import UnsupportedFeatureError
        from .surfacing import restated

        new = restated(e, UnsupportedFeatureError, CONNECT_REFUSAL.format(field=field))
        if new is e:
            raise
        raise new from None

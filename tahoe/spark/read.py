"""The fast Spark read path: a Delta snapshot as a native Spark parquet scan (`read_snapshot`, behind
`read_delta`, `DeltaTable.toDF()` and `format("delta")` loads of tables the JVM reaches).

  1. Files from tahoe's log core, pruned and skipped by stats (`tahoe.spark.skipping`).
  2. Read with the table's physical schema (column mapping, field ids); missing columns read as nulls.
  3. Partition values: Spark's discovery when the layout matches (`_hive_layout`), else a scan per partition
     (`_partition_groups`), else a guarded join on the file path.
  4. Deletion vectors as an array of 64-row words shipped with the query (`_word_array`, `_dv_keep_sql`), or a
     broadcast join past `_MAX_DV_WORDS`.
  5. Columns renamed and cast to the logical schema.
Stores the JVM cannot reach (`jvm_reaches`) go through the Python data source instead."""

from __future__ import annotations

import os
import re
import unicodedata
from typing import Any, Iterable

import numpy as np
import pyarrow as pa

from ..protocol import column_mapping
from ..protocol.geospatial import to_spark_arrow
from ..protocol.deletion_vectors import DeletionVectorDescriptor, load_deletion_vector
from ..protocol.partition_values import partition_path, partition_values_to_arrow
from ..protocol.schema import PrimitiveType, StructField, StructType, is_void
from ..storage import resolve_data_path
from .internals import parquet_scan
from .session import configure, session_conf, session_time_zone
from .skipping import plan_files
from .types import col, to_spark_schema, to_spark_type, user_metadata
from ..protocol.stats import parse_stats
from ..read.arrow_reader import ArrowFileReader
from ..storage.options import kind_of, scheme_of

__all__ = ["read_snapshot", "hadoop_uri", "glob_escape", "jvm_reaches", "FILE_COLUMN", "ROW_COLUMN"]

_KEY = "__tahoe_file"
_FID = "__tahoe_fid"
_ROW = "__tahoe_row"
_W = "__tahoe_word"
_BIT = "__tahoe_bit"
_MASK = "__tahoe_mask"
_DVKEY = "__tahoe_dv"  # where a DV file's run of words starts in the word array
_WORDS = "__tahoe_words"
_WORD_BITS = 26  # row index >> 6 of a row index below 2^32

# Characters Java's multi-argument URI constructor leaves unquoted in a path (besides letters,
# digits and non-ASCII characters that are neither spaces nor controls).
_URI_SAFE = set("_-!.~'()*,;:$&+=/@")

# The parquet scans' options (they reach the Hadoop configuration of the relation's reader only).
# parquet-java's dictionary row-group filter compares doubles and floats by their bits: a row group
# whose dictionary holds -0.0 is dropped for `x = 0.0` / `x IN (0.0, ...)` (and +0.0 for -0.0),
# though Spark SQL holds -0.0 = 0.0 — rows silently missing from reads and DML conditions (files
# of delta-rs, pyarrow; the differential DML fuzzer, seed 2171). Min/max statistics still prune.
SCAN_OPTIONS = {"parquet.filter.dictionary.enabled": "false"}
# ... and over float / double columns the row-group min/max filter, the page index and bloom filters
# too: Arrow and parquet-rs (pyarrow, delta-rs) leave NaN out of min/max, so parquet-java's filters
# drop a row group holding NaN for `x > 1`, `x = NaN`, `x != 0.1`, `x BETWEEN NaN AND NaN`, ..., all true for NaN in Spark
# SQL (NaN above every value) — plain `spark.read.parquet(f).filter("x > 1")` misses the NaN rows
# too (the fuzzer, seeds 9116 and 9132); bloom filters hash -0.0 and 0.0 apart. Tables without
# such columns keep row-group pruning; every table keeps the log's file skipping (NaN-safe).
FLOAT_SCAN_OPTIONS = {**SCAN_OPTIONS, "parquet.filter.stats.enabled": "false",
                      "parquet.filter.columnindex.enabled": "false", "parquet.filter.bloom.enabled": "false"}


def scan_options(spark_schema) -> dict[str, str]:
    """The parquet scan options for files of `spark_schema` (a Spark StructType): see above."""
    from pyspark.sql.types import ArrayType, DoubleType, FloatType, MapType, StructType as SparkStruct

    def floating(t) -> bool:
        if isinstance(t, (DoubleType, FloatType)):
            return True
        if isinstance(t, SparkStruct):
            return any(floating(f.dataType) for f in t.fields)
        if isinstance(t, ArrayType):
            return floating(t.elementType)
        if isinstance(t, MapType):
            return floating(t.keyType) or floating(t.valueType)
        return False
    return FLOAT_SCAN_OPTIONS if floating(spark_schema) else SCAN_OPTIONS


def _quote_path(path: str) -> str:
    out = []
    for ch in path:
        o = ord(ch)
        if o < 128:
            if ch.isalnum() or ch in _URI_SAFE:
                out.append(ch)
            else:
                out.append("%%%02X" % o)
        else:
            cat = unicodedata.category(ch)
            if cat in ("Zs", "Zl", "Zp", "Cc"):
                out.append("".join("%%%02X" % b for b in ch.encode("utf-8")))
            else:
                out.append(ch)
    return "".join(out)


def hadoop_uri(local_path: str) -> str:
    """`new Path(p).toUri().toString()` of a local absolute path as Spark reports it in
    `_metadata.file_path` (measured: space → %20, % → %25, [ ] { } # → quoted, é kept); an
    object-store path (`hadoop_location`'s spelling) keeps its scheme and authority, its path
    quoted the same way."""
    local_path = hadoop_location(local_path) or local_path   # s3:// -> s3a://, as the connector names it
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.\-]*://[^/]*)(/.*)?$", local_path)
    if m and len(m.group(1).split(":", 1)[0]) > 1:
        return m.group(1) + _quote_path(m.group(2) or "")
    return "file:" + _quote_path(os.path.normpath(local_path))


def glob_escape(path: str) -> str:
    """Escape Hadoop glob metacharacters (`__globPaths__=false` reads files twice when mixed with
    other paths — measured on Spark 4.3 — so tahoe always globs escaped paths)."""
    return re.sub(r"([\[\]{}*?\\])", r"\\\1", path)


# tahoe's object-store schemes → the scheme of the Hadoop connector that reaches the same objects
_HADOOP_SCHEMES = {"s3": "s3a", "s3a": "s3a", "s3n": "s3a", "abfs": "abfs", "abfss": "abfss", "wasb": "wasb",
                   "wasbs": "wasbs", "gs": "gs"}


def hadoop_location(uri: str) -> str | None:
    """`uri` as a Hadoop connector names it (`s3://b/k` → `s3a://b/k`; `abfss://` and `gs://` as
    they are); None for a local path (no translation needed) and for URIs no connector addresses
    (`az://container/...` names no storage account)."""
    if kind_of(uri) == "local":
        return None
    scheme = scheme_of(uri) or ""
    target = _HADOOP_SCHEMES.get(scheme)
    if target is None or (scheme in ("abfs", "abfss", "wasb", "wasbs") and "@" not in uri.split("/", 3)[2]):
        return None
    return target + uri[len(scheme):]


_REACHES: dict[tuple, bool] = {}


def jvm_reaches(root: str, spark=None) -> bool:
    """Whether Spark's own (JVM) readers reach the table root: local paths always; an object
    store when the session's JVM has a Hadoop file system for its scheme (a connector such as
    hadoop-aws's S3A, hadoop-azure's ABFS or the GCS connector on the classpath: asked of Hadoop's
    `FileSystem.getFileSystemClass`, once per session and scheme). Plain PySpark ships none, so
    object-store tables are read by the `delta` data source there; so are they without `spark`,
    over Spark Connect, and for URIs no connector addresses (`hadoop_location`)."""
    if kind_of(root) == "local":
        return True
    loc = hadoop_location(root)
    jvm = getattr(spark, "_jvm", None) if spark is not None else None
    if loc is None or jvm is None:
        return False
    scheme = loc.split(":", 1)[0]
    key = (id(jvm), scheme)
    if key not in _REACHES:
        try:
            conf = spark._jsc.hadoopConfiguration()
            jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, conf)
            _REACHES[key] = True
        except Exception:  # noqa: BLE001 - UnsupportedFileSystemException: no connector for the scheme
            _REACHES[key] = False
    return _REACHES[key]


def _jvm_unreachable(root: str, spark=None) -> bool:
    return not jvm_reaches(root, spark)


def _scan_path(path: str) -> str:
    """A resolved data-file path as Spark's readers take it (object stores: the connector's URI)."""
    return hadoop_location(path) or path


def _same_names(a, b) -> bool:
    return a.simpleString() == b.simpleString()


FILE_COLUMN = "__tahoe_dml_file"     # read_snapshot(file_row=True): the row's file (`_metadata.file_path`)
ROW_COLUMN = "__tahoe_dml_row"      # ... and its position in the file (what a deletion vector indexes)


def _ignore_missing_files(spark) -> bool:
    return str(session_conf(spark, "spark.sql.files.ignoreMissingFiles") or "false").lower() == "true"


def _existing_files(snap, files):
    """`files` without the files that are gone (spark.sql.files.ignoreMissingFiles=true: Spark
    skips missing files, but refuses explicit paths that do not exist), asked of the table's store."""
    root, store = snap.table_root, snap.store
    there = [store.exists(resolve_data_path(root, p)) for p in files.column("path").to_pylist()]
    return files if all(there) else files.filter(pa.array(there, pa.bool_()))


def read_snapshot(spark, snap, filters: Iterable[Any] | None = None, *, files: pa.Table | None = None,
                  file_row: bool = False, extra_columns: dict | None = None, schema: StructType | None = None,
                  columns: list[str] | None = None):
    """A DataFrame of `snap`'s rows (see the module docstring). `files`: read these active
    files (a `files_table` selection: path, partitionValues, size, stats, deletionVector)
    instead of planning them from `filters`. `file_row`: add FILE_COLUMN (the file's URI as
    `_metadata.file_path` gives it, see `hadoop_uri`) and ROW_COLUMN (the row's position in its
    file). `extra_columns`: physical columns outside the schema (name → Spark type) read as
    they are in the files, null where absent (the materialized row-tracking columns). `schema`:
    read as this schema instead of the snapshot's (files a commit in progress wrote after a
    schema change: a MERGE with schema evolution). `columns`: only these of the schema's
    columns (by name, in table order), the others neither read nor returned."""
    configure(spark)
    from pyspark.sql import functions as F

    root = snap.table_root
    schema = schema if schema is not None else snap.schema
    if _jvm_unreachable(root, spark):
        return _arrow_scan(spark, snap, filters, files, file_row, extra_columns, schema, columns)
    mode = snap.column_mapping_mode
    pcs = snap.partition_columns
    pcs_lower = {p.lower() for p in pcs}
    out_fields = [f for f in schema.fields if not is_void(f.type) and (columns is None or f.name in columns)]
    data_fields = [f for f in out_fields if f.name.lower() not in pcs_lower]
    part_fields = [f for f in out_fields if f.name.lower() in pcs_lower]
    logical_spark = to_spark_schema(StructType(out_fields), strip_metadata=True) if out_fields else None
    tz = session_time_zone(spark)
    if files is None:
        files = plan_files(snap, filters, tz, spark)
    else:
        files = files.select(["path", "partitionValues", "size", "stats", "deletionVector"])
    if files.num_rows and _ignore_missing_files(spark):
        files = _existing_files(snap, files)
    extras = dict(extra_columns or {})
    if files.num_rows == 0:
        from pyspark.sql.types import LongType, StringType, StructField as SF, StructType as SparkStruct
        fields = [SF(sf.name, sf.dataType, sf.nullable, user_metadata(f.metadata))
                  for sf, f in zip((logical_spark or SparkStruct([])).fields, out_fields)]
        if file_row:
            fields += [SF(FILE_COLUMN, StringType(), True), SF(ROW_COLUMN, LongType(), True)]
        fields += [SF(n, t, True) for n, t in extras.items()]
        return spark.createDataFrame([], SparkStruct(fields))

    phys = column_mapping.to_physical_schema(StructType(data_fields), mode) if data_fields else StructType([])
    spark_phys = to_spark_schema(phys, strip_metadata=(mode != "id"))
    if mode == "id":  # keep only parquet.field.id: Spark matches by id
        from pyspark.sql.types import StructType as SparkStruct
        spark_phys = SparkStruct.fromJson(_only_field_ids(spark_phys.jsonValue()))
    dummy = None
    if not data_fields:
        from pyspark.sql.types import LongType, StructField as SF, StructType as SparkStruct
        dummy = "__tahoe_no_columns"
        spark_phys = SparkStruct([SF(dummy, LongType(), True)])
    if extras:
        from pyspark.sql.types import StructField as SF, StructType as SparkStruct
        spark_phys = SparkStruct(list(spark_phys.fields) + [SF(n, t, True) for n, t in extras.items()])

    paths = files.column("path").to_pylist()
    abs_paths = [_scan_path(resolve_data_path(root, p)) for p in paths]
    dvs = files.column("deletionVector").to_pylist()
    loaded = _load_dv_words(snap, dvs) if any(dvs) else []
    has_dv = bool(loaded)
    row_col = _row_index_column(spark, spark_phys) if has_dv or file_row else None
    if row_col is not None:  # Spark fills it with each row's index in its file
        from pyspark.sql.types import LongType, StructField as SF, StructType as SparkStruct
        spark_phys = SparkStruct(list(spark_phys.fields) + [SF(row_col, LongType(), True)])
        row_sql = f"`{row_col}`"
        # a null row index fails the query: it is never read as "not deleted"
        unfilled = (f"raise_error('tahoe: Spark {spark.version} did not fill the row index column "
                    f"{row_col}; deletion vectors cannot be applied')")
    else:
        row_sql, unfilled = "_metadata.row_index", None
    options = scan_options(spark_phys)
    reader = spark.read.schema(spark_phys).options(**options)

    # the DV words: one array shipped with the query (keys[i] = where file i's run starts), or —
    # too many to ship — a broadcast join keyed by the file's on-disk size (when the sizes are
    # pairwise distinct: `_metadata.file_size` is a per-file constant) or by the file id
    array = _word_array(spark, loaded, files) if has_dv else None
    sizes = _unique_sizes(snap, files) if has_dv else None
    packed = array is None and _packable(files, sizes)
    if array is not None:
        keys, words = array
        on_scan = sizes is not None and sum(k is not None for k in keys) <= _MAX_KEYED_FILES
    else:
        on_scan = sizes is not None

    def with_file_row(g):
        """FILE_COLUMN / ROW_COLUMN on a scan (`_metadata` is gone after a union or a join)."""
        if not file_row:
            return g
        row = f"coalesce({row_sql}, {unfilled})" if unfilled else row_sql
        # (one selectExpr: a third of the Py4J round trips of withColumns over built Columns)
        return g.selectExpr("*", f"_metadata.file_path AS `{FILE_COLUMN}`", f"{row} AS `{ROW_COLUMN}`")

    def drop_on_scan(g, idx):
        """Apply the DVs of files `idx` on a scan (`_metadata` is gone after a union)."""
        if array is None:
            row = F.expr(f"coalesce({row_sql}, {unfilled})") if unfilled else F.expr(row_sql)
            return _dv_key_columns(g, F.col("_metadata.file_size"), row, packed)
        pairs = sorted((sizes[i], keys[i]) for i in idx if keys[i] is not None)
        if not pairs:
            return g
        key_sql = _key_by_size_sql("_metadata.file_size", pairs)
        # (the words column dropped: a partition's scan without deletion vectors has none to union with)
        return g.withColumn(_WORDS, words).filter(F.expr(_dv_keep_sql(row_sql, key_sql, _WORDS, unfilled))).drop(_WORDS)

    if (not has_dv or on_scan) and (
            not part_fields or _hive_layout(root, abs_paths, files, pcs, part_fields, mode)):
        # one scan: Spark types the partition columns from the `col=value` directories, which
        # match the log's values exactly (checked per file, for types whose parse is exact)
        if part_fields:
            from pyspark.sql.types import StructType as SparkStruct
            scan_schema = SparkStruct(list(spark_phys.fields) + list(
                to_spark_schema(StructType(part_fields), strip_metadata=True, nullable=True).fields))
            scan = spark.read.schema(scan_schema).options(**options).option("basePath", _os_root(root))
        else:  # no discovery: directories of an unpartitioned table are not partitions
            scan = reader
        df = with_file_row(parquet_scan(scan, [glob_escape(p) for p in abs_paths]))
        if has_dv:
            df = drop_on_scan(df, range(len(abs_paths)))
    elif (not has_dv or on_scan) and len(
            groups := _partition_groups(files, part_fields, mode, tz)) <= _MAX_UNION_GROUPS:
        # no join for partition values: one scan per partition with literal columns
        parts = []
        for values, idx in groups:
            g = with_file_row(parquet_scan(reader, [glob_escape(abs_paths[i]) for i in idx]))
            if has_dv:
                g = drop_on_scan(g, idx)
            for f, v in zip(part_fields, values):
                g = g.withColumn(f.name, _partition_literal(v, f.type))
            parts.append(g)
        df = parts[0]
        for g in parts[1:]:
            df = df.unionByName(g)
    else:
        df = parquet_scan(reader, [glob_escape(p) for p in abs_paths])
        df = with_file_row(df.withColumn(_KEY, F.col("_metadata.file_path")))
        if has_dv:
            df = df.withColumn(_ROW, F.expr(row_sql if array is not None or not unfilled
                                            else f"coalesce({row_sql}, {unfilled})"))
        info = _file_info(spark, files, abs_paths, part_fields, mode,
                          dv_keys=keys if array is not None else None, time_zone=tz)
        df = df.join(F.broadcast(info), on=_KEY, how="left")
        # a path that failed to match the log fails the query (a filter is never pruned away)
        df = df.filter(F.when(F.col(_FID).isNull(), F.raise_error(
            F.concat(F.lit("tahoe: data file not matched to the log: "), F.col(_KEY)))).otherwise(F.lit(True)))
        if array is not None:
            df = df.withColumn(_WORDS, words).filter(F.expr(_dv_keep_sql(_ROW, _DVKEY, _WORDS, unfilled)))
        elif has_dv:
            sizes = None  # keyed by the file id from the join
            df = _dv_key_columns(df, F.col(_FID), F.col(_ROW), packed)
    if has_dv and array is None:
        df = _drop_deleted(df, _deleted_words(spark, loaded, key=sizes, packed=packed), packed)

    phys_by_name = {f.name: p for f, p in zip(data_fields, phys.fields)}
    sel = []
    cast_spark = to_spark_schema(StructType(out_fields), strip_metadata=True, nullable=True) if out_fields else None
    logical_by_name = {f.name: f for f in (cast_spark.fields if cast_spark else [])}
    spark_phys_by_name = {f.name: f for f in spark_phys.fields}
    for f in out_fields:
        lf = logical_by_name[f.name]
        shown = user_metadata(f.metadata)   # a comment, as delta-spark's DataFrames keep it
        if f.name.lower() in pcs_lower:
            sel.append(col(f.name).alias(f.name, metadata=shown) if shown else col(f.name))
            continue
        pname = phys_by_name[f.name].name
        c = col(pname)
        pf = spark_phys_by_name[pname]
        if not _same_names(pf.dataType, lf.dataType):
            c = c.cast(lf.dataType)
        sel.append(c.alias(f.name, metadata=shown) if shown else c.alias(f.name))
    if file_row:
        sel += [col(FILE_COLUMN), col(ROW_COLUMN)]
    sel += [col(n) for n in extras]
    return df.select(*sel)


def _arrow_scan(spark, snap, filters, files, file_row: bool, extra_columns: dict | None, schema: StructType,
                columns: list[str] | None):
    """`read_snapshot` of a table on a store the JVM cannot reach: one Spark job whose tasks read
    the files with tahoe's Arrow reader through the table's store (`mapInArrow` over one row per
    file: classic sessions and Spark Connect alike), deletion vectors applied, each row tagged
    with its file's URI (`hadoop_uri`, as the native scan's `_metadata.file_path`) and physical
    position when `file_row`. The store travels with the tasks as its kind and storage options."""
    from pyspark.sql.types import LongType, StringType, StructField as SF, StructType as SparkStruct

    out_fields = [f for f in schema.fields if not is_void(f.type) and (columns is None or f.name in columns)]
    spark_fields = list(to_spark_schema(StructType(out_fields), strip_metadata=True, nullable=True).fields) \
        if out_fields else []
    if file_row:
        spark_fields += [SF(FILE_COLUMN, StringType(), True), SF(ROW_COLUMN, LongType(), True)]
    extras = dict(extra_columns or {})
    spark_fields += [SF(n, t, True) for n, t in extras.items()]
    out_schema = SparkStruct(spark_fields)
    if files is None:
        files = plan_files(snap, filters, session_time_zone(spark), spark)
    if files.num_rows and _ignore_missing_files(spark):
        files = _existing_files(snap, files)
    if files.num_rows == 0:
        return spark.createDataFrame([], out_schema)
    entries = [(p, dict(pv or ()), dict(dv) if dv else None, size)
               for p, pv, dv, size in zip(files.column("path").to_pylist(), files.column("partitionValues").to_pylist(),
                                          files.column("deletionVector").to_pylist(), files.column("size").to_pylist())]
    task = _ArrowScanTask(snap, schema, [f.name for f in out_fields], out_schema, entries, file_row, extras)
    parallelism = max(1, int(getattr(getattr(spark, "sparkContext", None), "defaultParallelism", 2) or 2)) \
        if hasattr(spark, "_jsc") else 2
    return spark.range(0, len(entries), 1, min(len(entries), parallelism * 4)).mapInArrow(task, out_schema)


class _ArrowScanTask:
    """The picklable task function of `_arrow_scan`: file ids in, the files' rows out."""

    def __init__(self, snap, schema: StructType, columns: list[str], out_schema, entries: list, file_row: bool,
                 extras: dict):
        self.table_root = snap.table_root
        self.store = snap.store
        self.schema_json = schema.to_json()
        self.partition_columns = list(snap.partition_columns)
        self.mode = snap.column_mapping_mode
        self.columns = columns
        self.out_schema_json = out_schema.json()
        self.entries = entries
        self.file_row = file_row
        self.extras = {n: t.json() for n, t in extras.items()}

    def __call__(self, batches):
        import json as _json

        from pyspark.sql.pandas.types import to_arrow_schema, to_arrow_type
        from pyspark.sql.types import StructType as SparkStruct, _parse_datatype_json_string

        target = to_arrow_schema(SparkStruct.fromJson(_json.loads(self.out_schema_json)), timezone="UTC")
        reader = ArrowFileReader(self.store, self.table_root, StructType.from_json(self.schema_json),
                                 self.partition_columns, self.mode, self.columns)
        extras = {n: to_arrow_type(_parse_datatype_json_string(t)) for n, t in self.extras.items()} or None
        for batch in batches:
            for i in batch.column(0).to_pylist():
                path, pv, dv, size = self.entries[i]
                t = reader.read_file(path, pv, dv, row_index=ROW_COLUMN if self.file_row else None,
                                     extra_columns=extras, size=size)
                if self.file_row:
                    uri = hadoop_uri(resolve_data_path(self.table_root, path))
                    t = t.append_column(FILE_COLUMN, pa.array([uri] * t.num_rows, pa.string()))
                t = to_spark_arrow(t.select(target.names), target).cast(target)
                yield from t.to_batches(max_chunksize=65536)


# Spark's parquet readers (3.4 and later) fill a requested column of this name with each row's
# index in its file — the column behind `_metadata.row_index`, and how delta-spark applies DVs.
# Asked for directly it costs nothing per row, where `_metadata.row_index` builds a struct per row.
_ROW_INDEX_COLUMN = "_tmp_metadata_row_index"


def _row_index_column(spark, spark_phys) -> str | None:
    """The row-index column to request on a DV scan: `_ROW_INDEX_COLUMN` on Spark 4 (the
    versions it is known on) unless a table column has that name, else None (`_metadata`).
    A null in it fails the query (see the `coalesce` guard), never drops rows silently."""
    try:
        major = int(str(spark.version).split(".")[0])
    except (ValueError, AttributeError):
        return None
    if major != 4 or any(f.name.lower() == _ROW_INDEX_COLUMN for f in spark_phys.fields):
        return None
    return _ROW_INDEX_COLUMN


def _only_field_ids(obj):
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k == "metadata" and isinstance(v, dict):
                out[k] = {m: x for m, x in v.items() if m == "parquet.field.id"}
            else:
                out[k] = _only_field_ids(v)
        return out
    if isinstance(obj, list):
        return [_only_field_ids(x) for x in obj]
    return obj


def _file_info(spark, files: pa.Table, abs_paths: list[str], part_fields: list[StructField], mode: str,
               dv_keys: list[int | None] | None = None, time_zone: str | None = None):
    """The (file URI → file id, partition values[, DV word-array key]) table of the join plan."""
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField as SF, StructType as SparkStruct

    n = files.num_rows
    cols = {_KEY: pa.array([hadoop_uri(p) for p in abs_paths], pa.string()),
            _FID: pa.array(np.arange(n, dtype=np.int32))}
    fields = [SF(_KEY, StringType(), False), SF(_FID, IntegerType(), False)]
    typed = partition_values_to_arrow(files.column("partitionValues"), part_fields, mode, time_zone=time_zone)
    for f in part_fields:
        cols[f.name] = typed[f.name]
        fields.append(SF(f.name, to_spark_type(f.type), True))
    if dv_keys is not None:
        cols[_DVKEY] = pa.array(dv_keys, pa.int64())
        fields.append(SF(_DVKEY, LongType(), True))
    t = pa.table(cols)
    return spark.createDataFrame(t, SparkStruct(fields))


_MAX_UNION_GROUPS = 32


def _unique_sizes(snap, files: pa.Table) -> list[int] | None:
    """The files' sizes as the store has them (what Spark reports as `_metadata.file_size`), when
    they are pairwise distinct — then a size identifies a file — else None."""
    store, root = snap.store, snap.table_root
    sizes = []
    for p in files.column("path").to_pylist():
        try:
            st = store.status(resolve_data_path(root, p))
        except OSError:
            return None
        if st is None:
            return None
        sizes.append(int(st.size))
    return sizes if len(set(sizes)) == len(sizes) else None


def _rows_below(files: pa.Table, limit: int) -> bool:
    for text in files.column("stats").to_pylist():
        try:
            st = parse_stats(text)
        except Exception:
            return False
        if st is None or st.num_records is None or st.num_records >= limit:
            return False
    return True


def _partition_literal(value: Any, t) -> Any:
    """A typed partition value as a literal column of its type. A timestamp_ntz goes in as its
    text, cast: `F.lit` of a naive datetime is a TIMESTAMP read in Python's local zone, which the
    cast to timestamp_ntz then reads in the session's — a wall clock shifted by both zones."""
    from pyspark.sql import functions as F

    if value is not None and isinstance(t, PrimitiveType) and t.name == "timestamp_ntz":
        return F.lit(value.isoformat(sep=" ", timespec="microseconds")).cast(to_spark_type(t))
    return F.lit(value).cast(to_spark_type(t))


def _partition_groups(files: pa.Table, part_fields: list[StructField], mode: str, time_zone: str | None = None):
    """[(typed partition values, [file indexes])] in first-seen order (zone-less timestamps read in
    `time_zone`, the session's)."""
    typed = partition_values_to_arrow(files.column("partitionValues"), part_fields, mode, time_zone=time_zone)
    cols = [typed[f.name].to_pylist() for f in part_fields]
    groups: dict = {}
    for i in range(files.num_rows):
        k = tuple(repr(c[i]) for c in cols)
        if k not in groups:
            groups[k] = (tuple(c[i] for c in cols), [])
        groups[k][1].append(i)
    return list(groups.values())


# partition types whose value Spark parses from a `col=value` directory exactly as the log's
# serialized value reads (timestamps, decimals, floats and binary go through literal columns)
_DIRECTORY_TYPES = frozenset({"string", "byte", "short", "integer", "long", "boolean", "date"})


def _os_root(root: str) -> str:
    return _scan_path(os.path.dirname(resolve_data_path(root, "x")))


def _hive_layout(root: str, abs_paths: list[str], files: pa.Table, pcs: list[str],
                 part_fields: list[StructField], mode: str) -> bool:
    """Whether every file sits in exactly the `a=1/b=x` directory its partition values name, so
    Spark's own partition discovery (with the table's types) yields the log's values."""
    if mode != "none" or not all(isinstance(f.type, PrimitiveType) and f.type.name in _DIRECTORY_TYPES
                                 for f in part_fields):
        return False
    base = _os_root(root)
    lower = {p.lower(): p for p in pcs}
    for path, pv in zip(abs_paths, files.column("partitionValues").to_pylist()):
        values = {lower.get(k.lower(), k): v for k, v in (pv or ())}
        if any(p not in values for p in pcs) or os.path.dirname(path) != os.path.join(base, partition_path(pcs, values)):
            return False
    return True


def _packable(files: pa.Table, sizes: list[int] | None) -> bool:
    """Whether (file key, row word) fits one long: file key < 2^37 and row indexes < 2^32."""
    key_max = max(sizes) if sizes is not None else files.num_rows
    return key_max < (1 << 37) and _rows_below(files, 1 << 32)


def _dv_key_columns(df, fid, row, packed: bool):
    """Add the columns a row is matched to its DV word by: the 64-row word it falls in (packed
    with the file key into one long when `packed`) and its bit within that word."""
    from pyspark.sql import functions as F

    word = F.shiftright(row, 6)
    if packed:
        df = df.withColumn(_W, F.shiftleft(fid.cast("long"), _WORD_BITS).bitwiseOR(word))
    else:
        df = df.withColumn(_FID, fid.cast("long")).withColumn(_W, word)
    return df.withColumn(_BIT, row.bitwiseAND(F.lit(63)).cast("int"))


def _drop_deleted(df, deleted, packed: bool):
    """Remove the rows whose bit is set in their DV word: a broadcast left join on the word key
    (64 consecutive rows share a key, so probes stay in cache) and a bit test."""
    from pyspark.sql import functions as F

    df = df.join(F.broadcast(deleted), on=[_W] if packed else [_FID, _W], how="left")
    return df.filter(F.expr(f"{_MASK} IS NULL OR shiftright({_MASK}, {_BIT}) & 1 = 0"))


def _load_dv_words(snap, dvs: list) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """[(file index in `dvs`, words, masks)] for each file with deleted rows: the DV bitmap as
    64-row words (word = row index >> 6, ascending) and masks of the deleted rows in each
    (bit = row index & 63), one entry per word holding at least one deleted row."""
    out = []
    root = snap.table_root
    store = snap.store
    for i, dv in enumerate(dvs):
        if not dv:
            continue
        d = DeletionVectorDescriptor.from_dict(dict(dv))
        bm = load_deletion_vector(d, root, store.read_range)
        to_array = getattr(bm, "to_array", None)
        if to_array is not None:
            rows = np.asarray(to_array()).astype(np.uint64, copy=False)
        else:  # pragma: no cover - older pyroaring
            rows = np.fromiter(iter(bm), dtype=np.uint64, count=len(bm))
        if not len(rows):
            continue
        w = (rows >> np.uint64(6)).astype(np.int64)
        bits = np.left_shift(np.uint64(1), rows & np.uint64(63))
        starts = np.flatnonzero(np.r_[True, w[1:] != w[:-1]])  # bitmaps iterate in order
        out.append((i, w[starts], np.bitwise_or.reduceat(bits, starts).view(np.int64)))
    return out


# Most words shipped with a query as one array (32 MB: the runs of ~268M rows); more go into a
# broadcast join. Each task deserializes the array, so it is kept well below a task's budget.
_MAX_DV_WORDS = 1 << 22
# Most files told apart by a CASE tree on `_metadata.file_size` on a scan (depth log2(64)).
_MAX_KEYED_FILES = 64


def _word_array(spark, loaded: list, files: pa.Table):
    """(keys, words): the DV words of all files end to end in one array column (a scalar
    subquery over a one-row table: Spark ships it as an UnsafeArrayData, bytes). Each file's run
    covers all its rows (numRecords / 64 words, so no row reads past its run and a row's word is
    found with one use of the key); keys[i] = where file i's run starts, None for a file with
    no deleted rows. None — the caller joins the words instead — when the runs exceed
    `_MAX_DV_WORDS`, a DV'd file has no numRecords, or the session has no scalar subqueries."""
    from pyspark.sql.types import ArrayType, LongType, StructField as SF, StructType as SparkStruct

    stats = files.column("stats").to_pylist()
    runs = []
    for i, w, m in loaded:
        try:
            st = parse_stats(stats[i])
        except Exception:
            return None
        if st is None or st.num_records is None:
            return None
        runs.append(max((st.num_records + 63) >> 6, int(w[-1]) + 1))
    total = sum(runs)
    if total > _MAX_DV_WORDS:
        return None
    keys: list[int | None] = [None] * files.num_rows
    flat = np.zeros(total, dtype=np.int64)
    off = 0
    for (i, w, m), n in zip(loaded, runs):
        flat[off + w] = m
        keys[i] = off
        off += n
    t = pa.table({"w": pa.ListArray.from_arrays(pa.array([0, total], pa.int32()), pa.array(flat))})
    one = spark.createDataFrame(t, SparkStruct([SF("w", ArrayType(LongType(), False), False)]))
    scalar = getattr(one, "scalar", None)
    return (keys, scalar()) if scalar is not None else None


def _key_by_size_sql(size: str, pairs: list[tuple[int, int]]) -> str:
    """SQL for a CASE tree over sorted (file size, key) pairs: the key of the file whose size is
    `size`, null for a file not listed (no deleted rows)."""
    if len(pairs) == 1:
        return f"CASE WHEN {size} = {pairs[0][0]}L THEN {pairs[0][1]} END"
    mid = len(pairs) // 2
    return (f"CASE WHEN {size} < {pairs[mid][0]}L THEN {_key_by_size_sql(size, pairs[:mid])} "
            f"ELSE {_key_by_size_sql(size, pairs[mid:])} END")


def _dv_keep_sql(row: str, key: str, words: str, unfilled: str | None) -> str:
    """SQL true for a row not deleted: bit `row & 63` of word `key + (row >> 6)` is clear, or the
    row's file has no run (`key` null). `key` appears once, so Spark evaluates it once per row
    (the optimizer copies a column's expression into every use). `unfilled` (an error) is raised
    where the row index is null."""
    test = f"shiftright(get({words}, {key} + cast(shiftright({row}, 6) as int)), cast({row} & 63 as int)) & 1 = 0"
    otherwise = f"CASE WHEN {row} IS NULL THEN {unfilled} ELSE true END" if unfilled else "true"
    return f"coalesce({test}, {otherwise})"


def _deleted_words(spark, loaded: list, key: list[int] | None = None, packed: bool = False):
    """The loaded DV words as a table to join: (file key, word) → mask. File key = index in
    `dvs`, or `key[i]` (the file's size) when given."""
    from pyspark.sql.types import LongType, StructField as SF, StructType as SparkStruct

    fid = np.concatenate([np.full(len(w), i if key is None else key[i], dtype=np.int64) for i, w, _ in loaded])
    word = np.concatenate([w for _, w, _ in loaded])
    mask = np.concatenate([m for _, _, m in loaded])
    if packed:
        t = pa.table({_W: pa.array((fid << _WORD_BITS) | word), _MASK: pa.array(mask)})
        fields = [SF(_W, LongType(), False), SF(_MASK, LongType(), False)]
    else:
        t = pa.table({_FID: pa.array(fid), _W: pa.array(word), _MASK: pa.array(mask)})
        fields = [SF(_FID, LongType(), False), SF(_W, LongType(), False), SF(_MASK, LongType(), False)]
    return spark.createDataFrame(t, SparkStruct(fields))

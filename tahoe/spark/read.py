"""The fast Spark read path: a Delta snapshot as a native Spark parquet scan.

Owns `read_delta(spark, path, version=None, timestamp=None, filters=None)`:

1. the snapshot's active files come from tahoe's log core (no Spark job); partition pruning and
   stats-based skipping (`tahoe.spark.skipping`) drop files that surely hold no matching row;
2. the remaining files are read with `spark.read.schema(physical).parquet(*files)` — the table's
   physical schema (column mapping: physical names; id mode: `parquet.field.id` reads), so columns
   missing from a file come back as nulls and timestamp_ntz/INT96/millis are Spark's own reads;
3. partition values, cheapest first: when every file sits in the `a=1/b=x` directory its log
   values name (and the types parse exactly), one scan and Spark's own partition discovery with
   the table's types — the same plan as `spark.read.parquet`; else, with at most 32 partitions, one
   scan per partition with literal partition columns, unioned; otherwise a broadcast left join
   onto a small (file URI → file id, partition values) table on `_metadata.file_path`, guarded by
   a `raise_error` filter so a path that failed to match can never drop or mislabel rows silently;
   deletion vectors: the bitmaps become 64-row words — (file key, row index >> 6) → mask of the
   deleted rows — joined by a broadcast left join and tested bit by bit. The file key is
   `_metadata.file_size` when the files' on-disk sizes are pairwise distinct (a per-file constant:
   no string hashing), else the file id from the join; packed with the word into one long where
   it fits (Spark's cheapest hash join). 64 consecutive rows share a probe, and the broadcast
   holds ~1/64 of the entries a per-row anti-join needs;
4. columns are renamed/cast to the logical schema (nested physical names too).

Tables on stores the JVM cannot reach (s3:// without hadoop-aws) go through the Python data
source (`tahoe.spark.datasource`) instead.
"""

from __future__ import annotations

import os
import re
import unicodedata
from typing import Any, Iterable

import numpy as np
import pyarrow as pa

from ..log import DeltaLog
from ..protocol import column_mapping
from ..protocol.deletion_vectors import DeletionVectorDescriptor, load_deletion_vector
from ..protocol.partition_values import partition_path, partition_values_to_arrow
from ..protocol.schema import PrimitiveType, StructField, StructType
from ..storage import resolve_data_path
from .session import configure, session_time_zone
from .skipping import file_mask
from .types import col, to_spark_schema, to_spark_type

__all__ = ["read_delta", "read_snapshot", "hadoop_uri", "glob_escape", "plan_files"]

_KEY = "__tahoe_file"
_FID = "__tahoe_fid"
_ROW = "__tahoe_row"
_W = "__tahoe_word"
_BIT = "__tahoe_bit"
_MASK = "__tahoe_mask"
_WORD_BITS = 26  # row index >> 6 of a row index below 2^32

# Characters Java's multi-argument URI constructor leaves unquoted in a path (besides letters,
# digits and non-ASCII characters that are neither spaces nor controls).
_URI_SAFE = set("_-!.~'()*,;:$&+=/@")


def hadoop_uri(local_path: str) -> str:
    """`new Path(p).toUri().toString()` of a local absolute path as Spark reports it in
    `_metadata.file_path` (measured: space → %20, % → %25, [ ] { } # → quoted, é kept)."""
    out = []
    for ch in os.path.normpath(local_path):
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
    return "file:" + "".join(out)


def glob_escape(path: str) -> str:
    """Escape Hadoop glob metacharacters (`__globPaths__=false` reads files twice when mixed with
    other paths — measured on Spark 4.3 — so tahoe always globs escaped paths)."""
    return re.sub(r"([\[\]{}*?\\])", r"\\\1", path)


def _jvm_unreachable(root: str) -> bool:
    """Tables the fast path cannot scan: object stores (plain PySpark ships no s3a jars)."""
    return "://" in root and not root.startswith("file:")


def _is_void(f: StructField) -> bool:
    return isinstance(f.type, PrimitiveType) and f.type.name == "void"


def plan_files(snapshot, filters: Iterable[Any] | None = None, session_tz: str = "UTC", spark: Any = None) -> pa.Table:
    """The snapshot's active files that may hold rows matching `filters`."""
    files = snapshot.files_table(["path", "partitionValues", "size", "stats", "deletionVector"])
    if filters and files.num_rows:
        mask = file_mask(files, list(filters), snapshot.schema, snapshot.partition_columns,
                         snapshot.column_mapping_mode, session_tz, spark)
        if not mask.all():
            files = files.filter(pa.array(mask))
    return files


def _same_names(a, b) -> bool:
    return a.simpleString() == b.simpleString()


def read_delta(spark, path: str, version: int | None = None, timestamp: Any = None,
               filters: Iterable[Any] | str | None = None, storage_options: dict | None = None):
    """A DataFrame of the table at `path` (latest, `version` or `timestamp`), with `filters`
    (SQL strings or Columns) used to skip files and applied to the rows."""
    if filters is not None and not isinstance(filters, (list, tuple)):
        filters = [filters]
    log = DeltaLog.for_table(path, storage_options)
    snap = log.snapshot(version=version, timestamp=timestamp)
    if _jvm_unreachable(snap.table_root):
        from .datasource import read_via_datasource

        df = read_via_datasource(spark, snap.table_root, snap.version, storage_options)
    else:
        df = read_snapshot(spark, snap, filters)
    for f in filters or ():
        df = df.filter(f)
    return df


def read_snapshot(spark, snap, filters: Iterable[Any] | None = None):
    configure(spark)
    from pyspark.sql import functions as F

    root = snap.table_root
    if _jvm_unreachable(root):
        from .datasource import read_via_datasource

        return read_via_datasource(spark, root, snap.version)
    schema = snap.schema
    mode = snap.column_mapping_mode
    pcs = snap.partition_columns
    pcs_lower = {p.lower() for p in pcs}
    out_fields = [f for f in schema.fields if not _is_void(f)]
    data_fields = [f for f in out_fields if f.name.lower() not in pcs_lower]
    part_fields = [f for f in out_fields if f.name.lower() in pcs_lower]
    logical_spark = to_spark_schema(StructType(out_fields), strip_metadata=True) if out_fields else None
    files = plan_files(snap, filters, session_time_zone(spark), spark)
    if files.num_rows == 0:
        from pyspark.sql.types import StructType as SparkStruct
        return spark.createDataFrame([], logical_spark or SparkStruct([]))

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

    paths = files.column("path").to_pylist()
    abs_paths = [resolve_data_path(root, p) for p in paths]
    dvs = files.column("deletionVector").to_pylist()
    has_dv = any(dvs)
    reader = spark.read.schema(spark_phys)

    # deletion vectors are keyed by the file's on-disk size (`_metadata.file_size`, a per-file
    # constant: no string hashing) when the sizes are pairwise distinct, else by a file id
    sizes = _unique_sizes(abs_paths) if has_dv else None
    packed = _packable(files, sizes)

    def dv_keys(g, fid):
        """The DV join columns, computed on the scan itself (`_metadata` is gone after a union)."""
        return _dv_key_columns(g, fid, F.col("_metadata.row_index"), packed)

    if (not has_dv or sizes is not None) and (
            not part_fields or _hive_layout(root, abs_paths, files, pcs, part_fields, mode)):
        # one scan: Spark types the partition columns from the `col=value` directories, which
        # match the log's values exactly (checked per file, for types whose parse is exact)
        if part_fields:
            from pyspark.sql.types import StructType as SparkStruct
            scan_schema = SparkStruct(list(spark_phys.fields) + list(
                to_spark_schema(StructType(part_fields), strip_metadata=True, nullable=True).fields))
            scan = spark.read.schema(scan_schema).option("basePath", _os_root(root))
        else:  # no discovery: directories of an unpartitioned table are not partitions
            scan = reader
        df = scan.parquet(*[glob_escape(p) for p in abs_paths])
        if has_dv:
            df = dv_keys(df, F.col("_metadata.file_size"))
    elif (not has_dv or sizes is not None) and len(
            groups := _partition_groups(files, part_fields, mode)) <= _MAX_UNION_GROUPS:
        # no join for partition values: one scan per partition with literal columns
        parts = []
        for values, idx in groups:
            g = reader.parquet(*[glob_escape(abs_paths[i]) for i in idx])
            if has_dv:
                g = dv_keys(g, F.col("_metadata.file_size"))
            for f, v in zip(part_fields, values):
                g = g.withColumn(f.name, F.lit(v).cast(to_spark_type(f.type)))
            parts.append(g)
        df = parts[0]
        for g in parts[1:]:
            df = df.unionByName(g)
    else:
        df = reader.parquet(*[glob_escape(p) for p in abs_paths])
        df = df.withColumn(_KEY, F.col("_metadata.file_path"))
        if has_dv:
            df = df.withColumn(_ROW, F.col("_metadata.row_index"))
        info = _file_info(spark, files, abs_paths, part_fields, mode)
        df = df.join(F.broadcast(info), on=_KEY, how="left")
        # a path that failed to match the log fails the query (a filter is never pruned away)
        df = df.filter(F.when(F.col(_FID).isNull(), F.raise_error(
            F.concat(F.lit("tahoe: data file not matched to the log: "), F.col(_KEY)))).otherwise(F.lit(True)))
        if has_dv:
            sizes = None  # keyed by the file id from the join
            df = _dv_key_columns(df, F.col(_FID), F.col(_ROW), packed)
    if has_dv:
        deleted = _deleted_words(spark, snap, dvs, key=sizes, packed=packed)
        if deleted is not None:
            df = _drop_deleted(df, deleted, packed)

    phys_by_name = {f.name: p for f, p in zip(data_fields, phys.fields)}
    sel = []
    cast_spark = to_spark_schema(StructType(out_fields), strip_metadata=True, nullable=True) if out_fields else None
    logical_by_name = {f.name: f for f in (cast_spark.fields if cast_spark else [])}
    spark_phys_by_name = {f.name: f for f in spark_phys.fields}
    for f in out_fields:
        lf = logical_by_name[f.name]
        if f.name.lower() in pcs_lower:
            sel.append(col(f.name))
            continue
        pname = phys_by_name[f.name].name
        c = col(pname)
        pf = spark_phys_by_name[pname]
        if not _same_names(pf.dataType, lf.dataType):
            c = c.cast(lf.dataType)
        sel.append(c.alias(f.name))
    return df.select(*sel)


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


def _file_info(spark, files: pa.Table, abs_paths: list[str], part_fields: list[StructField], mode: str):
    from pyspark.sql.types import IntegerType, StringType, StructField as SF, StructType as SparkStruct

    n = files.num_rows
    cols = {_KEY: pa.array([hadoop_uri(p) for p in abs_paths], pa.string()),
            _FID: pa.array(np.arange(n, dtype=np.int32))}
    fields = [SF(_KEY, StringType(), False), SF(_FID, IntegerType(), False)]
    typed = partition_values_to_arrow(files.column("partitionValues"), part_fields, mode)
    for f in part_fields:
        cols[f.name] = typed[f.name]
        fields.append(SF(f.name, to_spark_type(f.type), True))
    t = pa.table(cols)
    return spark.createDataFrame(t, SparkStruct(fields))


_MAX_UNION_GROUPS = 32


def _unique_sizes(abs_paths: list[str]) -> list[int] | None:
    """On-disk sizes of the files (what Spark reports as `_metadata.file_size`) when they are
    pairwise distinct — then a size identifies a file — else None."""
    try:
        sizes = [os.stat(p).st_size for p in abs_paths]
    except OSError:
        return None
    return sizes if len(set(sizes)) == len(sizes) else None


def _rows_below(files: pa.Table, limit: int) -> bool:
    from ..protocol.stats import parse_stats

    for text in files.column("stats").to_pylist():
        try:
            st = parse_stats(text)
        except Exception:
            return False
        if st is None or st.num_records is None or st.num_records >= limit:
            return False
    return True


def _partition_groups(files: pa.Table, part_fields: list[StructField], mode: str):
    """[(typed partition values, [file indexes])] in first-seen order."""
    typed = partition_values_to_arrow(files.column("partitionValues"), part_fields, mode)
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
    return os.path.dirname(resolve_data_path(root, "x"))


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


def _deleted_words(spark, snap, dvs: list, key: list[int] | None = None, packed: bool = False):
    """The DV bitmaps as 64-row words: (file key, row index >> 6) → a mask of the deleted rows
    (bit = row index & 63), one entry per word holding at least one deleted row. File key =
    index in `dvs`, or `key[i]` (the file's size) when given. None when nothing is deleted."""
    from pyspark.sql.types import LongType, StructField as SF, StructType as SparkStruct

    fids, words, masks = [], [], []
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
        words.append(w[starts])
        masks.append(np.bitwise_or.reduceat(bits, starts).view(np.int64))
        fids.append(np.full(len(starts), i if key is None else key[i], dtype=np.int64))
    if not fids:
        return None
    fid, word, mask = np.concatenate(fids), np.concatenate(words), np.concatenate(masks)
    if packed:
        t = pa.table({_W: pa.array((fid << _WORD_BITS) | word), _MASK: pa.array(mask)})
        fields = [SF(_W, LongType(), False), SF(_MASK, LongType(), False)]
    else:
        t = pa.table({_FID: pa.array(fid), _W: pa.array(word), _MASK: pa.array(mask)})
        fields = [SF(_FID, LongType(), False), SF(_W, LongType(), False), SF(_MASK, LongType(), False)]
    return spark.createDataFrame(t, SparkStruct(fields))

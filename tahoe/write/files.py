"""Writing data files (spec "Data Files", "Partition Value Serialization", "Per-file Statistics", column
mapping): Arrow rows conformed to the table's schema (`conform_to_schema`), split by partition into Hive
directories, written as parquet, described by `add` actions. Every file `write_data_files` writes:

  1. has a unique name (`part-<5 digits>-<uuid4>-c000.<codec>.parquet`), never overwritten, compressed as
     `delta.parquet.compression.codec` / `delta.parquet.format.version` say (snappy, page V1), or as the
     operation's writer settings say (`tahoe.write.writer_properties`: deltalake's WriterProperties);
  2. holds no partition column; its columns carry physical names and field ids, all nullable;
  3. stores timestamps as INT64 microseconds; dictionaries only where they pay (`dictionary_columns`);
  4. holds rows of one set of partition values, those of its AddFile."""

from __future__ import annotations

import os
import uuid
from typing import Any, Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import SchemaError, UnsupportedFeatureError
from ..protocol import column_mapping, geospatial
from ..protocol.actions import AddFile
from ..protocol.partition_values import partition_path, serialize_partition_value
from ..protocol.variant import from_parquet as variant_from_parquet, is_variant_storage, is_variant_type
from ..protocol.schema import ArrayType, DataType, MapType, StructField, StructType, to_arrow_type
from ..protocol.parquet_format import ParquetWriteOptions
from ..protocol.properties import data_skipping_settings, parquet_write_options
from ..protocol.stats import compute_stats
from ..protocol.timestamps import now_ms
from ..storage import resolve_data_path
from ..storage import encode_log_path
from ..storage.base import LogStore
from .writer_properties import ParquetTuning, current_write_settings, leaf_paths

__all__ = ["write_data_files", "conform_to_schema", "to_arrow_table", "parquet_bytes",
           "nullable_type", "DEFAULT_TARGET_FILE_ROWS"]

DEFAULT_TARGET_FILE_ROWS = 1_000_000
ROW_GROUP_ROWS = 1 << 20  # rows per parquet row group

# --- input -------------------------------------------------------------------------------------

def to_arrow_table(data: Any) -> pa.Table:
    """Any Arrow-ish input as a `pa.Table`: a Table, RecordBatch, RecordBatchReader, an iterable
    of RecordBatches, a pandas DataFrame, or anything exporting the Arrow C stream interface."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover
        pd = None
    if pd is not None and isinstance(data, pd.DataFrame):
        return pa.Table.from_pandas(data, preserve_index=False)
    if hasattr(data, "__arrow_c_stream__"):
        return pa.table(data)
    if isinstance(data, Iterable):
        batches = list(data)
        if not batches:
            raise SchemaError("no data: an empty iterable of record batches has no schema")
        if not all(isinstance(b, pa.RecordBatch) for b in batches):
            raise TypeError("an iterable passed as data must yield pyarrow.RecordBatch objects")
        return pa.Table.from_batches(batches)
    raise TypeError(f"cannot write data of type {type(data).__name__}: pass a pyarrow Table, "
                    f"RecordBatch(es), a RecordBatchReader or a pandas DataFrame")


# --- conforming to the table schema ------------------------------------------------------------

def nullable_type(t: pa.DataType) -> pa.DataType:
    """`t` with every nested field nullable (map keys stay required), field metadata kept.

    Data files are written all-nullable, as Spark writes them: NOT NULL is a property of the
    table, enforced on the values before writing (`tahoe.write.constraints`), and a required
    child of a null struct would otherwise be unwritable. A variant keeps its two required
    binaries (the variant layout; its null slots hold empty bytes)."""
    if is_variant_type(t):
        return t
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(nullable_type(t.field(i).type)).with_nullable(True)
                          for i in range(t.num_fields)])
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(nullable_type(t.key_type)),
                       t.item_field.with_type(nullable_type(t.item_type)).with_nullable(True))
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(nullable_type(t.value_type)).with_nullable(True))
    return t


def _nullable_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_type(nullable_type(f.type)).with_nullable(True) for f in schema],
                     metadata=schema.metadata)


def _cast_leaf(arr: pa.Array, target: pa.DataType, path: str) -> pa.Array:
    if arr.type == target:
        return arr
    if isinstance(target, pa.BaseExtensionType) and target.extension_name == geospatial.EXTENSION_NAME:
        if pa.types.is_struct(arr.type) and arr.type.get_field_index("wkb") >= 0:   # Spark's struct<srid, wkb>
            return geospatial.wkb_of_spark(arr, target)
        if pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type):
            return pa.ExtensionArray.from_storage(target, arr.cast(pa.binary()))
        if isinstance(arr.type, pa.BaseExtensionType) and arr.type.extension_name == target.extension_name:
            return pa.ExtensionArray.from_storage(target, arr.storage)
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
        if arr.type == target:
            return arr
    safe = not (pa.types.is_timestamp(arr.type) and pa.types.is_timestamp(target))
    try:
        return pc.cast(arr, target, safe=safe)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise SchemaError(f"column '{path}': cannot cast {arr.type} to {target}: {e}") from None


def _holds_variant(t: pa.DataType) -> bool:
    """Whether a variant sits in `t` (its null slots must be made non-null in the children)."""
    if is_variant_type(t):
        return True
    if pa.types.is_struct(t):
        return any(_holds_variant(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _holds_variant(t.value_type)
    if pa.types.is_map(t):
        return _holds_variant(t.item_type)
    return False


def _conform_array(arr: pa.Array, target: pa.DataType, path: str, cast_leaf: "LeafCast | None" = None) -> pa.Array:
    t = arr.type
    if is_variant_type(target):
        if not is_variant_storage(t):
            raise SchemaError(
                f"column '{path}' is {t} in the data but variant in the table: pass variants as "
                f"struct<metadata: binary, value: binary> (tahoe.protocol.variant; encode_json "
                f"turns JSON text into that form)")
        return variant_from_parquet(arr)
    if t == target and not _holds_variant(target):
        return arr
    if pa.types.is_struct(target):
        if not pa.types.is_struct(t):
            raise SchemaError(f"column '{path}' is {t} in the data but a struct in the table")
        names = [t.field(i).name for i in range(t.num_fields)]
        lower = {n.lower(): i for i, n in reversed(list(enumerate(names)))}
        children = []
        for i in range(target.num_fields):
            f = target.field(i)
            j = names.index(f.name) if f.name in names else lower.get(f.name.lower(), -1)
            sub = f"{path}.{f.name}"
            if j < 0:
                children.append(pa.nulls(len(arr), f.type))
            else:
                children.append(_conform_array(pc.struct_field(arr, [j]), f.type, sub, cast_leaf))
        mask = pc.is_null(arr) if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_list(target):
        if pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or \
                (hasattr(pa.types, "is_list_view") and (pa.types.is_list_view(t) or pa.types.is_large_list_view(t))):
            arr = arr.cast(pa.list_(t.value_type))
            t = arr.type
        if not pa.types.is_list(t):
            raise SchemaError(f"column '{path}' is {t} in the data but an array in the table")
        values = _conform_array(arr.values, target.value_type, f"{path}.element", cast_leaf)
        mask = pc.is_null(arr) if arr.null_count else None
        return pa.ListArray.from_arrays(arr.offsets, values, type=target, mask=mask)
    if pa.types.is_map(target):
        if not pa.types.is_map(t):
            raise SchemaError(f"column '{path}' is {t} in the data but a map in the table")
        keys = _conform_array(arr.keys, target.key_type, f"{path}.key", cast_leaf)
        items = _conform_array(arr.items, target.item_type, f"{path}.value", cast_leaf)
        mask = pc.is_null(arr) if arr.null_count else None
        return pa.MapArray.from_arrays(arr.offsets, keys, items, type=target, mask=mask)
    if cast_leaf is not None and arr.type != target:
        out = cast_leaf(arr, target, path)
        if out is not None:
            return out
    return _cast_leaf(arr, target, path)


LeafCast = Callable[[pa.Array, pa.DataType, str], "pa.Array | None"]


def conform_to_schema(data: pa.Table, schema: StructType, computed: Iterable[str] = (),
                      cast_leaf: LeafCast | None = None) -> pa.Table:
    """`data` with exactly the columns of `schema` (logical names, schema order, the table's Arrow
    types): columns matched case-insensitively, nested structs field by field, absent nullable
    columns filled with nulls, values cast (integers widen, timestamps become microseconds).
    A column of `data` the schema lacks, or an absent non-nullable column (unless named in
    `computed`: identity/generated columns the writer fills in afterwards), raises SchemaError.
    `cast_leaf(array, arrow type, column path)` converts a leaf value of another type (None: the
    default, pyarrow's safe cast) — the DML executor's ANSI casts."""
    names = data.column_names
    lower: dict[str, int] = {}
    for i, n in enumerate(names):
        lower.setdefault(n.lower(), i)
    wanted = {f.name.lower() for f in schema.fields}
    extra = [n for n in names if n.lower() not in wanted]
    if extra:
        raise SchemaError(f"the data has columns the table does not: {extra}; table columns: {schema.names}")
    computed_lower = {c.lower() for c in computed}
    columns = []
    fields = []
    for f in schema.fields:
        target = nullable_type(to_arrow_type(f.type))
        i = names.index(f.name) if f.name in names else lower.get(f.name.lower(), -1)
        if i < 0:
            if not f.nullable and f.name.lower() not in computed_lower:
                raise SchemaError(f"the data is missing the non-nullable column '{f.name}'")
            col = pa.chunked_array([pa.nulls(data.num_rows, target)])
        else:
            src = data.column(i)
            col = pa.chunked_array([_conform_array(c, target, f.name, cast_leaf) for c in src.chunks], type=target) \
                if src.type != target or _holds_variant(target) else src
        columns.append(col)
        fields.append(pa.field(f.name, target, nullable=True))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


# --- partitions --------------------------------------------------------------------------------

def _serialize_column(arr: pa.ChunkedArray | pa.Array, dt: DataType, local_zone: str | None = None) -> pa.Array:
    """The partitionValues strings of a partition column (null for null), each distinct value
    serialized once."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if len(arr) == 0:
        return pa.array([], pa.string())
    if isinstance(dt, (StructType, ArrayType, MapType)):
        raise SchemaError(f"type {dt.simple_string()} cannot be a partition column type")
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), pa.string())
    enc = pc.dictionary_encode(arr)
    if local_zone is not None:
        uniques = [serialize_partition_value(v, dt, iso_timestamps=False, wall_clock_zone=local_zone)
                   for v in enc.dictionary.to_pylist()]
    else:
        uniques = [serialize_partition_value(v, dt) for v in enc.dictionary.to_pylist()]
    return pc.take(pa.array(uniques, pa.string()), enc.indices)


def _partition_groups(data: pa.Table, part_fields: list[StructField],
                      local_zone: str | None = None) -> list[tuple[dict[str, str | None], np.ndarray]]:
    """(serialized values by logical column, row indices) per distinct partition (`local_zone`:
    timestamps as zone-less wall-clock time there, delta-spark's utcTimestampPartitionValues=false)."""
    n = data.num_rows
    if not part_fields:
        return [({}, np.arange(n))]
    serialized = [_serialize_column(data.column(f.name), f.type, local_zone) for f in part_fields]
    if len(serialized) == 1:
        key = pc.fill_null(serialized[0], "\x00")
    else:
        key = pc.binary_join_element_wise(*[pc.fill_null(s, "\x00") for s in serialized], "\x01")
    enc = pc.dictionary_encode(key)
    ids = enc.indices.to_numpy(zero_copy_only=False)
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
    ends = np.r_[starts[1:], n]
    out = []
    for s, e in zip(starts, ends):
        first = int(order[s])
        values = {f.name: serialized[k][first].as_py() for k, f in enumerate(part_fields)}
        out.append((values, order[s:e]))
    return out


# --- writing -----------------------------------------------------------------------------------

def _retype(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Same data, physical names/field ids (layout-compatible types: a zero-copy view)."""
    cols = []
    for col, f in zip(table.columns, schema):
        cols.append(col if col.type == f.type else pa.chunked_array([c.view(f.type) for c in col.chunks], type=f.type))
    return pa.Table.from_arrays(cols, schema=schema)


_DICTIONARY_SAMPLE = 65_536
_DICTIONARY_FIRST_SAMPLE = 4_096


def _spread(n: int, size: int) -> pa.Array | None:
    """Indices of an evenly spread sample of at most `size` of `n` rows (None: every row)."""
    step = max(1, n // size)
    return pa.array(np.arange(0, n, step)) if step > 1 else None


def dictionary_columns(table: pa.Table) -> bool | list[str]:
    """The columns worth dictionary-encoding (pyarrow's `use_dictionary`): those whose values,
    in an evenly spread sample of at most 64k rows, are at most half distinct — where a
    dictionary's indices replace repeated values — as parquet-mr keeps a dictionary only when it
    makes the page smaller. Already dictionary-typed columns, all-null columns, and every column
    of a table with nested columns (whose leaves pyarrow names by path) keep the default: True.
    A first sample of 4k rows settles most columns at a sixteenth of the cost: a smaller evenly
    spread sample is, as a rule, at least as distinct as a larger one, so at most half distinct
    there means a dictionary, and nearly all distinct (≥ 97 %: some 60k distinct values or more
    when they are spread evenly) means none — else the 64k-row sample decides."""
    if table.num_rows == 0 or any(pa.types.is_nested(f.type) for f in table.schema):
        return True
    n = table.num_rows
    first, full = _spread(n, _DICTIONARY_FIRST_SAMPLE), _spread(n, _DICTIONARY_SAMPLE)
    chosen = []
    for name, col in zip(table.column_names, table.columns):
        if pa.types.is_dictionary(col.type):
            chosen.append(name)
            continue
        if isinstance(col.type, pa.BaseExtensionType):   # geometry / geography: judged by their WKB bytes
            col = col.cast(col.type.storage_type)
        sample = col.take(first) if first is not None else col
        values = len(sample) - sample.null_count
        if values == 0:
            chosen.append(name)
            continue
        distinct = pc.count_distinct(sample).as_py()
        if first is not None and 2 * distinct > values and 100 * distinct < 97 * values:
            sample = col.take(full) if full is not None else col
            values = len(sample) - sample.null_count
            distinct = pc.count_distinct(sample).as_py()
        if distinct * 2 <= values:
            chosen.append(name)
    return True if len(chosen) == table.num_columns else chosen


def _nested_leaves(table: pa.Table):
    """(parquet column path, values) of each leaf inside a list / map / struct column of `table`."""
    def walk(prefix: str, arr):
        t = arr.type
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                yield from walk(f"{prefix}.{t.field(i).name}", pc.struct_field(arr, [i]))
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            yield from walk(f"{prefix}.list.element", pc.list_flatten(arr))
        elif pa.types.is_map(t):
            chunks = arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]
            yield from walk(f"{prefix}.key_value.key", pa.chunked_array([c.keys for c in chunks], t.key_type))
            yield from walk(f"{prefix}.key_value.value", pa.chunked_array([c.items for c in chunks], t.item_type))
        else:
            yield prefix, arr

    for name, col in zip(table.column_names, table.columns):
        if pa.types.is_nested(col.type):
            yield from walk(name, col)


def valueless_nested_leaves(table: pa.Table) -> list[str]:
    """The leaves inside list / map / struct columns that hold no value (every element NULL, or
    none): written without a dictionary. pyarrow (and arrow-rs) write such a chunk with an empty
    dictionary page, and Spark's vectorized parquet reader then fails on a lambda over the array —
    `filter(arr, x -> x IS NOT NULL)`, `transform`, `exists`, `array_compact` over `[NULL]`:
    ArrayIndexOutOfBoundsException in PlainIntegerDictionary.decodeToInt (the DML fuzzer, seed
    30096; parquet-java writes no dictionary page there, so delta-spark's files read)."""
    return [path for path, arr in _nested_leaves(table) if len(arr) - arr.null_count == 0]


def nan_leaves(table: pa.Table) -> list[str]:
    """The float / double leaves (parquet column paths) of `table` holding a NaN. Their chunks get
    no min/max statistics: parquet's rule (NaN never in min/max) leaves a reader unaware of the NaN,
    and parquet-java's row-group filter (Spark's, delta-spark's) then drops the row group for
    `x > 1.5` or `x = NaN` — though Spark SQL orders NaN above every number (the DML fuzzer,
    seed 177). (parquet-java 1.17's writer sets such a chunk's max to NaN, which its filter keeps.)"""
    out: list[str] = []

    def walk(prefix: str, arr) -> None:
        t = arr.type
        if pa.types.is_float32(t) or pa.types.is_float64(t):
            if pc.any(pc.is_nan(arr)).as_py():
                out.append(prefix)
        elif pa.types.is_struct(t):
            for i in range(t.num_fields):
                walk(f"{prefix}.{t.field(i).name}", pc.struct_field(arr, [i]))
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            walk(f"{prefix}.list.element", pc.list_flatten(arr))
        elif pa.types.is_map(t):
            chunks = arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]
            walk(f"{prefix}.key_value.key", pa.chunked_array([c.keys for c in chunks], t.key_type))
            walk(f"{prefix}.key_value.value", pa.chunked_array([c.items for c in chunks], t.item_type))

    for name, col in zip(table.column_names, table.columns):
        walk(name, col)
    return out


def parquet_bytes(table: pa.Table, options: ParquetWriteOptions | None = None,
                  tuning: ParquetTuning | None = None, names: dict[str, str] | None = None) -> pa.Buffer:
    """One data file's bytes (`options`: the table's codec and format version; `tuning`: the
    operation's writer settings over them, `names` the logical path of each physical leaf)."""
    sink = pa.BufferOutputStream()
    kw = {**(options or ParquetWriteOptions()).pyarrow_kwargs(), "row_group_size": ROW_GROUP_ROWS}
    if tuning is None:
        kw["use_dictionary"] = dictionary_columns(table)
    else:
        kw.update(tuning.pyarrow_kwargs(table, names or {}))
    empty = valueless_nested_leaves(table)
    if empty and kw.get("use_dictionary", True) is not False:
        chosen = kw.get("use_dictionary", True)
        leaves = leaf_paths(table.schema)
        if chosen is not True:   # (columns or leaves: each as its leaves)
            leaves = [p for p in leaves if p in chosen or any(p.startswith(c + ".") for c in chosen)]
        kw["use_dictionary"] = [p for p in leaves if p not in empty]
    nan = nan_leaves(table) if kw.get("write_statistics", True) is not False else []
    if nan:
        stats = kw.get("write_statistics", True)
        kw["write_statistics"] = [c for c in (leaf_paths(table.schema) if stats is True else stats) if c not in nan]
    try:
        pq.write_table(table, sink, **kw, coerce_timestamps="us", allow_truncated_timestamps=True,
                       use_compliant_nested_type=True)
    except (pa.ArrowException, OSError) as e:   # an in-memory sink: the writer refused a setting
        if tuning is None:
            raise
        raise UnsupportedFeatureError(f"the parquet writer cannot write with these writer properties: {e} (column "
                                      f"encodings {kw.get('column_encoding') or {}})") from None
    return sink.getvalue()


def write_data_files(store: LogStore, table_root: str, data: pa.Table | Iterable[pa.RecordBatch],
                     snapshot_schema: StructType, partition_columns: Iterable[str] = (),
                     column_mapping_mode: str = "none", configuration: dict | None = None,
                     target_file_rows: int = DEFAULT_TARGET_FILE_ROWS, *,
                     tight_bounds: bool | None = None, extra_columns: dict[str, str] | None = None,
                     subdir: str = "", file_prefix: str = "part",
                     local_timestamp_zone: str | None = None) -> list[AddFile]:
    """Write `data` (already in the table's logical schema, see `conform_to_schema`) as parquet
    files under `table_root` and return their AddFiles (dataChange=true), one or more per distinct
    partition, at most `target_file_rows` rows each. No rows → no files.

    `extra_columns` maps columns of `data` outside the schema to the physical names they are
    written under, after the table's columns and without stats: the materialized row-tracking
    columns (spec "Row Tracking") a rewrite carries. `subdir` / `file_prefix` place and name the
    files otherwise: change data files are `_change_data/<partition>/cdc-...` (with the
    `_change_type` column as an extra column).

    Stats honour `delta.dataSkippingNumIndexedCols`, `delta.dataSkippingStatsColumns` and
    `delta.dataSkippingStringPrefixLength`; `tight_bounds` (pass True on tables with deletion
    vectors, as delta-spark does) is written into the stats when given."""
    table = to_arrow_table(data)
    if target_file_rows < 1:
        raise ValueError(f"target_file_rows must be >= 1, got {target_file_rows}")
    conf = dict(configuration or {})
    pcols = list(partition_columns)
    part_fields = [snapshot_schema.field(c, case_insensitive=True) for c in pcols]
    part_lower = {c.lower() for c in pcols}
    data_schema = StructType([f for f in snapshot_schema.fields if f.name.lower() not in part_lower])
    physical_schema = _nullable_schema(column_mapping.physical_arrow_schema(data_schema, column_mapping_mode))
    mapped = column_mapping_mode in ("name", "id")
    pv_key = {f.name: (column_mapping.physical_name(f) if mapped else f.name) for f in part_fields}

    num_indexed, indexed, prefix_len = data_skipping_settings(conf)

    if table.num_rows == 0:
        return []
    parquet_options = parquet_write_options(conf)
    parquet_options.pyarrow_kwargs()   # refuses a codec pyarrow cannot write, before any file
    settings = current_write_settings()
    tuning = settings.tuning if settings is not None else None
    file_bytes = settings.file_bytes(conf) if settings is not None else None
    data_names = [f.name for f in data_schema.fields]
    extras = dict(extra_columns or {})
    if extras:
        data_names += list(extras)
        physical_schema = pa.schema(list(physical_schema) + [
            pa.field(phys, table.schema.field(name).type, nullable=True) for name, phys in extras.items()])
    adds: list[AddFile] = []
    made_dirs: set[str] = set()
    # object stores: a file uploads while the next one is encoded (a local write is a memcpy)
    uploads = _Uploads(store)
    try:
        _encode_files(table, part_fields, data_names, pv_key, snapshot_schema, physical_schema, parquet_options,
                      target_file_rows, file_prefix, subdir, table_root, store, made_dirs, uploads, adds,
                      num_indexed, indexed, prefix_len, column_mapping_mode, pcols, tight_bounds,
                      local_timestamp_zone, tuning, file_bytes)
    finally:
        uploads.wait()
    return adds


class _Uploads:
    """Puts of encoded data files: inline on a local file system; on an object store at most
    two in flight beside the encoding (a failed one is raised by `wait`, or by the next `put`)."""

    def __init__(self, store: LogStore):
        self.store = store
        self.pool = None
        self.pending: list = []
        if type(store).__name__ != "LocalLogStore":
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(max_workers=2)

    def put(self, path: str, body) -> None:
        if self.pool is None:
            self.store.write_data(path, body)
            return
        while len(self.pending) >= 2:
            self.pending.pop(0).result()
        self.pending.append(self.pool.submit(self.store.write_data, path, body))

    def wait(self) -> None:
        if self.pool is None:
            return
        try:
            for f in self.pending:
                f.result()
        finally:
            self.pending.clear()
            self.pool.shutdown(wait=True)


def _encode_files(table, part_fields, data_names, pv_key, snapshot_schema, physical_schema, parquet_options,
                  target_file_rows, file_prefix, subdir, table_root, store, made_dirs, uploads, adds,
                  num_indexed, indexed, prefix_len, column_mapping_mode, pcols, tight_bounds,
                  local_zone: str | None = None, tuning: ParquetTuning | None = None,
                  file_bytes: int | None = None) -> None:
    file_no = 0
    names: dict[str, str] = {}
    if tuning is not None:    # physical leaf path -> logical leaf path (the names a user gives)
        logical = pa.schema([pa.field(n, table.schema.field(n).type) for n in data_names])
        names = dict(zip(leaf_paths(physical_schema), leaf_paths(logical)))
    for values, idx in _partition_groups(table, part_fields, local_zone):
        rows = table.select(data_names)
        if len(idx) != table.num_rows:
            rows = rows.take(pa.array(idx))
        pvs = {pv_key[f.name]: values[f.name] for f in part_fields}
        # directories are named by the partitionValues keys: physical names under column mapping
        rel_dir = partition_path([pv_key[f.name] for f in part_fields], pvs) if part_fields else ""
        per_file = target_file_rows
        if file_bytes is not None and rows.num_rows and rows.nbytes:
            # rolled at about `file_bytes` of unencoded data, as delta-rs estimates a file's size
            per_file = max(1, file_bytes * rows.num_rows // rows.nbytes)
        for start in range(0, rows.num_rows, per_file):
            chunk = rows.slice(start, per_file)
            suffix = tuning.file_suffix if tuning is not None else parquet_options.file_suffix
            name = f"{file_prefix}-{file_no:05d}-{uuid.uuid4()}-c000{suffix}.parquet"
            file_no += 1
            rel = "/".join(p for p in (subdir, rel_dir, name) if p)
            log_path = encode_log_path(rel)
            full = resolve_data_path(table_root, log_path)
            parent = full.rsplit("/", 1)[0] if "/" in full else full
            if os.sep != "/" and store.owns(full) and type(store).__name__ == "LocalLogStore":  # pragma: no cover
                parent = os.path.dirname(full)
            if parent not in made_dirs:
                store.mkdirs(parent)
                made_dirs.add(parent)
            body = parquet_bytes(_retype(chunk, physical_schema), parquet_options, tuning, names)
            uploads.put(full, body)
            stats = compute_stats(chunk, snapshot_schema, num_indexed, indexed, prefix_len,
                                  column_mapping_mode=column_mapping_mode, partition_columns=pcols,
                                  tight_bounds=tight_bounds)
            adds.append(AddFile(
                path=log_path,
                partition_values=dict(pvs),
                size=body.size,
                modification_time=now_ms(),
                data_change=True,
                stats=stats,
            ))

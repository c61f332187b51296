"""The checkpoint schema (spec "Checkpoint Schema"), and a snapshot's checkpoint built in it as Arrow.

  1. `CheckpointLayout`: the columns a checkpoint of one snapshot has — delta-spark's top-level
     structs `txn`, `add`, `remove`, `metaData`, `protocol`, `domainMetadata`, plus
     `checkpointMetadata` / `sidecar` on v2Checkpoint tables; `add.stats` as JSON, and
     `partitionValues_parsed` / `stats_parsed` as the table's properties ask.
  2. `build_checkpoint`: the rows, column-wise from the snapshot's Arrow file tables (never one
     Python object per file): non-file actions, then adds, then the tombstones younger than
     `delta.deletedFileRetentionDuration`; adds and removes carry `dataChange = false`.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from ..errors import CorruptLogError
from ..protocol import column_mapping, timestamps
from ..protocol.partition_values import partition_column_to_arrow
from ..protocol.properties import bool_property, data_skipping_settings, interval_property_ms
from ..protocol.schema import (
    DataType, DecimalType, PrimitiveType, StructField, StructType, from_arrow_type, to_arrow_type,
)
from ..protocol.stats import stats_columns, typed_value
from ..protocol.table_features import is_feature_supported
from .arrow_build import column, empty, numpy_array, scalar
from .replay import DV_TYPE, STRING_MAP
from .snapshot import Snapshot

__all__ = ["CheckpointLayout", "checkpoint_schema", "stats_parsed_type", "build_checkpoint",
           "build_checkpoint_with_layout", "non_file_batch", "sidecar_schema"]


# --- schema ------------------------------------------------------------------------------------

_TXN = pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])
_PROTOCOL = pa.struct([
    ("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32()),
    ("readerFeatures", pa.list_(pa.string())), ("writerFeatures", pa.list_(pa.string())),
])
_METADATA = pa.struct([
    ("id", pa.string()), ("name", pa.string()), ("description", pa.string()),
    ("format", pa.struct([("provider", pa.string()), ("options", STRING_MAP)])),
    ("schemaString", pa.string()), ("partitionColumns", pa.list_(pa.string())),
    ("configuration", STRING_MAP), ("createdTime", pa.int64()),
])
_DOMAIN = pa.struct([("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())])
_CHECKPOINT_METADATA = pa.struct([("version", pa.int64()), ("tags", STRING_MAP)])
_SIDECAR = pa.struct([("path", pa.string()), ("sizeInBytes", pa.int64()),
                      ("modificationTime", pa.int64()), ("tags", STRING_MAP)])
_ADD_BASE = [
    ("path", pa.string()), ("partitionValues", STRING_MAP), ("size", pa.int64()),
    ("modificationTime", pa.int64()), ("dataChange", pa.bool_()), ("tags", STRING_MAP),
    ("deletionVector", DV_TYPE), ("baseRowId", pa.int64()), ("defaultRowCommitVersion", pa.int64()),
]
_REMOVE = pa.struct([
    ("path", pa.string()), ("deletionTimestamp", pa.int64()), ("dataChange", pa.bool_()),
    ("extendedFileMetadata", pa.bool_()), ("partitionValues", STRING_MAP), ("size", pa.int64()),
    ("deletionVector", DV_TYPE), ("baseRowId", pa.int64()), ("defaultRowCommitVersion", pa.int64()),
])
_ADD_COLUMNS = [n for n, _ in _ADD_BASE] + ["clusteringProvider", "stats"]
_REMOVE_COLUMNS = [_REMOVE.field(i).name for i in range(_REMOVE.num_fields)]


def _stats_eligible(dt: DataType) -> bool:
    if isinstance(dt, DecimalType):
        return True
    return isinstance(dt, PrimitiveType) and dt.name in (
        "byte", "short", "integer", "long", "float", "double", "date", "timestamp",
        "timestamp_ntz", "string")


def _phys(f: StructField, mapped: bool) -> str:
    return column_mapping.physical_name(f) if mapped else f.name


def _minmax_type(struct: StructType, mapped: bool) -> pa.DataType | None:
    fields = []
    for f in struct.fields:
        if isinstance(f.type, StructType):
            inner = _minmax_type(f.type, mapped)
            if inner is not None:
                fields.append(pa.field(_phys(f, mapped), inner))
        elif _stats_eligible(f.type):
            fields.append(pa.field(_phys(f, mapped), to_arrow_type(f.type)))
    return pa.struct(fields) if fields else None


def _nullcount_type(struct: StructType, mapped: bool) -> pa.DataType | None:
    fields = []
    for f in struct.fields:
        if isinstance(f.type, StructType):
            inner = _nullcount_type(f.type, mapped)
            if inner is not None:
                fields.append(pa.field(_phys(f, mapped), inner))
        else:
            fields.append(pa.field(_phys(f, mapped), pa.int64()))
    return pa.struct(fields) if fields else None


def stats_parsed_type(snapshot: Snapshot) -> pa.DataType:
    """The typed form of the table's `stats` (delta-spark's statsSchema): numRecords, then
    minValues/maxValues over the stats-eligible columns, nullCount over every collected leaf, and
    tightBounds when the table supports deletion vectors; physical names under column mapping."""
    conf = snapshot.configuration
    mapped = column_mapping.mode(conf) in ("name", "id")
    skipping = data_skipping_settings(conf)
    cols = stats_columns(snapshot.schema, skipping.num_indexed_cols, skipping.stats_columns,
                         snapshot.partition_columns)
    fields = [pa.field("numRecords", pa.int64())]
    mm = _minmax_type(cols, mapped)
    if mm is not None:
        fields += [pa.field("minValues", mm), pa.field("maxValues", mm)]
    nc = _nullcount_type(cols, mapped)
    if nc is not None:
        fields.append(pa.field("nullCount", nc))
    if is_feature_supported(snapshot.protocol, "deletionVectors"):
        fields.append(pa.field("tightBounds", pa.bool_()))
    return pa.struct(fields)


def _partition_fields(snapshot: Snapshot) -> list[tuple[StructField, str]]:
    """(logical field, physical name) of each partition column, in partitionColumns order."""
    mapped = snapshot.column_mapping_mode in ("name", "id")
    out = []
    for name in snapshot.partition_columns:
        f = snapshot.schema.get(name) or snapshot.schema.get(name, case_insensitive=True)
        if f is None:
            raise CorruptLogError(f"partition column '{name}' is not in the table schema")
        out.append((f, _phys(f, mapped)))
    return out


class CheckpointLayout:
    """What a checkpoint of one snapshot holds, decided from its properties and protocol."""

    def __init__(self, snapshot: Snapshot, adds: pa.Table | None = None):
        conf = snapshot.configuration
        self.write_json = bool_property(conf, "delta.checkpoint.writeStatsAsJson")
        as_struct = bool_property(conf, "delta.checkpoint.writeStatsAsStruct")
        self.partition_fields = _partition_fields(snapshot)
        # delta-spark writes partitionValues_parsed unless the property is false, and never
        # stats_parsed; the spec's stats_parsed is written when the property is set to true.
        self.write_pv_parsed = as_struct is not False and bool(self.partition_fields)
        self.write_stats_parsed = as_struct is True
        self.v2 = is_feature_supported(snapshot.protocol, "v2Checkpoint")
        cp = (adds if adds is not None else snapshot.files_table(["clusteringProvider"])).column("clusteringProvider")
        self.clustering = len(cp) > 0 and cp.null_count < len(cp)
        self.stats_type = stats_parsed_type(snapshot) if self.write_stats_parsed else None
        self.pv_type = pa.struct([pa.field(phys, to_arrow_type(f.type)) for f, phys in self.partition_fields]) \
            if self.write_pv_parsed else None
        add_fields = list(_ADD_BASE)
        if self.clustering:
            add_fields.append(("clusteringProvider", pa.string()))
        if self.write_json:
            add_fields.append(("stats", pa.string()))
        if self.pv_type is not None:
            add_fields.append(("partitionValues_parsed", self.pv_type))
        if self.stats_type is not None:
            add_fields.append(("stats_parsed", self.stats_type))
        self.add_type = pa.struct(add_fields)
        cols = [("txn", _TXN), ("add", self.add_type), ("remove", _REMOVE), ("metaData", _METADATA),
                ("protocol", _PROTOCOL), ("domainMetadata", _DOMAIN)]
        if self.v2:
            cols += [("checkpointMetadata", _CHECKPOINT_METADATA), ("sidecar", _SIDECAR)]
        self.schema = pa.schema(cols)


def checkpoint_schema(snapshot: Snapshot) -> pa.Schema:
    """The parquet schema of a checkpoint of `snapshot`."""
    return CheckpointLayout(snapshot).schema


# --- building ----------------------------------------------------------------------------------

def _single_column_batch(schema: pa.Schema, column: str, arr: pa.Array) -> pa.RecordBatch:
    n = len(arr)
    return pa.RecordBatch.from_arrays(
        [arr if name == column else pa.nulls(n, schema.field(name).type) for name in schema.names],
        schema=schema)


def _map_items(d: dict | None) -> list[tuple[str, str | None]] | None:
    return None if d is None else [(k, v) for k, v in d.items()]


def non_file_batch(snapshot: Snapshot, layout: CheckpointLayout, cp_tags: dict[str, str] | None = None,
                    sidecars: list[dict] | None = None) -> pa.RecordBatch:
    """protocol, metaData, txns (by appId), domain metadata (by domain), checkpointMetadata (with
    `cp_tags`), and the `sidecars` of a v2 checkpoint's top-level file."""
    schema = layout.schema
    p = snapshot.protocol
    md = snapshot.metadata
    rows: list[tuple[str, dict]] = [
        ("protocol", {
            "minReaderVersion": p.min_reader_version, "minWriterVersion": p.min_writer_version,
            "readerFeatures": sorted(p.reader_features) if p.reader_features is not None else None,
            "writerFeatures": sorted(p.writer_features) if p.writer_features is not None else None,
        }),
        ("metaData", {
            "id": md.id, "name": md.name, "description": md.description,
            "format": {"provider": md.format.provider, "options": _map_items(md.format.options)},
            "schemaString": md.schema_string, "partitionColumns": list(md.partition_columns),
            "configuration": _map_items(md.configuration), "createdTime": md.created_time,
        }),
    ]
    for app_id in sorted(snapshot.set_transactions):
        t = snapshot.set_transactions[app_id]
        rows.append(("txn", {"appId": t.app_id, "version": t.version, "lastUpdated": t.last_updated}))
    for name in sorted(snapshot.domain_metadata):
        d = snapshot.domain_metadata[name]
        rows.append(("domainMetadata", {"domain": d.domain, "configuration": d.configuration,
                                        "removed": False}))
    if layout.v2:
        rows.append(("checkpointMetadata", {"version": snapshot.version, "tags": _map_items(cp_tags)}))
        for sc in sidecars or ():
            rows.append(("sidecar", {"path": sc["path"], "sizeInBytes": sc["sizeInBytes"],
                                     "modificationTime": sc["modificationTime"], "tags": None}))
    arrays = []
    for name in schema.names:
        values = [v if col == name else None for col, v in rows]
        t = schema.field(name).type
        arrays.append(column(values, t) if any(v is not None for v in values) else pa.nulls(len(values), t))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _col(batch: pa.RecordBatch, name: str) -> pa.Array:
    return batch.column(batch.schema.get_field_index(name))


def _add_struct(batch: pa.RecordBatch, layout: CheckpointLayout) -> pa.Array:
    n = batch.num_rows
    children = []
    for i in range(layout.add_type.num_fields):
        f = layout.add_type.field(i)
        if f.name == "dataChange":
            arr = numpy_array(np.zeros(n, dtype=bool))
        elif f.name == "partitionValues_parsed":
            arr = _partition_values_parsed(_col(batch, "partitionValues"), layout)
        elif f.name == "stats_parsed":
            arr = _stats_parsed(_col(batch, "stats"), layout.stats_type)
        else:
            arr = _col(batch, f.name)
            if arr.type != f.type:
                arr = arr.cast(f.type)
        children.append(arr)
    return pa.StructArray.from_arrays(children, fields=list(layout.add_type))


def _remove_struct(batch: pa.RecordBatch) -> pa.Array:
    n = batch.num_rows
    children = []
    for i in range(_REMOVE.num_fields):
        f = _REMOVE.field(i)
        children.append(numpy_array(np.zeros(n, dtype=bool)) if f.name == "dataChange" else _col(batch, f.name))
    return pa.StructArray.from_arrays(children, fields=list(_REMOVE))


def _uniform_map_items(pv: pa.Array, keys: list[str]) -> list[pa.Array] | None:
    """When every map holds exactly `keys` in that order (what writers produce), the value array of
    each key by slicing — much cheaper than a lookup per row. None otherwise."""
    k = len(keys)
    if pv.null_count or k == 0:
        return None
    offsets = np.frombuffer(pv.buffers()[1], dtype=np.int32)[pv.offset:pv.offset + len(pv) + 1]
    if offsets[-1] - offsets[0] != k * len(pv) or not np.all(np.diff(offsets) == k):
        return None
    base = int(offsets[0])
    flat_keys = pv.keys.slice(base, k * len(pv))
    expected = column(keys * len(pv), pa.string())
    if not pc.all(pc.equal(flat_keys, expected)).as_py():
        return None
    items = pv.items.slice(base, k * len(pv))
    return [pc.take(items, numpy_array(np.arange(j, k * len(pv), k, dtype=np.int64))) for j in range(k)]


def _partition_values_parsed(pv: pa.Array, layout: CheckpointLayout) -> pa.Array:
    children = []
    n = len(pv)
    fast = _uniform_map_items(pv, [phys for _, phys in layout.partition_fields]) if n else None
    for j, (f, phys) in enumerate(layout.partition_fields):
        if n == 0:
            children.append(empty(to_arrow_type(f.type)))
            continue
        if fast is not None:
            raw = fast[j]
        else:
            raw = pc.map_lookup(pv, scalar(phys), "first")
            if raw.null_count == n and phys != f.name:   # a writer that used logical names
                raw = pc.map_lookup(pv, scalar(f.name), "first")
        children.append(partition_column_to_arrow(raw, f.type))
    assert layout.pv_type is not None
    return pa.StructArray.from_arrays(children, fields=list(layout.pv_type))


# stats_parsed: the JSON reader parses typed values directly, except dates (read as strings and
# cast). Anything it cannot parse (NaN/Infinity strings, odd timestamp spellings) falls back to a
# per-row Python parse with the stats module's `typed_value`.

def _raw_json_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(t):
        return pa.struct([pa.field(t.field(i).name, _raw_json_type(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_date(t):
        return pa.string()
    return t


def _convert_raw(arr: pa.Array, t: pa.DataType) -> pa.Array:
    if pa.types.is_struct(t):
        children = [_convert_raw(pc.struct_field(arr, [i]), t.field(i).type) for i in range(t.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(t), mask=pc.is_null(arr))
    if arr.type != t:
        return pc.cast(arr, t)
    return arr


def _json_lines_buffer(strings: pa.Array) -> pa.Buffer:
    joined = pc.binary_join_element_wise(pc.fill_null(strings, "{}"), "\n", "")
    joined = joined.cast(pa.large_string())
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int64)
    start, end = int(offsets[joined.offset]), int(offsets[joined.offset + len(joined)])
    return joined.buffers()[2].slice(start, end - start)


def _stats_parsed(stats: pa.Array, t: pa.DataType | None) -> pa.Array:
    assert t is not None
    n = len(stats)
    if n == 0:
        return empty(t)
    if stats.null_count == n:
        return pa.nulls(n, t)
    raw_t = _raw_json_type(t)
    try:
        parsed = pajson.read_json(
            pa.BufferReader(_json_lines_buffer(stats)),
            read_options=pajson.ReadOptions(block_size=8 << 20),
            parse_options=pajson.ParseOptions(explicit_schema=pa.schema(list(raw_t)),
                                              unexpected_field_behavior="ignore"))
        if parsed.num_rows != n:
            raise ValueError("stats JSON spans lines")
        arr = pa.StructArray.from_arrays(
            [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in parsed.columns],
            fields=list(raw_t))
        arr = _convert_raw(arr, t)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
        arr = pa.array([_typed_stats(s, t) for s in stats.to_pylist()], type=t)
    return pa.StructArray.from_arrays([arr.field(i) for i in range(t.num_fields)], fields=list(t),
                                      mask=pc.is_null(stats))


def _typed_from_arrow(raw: Any, t: pa.DataType) -> Any:
    if raw is None:
        return None
    if pa.types.is_struct(t):
        if not isinstance(raw, dict):
            return None
        return {t.field(i).name: _typed_from_arrow(raw.get(t.field(i).name), t.field(i).type)
                for i in range(t.num_fields)}
    try:
        return typed_value(raw, from_arrow_type(t))
    except Exception:
        return None


def _typed_stats(text: str | None, t: pa.DataType) -> dict | None:
    if text is None:
        return None
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    return _typed_from_arrow(obj, t) if isinstance(obj, dict) else None


def _file_batches(table: pa.Table, max_rows: int = 256 * 1024) -> Iterable[pa.RecordBatch]:
    for b in table.to_batches(max_chunksize=max_rows):
        if b.num_rows:
            yield b


def build_checkpoint(snapshot: Snapshot, now_ms: int | None = None) -> tuple[pa.Table, int, int]:
    """The checkpoint of `snapshot` as one Arrow table in delta-spark's schema, and
    (number of non-file action rows, number of add rows). Row order: protocol, metaData, txns,
    domain metadata, [checkpointMetadata], adds, removes."""
    table, n_non_file, n_adds, _ = build_checkpoint_with_layout(snapshot, now_ms)
    return table, n_non_file, n_adds


def build_checkpoint_with_layout(snapshot: Snapshot, now_ms: int | None) -> tuple[pa.Table, int, int, CheckpointLayout]:
    adds = snapshot.files_table(_ADD_COLUMNS)   # one read of the add columns for everything below
    layout = CheckpointLayout(snapshot, adds)
    schema = layout.schema
    now_ms = timestamps.now_ms() if now_ms is None else now_ms
    retention = interval_property_ms(snapshot.configuration, "delta.deletedFileRetentionDuration")
    batches = [non_file_batch(snapshot, layout)]
    n_non_file = batches[0].num_rows
    if not layout.clustering:
        adds = adds.drop_columns(["clusteringProvider"])
    for b in _file_batches(adds):
        batches.append(_single_column_batch(schema, "add", _add_struct(b, layout)))
    tomb = snapshot.tombstones_table(_REMOVE_COLUMNS)
    if tomb.num_rows:
        ts = tomb.column("deletionTimestamp")
        keep = pc.fill_null(pc.greater_equal(ts, scalar(now_ms - retention, pa.int64())), scalar(False))
        tomb = tomb.filter(keep)
    for b in _file_batches(tomb):
        batches.append(_single_column_batch(schema, "remove", _remove_struct(b)))
    return pa.Table.from_batches(batches, schema=schema), n_non_file, adds.num_rows, layout


def sidecar_schema(layout: CheckpointLayout) -> pa.Schema:
    return pa.schema([layout.schema.field("add"), layout.schema.field("remove")])

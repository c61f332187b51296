"""The active files of a snapshot as deltalake's `DeltaTable.get_add_actions` and
`deletion_vectors` answer them (Arrow, deltalake's column names and types):

  1. `add_actions_table(snapshot, flatten)`: one row per add action — `path` (as in the log),
     `size_bytes`, `modification_time` (ms), `num_records`, then the stats as structs by logical
     column name (delta-rs 1.6.6 shows physical names under column mapping), typed by the table's
     schema, over the columns the table keeps stats for (`delta.dataSkipping*`): `null_count` (every leaf; arrays and maps are one
     leaf), `min` / `max` (the leaves data skipping bounds: numbers, decimals, dates,
     timestamps, strings, booleans), and `partition` (typed partition values) on partitioned
     tables; `flatten=True` turns each struct into top-level `min.x`, `partition.p` columns.
  2. `selection_vectors(snapshot)`: for each file with a deletion vector, its URI and a keep
     mask (`True` = the row is live) as long as the file's row count.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..protocol import column_mapping
from ..protocol.deletion_vectors import deleted_mask, load_deletion_vector
from ..protocol.partition_values import partition_column_to_arrow
from ..protocol.properties import data_skipping_settings
from ..protocol.schema import DataType, PrimitiveType, StructType, to_arrow_type
from ..protocol.stats import eligible_for_stats, get_nested, parse_stats, stats_columns, typed_value

__all__ = ["add_actions_table", "selection_vectors", "SELECTION_VECTOR_SCHEMA"]

SELECTION_VECTOR_SCHEMA = pa.schema([pa.field("filepath", pa.large_string(), nullable=False),
                                     pa.field("selection_vector", pa.list_(pa.field("item", pa.bool_(), False)),
                                              nullable=False)])


def _bounded(dt: DataType) -> bool:
    """Leaves deltalake reports min/max for: data skipping's types, and booleans."""
    return eligible_for_stats(dt) or (isinstance(dt, PrimitiveType) and dt.name == "boolean")


def _stat_fields(struct: StructType, for_bounds: bool, cm: str) -> list[tuple[str, str, Any]]:
    """(logical name, physical name, arrow type or nested list) of the stats struct's fields."""
    out: list[tuple[str, str, Any]] = []
    for f in struct.fields:
        phys = column_mapping.physical_name(f) if cm != "none" else f.name
        if isinstance(f.type, StructType):
            inner = _stat_fields(f.type, for_bounds, cm)
            if inner:
                out.append((f.name, phys, inner))
        elif for_bounds:
            if _bounded(f.type):
                out.append((f.name, phys, to_arrow_type(f.type)))
        else:                   # a primitive, or an array or map counted whole
            out.append((f.name, phys, pa.int64()))
    return out


def _arrow_type(spec: list[tuple[str, str, Any]]) -> pa.DataType:
    return pa.struct([pa.field(name, _arrow_type(t) if isinstance(t, list) else t) for name, _, t in spec])


def _column(spec: list[tuple[str, str, Any]], dicts: list[Any], schema: StructType, count: bool) -> pa.StructArray:
    arrays, names = [], []
    for name, phys, t in spec:
        values = [get_nested(d, [phys]) if isinstance(d, dict) else None for d in dicts]
        if isinstance(t, list):
            sub = schema.field(name).type
            assert isinstance(sub, StructType)
            arrays.append(_column(t, values, sub, count))
        elif count:
            arrays.append(pa.array([v if isinstance(v, int) and not isinstance(v, bool) else None for v in values],
                                   pa.int64()))
        else:
            dt = schema.field(name).type
            arrays.append(pa.array([None if isinstance(v, (dict, list)) else typed_value(v, dt) for v in values], t))
        names.append(name)
    if not arrays:
        return pa.array([{}] * len(dicts), pa.struct([]))
    return pa.StructArray.from_arrays(arrays, names=names)


def add_actions_table(snapshot: Any, flatten: bool = False) -> pa.Table:
    """deltalake's `get_add_actions(flatten)` of `snapshot` (see the module docstring)."""
    files = snapshot.files_table(["path", "partitionValues", "size", "modificationTime", "stats"])
    schema: StructType = snapshot.schema
    cm = snapshot.column_mapping_mode
    pcols = list(snapshot.partition_columns)
    skipping = data_skipping_settings(snapshot.configuration)     # the columns stats are kept for
    data = stats_columns(schema, skipping.num_indexed_cols, skipping.stats_columns, pcols)
    stats = [parse_stats(s) for s in files.column("stats").to_pylist()]
    cols: dict[str, pa.Array] = {
        "path": files.column("path").combine_chunks(),
        "size_bytes": files.column("size").combine_chunks().cast(pa.int64()),
        "modification_time": files.column("modificationTime").combine_chunks().cast(pa.int64()),
        "num_records": pa.array([s.num_records if s is not None else None for s in stats], pa.int64()),
    }
    structs: dict[str, pa.StructArray] = {}
    nulls = _stat_fields(data, False, cm)
    if nulls:
        structs["null_count"] = _column(nulls, [s.null_count if s else None for s in stats], data, True)
    bounds = _stat_fields(data, True, cm)
    if bounds:
        structs["min"] = _column(bounds, [s.min_values if s else None for s in stats], data, False)
        structs["max"] = _column(bounds, [s.max_values if s else None for s in stats], data, False)
    if pcols:
        pv = [dict(m or []) for m in files.column("partitionValues").to_pylist()]
        parts = []
        for name in pcols:
            f = schema.field(name)
            key = column_mapping.physical_name(f) if cm != "none" else f.name
            parts.append(partition_column_to_arrow([d.get(key) for d in pv], f.type))
        structs["partition"] = pa.StructArray.from_arrays(parts, names=pcols)
    for prefix, arr in structs.items():
        if flatten:
            cols.update(_flattened(prefix, arr))
        else:
            cols[prefix] = arr
    fields = [pa.field("path", pa.string(), False), pa.field("size_bytes", pa.int64(), False),
              pa.field("modification_time", pa.int64(), False)]
    fields += [pa.field(n, a.type) for n, a in cols.items() if n not in ("path", "size_bytes", "modification_time")]
    return pa.Table.from_arrays(list(cols.values()), schema=pa.schema(fields))


def _flattened(prefix: str, arr: pa.StructArray) -> dict[str, pa.Array]:
    out: dict[str, pa.Array] = {}
    for i, f in enumerate(arr.type):
        child = arr.field(i)
        name = f"{prefix}.{f.name}"
        if pa.types.is_struct(f.type):
            out.update(_flattened(name, child))
        else:
            out[name] = child
    return out


def selection_vectors(snapshot: Any, row_count: Any) -> pa.Table:
    """deltalake's `deletion_vectors()` of `snapshot` as one Arrow table: `filepath` (the file's
    URI) and `selection_vector` (True = live), for the files with a deletion vector only.
    `row_count(add)` is the file's row count when its stats do not give it."""
    from ..storage import absolute_uri

    paths, masks = [], []
    for add in snapshot.add_files():
        dv = add.deletion_vector
        if dv is None:
            continue
        st = parse_stats(add.stats)
        n = st.num_records if st is not None and st.num_records is not None else row_count(add)
        bitmap = load_deletion_vector(dv, snapshot.table_root, snapshot.store.read_range)
        paths.append(absolute_uri(snapshot.table_root, add.path))
        masks.append((~deleted_mask(bitmap, n)).tolist())
    return pa.Table.from_arrays([pa.array(paths, pa.large_string()),
                                 pa.array(masks, SELECTION_VECTOR_SCHEMA.field("selection_vector").type)],
                                schema=SELECTION_VECTOR_SCHEMA)

"""Geospatial types (the `geospatial` table feature; delta-io/delta's RFC, delta-spark 4.4 on Spark 4.1+):
GEOMETRY and GEOGRAPHY columns, values as WKB.

  1. Schema form: `geometry(<crs>)`, `geography(<crs>, <algorithm>)` (either case, kept as written) → `GeoType`.
  2. Arrow form: a `geoarrow.wkb` binary column with `crs` (and `edges`), which Arrow's parquet writers map
     to Parquet's GEOMETRY / GEOGRAPHY (`tahoe.protocol.geoarrow`).
  3. Spark's Arrow form (struct<srid, wkb>) at the data source and DML boundaries.
  4. Stats: nullCount only; min/max never used for skipping."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .geoarrow import EXTENSION_NAME
from .schema import (
    ALGORITHMS, DEFAULT_CRS, GeoType, geo_type_of_arrow_field, is_geo, parse_geo_type,
    to_arrow_type,
)

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = ["GeoType", "parse_geo_type", "ALGORITHMS", "EXTENSION_NAME", "arrow_type", "geo_type_of_arrow_field",
           "is_geo"]


def arrow_type(dt: GeoType) -> "pa.DataType":
    """The `geoarrow.wkb` extension type of a geospatial column (storage: binary)."""
    return to_arrow_type(dt)


# --- Spark's Arrow form --------------------------------------------------------------------------
# PySpark (4.1+) moves GEOMETRY / GEOGRAPHY values through Arrow as struct<srid: int32, wkb: binary>
# (the field's metadata says `geometry` / `geography` and the SRID): tahoe's Python data source,
# its write tasks and its DML scans convert at that boundary.

def _is_srid_wkb(t: "pa.DataType") -> bool:
    import pyarrow as pa

    return pa.types.is_struct(t) and t.num_fields == 2 and t.field(0).name == "srid" and t.field(1).name == "wkb"


def wkb_of_spark(arr: "pa.Array", target: "pa.DataType") -> "pa.Array":
    """Spark's struct<srid, wkb> values as `target` (a `geoarrow.wkb` type, or binary): the WKB."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        return pa.chunked_array([wkb_of_spark(c, target) for c in arr.chunks], type=target)
    wkb = arr.field("wkb")
    if arr.null_count:
        wkb = pc.if_else(pc.is_null(arr), pa.scalar(None, pa.binary()), wkb)
    storage = wkb.cast(pa.binary())
    return pa.ExtensionArray.from_storage(target, storage) if isinstance(target, pa.BaseExtensionType) else storage


def _spark_geo(arr: "pa.Array", target: "pa.DataType") -> "pa.Array":
    import pyarrow as pa

    srid = 0
    if isinstance(arr.type, pa.BaseExtensionType):
        geo = geo_type_of_arrow_field(pa.field("_", arr.type))
        srid = (geo.srid if geo is not None else None) or 0
        arr = arr.storage
    import pyarrow.compute as pc

    n = len(arr)
    mask = arr.is_null() if arr.null_count else None
    wkb = arr.cast(pa.binary())
    if mask is not None:      # the children are non-nullable: a null value's slots hold b""
        wkb = pc.fill_null(wkb, b"")
    return pa.StructArray.from_arrays([pa.array([srid] * n, pa.int32()), wkb], fields=list(target), mask=mask)


def _is_wkb(t: "pa.DataType") -> bool:
    import pyarrow as pa

    return isinstance(t, pa.BaseExtensionType) and t.extension_name == EXTENSION_NAME


def _holds_wkb(t: "pa.DataType") -> bool:
    import pyarrow as pa

    if _is_wkb(t):
        return True
    if pa.types.is_struct(t):
        return any(_holds_wkb(t.field(i).type) for i in range(t.num_fields))
    return False


def to_spark_arrow(table: "pa.Table", target: "pa.Schema") -> "pa.Table":
    """`table` (tahoe's Arrow form) with its geospatial columns — top-level, or inside structs —
    in Spark's form (struct<srid, wkb>, the SRID from the column's CRS) wherever `target`
    (PySpark's Arrow schema of the output) has that form; other columns untouched (the caller
    casts them)."""
    import pyarrow as pa

    if not any(_holds_wkb(f.type) for f in table.schema):
        return table
    cols = []
    for f in target:
        col = table.column(f.name)
        if _holds_wkb(col.type):
            col = pa.chunked_array([_convert(c, f.type) for c in col.chunks], type=f.type)
        cols.append(col)
    return pa.Table.from_arrays(cols, names=list(target.names))


def _convert(arr: "pa.Array", target: "pa.DataType") -> "pa.Array":
    import pyarrow as pa

    if _is_wkb(arr.type) and _is_srid_wkb(target):
        return _spark_geo(arr, target)
    if pa.types.is_struct(arr.type) and pa.types.is_struct(target):
        out = []
        for i in range(target.num_fields):
            tf = target.field(i)
            c = arr.field(tf.name)
            out.append(_convert(c, tf.type) if _holds_wkb(c.type) else c.cast(tf.type))
        return pa.StructArray.from_arrays(out, fields=list(target), mask=arr.is_null() if arr.null_count else None)
    return arr

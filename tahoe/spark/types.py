"""Conversions between tahoe's Delta schema objects and PySpark types.

Owns: `to_spark_type`/`to_spark_schema` (the Delta schema JSON is Spark's own JSON form, so the
conversion goes through it), `from_spark_schema`, `col(name)` (a column reference safe for
names with dots, spaces or backticks), `assign_by_name` (a value converted to a column's type
with struct fields matched by name, as delta-spark's UPDATE / MERGE store them) and
`local_dataframe` (a few driver-side rows as a DataFrame, the command results).
"""

from __future__ import annotations

import json
from typing import Any

from ..protocol.column_paths import quote_identifier
from ..protocol.schema import DataType, StructType
from ..protocol.clustering import split_column_name

__all__ = ["to_spark_type", "to_spark_schema", "from_spark_schema", "col", "assign_by_name",
           "local_dataframe"]


def to_spark_type(dt: DataType) -> Any:
    from pyspark.sql.types import _parse_datatype_json_value

    return _parse_datatype_json_value(dt.to_json_obj())


def to_spark_schema(schema: StructType, strip_metadata: bool = False, nullable: bool | None = None) -> Any:
    from pyspark.sql.types import StructType as SparkStruct

    obj = schema.to_json_obj()
    if strip_metadata or nullable is not None:
        obj = _rewrite(obj, strip_metadata, nullable)
    return SparkStruct.fromJson(obj)


def _rewrite(obj: Any, strip: bool, nullable: bool | None) -> Any:
    if isinstance(obj, dict):
        t = obj.get("type")
        if t == "struct":
            return {**obj, "fields": [_rewrite_field(f, strip, nullable) for f in obj["fields"]]}
        if t == "array":
            return {**obj, "elementType": _rewrite(obj["elementType"], strip, nullable),
                    **({"containsNull": True} if nullable else {})}
        if t == "map":
            return {**obj, "keyType": _rewrite(obj["keyType"], strip, nullable),
                    "valueType": _rewrite(obj["valueType"], strip, nullable),
                    **({"valueContainsNull": True} if nullable else {})}
    return obj


def _rewrite_field(f: dict, strip: bool, nullable: bool | None) -> dict:
    out = dict(f)
    out["type"] = _rewrite(f["type"], strip, nullable)
    if strip:
        out["metadata"] = {}
    if nullable is not None:
        out["nullable"] = nullable
    return out


_INTERNAL_METADATA = ("delta.", "parquet.field.", "CURRENT_DEFAULT", "EXISTS_DEFAULT")


def user_metadata(metadata: dict | None) -> dict:
    """A column's metadata as delta-spark's DataFrames show it: the user's (a `comment`), without
    Delta's own keys — generation expressions, identity, column mapping ids and physical names,
    invariants — nor parquet field ids or column defaults."""
    return {k: v for k, v in (metadata or {}).items() if not str(k).startswith(_INTERNAL_METADATA)}


def from_spark_schema(schema: Any) -> StructType:
    return StructType.from_json(json.dumps(schema.jsonValue()))


def local_dataframe(spark: Any, rows: list, schema: Any) -> Any:
    """A DataFrame of a few rows made on the driver (`rows`: tuples in `schema`'s field order, or
    dicts by field name; `schema` a pyspark StructType of numbers, strings, booleans, structs,
    arrays and maps — no timestamps), as delta-spark's commands return their results: a local
    relation, built through Arrow, so that `collect()` / `show()` run no Spark job (the row-list
    path of `createDataFrame` runs one, Python workers and all: ~0.1 s)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    names = schema.names
    dicts = [r if isinstance(r, dict) else dict(zip(names, r)) for r in rows]
    return spark.createDataFrame(pa.Table.from_pylist(dicts, schema=to_arrow_schema(schema)), schema)


_FUNCTIONS: list = [None, None]   # (the JVM view, its org.apache.spark.sql.functions) of the running SparkContext


def col(name: str) -> Any:
    """`F.col` of the quoted name. On a classic session with one Py4J call, not two: the JVM's
    `functions` class is looked up once per SparkContext (F.col looks it up at every call, and a
    DML builds hundreds of column references)."""
    from pyspark import SparkContext
    from pyspark.errors.utils import is_debugging_enabled
    from pyspark.sql import functions as F
    from pyspark.sql.utils import is_remote

    quoted = quote_identifier(name)
    sc = SparkContext._active_spark_context
    jvm = getattr(sc, "_jvm", None)
    if jvm is None or is_remote() or is_debugging_enabled():   # (F.col: Spark Connect; call sites recorded)
        return F.col(quoted)
    if _FUNCTIONS[0] is not jvm:
        _FUNCTIONS[:] = [jvm, getattr(jvm, "org.apache.spark.sql.functions")]
    from pyspark.sql.classic.column import Column

    return Column(_FUNCTIONS[1].col(quoted))


def nested_col(name: str) -> Any:
    """The column of a possibly nested name (`a.b`, with backquotes as
    `tahoe.protocol.clustering.split_column_name` reads them)."""
    from pyspark.sql import functions as F

    return F.col(".".join(quote_identifier(p) for p in split_column_name(name)))


def assign_by_name(value: Any, source: Any, target: Any) -> Any:
    """The pyspark Column `value` (of Spark type `source`) converted to Spark type `target` the
    way delta-spark's UPDATE / MERGE store a value (`UpdateExpressionsSupport.castIfNeeded`):
    struct fields matched BY NAME (case-insensitively; a target field the value lacks is NULL —
    the DML planner allows that only with schema evolution), recursively inside arrays
    (`transform`) and map values / keys (`transform_values` / `transform_keys`); a NULL struct
    stays NULL; leaves cast with Spark's CAST (ANSI under `spark.sql.ansi.enabled`, Spark 4's
    default). Spark's own struct cast matches fields by position."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, NullType, StructType

    if _same(source, target):
        return value if source == target else value.cast(target)
    if isinstance(source, NullType):
        return F.lit(None).cast(target)
    if isinstance(source, StructType) and isinstance(target, StructType):
        by_name = {}
        for f in source.fields:
            by_name.setdefault(f.name.lower(), f)
        parts = []
        for f in target.fields:
            sf = by_name.get(f.name.lower())
            v = assign_by_name(value.getField(sf.name), sf.dataType, f.dataType) if sf is not None \
                else F.lit(None).cast(f.dataType)
            parts.append(v.alias(f.name))
        return F.when(value.isNull(), F.lit(None).cast(target)).otherwise(F.struct(*parts))
    if isinstance(source, ArrayType) and isinstance(target, ArrayType):
        if not _holds_struct(source.elementType):
            return value.cast(target)
        return F.transform(value, lambda e: assign_by_name(e, source.elementType, target.elementType))
    if isinstance(source, MapType) and isinstance(target, MapType):
        if not (_holds_struct(source.keyType) or _holds_struct(source.valueType)):
            return value.cast(target)
        out = value
        if not _same(source.keyType, target.keyType):
            out = F.transform_keys(out, lambda k, _v: assign_by_name(k, source.keyType, target.keyType))
        if not _same(source.valueType, target.valueType):
            out = F.transform_values(out, lambda _k, v: assign_by_name(v, source.valueType, target.valueType))
        return out
    return value.cast(target)


def _same(a: Any, b: Any) -> bool:
    """Equal Spark types, ignoring nullability (and field metadata)."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(a, StructType) and isinstance(b, StructType):
        return len(a.fields) == len(b.fields) and all(
            x.name == y.name and _same(x.dataType, y.dataType) for x, y in zip(a.fields, b.fields))
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return _same(a.elementType, b.elementType)
    if isinstance(a, MapType) and isinstance(b, MapType):
        return _same(a.keyType, b.keyType) and _same(a.valueType, b.valueType)
    return a == b


def _holds_struct(t: Any) -> bool:
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(t, StructType):
        return True
    if isinstance(t, ArrayType):
        return _holds_struct(t.elementType)
    if isinstance(t, MapType):
        return _holds_struct(t.keyType) or _holds_struct(t.valueType)
    return False

"""Conversions between tahoe's Delta schema objects and PySpark types.

Owns: `to_spark_type`/`to_spark_schema` (the Delta schema JSON is Spark's own JSON form, so the
conversion goes through it), `from_spark_schema`, and `col(name)` (a column reference safe for
names with dots, spaces or backticks).
"""

from __future__ import annotations

import json
from typing import Any

from ..protocol.schema import DataType, StructType

__all__ = ["to_spark_type", "to_spark_schema", "from_spark_schema", "col", "quote"]


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


def from_spark_schema(schema: Any) -> StructType:
    return StructType.from_json(json.dumps(schema.jsonValue()))


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def col(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.col(quote(name))


def nested_col(name: str) -> Any:
    """The column of a possibly nested name (`a.b`, with backquotes as
    `tahoe.protocol.clustering.split_column_name` reads them)."""
    from pyspark.sql import functions as F

    from ..protocol.clustering import split_column_name

    return F.col(".".join(quote(p) for p in split_column_name(name)))

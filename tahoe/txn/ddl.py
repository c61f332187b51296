"""Schemas given by people: a Spark-style DDL column list (`a INT, b STRING NOT NULL,
c DECIMAL(10,2), d ARRAY<STRING>, e STRUCT<x: INT, y: MAP<STRING, DOUBLE>>`) or Delta's JSON
schema, parsed into a `StructType` (used by `tahoe create --schema` and `Table.create`).

Type names follow Spark SQL: INT/INTEGER, BIGINT/LONG, SMALLINT/SHORT, TINYINT/BYTE, FLOAT/REAL,
DOUBLE, BOOLEAN, STRING/VARCHAR(n)/CHAR(n), BINARY, DATE, TIMESTAMP, TIMESTAMP_NTZ,
DECIMAL(p,s)/NUMERIC, ARRAY<T>, MAP<K,V>, STRUCT<name: T, ...>. Column names may be quoted with
backticks. A column may end with NOT NULL and COMMENT '...'.
"""

from __future__ import annotations

import re

from ..errors import SchemaError
from ..protocol.schema import (
    GeoType,
    ArrayType, DataType, DecimalType, MapType, PrimitiveType, StructField, StructType,
)

__all__ = ["parse_ddl", "parse_schema"]

_PRIMS = {
    "int": "integer", "integer": "integer", "bigint": "long", "long": "long",
    "smallint": "short", "short": "short", "tinyint": "byte", "byte": "byte",
    "float": "float", "real": "float", "double": "double", "boolean": "boolean", "bool": "boolean",
    "string": "string", "binary": "binary", "date": "date", "timestamp": "timestamp",
    "timestamp_ltz": "timestamp", "timestamp_ntz": "timestamp_ntz", "void": "void",
}

_TOKEN = re.compile(r"\s*(`(?:[^`]|``)*`|'(?:[^'\\]|\\.)*'|[A-Za-z_][A-Za-z0-9_]*|\d+|[<>(),:]|\S)")


class _Tokens:
    def __init__(self, text: str):
        self.text = text
        self.items: list[str] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m or not m.group(1):
                break
            self.items.append(m.group(1))
            pos = m.end()
        self.i = 0

    def peek(self, k: int = 0) -> str | None:
        j = self.i + k
        return self.items[j] if j < len(self.items) else None

    def next(self) -> str:
        t = self.peek()
        if t is None:
            raise SchemaError(f"unexpected end of schema DDL: {self.text!r}")
        self.i += 1
        return t

    def expect(self, tok: str) -> None:
        t = self.next()
        if t.lower() != tok.lower():
            raise SchemaError(f"expected '{tok}' but found '{t}' in schema DDL {self.text!r}")

    def accept(self, tok: str) -> bool:
        t = self.peek()
        if t is not None and t.lower() == tok.lower():
            self.i += 1
            return True
        return False


def _name(tok: str) -> str:
    if tok.startswith("`"):
        return tok[1:-1].replace("``", "`")
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", tok):
        raise SchemaError(f"invalid column name '{tok}' (quote it with backticks)")
    return tok


def _type(ts: _Tokens) -> DataType:
    t = ts.next()
    low = t.lower()
    if low == "array":
        ts.expect("<")
        el = _type(ts)
        ts.expect(">")
        return ArrayType(el, True)
    if low == "map":
        ts.expect("<")
        k = _type(ts)
        ts.expect(",")
        v = _type(ts)
        ts.expect(">")
        return MapType(k, v, True)
    if low == "struct":
        ts.expect("<")
        fields = []
        if not ts.accept(">"):
            while True:
                name = _name(ts.next())
                ts.accept(":")
                fields.append(_field_rest(ts, name))
                if ts.accept(">"):
                    break
                ts.expect(",")
        return StructType(fields)
    if low in ("decimal", "dec", "numeric"):
        if ts.accept("("):
            p = int(ts.next())
            s = 0
            if ts.accept(","):
                s = int(ts.next())
            ts.expect(")")
            return DecimalType(p, s)
        return DecimalType(10, 0)
    if low in ("varchar", "char"):
        if ts.accept("("):
            ts.next()
            ts.expect(")")
        return PrimitiveType("string")
    if low in _PRIMS:
        return PrimitiveType(_PRIMS[low])
    if low in ("geometry", "geography"):   # Spark 4.1+: GEOMETRY(<srid>) / GEOGRAPHY(<srid>)
        srid = "4326"
        if ts.accept("("):
            srid = ts.next()
            ts.expect(")")
        if srid.lower() == "any":
            raise SchemaError(f"{t.upper()}(ANY) (mixed SRIDs) cannot be a Delta column type "
                              f"(delta-spark's DELTA_GEOSPATIAL_SRID_NOT_SUPPORTED)", error_class="DELTA_GEOSPATIAL_SRID_NOT_SUPPORTED")
        if not srid.isdigit():
            raise SchemaError(f"{t.upper()}({srid}): the SRID must be a number")
        crs = "OGC:CRS84" if srid == "4326" else "SRID:0" if srid == "0" else f"EPSG:{srid}"
        return GeoType(low, crs, "spherical" if low == "geography" else None)
    raise SchemaError(f"unknown data type '{t}' in schema DDL")


def _field_rest(ts: _Tokens, name: str) -> StructField:
    dt = _type(ts)
    nullable = True
    metadata: dict = {}
    while True:
        if ts.peek() is not None and ts.peek().lower() == "not" and (ts.peek(1) or "").lower() == "null":
            ts.i += 2
            nullable = False
        elif ts.accept("comment"):
            c = ts.next()
            if not c.startswith("'"):
                raise SchemaError(f"COMMENT needs a quoted string, got {c}")
            metadata["comment"] = c[1:-1].replace("\\'", "'")
        else:
            break
    return StructField(name, dt, nullable, metadata)


def parse_ddl(text: str) -> StructType:
    """A Spark-style column list → StructType (SchemaError on anything it cannot parse)."""
    ts = _Tokens(text)
    if not ts.items:
        raise SchemaError("empty schema DDL")
    fields = []
    while True:
        name = _name(ts.next())
        ts.accept(":")
        fields.append(_field_rest(ts, name))
        if ts.peek() is None:
            break
        ts.expect(",")
    return StructType(fields)


def parse_schema(text: str) -> StructType:
    """Delta JSON schema (starts with '{') or a DDL column list."""
    s = text.strip()
    if s.startswith("{"):
        return StructType.from_json(s)
    return parse_ddl(s)

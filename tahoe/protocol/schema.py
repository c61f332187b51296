"""Delta schema types (spec "Schema Serialization Format") and their mapping to Arrow.

Owns: the immutable type model — primitives, decimal, array, map, struct and fields — parsing it
from and serializing it to the exact JSON a `metaData.schemaString` holds (compact, field keys in
Spark's order name/type/nullable/metadata, so an unchanged schema round-trips byte for byte), the
conversion to and from Arrow types, and the two schema checks writers need: `merge_schemas`
(schema evolution, delta-spark's mergeSchema rules) and `check_write_compatible` (plain appends) —
and the one check readers need across versions, `is_read_compatible` (data written under one
schema read under another: change data feeds and streaming sources).

Column names compare case-insensitively wherever the table is matched against incoming data, as
in Spark; `StructType.field` is exact unless asked otherwise.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field as dc_field
from functools import cache
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from ..errors import SchemaError

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

# pyarrow (and tahoe.protocol.variant, which needs it) is imported by the Arrow conversions only:
# parsing and printing schemas (`tahoe describe`) stays free of it.

__all__ = [
    "DataType", "PrimitiveType", "DecimalType", "ArrayType", "MapType", "StructField",
    "StructType", "GeoType", "PRIMITIVE_NAMES", "parse_geo_type", "is_geo",
    "STRING", "LONG", "INTEGER", "SHORT", "BYTE", "FLOAT", "DOUBLE", "BOOLEAN", "BINARY", "DATE",
    "TIMESTAMP", "TIMESTAMP_NTZ", "VOID", "VARIANT",
    "parse_data_type", "to_arrow_type", "to_arrow_field", "to_arrow_schema", "from_arrow_type",
    "from_arrow_field", "from_arrow_schema",
    "merge_schemas", "check_write_compatible", "is_read_compatible", "is_type_widening", "record_type_changes", "is_integral", "is_numeric", "is_void", "check_column_names",
]

PRIMITIVE_NAMES = frozenset({
    "string", "long", "integer", "short", "byte", "float", "double", "boolean", "binary", "date",
    "timestamp", "timestamp_ntz", "void", "variant",
})

_DECIMAL_RE = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)$")
MAX_DECIMAL_PRECISION = 38


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


# --- types -------------------------------------------------------------------------------------

class DataType:
    """Base of every Delta data type."""

    def to_json_obj(self) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def simple_string(self) -> str:
        """Short readable form for messages: `integer`, `decimal(10,2)`, `array<string>`."""
        raise NotImplementedError  # pragma: no cover

    def __str__(self) -> str:
        return self.simple_string()


@dataclass(frozen=True)
class PrimitiveType(DataType):
    name: str

    def __post_init__(self) -> None:
        if self.name not in PRIMITIVE_NAMES:
            raise SchemaError(f"unknown primitive type '{self.name}'")

    def to_json_obj(self) -> str:
        return self.name

    def simple_string(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"PrimitiveType({self.name!r})"


@dataclass(frozen=True)
class DecimalType(DataType):
    precision: int = 10
    scale: int = 0

    def __post_init__(self) -> None:
        if not (1 <= self.precision <= MAX_DECIMAL_PRECISION):
            raise SchemaError(f"decimal precision {self.precision} is out of range 1..38")
        if not (0 <= self.scale <= self.precision):
            raise SchemaError(
                f"decimal scale {self.scale} is out of range 0..{self.precision} (precision)")

    def to_json_obj(self) -> str:
        return f"decimal({self.precision},{self.scale})"

    def simple_string(self) -> str:
        return self.to_json_obj()


@dataclass(frozen=True)
class ArrayType(DataType):
    element_type: DataType
    contains_null: bool = True

    def to_json_obj(self) -> dict:
        return {"type": "array", "elementType": self.element_type.to_json_obj(),
                "containsNull": self.contains_null}

    def simple_string(self) -> str:
        return f"array<{self.element_type.simple_string()}>"


@dataclass(frozen=True)
class MapType(DataType):
    key_type: DataType
    value_type: DataType
    value_contains_null: bool = True

    def to_json_obj(self) -> dict:
        return {"type": "map", "keyType": self.key_type.to_json_obj(),
                "valueType": self.value_type.to_json_obj(),
                "valueContainsNull": self.value_contains_null}

    def simple_string(self) -> str:
        return f"map<{self.key_type.simple_string()},{self.value_type.simple_string()}>"


@dataclass(frozen=True, eq=True)
class StructField:
    name: str
    type: DataType
    nullable: bool = True
    metadata: dict = dc_field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise SchemaError(f"field name must be a string, got {self.name!r}")
        if not isinstance(self.type, DataType):
            raise SchemaError(f"field '{self.name}' has no valid type: {self.type!r}")
        if self.metadata is None:
            object.__setattr__(self, "metadata", {})

    def __hash__(self) -> int:
        return hash((self.name, self.type, self.nullable, _dumps(self.metadata)))

    def to_json_obj(self) -> dict:
        return {"name": self.name, "type": self.type.to_json_obj(), "nullable": self.nullable,
                "metadata": self.metadata}

    def with_name(self, name: str) -> "StructField":
        return StructField(name, self.type, self.nullable, self.metadata)

    def with_type(self, type_: DataType) -> "StructField":
        return StructField(self.name, type_, self.nullable, self.metadata)

    def with_metadata(self, metadata: dict) -> "StructField":
        return StructField(self.name, self.type, self.nullable, metadata)

    def with_nullable(self, nullable: bool) -> "StructField":
        return StructField(self.name, self.type, nullable, self.metadata)


@dataclass(frozen=True, eq=True)
class StructType(DataType):
    fields: tuple[StructField, ...] = ()

    def __post_init__(self) -> None:
        fields = tuple(self.fields)
        for f in fields:
            if not isinstance(f, StructField):
                raise SchemaError(f"struct fields must be StructField, got {f!r}")
        object.__setattr__(self, "fields", fields)

    # -- JSON --
    def to_json_obj(self) -> dict:
        return {"type": "struct", "fields": [f.to_json_obj() for f in self.fields]}

    def to_json(self) -> str:
        """The schemaString form: compact JSON, as Spark writes it."""
        return _dumps(self.to_json_obj())

    @staticmethod
    def from_json(text: str) -> "StructType":
        """The schema a schemaString holds. Types are immutable: the same text gives the same
        object (the last few parsed are remembered — a writer parses its table's on every commit)."""
        if isinstance(text, str):
            return _struct_from_json(text)
        return _parse_struct_json(text)

    def simple_string(self) -> str:
        return "struct<" + ",".join(f"{f.name}:{f.type.simple_string()}" for f in self.fields) + ">"

    def to_arrow(self, as_large_types: bool = False) -> pa.Schema:
        """The Arrow schema (deltalake's `Schema.to_arrow`): with `as_large_types`, strings,
        binaries and lists as their large variants."""
        schema = to_arrow_schema(self)
        if as_large_types:
            import pyarrow as pa

            schema = pa.schema([f.with_type(large_arrow_type(f.type)) for f in schema])
        return schema

    # -- access --
    def __iter__(self) -> Iterator[StructField]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)

    def __getitem__(self, key: int | str) -> StructField:
        if isinstance(key, str):
            return self.field(key)
        return self.fields[key]

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def index_of(self, name: str, case_insensitive: bool = False) -> int:
        """Position of the named field, -1 when absent."""
        for i, f in enumerate(self.fields):
            if f.name == name:
                return i
        if case_insensitive:
            low = name.lower()
            for i, f in enumerate(self.fields):
                if f.name.lower() == low:
                    return i
        return -1

    def get(self, name: str, case_insensitive: bool = False) -> StructField | None:
        i = self.index_of(name, case_insensitive)
        return self.fields[i] if i >= 0 else None

    def field(self, name: str, case_insensitive: bool = False) -> StructField:
        f = self.get(name, case_insensitive)
        if f is None:
            raise SchemaError(f"column '{name}' not found; available columns: {self.names}")
        return f

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.index_of(name) >= 0

    def select(self, names: Iterable[str], case_insensitive: bool = False) -> "StructType":
        return StructType([self.field(n, case_insensitive) for n in names])

    def find_nested(self, path: list[str] | tuple[str, ...], case_insensitive: bool = False) -> StructField:
        """The field at `path` (names from the top level down). Arrays and maps are walked through
        with the pseudo-names `element`, `key` and `value`."""
        if not path:
            raise SchemaError("empty column path")
        current: DataType = self
        found: StructField | None = None
        for i, part in enumerate(path):
            where = ".".join(path[:i]) or "<root>"
            if isinstance(current, StructType):
                found = current.get(part, case_insensitive)
                if found is None:
                    raise SchemaError(f"column '{'.'.join(path)}' not found; available at "
                                      f"'{where}': {current.names}")
            elif isinstance(current, ArrayType) and part == "element":
                found = StructField("element", current.element_type, current.contains_null)
            elif isinstance(current, MapType) and part in ("key", "value"):
                found = (StructField("key", current.key_type, False) if part == "key" else
                         StructField("value", current.value_type, current.value_contains_null))
            else:
                raise SchemaError(f"column '{'.'.join(path)}' not found: '{where}' is "
                                  f"{current.simple_string()}")
            current = found.type
        assert found is not None
        return found

    def add(self, name: str, type_: DataType, nullable: bool = True, metadata: dict | None = None) -> "StructType":
        if self.index_of(name, case_insensitive=True) >= 0:
            raise SchemaError(f"column '{name}' already exists")
        return StructType(list(self.fields) + [StructField(name, type_, nullable, metadata or {})])


STRING = PrimitiveType("string")
LONG = PrimitiveType("long")
INTEGER = PrimitiveType("integer")
# --- geospatial types (tahoe.protocol.geospatial: the feature; tahoe.protocol.geoarrow: the Arrow type) -

ALGORITHMS = ("spherical", "vincenty", "thomas", "andoyer", "karney")
DEFAULT_CRS = "OGC:CRS84"

_GEO_RE = re.compile(r"^(geometry|geography)\s*(?:\((.*)\))?$", re.IGNORECASE | re.DOTALL)
_CRS_RE = re.compile(r"^[A-Za-z0-9_.\-]+:[A-Za-z0-9_.\-]+$")


@dataclass(frozen=True)
class GeoType(DataType):
    """A GEOMETRY (`kind` "geometry") or GEOGRAPHY column type: its CRS and, for geography, its
    edge interpolation algorithm (lower case). `text` is the schema string as read (written back
    unchanged); equality ignores how it was spelled."""

    kind: str
    crs: str = DEFAULT_CRS
    algorithm: str | None = None
    text: str | None = dc_field(default=None, compare=False)

    def to_json_obj(self) -> str:
        if self.text is not None:
            return self.text
        if self.kind == "geometry":
            return f"geometry({self.crs})"
        return f"geography({self.crs}, {(self.algorithm or 'spherical').upper()})"

    def simple_string(self) -> str:
        return self.to_json_obj()

    @property
    def srid(self) -> int | None:
        """The SRID Spark gives this CRS (`OGC:CRS84` → 4326, `EPSG:n` / `SRID:n` → n), None for
        other CRSs."""
        auth, _, code = self.crs.partition(":")
        if self.crs.upper() == "OGC:CRS84":
            return 4326
        if auth.upper() in ("EPSG", "SRID") and code.lstrip("-").isdigit():
            return int(code)
        return None

    def arrow_metadata(self) -> dict:
        out: dict[str, Any] = {"crs": self.crs}
        if self.kind == "geography":
            out["edges"] = self.algorithm or "spherical"
        return out


def _geo_metadata_of(serialized: bytes | None) -> dict:
    try:
        obj = json.loads(serialized or b"{}")
    except ValueError:
        return {}
    return obj if isinstance(obj, dict) else {}


def geo_type_from_arrow_metadata(serialized: bytes | None) -> GeoType:
    """The GeoType of `geoarrow.wkb` metadata (`crs` — a string, or Arrow's parquet reader's
    `{"crs": "0", "crs_type": "srid"}` —, `edges`); no `crs` means OGC:CRS84 (GeoArrow's default)."""
    md = _geo_metadata_of(serialized)
    crs = md.get("crs")
    if isinstance(crs, dict):      # PROJJSON: name it by its id when it has one
        ident = crs.get("id") or {}
        crs = f"{ident.get('authority')}:{ident.get('code')}" if ident.get("authority") else DEFAULT_CRS
    crs = str(crs) if crs not in (None, "") else DEFAULT_CRS
    if md.get("crs_type") == "srid" and ":" not in crs:
        crs = f"SRID:{crs}"
    edges = md.get("edges")
    if edges:
        return GeoType("geography", crs, str(edges).lower())
    return GeoType("geometry", crs)


def geo_type_of_arrow_field(f: "pa.Field") -> GeoType | None:
    """The GeoType of an Arrow field holding `geoarrow.wkb` — as an extension type, or as a binary
    field carrying the extension's metadata (an unregistered extension, as arrow-rs passes it)."""
    from .geoarrow import wkb_metadata

    md = wkb_metadata(f)
    return None if md is None else geo_type_from_arrow_metadata(md)


def is_geo(dt: Any) -> bool:
    return isinstance(dt, GeoType)


def parse_geo_type(text: str) -> GeoType | None:
    """The GeoType of a schema type string, None when the string is not a geospatial type;
    SchemaError for a geospatial type string that is malformed (no CRS, an unknown algorithm)."""
    m = _GEO_RE.match(text.strip())
    if m is None:
        return None
    kind = m.group(1).lower()
    args = [a.strip() for a in (m.group(2) or "").split(",")] if m.group(2) is not None else []
    if kind == "geometry":
        if len(args) != 1:
            raise SchemaError(f"geometry type '{text}' must name one CRS: geometry(<crs>)")
        crs, alg = args[0], None
    else:
        if len(args) != 2:
            raise SchemaError(f"geography type '{text}' must name a CRS and an edge interpolation "
                              f"algorithm: geography(<crs>, <algorithm>)")
        crs, alg = args[0], args[1].lower()
        if alg not in ALGORITHMS:
            raise SchemaError(f"geography type '{text}': unknown edge interpolation algorithm '{args[1]}' "
                              f"(one of {', '.join(ALGORITHMS)})")
    if not _CRS_RE.match(crs):
        raise SchemaError(f"{kind} type '{text}': '{crs}' is not a CRS (<authority>:<identifier>, srid:<n> or "
                          f"projjson:<tableProperty>)")
    return GeoType(kind, crs, alg, text)


SHORT = PrimitiveType("short")
BYTE = PrimitiveType("byte")
FLOAT = PrimitiveType("float")
DOUBLE = PrimitiveType("double")
BOOLEAN = PrimitiveType("boolean")
BINARY = PrimitiveType("binary")
DATE = PrimitiveType("date")
TIMESTAMP = PrimitiveType("timestamp")
TIMESTAMP_NTZ = PrimitiveType("timestamp_ntz")
VOID = PrimitiveType("void")
VARIANT = PrimitiveType("variant")

_INTEGRAL_RANK = {"byte": 1, "short": 2, "integer": 3, "long": 4}


def is_void(dt: DataType) -> bool:
    """The `void` (NullType) columns Spark may write: they hold no data and are never read."""
    return isinstance(dt, PrimitiveType) and dt.name == "void"


def is_integral(dt: DataType) -> bool:
    return isinstance(dt, PrimitiveType) and dt.name in _INTEGRAL_RANK


def is_numeric(dt: DataType) -> bool:
    return is_integral(dt) or isinstance(dt, DecimalType) or dt in (FLOAT, DOUBLE)


# --- JSON parsing ------------------------------------------------------------------------------

def _parse_struct_json(text) -> StructType:
    try:
        obj = json.loads(text)
    except (TypeError, ValueError) as e:
        raise SchemaError(f"schema is not valid JSON: {e}") from None
    dt = parse_data_type(obj)
    if not isinstance(dt, StructType):
        raise SchemaError(f"a table schema must be a struct, got {dt.simple_string()}")
    return dt


_struct_from_json = functools.lru_cache(maxsize=64)(_parse_struct_json)


def parse_data_type(obj: Any) -> DataType:
    """A Delta type from its JSON value (a type-name string, or an object for struct/array/map)."""
    if isinstance(obj, str):
        name = obj.strip()
        if name in PRIMITIVE_NAMES:
            return PrimitiveType(name)
        if name == "decimal":
            return DecimalType(10, 0)
        m = _DECIMAL_RE.match(name)
        if m:
            return DecimalType(int(m.group(1)), int(m.group(2)))
        geo = parse_geo_type(obj)
        if geo is not None:
            return geo
        raise SchemaError(f"unknown data type '{obj}'")
    if isinstance(obj, dict):
        kind = obj.get("type")
        try:
            if kind == "struct":
                fields = obj.get("fields")
                if not isinstance(fields, list):
                    raise SchemaError(f"struct type without a 'fields' list: {_dumps(obj)[:200]}")
                return StructType([_parse_field(f) for f in fields])
            if kind == "array":
                return ArrayType(parse_data_type(obj["elementType"]),
                                 _bool(obj.get("containsNull", True), "containsNull"))
            if kind == "map":
                return MapType(parse_data_type(obj["keyType"]), parse_data_type(obj["valueType"]),
                               _bool(obj.get("valueContainsNull", True), "valueContainsNull"))
        except KeyError as e:
            raise SchemaError(f"{kind} type is missing '{e.args[0]}': {_dumps(obj)[:200]}") from None
        if isinstance(kind, str) and kind not in ("struct", "array", "map"):
            # Spark serializes user-defined types as {"type": "udt", ...}; anything else is unknown.
            raise SchemaError(f"unknown data type '{kind}'")
        raise SchemaError(f"unknown data type {_dumps(obj)[:200]}")
    raise SchemaError(f"unknown data type {obj!r}")


def _bool(v: Any, what: str) -> bool:
    if not isinstance(v, bool):
        raise SchemaError(f"'{what}' must be a boolean, got {v!r}")
    return v


def _parse_field(obj: Any) -> StructField:
    if not isinstance(obj, dict):
        raise SchemaError(f"struct field must be an object, got {obj!r}")
    name = obj.get("name")
    if not isinstance(name, str):
        raise SchemaError(f"struct field without a name: {_dumps(obj)[:200]}")
    if "type" not in obj:
        raise SchemaError(f"field '{name}' has no type")
    metadata = obj.get("metadata")
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise SchemaError(f"field '{name}' has non-object metadata: {metadata!r}")
    try:
        dt = parse_data_type(obj["type"])
    except SchemaError as e:
        raise SchemaError(f"field '{name}': {e}") from None
    return StructField(name, dt, _bool(obj.get("nullable", True), f"{name}.nullable"), metadata)


# --- Arrow -------------------------------------------------------------------------------------

@cache
def _to_arrow_primitives() -> dict:
    import pyarrow as pa

    from . import variant as _variant

    return {
        "string": pa.string(), "long": pa.int64(), "integer": pa.int32(), "short": pa.int16(),
        "byte": pa.int8(), "float": pa.float32(), "double": pa.float64(), "boolean": pa.bool_(),
        "binary": pa.binary(), "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC"),
        "timestamp_ntz": pa.timestamp("us"), "void": pa.null(),
        # Parquet's variant encoding, a group of two required binaries (tahoe.protocol.variant)
        "variant": _variant.ARROW_TYPE,
    }


def to_arrow_type(dt: DataType) -> pa.DataType:
    import pyarrow as pa

    if isinstance(dt, PrimitiveType):
        return _to_arrow_primitives()[dt.name]
    if isinstance(dt, DecimalType):
        return pa.decimal128(dt.precision, dt.scale)
    if isinstance(dt, ArrayType):
        return pa.list_(pa.field("element", to_arrow_type(dt.element_type), nullable=dt.contains_null))
    if isinstance(dt, MapType):
        return pa.map_(pa.field("key", to_arrow_type(dt.key_type), nullable=False),
                       pa.field("value", to_arrow_type(dt.value_type), nullable=dt.value_contains_null))
    if isinstance(dt, StructType):
        return pa.struct([to_arrow_field(f) for f in dt.fields])
    if isinstance(dt, GeoType):
        from .geoarrow import wkb_type

        return wkb_type(json.dumps(dt.arrow_metadata(), separators=(",", ":")))
    raise SchemaError(f"cannot convert {dt!r} to an Arrow type")


def to_arrow_field(f: StructField, metadata: dict[bytes, bytes] | None = None) -> pa.Field:
    import pyarrow as pa

    return pa.field(f.name, to_arrow_type(f.type), nullable=f.nullable, metadata=metadata)


def to_arrow_schema(struct: StructType) -> pa.Schema:
    import pyarrow as pa

    return pa.schema([to_arrow_field(f) for f in struct.fields])


def large_arrow_type(t: pa.DataType) -> pa.DataType:
    """`t` with every string, binary and list (nested too) as its large variant."""
    import pyarrow as pa

    if pa.types.is_string(t):
        return pa.large_string()
    if pa.types.is_binary(t):
        return pa.large_binary()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(large_arrow_type(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(large_arrow_type(t.key_type)),
                       t.item_field.with_type(large_arrow_type(t.item_type)))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(large_arrow_type(f.type)) for f in t])
    return t


def from_arrow_type(t: pa.DataType) -> DataType:
    """The Delta type for an Arrow type. Unsigned integers widen to the next signed type (uint64
    cannot and raises); large/view strings and binaries map to string/binary; timestamps of every
    unit map to `timestamp` when they carry a time zone and `timestamp_ntz` when not."""
    import pyarrow as pa

    from . import variant as _variant

    T = pa.types
    if T.is_dictionary(t):
        return from_arrow_type(t.value_type)
    if isinstance(t, pa.BaseExtensionType):
        geo = geo_type_of_arrow_field(pa.field("_", t))
        return geo if geo is not None else from_arrow_type(t.storage_type)
    if T.is_null(t):
        return VOID
    if _variant.is_variant_type(t):
        return VARIANT
    if T.is_boolean(t):
        return BOOLEAN
    if T.is_int8(t):
        return BYTE
    if T.is_int16(t) or T.is_uint8(t):
        return SHORT
    if T.is_int32(t) or T.is_uint16(t):
        return INTEGER
    if T.is_int64(t) or T.is_uint32(t):
        return LONG
    if T.is_uint64(t):
        raise SchemaError("Arrow type uint64 has no Delta equivalent (long cannot hold it); "
                          "cast to int64 or decimal(20,0) first")
    if T.is_float16(t) or T.is_float32(t):
        return FLOAT
    if T.is_float64(t):
        return DOUBLE
    if T.is_string(t) or T.is_large_string(t) or _is(t, "is_string_view"):
        return STRING
    if T.is_binary(t) or T.is_large_binary(t) or T.is_fixed_size_binary(t) or _is(t, "is_binary_view"):
        return BINARY
    if T.is_date(t):
        return DATE
    if T.is_timestamp(t):
        return TIMESTAMP if t.tz is not None else TIMESTAMP_NTZ
    if T.is_decimal(t):
        if t.precision > MAX_DECIMAL_PRECISION:
            raise SchemaError(f"Arrow type {t} exceeds Delta's maximum decimal precision 38")
        return DecimalType(t.precision, t.scale)
    if T.is_list(t) or T.is_large_list(t) or T.is_fixed_size_list(t) or _is(t, "is_list_view") \
            or _is(t, "is_large_list_view"):
        vf = t.value_field
        return ArrayType(from_arrow_type(vf.type), vf.nullable)
    if T.is_map(t):
        return MapType(from_arrow_type(t.key_type), from_arrow_type(t.item_type), t.item_field.nullable)
    if T.is_struct(t):
        return StructType([from_arrow_field(t.field(i)) for i in range(t.num_fields)])
    raise SchemaError(f"Arrow type {t} has no Delta equivalent")


def _is(t: pa.DataType, pred: str) -> bool:
    import pyarrow as pa

    fn = getattr(pa.types, pred, None)
    return bool(fn and fn(t))


def from_arrow_field(f: pa.Field) -> StructField:
    from . import variant as _variant

    md = f.metadata or {}
    if md.get(b"ARROW:extension:name") in (b"arrow.parquet.variant", b"parquet.variant") \
            and _variant.is_variant_storage(f.type):
        return StructField(f.name, VARIANT, f.nullable, {})
    geo = geo_type_of_arrow_field(f)
    if geo is not None:
        return StructField(f.name, geo, f.nullable, {})
    try:
        dt = from_arrow_type(f.type)
    except SchemaError as e:
        raise SchemaError(f"column '{f.name}': {e}") from None
    return StructField(f.name, dt, f.nullable, {})


def from_arrow_schema(schema: pa.Schema) -> StructType:
    return StructType([from_arrow_field(f) for f in schema])


# --- writer checks -----------------------------------------------------------------------------

def _as_nullable(dt: DataType) -> DataType:
    if isinstance(dt, StructType):
        return StructType([StructField(f.name, _as_nullable(f.type), True, f.metadata) for f in dt.fields])
    if isinstance(dt, ArrayType):
        return ArrayType(_as_nullable(dt.element_type), True)
    if isinstance(dt, MapType):
        return MapType(_as_nullable(dt.key_type), _as_nullable(dt.value_type), True)
    return dt


def check_column_names(struct: StructType, where: str = "in the schema", prefix: str = "") -> None:
    """Refuse empty names and names that repeat case-insensitively, at every nesting level."""
    seen: dict[str, str] = {}
    for f in struct.fields:
        if not f.name:
            raise SchemaError(f"empty column name {where}" + (f" (inside '{prefix[:-1]}')" if prefix else ""))
        low = f.name.lower()
        if low in seen:
            raise SchemaError(f"duplicate column {where}: '{prefix}{seen[low]}' and '{prefix}{f.name}' "
                              f"(column names are case-insensitive)")
        seen[low] = f.name
        for inner in _nested_structs(f.type):
            check_column_names(inner, where, f"{prefix}{f.name}.")


def _nested_structs(dt: DataType) -> Iterator[StructType]:
    if isinstance(dt, StructType):
        yield dt
    elif isinstance(dt, ArrayType):
        yield from _nested_structs(dt.element_type)
    elif isinstance(dt, MapType):
        yield from _nested_structs(dt.key_type)
        yield from _nested_structs(dt.value_type)


def _fits_decimal(src: DataType, dst: DecimalType) -> bool:
    """Whether every value of `src` is exactly representable in `dst`."""
    if isinstance(src, DecimalType):
        return dst.scale >= src.scale and (dst.precision - dst.scale) >= (src.precision - src.scale)
    digits = {"byte": 3, "short": 5, "integer": 10, "long": 20}.get(getattr(src, "name", ""))
    return digits is not None and dst.precision - dst.scale >= digits


def _safe_upcast(src: DataType, dst: DataType) -> bool:
    """Whether data of type `src` can be written losslessly into a column of type `dst` (the
    writer casts). Used for appends without schema change."""
    if src == dst or src == VOID:
        return True
    if isinstance(dst, GeoType) and src == BINARY:   # WKB bytes into a geometry / geography column
        return True
    if dst == VARIANT and isinstance(src, StructType):   # variants as their untagged storage struct
        return sorted(src.names) == ["metadata", "value"] and all(f.type == BINARY for f in src.fields)
    if is_integral(src) and is_integral(dst):
        return _INTEGRAL_RANK[src.name] <= _INTEGRAL_RANK[dst.name]  # type: ignore[union-attr]
    if src == FLOAT and dst == DOUBLE:
        return True
    if is_integral(src) and dst == DOUBLE:
        return _INTEGRAL_RANK[src.name] <= 3  # type: ignore[union-attr]
    if isinstance(dst, DecimalType) and (isinstance(src, DecimalType) or is_integral(src)):
        return _fits_decimal(src, dst)
    return False


def is_type_widening(current: DataType, update: DataType) -> bool:
    """Whether changing a column from `current` to `update` is one of the spec's supported type
    changes ("Type Widening"): byte→short→int→long; float→double; byte/short/int→double;
    date→timestamp_ntz; decimal(p,s)→decimal(p+k1,s+k2) with k1≥k2≥0; byte/short/int→
    decimal(10+k1,k2) and long→decimal(20+k1,k2) with k1≥k2≥0 (what `ALTER TABLE ... ALTER COLUMN
    ... TYPE` may do)."""
    if current == update:
        return False
    if _auto_widening(current, update):
        return True
    if is_integral(current) and update == DOUBLE:
        return _INTEGRAL_RANK[current.name] <= 3  # type: ignore[union-attr]
    if is_integral(current) and isinstance(update, DecimalType):
        base = 20 if current.name == "long" else 10  # type: ignore[union-attr]
        k1, k2 = update.precision - base, update.scale
        return k1 >= k2 >= 0
    return False


def _auto_widening(current: DataType, update: DataType) -> bool:
    """Type changes the typeWidening feature applies automatically during schema evolution
    (integer→decimal/double widenings need a manual ALTER and are excluded, as in delta-spark)."""
    if is_integral(current) and is_integral(update):
        return _INTEGRAL_RANK[current.name] < _INTEGRAL_RANK[update.name]  # type: ignore[union-attr]
    if current == FLOAT and update == DOUBLE:
        return True
    if isinstance(current, DecimalType) and isinstance(update, DecimalType):
        k1 = update.precision - current.precision
        k2 = update.scale - current.scale
        return k1 >= k2 >= 0 and (k1, k2) != (0, 0)
    if current == DATE and update == TIMESTAMP_NTZ:
        return True
    return False


_SMALL_INTS = ("byte", "short", "integer")


def merge_schemas(table: StructType, incoming: StructType, *, allow_type_widening: bool = False,
                  keep_table_type: Callable[[DataType, DataType], bool] | None = None) -> StructType:
    """The table schema after writing data of schema `incoming` with schema evolution on (delta-spark's mergeSchema):

      1. columns match case-insensitively and keep the table's name, nullability and metadata; new columns,
         nullable, are appended at the end of their struct; arrays and maps merge element-wise;
      2. `void` merges with anything; byte/short/integer merge to the wider; decimals must match exactly;
      3. `allow_type_widening`: also byte/short/integer→long, float→double, decimal(p,s)→decimal(p+k1,s+k2)
         with k1≥k2≥0, date→timestamp_ntz;
      4. narrower incoming data that casts losslessly keeps the table type (delta-spark raises
         DELTA_MERGE_INCOMPATIBLE_DATATYPE; the writer casts), as does whatever `keep_table_type` accepts;
      5. anything else raises SchemaError naming the column and both types."""
    check_column_names(incoming, "in the data to write")

    def merge(current: DataType, update: DataType, path: str) -> DataType:
        if isinstance(current, StructType) and isinstance(update, StructType):
            p = f"{path}." if path else ""
            by_name = {f.name.lower(): f for f in update.fields}
            out = []
            for cf in current.fields:
                uf = by_name.pop(cf.name.lower(), None)
                if uf is None:
                    out.append(cf)
                else:
                    out.append(StructField(cf.name, merge(cf.type, uf.type, f"{p}{cf.name}"),
                                           cf.nullable, cf.metadata))
            current_names = {f.name.lower() for f in current.fields}
            for uf in update.fields:
                if uf.name.lower() not in current_names:
                    out.append(StructField(uf.name, _as_nullable(uf.type), True, uf.metadata))
            return StructType(out)
        if isinstance(current, ArrayType) and isinstance(update, ArrayType):
            return ArrayType(merge(current.element_type, update.element_type, f"{path}.element"),
                             current.contains_null)
        if isinstance(current, MapType) and isinstance(update, MapType):
            return MapType(merge(current.key_type, update.key_type, f"{path}.key"),
                           merge(current.value_type, update.value_type, f"{path}.value"),
                           current.value_contains_null)
        if current == update:
            return current
        if current == VOID:
            return _as_nullable(update)
        if update == VOID:
            return current
        if allow_type_widening and _auto_widening(current, update):
            return update
        if keep_table_type is not None and keep_table_type(current, update):
            return current
        if isinstance(current, DecimalType) and isinstance(update, DecimalType) \
                and not _safe_upcast(update, current):
            top = path.split(".")[0]
            raise SchemaError(
                f"Failed to merge fields '{top}' and '{top}'. cannot merge column '{path}': incompatible decimal types "
                f"{current.simple_string()} (table) and {update.simple_string()} (data)",
                error_class="DELTA_FAILED_TO_MERGE_FIELDS")
        if isinstance(current, PrimitiveType) and isinstance(update, PrimitiveType) \
                and current.name in _SMALL_INTS and update.name in _SMALL_INTS:
            return current if _INTEGRAL_RANK[current.name] >= _INTEGRAL_RANK[update.name] else update
        if _safe_upcast(update, current):
            return current
        top = path.split(".")[0]
        raise SchemaError(
            f"Failed to merge fields '{top}' and '{top}'. cannot merge column '{path}': incompatible types "
            f"{current.simple_string()} (table) and {update.simple_string()} (data)",
            error_class="DELTA_FAILED_TO_MERGE_FIELDS")

    result = merge(table, incoming, "")
    assert isinstance(result, StructType)
    return result


def check_write_compatible(table: StructType, incoming: StructType) -> None:
    """Raise SchemaError unless data of schema `incoming` can be appended to the table as is.

    Rules (Spark-like, case-insensitive names): the data may omit nullable columns (they are
    written as nulls) but not non-nullable ones; it may not add columns (that needs schema
    evolution, see `merge_schemas`); each column's type must equal the table's or cast to it
    losslessly (narrower integers, float→double, decimals that fit, void). Nullability of the data
    is not trusted and not checked here (NOT NULL is enforced on values, not on schemas)."""
    check_column_names(incoming, "in the data to write")

    def check(t: DataType, d: DataType, path: str) -> None:
        if isinstance(t, StructType) and isinstance(d, StructType):
            p = f"{path}." if path else ""
            tmap = {f.name.lower(): f for f in t.fields}
            extra = [f"{p}{f.name}" for f in d.fields if f.name.lower() not in tmap]
            if extra:
                raise SchemaError(
                    f"the data has columns the table does not: {extra}; table columns at "
                    f"'{path or '<root>'}': {t.names} (enable schema evolution to add them)")
            dmap = {f.name.lower(): f for f in d.fields}
            missing = [f"{p}{f.name}" for f in t.fields
                       if f.name.lower() not in dmap and not f.nullable]
            if missing:
                raise SchemaError(f"the data is missing non-nullable columns {missing}")
            for tf in t.fields:
                df = dmap.get(tf.name.lower())
                if df is not None:
                    check(tf.type, df.type, f"{p}{tf.name}")
            return
        if isinstance(t, ArrayType) and isinstance(d, ArrayType):
            check(t.element_type, d.element_type, f"{path}.element")
            return
        if isinstance(t, MapType) and isinstance(d, MapType):
            check(t.key_type, d.key_type, f"{path}.key")
            check(t.value_type, d.value_type, f"{path}.value")
            return
        if _safe_upcast(d, t):
            return
        e = SchemaError(
            f"column '{path}' has type {d.simple_string()} in the data but "
            f"{t.simple_string()} in the table")
        e.column = path.split(".")[0]   # the top-level column (delta-spark's DELTA_FAILED_TO_MERGE_FIELDS names it)
        raise e

    check(table, incoming, "")


def is_read_compatible(existing: StructType, read: StructType, forbid_tighten_nullability: bool = False) -> bool:
    """Whether data written under `existing` reads correctly under `read` (delta-spark's
    SchemaUtils.isReadCompatible): every column of `existing` is still in `read` (names compare
    case-insensitively but must then match exactly), with an equal type (nested structs by the
    same rule, arrays and maps element by element); columns only `read` has are fine (they read as
    null). Nullability: by default a column nullable in `existing` must stay nullable in `read`
    (`existing.nullable or not read.nullable`); with `forbid_tighten_nullability` — `read` is the
    later schema — it is the other way round (`read.nullable or not existing.nullable`)."""

    def nullable_ok(e: bool, r: bool) -> bool:
        return (r or not e) if forbid_tighten_nullability else (e or not r)

    def type_ok(e: DataType, r: DataType) -> bool:
        if isinstance(e, StructType) and isinstance(r, StructType):
            return struct_ok(e, r)
        if isinstance(e, ArrayType) and isinstance(r, ArrayType):
            return nullable_ok(e.contains_null, r.contains_null) and type_ok(e.element_type, r.element_type)
        if isinstance(e, MapType) and isinstance(r, MapType):
            return (nullable_ok(e.value_contains_null, r.value_contains_null) and type_ok(e.key_type, r.key_type)
                    and type_ok(e.value_type, r.value_type))
        return e == r

    def struct_ok(e: StructType, r: StructType) -> bool:
        by_name = {f.name.lower(): f for f in e.fields}
        if not set(by_name) <= {f.name.lower() for f in r.fields}:
            return False          # a column was dropped (or renamed)
        for rf in r.fields:
            ef = by_name.get(rf.name.lower())
            if ef is not None and not (ef.name == rf.name and nullable_ok(ef.nullable, rf.nullable)
                                       and type_ok(ef.type, rf.type)):
                return False
        return True

    return struct_ok(existing, read)


# --- type changes (spec "Type Widening") ------------------------------------------------------

TYPE_CHANGES = "delta.typeChanges"   # the field metadata key of a column's type change history

def _type_name(dt: DataType) -> Any:
    return dt.to_json_obj()


def record_type_changes(old: StructType, new: StructType) -> StructType:
    """`new` with every type change from `old` recorded in `delta.typeChanges` (spec "Type
    Widening"): on the nearest enclosing struct field, appended to its history, as
    `{"fromType", "toType"}` plus `fieldPath` ("element", "key", "value", dotted when nested)
    for array elements and map keys/values. Fields only in `new` carry no history."""

    def changes(o: DataType, n: DataType, path: str) -> list[dict]:
        if isinstance(o, StructType) or isinstance(n, StructType):
            return []          # a struct's own fields hold their changes
        if isinstance(o, ArrayType) and isinstance(n, ArrayType):
            return changes(o.element_type, n.element_type, f"{path}.element" if path else "element")
        if isinstance(o, MapType) and isinstance(n, MapType):
            return (changes(o.key_type, n.key_type, f"{path}.key" if path else "key")
                    + changes(o.value_type, n.value_type, f"{path}.value" if path else "value"))
        if o == n:
            return []
        change = {"fromType": _type_name(o), "toType": _type_name(n)}
        if path:
            change["fieldPath"] = path
        return [change]

    def nested(o: DataType, n: DataType) -> DataType:
        if isinstance(o, StructType) and isinstance(n, StructType):
            return walk(o, n)
        if isinstance(o, ArrayType) and isinstance(n, ArrayType):
            return ArrayType(nested(o.element_type, n.element_type), n.contains_null)
        if isinstance(o, MapType) and isinstance(n, MapType):
            return MapType(nested(o.key_type, n.key_type), nested(o.value_type, n.value_type),
                           n.value_contains_null)
        return n

    def walk(o: StructType, n: StructType) -> StructType:
        by_name = {f.name.lower(): f for f in o.fields}
        out = []
        for nf in n.fields:
            of = by_name.get(nf.name.lower())
            if of is None:
                out.append(nf)
                continue
            found = changes(of.type, nf.type, "")
            f = nf.with_type(nested(of.type, nf.type))
            if found:
                md = dict(f.metadata)
                history = md.get(TYPE_CHANGES)
                if isinstance(history, str):
                    history = json.loads(history)
                md[TYPE_CHANGES] = list(history or []) + found
                f = f.with_metadata(md)
            out.append(f)
        return StructType(out)

    return walk(old, new)

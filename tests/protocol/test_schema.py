"""Schema types: JSON round trip (every schemaString of the conformance tables, byte for byte),
Arrow conversion both ways, lookups, and the writer checks merge_schemas / check_write_compatible."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from tahoe.errors import SchemaError
from tahoe.protocol.schema import (
    BINARY, BOOLEAN, BYTE, DATE, DOUBLE, FLOAT, INTEGER, LONG, SHORT, STRING, TIMESTAMP,
    TIMESTAMP_NTZ, VARIANT, VOID, ArrayType, DecimalType, MapType, PrimitiveType, StructField,
    StructType, check_write_compatible, from_arrow_schema, from_arrow_type, merge_schemas,
    parse_data_type, to_arrow_schema, to_arrow_type,
)
from tests.conftest import GOLDEN, conformance_params


def _all_schema_strings() -> list[tuple[str, str]]:
    out = []
    for f in sorted(GOLDEN.glob("**/_delta_log/*.json")):
        for line in f.read_text().splitlines():
            if '"metaData"' not in line:
                continue
            md = json.loads(line).get("metaData") or {}
            if md.get("schemaString"):
                out.append((str(f.relative_to(GOLDEN)), md["schemaString"]))
    return out


SCHEMAS = _all_schema_strings()


def _strip_metadata(dt):
    if isinstance(dt, StructType):
        return StructType([StructField(f.name, _strip_metadata(f.type), f.nullable) for f in dt])
    if isinstance(dt, ArrayType):
        return ArrayType(_strip_metadata(dt.element_type), dt.contains_null)
    if isinstance(dt, MapType):
        return MapType(_strip_metadata(dt.key_type), _strip_metadata(dt.value_type), dt.value_contains_null)
    return dt


@pytest.mark.conformance
def test_conformance_has_schemas():
    assert len(SCHEMAS) > 90


@pytest.mark.parametrize("where,text", conformance_params(SCHEMAS, [w for w, _ in SCHEMAS], n=2))
def test_conformance_schema_round_trip(where, text):
    s = StructType.from_json(text)
    assert s.to_json() == text  # Spark's exact compact form
    assert StructType.from_json(s.to_json()) == s
    assert hash(StructType.from_json(text)) == hash(s)
    arrow = to_arrow_schema(s)
    assert arrow.names == s.names
    assert from_arrow_schema(arrow) == _strip_metadata(s)


def test_spec_example_schema():
    text = json.dumps({"type": "struct", "fields": [
        {"name": "a", "type": "integer", "nullable": False, "metadata": {}},
        {"name": "b", "type": {"type": "struct", "fields": [
            {"name": "d", "type": "integer", "nullable": False, "metadata": {}}]},
         "nullable": True, "metadata": {}},
        {"name": "c", "type": {"type": "array", "elementType": "integer", "containsNull": False},
         "nullable": True, "metadata": {}},
        {"name": "e", "type": {"type": "array", "elementType": {"type": "struct", "fields": [
            {"name": "d", "type": "integer", "nullable": False, "metadata": {}}]}, "containsNull": True},
         "nullable": True, "metadata": {}},
        {"name": "f", "type": {"type": "map", "keyType": "string", "valueType": "string",
                               "valueContainsNull": True}, "nullable": True, "metadata": {}},
    ]}, indent=2)
    s = StructType.from_json(text)
    assert s.names == ["a", "b", "c", "e", "f"]
    assert s["a"] == StructField("a", INTEGER, False)
    assert s["c"].type == ArrayType(INTEGER, False)
    assert s["f"].type == MapType(STRING, STRING, True)
    assert s.to_json() == json.dumps(json.loads(text), separators=(",", ":"))


def test_primitives_and_decimals():
    for name in ["string", "long", "integer", "short", "byte", "float", "double", "boolean", "binary",
                 "date", "timestamp", "timestamp_ntz", "void", "variant"]:
        t = parse_data_type(name)
        assert t == PrimitiveType(name) and t.to_json_obj() == name
    assert parse_data_type("decimal(10,2)") == DecimalType(10, 2)
    assert parse_data_type("decimal( 38 , 18 )") == DecimalType(38, 18)
    assert parse_data_type("decimal") == DecimalType(10, 0)
    assert DecimalType(5, 1).to_json_obj() == "decimal(5,1)"
    assert TIMESTAMP_NTZ.to_json_obj() == "timestamp_ntz"
    with pytest.raises(SchemaError, match="precision"):
        parse_data_type("decimal(39,0)")
    with pytest.raises(SchemaError, match="scale"):
        DecimalType(5, 6)


def test_unknown_types_are_named():
    with pytest.raises(SchemaError, match="'interval'"):
        parse_data_type("interval")
    with pytest.raises(SchemaError, match="'udt'"):
        parse_data_type({"type": "udt", "class": "x"})
    text = '{"type":"struct","fields":[{"name":"x","type":"geometry","nullable":true,"metadata":{}}]}'
    with pytest.raises(SchemaError, match="field 'x'.*'geometry'"):
        StructType.from_json(text)
    with pytest.raises(SchemaError):
        StructType.from_json("{not json")
    with pytest.raises(SchemaError, match="must be a struct"):
        StructType.from_json('"integer"')
    with pytest.raises(SchemaError):
        StructType.from_json('{"type":"array","containsNull":true}')


def test_metadata_round_trip_and_equality():
    md = {"delta.columnMapping.id": 5, "delta.columnMapping.physicalName": "col-x",
          "comment": "hi", "nested": {"a": [1, 2.5, None]}}
    s = StructType([StructField("a", LONG, True, md)])
    t = StructType.from_json(s.to_json())
    assert t == s and hash(t) == hash(s)
    assert t["a"].metadata == md
    assert s != StructType([StructField("a", LONG, True, {})])
    assert StructField("a", LONG) == StructField("a", LONG, True, {})
    assert len({STRING, PrimitiveType("string"), LONG}) == 2


def test_lookups():
    s = StructType([
        StructField("Id", LONG, False),
        StructField("s", StructType([StructField("x", INTEGER), StructField("Y", STRING)])),
        StructField("arr", ArrayType(StructType([StructField("z", DOUBLE)]))),
        StructField("m", MapType(STRING, StructType([StructField("v", DATE)]))),
    ])
    assert s.names == ["Id", "s", "arr", "m"]
    assert [f.name for f in s] == s.names and len(s) == 4
    assert "Id" in s and "id" not in s and 3 not in s
    assert s.index_of("s") == 1 and s.index_of("nope") == -1
    assert s.index_of("ID", case_insensitive=True) == 0
    assert s.field("id", case_insensitive=True).name == "Id"
    with pytest.raises(SchemaError, match=r"'nope'.*\['Id', 's', 'arr', 'm'\]"):
        s.field("nope")
    with pytest.raises(SchemaError):
        s.field("id")
    assert s.select(["m", "Id"]).names == ["m", "Id"]
    assert s.find_nested(["s", "Y"]).type == STRING
    assert s.find_nested(["S", "y"], case_insensitive=True).name == "Y"
    assert s.find_nested(["arr", "element", "z"]).type == DOUBLE
    assert s.find_nested(["m", "value", "v"]).type == DATE
    assert s.find_nested(["m", "key"]).type == STRING
    with pytest.raises(SchemaError, match="s.q"):
        s.find_nested(["s", "q"])
    with pytest.raises(SchemaError):
        s.find_nested(["Id", "x"])
    assert s.add("new", STRING).names[-1] == "new"
    with pytest.raises(SchemaError):
        s.add("ID", STRING)


def test_to_arrow_types():
    assert to_arrow_type(STRING) == pa.string()
    assert to_arrow_type(LONG) == pa.int64()
    assert to_arrow_type(INTEGER) == pa.int32()
    assert to_arrow_type(SHORT) == pa.int16()
    assert to_arrow_type(BYTE) == pa.int8()
    assert to_arrow_type(FLOAT) == pa.float32()
    assert to_arrow_type(DOUBLE) == pa.float64()
    assert to_arrow_type(BOOLEAN) == pa.bool_()
    assert to_arrow_type(BINARY) == pa.binary()
    assert to_arrow_type(DATE) == pa.date32()
    assert to_arrow_type(TIMESTAMP) == pa.timestamp("us", tz="UTC")
    assert to_arrow_type(TIMESTAMP_NTZ) == pa.timestamp("us")
    assert to_arrow_type(VOID) == pa.null()
    assert to_arrow_type(DecimalType(12, 3)) == pa.decimal128(12, 3)
    assert pa.types.is_struct(to_arrow_type(VARIANT))
    lt = to_arrow_type(ArrayType(INTEGER, False))
    assert lt.value_field.name == "element" and not lt.value_field.nullable
    mt = to_arrow_type(MapType(STRING, LONG, False))
    assert not mt.key_field.nullable and mt.item_field.name == "value" and not mt.item_field.nullable
    st = to_arrow_schema(StructType([StructField("a", INTEGER, False), StructField("b", STRING)]))
    assert not st.field("a").nullable and st.field("b").nullable


def test_from_arrow_types():
    assert from_arrow_type(pa.large_string()) == STRING
    assert from_arrow_type(pa.string_view()) == STRING
    assert from_arrow_type(pa.large_binary()) == BINARY
    assert from_arrow_type(pa.binary(16)) == BINARY
    for unit in ("s", "ms", "us", "ns"):
        assert from_arrow_type(pa.timestamp(unit)) == TIMESTAMP_NTZ
        assert from_arrow_type(pa.timestamp(unit, tz="America/Los_Angeles")) == TIMESTAMP
    assert from_arrow_type(pa.int8()) == BYTE and from_arrow_type(pa.int16()) == SHORT
    assert from_arrow_type(pa.int32()) == INTEGER and from_arrow_type(pa.int64()) == LONG
    assert from_arrow_type(pa.uint8()) == SHORT and from_arrow_type(pa.uint16()) == INTEGER
    assert from_arrow_type(pa.uint32()) == LONG
    with pytest.raises(SchemaError, match="uint64"):
        from_arrow_type(pa.uint64())
    assert from_arrow_type(pa.dictionary(pa.int32(), pa.string())) == STRING
    assert from_arrow_type(pa.null()) == VOID
    assert from_arrow_type(pa.date64()) == DATE
    assert from_arrow_type(pa.decimal256(20, 2)) == DecimalType(20, 2)
    with pytest.raises(SchemaError):
        from_arrow_type(pa.decimal256(40, 2))
    assert from_arrow_type(pa.large_list(pa.field("item", pa.int32(), nullable=False))) == ArrayType(INTEGER, False)
    assert from_arrow_type(pa.map_(pa.string(), pa.int64())) == MapType(STRING, LONG, True)
    with pytest.raises(SchemaError, match="'t'"):
        from_arrow_schema(pa.schema([pa.field("t", pa.time64("us"))]))
    s = from_arrow_schema(pa.schema([pa.field("a", pa.int32(), nullable=False),
                                     pa.field("s", pa.struct([pa.field("x", pa.string())]))]))
    assert s == StructType([StructField("a", INTEGER, False),
                            StructField("s", StructType([StructField("x", STRING)]))])


# --- merge_schemas -----------------------------------------------------------------------------

def S(*fields):
    return StructType(list(fields))


def F(name, t, nullable=True, md=None):
    return StructField(name, t, nullable, md or {})


def test_merge_adds_columns_at_the_end_recursively():
    table = S(F("id", LONG, False, {"comment": "k"}), F("s", S(F("a", INTEGER))))
    data = S(F("new", STRING, False), F("S", S(F("b", DATE), F("A", INTEGER))), F("ID", LONG))
    merged = merge_schemas(table, data)
    assert merged.names == ["id", "s", "new"]
    assert merged["id"] == F("id", LONG, False, {"comment": "k"})  # table's name/nullability/metadata
    assert merged["s"].type == S(F("a", INTEGER), F("b", DATE))
    assert merged["new"].nullable  # incoming nullability is not trusted


def test_merge_type_rules():
    assert merge_schemas(S(F("x", BYTE)), S(F("x", INTEGER)))["x"].type == INTEGER
    assert merge_schemas(S(F("x", INTEGER)), S(F("x", SHORT)))["x"].type == INTEGER
    assert merge_schemas(S(F("x", VOID)), S(F("x", DATE)))["x"].type == DATE
    assert merge_schemas(S(F("x", DATE)), S(F("x", VOID)))["x"].type == DATE
    # narrower data into a wider column keeps the table type (the writer casts)
    assert merge_schemas(S(F("x", LONG)), S(F("x", INTEGER)))["x"].type == LONG
    assert merge_schemas(S(F("x", DOUBLE)), S(F("x", FLOAT)))["x"].type == DOUBLE
    with pytest.raises(SchemaError, match=r"'x'.*integer.*long"):
        merge_schemas(S(F("x", INTEGER)), S(F("x", LONG)))
    with pytest.raises(SchemaError, match=r"'x'.*float.*double"):
        merge_schemas(S(F("x", FLOAT)), S(F("x", DOUBLE)))
    with pytest.raises(SchemaError, match=r"'s.y'.*string.*integer"):
        merge_schemas(S(F("s", S(F("y", STRING)))), S(F("s", S(F("y", INTEGER)))))
    with pytest.raises(SchemaError, match="decimal"):
        merge_schemas(S(F("d", DecimalType(10, 2))), S(F("d", DecimalType(12, 2))))
    with pytest.raises(SchemaError):
        merge_schemas(S(F("t", TIMESTAMP)), S(F("t", TIMESTAMP_NTZ)))


def test_merge_with_type_widening():
    w = dict(allow_type_widening=True)
    assert merge_schemas(S(F("x", INTEGER)), S(F("x", LONG)), **w)["x"].type == LONG
    assert merge_schemas(S(F("x", FLOAT)), S(F("x", DOUBLE)), **w)["x"].type == DOUBLE
    assert merge_schemas(S(F("d", DecimalType(10, 1))), S(F("d", DecimalType(12, 3))), **w)["d"].type == DecimalType(12, 3)
    assert merge_schemas(S(F("d", DATE)), S(F("d", TIMESTAMP_NTZ)), **w)["d"].type == TIMESTAMP_NTZ
    with pytest.raises(SchemaError):  # scale grows more than precision
        merge_schemas(S(F("d", DecimalType(10, 1))), S(F("d", DecimalType(11, 3))), **w)
    with pytest.raises(SchemaError):  # integer -> double is a manual change only
        merge_schemas(S(F("x", INTEGER)), S(F("x", DOUBLE)), **w)


def test_merge_arrays_maps_and_duplicates():
    table = S(F("a", ArrayType(S(F("x", INTEGER)), False)), F("m", MapType(STRING, S(F("v", LONG)))))
    data = S(F("a", ArrayType(S(F("x", INTEGER), F("y", STRING)), True)),
             F("m", MapType(STRING, S(F("v", LONG), F("w", DATE)))))
    merged = merge_schemas(table, data)
    assert merged["a"].type == ArrayType(S(F("x", INTEGER), F("y", STRING)), False)
    assert merged["m"].type.value_type.names == ["v", "w"]
    with pytest.raises(SchemaError, match="duplicate"):
        merge_schemas(table, S(F("q", INTEGER), F("Q", INTEGER)))


# --- check_write_compatible --------------------------------------------------------------------

def test_write_compatible():
    table = S(F("id", LONG, False), F("name", STRING), F("s", S(F("a", INTEGER), F("b", STRING))))
    check_write_compatible(table, table)
    check_write_compatible(table, S(F("ID", LONG)))  # nullable columns may be omitted
    check_write_compatible(table, S(F("id", INTEGER), F("s", S(F("a", SHORT)))))  # lossless upcasts
    check_write_compatible(table, S(F("id", LONG), F("name", VOID)))
    with pytest.raises(SchemaError, match=r"missing non-nullable.*'id'"):
        check_write_compatible(table, S(F("name", STRING)))
    with pytest.raises(SchemaError, match=r"'extra'.*\['id', 'name', 's'\]"):
        check_write_compatible(table, S(F("id", LONG), F("extra", STRING)))
    with pytest.raises(SchemaError, match=r"'s.c'"):
        check_write_compatible(table, S(F("id", LONG), F("s", S(F("c", STRING)))))
    with pytest.raises(SchemaError, match=r"'name'.*integer.*string"):
        check_write_compatible(table, S(F("id", LONG), F("name", INTEGER)))
    with pytest.raises(SchemaError, match=r"'id'.*double.*long"):
        check_write_compatible(table, S(F("id", DOUBLE)))
    with pytest.raises(SchemaError, match="duplicate"):
        check_write_compatible(table, S(F("id", LONG), F("Id", LONG)))
    dec = S(F("d", DecimalType(10, 2)))
    check_write_compatible(dec, S(F("d", DecimalType(8, 1))))
    with pytest.raises(SchemaError):
        check_write_compatible(dec, S(F("d", DecimalType(10, 3))))
    arr = S(F("a", ArrayType(LONG)))
    check_write_compatible(arr, S(F("a", ArrayType(INTEGER, False))))
    with pytest.raises(SchemaError, match=r"'a.element'"):
        check_write_compatible(arr, S(F("a", ArrayType(STRING))))


def test_check_column_names_refuses_empty_and_case_insensitive_duplicates_at_any_depth():
    from tahoe.errors import SchemaError
    from tahoe.protocol.schema import INTEGER, ArrayType, StructField, StructType, check_column_names

    check_column_names(StructType([StructField("a", INTEGER), StructField("b", INTEGER)]))
    with pytest.raises(SchemaError, match="duplicate column in the schema: 'a' and 'A'"):
        check_column_names(StructType([StructField("a", INTEGER), StructField("A", INTEGER)]))
    nested = StructType([StructField("s", ArrayType(StructType([StructField("x", INTEGER), StructField("X", INTEGER)])))])
    with pytest.raises(SchemaError, match="'s.x' and 's.X'"):
        check_column_names(nested)
    with pytest.raises(SchemaError, match="empty column name in the data to write"):
        check_column_names(StructType([StructField("", INTEGER)]), "in the data to write")

"""Column mapping: mode, physical names and ids, the physical schema checked against the data files
delta-spark wrote (names, Parquet field ids, and its own physical schema in the file footer), and
the writer operations assign_ids / rename_column / drop_column."""

from __future__ import annotations

import io
import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tahoe.errors import SchemaError
from tahoe.protocol import column_mapping as cm
from tahoe.protocol.schema import (
    DATE, INTEGER, LONG, STRING, ArrayType, MapType, StructField, StructType, to_arrow_schema,
)
from tests.conftest import GOLDEN

MAPPED_TABLES = [
    "table-with-columnmapping-mode-name", "table-with-columnmapping-mode-id",
    "data-skipping-basic-stats-all-types-columnmapping-name",
    "data-skipping-basic-stats-all-types-columnmapping-id",
    "data-reader-timestamp_ntz-id-mode", "data-reader-timestamp_ntz-name-mode", "dv-with-columnmapping",
]


def _meta(table: str) -> dict:
    meta = None
    for f in sorted((GOLDEN / table / "delta" / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            if '"metaData"' in line:
                meta = json.loads(line)["metaData"]
    assert meta is not None
    return meta


def _data_files(table: str):
    return sorted(p for p in (GOLDEN / table / "delta").rglob("*.parquet") if "_delta_log" not in p.parts)


def _ids_and_names(t: pa.DataType | pa.Schema, out: list, prefix=""):
    fields = list(t) if isinstance(t, pa.Schema) else [t.field(i) for i in range(t.num_fields)]
    for f in fields:
        fid = (f.metadata or {}).get(b"PARQUET:field_id")
        out.append((prefix + f.name, fid))
        ft = f.type
        while pa.types.is_list(ft) or pa.types.is_map(ft):
            ft = ft.value_type if pa.types.is_list(ft) else ft.item_type
        if pa.types.is_struct(ft):
            _ids_and_names(ft, out, prefix + f.name + ".")
    return out


def test_mode():
    assert cm.mode({}) == "none" and cm.mode(None) == "none"
    assert cm.mode({"delta.columnMapping.mode": "name"}) == "name"
    assert cm.mode({"delta.columnMapping.mode": "ID"}) == "id"
    assert cm.mode({"delta.columnMapping.mode": "none"}) == "none"
    with pytest.raises(SchemaError, match="'bogus'"):
        cm.mode({"delta.columnMapping.mode": "bogus"})


def test_physical_name_and_id():
    f = StructField("a", LONG, True, {"delta.columnMapping.id": 7, "delta.columnMapping.physicalName": "col-x"})
    assert cm.physical_name(f) == "col-x" and cm.field_id(f) == 7
    g = StructField("b", LONG)
    assert cm.physical_name(g) == "b" and cm.field_id(g) is None
    assert cm.field_id(StructField("c", LONG, True, {"delta.columnMapping.id": "12"})) == 12
    with pytest.raises(SchemaError):
        cm.field_id(StructField("c", LONG, True, {"delta.columnMapping.id": "x"}))


@pytest.mark.conformance
@pytest.mark.parametrize("table", MAPPED_TABLES)
def test_physical_schema_matches_data_files(table):
    meta = _meta(table)
    mode = cm.mode(meta["configuration"])
    assert mode in ("name", "id")
    logical = StructType.from_json(meta["schemaString"])
    data_schema = StructType([f for f in logical if f.name not in meta["partitionColumns"]])
    physical = cm.to_physical_schema(data_schema, mode)
    arrow = cm.physical_arrow_schema(data_schema, mode)
    files = _data_files(table)
    assert files
    for path in files:
        pf = pq.ParquetFile(path)
        # delta-spark stores the physical schema it wrote with in the footer: ours is identical
        spark_schema = StructType.from_json(pf.metadata.metadata[b"org.apache.spark.sql.parquet.row.metadata"].decode())
        assert spark_schema == physical
        assert spark_schema.to_json() == physical.to_json()
        # same physical names and Parquet field ids, nested ones included
        assert _ids_and_names(pf.schema_arrow, []) == _ids_and_names(arrow, [])
    # partition values and stats are keyed by physical names
    names = cm.logical_to_physical_names(logical, mode)
    adds = [json.loads(l)["add"] for f in sorted((GOLDEN / table / "delta" / "_delta_log").glob("*.json"))
            for l in f.read_text().splitlines() if '"add"' in l]
    for add in adds:
        assert set(add["partitionValues"]) == {names[c] for c in meta["partitionColumns"]}
        if add.get("stats"):
            stats = json.loads(add["stats"])
            assert set(stats.get("nullCount", {})) <= {names[f.name] for f in data_schema}


@pytest.mark.conformance
def test_name_mode_physical_schema_details():
    logical = StructType.from_json(_meta("table-with-columnmapping-mode-name")["schemaString"])
    phys = cm.to_physical_schema(logical, "name")
    f0 = phys.fields[0]
    assert f0.name == "col-363f6bf7-76d9-42ca-9a0b-ad043e4776db"
    assert f0.metadata == {"delta.columnMapping.id": 1,
                           "delta.columnMapping.physicalName": "col-363f6bf7-76d9-42ca-9a0b-ad043e4776db",
                           "parquet.field.id": 1}
    nested = phys.find_nested(["col-bd5b1c73-a03c-4003-9f20-87824bdc7bdf", "col-eaa68779-506e-4105-96f2-5ffa36e49460"])
    assert nested.metadata["parquet.field.id"] == 15
    assert cm.to_physical_schema(logical, "none") is logical
    assert cm.logical_to_physical_names(logical, "none")["ByteType"] == "ByteType"
    assert cm.logical_to_physical_names(logical, "name")["ByteType"] == "col-363f6bf7-76d9-42ca-9a0b-ad043e4776db"
    assert cm.max_field_id(logical) == 24


def test_physical_schema_requires_metadata():
    s = StructType([StructField("a", LONG)])
    with pytest.raises(SchemaError, match="'a'.*physicalName"):
        cm.to_physical_schema(s, "name")
    s2 = StructType([StructField("a", LONG, True, {"delta.columnMapping.physicalName": "p"})])
    assert cm.to_physical_schema(s2, "name").names == ["p"]
    with pytest.raises(SchemaError, match="'a'.*columnMapping.id"):
        cm.to_physical_schema(s2, "id")
    with pytest.raises(SchemaError):
        cm.to_physical_schema(s2, "weird")


def test_assign_ids_recursive_and_stable():
    s = StructType([
        StructField("keep", LONG, True, {"delta.columnMapping.id": 3, "delta.columnMapping.physicalName": "col-keep"}),
        StructField("a", StructType([StructField("x", INTEGER)])),
        StructField("arr", ArrayType(StructType([StructField("y", STRING)]))),
        StructField("m", MapType(STRING, StructType([StructField("z", DATE)]))),
    ])
    out, max_id = cm.assign_ids(s, 2)
    assert max_id == 3 + 6  # a, x, arr, y, m, z
    fields = [out["keep"], out["a"], out["a"].type["x"], out["arr"], out["arr"].type.element_type["y"],
              out["m"], out["m"].type.value_type["z"]]
    ids = [cm.field_id(f) for f in fields]
    assert ids[0] == 3 and sorted(ids[1:]) == list(range(4, 10))
    assert out["keep"].metadata["delta.columnMapping.physicalName"] == "col-keep"
    for f in fields[1:]:
        assert re.fullmatch(r"col-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}",
                            cm.physical_name(f))
    assert len({cm.physical_name(f) for f in fields}) == len(fields)
    # idempotent: nothing left to assign
    again, max2 = cm.assign_ids(out, max_id)
    assert again == out and max2 == max_id
    # ids never go below the recorded maximum
    _, m3 = cm.assign_ids(StructType([StructField("n", LONG)]), 50)
    assert m3 == 51
    legacy, _ = cm.assign_ids(StructType([StructField("Old", LONG)]), 0, physical_names_from_logical=True)
    assert cm.physical_name(legacy["Old"]) == "Old"


def test_id_mode_field_ids_written_and_read_by_pyarrow():
    logical, _ = cm.assign_ids(StructType([
        StructField("id", LONG), StructField("s", StructType([StructField("v", STRING)])),
    ]), 0)
    schema = cm.physical_arrow_schema(logical, "id")
    t = pa.table({schema.field(0).name: pa.array([1, 2], pa.int64()),
                  schema.field(1).name: pa.array([{schema.field(1).type.field(0).name: "a"}, None],
                                                 schema.field(1).type)}, schema=schema)
    buf = io.BytesIO()
    pq.write_table(t, buf)
    back = pq.ParquetFile(io.BytesIO(buf.getvalue()))
    assert _ids_and_names(back.schema_arrow, []) == [
        (cm.physical_name(logical["id"]), b"1"),
        (cm.physical_name(logical["s"]), b"2"),
        (cm.physical_name(logical["s"]) + "." + cm.physical_name(logical["s"].type["v"]), b"3"),
    ]
    assert "field_id=3" in str(back.schema)
    # without column mapping: logical names, no ids
    plain = cm.physical_arrow_schema(StructType([StructField("id", LONG)]), "none")
    assert plain == to_arrow_schema(StructType([StructField("id", LONG)])) and plain.field(0).metadata is None


def test_rename_and_drop_keep_physical_names():
    logical, max_id = cm.assign_ids(StructType([
        StructField("a", LONG), StructField("s", StructType([StructField("x", INTEGER), StructField("y", STRING)])),
    ]), 0)
    phys_before = cm.to_physical_schema(logical, "name")
    renamed = cm.rename_column(logical, "a", "b")
    assert renamed.names == ["b", "s"]
    assert renamed["b"].metadata == logical["a"].metadata
    renamed2 = cm.rename_column(renamed, ["s", "x"], "xx")
    assert renamed2["s"].type.names == ["xx", "y"]
    assert cm.to_physical_schema(renamed2, "name") == phys_before  # data files untouched
    with pytest.raises(SchemaError, match="already exists"):
        cm.rename_column(logical, "a", "S")
    assert cm.rename_column(logical, "a", "A").names == ["A", "s"]  # case change of itself is fine
    with pytest.raises(SchemaError, match="'q'"):
        cm.rename_column(logical, "q", "z")
    dropped = cm.drop_column(logical, "s.y")
    assert dropped["s"].type.names == ["x"]
    assert cm.physical_name(dropped["s"].type["x"]) == cm.physical_name(logical["s"].type["x"])
    assert cm.drop_column(logical, "a").names == ["s"]
    with pytest.raises(SchemaError, match="only column"):
        cm.drop_column(dropped, "s.x")
    with pytest.raises(SchemaError, match="only column"):
        cm.drop_column(cm.drop_column(logical, "a"), "s")
    with pytest.raises(SchemaError, match="column mapping"):
        cm.rename_column(StructType([StructField("a", LONG), StructField("b", LONG)]), "a", "c")
    with pytest.raises(SchemaError, match="column mapping"):
        cm.drop_column(StructType([StructField("a", LONG), StructField("b", LONG)]), "a")


def test_assign_ids_for_table_advances_max_column_id_only_with_mapping():
    from tahoe.protocol.column_mapping import MAX_COLUMN_ID_KEY, assign_ids_for_table, field_id
    from tahoe.protocol.schema import LONG, STRING, StructField, StructType

    schema = StructType([StructField("a", LONG), StructField("b", STRING)])
    same, conf = assign_ids_for_table(schema, {})
    assert same == schema and conf == {}
    mapped, conf = assign_ids_for_table(schema, {"delta.columnMapping.mode": "name", MAX_COLUMN_ID_KEY: "5"})
    assert [field_id(f) for f in mapped.fields] == [6, 7]
    assert conf[MAX_COLUMN_ID_KEY] == "7"

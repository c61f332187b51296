"""GEOMETRY / GEOGRAPHY columns without Spark (the `geospatial` table feature, delta-io/delta's
geospatial-types RFC): the schema strings Spark 4.1+ / delta-spark 4.4 write and the RFC's own
spelling, the Arrow form (`geoarrow.wkb` with `crs` / `edges`), the protocol a new table gets,
the parquet logical types tahoe writes, stats, and partitioning refused as delta-spark refuses it.

Oracles: the RFC's rules (reader 3 / writer 7, `geospatial` in both feature lists, WKB values),
PySpark's own JSON of its GeometryType / GeographyType (the schemaString delta-spark writes),
WKB bytes built by hand, the parquet footer read with pyarrow."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tahoe
from tahoe.errors import SchemaError
from tahoe.protocol import geospatial
from tahoe.protocol.schema import GeoType, StructType, from_arrow_schema, parse_data_type, to_arrow_type

# WKB (little-endian): 01, type 1 (Point), x, y as float64
P00 = bytes.fromhex("010100000000000000000000000000000000000000")
P11 = bytes.fromhex("0101000000000000000000F03F000000000000F03F")


@pytest.mark.parametrize("text, kind, crs, alg", [
    ("geometry(OGC:CRS84)", "geometry", "OGC:CRS84", None),          # Spark's GeometryType(4326).json()
    ("geometry(SRID:0)", "geometry", "SRID:0", None),                 # GeometryType(0)
    ("geometry(EPSG:3857)", "geometry", "EPSG:3857", None),
    ("geography(OGC:CRS84, SPHERICAL)", "geography", "OGC:CRS84", "spherical"),   # GeographyType(4326)
    ("geography(OGC:CRS84, spherical)", "geography", "OGC:CRS84", "spherical"),   # the RFC's spelling
    ("geography(EPSG:4326, vincenty)", "geography", "EPSG:4326", "vincenty"),
])
def test_schema_strings_parse_and_round_trip(text, kind, crs, alg):
    dt = parse_data_type(text)
    assert isinstance(dt, GeoType) and (dt.kind, dt.crs, dt.algorithm) == (kind, crs, alg)
    assert dt.to_json_obj() == text                       # written back as read
    schema = StructType.from_json(json.dumps({"type": "struct", "fields": [
        {"name": "g", "type": text, "nullable": True, "metadata": {}}]}))
    assert json.loads(schema.to_json())["fields"][0]["type"] == text


def test_spark_json_of_its_geo_types_parses():
    from pyspark.sql.types import GeographyType, GeometryType

    for spark_type in (GeometryType(4326), GeometryType(0), GeographyType(4326)):
        dt = parse_data_type(spark_type.jsonValue())
        assert isinstance(dt, GeoType) and dt.srid == spark_type.srid


@pytest.mark.parametrize("text", ["geometry(OGC:CRS84, SPHERICAL)", "geography(OGC:CRS84)",
                                  "geography(OGC:CRS84, flat)", "geometry(not a crs)"])
def test_malformed_geo_types_are_refused_by_name(text):
    with pytest.raises(SchemaError, match="geo"):
        parse_data_type(text)


def _geo_table():
    gt = to_arrow_type(GeoType("geometry", "OGC:CRS84"))
    gg = to_arrow_type(GeoType("geography", "OGC:CRS84", "spherical"))
    g0 = to_arrow_type(GeoType("geometry", "SRID:0"))
    return pa.table({"id": pa.array([1, 2, 3], pa.int64()),
                     "g": pa.ExtensionArray.from_storage(gt, pa.array([P00, P11, None])),
                     "gg": pa.ExtensionArray.from_storage(gg, pa.array([P11, None, P00])),
                     "g0": pa.ExtensionArray.from_storage(g0, pa.array([None, P00, P11]))})


def test_arrow_form_is_geoarrow_wkb():
    t = to_arrow_type(GeoType("geography", "OGC:CRS84", "spherical"))
    assert t.extension_name == "geoarrow.wkb" and t.storage_type == pa.binary()
    assert json.loads(t.__arrow_ext_serialize__()) == {"crs": "OGC:CRS84", "edges": "spherical"}
    # arrow-rs / an unregistered extension: a binary field carrying the extension's metadata
    f = pa.field("g", pa.binary(), metadata={b"ARROW:extension:name": b"geoarrow.wkb",
                                              b"ARROW:extension:metadata": b'{"crs":"SRID:0"}'})
    assert from_arrow_schema(pa.schema([f])).field("g").type == GeoType("geometry", "SRID:0")


def test_round_trip_without_spark(tmp_path):
    path = str(tmp_path / "geo")
    tahoe.write_table(path, _geo_table())
    log = [json.loads(line) for line in (tmp_path / "geo" / "_delta_log" / f"{0:020d}.json").read_text().splitlines()]
    protocol = next(a["protocol"] for a in log if "protocol" in a)
    assert protocol["minReaderVersion"] == 3 and protocol["minWriterVersion"] == 7
    assert "geospatial" in protocol["readerFeatures"] and "geospatial" in protocol["writerFeatures"]
    md = next(a["metaData"] for a in log if "metaData" in a)
    types = {f["name"]: f["type"] for f in json.loads(md["schemaString"])["fields"]}
    # the strings PySpark's own types serialize to (what delta-spark writes)
    from pyspark.sql.types import GeographyType, GeometryType
    assert types == {"id": "long", "g": GeometryType(4326).jsonValue(), "gg": GeographyType(4326).jsonValue(),
                     "g0": GeometryType(0).jsonValue()}
    add = next(a["add"] for a in log if "add" in a)
    stats = json.loads(add["stats"])
    assert stats["nullCount"] == {"id": 0, "g": 1, "gg": 1, "g0": 1}
    assert set(stats["minValues"]) == {"id"}           # no bounds for geo columns
    # Parquet's GEOMETRY / GEOGRAPHY logical types in the file
    pf = pq.ParquetFile(str(tmp_path / "geo" / add["path"]))
    logical = {pf.schema.column(i).name: str(pf.schema.column(i).logical_type) for i in range(4)}
    assert logical["g"].startswith("Geometry") and logical["gg"].startswith("Geography")
    assert "algorithm=spherical" in logical["gg"] and "SRID:0" in logical["g0"]
    out = tahoe.Table(path).to_arrow().sort_by("id")
    assert out.column("g").type.extension_name == "geoarrow.wkb"
    rows = {r["id"]: (r["g"], r["gg"], r["g0"]) for r in out.to_pylist()}
    assert rows == {1: (P00, P11, None), 2: (P11, None, P00), 3: (None, P00, P11)}
    # appending binary WKB (no extension type) to the table keeps the column's type
    tahoe.write_table(path, pa.table({"id": pa.array([4], pa.int64()), "g": pa.array([P11], pa.binary())}),
                      mode="append")
    assert tahoe.Table(path).to_arrow().num_rows == 4


def test_geo_partition_column_refused_with_delta_spark_class(tmp_path):
    with pytest.raises(SchemaError) as e:
        tahoe.write_table(str(tmp_path / "p"), _geo_table(), partition_by=["g"])
    assert e.value.error_class == "DELTA_INVALID_PARTITION_COLUMN_TYPE"
    assert str(e.value).startswith("[DELTA_INVALID_PARTITION_COLUMN_TYPE] Using column g of type ")
    assert str(e.value).endswith("as a partition column is not supported.")


def test_delta_rs_refuses_geo_tables(tmp_path):
    """delta-rs (deltalake 1.6) has no geospatial types yet (delta-kernel-rs issue 2427): its
    refusal is the documented state of the peer, so tahoe's tables are checked against the RFC
    and Spark here, not against delta-rs."""
    import deltalake

    path = str(tmp_path / "geo")
    tahoe.write_table(path, _geo_table())
    with pytest.raises(Exception, match="geometry"):
        deltalake.DeltaTable(path).to_pyarrow_table()


def test_ddl_types(tmp_path):
    from tahoe.txn.ddl import parse_schema

    s = parse_schema("id INT, g GEOMETRY(4326), h GEOMETRY(0), gg GEOGRAPHY(4326)")
    assert s.field("g").type == GeoType("geometry", "OGC:CRS84")
    assert s.field("h").type == GeoType("geometry", "SRID:0")
    assert s.field("gg").type == GeoType("geography", "OGC:CRS84", "spherical")
    with pytest.raises(SchemaError) as e:
        parse_schema("g GEOMETRY(ANY)")
    assert e.value.error_class == "DELTA_GEOSPATIAL_SRID_NOT_SUPPORTED"
    assert geospatial.EXTENSION_NAME == "geoarrow.wkb"

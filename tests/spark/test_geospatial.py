"""GEOMETRY / GEOGRAPHY columns on Spark (PySpark 4.3's GeometryType / GeographyType), classic and
over Spark Connect: create, write (format("delta"), write_delta, DeltaTable.create), read (native
scan and tahoe's data source), DELETE / UPDATE / MERGE, and tables crossing between Spark and the
Spark-free reader/writer.

Oracles: WKB bytes built by hand (as delta-spark's DeltaGeoSuite builds its points), Spark's own
ST_AsBinary / ST_Srid of what it reads, PySpark's own GeometryType / GeographyType, and the
geospatial RFC's protocol rules."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

import tahoe
from tahoe.protocol.schema import GeoType, to_arrow_type

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

P00 = "010100000000000000000000000000000000000000"
P11 = "0101000000000000000000F03F000000000000F03F"
P22 = "010100000000000000000000400000000000000040"


def _source(spark):
    return spark.sql(f"""SELECT CAST(id AS INT) AS id, g, gg FROM VALUES
        (1, ST_GeomFromWKB(X'{P00}', 4326), ST_GeogFromWKB(X'{P11}')),
        (2, ST_GeomFromWKB(X'{P11}', 4326), NULL),
        (3, NULL, ST_GeogFromWKB(X'{P22}')) AS t(id, g, gg)""")


def _wkb_rows(df) -> dict:
    rows = df.selectExpr("id", "hex(ST_AsBinary(g)) AS g", "hex(ST_AsBinary(gg)) AS gg", "ST_Srid(g) AS s").collect()
    return {r["id"]: (r["g"], r["gg"], r["s"] if r["g"] is not None else None) for r in rows}


def _protocol(path) -> dict:
    import glob
    import os

    first = sorted(glob.glob(os.path.join(path, "_delta_log", "*.json")))[0]
    return next(json.loads(x)["protocol"] for x in open(first) if '"protocol"' in x)


def test_geo_round_trip_classic(spark, tmp_path):
    from pyspark.sql.types import GeographyType, GeometryType

    from tahoe.spark import DeltaTable
    from tahoe.spark.calls import NATIVE_READ_CONF

    path = str(tmp_path / "geo")
    _source(spark).write.format("delta").save(path)
    p = _protocol(path)
    assert (p["minReaderVersion"], p["minWriterVersion"]) == (3, 7) and "geospatial" in p["readerFeatures"]
    df = spark.read.format("delta").load(path)
    assert [f.dataType for f in df.schema.fields[1:]] == [GeometryType(4326), GeographyType(4326)]
    want = {1: (P00, P11, 4326), 2: (P11, None, 4326), 3: (None, P22, None)}
    assert _wkb_rows(df) == want
    spark.conf.set(NATIVE_READ_CONF, "false")            # tahoe's data source: Arrow ↔ Spark's struct form
    try:
        assert _wkb_rows(spark.read.format("delta").load(path)) == want
    finally:
        spark.conf.unset(NATIVE_READ_CONF)
    # Spark-free reader: WKB as geoarrow.wkb
    t = tahoe.Table(path).to_arrow()
    assert t.schema.field("g").type.extension_name == "geoarrow.wkb"
    assert {r["id"]: (r["g"] and r["g"].hex().upper(), r["gg"] and r["gg"].hex().upper())
            for r in t.to_pylist()} == {k: v[:2] for k, v in want.items()}
    # DML
    dt = DeltaTable.forPath(spark, path)
    dt.delete("id = 2")
    dt.update("id = 1", {"g": f"ST_GeomFromWKB(X'{P22}', 4326)"})
    src = spark.sql(f"SELECT 3 AS id, ST_GeomFromWKB(X'{P11}', 4326) AS g, ST_GeogFromWKB(X'{P00}') AS gg "
                    f"UNION ALL SELECT 4, ST_GeomFromWKB(X'{P00}', 4326), NULL")
    dt.alias("t").merge(src.alias("s"), "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    assert _wkb_rows(spark.read.format("delta").load(path)) == {
        1: (P22, P11, 4326), 3: (P11, P00, 4326), 4: (P00, None, 4326)}


def test_spark_reads_and_writes_tables_written_without_spark(spark, tmp_path):
    from tahoe.spark import DeltaTable, write_delta

    path = str(tmp_path / "free")
    g0 = to_arrow_type(GeoType("geometry", "SRID:0"))
    tahoe.write_table(path, pa.table({"id": pa.array([1, 2], pa.int32()),
                                      "g": pa.ExtensionArray.from_storage(g0, pa.array([bytes.fromhex(P11), None]))}))
    df = spark.read.format("delta").load(path)
    assert [(r["id"], r["h"], r["s"]) for r in df.selectExpr("id", "hex(ST_AsBinary(g)) h", "ST_Srid(g) s")
            .orderBy("id").collect()] == [(1, P11, 0), (2, None, None)]
    write_delta(spark.sql(f"SELECT 3 AS id, ST_GeomFromWKB(X'{P22}', 0) AS g"), path, mode="append")
    assert sorted((r["id"], r["g"] and r["g"].hex().upper()) for r in tahoe.Table(path).to_arrow().to_pylist()) == \
        [(1, P11), (2, None), (3, P22)]
    # a table created with the builder's SQL types
    made = DeltaTable.create(spark).location(str(tmp_path / "made")).addColumn("id", "INT") \
        .addColumn("g", "GEOMETRY(4326)").addColumn("gg", "GEOGRAPHY(4326)").execute()
    from pyspark.sql.types import GeographyType, GeometryType
    assert [f.dataType for f in made.toDF().schema.fields[1:]] == [GeometryType(4326), GeographyType(4326)]
    assert "geospatial" in _protocol(str(tmp_path / "made"))["writerFeatures"]


def test_geo_partition_column_refused(spark, tmp_path):
    with pytest.raises(Exception) as e:
        _source(spark).write.format("delta").partitionBy("g").save(str(tmp_path / "p"))
    assert "[DELTA_INVALID_PARTITION_COLUMN_TYPE] Using column g of type" in str(e.value)


def test_geo_round_trip_connect(connect, tmp_path):
    from tahoe.spark import DeltaTable

    path = str(tmp_path / "geo")
    _source(connect).write.format("delta").save(path)
    assert _wkb_rows(connect.read.format("delta").load(path)) == {
        1: (P00, P11, 4326), 2: (P11, None, 4326), 3: (None, P22, None)}
    DeltaTable.forPath(connect, path).delete("id = 1")
    assert sorted(r["id"] for r in tahoe.Table(path).to_arrow().to_pylist()) == [2, 3]

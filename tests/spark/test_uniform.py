"""UniForm (Iceberg) with the Spark writers (write_delta and format("delta")): after each commit
pyiceberg reads the rows the test expects. Oracles: the expected rows, pyiceberg."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

UNIFORM = {"delta.enableIcebergCompatV2": "true", "delta.universalFormat.enabledFormats": "iceberg"}


def iceberg_rows(path):
    from pyiceberg.table import StaticTable

    from tahoe.uniform import latest_metadata_path

    t = StaticTable.from_metadata(latest_metadata_path(path)).scan().to_arrow()
    return sorted((r["id"], r["day"], r["amount"]) for r in t.to_pylist())


def _df(spark, ids, day):
    return spark.createDataFrame([(i, day, float(i) / 2) for i in ids], "id BIGINT, day STRING, amount DOUBLE")


def test_uniform_write_delta(spark, tmp_path):
    from tahoe.errors import IcebergCompatViolationError
    from tahoe.spark import write_delta

    path = str(tmp_path / "u")
    write_delta(_df(spark, range(5), "mon"), path, partition_by=["day"], properties=UNIFORM)
    expected = [(i, "mon", i / 2) for i in range(5)]
    assert iceberg_rows(path) == sorted(expected)
    write_delta(_df(spark, range(5, 8), "tue"), path, mode="append")
    expected += [(i, "tue", i / 2) for i in range(5, 8)]
    assert iceberg_rows(path) == sorted(expected)
    write_delta(_df(spark, [50], "mon"), path, mode="overwrite", replace_where="day = 'mon'")
    expected = [r for r in expected if r[1] != "mon"] + [(50, "mon", 25.0)]
    assert iceberg_rows(path) == sorted(expected)
    write_delta(_df(spark, [60, 61], "wed"), path, mode="overwrite")
    expected = [(60, "wed", 30.0), (61, "wed", 30.5)]
    assert iceberg_rows(path) == sorted(expected)
    # an Iceberg-incompatible write: a variant column — refused, nothing committed
    bad = spark.sql("SELECT CAST(1 AS BIGINT) AS id, 'x' AS day, 1.0D AS amount, parse_json('{}') AS v")
    import tahoe

    before = tahoe.Table(path).version
    with pytest.raises(IcebergCompatViolationError, match="UNSUPPORTED_DATA_TYPE"):
        write_delta(bad, path, mode="append", merge_schema=True)
    assert tahoe.Table(path).version == before
    assert iceberg_rows(path) == sorted(expected)


def test_uniform_datasource_writer(spark, tmp_path):
    path = str(tmp_path / "ds")
    w = _df(spark, range(3), "mon").write.format("delta").mode("overwrite").option("partitionBy", "day")
    for k, v in UNIFORM.items():
        w = w.option(k, v)
    w.save(path)
    expected = [(i, "mon", i / 2) for i in range(3)]
    assert iceberg_rows(path) == sorted(expected)
    _df(spark, [9], "tue").write.format("delta").mode("append").save(path)
    expected += [(9, "tue", 4.5)]
    assert iceberg_rows(path) == sorted(expected)
    _df(spark, [7], "sun").write.format("delta").mode("overwrite").save(path)
    assert iceberg_rows(path) == [(7, "sun", 3.5)]

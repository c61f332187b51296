"""Every conformance table through both Spark read paths, plus skipping."""

from __future__ import annotations

import pytest

from tests.conftest import GOLDEN, assert_rows_equal, manifest_params, read_expected

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


def _arrow(df):
    return df.toArrow()


@pytest.mark.parametrize("entry", manifest_params("rows"))
def test_fast_path(spark, entry):
    from tahoe.spark import read_delta

    df = read_delta(spark, str(GOLDEN / entry["table"]))
    assert_rows_equal(_arrow(df), read_expected(entry), entry["name"])


@pytest.mark.parametrize("entry", manifest_params("rows"))
def test_datasource_path(spark, entry):
    df = spark.read.format("delta").load(str(GOLDEN / entry["table"]))
    assert_rows_equal(_arrow(df), read_expected(entry), entry["name"])


def test_skipping_opens_few_files(spark, tmp_path):
    """A selective filter on a sorted column opens <= 10% of a 100-file table's files."""
    from pyspark.sql import functions as F

    from tahoe import Table
    from tahoe.spark import read_delta, write_delta

    path = str(tmp_path / "sorted")
    df = spark.range(0, 100_000, 1, 100).withColumn("v", F.col("id") * 2)
    write_delta(df, path)
    assert Table(path).snapshot.num_files == 100
    out = read_delta(spark, path, filters=["id >= 4200 and id < 4300"])
    assert len(out.inputFiles()) <= 10
    assert out.count() == 100
    out = read_delta(spark, path, filters=[F.col("id") == 99_999])
    assert len(out.inputFiles()) <= 10
    assert [r.v for r in out.collect()] == [199_998]
    # the data-source path skips with pushed-down filters too
    ds = spark.read.format("delta").load(path).filter("id = 7")
    assert [r.v for r in ds.collect()] == [14]


def test_partition_pruning_and_time_travel(spark, tmp_path):
    from tahoe.spark import DeltaTable, read_delta, write_delta

    path = str(tmp_path / "parts")
    df = spark.range(30).selectExpr("id", "cast(id % 3 as int) as p")
    write_delta(df, path, partition_by=["p"])
    write_delta(spark.range(5).selectExpr("id + 100 as id", "cast(9 as int) as p"), path)
    out = read_delta(spark, path, filters="p = 1")
    assert len(out.inputFiles()) >= 1
    assert all("p=1" in f for f in out.inputFiles())
    assert sorted(r.id for r in out.collect()) == list(range(1, 30, 3))
    assert read_delta(spark, path, version=0).count() == 30
    assert spark.read.format("delta").option("versionAsOf", 0).load(path).count() == 30
    assert spark.read.format("delta").load(path).count() == 35
    hist = DeltaTable.forPath(spark, path).history()
    assert [r.version for r in hist.collect()] == [1, 0]
    ts = hist.collect()[1].timestamp
    assert spark.read.format("delta").option("timestampAsOf", ts.isoformat()).load(path).count() == 30


def test_delta_table_api(spark, tmp_path):
    from tahoe.spark import DeltaTable, write_delta

    path = str(tmp_path / "api")
    write_delta(spark.range(10), path)
    dt = DeltaTable.forPath(spark, path)
    assert dt.toDF().count() == 10
    assert DeltaTable.isDeltaTable(spark, path)
    assert not DeltaTable.isDeltaTable(spark, str(tmp_path / "nope"))
    d = dt.detail().collect()[0]
    assert d.format == "delta" and d.numFiles >= 1 and d.location.endswith("api")
    h = dt.history(1).collect()
    assert len(h) == 1 and h[0].operation == "CREATE TABLE AS SELECT"
    a = dt.alias("t").toDF()
    assert a.select("t.id").count() == 10


_JOIN_TABLES = [p for p in manifest_params("rows")
                if p.values[0]["partition_columns"] or p.values[0]["deletion_vectors"]]


@pytest.mark.parametrize("entry", _JOIN_TABLES)
def test_fast_path_join_plan(spark, entry, monkeypatch):
    """The fallback plan (broadcast join on `_metadata.file_path`, used for many partitions or
    files of equal size) returns the same rows."""
    from tahoe.spark import read as R

    monkeypatch.setattr(R, "_MAX_UNION_GROUPS", 0)
    monkeypatch.setattr(R, "_unique_sizes", lambda paths: None)
    df = R.read_delta(spark, str(GOLDEN / entry["table"]))
    assert_rows_equal(_arrow(df), read_expected(entry), entry["name"])


def test_footer_stats_odd_names(spark, tmp_path):
    """Stats from parquet footers: nested, dotted and absent columns."""
    import json

    from tahoe import Table
    from tahoe.spark import read_delta, write_delta

    path = str(tmp_path / "odd")
    df = spark.sql("select id as `a.b`, named_struct('x', id, 'y.z', cast(id as string)) as s, "
                   "array(id) as arr, cast(null as int) as n from range(10)").coalesce(1)
    write_delta(df, path)
    st = json.loads(Table(path).files(["stats"]).column("stats")[0].as_py())
    assert st["numRecords"] == 10
    assert st["minValues"]["a.b"] == 0 and st["maxValues"]["a.b"] == 9
    assert st["minValues"]["s"]["y.z"] == "0" and st["nullCount"]["s"]["x"] == 0
    assert st["nullCount"]["n"] == 10 and st["nullCount"]["a.b"] == 0
    assert read_delta(spark, path, filters="`a.b` > 5").count() == 4

"""replaceWhere on data columns of a table with the change data feed on, on Spark: through
`format("delta")` (the data source; classic and Spark Connect) and `write_delta` (Spark jobs), the
commit's change data is delta-spark's — every replaced row a `delete`, every written row an
`insert`, the rows written again no change — read back through `readChangeFeed` and by delta-rs.

Oracles: rows derived by hand; deltalake's `load_cdf`."""

from __future__ import annotations

import pyarrow as pa
import pytest

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

WANT = sorted([(2, "b", "delete"), (3, "c", "delete"), (4, "d", "delete"),
               (2, "B", "insert"), (4, "D", "insert"), (40, "X", "insert")])


def _setup(spark, path):
    spark.sql("SELECT * FROM VALUES (1L, 'a'), (2L, 'b'), (3L, 'c') AS t(id, v)").write.format("delta") \
        .option("delta.enableChangeDataFeed", "true").save(path)
    spark.sql("SELECT * FROM VALUES (4L, 'd'), (5L, 'e'), (6L, 'f') AS t(id, v)").write.format("delta") \
        .mode("append").save(path)
    return spark.sql("SELECT * FROM VALUES (2L, 'B'), (4L, 'D'), (40L, 'X') AS t(id, v)")


def _check(spark, path):
    import deltalake

    rows = spark.read.format("delta").load(path).collect()
    assert sorted((r.id, r.v) for r in rows) == [(1, "a"), (2, "B"), (4, "D"), (5, "e"), (6, "f"), (40, "X")]
    cdf = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 2).load(path)
    assert sorted((r.id, r.v, r._change_type) for r in cdf.collect()) == WANT
    rs = pa.table(deltalake.DeltaTable(path).load_cdf(starting_version=2, ending_version=2).read_all())
    assert sorted((r["id"], r["v"], r["_change_type"]) for r in rs.to_pylist()) == WANT


@pytest.mark.parametrize("how", ["format", "write_delta"])
def test_replace_where_data_columns_with_cdf_classic(spark, tmp_path, how):
    from tahoe.spark import write_delta

    path = str(tmp_path / "t")
    new = _setup(spark, path)
    pred = "id >= 2 AND id < 5 OR id = 40"
    if how == "format":
        new.write.format("delta").mode("overwrite").option("replaceWhere", pred).save(path)
    else:
        write_delta(new, path, mode="overwrite", replace_where=pred)
    _check(spark, path)


def test_replace_where_data_columns_with_cdf_connect(connect, tmp_path):
    path = str(tmp_path / "t")
    new = _setup(connect, path)
    new.write.format("delta").mode("overwrite").option("replaceWhere", "id >= 2 AND id < 5 OR id = 40").save(path)
    _check(connect, path)

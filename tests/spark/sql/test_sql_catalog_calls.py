"""Delta tables by name through PySpark's catalog calls in an enabled session: saveAsTable (every
save mode), insertInto, df.writeTo(...) (create / append / overwrite / overwritePartitions /
createOrReplace / replace), spark.table and spark.read.table with time travel, DeltaTable.forName
and isDeltaTable, readStream.table -> writeStream.toTable, and registering an existing table with
CREATE TABLE ... LOCATION. Oracles: the rows written (by hand), the catalog's own entries, the
commits in the log, and delta-rs for the tables written."""

from __future__ import annotations

import pytest

from tahoe.log import DeltaLog
from tests.maintenance.helpers import delta_rs_read, rows

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


def _rows(df) -> list:
    return sorted(tuple(r) for r in df.collect())


def _location(spark, name: str) -> str:
    return spark.sql(f"DESCRIBE DETAIL {name}").collect()[0]["location"]


def _ops(path: str) -> list:
    return [e.commit_info.get("operation") for e in DeltaLog.for_table(path).history()][::-1]


def test_save_as_table_insert_into_and_reads_by_name(sql_spark, db, tmp_path):
    from pyspark.errors import AnalysisException

    from tahoe.spark import DeltaTable

    spark = sql_spark
    df = spark.createDataFrame([(1, "a"), (2, "b")], "id BIGINT, v STRING")
    df.write.format("delta").saveAsTable("t")                                          # creates (managed)
    path = _location(spark, "t")
    assert path.startswith(str(tmp_path / "db"))
    with pytest.raises(AnalysisException, match="ALREADY_EXISTS"):
        df.write.format("delta").saveAsTable("t")                                      # default mode: error
    df.write.format("delta").mode("ignore").saveAsTable("t")                           # nothing
    spark.createDataFrame([(3, "c")], "id BIGINT, v STRING").write.mode("append").saveAsTable("t")
    spark.createDataFrame([(4, "d")], "id BIGINT, v STRING").write.insertInto("t")
    assert _rows(spark.table("t")) == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]
    assert _rows(spark.read.option("versionAsOf", 0).table("t")) == [(1, "a"), (2, "b")]
    assert _rows(DeltaTable.forName(spark, "t").toDF()) == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]
    assert _rows(DeltaTable.forName(spark, f"{db}.t").toDF()) == _rows(spark.table("t"))
    assert DeltaTable.isDeltaTable(spark, f"{db}.t") and not DeltaTable.isDeltaTable(spark, f"{db}.nope")
    spark.createDataFrame([(9, "z")], "id BIGINT, v STRING").write.mode("overwrite").insertInto("t")
    assert _rows(spark.table("t")) == [(9, "z")]
    assert _ops(path) == ["CREATE TABLE AS SELECT", "WRITE", "WRITE", "WRITE"]
    (got,) = delta_rs_read([(path, None)], tmp_path)
    assert rows(got) == [(9, "z")]
    # not Delta: Spark's own tables stay Spark's
    spark.sql("CREATE TABLE plain (id INT) USING parquet")
    spark.sql("INSERT INTO plain VALUES (5)")
    assert _rows(spark.table("plain")) == [(5,)]
    with pytest.raises(AnalysisException, match="DELTA_MISSING_DELTA_TABLE"):
        DeltaTable.forName(spark, "plain")


def test_write_to_v2(sql_spark, db, tmp_path):
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    spark = sql_spark
    df = spark.createDataFrame([(1, "x", 10), (2, "y", 20)], "id BIGINT, p STRING, n INT")
    df.writeTo("w").using("delta").partitionedBy("p").tableProperty("delta.appendOnly", "false").create()
    path = _location(spark, "w")
    snap = DeltaLog.for_table(path).snapshot()
    assert list(snap.partition_columns) == ["p"] and snap.configuration["delta.appendOnly"] == "false"
    with pytest.raises(AnalysisException, match="ALREADY_EXISTS"):
        df.writeTo("w").using("delta").create()
    spark.createDataFrame([(3, "x", 30)], "id BIGINT, p STRING, n INT").writeTo("w").append()
    spark.createDataFrame([(4, "y", 40)], "id BIGINT, p STRING, n INT").writeTo("w").overwritePartitions()
    assert _rows(spark.table("w")) == [(1, "x", 10), (3, "x", 30), (4, "y", 40)]
    spark.createDataFrame([(5, "x", 50)], "id BIGINT, p STRING, n INT").writeTo("w").overwrite(F.col("p") == "x")
    assert _rows(spark.table("w")) == [(4, "y", 40), (5, "x", 50)]
    spark.createDataFrame([(6, 0.5)], "id BIGINT, score DOUBLE").writeTo("w").using("delta").createOrReplace()
    assert _rows(spark.table("w")) == [(6, 0.5)]
    assert list(DeltaLog.for_table(path).snapshot().partition_columns) == []
    assert _ops(path) == ["CREATE TABLE AS SELECT", "WRITE", "WRITE", "WRITE", "CREATE OR REPLACE TABLE AS SELECT"]
    (got,) = delta_rs_read([(path, None)], tmp_path)
    assert rows(got) == [(6, 0.5)]


def test_register_an_existing_table_and_stream_between_tables(sql_spark, db, tmp_path):
    from pyspark.errors import AnalysisException

    import pyarrow as pa

    import tahoe

    spark = sql_spark
    src = str(tmp_path / "src")
    tahoe.write_table(src, pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]}))
    with pytest.raises(AnalysisException, match="DELTA_CREATE_TABLE_SCHEME_MISMATCH"):
        spark.sql(f"CREATE TABLE src (id BIGINT, other STRING) USING delta LOCATION '{src}'")
    assert not spark.catalog.tableExists("src")
    spark.sql(f"CREATE TABLE src USING delta LOCATION '{src}'")             # the table's own schema
    assert DeltaLog.for_table(src).snapshot().version == 0                   # registering commits nothing
    assert [r["col_name"] for r in spark.sql("DESCRIBE TABLE src").collect()] == ["id", "v"]
    q = (spark.readStream.table("src").writeStream.format("delta")
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).toTable("sink"))
    q.awaitTermination(300)
    assert _rows(spark.table("sink")) == [(1, "a"), (2, "b"), (3, "c")]
    spark.sql("DROP TABLE src")                                               # external: the files stay
    assert DeltaLog.for_table(src).snapshot().version == 0

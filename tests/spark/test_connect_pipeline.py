"""A typical delta-spark pipeline over Spark Connect, end to end, with the one line a delta-spark
user changes (`from tahoe.spark import DeltaTable`): write, MERGE with Column conditions,
UPDATE / DELETE with Columns, history, OPTIMIZE, RESTORE, VACUUM, time travel, the change data
feed — every row derived by hand from the steps. The server is the test session's shared Spark
Connect server (tests/fixtures/connect.py)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


def test_delta_spark_pipeline_over_spark_connect(connect, tmp_path):
    from pyspark.sql.functions import col, lit

    from tahoe.spark import DeltaTable

    spark = connect
    path = str(tmp_path / "events")
    rows = lambda df: sorted((r.id, r.day, r.value) for r in df.collect())  # noqa: E731
    v0 = [(i, "mon" if i % 2 else "tue", i * 10) for i in range(1, 7)]
    spark.createDataFrame(v0, "id BIGINT, day STRING, value BIGINT").write.format("delta") \
        .partitionBy("day").option("delta.enableChangeDataFeed", "true").save(path)

    dt = DeltaTable.forPath(spark, path)
    source = spark.createDataFrame([(i, "mon" if i % 2 else "tue", -i) for i in range(5, 9)],
                                   "id BIGINT, day STRING, value BIGINT")
    merged = dt.alias("t").merge(source.alias("s"), (col("t.id") == col("s.id")) & (col("t.day") == col("s.day"))) \
        .whenMatchedUpdate(condition=col("s.value") < lit(0), set={"value": col("s.value")}) \
        .whenNotMatchedInsertAll().execute()
    assert [tuple(r) for r in merged.collect()] == [(4, 2, 0, 2)]     # affected, updated, deleted, inserted
    v1 = [r for r in v0 if r[0] < 5] + [(5, "mon", -5), (6, "tue", -6), (7, "mon", -7), (8, "tue", -8)]
    assert rows(dt.toDF()) == sorted(v1)

    updated = dt.update(col("id") == 1, {"value": col("value") + 1})
    assert [tuple(r) for r in updated.collect()] == [(1,)]            # Connect: delta-spark's DataFrame
    v2 = [(1, "mon", 11) if r[0] == 1 else r for r in v1]
    deleted = dt.delete(col("id") >= 7)
    assert [tuple(r) for r in deleted.collect()] == [(2,)]
    v3 = [r for r in v2 if r[0] < 7]
    assert rows(dt.toDF()) == sorted(v3)

    history = dt.history().select("version", "operation").collect()
    assert [(r.version, r.operation) for r in history] == [(3, "DELETE"), (2, "UPDATE"), (1, "MERGE"), (0, "WRITE")]
    assert dt.history(1).collect()[0].operationMetrics["numDeletedRows"] == "2"

    optimized = dt.optimize().executeCompaction().first()
    assert optimized.metrics.numFilesAdded == 2                         # one file per partition (mon, tue)
    assert rows(dt.toDF()) == sorted(v3)                                # v4: same rows

    assert rows(spark.read.format("delta").option("versionAsOf", 1).load(path)) == sorted(v1)
    changes = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 1) \
        .option("endingVersion", 3).load(path)
    got = sorted((r.id, r.value, r._change_type, r._commit_version) for r in changes.collect())
    assert got == sorted([(5, 50, "update_preimage", 1), (5, -5, "update_postimage", 1),
                          (6, 60, "update_preimage", 1), (6, -6, "update_postimage", 1),
                          (7, -7, "insert", 1), (8, -8, "insert", 1),
                          (1, 10, "update_preimage", 2), (1, 11, "update_postimage", 2),
                          (7, -7, "delete", 3), (8, -8, "delete", 3)])

    restored = dt.restoreToVersion(2).first()
    assert restored.num_restored_files >= 1
    assert rows(dt.toDF()) == sorted(v2)                                # v5: version 2's rows
    assert dt.history(1).collect()[0].operation == "RESTORE"
    assert dt.vacuum() is None                                          # delta-spark's Connect client: None
    assert rows(dt.toDF()) == sorted(v2)                                # nothing inside the retention removed
    assert rows(spark.read.format("delta").option("versionAsOf", 3).load(path)) == sorted(v3)

"""`_metadata.row_id` / `_metadata.row_commit_version` on `format("delta")` reads of a row-tracking
table, as delta-spark exposes them (spec "Row Tracking"): a fresh row's id is its file's
`baseRowId` + its position in the file and its commit version the file's
`defaultRowCommitVersion`; a row an UPDATE rewrote keeps its id (materialized in the new file)
and carries the UPDATE's version. Expected values derived by hand from the commits below."""

from __future__ import annotations

import pyarrow as pa
import pytest

import tahoe

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


def test_row_ids_and_commit_versions_through_format_delta(spark, tmp_path):
    from tahoe.spark import DeltaTable

    p = str(tmp_path / "t")
    tahoe.write_table(p, pa.table({"id": pa.array([10, 11, 12], pa.int64())}),
                      properties={"delta.enableRowTracking": "true"})                   # v0: ids 0, 1, 2
    tahoe.write_table(p, pa.table({"id": pa.array([13, 14], pa.int64())}), mode="append")   # v1: ids 3, 4
    tahoe.update(p, {"id": "id + 100"}, predicate="id = 11")                             # v2: row 1 rewritten
    df = spark.read.format("delta").load(p)
    assert df.columns == ["id"] and df.select("*").columns == ["id"]      # hidden, as Spark's own _metadata
    got = sorted(tuple(r) for r in df.select("id", "_metadata.row_id", "_metadata.row_commit_version").collect())
    assert got == [(10, 0, 0), (12, 2, 0), (13, 3, 1), (14, 4, 1), (111, 1, 2)]
    # through later projections, filters and SQL on the DataFrame; and DeltaTable.toDF()
    assert df.filter("id > 12").withColumn("x", df.id + 1).select("_metadata.row_id", "x").orderBy("x").collect() \
        == [(3, 14), (4, 15), (1, 112)]
    via_dt = DeltaTable.forPath(spark, p).toDF()
    assert sorted(tuple(r) for r in via_dt.select("id", "_metadata.row_id", "_metadata.row_commit_version").collect()) \
        == got
    # copy-on-write UPDATE (no deletion vectors): v0's file rewritten, its rows keeping ids and versions
    # (materialized), so two files remain — v1's and the rewrite
    assert df.select("_metadata.file_path").distinct().count() == 2


def test_a_table_without_row_tracking_has_no_row_ids(spark, tmp_path):
    from pyspark.errors import AnalysisException

    p = str(tmp_path / "t")
    tahoe.write_table(p, pa.table({"id": [1]}))
    with pytest.raises(AnalysisException):
        spark.read.format("delta").load(p).select("_metadata.row_id").collect()

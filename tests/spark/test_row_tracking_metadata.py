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


def test_row_metadata_over_connect_is_refused_naming_why(connect, tmp_path):
    """Over Spark Connect tahoe cannot add the hidden `_metadata` column (it is built through the
    classic session's JVM; Python data sources declare no metadata columns): asking for
    `_metadata.row_id` / `row_commit_version` fails with an error saying so — still an
    AnalysisException, as Spark's unresolved column is — instead of a bare UNRESOLVED_COLUMN.
    The table's columns read as on classic, and other unresolved columns keep Spark's error."""
    from pyspark.errors import AnalysisException

    from tahoe.errors import UnsupportedFeatureError

    p = str(tmp_path / "t")
    tahoe.write_table(p, pa.table({"id": pa.array([10, 11], pa.int64())}), properties={"delta.enableRowTracking": "true"})
    df = connect.read.format("delta").load(p)
    assert df.columns == ["id"] and sorted(r.id for r in df.collect()) == [10, 11]
    for field in ("row_id", "row_commit_version"):
        with pytest.raises(AnalysisException) as e:
            df.select("id", f"_metadata.{field}").collect()
        assert isinstance(e.value, UnsupportedFeatureError)
        msg = str(e.value)
        assert f"`_metadata.{field}` over Spark Connect" in msg and "classic SparkSession" in msg, msg
        assert e.value.getCondition().startswith("UNRESOLVED_COLUMN")
    with pytest.raises(AnalysisException) as e:
        df.select("no_such_column").collect()
    assert not isinstance(e.value, UnsupportedFeatureError) and "no_such_column" in str(e.value)

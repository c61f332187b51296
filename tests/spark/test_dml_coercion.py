"""Issue 35 on Spark: DELETE / UPDATE through delta-spark's API and SQL prune files with tahoe's
skipping engine (`write/dml_plan.candidate_files`) and Spark evaluates the rows — a file the
pruning dropped wrongly was a silent no-op. Tables one row per file; expected rows derived by
hand from Spark's own answers (see tests/write/test_dml_coercion.py). Failed on main."""

from __future__ import annotations

import pytest

from tests.write.test_dml_coercion import decimal_table, double_table

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


@pytest.fixture(scope="module")
def sql_session(spark):
    """A new session of the shared one with Delta's SQL enabled (the others stay as they were)."""
    import tahoe.spark

    s = spark.newSession()
    tahoe.spark.enable(s)
    return s


def _ids(spark, path):
    return sorted(r.id for r in spark.read.format("delta").load(path).collect())


def test_delete_decimal38_with_double_literal_on_spark(spark, sql_session, tmp_path):
    from tahoe.spark import DeltaTable

    api, sql = str(tmp_path / "api"), str(tmp_path / "sql")
    decimal_table(api)
    decimal_table(sql)
    DeltaTable.forPath(spark, api).delete("d = 0.3D")
    assert _ids(spark, api) == [2]
    r = sql_session.sql(f"DELETE FROM delta.`{sql}` WHERE d = 0.3D").collect()
    assert r[0]["num_affected_rows"] == 1
    assert _ids(spark, sql) == [2]


def test_update_double_with_decimal_literal_on_spark(spark, sql_session, tmp_path):
    from tahoe.spark import DeltaTable

    api, sql = str(tmp_path / "api"), str(tmp_path / "sql")
    double_table(api)
    double_table(sql)
    DeltaTable.forPath(spark, api).update("x <= 0.1", {"id": "id + 100"})
    assert _ids(spark, api) == [2, 101]
    r = sql_session.sql(f"UPDATE delta.`{sql}` SET id = id + 100 WHERE x <= 0.1").collect()
    assert r[0]["num_affected_rows"] == 1
    assert _ids(spark, sql) == [2, 101]

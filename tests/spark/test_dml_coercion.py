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


# --- over Spark Connect: the same DML, conditions as SQL strings, Columns and SQL statements ---------

def _float32_table(path: str) -> None:
    import pyarrow as pa

    import tahoe

    tahoe.write_table(path, pa.table({"id": pa.array([1, 2], pa.int64()),
                                      "f": pa.array([0.1, 0.05], pa.float32())}), target_file_rows=1)


def _bigint_table(path: str) -> None:
    import pyarrow as pa

    import tahoe

    tahoe.write_table(path, pa.table({"id": pa.array([1, 2], pa.int64()),
                                      "l": pa.array([2 ** 53 + 1, 5], pa.int64())}), target_file_rows=1)


def _column(text: str):
    """The Column form of a case's condition (literals as PySpark makes them: a Python float is a
    double literal, a Decimal a decimal one)."""
    from decimal import Decimal

    from pyspark.sql import functions as F

    return {"d = 0.3D": F.col("d") == F.lit(0.3), "x <= 0.1": F.col("x") <= F.lit(Decimal("0.1")),
            "f > 0.1D": F.col("f") > F.lit(0.1), "l = 9007199254740992D": F.col("l") == F.lit(9007199254740992.0)}[text]


CONNECT_CASES = [("decimal38 = double", decimal_table, "d = 0.3D"),
                 ("double <= decimal", double_table, "x <= 0.1"),
                 ("float32 > double", _float32_table, "f > 0.1D"),
                 ("bigint = double", _bigint_table, "l = 9007199254740992D")]


@pytest.mark.parametrize("name, build, cond", CONNECT_CASES, ids=[c[0] for c in CONNECT_CASES])
def test_coercion_dml_over_connect(connect, tmp_path, name, build, cond):
    """Tables one row per file. The oracle is Spark itself: the ids the condition selects on a
    parquet copy of the table's rows (no Delta, no tahoe skipping); DELETE removes exactly them,
    UPDATE moves exactly them — through DeltaTable with a SQL string and with a Column, and SQL
    statements (after the one-line setup)."""
    from tahoe.spark import DeltaTable, enable
    from tahoe.spark.sql import disable

    oracle = str(tmp_path / "oracle")
    build(str(tmp_path / "src"))
    connect.read.format("delta").load(str(tmp_path / "src")).write.parquet(oracle)
    hit = {r.id for r in connect.read.parquet(oracle).filter(cond).select("id").collect()}
    everything = {r.id for r in connect.read.parquet(oracle).select("id").collect()}
    # and by hand: row 1 (0.3 as double; 0.1 <= 0.1D; 0.1f is 0.10000000149011612; 2^53+1 as double is 2^53)
    assert hit == {1} and everything == {1, 2}, hit

    for form in ("string", "column"):
        p = str(tmp_path / f"del_{form}")
        build(p)
        DeltaTable.forPath(connect, p).delete(cond if form == "string" else _column(cond))
        assert _ids(connect, p) == sorted(everything - hit), form
        q = str(tmp_path / f"upd_{form}")
        build(q)
        DeltaTable.forPath(connect, q).update(cond if form == "string" else _column(cond), {"id": "id + 100"})
        assert _ids(connect, q) == sorted((everything - hit) | {i + 100 for i in hit}), form

    enable(connect)
    try:
        s = str(tmp_path / "sql")
        build(s)
        r = connect.sql(f"DELETE FROM delta.`{s}` WHERE {cond}").collect()
        assert r[0]["num_affected_rows"] == len(hit)
        assert _ids(connect, s) == sorted(everything - hit)
        u = str(tmp_path / "sql_upd")
        build(u)
        r = connect.sql(f"UPDATE delta.`{u}` SET id = id + 100 WHERE {cond}").collect()
        assert r[0]["num_affected_rows"] == len(hit)
        assert _ids(connect, u) == sorted((everything - hit) | {i + 100 for i in hit})
    finally:
        disable(connect)

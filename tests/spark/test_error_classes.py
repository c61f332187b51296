"""delta-spark's error classes on Spark, classic and Spark Connect: the errors tahoe raises inside
the `delta` data source, its write jobs and its DML reach the caller with delta-spark's class as
`getCondition()` and the message as delta-spark shapes it (`[CLASS] text`), and are still the
exception PySpark raised (`except AnalysisException` keeps working on classic).

Oracle: delta-spark's delta-error-classes.json message templates (filled in by hand)."""

from __future__ import annotations

import re

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

CASES = ["version", "missing", "schema", "constraint", "not_null", "append_only"]


def _provoke(spark, tmp_path, case):
    from tahoe.spark import DeltaTable

    path = str(tmp_path / case)
    df = spark.range(3).selectExpr("id", "CAST(id AS STRING) AS s")
    if case == "missing":
        spark.read.format("delta").load(path).collect()
    df.write.format("delta").save(path)
    if case == "version":
        spark.read.format("delta").option("versionAsOf", 4).load(path).collect()
    if case == "schema":
        df.selectExpr("id", "s", "1 AS extra").write.format("delta").mode("append").save(path)
    if case == "constraint":
        import tahoe

        tahoe.Table(path).add_constraint("small", "id < 10")
        spark.range(20, 21).selectExpr("id", "'x' AS s").write.format("delta").mode("append").save(path)
    if case == "not_null":
        import tahoe
        from tahoe.protocol.schema import LONG, STRING, StructField, StructType

        nn = str(tmp_path / "nn")
        tahoe.Table.create(nn, StructType([StructField("id", LONG, False), StructField("s", STRING)]))
        spark.sql("SELECT CAST(NULL AS BIGINT) AS id, 'x' AS s").write.format("delta").mode("append").save(nn)
    if case == "append_only":
        import tahoe

        tahoe.Table(path).set_properties({"delta.appendOnly": "true"})
        DeltaTable.forPath(spark, path).delete("id = 1")
    raise AssertionError("no error")


EXPECTED = {
    "version": ("DELTA_VERSION_NOT_FOUND", r"Cannot time travel Delta table to version 4\. Available versions: \[0, 0\]\."),
    "missing": ("DELTA_MISSING_DELTA_TABLE", r"`.*missing` is not a Delta table"),
    "schema": ("_LEGACY_ERROR_TEMP_DELTA_0007", r"A schema mismatch detected when writing to the Delta table \(Table ID: "),
    "constraint": ("DELTA_VIOLATE_CONSTRAINT_WITH_VALUES", r"CHECK constraint small \(id < 10\) violated by row with values"),
    "not_null": ("DELTA_NOT_NULL_CONSTRAINT_VIOLATED", r"NOT NULL constraint violated for column: id\."),
    "append_only": ("DELTA_CANNOT_MODIFY_APPEND_ONLY", r"This table is configured to only allow appends\."),
}


def _assert_class(e: BaseException, case: str) -> None:
    cls, pattern = EXPECTED[case]
    assert e.getCondition() == cls, (case, str(e)[:500])
    text = str(e)
    assert text.startswith(f"[{cls}] "), (case, text[:500])
    assert re.match(pattern, text[len(cls) + 3:]), (case, text[:500])


@pytest.mark.parametrize("case", CASES)
def test_error_classes_classic(spark, tmp_path, case):
    from pyspark.errors import PySparkException

    with pytest.raises(Exception) as ei:
        _provoke(spark, tmp_path, case)
    _assert_class(ei.value, case)
    if case in ("version", "missing", "schema"):   # raised by Spark around the data source: still Spark's class too
        assert isinstance(ei.value, PySparkException)


@pytest.mark.parametrize("case", CASES)
def test_error_classes_connect(connect, tmp_path, case):
    with pytest.raises(Exception) as ei:
        _provoke(connect, tmp_path, case)
    _assert_class(ei.value, case)

"""The `delta` data source never ignores an option, refuses tables by name with what to do
instead, and its errors reach the user named first (tahoe's class and message), still catchable as
Spark's exception.

Oracles: the option names and error classes the README and delta-spark's DeltaOptions define
(hand-written here), the files in `_delta_log` (a refused write commits nothing), and the rows
written (a refusal never returns data).
"""

from __future__ import annotations

import os
import traceback

import pyarrow as pa
import pytest
from pyspark.errors import AnalysisException

from tahoe.errors import (
    DeltaError, InvalidOptionError, InvalidTableOperationError, TableNotFoundError,
    UnsupportedFeatureError,
)
from tahoe.spark import DeltaTable
from tahoe.write import write_table

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


def _commits(path) -> list[str]:
    return sorted(f for f in os.listdir(os.path.join(path, "_delta_log")) if f.endswith(".json"))


@pytest.fixture
def cdf_table(tmp_path):
    p = str(tmp_path / "t")
    write_table(p, pa.table({"id": [1, 2, 3]}), properties={"delta.enableChangeDataFeed": "true"})
    return p


def _first_line(e: BaseException) -> str:
    return traceback.format_exception_only(type(e), e)[0].strip()


@pytest.mark.parametrize("name,value,cls", [
    ("readChangeFeed", "maybe", InvalidOptionError),         # CDF: a flag is 'true' or 'false'
    ("maxFilesPerTrigger", "1", InvalidOptionError),          # streaming-only: a batch read does nothing with it
    ("ignoreDeletes", "true", InvalidOptionError),
    ("schemaTrackingLocation", "/tmp/x", UnsupportedFeatureError),   # delta-spark's schema tracking
    ("mergeSchema", "true", UnsupportedFeatureError),       # a writer option on a read
    ("delta.appendOnly", "true", UnsupportedFeatureError),  # a table property on a read
    ("verisonAsOf", "0", InvalidOptionError),               # a typo
    ("versionAsOf", "-1", InvalidOptionError),
    ("timestampAsOf", "yesterday", InvalidOptionError),
])
def test_read_option_not_implemented_is_refused_by_name(spark, cdf_table, name, value, cls):
    with pytest.raises(cls) as ei:
        spark.read.format("delta").option(name, value).load(cdf_table).collect()
    assert name.lower() in str(ei.value).lower()
    assert isinstance(ei.value, AnalysisException)           # delta-spark code catching Spark's class still works
    assert _first_line(ei.value).startswith(f"tahoe.errors.{cls.__name__}: ")


def test_a_change_range_without_readChangeFeed_reads_the_snapshot_as_delta_spark(spark, cdf_table):
    """delta-spark's DeltaDataSource hands startingVersion / endingVersion / their timestamps to
    change feed reads only: without readChangeFeed the read is of the snapshot. tahoe does the
    same, and says so with a warning in the user's process."""
    write_table(cdf_table, pa.table({"id": [4]}), mode="append")
    with pytest.warns(UserWarning, match=r"startingVersion, endingVersion have no effect without "
                                         r"option\('readChangeFeed', 'true'\)"):
        df = spark.read.format("delta").option("startingVersion", "0").option("endingVersion", "0").load(cdf_table)
    assert sorted(r.id for r in df.collect()) == [1, 2, 3, 4]
    assert df.columns == ["id"]


def test_implemented_read_options_still_work(spark, cdf_table):
    write_table(cdf_table, pa.table({"id": [4]}), mode="append")
    rows = spark.read.format("delta").option("versionAsOf", "0").option("storage.unused_key", "x").load(cdf_table)
    assert sorted(r.id for r in rows.collect()) == [1, 2, 3]
    assert sorted(r.id for r in spark.read.format("delta").load([cdf_table]).collect()) == [1, 2, 3, 4]
    with pytest.raises(InvalidOptionError, match="one table"):
        spark.read.format("delta").load([cdf_table, cdf_table])


@pytest.mark.parametrize("name,value,cls", [
    ("dataChange", "false", UnsupportedFeatureError),
    ("compression", "zstd", UnsupportedFeatureError),
    ("maxRecordsPerFile", "10", UnsupportedFeatureError),
    ("replaceOn", "id = 1", UnsupportedFeatureError),
    ("checkpointLocation", "/tmp/x", InvalidOptionError),    # streaming writes only
    ("versionAsOf", "0", UnsupportedFeatureError),           # a reader option on a write
    ("mergeSchema", "yes", InvalidOptionError),
    ("partitonBy", "id", InvalidOptionError),                # a typo
    ("delta.noSuchProperty", "1", InvalidTableOperationError),
    ("delta.appendOnly", "true", InvalidOptionError),        # would be dropped: the table exists without it
])
def test_write_option_not_implemented_is_refused_by_name(spark, cdf_table, name, value, cls):
    before = _commits(cdf_table)
    df = spark.createDataFrame([(9,)], "id BIGINT")
    with pytest.raises(cls) as ei:
        df.write.format("delta").mode("append").option(name, value).save(cdf_table)
    assert name.lower() in str(ei.value).lower()
    assert _first_line(ei.value).startswith(f"tahoe.errors.{cls.__name__}: ")
    assert _commits(cdf_table) == before                     # nothing committed


def test_write_options_tahoe_implements_or_that_match_the_table(spark, cdf_table):
    df = spark.createDataFrame([(9,)], "id BIGINT")
    (df.write.format("delta").mode("append").option("dataChange", "true").option("compression", "snappy")
       .option("delta.enableChangeDataFeed", "true").option("userMetadata", "ok").save(cdf_table))
    assert len(_commits(cdf_table)) == 2
    assert sorted(r.id for r in spark.read.format("delta").load(cdf_table).collect()) == [1, 2, 3, 9]


def test_tables_by_name_are_refused_with_what_to_do(spark, tmp_path):
    loc = str(tmp_path / "by_name")
    with pytest.raises(UnsupportedFeatureError, match=r"tahoe\.spark\.enable\(spark\)") as ei:
        spark.sql(f"CREATE TABLE tahoe_by_name (id BIGINT) USING delta LOCATION '{loc}'")
    assert "save(path)" in str(ei.value)
    assert not spark.catalog.tableExists("tahoe_by_name")
    df = spark.createDataFrame([(1,)], "id BIGINT")
    with pytest.raises(UnsupportedFeatureError, match=r"tahoe\.spark\.enable\(spark\)"):
        df.write.format("delta").mode("append").saveAsTable("tahoe_by_name2")
    assert not spark.catalog.tableExists("tahoe_by_name2")
    with pytest.raises(UnsupportedFeatureError, match=r"tahoe\.spark\.enable\(spark\)"):
        df.writeTo("tahoe_by_name3").using("delta").create()
    # other providers are untouched, also with "using delta" inside a string
    spark.sql("CREATE TEMPORARY VIEW tahoe_not_delta AS SELECT 'using delta' AS s")
    assert spark.table("tahoe_not_delta").collect()[0].s == "using delta"


def test_errors_name_tahoe_class_and_message_first(spark, tmp_path):
    missing = str(tmp_path / "missing")
    with pytest.raises(TableNotFoundError) as ei:
        spark.read.format("delta").load(missing)
    e = ei.value
    assert isinstance(e, AnalysisException) and isinstance(e, DeltaError)
    assert _first_line(e) == (f"tahoe.errors.TableNotFoundError: [DELTA_MISSING_DELTA_TABLE] `{missing}` is not a Delta "
                              f"table: there is no _delta_log directory at {missing}")
    assert str(e).splitlines()[0].startswith("[DELTA_MISSING_DELTA_TABLE] ")
    assert e.getCondition() == "DELTA_MISSING_DELTA_TABLE"     # delta-spark's class, as PySpark's errors give it
    assert "PYTHON_DATA_SOURCE_ERROR" in "".join(traceback.format_exception(e))   # Spark's report kept
    # an error from inside the write job (a task on an executor)
    p = str(tmp_path / "c")
    write_table(p, pa.table({"id": [1]}))
    from tahoe.table import Table

    Table(p).add_constraint("positive", "id > 0")
    with pytest.raises(DeltaError) as ei:
        spark.createDataFrame([(-1,)], "id BIGINT").write.format("delta").mode("append").save(p)
    assert _first_line(ei.value).startswith("tahoe.errors.ConstraintViolationError: ")
    assert len(_commits(p)) == 2


def test_path_that_is_a_file(spark, tmp_path):
    f = tmp_path / "a_file"
    f.write_text("not a table")
    assert DeltaTable.isDeltaTable(spark, str(f)) is False
    assert DeltaTable.isDeltaTable(spark, str(tmp_path / "missing")) is False
    with pytest.raises(TableNotFoundError, match="is a file"):
        DeltaTable.forPath(spark, str(f))
    with pytest.raises(TableNotFoundError, match="is a file"):
        spark.read.format("delta").load(str(f))


def test_new_session_finds_the_source_without_register_and_failed_forPath_is_harmless(spark, cdf_table, tmp_path):
    s2 = spark.newSession()   # its own data source registry: Spark fills it from pyspark_tahoe_delta
    with pytest.raises(TableNotFoundError):
        DeltaTable.forPath(s2, str(tmp_path / "missing"))
    assert sorted(r.id for r in s2.read.format("delta").load(cdf_table).collect()) == [1, 2, 3]
    DeltaTable.forPath(s2, cdf_table)                          # registering on top of it works too
    assert sorted(r.id for r in s2.read.format("delta").load(cdf_table).collect()) == [1, 2, 3]

"""Every reach into PySpark's private attributes (`tahoe.spark.internals`), called against the
installed PySpark — classic and Spark Connect — on real readers, writers, DataFrames and Columns.
Oracles: what the test itself set on those objects (format, mode, options, schema, alias, table
name), Spark's analyzer for the SQL text. A PySpark without one of them fails here by name
(`PySparkInternalsError`), not later inside a wrapper."""

from __future__ import annotations

import pytest

from tahoe.spark import internals

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


@pytest.fixture(params=["classic", "connect"])
def session(request):
    return request.getfixturevalue("spark" if request.param == "classic" else "connect")


def test_writer_and_reader_accessors(session, tmp_path):
    df = session.createDataFrame([(1, "a")], "id BIGINT, p STRING")
    w = df.write.format("DeLtA").mode("overwrite").option("k", "v").option("userMetadata", "x")
    assert internals.writer_format(w) == "delta"
    assert internals.writer_mode(w).lower() == "overwrite"
    assert internals.writer_options(w) == {"k": "v", "userMetadata": "x"}
    assert internals.writer_mode(df.write).lower() == "errorifexists"
    assert internals.writer_format(df.write) in ("", "parquet")   # classic: spark.sql.sources.default
    assert internals.writer_dataframe(w).collect() == df.collect()
    assert internals.session_of(w) is session
    r = session.read.format("delta")
    assert internals.session_of(r) is session
    assert internals.reader_schema_given(r) is False
    assert internals.reader_schema_given(session.read.schema("id BIGINT")) is True
    if internals.is_connect(session):
        assert internals.reader_format(r) == "delta"
    v2 = df.writeTo("some_table")
    assert internals.session_of(v2) is session
    assert internals.v2_table_name(v2) == "some_table"
    sw = session.readStream.format("rate").load().writeStream.format("delta")
    assert internals.session_of(sw) is session
    assert internals.stream_writer_dataframe(sw).isStreaming
    assert internals.session_of(session.readStream) is session
    if internals.is_connect(session):
        assert internals.stream_writer_format(sw) == "delta"
    else:
        assert internals.stream_writer_output_mode(sw) == "append"
        assert internals.stream_writer_output_mode(sw.outputMode("Complete")) == "complete"
        parted = session.readStream.format("rate").load().writeStream.partitionBy("value")
        field = parted._jwrite.getClass().getDeclaredField("partitioningColumns")
        field.setAccessible(True)
        assert field.get(parted._jwrite).isDefined()
        internals.clear_stream_partitioning(parted)
        assert field.get(parted._jwrite).isEmpty()      # None: what foreachBatch accepts


def test_dataframe_and_column_accessors(session):
    from pyspark.sql import functions as F

    df = session.createDataFrame([(1, "a")], "id BIGINT, p STRING")
    assert internals.dataframe_alias(df.alias("s")) == "s"
    assert internals.dataframe_alias(df) is None
    if internals.is_connect(session):
        pid = internals.connect_plan_id(df)
        assert isinstance(pid, int) and df["id"].to_plan(None).unresolved_attribute.plan_id == pid
        assert internals.plan_size_in_bytes(df) is None
        assert internals.jvm_has_class(session, "java.lang.String") is None
        internals.release_checkpoint(df)
        return
    assert internals.column_sql(df, F.col("id") + 1) == "(id + CAST(1 AS BIGINT))"
    assert internals.filter_sql(df.filter(F.col("p") == "a")) == "(p = 'a')"
    assert internals.column_name(F.col("p")) == "p"
    assert internals.plan_size_in_bytes(df) > 0
    assert internals.jvm_has_class(session, "java.lang.String") is True
    assert internals.jvm_has_class(session, "org.apache.spark.sql.delta.sources.DeltaDataSource") is False
    kept = df.localCheckpoint(eager=True)
    internals.release_checkpoint(kept)
    assert internals.with_active_session(session, lambda: 42) == 42
    hidden = internals.with_hidden_output(session, df.withColumn("_meta", F.lit(7)), "_meta")
    assert hidden.columns == ["id", "p"] and hidden.select("_meta").collect()[0][0] == 7


def test_release_checkpoint_removes_a_connect_checkpoint_and_disarms_its_finalizer(connect, monkeypatch):
    """A Connect checkpoint is removed from the server in the calling thread, never left to
    PySpark's finalizer (SPARK-58846: its removal call has no deadline and hung a MERGE)."""
    import gc

    from tests.fixtures.connect import armed_checkpoint_finalizers, server_has_relation

    armed = armed_checkpoint_finalizers(monkeypatch)
    kept = connect.range(5).localCheckpoint(eager=True)
    rid = kept._plan._relation_id
    derived = kept.filter("id > 2")
    assert server_has_relation(connect, rid) and derived.count() == 2
    internals.release_checkpoint(kept)
    assert not server_has_relation(connect, rid)
    internals.release_checkpoint(kept)   # (twice: nothing more to do)
    del kept, derived
    gc.collect()
    assert rid not in armed


def test_a_missing_attribute_fails_by_name(spark):
    w = spark.createDataFrame([(1,)], "id BIGINT").write
    del w._jwrite
    with pytest.raises(internals.PySparkInternalsError, match=r"DataFrameWriter\._jwrite.*PySpark 4"):
        internals.writer_format(w)


def test_driver_streaming_source_accessors(spark):
    """The JVM pieces `NativeStreamSource` is built from: offsets as Spark's SerializedOffset (its
    JSON kept to the byte), read limits both ways (pyspark's classes ↔ Spark's), a micro-batch
    DataFrame marked streaming, and a streaming DataFrame over a Python `Source` (analysed, not
    started: its schema is the one given)."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, ReadMaxFiles, ReadMaxRows

    text = '{"sourceVersion": 1, "reservoirVersion": 3}'
    assert internals.jvm_offset(spark, text).json() == text
    for limit, kind in ((ReadMaxFiles(7), "ReadMaxFiles"), (ReadMaxBytes(1 << 20), "ReadMaxBytes"),
                        (ReadMaxRows(5), "ReadMaxRows"), (ReadAllAvailable(), "ReadAllAvailable")):
        j = internals.jvm_read_limit(spark, limit)
        assert j.getClass().getSimpleName() == kind
        back = internals.python_read_limit(j)
        if kind == "ReadMaxFiles":
            assert isinstance(back, ReadMaxFiles) and back.max_files == 7
        elif kind == "ReadMaxBytes":
            assert isinstance(back, ReadMaxBytes) and back.max_bytes == 1 << 20
        else:   # a limit tahoe's source does not bound by
            assert isinstance(back, ReadAllAvailable)
    batch = internals.jvm_streaming_batch(spark.range(3))      # no file scan: its rows as a streaming RDD
    assert batch.isStreaming() and batch.queryExecution().analyzed().rdd().count() == 3   # (no action on it)

    class Unstarted:
        class Java:
            implements = ["org.apache.spark.sql.execution.streaming.Source"]

    df = internals.jvm_stream_source_dataframe(spark, Unstarted(), spark.range(1).schema)
    assert df.isStreaming and df.schema == spark.range(1).schema


def test_internal_columns_skip_call_sites_and_restore_the_flag(spark):
    """Inside `internal_columns` PySpark sends no call site for a Column made (its debugging
    flag reads False: one Py4J call for `F.col`, not ~6); the flag PySpark had is back after the
    block, nested blocks included, and after an error inside one."""
    import py4j.clientserver as cs
    from pyspark.errors.utils import is_debugging_enabled
    from pyspark.sql import functions as F

    before = is_debugging_enabled()
    sent = []
    orig = cs.ClientServerConnection.send_command

    def counting(self, command, *a, **k):
        sent.append(command)
        return orig(self, command, *a, **k)

    def calls_for(fn) -> int:
        sent.clear()
        cs.ClientServerConnection.send_command = counting
        try:
            fn()
        finally:
            cs.ClientServerConnection.send_command = orig
        return len(sent)

    with internals.internal_columns():
        assert is_debugging_enabled() is False
        with internals.internal_columns():
            assert is_debugging_enabled() is False
        assert is_debugging_enabled() is False
        inside = calls_for(lambda: F.col("x") + 1)
    assert is_debugging_enabled() is before
    with pytest.raises(ZeroDivisionError):
        with internals.internal_columns():
            1 / 0
    assert is_debugging_enabled() is before
    if before:   # (the default: the call-site capture is on outside a block: a conf read, a lookup, a
        # set and a clear around each Column method)
        assert calls_for(lambda: F.col("x") + 1) >= inside + 4


def test_spark_conf_with_prefix_reads_the_context_conf(spark):
    """`spark_conf_with_prefix` gives what `sc.getConf().getAll()` filtered by the prefix gives."""
    sc = spark.sparkContext
    want = {k: v for k, v in sc.getConf().getAll() if k.startswith("spark.app.")}
    assert want and internals.spark_conf_with_prefix(sc, "spark.app.") == want
    assert internals.spark_conf_with_prefix(sc, "spark.tahoe.no.such.prefix.") == {}


def test_runtime_conf_with_prefix_reads_what_spark_conf_get_all_reads(spark):
    """`runtime_conf_with_prefix` gives `spark.conf.getAll` filtered by the prefix: values with
    separators, newlines and non-ASCII text read exactly; a value holding NUL (the joined read's
    separator) read entry by entry."""
    confs = {"spark.tahoe.test.a": "x,y=z", "spark.tahoe.test.b": "line1\nline2 é", "spark.tahoe.test.c": ""}
    try:
        for k, v in confs.items():
            spark.conf.set(k, v)
        want = {k: v for k, v in spark.conf.getAll.items() if k.startswith("spark.tahoe.test.")} \
            if not callable(spark.conf.getAll) else \
            {k: v for k, v in spark.conf.getAll().items() if k.startswith("spark.tahoe.test.")}
        assert want == confs
        assert internals.runtime_conf_with_prefix(spark, "spark.tahoe.test.") == confs
        spark.conf.set("spark.tahoe.test.d", "a\u0000b")
        assert internals.runtime_conf_with_prefix(spark, "spark.tahoe.test.") == {**confs, "spark.tahoe.test.d": "a\u0000b"}
        assert internals.runtime_conf_with_prefix(spark, "spark.tahoe.no.such.prefix.") == {}
    finally:
        for k in [*confs, "spark.tahoe.test.d"]:
            spark.conf.unset(k)


def test_parquet_scan_hands_paths_over_in_one_string(spark, tmp_path):
    """`parquet_scan` reads what `reader.parquet(*paths)` reads — 20 files, names with spaces, `%`,
    brackets (glob-escaped, as tahoe's reads give them) — and its DataFrame, marked by
    `jvm_streaming_batch`, is a streaming plan over the same file scan (its relation streaming)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tahoe.spark.read import glob_escape

    paths = []
    for i in range(20):
        p = tmp_path / f"part {i} %20 [x]{{y}}.parquet"
        pq.write_table(pa.table({"id": pa.array([i, 100 + i], pa.int64())}), str(p))
        paths.append(glob_escape(str(p)))
    reader = spark.read.schema("id BIGINT")
    ours = internals.parquet_scan(reader, paths)
    theirs = reader.parquet(*paths)
    assert sorted(r.id for r in ours.collect()) == sorted(r.id for r in theirs.collect()) == \
        sorted([i for i in range(20)] + [100 + i for i in range(20)])
    batch = internals.jvm_streaming_batch(ours.select("id"))
    plan = batch.queryExecution().analyzed()
    leaf = plan.children().apply(0)
    assert batch.isStreaming() and plan.treeString().startswith("~Project")
    assert leaf.getClass().getSimpleName() == "LogicalRelation" and leaf.isStreaming()


def test_python_scans_scoped_reads_where_spark_keeps_a_pushdown_plan(spark):
    """Spark 4.3's `PythonDataSourceV2` keeps the read planned after `pushFilters` on the provider
    (`setReadInfo`: one for every scan of a DataFrame — the leak tests/spark/test_spark_read_fuzz.py
    shows), so scans are not scoped there; the answer is asked of the JVM once per context."""
    import pyspark

    got = internals.python_scans_scoped(spark)
    assert isinstance(got, bool)
    if pyspark.__version__.startswith("4.3."):
        assert got is False
    assert internals.python_scans_scoped(spark) is got

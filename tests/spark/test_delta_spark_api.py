"""delta-spark's Python API behaviours (issue 33), each on classic Spark and over Spark Connect.

Every expectation is delta-spark's: its documented results, and its own Python tests
(python/delta/tests/test_deltatable.py of delta-io/delta, `DeltaTableTestsMixin`, which
delta-spark runs on classic and on Connect alike) — messages, exception classes, error classes,
history parameters. Rows are derived by hand. The Connect session is a client of the shared
Spark Connect server (tests/fixtures/connect.py); the only tahoe line is `import tahoe.spark`.
"""

from __future__ import annotations

import json
import threading
from multiprocessing.pool import ThreadPool

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


@pytest.fixture(params=["classic", "connect"])
def session(request):
    return request.getfixturevalue("spark" if request.param == "classic" else "connect")


def _rows(df, *cols):
    return sorted(tuple(r[c] for c in cols) for r in df.collect())


def _write(session, path, rows, schema="key STRING, value BIGINT", partition_by=None, mode=None):
    w = session.createDataFrame(rows, schema).repartition(1).write.format("delta")
    if partition_by:
        w = w.partitionBy(partition_by)
    if mode:
        w = w.mode(mode)
    w.save(path)


def test_format_delta_writes_keep_save_mode_and_partition_by(session, tmp_path):
    """Only `import tahoe.spark`: the default save mode (ErrorIfExists) and .partitionBy() work."""
    path = str(tmp_path / "t")
    _write(session, path, [("a", 1), ("b", 2)], partition_by="key")
    _write(session, path, [("a", 3)], partition_by="key", mode="append")
    with pytest.raises(Exception, match="already exists"):
        _write(session, path, [("c", 9)])
    _write(session, path, [("c", 9)], mode="ignore")
    from tahoe.log import DeltaLog

    assert list(DeltaLog.for_table(path).snapshot().metadata.partition_columns) == ["key"]
    assert _rows(session.read.format("delta").load(path), "key", "value") == [("a", 1), ("a", 3), ("b", 2)]


def test_dml_accepts_columns_and_returns_what_delta_spark_returns(session, tmp_path):
    from pyspark.sql.functions import col, expr, lit

    from tahoe.spark import DeltaTable

    path = str(tmp_path / "t")
    _write(session, path, [("a", 1), ("b", 2), ("c", 3), ("d", 4)])
    dt = DeltaTable.forPath(session, path)
    out = dt.delete(col("key") == lit("b"))
    out2 = dt.update(expr("key = 'a' or key = 'c'"), {"value": col("value") * 10})
    if session is not None and "connect" in type(session).__module__:
        assert [tuple(r) for r in out.collect()] == [(1,)]      # delta-spark's Connect client: a DataFrame
        assert [tuple(r) for r in out2.collect()] == [(2,)]
    else:
        assert out is None and out2 is None                     # classic delta-spark: None
    assert _rows(dt.toDF(), "key", "value") == [("a", 10), ("c", 30), ("d", 4)]
    source = session.createDataFrame([("a", -1), ("e", -5)], "k STRING, v BIGINT")
    res = dt.merge(source, col("key") == col("k")) \
        .whenMatchedUpdate(condition=col("k") == "a", set={"value": col("v") + 0}) \
        .whenNotMatchedInsert(values={"key": col("k"), "value": col("v")}) \
        .whenNotMatchedBySourceDelete(condition=col("key") == "d").execute()
    assert [r.asDict() for r in res.collect()] == [
        {"num_affected_rows": 3, "num_updated_rows": 1, "num_deleted_rows": 1, "num_inserted_rows": 1}]
    assert _rows(dt.toDF(), "key", "value") == [("a", -1), ("c", 30), ("e", -5)]
    # references made from the DataFrames themselves (df["col"]), aliases as given
    src = session.createDataFrame([("c", 7)], "key STRING, value BIGINT").alias("s")
    dt.alias("t").merge(src, "t.key = s.key").whenMatchedUpdate(set={"value": col("s.value")}).execute()
    assert _rows(dt.toDF(), "key", "value") == [("a", -1), ("c", 7), ("e", -5)]


def test_argument_checks_raise_as_delta_spark(session, tmp_path):
    from pyspark.sql.types import IntegerType, StructField

    from tahoe.spark import DeltaTable

    path = str(tmp_path / "t")
    _write(session, path, [("a", 1)])
    dt = DeltaTable.forPath(session, path)
    source = session.createDataFrame([("a", -1)], "k STRING, v BIGINT")
    with pytest.raises(TypeError, match="Values of dict in .* must contain only"):
        dt.update(set={"value": 1})
    with pytest.raises(TypeError, match="Keys of dict in .* must contain only"):
        dt.update(set={1: ""})
    with pytest.raises(TypeError, match="must be a Spark SQL Column or a string"):
        dt.update(1, {})
    with pytest.raises(ValueError, match="cannot be None"):
        dt.update(condition="a")
    with pytest.raises(TypeError):
        dt.delete(condition=1)
    with pytest.raises(TypeError, match="must be DataFrame"):
        dt.merge(1, "key = k")
    with pytest.raises(TypeError, match="Values of dict in .* must contain only"):
        dt.merge(source, "key = k").whenMatchedUpdate(set={"value": 1})
    with pytest.raises(TypeError, match="Values of dict in .* must contain only"):
        dt.merge(source, "key = k").whenNotMatchedInsert(values={"value": 1})
    with pytest.raises(TypeError, match="Keys of dict in .* must contain only"):
        dt.merge(source, "key = k").whenNotMatchedInsert(values={1: "value"})
    builder = DeltaTable.create(session).location(str(tmp_path / "b"))
    for bad in (lambda: builder.tableName(1), lambda: builder.location(1), lambda: builder.comment(1),
                lambda: builder.addColumn(1, "int"), lambda: builder.addColumn("a", 1),
                lambda: builder.addColumn("a", "int", comment=1), lambda: builder.addColumn("a", "int", generatedAlwaysAs=1),
                lambda: builder.addColumn("a", "int", nullable=1), lambda: builder.addColumns(1),
                lambda: builder.addColumns([StructField("1", IntegerType()), 1]), lambda: builder.partitionedBy(1),
                lambda: builder.partitionedBy(1, "1"), lambda: builder.partitionedBy([1]),
                lambda: builder.property(1, "1"), lambda: builder.property("1", 1)):
        with pytest.raises(TypeError):
            bad()
    with pytest.raises(TypeError, match="^Column name must be str. Found 1 with type <class 'int'>$"):
        builder.addColumn(1, "int")
    with pytest.raises(ValueError, match="readerVersion"):
        dt.upgradeTableProtocol("abc", 3)
    with pytest.raises(ValueError, match="writerVersion"):
        dt.upgradeTableProtocol(1, [3])
    with pytest.raises(ValueError, match="timestamp needs to be a string but got '<class 'int'>'"):
        dt.restoreToTimestamp(12342323232)
    with pytest.raises(ValueError, match="version needs to be an int but got '<class 'str'>'"):
        dt.restoreToVersion("0")


def test_add_columns_takes_struct_fields_and_a_struct_type(session, tmp_path):
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    from tahoe.spark import DeltaTable

    schema = StructType([StructField("key", StringType()), StructField("value", LongType())])
    for i, cols in enumerate((schema, schema.fields)):
        dt = DeltaTable.create(session).location(str(tmp_path / f"t{i}")).addColumns(cols) \
            .addColumn("value2", dataType="int").partitionedBy("value2", "value").execute()
        assert dt.toDF().schema == StructType([StructField("key", StringType()), StructField("value", LongType()),
                                               StructField("value2", IntegerType())])
        assert dt.detail().collect()[0].partitionColumns == ["value2", "value"]


def test_to_df_schema_keeps_only_user_metadata(session, tmp_path):
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    from tahoe.spark import DeltaTable, IdentityGenerator

    dt = DeltaTable.create(session).location(str(tmp_path / "t")) \
        .addColumn("col1", "int", comment="foo", nullable=False) \
        .addColumn("col2", IntegerType(), generatedAlwaysAs="col1 + 10") \
        .addColumn("id", "BIGINT", generatedAlwaysAs=IdentityGenerator()) \
        .property("delta.columnMapping.mode", "name").execute()
    assert dt.toDF().schema == StructType([StructField("col1", IntegerType(), False, {"comment": "foo"}),
                                           StructField("col2", IntegerType(), True),
                                           StructField("id", LongType(), True)])
    assert [f.metadata for f in dt.toDF().schema.fields] == [{"comment": "foo"}, {}, {}]
    assert [f.metadata for f in session.read.format("delta").load(str(tmp_path / "t")).schema.fields] == \
        [{"comment": "foo"}, {}, {}]


def test_create_and_replace_without_a_session_use_the_active_one(session, tmp_path):
    from pyspark.sql.types import IntegerType, StructField, StructType

    from tahoe.spark import DeltaTable

    path = str(tmp_path / "t")
    dt = DeltaTable.create().location(path).addColumn("value", dataType="int").execute()
    assert dt.toDF().schema == StructType([StructField("value", IntegerType())])
    dt = DeltaTable.createIfNotExists().location(path).addColumn("value2", dataType="int").execute()
    assert dt.toDF().schema == StructType([StructField("value", IntegerType())])
    dt = DeltaTable.replace().location(path).addColumn("key", dataType="int").execute()
    assert dt.toDF().schema == StructType([StructField("key", IntegerType())])
    dt = DeltaTable.createOrReplace().location(path).addColumn("col1", dataType="int").execute()
    assert dt.toDF().schema == StructType([StructField("col1", IntegerType())])


def test_replacing_a_missing_table_fails_as_delta_spark(session, tmp_path):
    from pyspark.errors import AnalysisException

    from tahoe.spark import DeltaTable

    path = str(tmp_path / "missing")
    with pytest.raises(AnalysisException) as e:
        DeltaTable.replace(session).location(path).addColumn("c", "int").execute()
    msg = str(e.value)
    assert path in msg and ("did not exist" in msg or "cannot be found" in msg)
    # by name (delta-spark's test_replace_table_behavior), in a session with Delta SQL on
    from tahoe.spark import enable
    from tahoe.spark.sql import disable

    enable(session)
    try:
        with pytest.raises(AnalysisException) as e:
            DeltaTable.replace(session).tableName("testTable").addColumn("c", "int").execute()
        msg = str(e.value)
        assert "testTable" in msg and ("did not exist" in msg or "cannot be found" in msg), msg
    finally:
        disable(session)


def test_protocol_of_new_tables_and_upgrades(session, tmp_path):
    from tahoe.log import DeltaLog
    from tahoe.spark import DeltaTable, IdentityGenerator

    def proto(p):
        pr = DeltaLog.for_table(p).snapshot().protocol
        return pr.min_reader_version, pr.min_writer_version

    _write(session, str(tmp_path / "plain"), [("a", 1)])
    assert proto(str(tmp_path / "plain")) == (1, 2)          # delta-spark's default for a new table
    DeltaTable.create(session).location(str(tmp_path / "gen")).addColumn("a", "int") \
        .addColumn("b", "int", generatedAlwaysAs="a + 1").execute()
    assert proto(str(tmp_path / "gen")) == (1, 4)            # generated columns: writer 4
    DeltaTable.create(session).location(str(tmp_path / "ident")).addColumn("a", "bigint",
                                                                          generatedAlwaysAs=IdentityGenerator()).execute()
    assert proto(str(tmp_path / "ident")) == (1, 6)          # identity columns: writer 6
    DeltaTable.create(session).location(str(tmp_path / "cdf")).addColumn("a", "int") \
        .property("delta.enableChangeDataFeed", "true").execute()
    assert proto(str(tmp_path / "cdf")) == (1, 4)            # change data feed: writer 4
    DeltaTable.create(session).location(str(tmp_path / "cm")).addColumn("a", "int") \
        .property("delta.columnMapping.mode", "name").execute()
    assert proto(str(tmp_path / "cm")) == (2, 5)             # column mapping: (2, 5)
    dt = DeltaTable.forPath(session, str(tmp_path / "plain"))
    dt.upgradeTableProtocol(1, 3)
    assert proto(str(tmp_path / "plain")) == (1, 3)
    # delta-spark 3+ (upgradeTableProtocol sets the versions as table properties, merged with the
    # table's protocol: OptimisticTransaction's "delta.protocol.downgradeIgnored"): a lower version
    # is a no-op — no error, no commit
    before = dt.history().count()
    dt.upgradeTableProtocol(1, 2)
    assert proto(str(tmp_path / "plain")) == (1, 3) and dt.history().count() == before


def test_add_feature_support_of_an_unknown_feature_names_the_error_class(session, tmp_path):
    from pyspark.errors import AnalysisException

    from tahoe.spark import DeltaTable

    _write(session, str(tmp_path / "t"), [("a", 1)])
    dt = DeltaTable.forPath(session, str(tmp_path / "t"))
    with pytest.raises(AnalysisException, match="DELTA_UNSUPPORTED_FEATURES_IN_CONFIG") as e:
        dt.addFeatureSupport("abc")
    assert e.value.getCondition() == "DELTA_UNSUPPORTED_FEATURES_IN_CONFIG"
    dt.addFeatureSupport("deletionVectors")
    assert "deletionVectors" in dt.detail().collect()[0].tableFeatures


def test_restore_to_an_unparsable_timestamp(session, tmp_path):
    from tahoe.spark import DeltaTable

    _write(session, str(tmp_path / "t"), [("a", 1)])
    with pytest.raises(Exception, match=r"The provided timestamp \('05/04/1999'\) cannot be converted to a valid "
                                        r"timestamp"):
        DeltaTable.forPath(session, str(tmp_path / "t")).restoreToTimestamp("05/04/1999")


def test_optimize_history_and_errors_as_delta_spark(session, tmp_path):
    from tahoe.spark import DeltaTable

    path = str(tmp_path / "t")
    for rows, mode in (([("a", 1), ("a", 2)], None), ([("a", 3), ("a", 4)], "append"), ([("b", 1), ("b", 2)], "append"),
                       ([("b", 3)], "append")):
        _write(session, path, rows, partition_by="key", mode=mode)
    dt = DeltaTable.forPath(session, path)
    res = dt.optimize().where("key = 'a'").executeCompaction()
    m = res.first().metrics
    assert (m.numFilesAdded, m.numFilesRemoved) == (1, 2)
    assert dt.history().first().operationParameters["predicate"] == '''["('key = a)"]'''
    with pytest.raises(Exception, match=r"Predicate references non-partition column 'value'. Only the partition "
                                        r"columns may be referenced: \[key\]"):
        dt.optimize().where("value = 1").executeCompaction()
    dt.optimize().executeCompaction()
    assert dt.history().first().operationParameters["predicate"] == "[]"


def test_format_delta_writes_and_merge_from_worker_threads(session, tmp_path):
    """Pipelines that ingest several tables at once (multiprocessing.pool.ThreadPool)."""
    from tahoe.spark import DeltaTable

    def ingest(i):
        path = str(tmp_path / f"t{i}")
        _write(session, path, [(f"k{i}", i)])
        src = session.createDataFrame([(f"k{i}", i * 10), ("new", 0)], "key STRING, value BIGINT")
        DeltaTable.forPath(session, path).alias("t").merge(src.alias("s"), "t.key = s.key") \
            .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
        return _rows(session.read.format("delta").load(path), "key", "value")

    with ThreadPool(2) as pool:
        # bounded: a hang fails the test, not the suite (over Spark Connect the MERGE's checkpoint was left to
        # PySpark's finalizer, which hung: see test_connect_merges_in_two_threads_release_their_checkpoints_themselves)
        results = pool.map_async(ingest, range(3)).get(timeout=300)
    assert results == [sorted([(f"k{i}", i * 10), ("new", 0)]) for i in range(3)]
    assert threading.active_count() >= 1


def test_connect_merges_in_two_threads_release_their_checkpoints_themselves(connect, tmp_path, monkeypatch):
    """Two MERGEs (update matched, insert not matched: the source is checkpointed on the server to
    number its rows) on one Connect session in two threads, made to hold their checkpoints at once
    and release them together (a barrier before `release_checkpoint`). Each removes its own
    relation in its own thread; none is left to PySpark's finalizer, whose removal (a raw unary
    call with no deadline, SPARK-58846) hung the worker-thread test above in the full suite."""
    import gc

    from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame

    from tahoe.spark import DeltaTable, internals
    from tests.fixtures.connect import armed_checkpoint_finalizers, server_has_relation

    armed = armed_checkpoint_finalizers(monkeypatch)
    made: list = []
    checkpoint = ConnectDataFrame.localCheckpoint

    def recorded_checkpoint(self, *args, **kwargs):
        out = checkpoint(self, *args, **kwargs)
        made.append(out._plan._relation_id)
        return out

    monkeypatch.setattr(ConnectDataFrame, "localCheckpoint", recorded_checkpoint)
    together = threading.Barrier(2, timeout=120)
    release = internals.release_checkpoint

    def release_together(df):
        together.wait()
        release(df)

    monkeypatch.setattr(internals, "release_checkpoint", release_together)
    results: dict = {}

    def ingest(i):
        try:
            path = str(tmp_path / f"t{i}")
            _write(connect, path, [(f"k{i}", i), ("old", 1)])
            src = connect.createDataFrame([(f"k{i}", i * 10), ("new", 0)], "key STRING, value BIGINT")
            DeltaTable.forPath(connect, path).alias("t").merge(src.alias("s"), "t.key = s.key") \
                .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
            results[i] = (_rows(connect.read.format("delta").load(path), "key", "value"),
                          [r.operation for r in DeltaTable.forPath(connect, path).history().collect()])
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            results[i] = e
            together.abort()

    threads = [threading.Thread(target=ingest, args=(i,), daemon=True) for i in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads), "a MERGE thread did not finish in 300 s"
    for i in (1, 2):
        if isinstance(results[i], BaseException):
            raise results[i]
        assert results[i] == (sorted([(f"k{i}", i * 10), ("new", 0), ("old", 1)]), ["MERGE", "WRITE"])
    assert len(made) == 2
    for rid in made:
        assert not server_has_relation(connect, rid)
    gc.collect()
    assert not set(made) & set(armed)


def test_delta_sql_after_the_one_line_setup(session, tmp_path):
    """`enable(spark)` (or configure_spark_with_delta_pip's builder) on classic and Connect alike."""
    from tahoe.spark import enable

    enable(session)
    name = f"sql_{'connect' if 'connect' in type(session).__module__ else 'classic'}"
    path = str(tmp_path / "sales")
    session.sql(f"CREATE TABLE {name} (id BIGINT, qty INT) USING delta LOCATION '{path}'")
    try:
        session.sql(f"INSERT INTO {name} VALUES (1, 3), (2, 5)")
        res = session.sql(f"MERGE INTO {name} t USING (SELECT 2 AS id, 6 AS qty) s ON t.id = s.id "
                          f"WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *").collect()
        assert [tuple(r) for r in res] == [(1, 1, 0, 0)]
        assert [tuple(r) for r in session.sql(f"DELETE FROM {name} WHERE qty > 5").collect()] == [(1,)]
        assert sorted(tuple(r) for r in session.sql(f"SELECT * FROM {name} VERSION AS OF 2").collect()) == \
            [(1, 3), (2, 6)]
        ops = [r.operation for r in session.sql(f"DESCRIBE HISTORY {name}").collect()]
        assert ops == ["DELETE", "MERGE", "WRITE", "CREATE TABLE"]
    finally:
        from tahoe.spark.sql import disable

        session.sql(f"DROP TABLE IF EXISTS {name}")
        disable(session)   # the shared sessions go on without Delta SQL, as the other tests expect


# delta-spark 4.4's DeltaOperationMetrics (DeltaOperations.scala): the metric names each operation
# may record, and the parameter names of the operations whose case classes name them there
_METRICS = {
    "WRITE": {"numFiles", "numOutputBytes", "numOutputRows"},
    "WRITE_REPLACE_WHERE": {"numFiles", "numOutputBytes", "numOutputRows", "numRemovedFiles", "numAddedChangeFiles",
                            "numDeletedRows", "numCopiedRows", "numRemovedBytes"},
    "DELETE": {"numAddedFiles", "numRemovedFiles", "numDeletionVectorsAdded", "numDeletionVectorsRemoved",
               "numDeletionVectorsUpdated", "numAddedChangeFiles", "numDeletedRows", "numCopiedRows",
               "executionTimeMs", "scanTimeMs", "rewriteTimeMs", "numRemovedBytes", "numAddedBytes"},
    "UPDATE": {"numAddedFiles", "numRemovedFiles", "numAddedChangeFiles", "numDeletionVectorsAdded",
               "numDeletionVectorsRemoved", "numDeletionVectorsUpdated", "numUpdatedRows", "numCopiedRows",
               "executionTimeMs", "scanTimeMs", "rewriteTimeMs", "numRemovedBytes", "numAddedBytes"},
    "MERGE": {"numSourceRows", "numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsMatchedUpdated",
              "numTargetRowsNotMatchedBySourceUpdated", "numTargetRowsDeleted", "numTargetRowsMatchedDeleted",
              "numTargetRowsNotMatchedBySourceDeleted", "numTargetRowsCopied", "numTargetBytesAdded",
              "numTargetBytesRemoved", "numOutputRows", "numTargetFilesAdded", "numTargetFilesRemoved",
              "numTargetChangeFilesAdded", "executionTimeMs", "materializeSourceTimeMs", "scanTimeMs",
              "rewriteTimeMs", "numTargetDeletionVectorsAdded", "numTargetDeletionVectorsRemoved",
              "numTargetDeletionVectorsUpdated"},
    "OPTIMIZE": {"numAddedFiles", "numRemovedFiles", "numAddedBytes", "numRemovedBytes", "minFileSize", "p25FileSize",
                 "p50FileSize", "p75FileSize", "maxFileSize", "numDeletionVectorsRemoved"},
    "RESTORE": {"tableSizeAfterRestore", "numOfFilesAfterRestore", "numRemovedFiles", "numRestoredFiles",
                "removedFilesSize", "restoredFilesSize"},
    "CLONE": {"sourceTableSize", "sourceNumOfFiles", "numRemovedFiles", "numCopiedFiles", "removedFilesSize",
              "copiedFilesSize"},
    "VACUUM START": {"numFilesToDelete", "sizeOfDataToDelete"},
    "VACUUM END": {"numDeletedFiles", "numVacuumedDirectories"},
    "CONVERT": {"numConvertedFiles"},
    "CREATE TABLE": set(),
}
_PARAMETERS = {
    "WRITE": ({"mode"}, {"mode", "partitionBy", "predicate"}),
    "DELETE": ({"predicate"}, {"predicate"}),
    "UPDATE": ({"predicate"}, {"predicate"}),
    "MERGE": ({"predicate", "matchedPredicates", "notMatchedPredicates", "notMatchedBySourcePredicates"},
              {"predicate", "matchedPredicates", "notMatchedPredicates", "notMatchedBySourcePredicates",
               "updatePredicate", "deletePredicate", "insertPredicate"}),
    "CONVERT": ({"numFiles", "partitionedBy", "collectStats"},
                {"numFiles", "partitionedBy", "collectStats", "catalogTable", "sourceFormat"}),
    "CREATE TABLE": ({"isManaged", "description", "partitionBy", "clusterBy", "properties"},
                     {"isManaged", "description", "partitionBy", "clusterBy", "properties"}),
}


def test_history_parameter_and_metric_names_are_delta_sparks(session, tmp_path):
    from pyspark.sql.functions import col

    from tahoe.spark import DeltaTable

    path = str(tmp_path / "t")
    _write(session, path, [("a", 1), ("b", 2)], partition_by="key")
    _write(session, path, [("c", 3)], partition_by="key", mode="append")
    session.createDataFrame([("a", 9)], "key STRING, value BIGINT").write.format("delta").mode("overwrite") \
        .option("replaceWhere", "key = 'a'").save(path)
    dt = DeltaTable.forPath(session, path)
    dt.delete(col("key") == "b")
    dt.update(col("key") == "c", {"value": col("value") + 1})
    dt.alias("t").merge(session.createDataFrame([("c", 0), ("d", 4)], "key STRING, value BIGINT").alias("s"),
                        "t.key = s.key").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    _write(session, path, [("c", 5)], partition_by="key", mode="append")   # partition c: two files to compact
    dt.optimize().executeCompaction()
    dt.restoreToVersion(1)
    session.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        dt.vacuum(0)
    finally:
        session.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    dt.clone(str(tmp_path / "clone"))
    session.createDataFrame([(1,)], "id INT").write.parquet(str(tmp_path / "pq"))
    DeltaTable.convertToDelta(session, f"parquet.`{tmp_path / 'pq'}`")
    DeltaTable.create(session).location(str(tmp_path / "new")).addColumn("id", "int").execute()

    seen = set()
    for p in (path, str(tmp_path / "clone"), str(tmp_path / "pq"), str(tmp_path / "new")):
        for r in DeltaTable.forPath(session, p).history().collect():
            op, params, metrics = r.operation, set(r.operationParameters), set(r.operationMetrics or {})
            kind = "WRITE_REPLACE_WHERE" if op == "WRITE" and "predicate" in params else op
            assert metrics <= _METRICS[kind], (op, metrics - _METRICS[kind])
            if op in _PARAMETERS:
                required, allowed = _PARAMETERS[op]
                assert required <= params <= allowed, (op, params)
            seen.add(op)
    assert seen >= {"WRITE", "DELETE", "UPDATE", "MERGE", "OPTIMIZE", "RESTORE", "VACUUM START", "VACUUM END",
                    "CLONE", "CONVERT", "CREATE TABLE"}

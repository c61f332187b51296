"""The native streaming sink (`tahoe.spark.streaming.NativeStreamSink`, `tahoe.spark.calls` rule 6): on a classic
session, `writeStream.format("delta").start(path)` to a local table runs as `foreachBatch`, each micro-batch
written by Spark's parquet writer and committed as the data source's sink commits it — one `STREAMING UPDATE`
version per batch with a `txn` action (appId = the query id, version = the batch id), a replayed batch skipped;
`spark.tahoe.write.nativeStreamingSink=false` keeps the data source's sink. The scenarios that matter for
exactly-once run on both sinks.

Oracles: rows derived by hand, delta-rs (`deltalake`, in a subprocess) reading the sink, the raw `_delta_log`
JSON (operations, parameters, txn actions, removes), the parquet files on disk and Spark's checkpoint files;
which sink ran is Spark's own word (`lastProgress["sink"]["description"]`)."""

from __future__ import annotations

import json
import os

import pytest

from tahoe.spark.calls import NATIVE_STREAM_SINK_CONF
from tests.spark.test_streaming import _append, _commits, _delta_rs_rows, _parquet_files

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

NATIVE = "ForeachBatchSink"


@pytest.fixture(params=["native", "datasource"])
def sink_kind(request, spark):
    """Which sink the test's streams use (the session conf; native is the default)."""
    if request.param == "datasource":
        spark.conf.set(NATIVE_STREAM_SINK_CONF, "false")
    yield request.param
    spark.conf.unset(NATIVE_STREAM_SINK_CONF)


def _run(writer, path: str):
    """Start `writer` into `path` with AvailableNow and wait for its end; the query (its failure in
    `q.exception()`)."""
    from pyspark.errors import StreamingQueryException

    q = writer.trigger(availableNow=True).start(path)
    try:
        q.awaitTermination()
    except StreamingQueryException:
        pass
    return q


def _sink_description(q) -> str:
    return next(p["sink"]["description"] for p in reversed(q.recentProgress) if p.get("sink"))


def _commit_infos(table: str) -> list[dict]:
    return [next(a["commitInfo"] for a in actions if "commitInfo" in a) for actions in _commits(table)]


def _txns(table: str) -> list[tuple[str, int]]:
    return [(a["txn"]["appId"], a["txn"]["version"]) for actions in _commits(table) for a in actions if "txn" in a]


def _leftovers(table: str) -> list[str]:
    """Staging directories or commit markers a write left in the table root."""
    return sorted(n for n in os.listdir(table) if n.startswith(("_tahoe_staging", "_tahoe_commit")))


def test_restart_after_a_failure_mid_batch_commits_every_batch_exactly_once(spark, tmp_path, sink_kind):
    """Batch 1 of a stream fails while its rows are being written (a UDF raises on id 3 while a flag
    file exists): the query fails, batch 0 alone is committed and nothing of batch 1 is left on
    disk. Restarted from the checkpoint (flag gone, one more source commit), the query writes batch 1
    again and goes on: each batch id committed once, every row exactly once, under the same query id."""
    from pyspark.sql.functions import col, udf

    src, sink, ck, flag = (str(tmp_path / n) for n in ("src", "sink", "ck", "flag"))
    for k in range(3):
        _append(src, [2 * k, 2 * k + 1])
    open(flag, "w").close()

    @udf("bigint")
    def times_ten(i):
        if i == 3 and os.path.exists(flag):
            raise RuntimeError("injected failure while writing id 3")
        return i * 10

    def writer():
        return (spark.readStream.format("delta").option("maxFilesPerTrigger", 1).load(src)
                .select("id", times_ten(col("id")).alias("v"))
                .writeStream.format("delta").option("checkpointLocation", ck))

    q = _run(writer(), sink)
    assert q.exception() is not None and "injected failure" in str(q.exception())
    assert _txns(sink) == [(q.id, 0)]                              # batch 0 only
    assert _delta_rs_rows(sink) == [(0, 0), (1, 10)]
    live = {a["add"]["path"] for actions in _commits(sink) for a in actions if "add" in a}
    assert _parquet_files(sink) == live and _leftovers(sink) == []  # nothing of the failed batch
    assert os.path.exists(os.path.join(ck, "offsets", "1")) and not os.path.exists(os.path.join(ck, "commits", "1"))

    os.remove(flag)
    _append(src, [6, 7])
    q2 = _run(writer(), sink)
    assert q2.exception() is None and q2.id == q.id
    assert (_sink_description(q2) == NATIVE) == (sink_kind == "native")
    assert _txns(sink) == [(q.id, b) for b in range(4)]            # batches 0..3, each once
    assert _delta_rs_rows(sink) == [(i, 10 * i) for i in range(8)]
    infos = _commit_infos(sink)
    assert [i["operation"] for i in infos] == ["STREAMING UPDATE"] * 4
    assert [i["operationParameters"] for i in infos] == [
        {"outputMode": "Append", "queryId": q.id, "epochId": str(b)} for b in range(4)]
    live = {a["add"]["path"] for actions in _commits(sink) for a in actions if "add" in a}
    assert _parquet_files(sink) == live and _leftovers(sink) == []


def test_complete_mode_replaces_the_table_each_batch(spark, tmp_path, sink_kind):
    """An aggregation in complete mode: each batch's version removes every file of the last one and
    adds the new counts (no empty file: the data source's sink writes none for an empty task);
    restarted after more source commits, the counts cover every source row."""
    from pyspark.sql.functions import col

    src, sink, ck = str(tmp_path / "src"), str(tmp_path / "sink"), str(tmp_path / "ck")
    _append(src, [0, 1, 2])
    _append(src, [3, 4, 5])

    def writer():
        return (spark.readStream.format("delta").load(src).groupBy((col("id") % 2).alias("odd")).count()
                .writeStream.format("delta").outputMode("complete").option("checkpointLocation", ck))

    q = _run(writer(), sink)
    assert q.exception() is None
    assert _delta_rs_rows(sink) == [(0, 3), (1, 3)]
    _append(src, [6, 7, 8])
    q2 = _run(writer(), sink)
    assert q2.exception() is None
    assert (_sink_description(q2) == NATIVE) == (sink_kind == "native")
    assert _delta_rs_rows(sink) == [(0, 5), (1, 4)]                 # 0,2,4,6,8 even; 1,3,5,7 odd
    log = _commits(sink)
    assert len(log) == 2
    first = {a["add"]["path"] for a in log[0] if "add" in a}
    assert {a["remove"]["path"] for a in log[1] if "remove" in a} == first
    assert [i["operationParameters"]["outputMode"] for i in _commit_infos(sink)] == ["Complete", "Complete"]
    for actions in log:
        assert all(json.loads(a["add"]["stats"])["numRecords"] > 0 for a in actions if "add" in a)
    assert _txns(sink) == [(q.id, 0), (q.id, 1)]


def test_partitioned_sink_and_a_replayed_batch_skipped(spark, tmp_path):
    """Native sink: `partitionBy` makes a partitioned table (Hive directories, partition values in
    the log, the data files without the column), as delta-spark's sink does. A batch the table
    already records (Spark's commit entry of batch 1 deleted, as after a crash between the table's
    commit and Spark's) is replayed on restart and skipped: no version, no file written."""
    src, sink, ck = str(tmp_path / "src"), str(tmp_path / "sink"), str(tmp_path / "ck")
    _append(src, [0, 1, 2, 3])
    _append(src, [4, 5, 6, 7, 8])

    def writer():
        return (spark.readStream.format("delta").option("maxFilesPerTrigger", 1).load(src)
                .selectExpr("id", "CAST(id % 3 AS STRING) AS part")
                .writeStream.format("delta").partitionBy("part").option("checkpointLocation", ck))

    q = _run(writer(), sink)
    assert q.exception() is None and _sink_description(q) == NATIVE
    expected = [(i, str(i % 3)) for i in range(9)]
    assert _delta_rs_rows(sink) == expected
    log = _commits(sink)
    md = next(a["metaData"] for a in log[0] if "metaData" in a)
    assert md["partitionColumns"] == ["part"]
    adds = [a["add"] for actions in log for a in actions if "add" in a]
    assert all(a["path"].startswith(f"part={a['partitionValues']['part']}/") for a in adds)
    assert {a["partitionValues"]["part"] for a in adds} == {"0", "1", "2"}
    import pyarrow.parquet as pq

    assert all(pq.read_schema(os.path.join(sink, a["path"])).names == ["id"] for a in adds)

    files = _parquet_files(sink)
    for name in ("1", ".1.crc"):
        if os.path.exists(os.path.join(ck, "commits", name)):
            os.remove(os.path.join(ck, "commits", name))
    q2 = _run(writer(), sink)
    assert q2.exception() is None and q2.id == q.id
    assert len(_commits(sink)) == 2 and _txns(sink) == [(q.id, 0), (q.id, 1)]
    assert _parquet_files(sink) == files and _leftovers(sink) == []   # nothing written for the replay
    assert os.path.exists(os.path.join(ck, "commits", "1"))            # Spark recorded the batch again
    assert _delta_rs_rows(sink) == expected


def test_the_conf_switches_back_to_the_data_source_sink(spark, tmp_path):
    """`spark.tahoe.write.nativeStreamingSink=false`: the stream runs on the data source's sink
    (Spark names the Python sink, not ForeachBatchSink) and commits the same versions; the conf
    takes only true / false. A query started on one sink continues on the other from its
    checkpoint, exactly once."""
    from tahoe.errors import InvalidOptionError

    src, sink, ck = str(tmp_path / "src"), str(tmp_path / "sink"), str(tmp_path / "ck")
    _append(src, [1, 2])

    def writer():
        return (spark.readStream.format("delta").load(src).writeStream.format("delta")
                .option("checkpointLocation", ck))

    try:
        spark.conf.set(NATIVE_STREAM_SINK_CONF, "false")
        q = _run(writer(), sink)
        assert q.exception() is None and _sink_description(q) != NATIVE
        spark.conf.set(NATIVE_STREAM_SINK_CONF, "maybe")
        with pytest.raises(InvalidOptionError, match="spark.tahoe.write.nativeStreamingSink"):
            writer().start(sink)
    finally:
        spark.conf.unset(NATIVE_STREAM_SINK_CONF)
    _append(src, [3])
    q2 = _run(writer(), sink)                                            # the default: native
    assert q2.exception() is None and _sink_description(q2) == NATIVE and q2.id == q.id
    assert _txns(sink) == [(q.id, 0), (q.id, 1)]
    assert _delta_rs_rows(sink) == [(1,), (2,), (3,)]
    assert [i["operation"] for i in _commit_infos(sink)] == ["STREAMING UPDATE"] * 2


def test_a_spark_connect_stream_runs_on_the_data_source_sink(connect, tmp_path):
    """Over Spark Connect the client cannot run `foreachBatch` in the server's JVM with tahoe's
    writer, so a Connect session keeps the data source's sink (rule 6): a Delta → Delta stream,
    restarted after another source commit, commits one `STREAMING UPDATE` version per batch with
    its `txn` (query id, batch id), every row once; Spark names the Python sink, not ForeachBatchSink."""
    src, sink, ck = str(tmp_path / "src"), str(tmp_path / "sink"), str(tmp_path / "ck")
    _append(src, [0, 1])
    _append(src, [2, 3, 4])

    def writer():
        return (connect.readStream.format("delta").option("maxFilesPerTrigger", 1).load(src)
                .selectExpr("id", "id * 10 AS v")
                .writeStream.format("delta").option("checkpointLocation", ck))

    q = _run(writer(), sink)
    assert q.exception() is None
    assert _sink_description(q) != NATIVE
    assert _delta_rs_rows(sink) == [(i, 10 * i) for i in range(5)]
    _append(src, [5])
    q2 = _run(writer(), sink)
    assert q2.exception() is None and q2.id == q.id
    assert _sink_description(q2) != NATIVE
    assert _txns(sink) == [(q.id, b) for b in range(3)]            # one batch per source commit
    assert [i["operation"] for i in _commit_infos(sink)] == ["STREAMING UPDATE"] * 3
    assert [i["operationParameters"]["epochId"] for i in _commit_infos(sink)] == ["0", "1", "2"]
    assert _delta_rs_rows(sink) == [(i, 10 * i) for i in range(6)]
    live = {a["add"]["path"] for actions in _commits(sink) for a in actions if "add" in a}
    assert _parquet_files(sink) == live and _leftovers(sink) == []

"""Structured Streaming on `format("delta")`: the table as a streaming source (admission control,
offsets that survive restarts, delta-spark's refusals of upstream changes, startingVersion, the
change data feed as a stream) and as an exactly-once sink (one commit per micro-batch carrying a
`txn` action appId = query id, version = batch id; a replayed batch commits nothing).

Real streaming queries on the shared local session (availableNow, few queries, small data) and one
pipeline in a separate, fresh Python process that never imports tahoe (Spark finds the source by
itself through `pyspark_tahoe_delta`), killed with SIGKILL and restarted from its checkpoint.

Oracles: rows written by hand (each source row expected exactly once), the raw `_delta_log` JSON
of the sink (operations, txn actions, add counts), the parquet files on disk, and delta-rs
(`deltalake`, in a subprocess) reading the sink table and the source's change data feed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest

from tahoe.write import write_table

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


def _append(path: str, ids: list[int], **kw) -> None:
    write_table(path, pa.table({"id": pa.array(ids, pa.int64())}), mode="append", **kw)


def _commits(table: str) -> list[dict]:
    """{version: [actions]} of every commit file in the table's log (raw JSON)."""
    log = os.path.join(table, "_delta_log")
    out = []
    for name in sorted(f for f in os.listdir(log) if f.endswith(".json") and f[:20].isdigit()):
        with open(os.path.join(log, name)) as fh:
            out.append([json.loads(line) for line in fh if line.strip()])
    return out


def _delta_rs(code: str) -> object:
    """Run `code` (which sets `out`) with delta-rs in a subprocess; its JSON-encoded `out`."""
    script = "import json, os\nfrom deltalake import DeltaTable\n" + textwrap.dedent(code) + \
        "\nprint('OUT' + json.dumps(out))\nos._exit(0)\n"
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("OUT")]
    assert lines, r.stderr[-3000:]
    return json.loads(lines[-1][3:])


def _delta_rs_rows(table: str) -> list[tuple]:
    rows = _delta_rs(f"""
        t = DeltaTable({table!r}).to_pyarrow_table()
        out = sorted(zip(*[t.column(c).to_pylist() for c in t.column_names]))
    """)
    return [tuple(r) for r in rows]


def _parquet_files(table: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), table) for d, _, fs in os.walk(table) if "_delta_log" not in d
            for f in fs if f.endswith(".parquet")}


def test_delta_to_delta_stream_admission_txn_restart_and_replay(spark, tmp_path):
    src, sink, ck = str(tmp_path / "src"), str(tmp_path / "sink"), str(tmp_path / "ck")
    for k in range(3):                                  # 3 commits of one file each: ids 0..5
        _append(src, [2 * k, 2 * k + 1])

    def run():
        q = (spark.readStream.format("delta").option("maxFilesPerTrigger", 1).load(src)
             .selectExpr("id", "id * 10 AS v")
             .writeStream.format("delta").option("checkpointLocation", ck).trigger(availableNow=True).start(sink))
        q.awaitTermination()
        assert q.exception() is None
        return q

    q = run()
    # maxFilesPerTrigger=1: one source file per micro-batch, each batch one sink commit
    assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [2, 2, 2]
    log = _commits(sink)
    assert len(log) == 3
    for batch, actions in enumerate(log):
        info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
        assert info["operation"] == "STREAMING UPDATE"
        assert info["operationParameters"]["outputMode"] == "Append"
        assert [(a["txn"]["appId"], a["txn"]["version"]) for a in actions if "txn" in a] == [(q.id, batch)]
        assert sum("add" in a for a in actions) == 1
    assert _delta_rs_rows(sink) == [(i, i * 10) for i in range(6)]

    # A crash after batch 2 committed to the sink but before Spark recorded it: Spark replays
    # batch 2 on restart; the sink must commit nothing for it (and delete the files it wrote).
    for name in ("2", ".2.crc"):                       # Spark's commit log entry of batch 2 and its checksum
        if os.path.exists(os.path.join(ck, "commits", name)):
            os.remove(os.path.join(ck, "commits", name))
    _append(src, [6, 7])
    _append(src, [8, 9])
    q2 = run()
    assert q2.id == q.id                                # the same query, restarted from its checkpoint
    log = _commits(sink)
    assert [a["txn"]["version"] for actions in log for a in actions if "txn" in a] == [0, 1, 2, 3, 4]
    assert _delta_rs_rows(sink) == [(i, i * 10) for i in range(10)]    # every row exactly once
    live = {a["add"]["path"] for actions in log for a in actions if "add" in a}
    assert _parquet_files(sink) == live                 # the replayed batch's files are gone

    # complete mode: each batch replaces the table's rows
    agg = str(tmp_path / "agg")
    q3 = (spark.readStream.format("delta").load(src).groupBy((spark_col("id") % 2).alias("odd")).count()
          .writeStream.format("delta").outputMode("complete").option("checkpointLocation", str(tmp_path / "ck3"))
          .trigger(availableNow=True).start(agg))
    q3.awaitTermination()
    assert _delta_rs_rows(agg) == [(0, 5), (1, 5)]


def spark_col(name):
    from pyspark.sql.functions import col

    return col(name)


def _memory_stream(spark, reader, name: str):
    """The query, run to its end (or its failure: `q.exception()`) into the memory table `name`."""
    from pyspark.errors import StreamingQueryException

    q = reader.writeStream.format("memory").queryName(name).trigger(availableNow=True).start()
    try:
        q.awaitTermination()
    except StreamingQueryException:
        pass
    return q


def test_source_refuses_upstream_changes_unless_skipped_and_starts_at_version(spark, tmp_path):
    src = str(tmp_path / "src")
    _append(src, [0, 1])                                # version 0
    _append(src, [2, 3])                                # version 1
    # version 2: delta-rs deletes one row, rewriting its file (a remove and an add: an UPDATE-like change)
    _delta_rs(f"DeltaTable({src!r}).delete('id = 0')\nout = DeltaTable({src!r}).version()")
    _append(src, [4, 5])                                # version 3

    q = _memory_stream(spark, spark.readStream.format("delta").option("startingVersion", 1).load(src),
                       "tahoe_refused")
    err = q.exception()
    assert err is not None and "DELTA_SOURCE_TABLE_IGNORE_CHANGES" in str(err)
    assert "skipChangeCommits" in str(err) and "version 2" in str(err)
    # nothing after the refused version was read; the version before it was
    assert sorted(r.id for r in spark.table("tahoe_refused").collect()) == [2, 3]

    q = _memory_stream(spark, spark.readStream.format("delta").option("startingVersion", 1)
                       .option("skipChangeCommits", "true").load(src), "tahoe_skipped")
    assert q.exception() is None
    assert sorted(r.id for r in spark.table("tahoe_skipped").collect()) == [2, 3, 4, 5]

    # no startingVersion: the snapshot first (1, 2, 3 after the delete), then later versions
    _append(src, [6])
    q = _memory_stream(spark, spark.readStream.format("delta").load(src), "tahoe_snapshot")
    assert q.exception() is None
    assert sorted(r.id for r in spark.table("tahoe_snapshot").collect()) == [1, 2, 3, 4, 5, 6]


def test_change_feed_batch_and_stream_match_delta_rs(spark, tmp_path):
    src = str(tmp_path / "cdf")
    # delta-rs writes the table with CDF on: insert, update, delete, merge
    _delta_rs(f"""
        import pyarrow as pa
        from deltalake import write_deltalake
        write_deltalake({src!r}, pa.table({{"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]}}),
                        configuration={{"delta.enableChangeDataFeed": "true"}})
        dt = DeltaTable({src!r})
        dt.update(predicate="id = 2", updates={{"v": "'B'"}})
        dt.delete("id = 3")
        src = pa.table({{"id": pa.array([1, 4], pa.int64()), "v": ["A", "d"]}})
        (dt.merge(src, "t.id = s.id", source_alias="s", target_alias="t")
           .when_matched_update_all().when_not_matched_insert_all().execute())
        out = dt.version()
    """)
    expected = _delta_rs(f"""
        t = DeltaTable({src!r}).load_cdf(starting_version=0).read_all()
        out = sorted(zip(*[t.column(c).to_pylist() for c in ("id", "v", "_change_type", "_commit_version")]))
    """)
    expected = [tuple(r) for r in expected]
    assert {r[2] for r in expected} == {"insert", "update_preimage", "update_postimage", "delete"}

    def rows(df):
        return sorted((r.id, r.v, r._change_type, r._commit_version) for r in df.collect())

    batch = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 0).load(src)
    assert rows(batch) == expected
    import tahoe

    t = tahoe.Table(src).changes(0)
    assert sorted(zip(*[t.column(c).to_pylist() for c in ("id", "v", "_change_type", "_commit_version")])) == expected
    ranged = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 1)
              .option("endingVersion", 2).load(src))
    assert rows(ranged) == [r for r in expected if 1 <= r[3] <= 2]

    # the change feed as a stream: from version 0 the same rows, in batches of at most one version's
    # files; the commit timestamps as delta-rs reports them
    q = _memory_stream(spark, spark.readStream.format("delta").option("readChangeFeed", "true")
                       .option("startingVersion", 0).option("maxFilesPerTrigger", 1).load(src), "tahoe_cdf")
    assert q.exception() is None
    assert rows(spark.table("tahoe_cdf")) == expected
    assert len([p for p in q.recentProgress if p["numInputRows"]]) >= 4


def test_change_feed_errors_timestamps_renames_and_optimize_through_spark(spark, tmp_path):
    """`spark.read.format("delta").option("readChangeFeed", "true")` gives delta-spark's errors and
    rows on the tables of tests/read/cdf_tables (the same checks Table.changes and the CLI pass in
    tests/read/test_changes.py): CDF off in the range (the DELTA_MISSING_CHANGE_DATA text), a start
    after the latest version, startingTimestamp / endingTimestamp, an OPTIMIZE in the range (no
    rows), a rename inside the range, the end version's schema for a range before the renames."""
    from tahoe.errors import ChangeDataFeedError, ChangeDataRangeError
    from tahoe.read.changes import CdfNotEnabledError
    from tests.read.cdf_tables import (
        BASE_MS, HOUR_MS, LATE_CDF_CHANGES, RENAMED_V0_V1, late_cdf, missing_change_data, renamed,
        start_after_latest,
    )

    late = late_cdf(str(tmp_path / "late"))
    ren = renamed(str(tmp_path / "renamed"))

    def cdf(path, **options):
        r = spark.read.format("delta").option("readChangeFeed", "true")
        for k, v in options.items():
            r = r.option(k, v)
        return r.load(path)

    def rows(df, col=None):
        cols = ["id", col, "_change_type", "_commit_version"] if col else ["id", "_change_type", "_commit_version"]
        return sorted(tuple(r[c] for c in cols) for r in df.collect())

    with pytest.raises(CdfNotEnabledError) as ei:
        cdf(late, startingVersion=0).collect()
    assert missing_change_data(0, 5, 0) in str(ei.value)
    with pytest.raises(ChangeDataRangeError) as ei:
        cdf(late, startingVersion=6).collect()
    assert start_after_latest(6, 5) in str(ei.value)
    assert rows(cdf(late, startingVersion=3)) == LATE_CDF_CHANGES          # version 4, OPTIMIZE: nothing
    assert cdf(late, startingVersion=4, endingVersion=4).count() == 0
    by_ts = cdf(late, startingTimestamp="2024-01-01 02:30:00", endingTimestamp="2024-01-01T04:30:00Z").collect()
    assert [(r.id, r._commit_version) for r in by_ts] == [(3, 3)]
    assert int(by_ts[0]._commit_timestamp.timestamp() * 1000) == BASE_MS + 3 * HOUR_MS

    with pytest.raises(ChangeDataFeedError, match="DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE") as ei:
        cdf(ren, startingVersion=0).collect()
    assert "we found an incompatible schema change at version 2" in str(ei.value)
    early = cdf(ren, startingVersion=0, endingVersion=1)
    assert early.columns == ["id", "a", "_change_type", "_commit_version", "_commit_timestamp"]
    assert rows(early, "a") == RENAMED_V0_V1


def test_stream_stops_at_a_rename_with_delta_spark_error(spark, tmp_path):
    """A running stream over a column-mapping table meets a column rename: it stops with
    DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE_USE_SCHEMA_LOG, having delivered exactly the rows
    written before the rename (oracle: the ids written, by hand)."""
    import tahoe
    from pyspark.errors import StreamingQueryException

    src = str(tmp_path / "src")
    write_table(src, pa.table({"id": pa.array([0, 1], pa.int64()), "a": ["x", "y"]}),
                properties={"delta.columnMapping.mode": "name"})
    q = (spark.readStream.format("delta").load(src).writeStream.format("memory").queryName("tahoe_renamed")
         .trigger(processingTime="100 milliseconds").start())
    try:
        q.processAllAvailable()
        assert sorted(r.id for r in spark.table("tahoe_renamed").collect()) == [0, 1]
        tahoe.Table(src).rename_column("a", "b")
        write_table(src, pa.table({"id": pa.array([2], pa.int64()), "b": ["z"]}), mode="append")
        with pytest.raises(StreamingQueryException) as ei:
            q.processAllAvailable()
        assert "DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE_USE_SCHEMA_LOG" in str(ei.value)
        assert "Streaming read is not supported on tables with read-incompatible schema changes" in str(ei.value)
        assert sorted(r.id for r in spark.table("tahoe_renamed").collect()) == [0, 1]
    finally:
        q.stop()


def test_snapshot_first_stream_applies_deletion_vectors(spark, tmp_path):
    """A stream with no starting version reads the snapshot first: a file whose rows were deleted
    with a deletion vector gives only its live rows; later appends follow. Oracle: the rows written
    minus the rows deleted (by position: row i holds id i)."""
    from tahoe.log import DeltaLog
    from tahoe.write import delete_rows

    src = str(tmp_path / "dv")
    write_table(src, pa.table({"id": pa.array(range(10), pa.int64())}),
                properties={"delta.enableDeletionVectors": "true"})
    (f,) = DeltaLog.for_table(src).snapshot().add_files()
    delete_rows(src, {f.path: [1, 4, 7]})
    assert DeltaLog.for_table(src).snapshot().add_files()[0].deletion_vector is not None
    _append(src, [10, 11])
    q = _memory_stream(spark, spark.readStream.format("delta").option("maxFilesPerTrigger", 1).load(src), "tahoe_dv")
    assert q.exception() is None
    assert sorted(r.id for r in spark.table("tahoe_dv").collect()) == [0, 2, 3, 5, 6, 8, 9, 10, 11]


def test_sink_enforces_check_constraints_and_computes_generated_and_identity_columns(spark, tmp_path):
    """A streaming write into a table with an identity column (start 100, step 10), a generated
    column (y = x * 2) and a CHECK constraint (x >= 0): every batch's rows get distinct identity
    values on the sequence and y computed; a batch with a row violating the constraint fails the
    query and commits nothing (no version, no file left). Oracles: the values written by hand, the
    raw log (versions), the files on disk, and delta-rs reading the sink."""
    import tahoe
    from pyspark.errors import StreamingQueryException
    from tahoe.spark import DeltaTable, IdentityGenerator

    src, sink, ck = str(tmp_path / "src"), str(tmp_path / "sink"), str(tmp_path / "ck")
    (DeltaTable.create(spark).location(sink)
        .addColumn("id", "BIGINT", generatedAlwaysAs=IdentityGenerator(start=100, step=10))
        .addColumn("x", "BIGINT")
        .addColumn("y", "BIGINT", generatedAlwaysAs="x * 2").execute())
    tahoe.Table(sink).add_constraint("x_nonneg", "x >= 0")
    _append(src, [1, 2, 3])
    _append(src, [4, 5])

    def run():
        q = (spark.readStream.format("delta").option("maxFilesPerTrigger", 1).load(src).selectExpr("id AS x")
             .writeStream.format("delta").option("checkpointLocation", ck).trigger(availableNow=True).start(sink))
        try:
            q.awaitTermination()
        except StreamingQueryException:
            pass
        return q

    assert run().exception() is None
    got = _delta_rs(f"""
        t = DeltaTable({sink!r}).to_pyarrow_table()
        out = sorted(zip(*[t.column(c).to_pylist() for c in ("x", "y", "id")]))
    """)
    assert [(x, y) for x, y, _ in got] == [(x, 2 * x) for x in range(1, 6)]
    ids = [i for _, _, i in got]
    assert len(set(ids)) == 5 and all(i >= 100 and (i - 100) % 10 == 0 for i in ids)
    hwm = int(tahoe.Table(sink).schema.field("id").metadata["delta.identity.highWaterMark"])
    assert hwm == max(ids)
    version = tahoe.Table(sink).version

    _append(src, [6, -1])                                  # a batch with a row breaking x >= 0
    q = run()
    assert q.exception() is not None and "x_nonneg" in str(q.exception())
    assert tahoe.Table(sink).version == version            # nothing committed
    live = {a["add"]["path"] for actions in _commits(sink) for a in actions if "add" in a}
    assert _parquet_files(sink) == live                    # no file of the failed batch left behind


_PIPELINE = """
import os, sys
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # Spark's Python workers: this environment
from pyspark.sql import SparkSession
# a fresh session: tahoe is never imported here, no register(), no addPyFile: Spark finds the
# `delta` source by itself (pyspark_tahoe_delta)
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.sql.shuffle.partitions", "1").getOrCreate())
src, sink, ck, trigger = sys.argv[1:5]
if trigger != "availableNow":
    # partitionBy, as delta-spark users write it, batch and streaming: tahoe's calls reach this
    # process through its .pth hook (_tahoe_pyspark_hook) though it never imports tahoe: the hook
    # put tahoe.spark.patches' wrappers on PySpark's classes; what they run is imported at the first call
    assert "tahoe.spark.calls" not in sys.modules and "tahoe.spark.patches" in sys.modules
    spark.range(6).selectExpr("id", "id % 2 AS p").write.format("delta").partitionBy("p").save(sys.argv[5])
w = (spark.readStream.format("delta").option("maxFilesPerTrigger", 1).load(src)
     .selectExpr("id", "id % 3 AS part")
     .writeStream.format("delta").option("checkpointLocation", ck).partitionBy("part"))
w = w.trigger(availableNow=True) if trigger == "availableNow" else w.trigger(processingTime=trigger)
q = w.start(sink)
print("STARTED", flush=True)
q.awaitTermination()
print("ENDED", flush=True)
"""

# Another process appending to the source while the pipeline runs: commit i holds the ids
# 1000 + 3i .. 1000 + 3i + 2; it goes on until the file `stop` appears, then prints how many
# commits it made.
_APPENDER = """
import os, sys, time
import pyarrow as pa
from tahoe.write import write_table
src, stop = sys.argv[1:3]
i = 0
while not os.path.exists(stop):
    write_table(src, pa.table({"id": pa.array([1000 + 3 * i + j for j in range(3)], pa.int64())}), mode="append")
    i += 1
    print("APPENDED", i, flush=True)
    time.sleep(0.25)
print("DONE", i, flush=True)
"""


def _batches(ck: str, kind: str) -> set[int]:
    d = os.path.join(ck, kind)
    return {int(n) for n in os.listdir(d) if n.isdigit()} if os.path.isdir(d) else set()


def _kill_mid_batch(proc, ck: str, appender, after: int, deadline_s: float = 300) -> int:
    """Wait until the pipeline `proc` has planned a batch N > `after` (its `offsets/N` written)
    that it has not committed (no `commits/N`) while the appender still runs, then SIGKILL it (its
    process group: the driver and its JVM). Returns N; the caller asserts the batch was in flight."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the pipeline exited ({proc.returncode}): {proc.stderr.read()[-3000:]}")
        assert appender.poll() is None, "the appender stopped early"
        planned, done = _batches(ck, "offsets"), _batches(ck, "commits")
        if planned and max(planned) > after and max(planned) not in done and done and max(done) >= after:
            n = max(planned)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
            return n
        time.sleep(0.02)
    raise AssertionError("no batch in flight before the deadline")


def test_pipeline_killed_mid_batch_restarts_exactly_once(spark, tmp_path):
    """A Delta -> Delta pipeline in a fresh process (no tahoe import, no register), fed by appends
    from another process, is SIGKILLed while a batch is provably in flight (its offsets written,
    its commit not), first with trigger(processingTime=...), then — restarted from the checkpoint
    in another fresh process — with trigger(availableNow=True); a last availableNow run in this
    session drains the source. Every row the appender and the setup wrote is in the sink exactly
    once; each batch id committed once. The fresh process also shows that `write.partitionBy` and
    `writeStream.partitionBy` work there (tahoe's .pth hook), not silently dropped. Oracles: the ids written (known by construction), delta-rs
    reading the sink, the raw log's txn actions, Spark's checkpoint files."""
    src, sink, ck = str(tmp_path / "src"), str(tmp_path / "sink"), str(tmp_path / "ck")
    stop, batch = str(tmp_path / "stop"), str(tmp_path / "batch")
    for k in range(4):
        _append(src, [3 * k, 3 * k + 1, 3 * k + 2])
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_SUBMIT_ARGS",)}

    def pipeline(trigger: str):
        return subprocess.Popen([sys.executable, "-c", _PIPELINE, src, sink, ck, trigger, batch], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, cwd=str(tmp_path), start_new_session=True)

    procs = [pipeline("500 milliseconds")]
    appender = None
    try:
        # the appender starts once the pipeline has committed a batch (the pipeline is running)
        deadline = time.monotonic() + 300
        while not _batches(ck, "commits"):
            assert procs[0].poll() is None, procs[0].stderr.read()[-3000:]
            assert time.monotonic() < deadline, "the pipeline committed no batch"
            time.sleep(0.05)
        appender = subprocess.Popen([sys.executable, "-c", _APPENDER, src, stop], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
        n1 = _kill_mid_batch(procs[0], ck, appender, after=1)
        assert n1 in _batches(ck, "offsets") and n1 not in _batches(ck, "commits")   # in flight when killed

        procs.append(pipeline("availableNow"))    # restarted from the checkpoint, appends going on
        n2 = _kill_mid_batch(procs[1], ck, appender, after=n1)
        assert n2 in _batches(ck, "offsets") and n2 not in _batches(ck, "commits")
    finally:
        Path(stop).touch()
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=60)
    out, err = appender.communicate(timeout=120)
    assert appender.returncode == 0, err[-3000:]
    appended = int(out.split("DONE")[1].split()[0])
    assert appended >= 2
    expected = sorted([(i, i % 3) for i in range(12)] +
                      [(i, i % 3) for c in range(appended) for i in range(1000 + 3 * c, 1003 + 3 * c)])

    q = (spark.readStream.format("delta").option("maxFilesPerTrigger", 20).load(src)
         .selectExpr("id", "id % 3 AS part")
         .writeStream.format("delta").option("checkpointLocation", ck).partitionBy("part")
         .trigger(availableNow=True).start(sink))
    q.awaitTermination()
    assert q.exception() is None
    assert _delta_rs_rows(sink) == expected                 # every row exactly once
    log = _commits(sink)
    versions = [a["txn"]["version"] for actions in log for a in actions if "txn" in a]
    assert versions == sorted(set(versions))                # each batch id committed once
    assert {n1, n2} <= set(versions)                        # the killed batches were replayed and committed
    md = next(a["metaData"] for a in log[0] if "metaData" in a)
    assert md["partitionColumns"] == ["part"]               # writeStream.partitionBy in the fresh process
    batch_md = next(a["metaData"] for a in _commits(batch)[0] if "metaData" in a)
    assert batch_md["partitionColumns"] == ["p"]            # write.partitionBy in the fresh process
    assert _delta_rs_rows(batch) == [(i, i % 2) for i in range(6)]

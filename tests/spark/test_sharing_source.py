"""`spark.read.format("deltaSharing")` and `spark.readStream.format("deltaSharing")` — tahoe's
Python data source for shared tables — against tahoe's sharing server running as a process.

Oracles: tahoe's pandas/Arrow client reading the same table (itself checked against the
conformance tables' expected rows and the official client in tests/sharing/test_client.py), rows
written down by hand, what a proxy saw on the wire (pushed filters sent as jsonPredicateHints),
and for the SIGKILLed stream the file sink's own commit log (`_spark_metadata`)."""

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
import pyarrow.parquet as pq
import pytest

import tahoe.sharing as tds
from tahoe.write import write_table
from tests.conftest import conformance
from tests.sharing.client_fixtures import DVCM_LATEST, REPO, share_server, tname  # noqa: F401
from tests.sharing.fault_proxy import FaultProxy
from tests.sharing.helpers import rows

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

GOLDEN_SAMPLE = ["dv-with-columnmapping", "data-reader-timestamp_ntz-id-mode", "data-reader-partition-values",
                 "data-reader-nested-struct", "data-reader-map", "basic-decimal-table", "log-replay-dv-key-cases",
                 "kernel-timestamp-int96", "data-reader-array-complex-objects"]


def _spark_rows(df) -> list:
    return rows(df.toArrow())


@pytest.mark.parametrize("table", ["w.dvcm", "w.cdf", "w.stats"] +
                         [pytest.param(f"g.{tname(g)}", marks=conformance) for g in GOLDEN_SAMPLE])
def test_rows_equal_the_pandas_readers(spark, share_server, table):
    share, name = table.split(".")
    url = share_server.table_url("alice", share, name)
    df = spark.read.format("deltaSharing").load(url)
    ours = tds.load_as_arrow(url)
    assert df.columns == ours.column_names
    assert _spark_rows(df) == rows(ours), table


@pytest.mark.parametrize("zone,wall_clock", [("America/Los_Angeles", "2023-12-31 18:30:00"),
                                             ("Asia/Kolkata", "2024-01-01 08:00:00")])
def test_timestamp_options_are_read_in_the_session_time_zone(spark, share_server, zone, wall_clock):
    """As the official connector casts them (`Cast(.., TimestampType, sessionLocalTimeZone)`): a
    zone-less timestampAsOf / startingTimestamp is wall-clock time in the session zone — here
    02:30Z, between versions 2 (02:00Z) and 3 (03:00Z), written in the zone's wall-clock time."""
    url = share_server.table_url("alice", "w", "cdf")
    s = spark.newSession()
    s.conf.set("spark.sql.session.timeZone", zone)
    assert _spark_rows(s.read.format("deltaSharing").option("timestampAsOf", wall_clock).load(url)) == \
        rows(tds.load_as_arrow(url, version=2))
    by_ts = s.read.format("deltaSharing").option("readChangeFeed", "true") \
        .option("startingTimestamp", wall_clock).option("endingTimestamp", "2024-01-01T04:30:00Z").load(url)
    assert sorted({r["_commit_version"] for r in by_ts.collect()}) == [3, 4]


def test_time_travel_change_feed_and_formats(spark, share_server):
    url = share_server.table_url("alice", "w", "cdf")
    r = spark.read.format("deltaSharing")
    for v in (1, 3, 5):
        assert _spark_rows(r.option("versionAsOf", v).load(url)) == \
            rows(tds.load_as_arrow(url, version=v)), v
    assert _spark_rows(spark.read.format("deltaSharing").option("timestampAsOf", "2024-01-01 02:30:00").load(url)) == \
        rows(tds.load_as_arrow(url, version=2))
    ch = spark.read.format("deltaSharing").option("readChangeFeed", "true").option("startingVersion", 1) \
        .option("endingVersion", 4).load(url)
    assert ch.columns[-3:] == ["_change_type", "_commit_version", "_commit_timestamp"]
    got = sorted((r["id"], r["_change_type"], r["_commit_version"]) for r in ch.collect())
    assert got == sorted([(1, "insert", 1), (2, "insert", 1), (3, "insert", 1), (4, "insert", 2), (5, "insert", 2),
                          (5, "delete", 3), (1, "update_preimage", 4), (1, "update_postimage", 4)])
    assert {r["_commit_timestamp"].hour for r in ch.collect()} == {1, 2, 3, 4}
    by_ts = spark.read.format("deltaSharing").option("readChangeFeed", "true") \
        .option("startingTimestamp", "2024-01-01 02:30:00").option("endingTimestamp", "2024-01-01T04:30:00Z").load(url)
    assert sorted({r["_commit_version"] for r in by_ts.collect()}) == [3, 4]
    dv = share_server.table_url("alice", "w", "dvcm")
    dvch = spark.read.format("deltaSharing").option("readChangeFeed", "true").option("startingVersion", 1).load(dv)
    assert sorted((r["id"], r["_change_type"]) for r in dvch.collect()) == \
        sorted([(0, "delete"), (6, "delete"), (3, "delete"), (100, "insert"), (101, "insert")])
    assert sorted((r["id"], r["Grp Name"]) for r in spark.read.format("deltaSharing")
                  .option("responseFormat", "delta").load(dv).collect()) == DVCM_LATEST
    with pytest.raises(Exception, match="UNSUPPORTED_OPERATION|400"):
        spark.read.format("deltaSharing").option("responseFormat", "parquet").load(dv).collect()
    # load_as_spark / load_table_changes_as_spark of the pandas module
    assert _spark_rows(tds.load_as_spark(url, version=2)) == rows(tds.load_as_arrow(url, version=2))
    assert tds.load_table_changes_as_spark(url, starting_version=3, ending_version=3).count() == 1


def test_options_are_checked(spark, share_server):
    url = share_server.table_url("alice", "w", "cdf")
    with pytest.raises(Exception, match="unknown option 'maxfilesperbatch'"):
        spark.read.format("deltaSharing").option("maxFilesPerBatch", 3).load(url).collect()
    with pytest.raises(Exception, match="maxFilesPerTrigger' applies only to streaming"):
        spark.read.format("deltaSharing").option("maxFilesPerTrigger", 3).load(url).collect()
    with pytest.raises(Exception, match="either provide 'versionAsOf' or 'timestampAsOf'"):
        spark.read.format("deltaSharing").option("versionAsOf", 1).option("timestampAsOf", "2024-01-01").load(url).collect()
    with pytest.raises(Exception, match="need readChangeFeed"):
        spark.read.format("deltaSharing").option("startingVersion", 1).load(url).collect()
    with pytest.raises(Exception, match="responseFormat"):
        spark.read.format("deltaSharing").option("responseFormat", "csv").load(url).collect()
    with pytest.raises(Exception, match="Invalid 'url'"):
        spark.read.format("deltaSharing").load("no-profile").collect()


def test_pushed_filters_are_sent_as_json_predicate_hints(spark, share_server, tmp_path):
    host, port = share_server.url.split("//")[1].split("/")[0].split(":")
    proxy = FaultProxy((host, int(port)))
    try:
        prof = json.loads(Path(share_server.profiles["alice"]).read_text())
        prof["endpoint"] = proxy.base()
        p = tmp_path / "via-proxy.share"
        p.write_text(json.dumps(prof))
        df = spark.read.format("deltaSharing").load(f"{p}#w.t.stats").filter("id >= 35 AND id < 52")
        assert sorted(r["id"] for r in df.collect()) == list(range(35, 52))
        bodies = [json.loads(e.body) for e in proxy.requests("POST", "/query")]
        hints = [json.loads(b["jsonPredicateHints"]) for b in bodies if "jsonPredicateHints" in b]
        from tahoe.spark.internals import python_scans_scoped

        if not python_scans_scoped(spark):
            # Spark 4.3 shares one scan's pushdown plan among all scans of a DataFrame
            # (test_one_read_used_twice_with_different_filters): no hints are sent there
            assert not hints, bodies
        else:
            assert hints, bodies
            flat = json.dumps(hints[-1])
            assert '"greaterThanOrEqual"' in flat and '"lessThan"' in flat and '"35"' in flat and '"52"' in flat
            # the server pruned files with them: only the files of ids 30..59 were downloaded
            assert len({e.path for e in proxy.requests("GET", "/files/")}) == 3
        dv = spark.read.format("deltaSharing").load(f"{p}#w.t.dvcm").filter("`Grp Name` IN ('x', 'z')")
        assert sorted((r["id"], r["Grp Name"]) for r in dv.collect()) == [r for r in DVCM_LATEST if r[1] in "xz"]
    finally:
        proxy.close()


def test_readme_examples_of_the_spark_connector(spark, share_server):
    """The official README's Python / CDF / streaming examples, with the placeholders filled."""
    table_path = share_server.table_url("alice", "w", "cdf")
    df = spark.read.format("deltaSharing").load(table_path)
    assert df.count() == 5
    df = spark.read.format("deltaSharing") \
        .option("readChangeFeed", "true") \
        .option("startingVersion", "3") \
        .load(table_path)
    assert sorted(r["_change_type"] for r in df.collect()) == ["delete", "insert", "update_postimage", "update_preimage"]
    df = spark.readStream.format("deltaSharing") \
        .option("startingVersion", "1") \
        .option("skipChangeCommits", "true") \
        .load(table_path)
    q = df.writeStream.format("memory").queryName("readme_stream").trigger(availableNow=True).start()
    q.awaitTermination(300)
    # versions 3 (a delete) and 4 (an update) change data: skipped; the inserts of 1, 2 and 5 read
    assert sorted(r["id"] for r in spark.sql("select id from readme_stream").collect()) == [1, 2, 3, 4, 5, 6]


def test_streams_snapshot_then_changes_with_rate_limits(spark, share_server, tmp_path):
    url = share_server.table_url("alice", "w", "cdf")

    def run(name, **opts):
        r = spark.readStream.format("deltaSharing")
        for k, v in opts.items():
            r = r.option(k, v)
        q = r.load(url).writeStream.format("memory").queryName(name).trigger(availableNow=True).start()
        q.awaitTermination(300)
        if q.exception() is not None:
            raise RuntimeError(str(q.exception()))
        return spark.sql(f"select * from {name}").collect(), [p for p in q.recentProgress if p["numInputRows"]]
    # no starting version: the latest snapshot (files ordered by id), one file per batch
    rows, progress = run("snap", maxFilesPerTrigger=1)
    assert sorted(r["id"] for r in rows) == [1, 2, 3, 4, 6]
    assert len(progress) == 4   # the snapshot's 4 files: p=a (rewritten at v4), two of p=b, p=d
    # change feed from version 1: every change, a version's cdc files in one batch
    rows, _ = run("cdf_stream", readChangeFeed="true", startingVersion=1, maxFilesPerTrigger=1)
    assert sorted((r["id"], r["_change_type"], r["_commit_version"]) for r in rows) == sorted(
        [(1, "insert", 1), (2, "insert", 1), (3, "insert", 1), (4, "insert", 2), (5, "insert", 2), (5, "delete", 3),
         (1, "update_preimage", 4), (1, "update_postimage", 4), (6, "insert", 5)])
    # removes fail the stream unless told otherwise
    with pytest.raises(Exception, match="Detected deleted data .* version 3"):
        run("strict", startingVersion=1)
    with pytest.raises(Exception, match="Detected a data update .* version 4"):
        run("deletes_ok", startingVersion=1, ignoreDeletes="true")
    rows, _ = run("changes_ok", startingVersion=1, ignoreChanges="true")
    assert sorted(r["id"] for r in rows) == [1, 1, 2, 2, 3, 4, 5, 6]   # version 4 rewrote ids 1 and 2
    rows, _ = run("bytes", startingVersion=2, skipChangeCommits="true", maxBytesPerTrigger="1b")
    assert sorted(r["id"] for r in rows) == [4, 5, 6]


STREAM_SCRIPT = textwrap.dedent("""
    import sys
    from tahoe.spark.session import local_session
    import tahoe.spark
    url, checkpoint, sink, mode = sys.argv[1:5]
    spark = local_session("local[2]", "sharing-stream", quick_start=True)
    tahoe.spark.register(spark)
    df = (spark.readStream.format("deltaSharing").option("startingVersion", 0)
          .option("maxFilesPerTrigger", 1).load(url))
    w = df.writeStream.format("parquet").option("checkpointLocation", checkpoint).option("path", sink)
    q = w.trigger(availableNow=True).start() if mode == "drain" else w.trigger(processingTime="200 milliseconds").start()
    print("started", flush=True)
    q.awaitTermination()
    print("done", flush=True)
""")


def _sink_files(sink: Path) -> list[str]:
    """The files the parquet sink committed, from its own log (`_spark_metadata`: the latest
    compaction and the batches after it)."""
    meta = sink / "_spark_metadata"
    names = [n for n in os.listdir(meta) if not n.startswith(".") and n.replace(".compact", "").isdigit()]
    compacts = [int(n.split(".")[0]) for n in names if n.endswith(".compact")]
    base = max(compacts) if compacts else -1
    files = []
    for n in names:
        b = int(n.split(".")[0])
        if b < base or (b == base and not n.endswith(".compact")):
            continue
        for line in (meta / n).read_text().splitlines()[1:]:
            e = json.loads(line)
            if e.get("action", "add") == "add":
                files.append(e["path"].replace("file://", "").replace("file:", ""))
    return files


def test_a_stream_delivers_each_row_once_across_sigkill_and_restart(share_server, tmp_path):
    """Provider-side appends feed a stream (a separate Spark process writing a parquet sink with a
    checkpoint); the process is SIGKILLed mid-run, more rows are appended, and a restarted
    process drains the table from the checkpoint. Every appended row is in the sink exactly once."""
    table = share_server.tables["w.growing"]
    url = share_server.table_url("alice", "w", "growing")
    expected = list(range(10))               # version 0 (see client_fixtures)
    def append(v):
        ids = list(range(v * 100, v * 100 + 7))
        write_table(table, pa.table({"id": pa.array(ids, pa.int64())}), mode="append")
        expected.extend(ids)
    for v in range(1, 6):
        append(v)
    checkpoint, sink = tmp_path / "checkpoint", tmp_path / "sink"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # its own process group: the kill takes the driver and its JVM at once, as a crash would
    proc = subprocess.Popen([sys.executable, "-c", STREAM_SCRIPT, url, str(checkpoint), str(sink), "run"],
                            cwd=str(REPO), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.time() + 300
        commits = checkpoint / "commits"
        while time.time() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"the stream died: {proc.stderr.read()[-3000:]}")
            done = [n for n in os.listdir(commits) if n.isdigit()] if commits.exists() else []
            if len(done) >= 3:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the stream made no progress")
        for v in range(6, 9):
            append(v)
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    planned = sorted(int(n) for n in os.listdir(checkpoint / "offsets") if n.isdigit())
    committed = sorted(int(n) for n in os.listdir(checkpoint / "commits") if n.isdigit())
    for v in range(9, 11):
        append(v)
    r = subprocess.run([sys.executable, "-c", STREAM_SCRIPT, url, str(checkpoint), str(sink), "drain"],
                       cwd=str(REPO), env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "done" in r.stdout, r.stderr[-3000:]
    ids = []
    for f in _sink_files(sink):
        ids.extend(pq.read_table(f).column("id").to_pylist())
    assert sorted(ids) == sorted(expected)          # each row exactly once
    assert len(planned) >= 3 and committed           # the kill came after some committed batches


def test_oauth_profiles_and_credentials_given_as_options(spark, share_server):
    oa = json.loads(Path(share_server.profiles["oa"]).read_text())
    df = spark.read.format("deltaSharing").load(share_server.table_url("oa", "w", "dvcm"))
    assert sorted((r["id"], r["Grp Name"]) for r in df.collect()) == DVCM_LATEST
    r = spark.read.format("deltaSharing").option("shareCredentialsVersion", 2) \
        .option("shareCredentialsType", "oauth_client_credentials").option("endpoint", oa["endpoint"]) \
        .option("tokenEndpoint", oa["tokenEndpoint"]).option("clientId", oa["clientId"]) \
        .option("clientSecret", oa["clientSecret"])
    assert sorted((x["id"], x["Grp Name"]) for x in r.load("w.t.dvcm").collect()) == DVCM_LATEST
    alice = json.loads(Path(share_server.profiles["alice"]).read_text())
    df = spark.read.format("deltaSharing").option("endpoint", alice["endpoint"]) \
        .option("bearerToken", alice["bearerToken"]).load("w.t.cdf")
    assert df.count() == 5


_FRESH_RECIPIENT = """
import os, sys
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # Spark's Python workers: this environment
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
import tahoe.sharing as delta_sharing          # the import swap; never tahoe.spark, no register()

profile_file, cdf_rows, n_changes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
table_url = profile_file + "#w.t.cdf"

# If the code is running with PySpark, you can use `load_as_spark` to load the table as a Spark DataFrame.
df = delta_sharing.load_as_spark(table_url)
assert df.count() == cdf_rows, df.count()
assert delta_sharing.load_as_spark(table_url, version=1).count() == int(sys.argv[4])

# If the code is running with PySpark, you can use `load_table_changes_as_spark` to load the table changes.
changes = delta_sharing.load_table_changes_as_spark(table_url, starting_version=0, ending_version=5)
assert changes.count() == n_changes, changes.count()

# the official Spark connector's way
df = spark.read.format("deltaSharing").load(table_url)
assert sorted(r["id"] for r in df.collect()) == sorted(r["id"] for r in delta_sharing.load_as_spark(table_url).collect())
assert not [m for m in sys.modules if m == "tahoe.spark" or m.startswith("tahoe.spark.")], "tahoe.spark was imported"
print("TAHOE-OK", flush=True)
"""


def test_deltasharing_in_a_fresh_process_without_register(share_server):
    """A fresh Python process with its own Spark session and tahoe installed — no register(), no
    tahoe.spark import (and tahoe's .pth hook off, so nothing of tahoe.spark runs in it) — reads a
    shared table with `spark.read.format("deltaSharing")` (Spark finds the source by itself through
    `pyspark_tahoe_sharing`) and runs the official connector's README lines for Spark after the
    import swap (`load_as_spark`, `load_table_changes_as_spark`). Oracle: the rows written down for
    the `cdf` table (tests/sharing/conftest)."""
    from tests.sharing.conftest import CDF_CHANGES, cdf_rows

    env = {**os.environ, "TAHOE_PYSPARK_HOOK": "0"}
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    r = subprocess.run([sys.executable, "-c", _FRESH_RECIPIENT, share_server.profiles["alice"],
                        str(cdf_rows().num_rows), str(len(CDF_CHANGES)), str(cdf_rows(1).num_rows)],
                       capture_output=True, text=True, timeout=600, env=env, cwd=str(REPO))
    errors = "\n".join(ln for ln in r.stderr.splitlines() if not ln.startswith(("\tat ", "\t...")))
    assert "TAHOE-OK" in r.stdout, errors[-5000:]


def test_one_read_used_twice_with_different_filters(spark, share_server):
    """A self-union and a self-join of ONE `deltaSharing` DataFrame with different filters: Spark
    4.3 shares the partitions a Python data source planned after `pushFilters` among every scan of
    the DataFrame (`tahoe.spark.internals.python_scans_scoped`), so the server's files for the last
    scan's predicate hints would be read by all of them, silently losing rows. Oracle: tahoe's
    pandas/Arrow client's rows of the same table, filtered here."""
    url = share_server.table_url("alice", "w", "stats")
    ids = sorted(tds.load_as_arrow(url).column("id").to_pylist())
    df = spark.read.format("deltaSharing").load(url)
    low, high = df.where("id < 5"), df.where("id >= 52")
    want_low, want_high = [i for i in ids if i < 5], [i for i in ids if i >= 52]
    assert want_low and want_high
    got = sorted(r["id"] for r in low.select("id").union(high.select("id")).collect())
    assert got == want_low + want_high
    pairs = sorted(tuple(r) for r in low.alias("a").crossJoin(high.alias("b")).selectExpr("a.id", "b.id").collect())
    assert pairs == [(a, b) for a in want_low for b in want_high]

"""The demo pipeline (`tahoe demo [DIR]`, the README's first command), on local disk with a local[2] PySpark
session and no JVM jars:

  1. ingest a partitioned table of orders with `format("delta")` (change data feed, deletion vectors on);
  2. MERGE, UPDATE and DELETE with delta-spark's API (`tahoe.spark.DeltaTable`), merge-on-read;
  3. time travel by version and timestamp, and the history;
  4. the change feed of the DML commits;
  5. share it: a real sharing server on 127.0.0.1, a recipient with its own profile;
  6. read it back with the official `delta-sharing` client from the recipient's environment
     (`recipient_python`, else tahoe's client) and check it against the table."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyarrow as pa
import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable
from . import sharing as own
from .log import DeltaLog
from .read.changes import read_changes_arrow
from .sharing.official_client import OfficialClient
from .spark import DeltaTable, register
from .spark.session import local_session
from .table import Table

console = Console()


def _step(msg: str) -> None:
    console.print(f"\n[bold cyan]==>[/] {msg}", highlight=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _orders(start: int, n: int, countries: list[str]) -> pa.Table:
    return pa.table({
        "order_id": pa.array(range(start, start + n), pa.int64()),
        "country": [countries[i % len(countries)] for i in range(n)],
        "amount": pa.array([round(10 + (i * 7.3) % 90, 2) for i in range(start, start + n)], pa.float64()),
        "ts": pa.array([1_700_000_000_000_000 + i * 60_000_000 for i in range(start, start + n)], pa.timestamp("us", tz="UTC")),
    })


def _show_versions(path: str) -> None:
    latest = Table(path)
    rt = RichTable(title="time travel")
    for c in ("version", "operation", "rows", "files"):
        rt.add_column(c)
    ops = {h["version"]: h.get("operation", "") for h in latest.history()}
    for v in range(latest.version + 1):
        t = latest.load_version(v)
        rt.add_row(str(v), ops.get(v, ""), str(t.to_arrow().num_rows), str(t.snapshot.num_files))
    console.print(rt)


def _wait_for(url: str, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the sharing server exited with code {proc.returncode}")
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except urllib.error.HTTPError:
            return  # it answered (401 without a token): it is up
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the sharing server did not answer at {url} within {timeout} s")


def _read_as_recipient(profile: Path, table_url_suffix: str, version_to_read: int,
                       recipient_python: str | None, log_file):
    """(who read, tables, latest rows, rows at a version, change rows), rows as Arrow tables:
    through the official client in the recipient's environment when `recipient_python` is given,
    else through tahoe's own client."""
    url = f"{profile}#{table_url_suffix}"
    if recipient_python:
        with OfficialClient(recipient_python, stderr=log_file) as client:
            tables = [f"{t['share']}.{t['schema']}.{t['name']}" for t in client.client(str(profile), "list_all_tables")]
            latest = client.load_as_pandas(url)
            at_version = client.load_as_pandas(url, version=version_to_read)
            # the table has deletion vectors: the change feed in delta format (the official
            # client's parquet format cannot carry them, and the server refuses it by name)
            changes = client.load_table_changes_as_pandas(url, starting_version=1, use_delta_format=True)
            who = f"official delta-sharing {client.versions['delta-sharing']} client, own environment"
        return who, tables, latest, at_version, changes

    c = own.SharingClient(str(profile))
    tables = [f"{t.share}.{t.schema}.{t.name}" for t in c.list_all_tables()]
    latest = own.load_as_arrow(url)
    at_version = own.load_as_arrow(url, version=version_to_read)
    changes = own.load_table_changes_as_arrow(url, starting_version=1)
    return "tahoe sharing client (no --recipient-python given)", tables, latest, at_version, changes


def _spark_pipeline(spark, path: str) -> None:
    """Steps 1 and 2: ingest with Spark, then MERGE / UPDATE / DELETE with delta-spark's API."""
    def frame(t: pa.Table):
        return spark.createDataFrame(t.to_pandas(), "order_id long, country string, amount double, ts timestamp")

    _step(f"ingest: df.write.format(\"delta\") — orders partitioned by country at {path}")
    (frame(_orders(0, 600, ["FR", "DE", "US"])).write.format("delta").option("partitionBy", "country")
     .option("delta.enableChangeDataFeed", "true").option("delta.enableDeletionVectors", "true").save(path))
    dt = DeltaTable.forPath(spark, path)
    console.print(f"version 0: {dt.toDF().count()} rows", highlight=False)
    time.sleep(0.05)
    _step("ingest: append 300 orders from Japan")
    frame(_orders(600, 300, ["JP"])).write.format("delta").mode("append").save(path)

    _step("MERGE: upsert a batch of 40 orders (20 corrections of existing orders, 20 new ones)")
    batch = pa.concat_tables([_orders(102, 20, ["FR", "DE", "US"]), _orders(2000, 20, ["DE"])])
    batch = batch.set_column(2, "amount", pa.array([a + 1000 for a in batch.column("amount").to_pylist()]))
    m = (dt.alias("t").merge(frame(batch).alias("s"), "t.order_id = s.order_id AND t.country = s.country")
         .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute().collect()[0])
    console.print(f"updated {m.num_updated_rows}, inserted {m.num_inserted_rows} rows", highlight=False)

    _step("UPDATE orders SET amount = amount * 0.9 WHERE country = 'US' AND amount > 90 (deletion vectors)")
    dt.update("country = 'US' AND amount > 90", {"amount": "amount * 0.9"})   # None, as in delta-spark
    r = dt.history(1).collect()[0].operationMetrics
    console.print(f"updated {r['numUpdatedRows']} rows", highlight=False)

    _step("DELETE FROM orders WHERE amount < 20 (deletion vectors: no data file rewritten)")
    dt.delete("amount < 20")
    r = dt.history(1).collect()[0].operationMetrics
    console.print(f"deleted {r['numDeletedRows']} rows", highlight=False)
    hist = dt.history().select("version", "operation", "operationMetrics").collect()
    rt = RichTable(title="history (delta-spark's operation names and metrics)")
    for c in ("version", "operation", "metrics"):
        rt.add_column(c)
    keep = ("numOutputRows", "numTargetRowsUpdated", "numTargetRowsInserted", "numUpdatedRows", "numDeletedRows",
            "numDeletionVectorsAdded", "numTargetDeletionVectorsAdded", "numAddedFiles", "numTargetFilesAdded")
    for h in sorted(hist, key=lambda h: h.version):
        ms = ", ".join(f"{k}={v}" for k, v in sorted((h.operationMetrics or {}).items()) if k in keep)
        rt.add_row(str(h.version), h.operation, ms)
    console.print(rt)
    v1 = spark.read.format("delta").option("versionAsOf", 1).load(path).count()
    console.print(f"Spark time travel: versionAsOf 1 → {v1} rows", highlight=False)


def run_demo(directory: str = "demo-output", recipient_python: str | None = None) -> None:
    root = Path(directory).resolve()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    path = str(root / "orders")

    _step("start a local Spark session (local[2]; tahoe's data source, no JVM jars)")
    from pyspark.sql import SparkSession

    running = SparkSession.getActiveSession()     # a caller's session is used and left running
    spark = running or local_session("local[2]", "tahoe-demo", quick_start=True)
    register(spark)
    try:
        _spark_pipeline(spark, path)
    finally:
        if running is None:
            spark.stop()
    t = Table(path)
    t_after_first = t.load_version(0).snapshot.timestamp

    _step("time travel")
    _show_versions(path)
    by_ts = Table(path, timestamp=t_after_first)
    console.print(f"as of the first commit's timestamp → version {by_ts.version}, "
                  f"{by_ts.to_arrow().num_rows} rows", highlight=False)

    _step("change feed of the DML commits (versions 2-4, tahoe's Spark-free reader)")
    changes = read_changes_arrow(DeltaLog.for_table(path), 2)
    counts = {(r["_commit_version"], r["_change_type"]): 0 for r in changes.select(
        ["_commit_version", "_change_type"]).to_pylist()}
    for r in changes.select(["_commit_version", "_change_type"]).to_pylist():
        counts[(r["_commit_version"], r["_change_type"])] += 1
    rt = RichTable(title="change data")
    for c in ("version", "change type", "rows"):
        rt.add_column(c)
    for (v, ct), n in sorted(counts.items()):
        rt.add_row(str(v), ct, str(n))
    console.print(rt)

    _step("share: a server config, a recipient and its profile")
    port = _free_port()
    cfg_path = root / "sharing.yaml"
    cfg_path.write_text(yaml.safe_dump({
        "host": "127.0.0.1", "port": port, "endpoint": "/delta-sharing",
        "shares": [{"name": "demo", "schemas": [{"name": "sales", "tables": [
            {"name": "orders", "location": path, "historyShared": True}]}]}],
    }, sort_keys=False))
    cli = [sys.executable, "-m", "tahoe", "sharing"]
    out = subprocess.run(cli + ["recipient", "add", "analyst", "--share", "demo", "--config", str(cfg_path)],
                         capture_output=True, text=True, check=True)
    profile = root / "analyst.share"
    profile.write_text(out.stdout)
    console.print(f"profile for recipient 'analyst' written to {profile} (token shown once, stored hashed)",
                  highlight=False)

    env = dict(os.environ, PYTHONUNBUFFERED="1")
    log_file = open(root / "server.log", "w")
    server = subprocess.Popen(cli + ["serve", "--config", str(cfg_path)], stdout=log_file,
                              stderr=subprocess.STDOUT, env=env)
    try:
        endpoint = json.loads(out.stdout)["endpoint"]
        _wait_for(endpoint.rstrip("/") + "/shares", server)
        console.print(f"server up at {endpoint} (pid {server.pid})", highlight=False)

        _step("read back as the recipient")
        with open(root / "recipient.log", "w") as recipient_log:
            who, tables, latest, at_v1, changes = _read_as_recipient(profile, "demo.sales.orders", 1,
                                                                     recipient_python, recipient_log)
        console.print(f"{escape('[' + who + ']')} tables visible: {tables}", highlight=False)
        mine = Table(path)
        expect = sorted(mine.to_arrow().column("order_id").to_pylist())
        got = sorted(int(x) for x in latest.column("order_id").to_pylist())
        console.print(f"latest: {len(got)} rows — {'[green]identical[/]' if got == expect else '[red]DIFFERENT[/]'} "
                      f"to the table's own rows", highlight=False)
        expect_v1 = sorted(mine.load_version(1).to_arrow().column("order_id").to_pylist())
        got_v1 = sorted(int(x) for x in at_v1.column("order_id").to_pylist())
        console.print(f"version 1: {len(got_v1)} rows — {'[green]identical[/]' if got_v1 == expect_v1 else '[red]DIFFERENT[/]'}",
                      highlight=False)
        counts = {r["values"]: r["counts"] for r in changes.column("_change_type").value_counts().to_pylist()}
        console.print(f"change feed since version 1: {counts}", highlight=False)
        if got != expect or got_v1 != expect_v1:
            raise RuntimeError("the recipient's rows differ from the table's")
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
        log_file.close()
    _step(f"done: the table, the server config, the profile and the server log are in {root}")

"""The demo pipeline (`tahoe demo [DIR]`, the README's first command), on local disk:

1. write a partitioned table (change data feed on),
2. change it: an append, an overwrite of one partition (replaceWhere), a DELETE (copy-on-write,
   committed through the transaction layer),
3. time travel: every version by number, one by timestamp, and the history,
4. share it: a sharing server config, a recipient with its own token and profile file, the server
   started as a real process on 127.0.0.1,
5. read it back as that recipient with the official `delta-sharing` client, run from the
   recipient's own Python environment (`recipient_python`; `make demo` passes the one `make setup`
   creates, see tahoe/sharing/official_client.py) — or tahoe's own client when none is given: the
   latest rows, a version, and the change feed — and check them against the table itself.
"""

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
    from .table import Table

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
        from .sharing.official_client import OfficialClient

        with OfficialClient(recipient_python, stderr=log_file) as client:
            tables = [f"{t['share']}.{t['schema']}.{t['name']}" for t in client.client(str(profile), "list_all_tables")]
            latest = client.load_as_pandas(url)
            at_version = client.load_as_pandas(url, version=version_to_read)
            changes = client.load_table_changes_as_pandas(url, starting_version=1)
            who = f"official delta-sharing {client.versions['delta-sharing']} client, own environment"
        return who, tables, latest, at_version, changes
    from . import sharing as own   # tahoe's client: the official client's functions, plus Arrow

    c = own.SharingClient(str(profile))
    tables = [f"{t.share}.{t.schema}.{t.name}" for t in c.list_all_tables()]
    latest = own.load_as_arrow(url)
    at_version = own.load_as_arrow(url, version=version_to_read)
    changes = own.load_table_changes_as_arrow(url, starting_version=1)
    return "tahoe sharing client (no --recipient-python given)", tables, latest, at_version, changes


def run_demo(directory: str = "demo-output", recipient_python: str | None = None) -> None:
    from .table import Table
    from .write.dml import delete
    from .write.arrow import write_table

    root = Path(directory).resolve()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    path = str(root / "orders")

    _step(f"write: a table of orders partitioned by country at {path}")
    v = write_table(path, _orders(0, 600, ["FR", "DE", "US"]), partition_by=["country"],
                    properties={"delta.enableChangeDataFeed": "true"}, description="demo orders")
    t = Table(path)
    console.print(f"version {v}: {t.to_arrow().num_rows} rows in {t.snapshot.num_files} files; "
                  f"protocol {t.protocol.min_reader_version}/{t.protocol.min_writer_version}", highlight=False)
    t_after_first = t.snapshot.timestamp

    _step("change: append 300 orders from Japan")
    time.sleep(0.05)
    write_table(path, _orders(600, 300, ["JP"]), mode="append")

    _step("change: overwrite the FR partition (replaceWhere \"country = 'FR'\")")
    write_table(path, _orders(1000, 50, ["FR"]), mode="overwrite", predicate="country = 'FR'")

    _step("change: DELETE FROM orders WHERE amount < 20 (copy-on-write, one transaction)")
    m = delete(path, "amount < 20")
    console.print(f"version {m['version']}: deleted {m['numDeletedRows']} rows, rewrote "
                  f"{m['numRemovedFiles']} files, {m['numAddedChangeFiles']} change files", highlight=False)

    _step("time travel")
    _show_versions(path)
    by_ts = Table(path, timestamp=t_after_first)
    console.print(f"as of the first commit's timestamp → version {by_ts.version}, "
                  f"{by_ts.to_arrow().num_rows} rows", highlight=False)

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

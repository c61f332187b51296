"""The client survives what real networks and servers do: file URLs that expire during a read
(refreshed with the refresh token, or by asking the time-travel query again), 503 answers and
connections dropped halfway through a file (a real reverse proxy in front of tahoe's server
injects them: `fault_proxy`), a 429 answer with a `Retry-After`, paginated answers, a limit that
stops the downloads, and a bounded number of files held while a caller streams batches.

Oracles: rows written down by hand (how the tables are built), and what the proxy saw on the wire
(requests, refresh tokens sent, Range headers)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

import tahoe.sharing as tds
from tahoe.sharing.client import scan_changes, scan_table
from tests.sharing.client_fixtures import DVCM_LATEST, add_recipient, share_server  # noqa: F401  (fixture)
from tests.sharing.conftest import free_port, start_server, stop_server
from tests.sharing.fault_proxy import Fault, FaultProxy
from tests.sharing.tablegen import TableBuilder

N_FILES = 40
ROWS_PER_FILE = 5


def _profile_via(proxy: FaultProxy, profile_path: str, d: Path, name: str) -> str:
    prof = json.loads(Path(profile_path).read_text())
    prof["endpoint"] = proxy.base()
    p = d / f"{name}-via-proxy.share"
    p.write_text(json.dumps(prof))
    return str(p)


@pytest.fixture(scope="module")
def short_urls(tmp_path_factory):
    """A server whose file URLs live 1 second, sharing a table of 40 small files, behind a proxy
    that delays every file download by 0.15 s (a read takes several URL lifetimes)."""
    d = tmp_path_factory.mktemp("short-urls")
    tb = TableBuilder(d / "many", pa.schema([("id", pa.int64())]))
    for i in range(N_FILES):
        tb.append(pa.table({"id": list(range(i * ROWS_PER_FILE, (i + 1) * ROWS_PER_FILE))}))
    port = free_port()
    cfg = {"shares": [{"name": "s", "schemas": [{"name": "t", "tables": [
        {"name": "many", "location": str(d / "many"), "historyShared": True}]}]}],
        "host": "127.0.0.1", "port": port, "preSignedUrlTimeoutSeconds": 1}
    config = str(d / "server.yaml")
    Path(config).write_text(yaml.safe_dump(cfg))
    profile, _ = add_recipient(config, d, "r", ["s"])
    proc = start_server(config, port)
    proxy = FaultProxy(("127.0.0.1", port))
    proxy.faults.append(Fault("delay", lambda m, p, h: m == "GET" and "/files/" in p, times=-1, seconds=0.15))
    yield proxy, _profile_via(proxy, profile, d, "r")
    proxy.close()
    stop_server(proc)


def _refreshes(proxy: FaultProxy) -> list[dict]:
    """The bodies of the /query requests (an asynchronous query's submission carries an
    idempotencyKey of its own besides the question: left out)."""
    bodies = [json.loads(e.body or b"{}") for e in proxy.requests("POST", "/query")]
    return [{k: v for k, v in b.items() if k != "idempotencyKey"} for b in bodies]


def test_a_read_longer_than_the_url_lifetime_refreshes_and_completes(short_urls):
    proxy, profile = short_urls
    proxy.log.clear()
    t0 = time.time()
    scan, batches = scan_table(f"{profile}#s.t.many", workers=2)
    rows = pa.Table.from_batches(list(batches), schema=scan.schema)
    assert time.time() - t0 > 1.5   # the read outlived the URLs (this is the premise, not a timing check)
    assert sorted(rows.column("id").to_pylist()) == list(range(N_FILES * ROWS_PER_FILE))
    bodies = _refreshes(proxy)
    assert bodies[0].get("includeRefreshToken") is True
    refreshed = [b for b in bodies[1:] if b.get("refreshToken")]
    assert len(refreshed) >= 1 and len(refreshed) == len(bodies) - 1
    assert scan.stats()["url_refreshes"] == len(refreshed)
    # an expired URL is retried only after a refresh: each refresh answers the denials of the
    # downloads in flight when the URLs expired (at most `workers` of them)
    denied = [e for e in proxy.requests("GET", "/files/") if e.status == 403]
    assert len(denied) <= 2 * len(refreshed)


def test_time_travel_reads_refresh_by_asking_again(short_urls):
    proxy, profile = short_urls
    proxy.log.clear()
    v = N_FILES - 10   # commit v holds files 0..v-1
    t = tds.load_as_arrow(f"{profile}#s.t.many", version=v, workers=2)
    assert sorted(t.column("id").to_pylist()) == list(range((v) * ROWS_PER_FILE))
    bodies = _refreshes(proxy)
    assert len(bodies) >= 2 and all(b == {"version": v} for b in bodies)


def test_limit_stops_the_downloads(short_urls):
    proxy, profile = short_urls
    proxy.log.clear()
    hint = {"op": "greaterThanOrEqual", "children": [{"op": "column", "name": "id", "valueType": "long"},
                                                     {"op": "literal", "value": "0", "valueType": "long"}]}
    t = tds.load_as_arrow(f"{profile}#s.t.many", limit=7, jsonPredicateHints=hint, workers=1)
    assert t.num_rows == 7 and t.column("id").to_pylist() == list(range(7))
    time.sleep(0.5)  # let a download already under way end before counting
    assert len(proxy.requests("GET", "/files/")) <= 4   # 2 needed, at most `workers + 2` in flight


def test_503_and_a_connection_dropped_mid_file_are_survived(share_server, tmp_path):
    host, port = share_server.url.split("//")[1].split("/")[0].split(":")
    proxy = FaultProxy((host, int(port)))
    try:
        proxy.faults += [
            Fault("503", lambda m, p, h: m == "POST" and p.endswith("/query")),
            Fault("503", lambda m, p, h: m == "GET" and "/files/" in p),
            Fault("drop", lambda m, p, h: m == "GET" and "/files/" in p and "Range" not in h),
            Fault("503", lambda m, p, h: m == "GET" and "/changes?" in p),
        ]
        profile = _profile_via(proxy, share_server.profiles["alice"], tmp_path, "alice")
        df = tds.load_as_pandas(f"{profile}#w.t.dvcm")
        assert sorted(zip(df["id"], df["Grp Name"])) == DVCM_LATEST
        assert all(f.hits == 1 for f in proxy.faults[:3])
        dropped = next(e for e in proxy.log if e.fault == "drop")
        resumed = [e for e in proxy.requests("GET", "/files/") if e.path == dropped.path and "Range" in e.headers]
        assert resumed and resumed[0].headers["Range"].startswith("bytes=") and not resumed[0].headers["Range"].startswith("bytes=0-")
        ch = tds.load_table_changes_as_pandas(f"{profile}#w.t.cdf", starting_version=1)
        assert len(ch) == 9 and proxy.faults[3].hits == 1
    finally:
        proxy.close()


def test_pagination_is_followed(share_server):
    url = share_server.table_url("alice", "w", "stats")
    for fmt in (True, False):
        scan, batches = scan_table(url, use_delta_format=fmt, page_size=3)
        t = pa.Table.from_batches(list(batches), schema=scan.schema)
        assert scan.response.pages == 4 and len(scan.files) == 10
        assert sorted(t.column("id").to_pylist()) == list(range(100))
    scan, batches = scan_changes(share_server.table_url("alice", "w", "cdf"), starting_version=1, page_size=2)
    rows = pa.Table.from_batches(list(batches), schema=scan.reader.change_schema(scan.format == "parquet"))
    assert scan.response.pages >= 3 and rows.num_rows == 9


def test_streamed_batches_hold_a_bounded_number_of_files(short_urls):
    """A caller that streams record batches slowly holds at most `workers + 2` downloaded files
    beyond the one it is consuming, however many files the table has (here 40, one batch each):
    the count of files read (the reader's `on_file`, called as a file is decoded) minus the batches
    consumed is checked at every file, while the consumer waits each time for the downloads to
    fill what they may run ahead. Oracle: the ids written (by hand)."""
    proxy, profile = short_urls
    workers = 2
    cond = threading.Condition()
    state = {"done": 0, "consumed": 0, "max_held": 0}

    def on_file(_rf):
        with cond:
            state["done"] += 1
            state["max_held"] = max(state["max_held"], state["done"] - state["consumed"])
            cond.notify_all()

    scan, batches = scan_table(f"{profile}#s.t.many", workers=workers, on_file=on_file)
    ids = []
    for b in batches:
        ids.extend(b.column("id").to_pylist())
        with cond:
            state["consumed"] += 1
            target = min(N_FILES, state["consumed"] + workers + 2)
            assert cond.wait_for(lambda: state["done"] >= target, timeout=120), state
    assert sorted(ids) == list(range(N_FILES * ROWS_PER_FILE)) and state["consumed"] == N_FILES
    # at most workers + 2 ahead of the one being consumed (+1: that one, decoded before it is taken)
    assert workers + 2 <= state["max_held"] <= workers + 3, state


def test_a_429_is_retried_after_its_retry_after(share_server, tmp_path):
    """A server (or store) answering 429 Too Many Requests once — on the query and on a file
    download — with `Retry-After: 1`: the read completes, and each retry comes no sooner than the
    second the answer asked for (RFC 6585 / RFC 9110; the official client retries 429 with its own
    backoff, 0.1 s doubling, and does not read the header). Oracle: rows written down by hand, the
    arrival times the proxy logged."""
    host, port = share_server.url.split("//")[1].split("/")[0].split(":")
    proxy = FaultProxy((host, int(port)))
    try:
        proxy.faults += [Fault("429", lambda m, p, h: m == "POST" and p.endswith("/query"), seconds=1),
                         Fault("429", lambda m, p, h: m == "GET" and "/files/" in p, seconds=1)]
        profile = _profile_via(proxy, share_server.profiles["alice"], tmp_path, "alice429")
        df = tds.load_as_pandas(f"{profile}#w.t.dvcm")
        assert sorted(zip(df["id"], df["Grp Name"])) == DVCM_LATEST
        assert [f.hits for f in proxy.faults] == [1, 1]
        for kind, method in (("/query", "POST"), ("/files/", "GET")):
            refused = next(e for e in proxy.requests(method, kind) if e.fault == "429")
            again = next(e for e in proxy.requests(method, kind) if e.at > refused.at and e.path == refused.path)
            assert again.at - refused.at >= 0.95, (kind, again.at - refused.at)
    finally:
        proxy.close()

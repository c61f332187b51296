"""The newest Delta Sharing protocol parts, over raw HTTP and with tahoe's client, against tahoe's
server run as a process: asynchronous queries (`asyncquery=true`, `idempotencyKey`, Get Query Info
with pages; unknown, foreign and expired query ids), `fileidhash` (echoed; ids hashed as asked),
`includeHistoricalProtocol` (/changes and startingVersion ranges, delta format only), an
endStreamAction's `errorMessage` for a failure in the middle of a response (only for clients that
asked `includeendstreamaction=true`), `accessModes` in metadata and listings. The official client
still reads through this server.

Oracles: rows written down by hand (`cdf_rows`, the `proto` and `broken` tables built here), the
tables' own log files read as JSON (paths whose MD5/SHA-256 the ids must be), the files behind the
URLs read with pyarrow, and the error codes of the reference server."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

import tahoe.sharing as tds
from tahoe.sharing.client import scan_table
from tahoe.sharing.direct import AccessModeError
from tahoe.sharing.rest import SharingStreamError
from tests.sharing.conftest import REPO, cdf_rows, free_port, start_server, stop_server
from tests.sharing.helpers import assert_same_rows
from tests.sharing.tablegen import TableBuilder

DELTA_DV = "responseformat=delta;readerfeatures=deletionvectors"
TTL = 2   # seconds an asynchronous query is kept


@dataclass
class Next:
    url: str
    dir: Path
    tables: dict
    tokens: dict = field(default_factory=dict)
    profiles: dict = field(default_factory=dict)

    def post(self, table: str, body: dict, caps: str | None = None, who: str = "alice", path: str = "/query",
             headers: dict | None = None) -> httpx.Response:
        h = {"Authorization": f"Bearer {self.tokens[who]}", **(headers or {})}
        if caps:
            h["delta-sharing-capabilities"] = caps
        return httpx.post(f"{self.url}/shares/s/schemas/sc/tables/{table}{path}", json=body, headers=h, timeout=60)

    def get(self, path: str, caps: str | None = None, who: str = "alice", headers: dict | None = None):
        h = {"Authorization": f"Bearer {self.tokens[who]}", **(headers or {})}
        if caps:
            h["delta-sharing-capabilities"] = caps
        return httpx.get(f"{self.url}{path}", headers=h, timeout=60)


def _lines(r: httpx.Response) -> list[dict]:
    return [json.loads(x) for x in r.text.splitlines() if x.strip()]


def _log_paths(root: str) -> list[str]:
    """The active files' paths as the table's log files say (the oracle of file ids)."""
    live: dict[str, bool] = {}
    for f in sorted(Path(root, "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            a = json.loads(line)
            if "add" in a:
                live[a["add"]["path"]] = True
            elif "remove" in a:
                live.pop(a["remove"]["path"], None)
    return sorted(live)


def _build_proto(root: Path) -> None:
    """`proto`: v1 ids 1, 2; v2 upgrades the protocol to reader 3 with deletionVectors (and its
    metaData enables them); v3 appends id 3. Change data feed on from v0."""
    from tahoe.log import DeltaLog

    tb = TableBuilder(root, pa.schema([("id", pa.int64())]), (), {"delta.enableChangeDataFeed": "true"})
    tb.append(pa.table({"id": [1, 2]}))
    md = DeltaLog.for_table(str(root)).snapshot().metadata.to_dict()
    md["configuration"]["delta.enableDeletionVectors"] = "true"
    tb.commit([{"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                             "writerFeatures": ["deletionVectors", "changeDataFeed"]}}, {"metaData": md}])
    tb.append(pa.table({"id": [3]}))


def _build_broken(root: Path) -> None:
    """`broken`: v1 appends ids 1, 2; v2 adds a file whose path leaves the table directory — the
    server finds it only when it reaches version 2 of a range."""
    tb = TableBuilder(root, pa.table({"id": [1]}).schema, (), {"delta.enableChangeDataFeed": "true"})
    tb.append(pa.table({"id": [1, 2]}))
    tb.commit([{"add": {"path": "../outside/part-0.parquet", "partitionValues": {}, "size": 10,
                        "modificationTime": 0, "dataChange": True}}])


@pytest.fixture(scope="module")
def nx(tmp_path_factory, server) -> Next:
    d = tmp_path_factory.mktemp("sharing-next")
    _build_proto(d / "proto")
    _build_broken(d / "broken")
    tables = {"cdf": server.tables["cdf"], "proto": str(d / "proto"), "broken": str(d / "broken")}
    cfg = {"shares": [{"name": "s", "schemas": [{"name": "sc", "tables": [
        {"name": n, "location": loc, "historyShared": True} for n, loc in tables.items()]}]},
        {"name": "t", "schemas": [{"name": "sc", "tables": [{"name": "cdf", "location": tables["cdf"]}]}]}],
        "host": "127.0.0.1", "asyncQueryTtlSeconds": TTL}
    port = free_port()
    cfg["port"] = port
    config = d / "server.yaml"
    config.write_text(yaml.safe_dump(cfg))
    nxt = Next(f"http://127.0.0.1:{port}/delta-sharing", d, tables)
    for name, shares in (("alice", ["s", "t"]), ("carol", ["s"])):
        out = subprocess.run([sys.executable, "-m", "tahoe", "sharing", "recipient", "add", name, "--config",
                              str(config), *sum((["--share", s] for s in shares), [])],
                             cwd=str(REPO), capture_output=True, text=True, check=True).stdout
        prof = json.loads(out)
        nxt.tokens[name] = prof["bearerToken"]
        (d / f"{name}.share").write_text(out)
        nxt.profiles[name] = str(d / f"{name}.share")
    proc = start_server(str(config), port)
    yield nxt
    stop_server(proc)


def _poll(nx: Next, table: str, qid: str, body: dict | None = None, who: str = "alice") -> httpx.Response:
    """Get Query Info until the query is no longer pending (bounded: a hang fails, it does not
    time anything)."""
    for _ in range(600):
        r = nx.post(table, body or {}, path=f"/queries/{qid}", who=who)
        assert r.status_code == 200, r.text
        first = _lines(r)[0]
        if "queryStatus" not in first:
            return r
        assert first["queryStatus"] == {"queryId": qid, "status": "pending"}
    raise AssertionError("the asynchronous query never finished")


def test_async_query_over_http(nx):
    caps = "responseformat=parquet;asyncquery=true"
    r = nx.post("cdf", {}, caps)
    assert r.status_code == 400 and r.json()["errorCode"] == "INVALID_PARAMETER_VALUE"
    assert "idempotencyKey" in r.json()["message"]

    key = uuid.uuid4().hex
    r = nx.post("cdf", {"idempotencyKey": key, "maxFiles": 3}, caps)
    assert r.status_code == 200, r.text
    assert r.headers["Delta-Table-Version"] == "5" and "asyncquery=true" in r.headers["delta-sharing-capabilities"]
    status = _lines(r)
    assert len(status) == 1 and status[0]["queryStatus"]["status"] == "pending"
    qid = status[0]["queryStatus"]["queryId"]
    # the same key and query: the same query (nothing runs twice); the same key, another query: refused
    again = nx.post("cdf", {"idempotencyKey": key, "maxFiles": 3}, caps)
    if "queryStatus" in _lines(again)[0]:
        assert _lines(again)[0]["queryStatus"]["queryId"] == qid
    r = nx.post("cdf", {"idempotencyKey": key, "maxFiles": 3, "limitHint": 1}, caps)
    assert r.status_code == 400 and r.json()["errorCode"] == "INVALID_PARAMETER_VALUE"

    # the answer, page by page through Get Query Info
    r = _poll(nx, "cdf", qid)
    assert r.headers["Delta-Table-Version"] == "5"
    lines = _lines(r)
    assert lines[0] == {"protocol": {"minReaderVersion": 1}} and lines[1]["metaData"]["partitionColumns"] == ["p"]
    pages, files = 1, [x for x in lines if "file" in x]
    assert len(files) == 3
    token = lines[-1]["endStreamAction"]["nextPageToken"]
    while token:
        r = nx.post("cdf", {"pageToken": token}, path=f"/queries/{qid}")
        page = _lines(r)
        assert r.text.splitlines()[:2] == _poll(nx, "cdf", qid).text.splitlines()[:2]
        files += [x for x in page if "file" in x]
        token = page[-1]["endStreamAction"].get("nextPageToken")
        pages += 1
    assert pages == 2 and len(files) == len({f["file"]["id"] for f in files}) == 4
    assert_same_rows(_rows_with_partition(files), cdf_rows(5), "async answer")
    # a page token of this query is not a page token of /query
    r = nx.post("cdf", {"pageToken": lines[-1]["endStreamAction"]["nextPageToken"]})
    assert r.status_code == 400 and r.json()["errorCode"] == "INVALID_PARAMETER_VALUE"

    # unknown, another recipient's, another table's query ids: no such query
    for who, table, q in (("alice", "cdf", "nope"), ("carol", "cdf", qid), ("alice", "proto", qid),
                          ("alice", "cdf", qid[:-2] + ("AA" if not qid.endswith("AA") else "BB"))):
        r = nx.post(table, {}, path=f"/queries/{q}", who=who)
        assert r.status_code == 404 and r.json()["errorCode"] == "RESOURCE_DOES_NOT_EXIST", (who, table, r.text)

    # past its lifetime the query has expired, and its key may start a new query
    time.sleep(TTL + 1.5)
    r = nx.post("cdf", {}, path=f"/queries/{qid}")
    assert r.status_code == 400 and r.json()["errorCode"] == "INVALID_PARAMETER_VALUE"
    assert "expired" in r.json()["message"]
    r = nx.post("cdf", {"idempotencyKey": key, "maxFiles": 3, "limitHint": 1}, caps)
    assert r.status_code == 200 and _lines(r)[0]["queryStatus"]["queryId"] != qid


def _rows_with_partition(files: list[dict]) -> pa.Table:
    """The rows behind parquet-format file lines, with the partition column added from the lines."""
    parts = []
    for x in files:
        t = pq.read_table(pa.BufferReader(httpx.get(x["file"]["url"]).content))
        for k, v in x["file"]["partitionValues"].items():
            t = t.append_column(k, pa.array([v] * t.num_rows, pa.string()))
        parts.append(t)
    return pa.concat_tables(parts)


def test_async_query_errors_come_back_when_polled(nx):
    r = nx.post("cdf", {"idempotencyKey": uuid.uuid4().hex, "version": 99},
                "responseformat=parquet;asyncquery=true")
    assert r.status_code == 200, r.text
    qid = _lines(r)[0]["queryStatus"]["queryId"]
    for _ in range(600):
        r = nx.post("cdf", {}, path=f"/queries/{qid}")
        if r.status_code != 200:
            break
    assert r.status_code == 400 and r.json()["errorCode"] == "INVALID_PARAMETER_VALUE"
    r = nx.post("cdf", {"idempotencyKey": "x"}, "responseformat=parquet;asyncquery=maybe")
    assert r.status_code == 400 and r.json()["errorCode"] == "INVALID_PARAMETER_VALUE"


def test_tahoe_client_uses_async_queries_once_advertised(nx):
    url = f"{nx.profiles['alice']}#s.sc.cdf"
    scan, batches = scan_table(url)                      # the server has not advertised them yet
    assert scan.stats()["async_query_id"] is None
    assert_same_rows(pa.Table.from_batches(list(batches), schema=scan.schema), cdf_rows(5), "first read")
    scan, batches = scan_table(url, page_size=2)         # now it has
    assert scan.stats()["async_query_id"] and scan.stats()["pages"] == 2
    assert_same_rows(pa.Table.from_batches(list(batches), schema=scan.schema), cdf_rows(5), "async, 2 pages")
    scan, batches = scan_table(url, version=1, async_query=False)
    assert scan.stats()["async_query_id"] is None
    assert_same_rows(pa.Table.from_batches(list(batches), schema=scan.schema), cdf_rows(1), "sync v1")
    t = tds.load_as_arrow(url, version=2, async_query=True, use_delta_format=True)
    assert_same_rows(t, cdf_rows(2), "async, delta format, v2")


def test_file_id_hash(nx):
    paths = _log_paths(nx.tables["cdf"])
    md5 = {hashlib.md5(p.encode()).hexdigest() for p in paths}
    sha = {hashlib.sha256(p.encode()).hexdigest() for p in paths}
    # no fileidhash: each format its own (parquet: MD5, delta: SHA-256), nothing echoed
    r = nx.post("cdf", {})
    assert {x["file"]["id"] for x in _lines(r) if "file" in x} == md5 and "fileidhash" not in r.headers
    r = nx.post("cdf", {}, "responseformat=delta")
    assert {x["file"]["id"] for x in _lines(r) if "file" in x} == sha
    # asked: as asked, in either format, echoed (capability or header)
    r = nx.post("cdf", {}, "responseformat=parquet;fileidhash=delta")
    assert {x["file"]["id"] for x in _lines(r) if "file" in x} == sha
    assert "fileidhash=delta" in r.headers["delta-sharing-capabilities"] and r.headers["fileidhash"] == "delta"
    r = nx.post("cdf", {"maxFiles": 2}, "responseformat=delta", headers={"fileidhash": "PARQUET"})
    ids = {x["file"]["id"] for x in _lines(r) if "file" in x}
    assert len(ids) == 2 and ids <= md5 and r.headers["fileidhash"] == "parquet"
    r = nx.get("/shares/s/schemas/sc/tables/cdf/changes?startingVersion=1&endingVersion=1", "fileidhash=delta")
    assert [x["add"]["id"] for x in _lines(r) if "add" in x] and \
        all(x["add"]["id"] in {hashlib.sha256(p.encode()).hexdigest() for p in _all_log_paths(nx.tables["cdf"])}
            for x in _lines(r) if "add" in x)
    for bad in ("responseformat=parquet;fileidhash=sha1", None):
        r = nx.post("cdf", {}, bad, headers=None if bad else {"fileidhash": "md5"})
        assert r.status_code == 400 and r.json()["errorCode"] == "INVALID_PARAMETER_VALUE"
    r = nx.post("cdf", {}, "fileidhash=delta", headers={"fileidhash": "parquet"})
    assert r.status_code == 400 and r.json()["errorCode"] == "INVALID_PARAMETER_VALUE"


def _all_log_paths(root: str) -> set[str]:
    out = set()
    for f in Path(root, "_delta_log").glob("*.json"):
        for line in f.read_text().splitlines():
            a = json.loads(line)
            for k in ("add", "remove"):
                if k in a:
                    out.add(a[k]["path"])
    return out


def test_historical_protocols(nx):
    base = "/shares/s/schemas/sc/tables/proto/changes?startingVersion=0"
    plain = _lines(nx.get(base, DELTA_DV))
    assert [x for x in plain[2:] if "protocol" in x] == []
    lines = _lines(nx.get(base + "&includeHistoricalProtocol=true&includeHistoricalMetadata=true", DELTA_DV))
    assert lines[0]["protocol"] == {"deltaProtocol": {"minReaderVersion": 1, "minWriterVersion": 4}, "version": 0}
    later = [(i, x["protocol"]) for i, x in enumerate(lines) if i and "protocol" in x]
    assert len(later) == 1 and later[0][1]["version"] == 2
    assert later[0][1]["deltaProtocol"]["readerFeatures"] == ["deletionVectors"]
    i = later[0][0]   # after version 1's files, before version 2's metaData and version 3's files
    assert [x["file"]["version"] for x in lines[2:i]] == [1]
    assert lines[i + 1]["metaData"]["version"] == 2
    assert lines[i + 1]["metaData"]["deltaMetadata"]["configuration"]["delta.enableDeletionVectors"] == "true"
    assert [x["file"]["version"] for x in lines[i + 2:]] == [3]
    # a startingVersion range of /query, the flag in the body
    q = _lines(nx.post("proto", {"startingVersion": 1, "includeHistoricalProtocol": True}, DELTA_DV))
    assert q[0]["protocol"]["version"] == 1 and [x["protocol"]["version"] for x in q[2:] if "protocol" in x] == [2]
    # parquet format has no room for them: the flag is dropped
    q = _lines(nx.post("proto", {"startingVersion": 0, "endingVersion": 1, "includeHistoricalProtocol": True}))
    assert q[0] == {"protocol": {"minReaderVersion": 1}} and not [x for x in q[1:] if "protocol" in x]
    # tahoe's client asks for them and reads the changes across the upgrade
    t = tds.load_table_changes_as_arrow(f"{nx.profiles['alice']}#s.sc.proto", starting_version=0)
    assert sorted((r["id"], r["_change_type"], r["_commit_version"]) for r in t.to_pylist()) == \
        [(1, "insert", 1), (2, "insert", 1), (3, "insert", 3)]


def test_failure_mid_stream(nx):
    secret_dir = str(nx.dir)
    # the latest snapshot's files are checked before anything is sent: a plain error
    r = nx.post("broken", {})
    assert r.status_code == 400 and r.json()["errorCode"] == "UNSUPPORTED_OPERATION"
    # a range meets the bad file after version 1's lines went out: told in-band when asked...
    r = nx.post("broken", {"startingVersion": 0}, "responseformat=parquet;includeendstreamaction=true")
    assert r.status_code == 200
    lines = _lines(r)
    assert [x["add"]["version"] for x in lines if "add" in x] == [1]
    esa = lines[-1]["endStreamAction"]
    assert esa["errorMessage"].startswith("UNSUPPORTED_OPERATION") and "outside" in esa["errorMessage"]
    assert "nextPageToken" not in esa and secret_dir not in r.text
    r = nx.get("/shares/s/schemas/sc/tables/broken/changes?startingVersion=0", "includeendstreamaction=true")
    assert "errorMessage" in _lines(r)[-1]["endStreamAction"]
    # ...and without the capability the response is cut off (never a line the client did not ask for)
    with pytest.raises(httpx.TransportError):
        nx.post("broken", {"startingVersion": 0})
    # tahoe's client says what failed
    with pytest.raises(SharingStreamError, match="outside"):
        tds.load_table_changes_as_arrow(f"{nx.profiles['alice']}#s.sc.broken", starting_version=0)


def test_access_modes_of_url_only_tables(nx):
    md = _lines(nx.get("/shares/s/schemas/sc/tables/cdf/metadata"))[1]["metaData"]
    assert md["accessModes"] == ["url"] and "location" not in md
    md = _lines(nx.get("/shares/s/schemas/sc/tables/proto/metadata", DELTA_DV))[1]["metaData"]
    assert md["accessModes"] == ["url"] and "deltaMetadata" in md and "location" not in md
    items = nx.get("/shares/s/all-tables").json()["items"]
    assert {i["name"]: i["accessModes"] for i in items} == {"cdf": ["url"], "proto": ["url"], "broken": ["url"]}
    assert not any("location" in i for i in items)
    r = nx.post("cdf", {}, path="/temporary-table-credentials")
    assert r.status_code == 400 and r.json()["errorCode"] == "UNSUPPORTED_OPERATION"
    r = httpx.post(f"{nx.url}/shares/s/schemas/sc/tables/cdf/temporary-table-credentials", content=b"{oops",
                   headers={"Authorization": f"Bearer {nx.tokens['alice']}", "Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["errorCode"] == "MALFORMED_REQUEST"
    with pytest.raises(AccessModeError, match="not shared for directory-based access"):
        tds.load_as_arrow(f"{nx.profiles['alice']}#s.sc.cdf", access_mode="dir")
    with pytest.raises(AccessModeError, match="unknown access_mode"):
        tds.load_as_arrow(f"{nx.profiles['alice']}#s.sc.cdf", access_mode="ftp")


def test_official_client_reads_through_the_new_server(nx, official):
    t = official.load_as_pandas(f"{nx.profiles['alice']}#s.sc.cdf")
    assert_same_rows(t, cdf_rows(5), "official, parquet")
    t = official.load_as_pandas(f"{nx.profiles['alice']}#s.sc.proto", use_delta_format=True)
    assert_same_rows(t, pa.table({"id": [1, 2, 3]}), "official, delta, upgraded protocol")

"""The server fails closed: with neither a bearer token nor recipients it refuses every request
(also when recipients.json is deleted under a running server); anonymous access only with
`allowAnonymous: true`; file URLs are bound to the recipient they were issued to and die with it
(revoke, rotate); the recipients file loses nothing under concurrent `recipient add/revoke`; and
no error body names where a table is stored. Servers run as real processes; oracles are the
protocol's status codes and error codes, the profiles the CLI printed, and the paths on disk."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pyarrow as pa
import pytest
import yaml

from tahoe.write.deletion_vectors import delete_rows
from tahoe.write.writer import write_table
from tests.sharing.conftest import REPO, free_port, start_server, stop_server
from tests.sharing.tablegen import TableBuilder

DELTA_CAPS = "responseformat=delta;readerfeatures=deletionvectors,columnmapping,timestampntz"

ROUTES = [
    ("GET", "/shares", None),
    ("GET", "/shares/s", None),
    ("GET", "/shares/s/schemas", None),
    ("GET", "/shares/s/schemas/sc/tables", None),
    ("GET", "/shares/s/all-tables", None),
    ("GET", "/shares/s/schemas/sc/tables/t/version", None),
    ("HEAD", "/shares/s/schemas/sc/tables/t", None),
    ("GET", "/shares/s/schemas/sc/tables/t/metadata", None),
    ("POST", "/shares/s/schemas/sc/tables/t/query", {}),
    ("GET", "/shares/s/schemas/sc/tables/t/changes?startingVersion=0", None),
]


def cli(config: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tahoe", "sharing", *args, "--config", config], cwd=str(REPO),
                          capture_output=True, text=True, check=check)


def add_recipient(config: str, name: str, share: str = "s") -> str:
    """The new recipient's bearer token, from the profile the CLI printed."""
    return json.loads(cli(config, "recipient", "add", name, "--share", share).stdout)["bearerToken"]


def call(base: str, method: str, path: str, body, token: str | None, caps: str | None = None) -> httpx.Response:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    if caps:
        headers["delta-sharing-capabilities"] = caps
    return httpx.request(method, base + path, headers=headers, json=body, timeout=30)


def file_urls(base: str, token: str, table: str = "t", caps: str | None = None) -> list[str]:
    """Every file URL (data files, and deletion vectors in delta format) of a table's /query."""
    r = call(base, "POST", f"/shares/s/schemas/sc/tables/{table}/query", {}, token, caps)
    assert r.status_code == 200, r.text
    urls = []
    for line in r.text.splitlines()[2:]:
        f = json.loads(line)["file"]
        if "url" in f:
            urls.append(f["url"])
        else:
            add = f["deltaSingleAction"]["add"]
            urls.append(add["path"])
            if (add.get("deletionVector") or {}).get("storageType") == "p":
                urls.append(add["deletionVector"]["pathOrInlineDv"])
    assert urls
    return urls


def _tables(root: Path) -> dict[str, str]:
    tb = TableBuilder(root / "t", pa.schema([("x", pa.int64())]), (), {"delta.enableChangeDataFeed": "true"})
    tb.append(pa.table({"x": [1, 2, 3]}))
    dv = str(root / "dv")
    write_table(dv, pa.table({"id": list(range(10))}), properties={"delta.enableDeletionVectors": "true"})
    from tahoe import Table

    delete_rows(dv, {Table(dv).files().column("path")[0].as_py(): [2, 5]})
    return {"t": str(root / "t"), "dv": dv}


def _server(tmp: Path, extra: dict):
    tables = _tables(tmp / "tables")
    port = free_port()
    cfg = {"shares": [{"name": "s", "schemas": [{"name": "sc", "tables": [
        {"name": n, "location": loc, "historyShared": True} for n, loc in tables.items()]}]}],
        "host": "127.0.0.1", "port": port, **extra}
    config = str(tmp / "server.yaml")
    Path(config).write_text(yaml.safe_dump(cfg))
    return config, port


@pytest.fixture(scope="module")
def closed(tmp_path_factory):
    """A server configured with no bearer token and no recipients yet (recipients kept in a JSON
    file: `recipientsFile`)."""
    d = tmp_path_factory.mktemp("closed")
    config, port = _server(d, {"recipientsFile": "recipients.json"})
    proc = start_server(config, port)
    yield config, f"http://127.0.0.1:{port}/delta-sharing", d
    stop_server(proc)


@pytest.mark.parametrize("method,path,body", ROUTES)
def test_no_credentials_configured_refuses_every_route(closed, method, path, body):
    config, base, d = closed
    for token in (None, "anything"):
        r = call(base, method, path, body, token)
        assert r.status_code == 401, (path, token, r.status_code, r.text)
        if method != "HEAD":
            assert r.json()["errorCode"] == "UNAUTHENTICATED"


def test_deleting_recipients_file_refuses_everything_and_kills_issued_urls(closed):
    config, base, d = closed
    token = add_recipient(config, "carol")
    urls = file_urls(base, token)
    assert all(call(base, m, p, b, token).status_code == 200 for m, p, b in ROUTES)
    assert httpx.get(urls[0]).status_code == 200
    (d / "recipients.json").unlink()
    for m, p, b in ROUTES:
        for t in (None, token):
            assert call(base, m, p, b, t).status_code == 401, (p, t)
    for u in urls:
        r = httpx.get(u)
        assert r.status_code == 403 and r.json()["errorCode"] == "PERMISSION_DENIED"
        assert httpx.head(u).status_code == 403


@pytest.mark.parametrize("how", ["revoke", "rotate"])
def test_revoked_or_rotated_recipients_urls_are_refused(closed, how):
    """URLs issued to a recipient stop working when it is revoked or its token rotated — data files
    and deletion-vector files alike — while another recipient's URLs keep working."""
    config, base, d = closed
    name = f"dave-{how}"
    token = add_recipient(config, name)
    other = add_recipient(config, f"erin-{how}")
    urls = file_urls(base, token) + file_urls(base, token, "dv", DELTA_CAPS)
    others = file_urls(base, other)
    assert len(urls) >= 3   # t's file, dv's data file and its deletion vector
    for u in urls + others:
        assert httpx.get(u).status_code == 200, u
    assert parse_qs(urlsplit(urls[0]).query)["X-Amz-Credential"] != parse_qs(urlsplit(others[0]).query)["X-Amz-Credential"]
    cli(config, "recipient", how, name)
    for u in urls:
        r = httpx.get(u)
        assert r.status_code == 403 and r.json()["errorCode"] == "PERMISSION_DENIED", u
        assert httpx.get(u, headers={"Range": "bytes=0-3"}).status_code == 403
    for u in others:
        assert httpx.get(u).status_code == 200


@pytest.mark.parametrize("where", ["store", "file"])
def test_parallel_recipient_changes_lose_nothing(tmp_path, where):
    """Many `tahoe sharing recipient add` (and revokes of recipients added before) in parallel
    processes: every recipient is kept (in the SQLite state store, or in a JSON recipients file),
    with the token its process printed, and every revoke took effect."""
    config, _ = _server(tmp_path, {"recipientsFile": "recipients.json"} if where == "file" else {})
    before = [f"old{i}" for i in range(6)]
    for n in before:
        add_recipient(config, n)
    names = [f"r{i:02d}" for i in range(12)]
    procs = [subprocess.Popen([sys.executable, "-m", "tahoe", "sharing", "recipient", "add", n, "--share", "s",
                               "--config", config], cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for n in names]
    procs += [subprocess.Popen([sys.executable, "-m", "tahoe", "sharing", "recipient", "revoke", n,
                                "--config", config], cwd=str(REPO), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for n in before[:3]]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    tokens = {n: json.loads(o)["bearerToken"] for n, (o, _) in zip(names, outs)}
    if where == "file":
        stored = {r["name"]: r for r in json.loads((tmp_path / "recipients.json").read_text())["recipients"]}
    else:
        import sqlite3

        with sqlite3.connect(tmp_path / "sharing.db") as db:
            stored = {n: json.loads(d) for n, d in db.execute("SELECT name, data FROM recipients")}
    assert sorted(stored) == sorted(names + before)
    for n, tok in tokens.items():
        assert stored[n]["tokenSha256"] == hashlib.sha256(tok.encode()).hexdigest() and not stored[n]["revoked"]
    assert [stored[n]["revoked"] for n in before] == [True] * 3 + [False] * 3
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]   # no temporary file left behind


def test_allow_anonymous_is_explicit(tmp_path):
    """`allowAnonymous: true`: requests without a token are served; a wrong token is still 401;
    the anonymous caller's file URLs work."""
    config, port = _server(tmp_path, {"allowAnonymous": True})
    proc = start_server(config, port)
    try:
        base = f"http://127.0.0.1:{port}/delta-sharing"
        for m, p, b in ROUTES:
            assert call(base, m, p, b, None).status_code == 200, p
            assert call(base, m, p, b, "wrong").status_code == 401, p
        assert httpx.get(file_urls(base, None)[0]).content[:4] == b"PAR1"
    finally:
        stop_server(proc)


def test_error_bodies_name_no_storage_location(tmp_path):
    """Errors about tables that are missing, corrupt, without CDF, or asked for versions they do
    not have: each answers its protocol error code, and no body holds the tables' folder (nor any
    other absolute path or URI)."""
    root = tmp_path / "secret-storage-place"
    tables = _tables(root)
    nocdf = TableBuilder(root / "nocdf", pa.schema([("x", pa.int64())]))
    nocdf.append(pa.table({"x": [1]}))
    corrupt = TableBuilder(root / "corrupt", pa.schema([("x", pa.int64())]))
    corrupt.append(pa.table({"x": [1]}))
    (root / "corrupt" / "_delta_log" / f"{1:020d}.json").write_text('{"add": {"path": 1}}\n{not json\n')
    gap = TableBuilder(root / "gap", pa.schema([("x", pa.int64())]))
    gap.append(pa.table({"x": [1]}))
    gap.append(pa.table({"x": [2]}))
    (root / "gap" / "_delta_log" / f"{0:020d}.json").unlink()
    locations = {**tables, "nocdf": str(root / "nocdf"), "corrupt": str(root / "corrupt"), "gap": str(root / "gap"),
                 "missing": str(root / "missing"), "elsewhere": "gs://secret-bucket/secret-storage-place/x"}
    port = free_port()
    cfg = {"shares": [{"name": "s", "schemas": [{"name": "sc", "tables": [
        {"name": n, "location": loc, "historyShared": True} for n, loc in locations.items()]}]}],
        "host": "127.0.0.1", "port": port, "authorization": {"bearerToken": "tok"}}
    config = tmp_path / "server.yaml"
    config.write_text(yaml.safe_dump(cfg))
    proc = start_server(str(config), port)
    base = f"http://127.0.0.1:{port}/delta-sharing/shares/s/schemas/sc/tables"
    cases = [
        ("GET", "/nocdf/changes?startingVersion=0", None, 400, "INVALID_PARAMETER_VALUE"),
        ("GET", "/t/changes?startingVersion=0&endingVersion=7", None, 200, None),
        ("GET", "/t/changes?startingVersion=5", None, 400, "INVALID_PARAMETER_VALUE"),
        ("POST", "/t/query", {"version": 9}, 400, "INVALID_PARAMETER_VALUE"),
        ("POST", "/t/query", {"timestamp": "2000-01-01T00:00:00Z"}, 400, "INVALID_PARAMETER_VALUE"),
        ("POST", "/t/query", {"startingVersion": 4}, 400, "INVALID_PARAMETER_VALUE"),
        ("GET", "/gap/changes?startingVersion=0", None, 400, "INVALID_PARAMETER_VALUE"),
        ("POST", "/gap/query", {"version": 0}, 400, "INVALID_PARAMETER_VALUE"),
        ("GET", "/missing/version", None, 404, "RESOURCE_DOES_NOT_EXIST"),
        ("GET", "/missing/metadata", None, 404, "RESOURCE_DOES_NOT_EXIST"),
        ("POST", "/missing/query", {}, 404, "RESOURCE_DOES_NOT_EXIST"),
        ("GET", "/corrupt/metadata", None, 500, "INTERNAL_ERROR"),
        ("POST", "/corrupt/query", {}, 500, "INTERNAL_ERROR"),
        # a store the server holds no credentials for: the provider's fault, answered as one
        ("GET", "/elsewhere/metadata", None, 500, "INTERNAL_ERROR"),
        ("POST", "/elsewhere/query", {"version": 1}, 500, "INTERNAL_ERROR"),
        ("GET", "/dv/metadata", None, 400, "UNSUPPORTED_OPERATION"),
    ]
    try:
        for method, path, body, status, code in cases:
            r = httpx.request(method, base + path, json=body, headers={"Authorization": "Bearer tok"}, timeout=30)
            assert r.status_code == status, (path, body, r.status_code, r.text)
            if code is None:
                continue
            assert r.json()["errorCode"] == code, (path, r.text)
            for secret in ("secret-storage-place", str(tmp_path), "/tmp", "gs://", "file:"):
                assert secret not in r.text, (path, body, r.text)
    finally:
        stop_server(proc)

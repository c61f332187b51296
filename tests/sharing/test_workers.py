"""`tahoe sharing serve --workers N`: several server processes on one port share what must be
shared — recipients added, rotated or revoked while it runs, the signing key of file URLs and
tokens, the JWT assertions already used, asynchronous queries (the SQLite state store beside the
config): a query submitted to one worker is polled through any.

A real server process with 2 workers; requests go through new connections, so they reach both
workers. Oracles: HTTP status codes, the bytes of the table's files on disk, the protocol's line
shapes, and the worker processes counted in /proc.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pyarrow as pa
import pytest
import yaml
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

import tahoe
from tests.sharing.conftest import REPO, free_port, start_server, stop_server


def _cli(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "tahoe", "sharing", "recipient", *args], cwd=str(REPO),
                          capture_output=True, text=True, check=True).stdout


def _children(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            kids = [int(x) for x in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
        except OSError:
            kids = []
        out.extend(kids)
        todo.extend(kids)
    return out


def _assertion(key, claims: dict) -> str:
    """An RS256 JWT signed here with cryptography (independent of tahoe's signer)."""
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()  # noqa: E731
    data = f"{enc({'alg': 'RS256', 'typ': 'JWT'})}.{enc(claims)}".encode()
    sig = key.sign(data, padding.PKCS1v15(), hashes.SHA256())
    return data.decode() + "." + base64.urlsafe_b64encode(sig).rstrip(b"=").decode()


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory):
    d = tmp_path_factory.mktemp("sharing-workers")
    table = d / "t"
    tahoe.write_table(str(table), pa.table({"id": pa.array(range(30), pa.int64()),
                                            "p": pa.array([f"p{i % 3}" for i in range(30)])}), partition_by=["p"])
    port = free_port()
    config = d / "server.yaml"
    config.write_text(yaml.safe_dump({"shares": [{"name": "s", "schemas": [{"name": "sc", "tables": [
        {"name": "t", "location": str(table)}]}]}], "host": "127.0.0.1", "port": port}))
    proc = start_server(str(config), port, args=["--workers", "2"])
    try:
        yield {"dir": d, "config": str(config), "table": table, "proc": proc,
               "url": f"http://127.0.0.1:{port}/delta-sharing"}
    finally:
        stop_server(proc)


def _get(url: str, token: str, **kw) -> httpx.Response:
    # a new connection per request: the kernel hands connections to either worker
    return httpx.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=60, **kw)


def test_two_worker_processes_serve(two_workers):
    deadline = time.time() + 120
    while len(_children(two_workers["proc"].pid)) < 3 and time.time() < deadline:   # 2 workers (+ a tracker)
        time.sleep(0.2)
    workers = [p for p in _children(two_workers["proc"].pid)
               if "spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")]
    assert len(workers) == 2


def test_recipients_added_and_revoked_while_running_reach_every_worker(two_workers):
    prof = json.loads(_cli("add", "late", "--share", "s", "--config", two_workers["config"]))
    token = prof["bearerToken"]
    codes = [_get(two_workers["url"] + "/shares", token).status_code for _ in range(24)]
    assert codes == [200] * 24
    # file URLs signed by whichever worker answered the query verify on every worker
    r = httpx.post(two_workers["url"] + "/shares/s/schemas/sc/tables/t/query", json={},
                   headers={"Authorization": f"Bearer {token}"}, timeout=60)
    assert r.status_code == 200
    files = [json.loads(x)["file"] for x in r.text.splitlines() if x.strip() and "file" in json.loads(x)]
    on_disk = {p.name: p.read_bytes() for p in two_workers["table"].rglob("*.parquet")}
    assert len(files) == len(on_disk) == 3
    for f in files:
        for _ in range(6):
            got = httpx.get(f["url"], timeout=60)
            assert got.status_code == 200
            assert len(got.content) == f["size"] and got.content in on_disk.values()
    _cli("revoke", "late", "--config", two_workers["config"])
    codes = [_get(two_workers["url"] + "/shares", token).status_code for _ in range(24)]
    assert codes == [401] * 24
    assert all(httpx.get(f["url"], timeout=60).status_code == 403 for f in files for _ in range(4))


def test_a_jwt_assertion_is_accepted_once_across_workers(two_workers):
    d = two_workers["dir"]
    key = rsa.generate_private_key(65537, 2048)
    (d / "kp.pub.pem").write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    prof = json.loads(_cli("add", "kp", "--share", "s", "--public-key", str(d / "kp.pub.pem"),
                           "--config", two_workers["config"]))
    endpoint = prof["auth"]["tokenEndpoint"]
    now = int(time.time())
    assertion = _assertion(key, {"iss": prof["auth"]["clientId"], "aud": endpoint, "iat": now, "exp": now + 120,
                                 "jti": uuid.uuid4().hex})
    answers = [httpx.post(endpoint, data={"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                                          "assertion": assertion}, timeout=60) for _ in range(12)]
    assert [a.status_code for a in answers].count(200) == 1
    refused = [a.json() for a in answers if a.status_code != 200]
    assert len(refused) == 11 and all(x["error"] == "invalid_grant" and "replayed" in x["error_description"]
                                      for x in refused)
    token = next(a.json()["access_token"] for a in answers if a.status_code == 200)
    assert [_get(two_workers["url"] + "/shares", token).status_code for _ in range(8)] == [200] * 8


def test_async_queries_are_polled_through_any_worker(two_workers):
    prof = json.loads(_cli("add", "asker", "--share", "s", "--config", two_workers["config"]))
    headers = {"Authorization": f"Bearer {prof['bearerToken']}", "delta-sharing-capabilities": "asyncquery=true"}
    key = uuid.uuid4().hex
    r = httpx.post(two_workers["url"] + "/shares/s/schemas/sc/tables/t/query", json={"idempotencyKey": key},
                   headers=headers, timeout=60)
    assert r.status_code == 200
    first = [json.loads(x) for x in r.text.splitlines() if x.strip()]
    if "queryStatus" in first[0]:
        qid = first[0]["queryStatus"]["queryId"]
        deadline = time.time() + 60
        while True:   # each poll on a new connection: the kernel hands them to either worker
            r = httpx.post(two_workers["url"] + f"/shares/s/schemas/sc/tables/t/queries/{qid}", json={},
                           headers=headers, timeout=60)
            assert r.status_code == 200, r.text
            lines = [json.loads(x) for x in r.text.splitlines() if x.strip()]
            if "queryStatus" not in lines[0] or time.time() > deadline:
                break
    else:
        lines = first
    assert [next(iter(x)) for x in lines] == ["protocol", "metaData", "file", "file", "file"]
    # the same idempotency key on any worker: the same query, answered
    for _ in range(6):
        again = httpx.post(two_workers["url"] + "/shares/s/schemas/sc/tables/t/query", json={"idempotencyKey": key},
                           headers=headers, timeout=60)
        got = [json.loads(x) for x in again.text.splitlines() if x.strip()]
        assert [next(iter(x)) for x in got] in (["protocol", "metaData", "file", "file", "file"], ["queryStatus"])

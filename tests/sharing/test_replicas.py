"""Two replicas of the sharing server on 127.0.0.1 behind a real reverse proxy (nginx, Debian's
package), their shared state in a real PostgreSQL server (Debian's package) the tests start: an
asynchronous query started on one replica is polled through the other; a recipient revoked
(through the store, from the command line) is refused by both at once; a JWT assertion is
accepted once whichever replica each attempt reaches; and a mixed load through the proxy
(metadata, query, file downloads, asynchronous queries) ends with 0 errors and exactly one audit
record per request. The load runs `LOAD_SECONDS` here; `python -m bench.sharing_load --mixed
--seconds 60` runs the same code for a minute. No log (the replicas', the audit log, nginx's
access log) holds a token or a file URL's signature.

Oracles: the table's files on disk, status codes, the requests the load generator counted."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import jwt as pyjwt
import pyarrow as pa
import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

import tahoe
from tests.sharing.services import REPO, free_port, start_nginx, start_postgres, start_replica, stop

LOAD_SECONDS = 12
TABLE = "/shares/s/schemas/sc/tables/t"


def cli(config: str, *args: str) -> str:
    return subprocess.run([sys.executable, "-m", "tahoe", "sharing", *args, "--config", config], cwd=str(REPO),
                          capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def pg():
    server = start_postgres()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def two(tmp_path_factory, pg):
    d = tmp_path_factory.mktemp("replicas")
    tahoe.write_table(str(d / "t"), pa.table({"id": list(range(60)), "p": [f"p{i % 6}" for i in range(60)]}),
                      partition_by=["p"])
    ports = [free_port(), free_port()]
    proxy_port = free_port()
    config = d / "server.yaml"
    config.write_text(yaml.safe_dump({
        "shares": [{"name": "s", "schemas": [{"name": "sc", "tables": [{"name": "t", "location": str(d / "t"),
                                                                         "historyShared": True}]}]}],
        "host": "127.0.0.1", "port": ports[0], "replicas": 2, "signingKey": "shared-" + "k" * 40,
        "store": pg.url, "publicUrl": f"http://127.0.0.1:{proxy_port}/delta-sharing",
        "audit": {"path": "sharing-audit.jsonl"}, "trustedProxies": ["127.0.0.1"]}))
    token = json.loads(cli(str(config), "recipient", "add", "reader", "--share", "s"))["bearerToken"]
    procs = [start_replica(str(config), p, f"replica-{i}", str(d / f"replica-{i}.log"), "--log-level", "info")
             for i, p in enumerate(ports)]
    proxy = start_nginx(ports, port=proxy_port)
    try:
        yield {"dir": d, "config": str(config), "token": token, "proxy": proxy,
               "replicas": [f"http://127.0.0.1:{p}/delta-sharing" for p in ports],
               "url": proxy.base + "/delta-sharing", "procs": procs}
    finally:
        proxy.stop()
        for p in procs:
            stop(p)


def _h(token: str, **extra) -> dict:
    return {"Authorization": f"Bearer {token}", **extra}


def _lines(r: httpx.Response) -> list[dict]:
    return [json.loads(x) for x in r.text.splitlines() if x.strip()]


def test_async_query_started_on_one_replica_is_polled_through_the_other(two):
    a, b = two["replicas"]
    caps = {"delta-sharing-capabilities": "asyncquery=true"}
    on_disk = {p.name: p.stat().st_size for p in (two["dir"] / "t").rglob("*.parquet")}
    for poll_via in (b, two["url"]):
        key = uuid.uuid4().hex
        r = httpx.post(a + TABLE + "/query", json={"idempotencyKey": key, "maxFiles": 4},
                       headers=_h(two["token"], **caps), timeout=60)
        first = _lines(r)
        assert r.status_code == 200 and list(first[0]) == ["queryStatus"], r.text   # replica A: pending
        qid = first[0]["queryStatus"]["queryId"]
        files, token, pages = [], None, 0
        deadline = time.time() + 60
        while time.time() < deadline:
            body = {"pageToken": token} if token else {}
            r = httpx.post(poll_via + TABLE + f"/queries/{qid}", json=body, headers=_h(two["token"], **caps),
                           timeout=60)
            assert r.status_code == 200, r.text
            lines = _lines(r)
            if "queryStatus" in lines[0]:
                continue
            pages += 1
            assert r.headers["delta-table-version"] == "0"
            files += [x["file"] for x in lines if "file" in x]
            token = lines[-1]["endStreamAction"].get("nextPageToken")
            if not token:
                break
        assert pages == 2 and len(files) == 6
        assert sorted(f["size"] for f in files) == sorted(on_disk.values())
        for f in files:   # the URLs a replica signed verify on the other, and through the proxy
            assert f["url"].startswith(two["url"] + "/files/")
            for base in (a, b):
                got = httpx.get(f["url"].replace(two["url"], base), timeout=60)
                assert got.status_code == 200 and len(got.content) == f["size"]
        # the same idempotency key on the other replica: the same query, not a second one
        r = httpx.post(b + TABLE + "/query", json={"idempotencyKey": key, "maxFiles": 4},
                       headers=_h(two["token"], **caps), timeout=60)
        got = _lines(r)
        assert "queryStatus" not in got[0] or got[0]["queryStatus"]["queryId"] == qid


def test_a_recipient_revoked_is_refused_by_both_replicas(two):
    prof = json.loads(cli(two["config"], "recipient", "add", "leaving", "--share", "s"))
    for base in two["replicas"]:
        assert httpx.get(base + "/shares", headers=_h(prof["bearerToken"])).status_code == 200
    r = httpx.post(two["replicas"][0] + TABLE + "/query", json={}, headers=_h(prof["bearerToken"]))
    url = _lines(r)[2]["file"]["url"]
    cli(two["config"], "recipient", "revoke", "leaving")
    t0 = time.time()
    refused = {}
    while len(refused) < 2 and time.time() - t0 < 10:
        for base in two["replicas"]:
            if base not in refused and httpx.get(base + "/shares", headers=_h(prof["bearerToken"])).status_code == 401:
                refused[base] = time.time() - t0
    assert len(refused) == 2 and max(refused.values()) < 2.0, refused   # PostgreSQL is polled twice a second
    for base in two["replicas"]:
        assert httpx.get(url.replace(two["url"], base)).status_code == 403


def test_a_jwt_assertion_is_accepted_once_across_replicas(two):
    key = rsa.generate_private_key(65537, 2048)
    pem = two["dir"] / "kp.pem"
    pem.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo))
    prof = json.loads(cli(two["config"], "recipient", "add", "kp", "--share", "s", "--public-key", str(pem)))
    endpoint, cid = prof["auth"]["tokenEndpoint"], prof["auth"]["clientId"]
    now = int(time.time())
    assertion = pyjwt.encode({"iss": cid, "aud": endpoint, "iat": now, "exp": now + 120, "jti": uuid.uuid4().hex},
                             key, algorithm="RS256")
    form = {"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": assertion}
    first = httpx.post(two["replicas"][0] + "/oauth/token", data=form)
    assert first.status_code == 200, first.text
    for base in (two["replicas"][1], two["replicas"][0], two["url"]):
        r = httpx.post(base + "/oauth/token", data=form)
        assert r.status_code == 400 and "replayed" in r.json()["error_description"], (base, r.text)
    access = first.json()["access_token"]
    for base in two["replicas"]:
        assert httpx.get(base + "/shares", headers=_h(access)).json()["items"] == [{"name": "s"}]


def test_mixed_load_through_the_proxy_loses_no_audit_record(two):
    from bench.sharing_load import count_audit, mixed_load

    r = mixed_load(two["proxy"].base, two["token"], LOAD_SECONDS, threads=4, tag=uuid.uuid4().hex,
                   table_path="/delta-sharing" + TABLE)
    assert r["errors"] == [], r["errors"][:5]
    assert r["requests"] > 200 and {"metadata", "query", "file", "async", "version"} <= set(r["by_kind"])
    deadline = time.time() + 10
    while (n := count_audit(two["dir"] / "sharing-audit.jsonl", r["user_agent"])) < r["requests"] \
            and time.time() < deadline:
        time.sleep(0.2)
    assert n == r["requests"]
    recs = [json.loads(x) for x in (two["dir"] / "sharing-audit.jsonl").read_text().splitlines()]
    mine = [x for x in recs if x.get("userAgent") == r["user_agent"]]
    assert {x["replica"] for x in mine} == {"replica-0", "replica-1"}      # both replicas served
    assert {x["client"] for x in mine} == {"127.0.0.1"}
    assert all(len(x["requestId"]) == 32 for x in mine)                    # nginx's $request_id, passed on
    # metrics of each replica count its own requests
    from prometheus_client.parser import text_string_to_metric_families

    total = 0
    for base in two["replicas"]:
        text = httpx.get(base.replace("/delta-sharing", "") + "/metrics").text
        total += sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
                     if s.name == "tahoe_sharing_requests_total")
    assert total >= r["requests"]
    # no log holds the token or a signature
    q = httpx.post(two["url"] + TABLE + "/query", json={}, headers=_h(two["token"]))
    sigs = set(re.findall(r"X-Amz-Signature=([0-9a-f]+)", q.text))
    assert sigs
    logs = {"nginx": two["proxy"].access_log(), "audit": (two["dir"] / "sharing-audit.jsonl").read_text(),
            **{p.name: p.read_text() for p in two["dir"].glob("replica-*.log")}}
    assert "/delta-sharing/files/" in logs["nginx"] and "/delta-sharing/files/" in logs["replica-0.log"]
    for name, text in logs.items():
        assert two["token"] not in text and "X-Amz-Signature" not in text, name
        assert not any(s in text for s in sigs), name

"""The sharing server as a provider operates it (issue 34), one replica, as a real process: the
audit log after real reads by the official `delta-sharing` client and tahoe's client (records
complete; no token or signature in any log line), Prometheus metrics that move, health and
readiness during warm-up, the request timeout, per-recipient allow-lists and quotas (403/429 with
`Retry-After`), the throttled token endpoint, the recipient lifecycle (grant/ungrant, delete,
rotation with grace, profiles written 0600, a malformed recipients file that never takes the
server down), the reference server's config template, every problem of a config in one run, and
JWT assertions refused as RFC 7523 and RFC 8725 say.

Oracles: rows written here, the files on disk, the protocol's status codes and headers, the
Prometheus text format parsed by prometheus_client's own parser, JWTs made by PyJWT and by hand."""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import stat
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
import tahoe.sharing as tds
from tests.sharing.services import REPO, free_port, start_replica, stop, wait_http

DATA = Path(__file__).parent / "data"
ROWS = {"id": list(range(40)), "p": [f"p{i % 4}" for i in range(40)]}
TABLE = "/shares/s/schemas/sc/tables/t"


def cli(config: str, *args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tahoe", "sharing", *args, "--config", config], cwd=str(REPO),
                          capture_output=True, text=True, check=check, **kw)


def add(config: str, name: str, *args: str) -> tuple[str, dict]:
    """A recipient added with the CLI, its profile written with --profile-out: (path, profile)."""
    out = Path(config).parent / f"{name}.share"
    cli(config, "recipient", "add", name, *args, "--profile-out", str(out))
    return str(out), json.loads(out.read_text())


def auth(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def audit_records(path: Path, wait_for: int = 0) -> list[dict]:
    """The audit file's records, waiting (the writer flushes every 0.2 s) until there are at least
    `wait_for`."""
    deadline = time.time() + 10
    while True:
        recs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []
        if len(recs) >= wait_for or time.time() > deadline:
            return recs
        time.sleep(0.1)


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    d = tmp_path_factory.mktemp("ops")
    tahoe.write_table(str(d / "t"), pa.table(ROWS), partition_by=["p"])
    tahoe.write_table(str(d / "u"), pa.table({"x": [1, 2, 3]}))
    # one file of ~24 MB (random bytes do not compress): a download that stays in flight while held
    tahoe.write_table(str(d / "big"), pa.table({"b": pa.array([os.urandom(24 << 20)], pa.large_binary())}))
    port = free_port()
    config = d / "server.yaml"
    config.write_text(yaml.safe_dump({
        "shares": [{"name": "s", "schemas": [{"name": "sc", "tables": [{"name": "t", "location": str(d / "t")},
                                                                    {"name": "big", "location": str(d / "big")}]}]},
                   {"name": "s2", "schemas": [{"name": "sc", "tables": [{"name": "u", "location": str(d / "u")}]}]}],
        "host": "127.0.0.1", "port": port, "audit": {"path": "audit/sharing-audit.jsonl"},
        "limits": {"tokenRequestsPerMinute": 5}, "trustedProxies": ["127.0.0.1"]}))
    profiles = {n: add(str(config), n, "--share", "s") for n in ("alice", "limited", "fenced", "rot", "life")}
    log = d / "server.log"
    proc = start_replica(str(config), port, "ops-1", str(log), "--log-level", "info")
    yield {"dir": d, "config": str(config), "base": f"http://127.0.0.1:{port}", "url": f"http://127.0.0.1:{port}"
           "/delta-sharing", "profiles": profiles, "log": log, "audit": d / "audit" / "sharing-audit.jsonl",
           "proc": proc}
    stop(proc)


# --- the audit log ---------------------------------------------------------------------------------------------
def test_audit_log_of_real_reads_is_complete_and_no_log_holds_a_secret(ops, official):
    path, prof = ops["profiles"]["alice"]
    token = prof["bearerToken"]
    before = len(audit_records(ops["audit"]))
    t_official = official.load_as_pandas(f"{path}#s.sc.t")
    t_tahoe = tds.load_as_arrow(f"{path}#s.sc.t")
    for t in (t_official, t_tahoe):
        assert sorted(zip(t.column("id").to_pylist(), t.column("p").to_pylist())) == sorted(zip(ROWS["id"], ROWS["p"]))
    # the signatures this recipient's URLs carry, to look for in the logs
    r = httpx.post(ops["url"] + TABLE + "/query", json={}, headers=auth(token))
    urls = [json.loads(x)["file"]["url"] for x in r.text.splitlines()[2:]]
    signatures = {re.search(r"X-Amz-Signature=([0-9a-f]+)", u).group(1) for u in urls}
    assert len(urls) == 4 and len(signatures) == 4
    assert httpx.get(urls[0]).status_code == 200
    deadline = time.time() + 10
    while True:   # the audit writer flushes every 0.2 s: wait for the download's record
        recs = audit_records(ops["audit"], before + 1)[before:]
        mine = [x for x in recs if x.get("recipient") == "alice"]
        ops_seen = {x["operation"] for x in mine}
        if {"query_table", "get_file"} <= ops_seen or time.time() > deadline:
            break
        time.sleep(0.1)
    assert {"query_table", "get_file"} <= ops_seen, ops_seen
    agents = {x["userAgent"].split("/")[0] for x in mine}
    assert "Delta-Sharing-Python" in agents, agents            # the official client's reads are there
    for x in mine:
        for k in ("time", "requestId", "replica", "recipient", "share", "schema", "table", "operation", "bytes",
                  "status", "latencyMs", "client", "userAgent"):
            assert x.get(k) is not None, (k, x)
        assert (x["share"], x["schema"], x["table"], x["client"], x["replica"]) == ("s", "sc", "t", "127.0.0.1", "ops-1")
    queries = [x for x in mine if x["operation"] == "query_table" and x["status"] == 200]
    assert queries and all(x["files"] == 4 and x["version"] == 0 for x in queries)
    sizes = {p.stat().st_size for p in (ops["dir"] / "t").rglob("*.parquet")}
    downloads = [x for x in mine if x["operation"] == "get_file" and x["status"] in (200, 206)]
    assert downloads and all(0 < x["bytes"] <= max(sizes) for x in downloads)
    assert any(x["bytes"] in sizes for x in downloads)          # a whole file, its size as on disk
    assert len({x["requestId"] for x in recs}) == len(recs)
    # no log line holds a token, a client secret or a file URL's signature
    cli(ops["config"], "recipient", "list")   # (nothing to print, but the CLI ran)
    secrets_ = {token, *signatures, prof["bearerToken"][:20]}
    logs = {"audit": ops["audit"].read_text(), "server": ops["log"].read_text()}
    assert "POST /delta-sharing/shares/s/schemas/sc/tables/t/query" in logs["server"]   # the access log is on
    assert "/delta-sharing/files/" in logs["server"] and "X-Amz-Signature" not in logs["server"]
    for name, text in logs.items():
        for s in secrets_:
            assert s not in text, (name, s[:8])
        assert "X-Amz-Credential" not in text and "Bearer" not in text, name


def test_audit_command_answers_who_read_a_table_and_bytes_per_day(ops):
    path, prof = ops["profiles"]["alice"]
    tds.load_as_arrow(f"{path}#s.sc.t")
    audit_records(ops["audit"], 1)
    time.sleep(0.5)
    r = cli(ops["config"], "audit", "--table", "s.sc.t", "--since", "7d", "--by", "recipient", "--json")
    rows = {x["recipient"]: x for x in json.loads(r.stdout)}
    recs = [x for x in audit_records(ops["audit"]) if x.get("recipient") == "alice" and x.get("table") == "t"]
    assert rows["alice"]["bytes"] == sum(x["bytes"] for x in recs)
    assert rows["alice"]["downloads"] == sum(1 for x in recs if x["operation"] in ("get_file", "head_file"))
    r = cli(ops["config"], "audit", "--by", "recipient-day", "--plot")
    today = time.strftime("%Y-%m-%d", time.gmtime())
    assert "alice" in r.stdout and today in r.stdout and "bytes per day per recipient" in r.stdout
    assert re.search(r"alice\s*│\s*" + today, r.stdout), r.stdout[:2000]
    r = cli(ops["config"], "audit", "--recipient", "nobody", "--json")
    assert json.loads(r.stdout) == []


# --- metrics -----------------------------------------------------------------------------------------------------
def _scrape(base: str) -> dict:
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(base + "/metrics").text
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_move(ops):
    _, prof = ops["profiles"]["alice"]
    m0 = _scrape(ops["base"])
    r = httpx.post(ops["url"] + TABLE + "/query", json={}, headers=auth(prof["bearerToken"]))
    url = json.loads(r.text.splitlines()[2])["file"]["url"]
    got = httpx.get(url)
    assert httpx.get(ops["url"] + "/shares", headers=auth("not-a-token")).status_code == 401
    m1 = _scrape(ops["base"])

    def delta(name, **labels):
        key = (name, tuple(sorted(labels.items())))
        return m1.get(key, 0) - m0.get(key, 0)
    assert delta("tahoe_sharing_requests_total", operation="query_table", status="200", share="s") == 1
    assert delta("tahoe_sharing_requests_total", operation="get_file", status="200", share="s") == 1
    assert delta("tahoe_sharing_files_returned_total", share="s") == 4
    assert delta("tahoe_sharing_file_bytes_served_total", share="s") == len(got.content)
    assert delta("tahoe_sharing_auth_failures_total", reason="unknown_token") == 1
    assert delta("tahoe_sharing_snapshot_cache_total", result="hit") >= 1
    assert delta("tahoe_sharing_request_duration_seconds_count", operation="query_table") == 1
    assert m1[("tahoe_sharing_ready", ())] == 1
    assert m1[("tahoe_sharing_table_load_seconds_count", (("share", "s"),))] >= 1


# --- health, readiness, the request timeout ---------------------------------------------------------------------------
def _big_log(root: Path, files: int) -> None:
    """A table whose one commit adds `files` files: loading and preparing it takes a while."""
    (root / "_delta_log").mkdir(parents=True)
    schema = json.dumps({"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True,
                                                        "metadata": {}}]})
    with open(root / "_delta_log" / f"{0:020d}.json", "w") as f:
        f.write(json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}) + "\n")
        f.write(json.dumps({"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                                         "schemaString": schema, "partitionColumns": [], "configuration": {}}}) + "\n")
        for i in range(files):
            f.write('{"add":{"path":"part-%07d.parquet","partitionValues":{},"size":1000,"modificationTime":0,'
                    '"dataChange":true,"stats":"{\\"numRecords\\":10}"}}\n' % i)


def test_healthz_and_readyz_during_warm_up(tmp_path):
    tables = []
    for i in range(4):
        _big_log(tmp_path / f"big{i}", 200_000)
        tables.append({"name": f"big{i}", "location": str(tmp_path / f"big{i}")})
    port = free_port()
    config = tmp_path / "server.yaml"
    config.write_text(yaml.safe_dump({"shares": [{"name": "s", "schemas": [{"name": "sc", "tables": tables}]}],
                                      "port": port, "host": "127.0.0.1"}))
    proc = subprocess.Popen([sys.executable, "-m", "tahoe", "sharing", "serve", "--config", str(config)],
                            cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen = []
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", 120, proc)
        deadline = time.time() + 120
        while time.time() < deadline:
            h = httpx.get(f"http://127.0.0.1:{port}/healthz").status_code
            r = httpx.get(f"http://127.0.0.1:{port}/readyz")
            seen.append((h, r.status_code, r.json()))
            if r.status_code == 200:
                break
            time.sleep(0.05)
    finally:
        stop(proc)
    warming = [x for x in seen if x[1] == 503]
    assert warming, "the warm-up was over before the first probe"
    assert all(h == 200 for h, _, _ in seen)                    # alive all along
    assert "warming up" in warming[0][2]["problems"][0] and "of 4 tables loaded" in warming[0][2]["problems"][0]
    assert seen[-1][1] == 200 and seen[-1][2]["status"] == "ready"


def test_request_timeout_answers_503_while_the_store_hangs(tmp_path):
    """requestTimeoutSeconds (the reference server's key): the table's object store accepts
    connections but never answers; the request is answered 503 REQUEST_TIMEOUT with Retry-After
    after about a second, and /readyz says the server is not ready (its table never loads)."""
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(64)                     # the kernel accepts connections; nobody ever answers
    port = free_port()
    config = tmp_path / "server.yaml"
    config.write_text(yaml.safe_dump({
        "shares": [{"name": "s", "schemas": [{"name": "sc", "tables": [{"name": "t", "location": "s3://b/t"}]}]}],
        "port": port, "host": "127.0.0.1", "requestTimeoutSeconds": 1, "authorization": {"bearerToken": "tok"}}))
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{hole.getsockname()[1]}", "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
    proc = subprocess.Popen([sys.executable, "-m", "tahoe", "sharing", "serve", "--config", str(config)],
                            cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **env})
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", 120, proc)
        t0 = time.time()
        r = httpx.get(f"http://127.0.0.1:{port}/delta-sharing{TABLE}/metadata", headers=auth("tok"), timeout=60)
        took = time.time() - t0
        assert r.status_code == 503 and r.json()["errorCode"] == "REQUEST_TIMEOUT", r.text
        assert r.headers["retry-after"] == "1" and r.headers["x-request-id"]
        assert 0.9 <= took < 30, took
        assert httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 503
    finally:
        proc.kill()      # its abandoned request still waits for the store: no graceful stop to wait for
        proc.wait()
        hole.close()


# --- per-recipient controls --------------------------------------------------------------------------------------------
def test_allow_list_refuses_other_addresses_with_403(ops):
    path, prof = ops["profiles"]["fenced"]
    cli(ops["config"], "recipient", "set", "fenced", "--allow", "10.1.2.0/24", "--allow", "192.0.2.7")
    r = httpx.get(ops["url"] + "/shares", headers=auth(prof["bearerToken"]))
    assert r.status_code == 403 and r.json()["errorCode"] == "PERMISSION_DENIED"
    cli(ops["config"], "recipient", "set", "fenced", "--allow", "127.0.0.0/8")
    assert httpx.get(ops["url"] + "/shares", headers=auth(prof["bearerToken"])).status_code == 200
    cli(ops["config"], "recipient", "set", "fenced", "--allow", "::1")
    assert httpx.get(ops["url"] + "/shares", headers=auth(prof["bearerToken"])).status_code == 403
    cli(ops["config"], "recipient", "set", "fenced", "--allow", "any")
    assert httpx.get(ops["url"] + "/shares", headers=auth(prof["bearerToken"])).status_code == 200


def test_request_rate_and_byte_quotas_answer_429_with_retry_after(ops):
    _, prof = ops["profiles"]["limited"]
    h = auth(prof["bearerToken"])
    cli(ops["config"], "recipient", "set", "limited", "--requests-per-minute", "6")
    codes = [httpx.get(ops["url"] + "/shares", headers=h) for _ in range(8)]
    assert [c.status_code for c in codes[:6]] == [200] * 6
    refused = codes[6]
    assert refused.status_code == 429 and refused.json()["errorCode"] == "REQUEST_LIMIT_EXCEEDED"
    assert 1 <= int(refused.headers["retry-after"]) <= 10       # a token is back every 10 s
    # bytes: a quota smaller than two files; the first download passes, then 429 until midnight UTC
    cli(ops["config"], "recipient", "set", "limited", "--requests-per-minute", "0", "--bytes-per-day", "1")
    r = httpx.post(ops["url"] + TABLE + "/query", json={}, headers=h)
    urls = [json.loads(x)["file"]["url"] for x in r.text.splitlines()[2:]]
    assert httpx.get(urls[0]).status_code == 200
    time.sleep(2.5)    # the byte counts reach the state store every second
    r = httpx.get(urls[1])
    assert r.status_code == 429 and r.json()["errorCode"] == "RESOURCE_EXHAUSTED", r.text
    now = time.gmtime()
    to_midnight = 86400 - (now.tm_hour * 3600 + now.tm_min * 60 + now.tm_sec)
    assert abs(int(r.headers["retry-after"]) - to_midnight) <= 5
    assert httpx.post(ops["url"] + TABLE + "/query", json={}, headers=h).status_code == 429
    cli(ops["config"], "recipient", "set", "limited", "--bytes-per-day", "0", "--max-streams", "1")
    # one request in flight at a time: a download of a 24 MB file held open, a second request refused
    r = httpx.post(ops["url"] + "/shares/s/schemas/sc/tables/big/query", json={}, headers=h)
    big = json.loads(r.text.splitlines()[2])["file"]["url"]
    with httpx.stream("GET", big) as held:
        assert held.status_code == 200
        r = httpx.get(ops["url"] + "/shares", headers=h)
        assert r.status_code == 429 and r.headers["retry-after"] == "1"
        assert len(held.read()) > 24 << 20
    assert httpx.get(ops["url"] + "/shares", headers=h).status_code == 200
    want = {"rate_limited", "byte_quota", "too_many_streams"}
    deadline = time.time() + 10   # the audit writer flushes every 0.2 s: wait for the last refusal's record
    while True:
        got = {x["refused"] for x in audit_records(ops["audit"]) if x.get("recipient") == "limited" and x.get("refused")}
        if got >= want or time.time() > deadline:
            break
        time.sleep(0.1)
    assert got >= want


def test_token_endpoint_is_throttled_per_address(ops):
    url = ops["url"] + "/oauth/token"
    # the client's address as a trusted proxy (127.0.0.1, trustedProxies) forwards it
    codes = [httpx.post(url, data={"grant_type": "client_credentials"}, auth=("nobody", "x"),
                        headers={"X-Forwarded-For": "198.51.100.9"}) for _ in range(7)]
    assert [c.status_code for c in codes[:5]] == [401] * 5
    assert codes[6].status_code == 429 and codes[6].json()["error"] == "slow_down"
    assert int(codes[6].headers["retry-after"]) >= 1


# --- the recipient lifecycle ---------------------------------------------------------------------------------------------------
def test_rotation_with_grace_accepts_both_tokens_until_the_grace_ends(ops):
    path, old = ops["profiles"]["rot"]
    new_path = ops["dir"] / "rot-new.share"
    cli(ops["config"], "recipient", "rotate", "rot", "--grace", "4", "--profile-out", str(new_path))
    new = json.loads(new_path.read_text())
    t0 = time.time()
    assert httpx.get(ops["url"] + "/shares", headers=auth(old["bearerToken"])).status_code == 200
    assert httpx.get(ops["url"] + "/shares", headers=auth(new["bearerToken"])).status_code == 200
    r = httpx.post(ops["url"] + TABLE + "/query", json={}, headers=auth(old["bearerToken"]))
    old_url = json.loads(r.text.splitlines()[2])["file"]["url"]
    assert httpx.get(old_url).status_code == 200                # URLs issued to the old token too
    assert time.time() - t0 < 4, "too slow to observe the grace period"
    time.sleep(max(0.0, 4.5 - (time.time() - t0)))
    assert httpx.get(ops["url"] + "/shares", headers=auth(old["bearerToken"])).status_code == 401
    assert httpx.get(old_url).status_code == 403
    assert httpx.get(ops["url"] + "/shares", headers=auth(new["bearerToken"])).status_code == 200


def test_grant_ungrant_delete_and_profile_modes(ops):
    path, prof = ops["profiles"]["life"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    h = auth(prof["bearerToken"])
    names = lambda: [x["name"] for x in httpx.get(ops["url"] + "/shares", headers=h).json()["items"]]  # noqa: E731
    assert names() == ["s"]
    cli(ops["config"], "recipient", "grant", "life", "--share", "s2")
    assert names() == ["s", "s2"]
    r = httpx.post(ops["url"] + "/shares/s2/schemas/sc/tables/u/query", json={}, headers=h)
    url = json.loads(r.text.splitlines()[2])["file"]["url"]
    cli(ops["config"], "recipient", "ungrant", "life", "--share", "s2")
    assert names() == ["s"]
    assert httpx.get(url).status_code == 403                       # its URLs of the share die with the grant
    assert cli(ops["config"], "recipient", "ungrant", "life", "--share", "s2", check=False).returncode == 1
    cli(ops["config"], "recipient", "set", "life", "--comment", "ACME", "--property", "team=finance")
    deadline = time.time() + 10
    while True:   # used above: the server flushes last-used times to the store every second
        listed = {x["name"]: x for x in json.loads(cli(ops["config"], "recipient", "list", "--json").stdout)}
        if listed["life"]["lastUsed"] is not None or time.time() > deadline:
            break
        time.sleep(0.3)
    assert listed["life"]["comment"] == "ACME" and listed["life"]["properties"] == {"team": "finance"}
    assert listed["life"]["lastUsed"] is not None
    assert listed["alice"]["shares"] == ["s"]
    cli(ops["config"], "recipient", "delete", "life")
    assert httpx.get(ops["url"] + "/shares", headers=h).status_code == 401
    # a profile printed into a file the shell made: that file is made private too
    out = ops["dir"] / "redirected.share"
    with open(out, "w") as f:
        os.chmod(out, 0o644)
        subprocess.run([sys.executable, "-m", "tahoe", "sharing", "recipient", "add", "redir", "--share", "s",
                        "--config", ops["config"]], cwd=str(REPO), stdout=f, check=True)
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600 and json.loads(out.read_text())["bearerToken"]


def test_malformed_recipients_file_keeps_the_server_serving(tmp_path):
    tahoe.write_table(str(tmp_path / "t"), pa.table(ROWS))
    port = free_port()
    config = tmp_path / "server.yaml"
    config.write_text(yaml.safe_dump({
        "shares": [{"name": "s", "schemas": [{"name": "sc", "tables": [{"name": "t", "location": str(tmp_path / "t")}]}]}],
        "port": port, "host": "127.0.0.1", "recipientsFile": "recipients.json"}))
    _, prof = add(str(config), "alice", "--share", "s")
    log = tmp_path / "server.log"
    proc = start_replica(str(config), port, "r", str(log))
    rf = tmp_path / "recipients.json"
    good = rf.read_text()
    try:
        h = auth(prof["bearerToken"])
        assert httpx.get(f"http://127.0.0.1:{port}/delta-sharing/shares", headers=h).status_code == 200
        # hand edits: a stray comma, then a recipient without a token hash and one with a bad CIDR
        rf.write_text(good.replace('"shares": [', '"shares": [,'))
        for _ in range(3):
            assert httpx.get(f"http://127.0.0.1:{port}/delta-sharing/shares", headers=h).status_code == 200
        assert "not valid JSON" in log.read_text() and "last good copy" in log.read_text()
        r = cli(str(config), "check-config", check=False)
        assert r.returncode == 1 and "not valid JSON" in r.stderr
        data = json.loads(good)
        data["recipients"].append({"name": "broken", "shares": ["s"]})
        data["recipients"].append({"name": "fenced", "tokenSha256": "ab", "shares": ["s"], "allow": ["10.0.0.300"]})
        rf.write_text(json.dumps(data))
        assert httpx.get(f"http://127.0.0.1:{port}/delta-sharing/shares", headers=h).status_code == 200
        r = cli(str(config), "check-config", check=False)
        problems = [x for x in r.stderr.splitlines() if x.startswith("problem:")]
        assert r.returncode == 1 and len(problems) == 2, r.stderr
        assert "'broken'" in problems[0] and "tokenSha256" in problems[0] and "10.0.0.300" in problems[1]
        # a change through the CLI refuses to overwrite the broken file
        bad = cli(str(config), "recipient", "revoke", "alice", check=False)
        assert bad.returncode == 1 and "tokenSha256" in bad.stderr
        rf.write_text(good)
        assert cli(str(config), "check-config").returncode == 0
    finally:
        stop(proc)


# --- the configuration -------------------------------------------------------------------------------------------------
def test_the_reference_template_loads(tmp_path):
    template = tmp_path / "delta-sharing-server.yaml"
    template.write_text((DATA / "delta-sharing-server.yaml.template").read_text())
    r = cli(str(template), "check-config")
    warnings = [x for x in r.stderr.splitlines() if x.startswith("warning:")]
    assert r.returncode == 0 and len(warnings) == 3, r.stderr
    assert [w.split()[1] for w in warnings] == ["deltaTableCacheSize", "stalenessAcceptable",
                                               "evaluateJsonPredicateHintsV2"]
    from tahoe.sharing.config import load_config

    cfg = load_config(str(template))
    assert [s.name for s in cfg.shares] == ["share1", "share2", "share3", "share4"]
    assert (cfg.evaluate_predicate_hints, cfg.query_table_page_size_limit, cfg.page_token_ttl_seconds,
            cfg.refresh_token_ttl_seconds) == (False, 10000, 259200, 3600)
    # the server starts with it (on another port), warns once per key and tells the truth
    port = free_port()
    log = tmp_path / "serve.log"
    proc = start_replica(str(template), port, "tpl", str(log), "--host", "127.0.0.1")
    try:
        assert httpx.get(f"http://127.0.0.1:{port}/delta-sharing/shares").status_code == 401
    finally:
        stop(proc)
    text = log.read_text()
    assert text.count("warning: deltaTableCacheSize is ignored") == 1
    assert "every request is refused (401) until one is added" in text and "allowed" not in text
    assert "serving 5 table(s)" in text


def test_a_config_with_three_problems_reports_three(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({
        "shares": [{"name": "s", "schemas": [{"name": "sc", "tables": [{"name": "t"}]}]}],   # no location
        "port": "eighty",                                                                       # not a number
        "allowAnonymus": True}))                                                                # misspelt
    r = cli(str(bad), "check-config", check=False)
    problems = [x for x in r.stderr.splitlines() if x.startswith("problem:")]
    assert r.returncode == 1 and len(problems) == 3, r.stderr
    assert any("has no location" in p for p in problems) and any("port must be an integer" in p for p in problems)
    assert any("unknown key 'allowAnonymus'" in p for p in problems)
    r = subprocess.run([sys.executable, "-m", "tahoe", "sharing", "serve", "--config", str(bad)], cwd=str(REPO),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "3 problems" in r.stderr and r.stderr.count("  - ") == 3


def test_several_replicas_need_a_shared_signing_key(tmp_path):
    cfg = tmp_path / "r.yaml"
    cfg.write_text(yaml.safe_dump({"shares": [], "replicas": 2}))
    r = subprocess.run([sys.executable, "-m", "tahoe", "sharing", "serve", "--config", str(cfg)], cwd=str(REPO),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "Set signingKey (or signingKeyFile) to the same secret on every replica" in r.stderr
    cfg.write_text(yaml.safe_dump({"shares": [], "replicas": 2, "signingKey": "s" * 32}))
    assert cli(str(cfg), "check-config").returncode == 0


# --- JWT assertions ----------------------------------------------------------------------------------------------------
def _b64(d) -> str:
    raw = d if isinstance(d, bytes) else json.dumps(d).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def test_jwt_assertions_refused(ops):
    key = rsa.generate_private_key(65537, 2048)
    pub = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    (ops["dir"] / "kp.pem").write_bytes(pub)
    _, prof = add(ops["config"], "kp", "--share", "s", "--public-key", str(ops["dir"] / "kp.pem"))
    endpoint, cid = prof["auth"]["tokenEndpoint"], prof["auth"]["clientId"]
    now = int(time.time())

    def claims(**kw):
        return {"iss": cid, "aud": endpoint, "iat": now, "exp": now + 120, "jti": uuid.uuid4().hex, **kw}

    def grant(assertion: str) -> httpx.Response:
        return httpx.post(endpoint, data={"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                                          "assertion": assertion}, headers={"X-Forwarded-For": uuid.uuid4().hex})

    rs256 = lambda c, **h: pyjwt.encode(c, key, algorithm="RS256", headers=h or None)  # noqa: E731
    good = claims()
    cases = {
        "alg none": f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64(claims())}.",
        "HS256 keyed with the RSA public key": (lambda hi: hi + "." + _b64(
            __import__("hmac").new(pub, hi.encode(), "sha256").digest()))(
            f"{_b64({'alg': 'HS256', 'typ': 'JWT'})}.{_b64(claims())}"),
        "wrong audience": rs256(claims(aud="https://elsewhere.example/oauth/token")),
        "expired": rs256(claims(iat=now - 900, exp=now - 600)),
        "not yet valid": rs256(claims(nbf=now + 600, exp=now + 700)),
        "issued in the future": rs256(claims(iat=now + 600, exp=now + 700)),
        "no jti": rs256({k: v for k, v in claims().items() if k != "jti"}),
        "signed by another key": pyjwt.encode(claims(), rsa.generate_private_key(65537, 2048), algorithm="RS256"),
        "ES256 header on an RSA key": f"{_b64({'alg': 'ES256'})}.{_b64(claims())}.{_b64(b'x' * 64)}",
    }
    assert grant(rs256(good)).status_code == 200
    cases["replayed jti"] = rs256(good)
    for what, assertion in cases.items():
        r = grant(assertion)
        assert r.status_code == 400 and r.json()["error"] == "invalid_grant", (what, r.status_code, r.text)
    assert "replayed" in grant(rs256(good)).json()["error_description"]
    m = _scrape(ops["base"])
    assert m.get(("tahoe_sharing_auth_failures_total", (("reason", "jwt_algorithm"),)), 0) >= 3
    assert m.get(("tahoe_sharing_auth_failures_total", (("reason", "jwt_replayed"),)), 0) >= 2


def test_a_recipients_file_of_the_old_layout_keeps_serving_and_imports_into_the_store(tmp_path):
    """Before the state store, recipients lived in `recipients.json` beside the config: a
    deployment that has one keeps its recipients (no silent switch to an empty sharing.db), and
    `recipient import` moves them, tokens unchanged."""
    from tahoe.sharing.config import hash_token, load_config
    from tahoe.sharing.recipients import open_recipients

    shares = [{"name": "s", "schemas": [{"name": "sc", "tables": [{"name": "t", "location": str(tmp_path / "t")}]}]}]
    config = tmp_path / "server.yaml"
    config.write_text(yaml.safe_dump({"shares": shares, "recipientsFile": "recipients.json"}))
    _, prof = add(str(config), "alice", "--share", "s")       # written to recipients.json, as before
    config.write_text(yaml.safe_dump({"shares": shares}))      # the old config: no recipientsFile, no store

    cfg = load_config(str(config))
    assert cfg.recipients_file == str(tmp_path / "recipients.json")
    assert any("recipients.json" in w and "recipient import" in w for w in cfg.warnings)
    assert open_recipients(cfg).by_token_hash(hash_token(prof["bearerToken"])).name == "alice"

    r = cli(str(config), "recipient", "import", str(tmp_path / "recipients.json"))
    assert "imported 1 recipient" in r.stderr
    assert not (tmp_path / "recipients.json").exists() and (tmp_path / "recipients.json.imported").exists()
    cfg = load_config(str(config))
    assert cfg.recipients_file is None and cfg.store_url.endswith("sharing.db")
    found = open_recipients(cfg).by_token_hash(hash_token(prof["bearerToken"]))
    assert found is not None and found.name == "alice" and found.grants("s")

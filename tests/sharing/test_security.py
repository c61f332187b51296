"""Authentication, authorization and file-URL integrity: every endpoint answers 401 without a
valid, unexpired, unrevoked token; an ungranted share looks exactly like a missing one; tampered,
expired and cross-table file URLs get 403 and no bytes; traversal in names and URLs is refused."""

from __future__ import annotations

import json
import time
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tahoe.sharing.config import hash_token
from tahoe.sharing.signing import Holder, Signer, b64d, b64e

ENDPOINTS = [
    ("GET", "/shares", None),
    ("GET", "/shares/s1", None),
    ("GET", "/shares/s1/schemas", None),
    ("GET", "/shares/s1/schemas/sc/tables", None),
    ("GET", "/shares/s1/all-tables", None),
    ("GET", "/shares/s1/schemas/sc/tables/cdf/version", None),
    ("HEAD", "/shares/s1/schemas/sc/tables/cdf", None),
    ("GET", "/shares/s1/schemas/sc/tables/cdf/metadata", None),
    ("POST", "/shares/s1/schemas/sc/tables/cdf/query", {}),
    ("GET", "/shares/s1/schemas/sc/tables/cdf/changes?startingVersion=0", None),
]


def _call(server, method, path, body, token):
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return httpx.request(method, server.url + path, headers=headers, json=body, timeout=30)


@pytest.mark.parametrize("method,path,body", ENDPOINTS)
@pytest.mark.parametrize("who", [None, "wrong", "expired", "revoked"])
def test_unauthenticated(server, method, path, body, who):
    token = None if who is None else server.tokens.get(who, "not-a-token")
    r = _call(server, method, path, body, token)
    assert r.status_code == 401, (who, path, r.status_code)
    if method != "HEAD":
        assert r.json()["errorCode"] == "UNAUTHENTICATED"


@pytest.mark.parametrize("method,path,body", ENDPOINTS)
def test_authenticated(server, method, path, body):
    r = _call(server, method, path, body, server.tokens["alice"])
    assert r.status_code == 200, (path, r.text)
    if "/tables/cdf" in path:
        assert "Delta-Table-Version" in r.headers


def test_malformed_authorization_header(server):
    r = httpx.get(server.url + "/shares", headers={"Authorization": "Basic Zm9vOmJhcg=="})
    assert r.status_code == 401


def test_ungranted_share_is_missing(server):
    alice = server.tokens["alice"]
    for path in ["/shares/secret", "/shares/secret/schemas", "/shares/secret/all-tables",
                 "/shares/secret/schemas/sc/tables", "/shares/secret/schemas/sc/tables/t/version",
                 "/shares/secret/schemas/sc/tables/t/metadata"]:
        a = _call(server, "GET", path, None, alice)
        b = _call(server, "GET", path.replace("secret", "nosuchshare"), None, alice)
        assert a.status_code == b.status_code == 404
        assert a.json()["errorCode"] == b.json()["errorCode"] == "RESOURCE_DOES_NOT_EXIST"
    r = _call(server, "POST", "/shares/secret/schemas/sc/tables/t/query", {}, alice)
    assert r.status_code == 404
    # bob sees only his share
    r = _call(server, "GET", "/shares", None, server.tokens["bob"])
    assert [s["name"] for s in r.json()["items"]] == ["secret"]
    assert _call(server, "GET", "/shares/s1/schemas", None, server.tokens["bob"]).status_code == 404


def test_names_case_insensitive_and_traversal(server):
    alice = server.tokens["alice"]
    assert _call(server, "GET", "/shares/S1/schemas/SC/tables/CDF/version", None, alice).status_code == 200
    assert _call(server, "GET", "/shares/extra/schemas", None, alice).status_code == 200
    for bad in ["/shares/..%2Fs1/schemas", "/shares/s1/schemas/..%2F..%2Fetc/tables",
                "/shares/s1/schemas/sc/tables/..%2F..%2Fcdf/version", "/shares/%2e%2e/schemas",
                "/shares/s1/schemas/sc/tables/cdf%00/version"]:
        r = _call(server, "GET", bad, None, alice)
        assert r.status_code in (400, 404), bad


def _file_urls(server, table="cdf"):
    r = _call(server, "POST", f"/shares/s1/schemas/sc/tables/{table}/query", {}, server.tokens["alice"])
    return [json.loads(x)["file"]["url"] for x in r.text.splitlines() if '"file"' in x[:10]]


def test_file_url_works_with_range_and_head(server):
    url = _file_urls(server)[0]
    assert "X-Amz-Signature=" in url
    full = httpx.get(url)
    assert full.status_code == 200 and full.content[:4] == b"PAR1"
    h = httpx.head(url)
    assert h.status_code == 200 and int(h.headers["Content-Length"]) == len(full.content)
    part = httpx.get(url, headers={"Range": "bytes=4-9"})
    assert part.status_code == 206 and part.content == full.content[4:10]
    tail = httpx.get(url, headers={"Range": "bytes=-8"})
    assert tail.content == full.content[-8:] and tail.content.endswith(b"PAR1")
    assert httpx.get(url, headers={"Range": "bytes=999999999-"}).status_code == 416


def _parts(url):
    u = urlsplit(url)
    q = {k: v[0] for k, v in parse_qs(u.query).items()}
    segs = u.path.split("/")
    return u, q, segs


def _rebuild(u, segs, q):
    return (f"{u.scheme}://{u.netloc}{'/'.join(segs)}?X-Amz-Credential={q['X-Amz-Credential']}"
            f"&X-Amz-Expires={q['X-Amz-Expires']}&X-Amz-Signature={q['X-Amz-Signature']}")


def test_tampered_urls_forbidden(server):
    url = _file_urls(server)[0]
    u, q, segs = _parts(url)
    bad_sig = dict(q, **{"X-Amz-Signature": ("0" if q["X-Amz-Signature"][0] != "0" else "1") + q["X-Amz-Signature"][1:]})
    later = dict(q, **{"X-Amz-Expires": str(int(q["X-Amz-Expires"]) + 3600)})
    other_path = list(segs)
    other_path[-1] = b64e(b"_delta_log/00000000000000000000.json")
    traversal = list(segs)
    traversal[-1] = b64e(b"../../../../etc/passwd")
    cross = list(segs)
    other_url = _file_urls(server, "stats")[0]
    cross[-2] = _parts(other_url)[2][-2]  # another table's key with this table's path+signature
    as_bob = dict(q, **{"X-Amz-Credential": b64e(b"r:bob")})        # another holder, alice's signature
    as_bearer = dict(q, **{"X-Amz-Credential": b64e(b"bearer")})
    cases = [_rebuild(u, segs, bad_sig), _rebuild(u, segs, later), _rebuild(u, other_path, q),
             _rebuild(u, traversal, q), _rebuild(u, cross, q), _rebuild(u, segs, as_bob),
             _rebuild(u, segs, as_bearer), url.split("?")[0],
             f"{u.scheme}://{u.netloc}{u.path}?X-Amz-Expires={q['X-Amz-Expires']}",
             url.replace(f"X-Amz-Credential={q['X-Amz-Credential']}&", "")]
    for c in cases:
        r = httpx.get(c)
        assert r.status_code == 403, c
        assert b"PAR1" not in r.content
        assert r.json()["errorCode"] == "PERMISSION_DENIED"
        assert httpx.head(c).status_code == 403


def test_expired_url_forbidden(server):
    """A URL signed with the server's key for alice but already expired."""
    key = (server.dir / ".sharing-signing-key").read_bytes().strip()
    url = _file_urls(server)[0]
    u, q, segs = _parts(url)
    alice = Holder("r:alice", hash_token(server.tokens["alice"]))
    base = f"{u.scheme}://{u.netloc}/delta-sharing"
    expired = Signer(key).file_urls(base, int(time.time()) - 5, alice).url(segs[-2], b64d(segs[-1]).decode())
    assert httpx.get(expired).status_code == 403
    fresh = Signer(key).file_urls(base, int(time.time()) + 60, alice).url(segs[-2], b64d(segs[-1]).decode())
    assert httpx.get(fresh).status_code == 200
    # a correctly signed traversal path is still refused
    evil = Signer(key).file_urls(base, int(time.time()) + 60, alice).url(segs[-2], "../cdf/_delta_log/x")
    assert httpx.get(evil).status_code == 403
    # signed for a recipient whose binding is not its current token hash (as after a rotation)
    stale = Signer(key).file_urls(base, int(time.time()) + 60, Holder("r:alice", hash_token("old-token")))
    assert httpx.get(stale.url(segs[-2], b64d(segs[-1]).decode())).status_code == 403


def test_page_tokens_bound_to_recipient_and_listing(server):
    alice = server.tokens["alice"]
    r = _call(server, "GET", "/shares?maxResults=1", None, alice).json()
    assert len(r["items"]) == 1 and r["nextPageToken"]
    tok = r["nextPageToken"]
    r2 = _call(server, "GET", f"/shares?maxResults=1&pageToken={tok}", None, alice).json()
    assert len(r2["items"]) == 1 and "nextPageToken" not in r2
    # someone else's token, another listing, a tampered token
    assert _call(server, "GET", f"/shares?pageToken={tok}", None, server.tokens["bob"]).status_code == 400
    assert _call(server, "GET", f"/shares/s1/schemas?pageToken={tok}", None, alice).status_code == 400
    assert _call(server, "GET", f"/shares?pageToken={tok[:-2]}xx", None, alice).status_code == 400
    for bad in ("-1", "501", "abc"):
        assert _call(server, "GET", f"/shares?maxResults={bad}", None, alice).status_code == 400
    r0 = _call(server, "GET", "/shares?maxResults=0", None, alice).json()
    assert r0["items"] == [] and r0["nextPageToken"]


def test_recipient_revocation_live(server, tmp_path):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "tahoe", "sharing", "recipient", "add", "carol", "--share", "s1",
                          "--config", server.config], capture_output=True, text=True, check=True).stdout
    token = json.loads(out)["bearerToken"]
    assert json.loads(out)["shareCredentialsVersion"] == 1
    assert _call(server, "GET", "/shares", None, token).status_code == 200
    out = subprocess.run([sys.executable, "-m", "tahoe", "sharing", "recipient", "rotate", "carol",
                          "--config", server.config], capture_output=True, text=True, check=True).stdout
    new = json.loads(out)["bearerToken"]
    assert _call(server, "GET", "/shares", None, token).status_code == 401
    assert _call(server, "GET", "/shares", None, new).status_code == 200
    subprocess.run([sys.executable, "-m", "tahoe", "sharing", "recipient", "revoke", "carol", "--config",
                    server.config], capture_output=True, check=True)
    assert _call(server, "GET", "/shares", None, new).status_code == 401
    listing = subprocess.run([sys.executable, "-m", "tahoe", "sharing", "recipient", "list", "--json", "--config",
                              server.config], capture_output=True, text=True, check=True).stdout
    recs = {r["name"]: r for r in json.loads(listing)}
    assert recs["carol"]["revoked"] and recs["expired"]["active"] is False
    stored = (server.dir / "sharing.db").read_bytes()
    assert new.encode() not in stored and token.encode() not in stored


def test_openapi_served_to_authenticated_callers(server):
    assert httpx.get(server.base + "/openapi.json").status_code == 401
    assert httpx.get(server.base + "/docs").status_code == 404
    r = httpx.get(server.base + "/openapi.json", headers={"Authorization": f"Bearer {server.tokens['alice']}"})
    assert r.status_code == 200
    assert "/delta-sharing/shares/{share}/schemas/{schema}/tables/{table}/query" in r.json()["paths"]


def test_files_larger_than_a_send_piece_stream_whole_and_by_range(tmp_path):
    """Files above the server's send piece (FILE_CHUNK) go out in pieces: whole, by ranges across
    piece boundaries, and by HEAD — the same bytes and lengths as the file (in-process app)."""
    import os

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from fastapi.testclient import TestClient

    from tahoe.sharing.config import parse_config
    from tahoe.sharing.server import FILE_CHUNK, create_app
    from tests.sharing.tablegen import schema_string

    root = tmp_path / "big"
    (root / "_delta_log").mkdir(parents=True)
    t = pa.table({"x": np.random.default_rng(1).random(3 * FILE_CHUNK // 8 + 12345)})
    pq.write_table(t, root / "f.parquet", compression="none")
    size = os.path.getsize(root / "f.parquet")
    assert size > 3 * FILE_CHUNK
    actions = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
               {"metaData": {"id": "b", "format": {"provider": "parquet", "options": {}},
                             "schemaString": schema_string(t.schema), "partitionColumns": [], "configuration": {}}},
               {"add": {"path": "f.parquet", "partitionValues": {}, "size": size, "modificationTime": 1,
                        "dataChange": True}}]
    (root / "_delta_log" / f"{0:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    cfg = parse_config({"shares": [{"name": "s", "schemas": [{"name": "b", "tables": [
        {"name": "big", "location": str(root)}]}]}], "authorization": {"bearerToken": "tok"},
        "signingKey": "k" * 64})
    data = (root / "f.parquet").read_bytes()
    with TestClient(create_app(cfg)) as c:
        r = c.post("/delta-sharing/shares/s/schemas/b/tables/big/query", json={},
                   headers={"Authorization": "Bearer tok"})
        url = json.loads(r.text.splitlines()[2])["file"]["url"]
        whole = c.get(url)
        assert whole.status_code == 200 and whole.content == data
        assert int(whole.headers["Content-Length"]) == size
        h = c.head(url)
        assert h.status_code == 200 and int(h.headers["Content-Length"]) == size and not h.content
        for a, b in ((0, FILE_CHUNK), (FILE_CHUNK - 3, 2 * FILE_CHUNK + 7), (5, size - 1), (FILE_CHUNK, FILE_CHUNK)):
            p = c.get(url, headers={"Range": f"bytes={a}-{b}"})
            assert p.status_code == 206 and p.content == data[a:b + 1], (a, b)
            assert p.headers["Content-Range"] == f"bytes {a}-{min(b, size - 1)}/{size}"
        tail = c.get(url, headers={"Range": f"bytes=-{FILE_CHUNK + 10}"})
        assert tail.content == data[-(FILE_CHUNK + 10):]
        assert c.get(url.replace("X-Amz-Signature=", "X-Amz-Signature=0")).status_code == 403

"""The other version-2 profile types the official connector reads, with tahoe's client and the
official client against tahoe's server run as a process:

* `oauth_jwt_bearer_private_key_jwt`: a recipient registered with its public key
  (`recipient add --public-key`) gets such a profile; its client signs JWT assertions (RSA and EC
  keys) that the server's token endpoint exchanges for access tokens (RFC 7523). The official
  client — whose assertions jwcrypto signs — reads too. Refused over raw HTTP: a wrong key, another
  audience, an expired or too long-lived assertion, a replayed jti, an unknown or revoked client,
  a client secret for a key-pair client.
* `basic`: the reference server knows only bearer tokens, so HTTP Basic is a client-side feature:
  shown here through an authenticating gateway in front of the server (it accepts one Basic login
  and forwards with the server's bearer token), as deployments do.

Oracles: rows written down by hand (`cdf_rows`), the Basic header computed here, RFC 6749/7523
error codes, assertions for the refusals signed here with `cryptography` directly."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import uuid

import httpx
import pytest
import yaml
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

import tahoe.sharing as tds
from tahoe.sharing.rest import SharingHTTPError
from tests.sharing.conftest import REPO, cdf_rows, free_port, start_server, stop_server
from tests.sharing.fault_proxy import FaultProxy
from tests.sharing.helpers import assert_same_rows


def _pem(key) -> tuple[bytes, bytes]:
    return (key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()),
            key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))


def _cli(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "tahoe", "sharing", "recipient", *args], cwd=str(REPO),
                          capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def prof_server(tmp_path_factory, server):
    d = tmp_path_factory.mktemp("sharing-profiles")
    cfg = {"shares": [{"name": "s", "schemas": [{"name": "sc", "tables": [
        {"name": "cdf", "location": server.tables["cdf"], "historyShared": True}]}]}],
        "host": "127.0.0.1", "authorization": {"bearerToken": "gateway-token"}}
    port = free_port()
    cfg["port"] = port
    config = d / "server.yaml"
    config.write_text(yaml.safe_dump(cfg))
    out = {"dir": d, "config": str(config), "url": f"http://127.0.0.1:{port}/delta-sharing", "port": port}
    for name, key, kid in (("jw_rsa", rsa.generate_private_key(65537, 2048), "rsa-1"),
                           ("jw_ec", ec.generate_private_key(ec.SECP256R1()), None),
                           ("jw_revoked", rsa.generate_private_key(65537, 2048), None)):
        private, public = _pem(key)
        (d / f"{name}.pem").write_bytes(private)
        (d / f"{name}.pub.pem").write_bytes(public)
        args = ["add", name, "--share", "s", "--public-key", str(d / f"{name}.pub.pem"), "--config", str(config)]
        if kid:
            args += ["--key-id", kid]
        prof = json.loads(_cli(*args))
        out[name] = {"key": key, "profile": prof}
    _cli("revoke", "jw_revoked", "--config", str(config))
    proc = start_server(str(config), port)
    yield out
    stop_server(proc)


def _write_profile(srv, name: str) -> str:
    prof = json.loads(json.dumps(srv[name]["profile"]))
    prof["auth"]["privateKey"]["privateKeyFile"] = str(srv["dir"] / f"{name}.pem")
    p = srv["dir"] / f"{name}.share"
    p.write_text(json.dumps(prof))
    return str(p)


def test_jwt_profile_as_issued(prof_server):
    p = prof_server["jw_rsa"]["profile"]
    assert p["shareCredentialsVersion"] == 2 and p["type"] == "oauth_jwt_bearer_private_key_jwt"
    a = p["auth"]
    assert a["tokenEndpoint"] == prof_server["url"] + "/oauth/token" == a["issuer"]
    assert a["audience"] == prof_server["url"] and a["clientId"].startswith("jw_rsa-")
    assert a["privateKey"]["keyId"] == "rsa-1" and a["privateKey"]["algorithm"] == "RS256"
    assert prof_server["jw_ec"]["profile"]["auth"]["privateKey"]["algorithm"] == "ES256"
    stored = (prof_server["dir"] / "sharing.db").read_bytes()
    assert b"PRIVATE" not in stored and b"PUBLIC KEY" in stored   # only public keys are kept


def test_tahoe_client_reads_with_jwt_profiles(prof_server):
    for name in ("jw_rsa", "jw_ec"):
        t = tds.load_as_arrow(_write_profile(prof_server, name) + "#s.sc.cdf")
        assert_same_rows(t, cdf_rows(5), name)


def test_official_client_reads_with_a_jwt_profile(prof_server, official):
    t = official.load_as_pandas(_write_profile(prof_server, "jw_rsa") + "#s.sc.cdf")
    assert_same_rows(t, cdf_rows(5), "official, jwt profile")


def _assertion(key, claims: dict, kid: str | None = None, alg: str = "RS256") -> str:
    """An RS256/ES256 JWT signed here with cryptography (independent of tahoe's signer)."""
    header = {"alg": alg, "typ": "JWT", **({"kid": kid} if kid else {})}
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
    data = f"{enc(header)}.{enc(claims)}".encode()
    if alg == "RS256":
        sig = key.sign(data, padding.PKCS1v15(), hashes.SHA256())
    else:
        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

        r, s = decode_dss_signature(key.sign(data, ec.ECDSA(hashes.SHA256())))
        sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return data.decode() + "." + base64.urlsafe_b64encode(sig).rstrip(b"=").decode()


def test_token_endpoint_checks_assertions(prof_server):
    srv = prof_server
    endpoint = srv["url"] + "/oauth/token"
    cid = srv["jw_rsa"]["profile"]["auth"]["clientId"]
    key = srv["jw_rsa"]["key"]

    def claims(**kw):
        now = int(time.time())
        return {"iss": cid, "aud": endpoint, "iat": now, "exp": now + 120, "jti": uuid.uuid4().hex, **kw}

    def grant(assertion: str) -> httpx.Response:
        return httpx.post(endpoint, data={"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                                          "assertion": assertion})

    good = claims()
    r = grant(_assertion(key, good, "rsa-1"))
    assert r.status_code == 200, r.text
    token = r.json()["access_token"]
    assert r.json()["token_type"] == "Bearer" and r.json()["expires_in"] == 3600
    assert httpx.get(srv["url"] + "/shares", headers={"Authorization": f"Bearer {token}"}).json()["items"] == \
        [{"name": "s"}]
    for assertion, code, status in (
            (_assertion(key, good, "rsa-1"), "invalid_grant", 400),                              # replayed jti
            (_assertion(rsa.generate_private_key(65537, 2048), claims(), "rsa-1"), "invalid_grant", 400),
            (_assertion(key, claims(aud="https://elsewhere/token"), "rsa-1"), "invalid_grant", 400),
            (_assertion(key, claims(exp=int(time.time()) - 3600), "rsa-1"), "invalid_grant", 400),
            (_assertion(key, claims(exp=int(time.time()) + 86400), "rsa-1"), "invalid_grant", 400),
            (_assertion(key, claims(), "another-kid"), "invalid_grant", 400),
            (_assertion(key, {k: v for k, v in claims().items() if k != "jti"}, "rsa-1"), "invalid_grant", 400),
            (_assertion(key, claims(iss="nobody")), "invalid_client", 401),
            (_assertion(srv["jw_revoked"]["key"], claims(iss=srv["jw_revoked"]["profile"]["auth"]["clientId"])),
             "invalid_client", 401),
            ("not.a.jwt", "invalid_grant", 400)):
        r = grant(assertion)
        assert (r.status_code, r.json()["error"]) == (status, code), r.text
    # an ES256 assertion for the EC client verifies; the EC client's key cannot stand in for the RSA one
    ec_cid = srv["jw_ec"]["profile"]["auth"]["clientId"]
    r = grant(_assertion(srv["jw_ec"]["key"], claims(iss=ec_cid), alg="ES256"))
    assert r.status_code == 200, r.text
    r = grant(_assertion(srv["jw_ec"]["key"], claims(), alg="ES256"))
    assert (r.status_code, r.json()["error"]) == (400, "invalid_grant")
    # a key-pair client has no secret to present
    r = httpx.post(endpoint, data={"grant_type": "client_credentials"}, auth=(cid, "anything"))
    assert (r.status_code, r.json()["error"]) == (401, "invalid_client")


def test_basic_profile_through_an_authenticating_gateway(prof_server, official):
    srv = prof_server
    user, password = "analyst", "pa:ss word"
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    def authenticate(method: str, path: str, headers: dict):
        if path.startswith("/delta-sharing/files/"):
            return headers                       # pre-signed file URLs carry their own authority
        if headers.get("Authorization") != expected:
            return None
        return {**{k: v for k, v in headers.items() if k != "Authorization"}, "Authorization": "Bearer gateway-token"}

    gw = FaultProxy(("127.0.0.1", srv["port"]), authenticate=authenticate)
    try:
        prof = srv["dir"] / "basic.share"
        prof.write_text(json.dumps({"shareCredentialsVersion": 2, "type": "basic", "endpoint": gw.base(),
                                    "username": user, "password": password}))
        t = tds.load_as_arrow(f"{prof}#s.sc.cdf")
        assert_same_rows(t, cdf_rows(5), "tahoe, basic")
        asked = [e for e in gw.requests() if not e.path.startswith("/delta-sharing/files/")]
        assert asked and all(e.headers.get("Authorization") == expected for e in asked)
        assert_same_rows(official.load_as_pandas(f"{prof}#s.sc.cdf"), cdf_rows(5), "official, basic")
        bad = srv["dir"] / "basic-bad.share"
        bad.write_text(json.dumps({"shareCredentialsVersion": 2, "type": "basic", "endpoint": gw.base(),
                                   "username": user, "password": "wrong"}))
        with pytest.raises(SharingHTTPError) as e:
            tds.SharingClient(str(bad)).list_shares()
        assert e.value.status_code == 401
    finally:
        gw.close()

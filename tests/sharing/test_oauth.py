"""OAuth profiles end to end: recipients created with `tahoe sharing recipient add NAME --oauth`
get a version-2 `oauth_client_credentials` profile; the server's token endpoint grants access
tokens for the client credentials (RFC 6749 client-credentials grant); tahoe's client and the
official client read with such a profile. Refused: a revoked client (token requests, tokens
issued before, file URLs issued before), an expired token, a rotated secret's tokens, a forged
token, and a token used on a share its recipient was not granted.

Oracles: the server's answers (status codes, RFC 6749 error codes), rows written down by hand."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time

import httpx
import pytest

import tahoe.sharing as tds
from tahoe.sharing.credentials import OAuthError
from tahoe.sharing.official_client import OfficialClientError
from tests.sharing.client_fixtures import DVCM_LATEST, REPO, add_recipient, share_server  # noqa: F401  (fixture)


def _profile(path: str) -> dict:
    return json.loads(open(path).read())


def _token(prof: dict, form: bool = False, **extra) -> httpx.Response:
    data = {"grant_type": "client_credentials", **extra}
    if form:
        data.update(client_id=prof["clientId"], client_secret=prof["clientSecret"])
        return httpx.post(prof["tokenEndpoint"], data=data)
    return httpx.post(prof["tokenEndpoint"], data=data, auth=(prof["clientId"], prof["clientSecret"]))


def _get(server, token: str, path: str) -> httpx.Response:
    return httpx.get(server.url + path, headers={"Authorization": f"Bearer {token}"})


def test_the_profile_is_version_2_client_credentials(share_server):
    prof = _profile(share_server.profiles["oa"])
    assert prof["shareCredentialsVersion"] == 2 and prof["type"] == "oauth_client_credentials"
    assert prof["endpoint"] == share_server.url and prof["tokenEndpoint"] == share_server.url + "/oauth/token"
    assert prof["clientId"] and prof["clientSecret"] and "bearerToken" not in prof
    stored = (share_server.dir / "sharing.db").read_bytes()
    listed = json.loads(subprocess.run([sys.executable, "-m", "tahoe", "sharing", "recipient", "list", "--json",
                                        "--config", share_server.config], cwd=str(REPO), capture_output=True,
                                       text=True, check=True).stdout)
    oa = next(r for r in listed if r["name"] == "oa")
    assert prof["clientSecret"].encode() not in stored and oa["auth"] == "oauth"


def test_token_endpoint_grants_and_refuses_as_rfc6749_says(share_server):
    prof = _profile(share_server.profiles["oa"])
    for form in (False, True):
        r = _token(prof, form=form, scope="sharing")
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["token_type"] == "Bearer" and body["expires_in"] == 3600 and body["scope"] == "sharing"
        assert r.headers["cache-control"] == "no-store"
        assert _get(share_server, body["access_token"], "/shares").json()["items"] == [{"name": "w"}]
    bad = dict(prof, clientSecret="wrong")
    r = _token(bad)
    assert r.status_code == 401 and r.json()["error"] == "invalid_client" and "Basic" in r.headers["www-authenticate"]
    r = httpx.post(prof["tokenEndpoint"], data={"grant_type": "password"}, auth=(prof["clientId"], prof["clientSecret"]))
    assert r.status_code == 400 and r.json()["error"] == "unsupported_grant_type"
    r = httpx.post(prof["tokenEndpoint"], data={"grant_type": "client_credentials"})
    assert r.status_code == 401 and r.json()["error"] == "invalid_client"
    # a bearer recipient's token is not an OAuth client secret, nor is a client secret a bearer token
    alice = _profile(share_server.profiles["alice"])
    assert _get(share_server, prof["clientSecret"], "/shares").status_code == 401
    r = httpx.post(prof["tokenEndpoint"], data={"grant_type": "client_credentials"}, auth=("alice", alice["bearerToken"]))
    assert r.status_code == 401


def test_tahoe_client_reads_with_client_credentials(share_server):
    url = share_server.table_url("oa", "w", "dvcm")
    df = tds.load_as_pandas(url)
    assert sorted(zip(df["id"], df["Grp Name"])) == DVCM_LATEST
    assert [t.name for t in tds.SharingClient(share_server.profiles["oa"]).list_all_tables()] == ["cdf", "stats", "dvcm", "growing"]
    assert tds.get_table_version(url) == 2


def test_expired_tokens_are_refused_and_the_client_renews_them(share_server):
    prof = _profile(share_server.profiles["oa_short"])
    r = _token(prof)
    assert r.json()["expires_in"] == 2
    token = r.json()["access_token"]
    assert _get(share_server, token, "/shares").status_code == 200
    url = share_server.table_url("oa_short", "w", "dvcm")
    assert len(tds.load_as_pandas(url)) == len(DVCM_LATEST)
    time.sleep(2.5)
    r = _get(share_server, token, "/shares")
    assert r.status_code == 401 and "expired" in r.json()["message"]
    assert len(tds.load_as_pandas(url)) == len(DVCM_LATEST)    # renewed


def test_revoked_rotated_forged_and_foreign_tokens_are_refused(share_server):
    config, d = share_server.config, share_server.dir
    path, prof = add_recipient(config, d, "oa_tmp", ["w"], "--oauth")
    token = _token(prof).json()["access_token"]
    scan_lines = httpx.post(share_server.url + "/shares/w/schemas/t/tables/stats/query", json={},
                            headers={"Authorization": f"Bearer {token}"}).text.splitlines()
    file_url = json.loads(scan_lines[2])["file"]["url"]
    assert httpx.get(file_url).status_code == 200
    # a token used on a share its recipient was not granted: answered exactly as a share that does
    # not exist (404 RESOURCE_DOES_NOT_EXIST), as the reference server answers any share it does not
    # serve — it has no per-recipient grants and no 403 path; a 403 would tell which shares exist
    ungranted, missing = _get(share_server, token, "/shares/g/schemas"), _get(share_server, token, "/shares/nosuch/schemas")
    assert ungranted.status_code == missing.status_code == 404
    assert ungranted.json()["errorCode"] == missing.json()["errorCode"] == "RESOURCE_DOES_NOT_EXIST"
    assert ungranted.json()["message"] == "share g does not exist" and missing.json()["message"] == "share nosuch does not exist"
    other = _profile(share_server.profiles["other"])["bearerToken"]        # a bearer recipient of share g only
    assert _get(share_server, other, "/shares/w/schemas/t/tables").status_code == 404
    # forged: the payload names another recipient, the signature is kept
    body, sig = token[len("oat."):].split(".")
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    payload["r"] = "alice"
    forged = "oat." + base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=") + "." + sig
    assert _get(share_server, forged, "/shares").status_code == 401
    # rotated: the old secret and its tokens stop working, the new ones work
    out = subprocess.run([sys.executable, "-m", "tahoe", "sharing", "recipient", "rotate", "oa_tmp", "--config", config],
                         cwd=str(REPO), capture_output=True, text=True, check=True).stdout
    new = json.loads(out)
    assert new["clientId"] == prof["clientId"] and new["clientSecret"] != prof["clientSecret"]
    assert _get(share_server, token, "/shares").status_code == 401
    assert _token(prof).status_code == 401
    token2 = _token(new).json()["access_token"]
    assert _get(share_server, token2, "/shares").status_code == 200
    assert httpx.get(file_url).status_code == 403
    # revoked: token requests, tokens already issued and file URLs already issued are refused
    scan_lines = httpx.post(share_server.url + "/shares/w/schemas/t/tables/stats/query", json={},
                            headers={"Authorization": f"Bearer {token2}"}).text.splitlines()
    file_url = json.loads(scan_lines[2])["file"]["url"]
    subprocess.run([sys.executable, "-m", "tahoe", "sharing", "recipient", "revoke", "oa_tmp", "--config", config],
                   cwd=str(REPO), check=True, capture_output=True)
    assert _get(share_server, token2, "/shares").status_code == 401
    r = _token(new)
    assert r.status_code == 401 and r.json()["error"] == "invalid_client"
    assert httpx.get(file_url).status_code == 403
    # the already-revoked fixture client: tahoe's client reports the refusal
    with pytest.raises(OAuthError) as ei:
        tds.load_as_pandas(share_server.table_url("oa_revoked", "w", "dvcm"))
    assert ei.value.status == 401


def test_official_client_with_an_oauth_profile(share_server, official):
    """What the official connector (1.4.2) does with a version-2 oauth_client_credentials profile:
    it asks the token endpoint (HTTP Basic client authentication), sends the access token, and
    reads; with tokens living less than its renewal threshold (600 s) it asks for a new token
    before every request — which works too. A revoked client: the token request fails (401)."""
    for who in ("oa", "oa_short"):
        url = share_server.table_url(who, "w", "dvcm")
        t = official.load_as_pandas(url, use_delta_format=True)
        assert sorted(zip(t.column("id").to_pylist(), t.column("Grp Name").to_pylist())) == DVCM_LATEST
        assert {x["name"] for x in official.client(share_server.profiles[who], "list_all_tables")} == \
            {"cdf", "stats", "dvcm", "growing"}
    with pytest.raises(OfficialClientError) as ei:
        official.client(share_server.profiles["oa_revoked"], "list_shares")
    assert ei.value.status == 401 and "HTTPError" in ei.value.type

"""Server settings and the config file: a table's `startVersion` boundary, `queryTablePageSizeLimit`,
predicate-hint evaluation turned off, and configs that must be refused (missing location,
duplicate names, unknown or unsupported keys, bad values) — by `parse_config` and by
`tahoe sharing serve` as a process. Oracles: the hand-built table's known versions and files."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pyarrow as pa
import pytest
import yaml

from tahoe.sharing.config import ConfigError, parse_config
from tests.sharing.conftest import REPO, free_port, start_server, stop_server
from tests.sharing.tablegen import TableBuilder

TOKEN = "settings-token"


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    """`steps`: v0 create, v1..v5 each append one file holding x = v (commits an hour apart from
    2024-01-01T00:00Z), CDF on; shared twice: whole, and from startVersion 2. The server pages
    at most 3 files and evaluates no predicate hints."""
    d = tmp_path_factory.mktemp("settings")
    tb = TableBuilder(d / "steps", pa.schema([("x", pa.int64())]), (), {"delta.enableChangeDataFeed": "true"})
    for v in range(1, 6):
        tb.append(pa.table({"x": [v]}))
    port = free_port()
    cfg = {"shares": [{"name": "s", "schemas": [{"name": "sc", "tables": [
        {"name": "steps", "location": str(d / "steps"), "historyShared": True},
        {"name": "late", "location": str(d / "steps"), "historyShared": True, "startVersion": 2}]}]}],
        "host": "127.0.0.1", "port": port, "authorization": {"bearerToken": TOKEN},
        "queryTablePageSizeLimit": 3, "evaluatePredicateHints": False, "evaluateJsonPredicateHints": False}
    (d / "server.yaml").write_text(yaml.safe_dump(cfg))
    proc = start_server(str(d / "server.yaml"), port)
    yield f"http://127.0.0.1:{port}/delta-sharing/shares/s/schemas/sc/tables"
    stop_server(proc)


def _post(base, table, body):
    return httpx.post(f"{base}/{table}/query", json=body, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)


def _get(base, path):
    return httpx.get(base + path, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)


def _lines(r):
    return [json.loads(x) for x in r.text.splitlines() if x.strip()]


def _x_of(lines, kind="file"):
    """The x value each file line stands for (its stats' min, one row per file)."""
    return sorted(json.loads(x[kind]["stats"])["minValues"]["x"] for x in lines if kind in x)


def test_start_version_boundary(srv):
    # time travel: version 1 is before the shared history, 2 is its first version
    r = _post(srv, "late", {"version": 1})
    assert r.status_code == 400 and r.json()["errorCode"] == "INVALID_PARAMETER_VALUE"
    r = _post(srv, "late", {"version": 2})
    assert r.status_code == 200 and _x_of(_lines(r)) == [1, 2]
    assert r.headers["Delta-Table-Version"] == "2"
    # 01:30 resolves to version 1: refused; 02:30 to version 2
    assert _post(srv, "late", {"timestamp": "2024-01-01T01:30:00Z"}).status_code == 400
    assert _x_of(_lines(_post(srv, "late", {"timestamp": "2024-01-01T02:30:00Z"}))) == [1, 2]
    # streaming ranges
    assert _post(srv, "late", {"startingVersion": 1}).status_code == 400
    r = _post(srv, "late", {"startingVersion": 2})
    assert r.status_code == 200 and r.headers["Delta-Table-Version"] == "2"
    assert sorted(x["add"]["version"] for x in _lines(r) if "add" in x) == [2, 3, 4, 5]
    # changes
    r = _get(srv, "/late/changes?startingVersion=1")
    assert r.status_code == 400 and "start version 2" in r.json()["message"]
    r = _get(srv, "/late/changes?startingVersion=2")
    assert r.status_code == 200 and _x_of(_lines(r), "add") == [2, 3, 4, 5]
    # a starting timestamp before the shared history resolves to its first version
    assert _get(srv, "/late/version?startingTimestamp=2023-12-31T00:00:00Z").headers["Delta-Table-Version"] == "2"
    assert _get(srv, "/steps/version?startingTimestamp=2023-12-31T00:00:00Z").headers["Delta-Table-Version"] == "0"
    # the same table shared whole still reads version 1
    assert _x_of(_lines(_post(srv, "steps", {"version": 1}))) == [1]


def test_query_page_size_limit(srv):
    """maxFiles above queryTablePageSizeLimit (3) gets pages of 3; every file once."""
    seen, tok, pages = [], None, 0
    while True:
        r = _post(srv, "steps", {"maxFiles": 100, **({"pageToken": tok} if tok else {})})
        ls = _lines(r)
        files = [x for x in ls if "file" in x]
        assert len(files) <= 3
        seen += _x_of(files)
        pages += 1
        tok = ls[-1]["endStreamAction"].get("nextPageToken")
        if not tok:
            break
    assert pages == 2 and sorted(seen) == [1, 2, 3, 4, 5]
    assert len([x for x in _lines(_post(srv, "steps", {"maxFiles": 2})) if "file" in x]) == 2
    # /changes pages the same way
    ls = _lines(_get(srv, "/steps/changes?startingVersion=0&maxFiles=100"))
    assert len([x for x in ls if "add" in x]) == 3 and ls[-1]["endStreamAction"]["nextPageToken"]


def test_hint_evaluation_turned_off(srv):
    """With evaluatePredicateHints and evaluateJsonPredicateHints false, hints prune nothing."""
    json_hint = json.dumps({"op": "equal", "children": [{"op": "column", "name": "x", "valueType": "long"},
                                                        {"op": "literal", "value": "1", "valueType": "long"}]})
    for body in ({"predicateHints": ["x = 1"]}, {"jsonPredicateHints": json_hint}):
        r = _post(srv, "steps", body)
        assert r.status_code == 200 and _x_of(_lines(r)) == [1, 2, 3, 4, 5], body


# --- config errors ------------------------------------------------------------------------------------
def _cfg(**over):
    base = {"shares": [{"name": "s", "schemas": [{"name": "sc", "tables": [{"name": "t", "location": "/data/t"}]}]}],
            "signingKey": "k"}
    base.update(over)
    return base


def _tables(*tables):
    return _cfg(shares=[{"name": "s", "schemas": [{"name": "sc", "tables": list(tables)}]}])


@pytest.mark.parametrize("raw,message", [
    (_tables({"name": "t"}), "table s.sc.t has no location"),
    (_tables({"name": "t", "location": ""}), "table s.sc.t has no location"),
    (_tables({"name": "t", "location": "/a"}, {"name": "T", "location": "/b"}), "duplicate table name 'T'"),
    (_cfg(shares=[{"name": "s", "schemas": [{"name": "sc"}, {"name": "SC"}]}]), "duplicate schema name 'SC'"),
    (_cfg(shares=[{"name": "s"}, {"name": "S"}]), "duplicate share name 'S'"),
    (_tables({"name": "a b", "location": "/a"}), "invalid table name 'a b'"),
    (_tables({"location": "/a"}), "invalid table name None"),
    (_cfg(allowAnonymus=True), "unknown key 'allowAnonymus'"),
    (_tables({"name": "t", "location": "/a", "startversion": 2}), "unknown key 'startversion'"),
    (_cfg(ssl={"selfSigned": True}), "ssl is not supported"),
    (_cfg(allowAnonymous="maybe"), "allowAnonymous must be true or false"),
    (_tables({"name": "t", "location": "/a", "startVersion": -1}), "startVersion must be an integer >= 0"),
    (_cfg(queryTablePageSizeLimit=0), "queryTablePageSizeLimit must be an integer >= 1"),
    (_cfg(authorization={"bearerToken": ""}), "bearerToken must be a non-empty string"),
    (_cfg(version=2), "config version 2 is not supported"),
    (_cfg(shares={"name": "s"}), "shares must be a list"),
])
def test_config_errors(raw, message):
    with pytest.raises(ConfigError) as ei:
        parse_config(raw)
    assert message in str(ei.value)


def test_config_defaults_and_values():
    c = parse_config(_cfg())
    assert (c.allow_anonymous, c.evaluate_predicate_hints, c.evaluate_json_predicate_hints,
            c.query_table_page_size_limit, c.presigned_url_timeout_seconds) == (False, True, True, 10000, 3600)
    t = parse_config(_tables({"name": "t", "location": "/a", "cdfEnabled": True, "startVersion": 3})).shares[0] \
        .schemas[0].tables[0]
    assert (t.history_shared, t.start_version) == (True, 3)
    assert parse_config(_cfg(allowAnonymous=True, version=1)).allow_anonymous is True


@pytest.mark.parametrize("raw,message", [
    (_tables({"name": "t"}), "table s.sc.t has no location"),
    (_tables({"name": "t", "location": "/a"}, {"name": "t", "location": "/b"}), "duplicate table name 't'"),
])
def test_serve_refuses_a_bad_config(tmp_path, raw, message):
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(raw))
    r = subprocess.run([sys.executable, "-m", "tahoe", "sharing", "serve", "--config", str(tmp_path / "bad.yaml"),
                        "--port", str(free_port())], cwd=str(REPO), capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and message in r.stderr, (r.returncode, r.stderr)

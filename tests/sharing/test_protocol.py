"""Protocol details over raw HTTP: NDJSON shapes in both formats, headers, query pagination with
pinned versions and repeated protocol/metaData lines, endStreamAction, refresh tokens, streaming
ranges (startingVersion), SQL predicate hints, limitHint, and error codes."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.conftest import conformance
from tests.sharing.conftest import tname

DELTA_CAPS = "responseformat=delta;readerfeatures=deletionvectors,columnmapping,timestampntz"


def _q(server, table, body, caps=None, who="alice", share="s1"):
    h = {"Authorization": f"Bearer {server.tokens[who]}"}
    if caps:
        h["delta-sharing-capabilities"] = caps
    return httpx.post(f"{server.url}/shares/{share}/schemas/sc/tables/{table}/query", json=body, headers=h, timeout=30)


def _lines(r):
    return [json.loads(x) for x in r.text.splitlines() if x.strip()]


def test_parquet_query_shape(server):
    r = _q(server, "cdf", {})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/x-ndjson")
    assert r.headers["Delta-Table-Version"] == "5"
    assert r.headers["delta-sharing-capabilities"] == "responseformat=parquet"
    ls = _lines(r)
    assert ls[0] == {"protocol": {"minReaderVersion": 1}}
    md = ls[1]["metaData"]
    assert md["partitionColumns"] == ["p"] and md["format"]["provider"] == "parquet" and md["numFiles"] == 4
    files = [x["file"] for x in ls[2:]]
    assert len(files) == 4 and all(set(x) == {"file"} for x in ls[2:])
    for f in files:
        assert {"url", "id", "partitionValues", "size", "stats", "expirationTimestamp"} <= set(f)
    # ids are stable across requests, URLs are fresh
    again = [x["file"]["id"] for x in _lines(_q(server, "cdf", {}))[2:]]
    assert sorted(again) == sorted(f["id"] for f in files)


def test_delta_query_shape_with_dv(server):
    r = _q(server, "dv", {}, DELTA_CAPS)
    assert r.headers["delta-sharing-capabilities"] == "responseformat=delta"
    ls = _lines(r)
    assert ls[0]["protocol"]["deltaProtocol"]["minReaderVersion"] == 3
    assert "deltaMetadata" in ls[1]["metaData"]
    adds = [x["file"]["deltaSingleAction"]["add"] for x in ls[2:]]
    dvs = [a["deletionVector"] for a in adds if a.get("deletionVector")]
    assert dvs and all(d["storageType"] in ("p", "i") for d in dvs)
    p = [d for d in dvs if d["storageType"] == "p"][0]
    assert "X-Amz-Signature=" in p["pathOrInlineDv"]
    assert httpx.get(p["pathOrInlineDv"]).status_code == 200
    assert any("deletionVectorFileId" in x["file"] for x in ls[2:])


def test_format_negotiation(server):
    # delta,parquet on a plain table → parquet; on a DV table → delta; delta without the DV feature → 400
    r = _q(server, "cdf", {}, "responseformat=delta,parquet")
    assert r.headers["delta-sharing-capabilities"].startswith("responseformat=parquet")
    r = _q(server, "dv", {}, "responseformat=delta,parquet;readerfeatures=deletionvectors")
    assert r.headers["delta-sharing-capabilities"].startswith("responseformat=delta")
    r = _q(server, "dv", {}, "responseformat=delta;readerfeatures=columnmapping")
    assert r.status_code == 400 and r.json()["errorCode"] == "UNSUPPORTED_OPERATION"
    r = _q(server, "dv", {})
    assert r.status_code == 400 and r.json()["errorCode"] == "UNSUPPORTED_OPERATION"


@conformance
def test_format_negotiation_column_mapping(server):
    r = _q(server, tname("dv-with-columnmapping"), {}, "responseformat=delta;readerfeatures=deletionvectors")
    assert r.status_code == 400 and r.json()["errorCode"] == "UNSUPPORTED_OPERATION"
    r = _q(server, tname("dv-with-columnmapping"), {}, "responseformat=delta;readerfeatures=deletionvectors,columnmapping")
    assert r.status_code == 200 and r.headers["delta-sharing-capabilities"] == "responseformat=delta"


def test_pagination_pins_version(server):
    r1 = _q(server, "stats", {"maxFiles": 4})
    ls = _lines(r1)
    assert "endStreamAction" in ls[-1]
    tok = ls[-1]["endStreamAction"]["nextPageToken"]
    files = [x["file"]["id"] for x in ls if "file" in x]
    assert len(files) == 4
    seen = list(files)
    pages = 1
    while tok:
        r = _q(server, "stats", {"maxFiles": 4, "pageToken": tok})
        assert r.headers["Delta-Table-Version"] == r1.headers["Delta-Table-Version"]
        lsn = _lines(r)
        assert r.text.splitlines()[:2] == r1.text.splitlines()[:2]  # identical protocol/metaData lines
        seen += [x["file"]["id"] for x in lsn if "file" in x]
        tok = lsn[-1]["endStreamAction"].get("nextPageToken")
        pages += 1
    assert pages == 3 and len(seen) == len(set(seen)) == 10
    # a page token only works for the same recipient/table/query
    tok = ls[-1]["endStreamAction"]["nextPageToken"]
    assert _q(server, "cdf", {"maxFiles": 4, "pageToken": tok}).status_code == 400
    assert _q(server, "stats", {"maxFiles": 4, "pageToken": tok, "limitHint": 3}).status_code == 400


def test_end_stream_action_and_refresh_token(server):
    r = _q(server, "cdf", {}, "responseformat=parquet;includeendstreamaction=true")
    assert "includeendstreamaction=true" in r.headers["delta-sharing-capabilities"]
    assert "endStreamAction" in _lines(r)[-1]
    r = _q(server, "cdf", {"includeRefreshToken": True})
    esa = _lines(r)[-1]["endStreamAction"]
    rt = esa["refreshToken"]
    r2 = _q(server, "cdf", {"refreshToken": rt})
    assert r2.status_code == 200 and r2.headers["Delta-Table-Version"] == "5"
    assert _q(server, "stats", {"refreshToken": rt}).status_code == 400
    assert "endStreamAction" not in r2.text  # not asked for


def test_starting_version_query(server):
    r = _q(server, "cdf", {"startingVersion": 1, "endingVersion": 3})
    assert r.headers["Delta-Table-Version"] == "1"
    ls = _lines(r)
    adds = [x["add"] for x in ls if "add" in x]
    removes = [x["remove"] for x in ls if "remove" in x]
    assert sorted({a["version"] for a in adds}) == [1, 2] and [x["version"] for x in removes] == [3]
    assert all("timestamp" in a and "url" in a for a in adds + removes)


def test_sql_predicate_hints(server):
    r = _q(server, "cdf", {"predicateHints": ["p = 'b'", "this is not sql ((", "nosuchcol > 1"]})
    files = [x["file"] for x in _lines(r) if "file" in x]
    assert [f["partitionValues"]["p"] for f in files] == ["b", "b"]
    r = _q(server, "stats", {"predicateHints": ["id >= 95"]})
    assert len([1 for x in _lines(r) if "file" in x]) == 1
    r = _q(server, "stats", {"predicateHints": ["ts < '2024-01-01 05:00:00'"]})
    assert len([1 for x in _lines(r) if "file" in x]) == 1
    r = _q(server, "stats", {"predicateHints": ["id IS NULL"]})
    assert len([1 for x in _lines(r) if "file" in x]) == 0
    r = _q(server, "stats", {"predicateHints": ["id <> 5"]})
    assert len([1 for x in _lines(r) if "file" in x]) == 10


def test_invalid_json_predicate_means_no_filtering(server):
    for hint in ["{not json", json.dumps({"op": "nope"}), json.dumps({"op": "equal", "children": []})]:
        r = _q(server, "cdf", {"jsonPredicateHints": hint})
        assert r.status_code == 200 and len([1 for x in _lines(r) if "file" in x]) == 4


def test_limit_hint(server):
    r = _q(server, "stats", {"limitHint": 25})
    assert len([1 for x in _lines(r) if "file" in x]) == 3
    r = _q(server, "stats", {"limitHint": 0})
    assert len([1 for x in _lines(r) if "file" in x]) == 0


@pytest.mark.parametrize("body,code", [
    ({"version": 1, "timestamp": "2024-01-01T00:00:00Z"}, "INVALID_PARAMETER_VALUE"),
    ({"version": -1}, "INVALID_PARAMETER_VALUE"),
    ({"version": 99}, "INVALID_PARAMETER_VALUE"),
    ({"startingVersion": 3, "endingVersion": 1}, "INVALID_PARAMETER_VALUE"),
    ({"timestamp": "garbage"}, "INVALID_PARAMETER_VALUE"),
    ({"timestamp": "2020-01-01T00:00:00Z"}, "INVALID_PARAMETER_VALUE"),
    ({"limitHint": "many"}, "INVALID_PARAMETER_VALUE"),
    ({"pageToken": "forged.token"}, "INVALID_PARAMETER_VALUE"),
])
def test_query_errors(server, body, code):
    r = _q(server, "cdf", body)
    assert r.status_code == 400 and r.json()["errorCode"] == code, r.text


def test_malformed_json_body(server):
    r = httpx.post(f"{server.url}/shares/s1/schemas/sc/tables/cdf/query", content=b"{oops",
                   headers={"Authorization": f"Bearer {server.tokens['alice']}", "Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["errorCode"] == "MALFORMED_REQUEST"


def test_version_head_and_errors(server):
    h = {"Authorization": f"Bearer {server.tokens['alice']}"}
    r = httpx.head(f"{server.url}/shares/s1/schemas/sc/tables/cdf", headers=h)
    assert r.status_code == 200 and r.headers["Delta-Table-Version"] == "5"
    r = httpx.get(f"{server.url}/shares/s1/schemas/sc/tables/cdf/version?startingTimestamp=bad", headers=h)
    assert r.status_code == 400
    r = httpx.get(f"{server.url}/shares/s1/schemas/sc/tables/cdf/changes?startingVersion=2&endingVersion=1", headers=h)
    assert r.status_code == 400
    r = httpx.get(f"{server.url}/shares/s1/schemas/sc/tables/cdf/changes", headers=h)
    assert r.status_code == 400
    r = httpx.get(f"{server.url}/shares/s1/schemas/sc/tables/nohist/changes?startingVersion=0", headers=h)
    assert r.status_code == 400
    r = httpx.get(f"{server.url}/nothing/here", headers=h)
    assert r.status_code == 404 and r.json()["errorCode"] == "RESOURCE_DOES_NOT_EXIST"


def test_changes_lines_and_pagination(server):
    h = {"Authorization": f"Bearer {server.tokens['alice']}"}
    base = f"{server.url}/shares/s1/schemas/sc/tables/cdf/changes"
    r = httpx.get(base + "?startingVersion=0&includeHistoricalMetadata=True", headers=h)
    ls = _lines(r)
    assert r.headers["Delta-Table-Version"] == "0"
    kinds = [next(iter(x)) for x in ls]
    assert kinds[:2] == ["protocol", "metaData"] and {"add", "cdf", "remove"} >= set(kinds[2:]) - {"metaData"}
    assert "cdf" in kinds and "remove" not in kinds  # v3 has cdc files, so its remove is not listed
    for x in ls[2:]:
        f = next(iter(x.values()))
        assert {"url", "id", "partitionValues", "size", "timestamp", "version"} <= set(f)
    n = len(ls) - 2
    r = httpx.get(base + "?startingVersion=0&maxFiles=2", headers=h)
    lp = _lines(r)
    assert len([x for x in lp if "endStreamAction" not in x]) == 4
    tok = lp[-1]["endStreamAction"]["nextPageToken"]
    got = 2
    while tok:
        lp = _lines(httpx.get(base + f"?startingVersion=0&maxFiles=2&pageToken={tok}", headers=h))
        got += len([x for x in lp[2:] if "endStreamAction" not in x])
        tok = lp[-1]["endStreamAction"].get("nextPageToken")
    assert got == n


def test_fast_parquet_lines_match_generic_rendering(server):
    """The precomputed-parts renderer of whole-table parquet queries gives exactly the lines of the
    generic per-file renderer."""
    from tahoe.sharing.config import load_config
    from tahoe.sharing.signing import Holder, Signer
    from tahoe.sharing.tables import SharedTable, iter_file_rows

    cfg = load_config(server.config)
    for t in cfg.tables_by_key().values():
        if t.name not in ("cdf", "stats", "written", tname("data-reader-escaped-chars"), tname("data-reader-partition-values")):
            continue
        st = SharedTable(t, 60)
        snap = st.snapshot()
        urls = Signer(cfg.signing_key).file_urls(server.url, 1_900_000_000, Holder("r:x", "b"))
        fast = list(st.parquet_lines(snap, urls))
        if t.name == "stats":  # files with numRecords: the limit stops after the first
            assert len(list(st.parquet_lines(snap, urls, limit=1))) == 1
        slow = [st.file_line("parquet", urls, r) for r in iter_file_rows(snap, "parquet")]
        assert fast == slow, t.name
        assert all(json.loads(x) for x in fast)


def test_fast_parquet_lines_of_a_large_commit_with_odd_stats_and_partition_values(tmp_path, monkeypatch):
    """The column-wise renderer over a vectorised (large-commit) snapshot: stats with quotes,
    backslashes, control characters and non-ASCII text, missing and empty stats, partition values
    with special characters and nulls, paths needing percent-decoding — the same lines as the
    generic renderer."""
    from tahoe.log import json_commits
    from tahoe.sharing.config import TableConfig
    from tahoe.sharing.signing import Holder, Signer
    from tahoe.sharing.tables import SharedTable, iter_file_rows

    schema = json.dumps({"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "p", "type": "string", "nullable": True, "metadata": {}}]})
    stats = [None, "", '{"numRecords":3}', '{"numRecords":5,"minValues":{"s":"a\\"b\\\\c"}}',
             '{"numRecords":1,"minValues":{"s":"tab\there"}}', '{"minValues":{"s":"é日本\u2028"},"numRecords":99999999999}']
    parts = ["a", 'x"y', "}{", None, "a b/c", "ü"]
    lines = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
             {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}}, "schemaString": schema,
                           "partitionColumns": ["p"], "configuration": {}, "createdTime": 1}}]
    for i in range(60):
        a = {"path": f"p={i}/f%20{i}.parquet" if i % 5 == 0 else f"p={i}/f{i}.parquet",
             "partitionValues": {"p": parts[i % len(parts)]}, "size": 100 + i, "modificationTime": 1, "dataChange": True}
        if stats[i % len(stats)] is not None:
            a["stats"] = stats[i % len(stats)]
        lines.append({"add": a})
    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    (log / f"{0:020d}.json").write_text("".join(json.dumps(x) + "\n" for x in lines))
    monkeypatch.setattr(json_commits, "VECTOR_MIN_BYTES", 0)
    st = SharedTable(TableConfig("t", str(tmp_path / "t"), "s", "sc", "id"), 60)
    snap = st.snapshot()
    assert type(snap._state.files._tail._pieces[0]).__name__ == "JsonCommit"
    urls = Signer(b"k" * 32).file_urls("http://h/delta-sharing", 1_900_000_000, Holder("r:x", "b"))
    fast = list(st.parquet_lines(snap, urls))
    slow = [st.file_line("parquet", urls, r) for r in iter_file_rows(snap, "parquet")]
    assert fast == slow and len(fast) == 60
    assert [json.loads(x)["file"]["partitionValues"]["p"] for x in fast[:6]] == parts
    assert len(list(st.parquet_lines(snap, urls, limit=4))) == 4


def test_starting_version_query_delta_format(server):
    r = _q(server, "cdf", {"startingVersion": 3, "endingVersion": 4}, DELTA_CAPS)
    assert r.status_code == 200 and r.headers["delta-sharing-capabilities"] == "responseformat=delta"
    ls = _lines(r)
    assert "deltaProtocol" in ls[0]["protocol"] and "deltaMetadata" in ls[1]["metaData"]
    acts = [(x["file"]["version"], next(iter(x["file"]["deltaSingleAction"]))) for x in ls[2:]]
    assert (3, "remove") in acts and (4, "add") in acts and (4, "remove") in acts
    for x in ls[2:]:
        a = next(iter(x["file"]["deltaSingleAction"].values()))
        assert "X-Amz-Signature=" in a["path"] and "size" in a


def test_fast_delta_lines_match_generic_rendering(server):
    """Same for delta format (JSON-equal: deletion vectors rewritten to signed 'p' URLs, full adds)."""
    from tahoe.sharing.config import load_config
    from tahoe.sharing.signing import Holder, Signer
    from tahoe.sharing.tables import SharedTable, iter_file_rows

    cfg = load_config(server.config)
    names = {"cdf", "dv", "written", tname("dv-partitioned-with-checkpoint"), tname("dv-with-columnmapping"),
             tname("log-replay-dv-key-cases"), tname("data-reader-timestamp_ntz-name-mode")}
    for t in cfg.tables_by_key().values():
        if t.name not in names:
            continue
        st = SharedTable(t, 60)
        snap = st.snapshot()
        urls = Signer(cfg.signing_key).file_urls(server.url, 1_900_000_000, Holder("r:x", "b"))
        fast = [json.loads(x) for x in st.delta_lines(snap, urls)]
        slow = [json.loads(st.file_line("delta", urls, r)) for r in iter_file_rows(snap, "delta")]
        assert fast == slow, t.name

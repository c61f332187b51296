"""The official `delta-sharing` client (1.4.2, unmodified, in its own environment) against the
server running as a process: listing, metadata/protocol/version, parquet- and delta-format loads
(DVs, column mapping, timestamp_ntz), time travel, limits, JSON predicate hints, and CDF by
versions and timestamps.

Oracles: the conformance tables' expected rows, delta-rs reading the table directly, and the
hand-built `cdf` table's history written down in conftest (CDF_ROWS, CDF_CHANGES) — never tahoe's
own reader, which the server shares its replay with."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tahoe.sharing.official_client import OfficialClientError
from tests.conftest import conformance_params, manifest_entry
from tests.sharing.conftest import DELTA_GOLDEN, PARQUET_GOLDEN, cdf_changes, cdf_rows, tname
from tests.sharing.helpers import (
    assert_same_rows, commit_ms_to_timestamp, delta_rs_changes, delta_rs_rows, expected_rows, rows,
)


def _http_error(e: OfficialClientError, status: int, code: str) -> None:
    """The client raised requests' HTTPError for this status, and the server's body names `code`."""
    assert e.type == "requests.exceptions.HTTPError", e
    assert e.status == status, e
    assert e.error_code() == code, e.body


def test_listing(server, official):
    prof = server.profiles["alice"]
    assert sorted(s["name"] for s in official.client(prof, "list_shares")) == ["Extra", "s1"]
    schemas = official.client(prof, "list_schemas", {"$type": "Share", "name": "S1"})
    assert sorted(s["name"] for s in schemas) == ["other", "sc"]
    tables = official.client(prof, "list_tables", {"$type": "Schema", "name": "sc", "share": "s1"})
    assert {t["name"] for t in tables} == set(server.tables) | {"nohist"}
    all_tables = {(t["share"], t["schema"], t["name"]) for t in official.client(prof, "list_all_tables")}
    expected = {("s1", "sc", n) for n in set(server.tables) | {"nohist"}} | {("s1", "other", "t"), ("Extra", "sc", "t")}
    assert all_tables == expected   # never the ungranted share `secret`


def test_version_metadata_protocol(server, official):
    url = server.table_url("alice", "s1", "cdf")
    assert official.call("get_table_version", url) == 5
    # commits are an hour apart from 00:00: the first version at or after 01:30 is 2
    assert official.call("get_table_version", url, starting_timestamp="2024-01-01T01:30:00Z") == 2
    md = official.call("get_table_metadata", url)
    assert md["partition_columns"] == ["p"]
    assert [f["name"] for f in json.loads(md["schema_string"])["fields"]] == ["id", "name", "score", "p"]
    assert md["configuration"] == {"delta.enableChangeDataFeed": "true"}
    assert official.call("get_table_protocol", url)["min_reader_version"] == 1
    dv = official.call("get_table_protocol", server.table_url("alice", "s1", "dv"))
    assert (dv["min_reader_version"], dv["reader_features"]) == (3, ["deletionVectors"])


@pytest.mark.parametrize("golden", conformance_params(["dv-with-columnmapping", "basic-decimal-table"]))
def test_protocol_of_conformance_tables(server, official, golden):
    proto = official.call("get_table_protocol", server.table_url("alice", "s1", tname(golden)))
    assert proto["min_reader_version"] == manifest_entry(golden)["protocol"]["minReaderVersion"]


@pytest.mark.parametrize("golden", conformance_params(PARQUET_GOLDEN))
def test_load_parquet_format(server, official, golden):
    t = official.load_as_pandas(server.table_url("alice", "s1", tname(golden)), use_delta_format=False)
    assert_same_rows(t, expected_rows(golden), golden)


@pytest.mark.parametrize("golden", conformance_params(DELTA_GOLDEN + ["basic-decimal-table",
                                                                      "data-reader-partition-values"]))
def test_load_delta_format(server, official, golden):
    t = official.load_as_pandas(server.table_url("alice", "s1", tname(golden)), use_delta_format=True)
    assert_same_rows(t, expected_rows(golden), golden)


@pytest.mark.parametrize("golden", conformance_params(["dv-partitioned-with-checkpoint", "data-reader-timestamp_ntz"]))
def test_load_auto_format(server, official, golden):
    """use_delta_format=None: the client asks /metadata which format to use (delta for these)."""
    t = official.load_as_pandas(server.table_url("alice", "s1", tname(golden)))
    assert_same_rows(t, expected_rows(golden), golden)


@pytest.mark.parametrize("fmt", [False, True, None])
@pytest.mark.parametrize("table", ["cdf", "stats", "nocdf", "written"])
def test_load_hand_built_and_written_tables(server, official, table, fmt):
    t = official.load_as_pandas(server.table_url("alice", "s1", table), use_delta_format=fmt)
    assert_same_rows(t, delta_rs_rows(server.tables[table]), table)
    if table == "cdf":
        assert_same_rows(t, cdf_rows(), "cdf, by hand")


@pytest.mark.parametrize("fmt", [True, None])
def test_load_deletion_vector_table(server, official, fmt):
    """A table tahoe wrote with deletion vectors, in delta format (asked, or chosen by the client
    from /metadata): the rows without the deleted ones, as delta-rs's SQL path reads them."""
    t = official.load_as_pandas(server.table_url("alice", "s1", "dv"), use_delta_format=fmt)
    oracle = delta_rs_rows(server.tables["dv"], sql=True)
    assert oracle.num_rows == 17
    assert_same_rows(t, oracle, "dv")


def test_dv_table_in_parquet_format_refused(server, official):
    with pytest.raises(OfficialClientError) as ei:
        official.load_as_pandas(server.table_url("alice", "s1", "dv"), use_delta_format=False)
    _http_error(ei.value, 400, "UNSUPPORTED_OPERATION")


@pytest.mark.parametrize("fmt", [False, True])
def test_time_travel(server, official, fmt):
    url = server.table_url("alice", "s1", "cdf")
    for v in (1, 2, 3, 4):
        t = official.load_as_pandas(url, version=v, use_delta_format=fmt)
        assert_same_rows(t, cdf_rows(v), f"v{v}")
        assert_same_rows(t, delta_rs_rows(server.tables["cdf"], v), f"v{v} (delta-rs)")
    t = official.load_as_pandas(url, timestamp="2024-01-01T02:30:00Z", use_delta_format=fmt)
    assert_same_rows(t, cdf_rows(2), "ts")


def test_time_travel_without_history_refused(server, official):
    with pytest.raises(OfficialClientError) as ei:
        official.load_as_pandas(server.table_url("alice", "s1", "nohist"), version=1)
    _http_error(ei.value, 400, "INVALID_PARAMETER_VALUE")
    assert_same_rows(official.load_as_pandas(server.table_url("alice", "s1", "nohist")), cdf_rows(), "nohist")


@pytest.mark.parametrize("fmt", [False, True])
def test_limit(server, official, fmt):
    t = official.load_as_pandas(server.table_url("alice", "s1", "stats"), limit=15, use_delta_format=fmt)
    got = rows(t)
    assert len(got) == 15
    every = rows(delta_rs_rows(server.tables["stats"]), t.column_names)
    assert all(r in every for r in got), got


@pytest.mark.parametrize("fmt", [False, True])
def test_json_predicate_hints(server, official, fmt):
    """The server sends only the files that may match; the client does not filter rows, so what
    comes back is exactly the rows of those files (partition p=b; the files of ids 30..59)."""
    hint = json.dumps({"op": "equal", "children": [{"op": "column", "name": "p", "valueType": "string"},
                                                   {"op": "literal", "value": "b", "valueType": "string"}]})
    t = official.load_as_pandas(server.table_url("alice", "s1", "cdf"), jsonPredicateHints=hint, use_delta_format=fmt)
    oracle = cdf_rows()
    assert_same_rows(t, oracle.filter(pc.equal(oracle["p"], "b")), "p = b")
    hint = json.dumps({"op": "and", "children": [
        {"op": "greaterThanOrEqual", "children": [{"op": "column", "name": "id", "valueType": "long"},
                                                  {"op": "literal", "value": "35", "valueType": "long"}]},
        {"op": "lessThan", "children": [{"op": "column", "name": "id", "valueType": "long"},
                                        {"op": "literal", "value": "52", "valueType": "long"}]}]})
    t = official.load_as_pandas(server.table_url("alice", "s1", "stats"), jsonPredicateHints=hint, use_delta_format=fmt)
    oracle = delta_rs_rows(server.tables["stats"])
    assert_same_rows(t, oracle.filter(pc.and_(pc.greater_equal(oracle["id"], 30), pc.less(oracle["id"], 60))),
                     "35 <= id < 52: the files of ids 30..59")


@pytest.mark.parametrize("fmt", [False, True])
def test_changes_by_version(server, official, fmt):
    t = official.load_table_changes_as_pandas(server.table_url("alice", "s1", "cdf"), starting_version=1,
                                              ending_version=5, use_delta_format=fmt)
    assert_same_rows(commit_ms_to_timestamp(t), cdf_changes(1, 5), "changes 1..5")


def test_changes_by_timestamp(server, official):
    t = official.load_table_changes_as_pandas(server.table_url("alice", "s1", "cdf"),
                                              starting_timestamp="2024-01-01T02:30:00Z",
                                              ending_timestamp="2024-01-01T04:30:00Z")
    assert_same_rows(commit_ms_to_timestamp(t), cdf_changes(3, 4), "changes by timestamp (versions 3..4)")


def test_changes_refused_without_cdf(server, official):
    with pytest.raises(OfficialClientError) as ei:
        official.load_table_changes_as_pandas(server.table_url("alice", "s1", "nocdf"), starting_version=0)
    _http_error(ei.value, 400, "INVALID_PARAMETER_VALUE")
    assert "change data feed" in ei.value.body.lower() or "cdf" in ei.value.body.lower()


def test_tahoe_client(server):
    from tahoe.sharing import client as tc

    url = server.table_url("alice", "s1", "cdf")
    assert_same_rows(tc.load_as_arrow(url), cdf_rows(), "latest")
    # a predicate hint prunes files, and tahoe's client applies it to the rows
    assert_same_rows(tc.load_as_arrow(url, version=2, predicateHints=["p = 'b'"]),
                     cdf_rows(2).filter(pc.equal(cdf_rows(2)["p"], "b")), "v2, p = b")
    limited = tc.load_as_arrow(url, limit=2)
    assert len(rows(limited)) == 2 and all(r in rows(cdf_rows()) for r in rows(limited))
    assert_same_rows(commit_ms_to_timestamp(tc.load_table_changes_as_arrow(url, starting_version=1, ending_version=5,
                                                                                 use_delta_format=False)),
                     cdf_changes(1, 5), "changes")
    c = tc.SharingClient(server.profiles["alice"])
    assert {(t.share, t.name) for t in c.list_all_tables()} >= {("s1", "cdf"), ("Extra", "t")}
    assert_same_rows(tc.load_as_arrow(server.table_url("alice", "s1", "written")),
                     delta_rs_rows(server.tables["written"]), "written")


@pytest.mark.parametrize("fmt", [False, True])
def test_table_written_by_tahoe(server, official, fmt):
    url = server.table_url("alice", "s1", "written")
    path = server.tables["written"]
    assert_same_rows(official.load_as_pandas(url, use_delta_format=fmt), delta_rs_rows(path), "latest")
    assert_same_rows(official.load_as_pandas(url, version=1, use_delta_format=fmt), delta_rs_rows(path, 1), "v1")
    got = commit_ms_to_timestamp(official.load_table_changes_as_pandas(url, starting_version=1, use_delta_format=fmt))
    oracle = delta_rs_changes(path, 1)
    assert sorted(set(oracle["_change_type"].to_pylist())) == ["delete", "insert"]
    # _commit_timestamp: delta-spark (and so the sharing protocol) takes the commit file's
    # modification time, delta-rs its commitInfo.timestamp (a millisecond or so apart): the oracle
    # is delta-rs's rows with the times of the commit files on disk
    mtime = {v: os.stat(os.path.join(path, "_delta_log", f"{v:020d}.json")).st_mtime_ns // 1_000_000
             for v in set(oracle["_commit_version"].to_pylist())}
    stamps = pa.array([mtime[v] for v in oracle["_commit_version"].to_pylist()], pa.int64())
    oracle = commit_ms_to_timestamp(oracle.set_column(oracle.schema.get_field_index("_commit_timestamp"),
                                                      "_commit_timestamp", stamps))
    # the official client's delta-format CDF reports _commit_timestamp in whole seconds
    unit = "second" if fmt else "millisecond"
    floor = lambda t: t.set_column(t.schema.get_field_index("_commit_timestamp"), "_commit_timestamp",  # noqa: E731
                                   pc.floor_temporal(t["_commit_timestamp"].cast(pa.timestamp("us", tz="UTC")),
                                                     unit=unit))
    assert_same_rows(floor(got), floor(oracle), "changes")

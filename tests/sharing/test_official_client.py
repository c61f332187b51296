"""The official `delta_sharing` client (unmodified) against the server running as a process:
listing, metadata/protocol/version, parquet- and delta-format loads (DVs, column mapping,
timestamp_ntz), time travel, limits, JSON predicate hints, and CDF by versions and timestamps.
Rows are compared with `tahoe.Table(path).to_arrow()`."""

from __future__ import annotations

import json

import delta_sharing
import pytest

from tahoe import Table
from tests.sharing.conftest import DELTA_GOLDEN, PARQUET_GOLDEN, tname
from tests.sharing.helpers import assert_same_rows, rows_of_pandas


def test_listing(server):
    c = delta_sharing.SharingClient(server.profiles["alice"])
    shares = sorted(s.name for s in c.list_shares())
    assert shares == ["Extra", "s1"]
    schemas = c.list_schemas(delta_sharing.Share("S1"))
    assert sorted(s.name for s in schemas) == ["other", "sc"]
    tables = c.list_tables(delta_sharing.Schema("sc", "s1"))
    assert "cdf" in {t.name for t in tables}
    all_tables = c.list_all_tables()
    assert {(t.share, t.schema, t.name) for t in all_tables} >= {("s1", "sc", "cdf"), ("s1", "other", "t"),
                                                                 ("Extra", "sc", "t")}
    assert not any(t.share == "secret" for t in all_tables)


def test_version_metadata_protocol(server):
    url = server.table_url("alice", "s1", "cdf")
    assert delta_sharing.get_table_version(url) == 5
    assert delta_sharing.get_table_version(url, starting_timestamp="2024-01-01T01:30:00Z") == 2
    md = delta_sharing.get_table_metadata(url)
    assert md.partition_columns == ["p"]
    assert json.loads(md.schema_string)["fields"][0]["name"] == "id"
    proto = delta_sharing.get_table_protocol(url)
    assert proto.min_reader_version == 1
    dv = server.table_url("alice", "s1", tname("dv-with-columnmapping"))
    assert delta_sharing.get_table_protocol(dv).min_reader_version == 3


@pytest.mark.parametrize("golden", PARQUET_GOLDEN)
def test_load_parquet_format(server, golden):
    name = tname(golden)
    df = delta_sharing.load_as_pandas(server.table_url("alice", "s1", name), use_delta_format=False)
    assert_same_rows(df, Table(server.tables[name]).to_arrow(), golden)


@pytest.mark.parametrize("golden", DELTA_GOLDEN + ["basic-decimal-table", "data-reader-partition-values"])
def test_load_delta_format(server, golden):
    name = tname(golden)
    df = delta_sharing.load_as_pandas(server.table_url("alice", "s1", name), use_delta_format=True)
    assert_same_rows(df, Table(server.tables[name]).to_arrow(), golden)


@pytest.mark.parametrize("golden", ["dv-partitioned-with-checkpoint", "data-reader-timestamp_ntz"])
def test_load_auto_format(server, golden):
    """use_delta_format=None: the client asks /metadata which format to use (delta for these)."""
    name = tname(golden)
    df = delta_sharing.load_as_pandas(server.table_url("alice", "s1", name))
    assert_same_rows(df, Table(server.tables[name]).to_arrow(), golden)


def test_dv_table_in_parquet_format_refused(server):
    with pytest.raises(Exception) as ei:
        delta_sharing.load_as_pandas(server.table_url("alice", "s1", tname("dv-partitioned-with-checkpoint")),
                                     use_delta_format=False)
    assert "400" in str(ei.value) or "UNSUPPORTED" in str(ei.value)


@pytest.mark.parametrize("fmt", [False, True])
def test_time_travel(server, fmt):
    url = server.table_url("alice", "s1", "cdf")
    for v in (1, 2, 3):
        df = delta_sharing.load_as_pandas(url, version=v, use_delta_format=fmt)
        assert_same_rows(df, Table(server.tables["cdf"], version=v).to_arrow(), f"v{v}")
    df = delta_sharing.load_as_pandas(url, timestamp="2024-01-01T02:30:00Z", use_delta_format=fmt)
    assert_same_rows(df, Table(server.tables["cdf"], version=2).to_arrow(), "ts")


def test_time_travel_without_history_refused(server):
    with pytest.raises(Exception):
        delta_sharing.load_as_pandas(server.table_url("alice", "s1", "nohist"), version=1)
    df = delta_sharing.load_as_pandas(server.table_url("alice", "s1", "nohist"))
    assert len(df) == 5


@pytest.mark.parametrize("fmt", [False, True])
def test_limit(server, fmt):
    url = server.table_url("alice", "s1", "stats")
    df = delta_sharing.load_as_pandas(url, limit=15, use_delta_format=fmt)
    assert len(df) == 15
    ids = set(Table(server.tables["stats"]).to_arrow().column("id").to_pylist())
    assert set(df["id"]) <= ids


@pytest.mark.parametrize("fmt", [False, True])
def test_json_predicate_hints(server, fmt):
    url = server.table_url("alice", "s1", "cdf")
    hint = json.dumps({"op": "equal", "children": [{"op": "column", "name": "p", "valueType": "string"},
                                                   {"op": "literal", "value": "b", "valueType": "string"}]})
    df = delta_sharing.load_as_pandas(url, jsonPredicateHints=hint, use_delta_format=fmt)
    # the server prunes files; every row of p=b is there, and only p=b files were sent
    assert sorted(df["p"].unique()) == ["b"]
    assert sorted(df["id"]) == [3, 4]
    stats_url = server.table_url("alice", "s1", "stats")
    hint = json.dumps({"op": "and", "children": [
        {"op": "greaterThanOrEqual", "children": [{"op": "column", "name": "id", "valueType": "long"},
                                                  {"op": "literal", "value": "35", "valueType": "long"}]},
        {"op": "lessThan", "children": [{"op": "column", "name": "id", "valueType": "long"},
                                        {"op": "literal", "value": "52", "valueType": "long"}]}]})
    df = delta_sharing.load_as_pandas(stats_url, jsonPredicateHints=hint, use_delta_format=fmt)
    assert sorted(df["id"]) == list(range(30, 60))


def _oracle_changes(server, start, end, as_ms=True):
    from tahoe.log import DeltaLog
    from tahoe.read.changes import read_changes_arrow

    t = read_changes_arrow(DeltaLog.for_table(server.tables["cdf"]), start, end)
    if not as_ms:  # delta format: the kernel gives _commit_timestamp as a timestamp
        return t
    import pyarrow as pa
    import pyarrow.compute as pc

    ms = pc.divide(t.column("_commit_timestamp").cast(pa.int64()), 1000)
    return t.set_column(t.schema.get_field_index("_commit_timestamp"), "_commit_timestamp", ms)


@pytest.mark.parametrize("fmt", [False, True])
def test_changes_by_version(server, fmt):
    url = server.table_url("alice", "s1", "cdf")
    df = delta_sharing.load_table_changes_as_pandas(url, starting_version=1, ending_version=5, use_delta_format=fmt)
    oracle = _oracle_changes(server, 1, 5, as_ms=not fmt)
    assert_same_rows(df, oracle, "changes")
    kinds = sorted(df["_change_type"].unique())
    assert kinds == ["delete", "insert", "update_postimage", "update_preimage"]


def test_changes_by_timestamp(server):
    url = server.table_url("alice", "s1", "cdf")
    df = delta_sharing.load_table_changes_as_pandas(url, starting_timestamp="2024-01-01T02:30:00Z",
                                                    ending_timestamp="2024-01-01T04:30:00Z")
    assert_same_rows(df, _oracle_changes(server, 3, 4), "changes by timestamp")


def test_changes_refused_without_cdf(server):
    with pytest.raises(Exception) as ei:
        delta_sharing.load_table_changes_as_pandas(server.table_url("alice", "s1", "nocdf"), starting_version=0)
    assert "400" in str(ei.value) or "not enabled" in str(ei.value)


def test_tahoe_client(server):
    from tahoe.sharing import client as tc

    url = server.table_url("alice", "s1", "cdf")
    t = tc.load_as_arrow(url)
    assert rows_of_pandas(t.to_pandas()) == rows_of_pandas(Table(server.tables["cdf"]).to_arrow().to_pandas())
    t2 = tc.load_as_arrow(url, version=2, predicate_hints=["p = 'b'"])
    assert sorted(t2.column("id").to_pylist()) == [3, 4]
    assert tc.load_as_arrow(url, limit=2).num_rows == 2
    ch = tc.load_changes_as_arrow(url, starting_version=1, ending_version=5)
    assert ch.num_rows == _oracle_changes(server, 1, 5).num_rows
    c = tc.SharingClient(server.profiles["alice"])
    assert {t["name"] for t in c.list_all_tables()} >= {"cdf", "t"}
    assert tc.load_as_pandas(server.table_url("alice", "s1", tname("basic-decimal-table"))).shape[0] == 4


@pytest.mark.parametrize("fmt", [False, True])
def test_table_written_by_tahoe(server, fmt):
    if "written" not in server.tables:
        pytest.skip("tahoe writer not available")
    url = server.table_url("alice", "s1", "written")
    path = server.tables["written"]
    assert_same_rows(delta_sharing.load_as_pandas(url, use_delta_format=fmt), Table(path).to_arrow(), "latest")
    assert_same_rows(delta_sharing.load_as_pandas(url, version=1, use_delta_format=fmt),
                     Table(path, version=1).to_arrow(), "v1")
    from tahoe.log import DeltaLog
    from tahoe.read.changes import read_changes_arrow

    oracle = read_changes_arrow(DeltaLog.for_table(path), 1, None)
    if not fmt:
        import pyarrow as pa
        import pyarrow.compute as pc

        ms = pc.divide(oracle.column("_commit_timestamp").cast(pa.int64()), 1000)
        oracle = oracle.set_column(oracle.schema.get_field_index("_commit_timestamp"), "_commit_timestamp", ms)
    else:
        # the client's delta-format CDF path reports _commit_timestamp at whole seconds
        import pyarrow as pa
        import pyarrow.compute as pc

        secs = pc.floor_temporal(oracle.column("_commit_timestamp"), unit="second")
        oracle = oracle.set_column(oracle.schema.get_field_index("_commit_timestamp"), "_commit_timestamp", secs)
    df = delta_sharing.load_table_changes_as_pandas(url, starting_version=1, use_delta_format=fmt)
    assert_same_rows(df, oracle, "changes")
    assert "delete" in set(df["_change_type"])

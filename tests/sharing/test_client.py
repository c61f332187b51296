"""tahoe's Delta Sharing client (`import tahoe.sharing as delta_sharing`) against tahoe's server
running as a process.

Oracles: the conformance tables' expected rows (every table that has them, in both response
formats), rows written down by hand for the tables the tests build (`client_fixtures`), and the
official `delta_sharing` client reading the same tables through the same server (frames equal
value for value, same columns in the same order)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timezone

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tahoe.sharing as tds
from tahoe.sharing.official_client import OfficialClientError
from tests.conftest import assert_rows_equal, conformance_params, manifest_entry, read_expected
from tests.sharing.client_fixtures import (DVCM_DELETED, DVCM_LATEST, DVCM_V0, DVCM_V2_ADDED, REPO, ROWS_TABLES,
                                           share_server, tname)  # noqa: F401  (fixture)
from tests.sharing.conftest import CDF_CHANGES, CDF_ROWS, cdf_rows
from tests.sharing.helpers import rows

BASE_MS = int(datetime(2024, 1, 1, tzinfo=timezone.utc).timestamp() * 1000)


def _sorted_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The frame's rows in one order (by every column's text), index reset: both clients may read a
    table's files in different orders."""
    key = df.astype(str).agg("\x1f".join, axis=1) if len(df.columns) else pd.Series([], dtype=str)
    return df.iloc[key.argsort(kind="stable")].reset_index(drop=True)


def assert_same_frame(ours: pd.DataFrame, official, function: str, *args, **kwargs) -> bool:
    """tahoe's frame equals the official client's, compared with pandas' own `assert_frame_equal`
    — values, columns in order, and dtypes — where the official frame's dtypes survive the trip
    from its environment (checked against the dtypes it reported there); else value for value
    (`frame_rows`). Returns whether the dtypes were compared."""
    theirs, survived = official.pandas(function, *args, **kwargs)
    if survived:
        if kwargs.get("use_delta_format") is not True:
            # the one documented difference (tahoe.sharing.client): in parquet format the official
            # client's `timestamp` columns are naive, in whatever unit the file or the partition
            # value's text has (ns, ms, s); tahoe's are UTC timestamps, as in delta format (where
            # the official client's are too). The instants are compared; every other dtype is not
            # touched.
            for c in theirs.columns:
                o, t = ours[c].dtype, theirs[c].dtype
                if str(o).startswith("datetime64") and getattr(o, "tz", None) is not None and \
                        str(t).startswith("datetime64") and getattr(t, "tz", None) is None:
                    theirs[c] = theirs[c].dt.tz_localize("UTC").astype(o)
        pd.testing.assert_frame_equal(_sorted_frame(ours), _sorted_frame(theirs), check_dtype=True)
    else:
        assert list(ours.columns) == list(theirs.columns)
        assert frame_rows(ours) == rows(pa.Table.from_pandas(theirs, preserve_index=False))
    return survived


def frame_rows(df: pd.DataFrame) -> list:
    """A DataFrame's rows, normalised as the official client's frames are (they come back from its
    own environment through `pa.Table.from_pandas`)."""
    return rows(pa.Table.from_pandas(df, preserve_index=False))


# the official client's parquet-format pandas converter fails on timestamp_ntz (an open bug)
OFFICIAL_PARQUET_FAILS = {"data_reader_timestamp_ntz", "parquet_all_types", "parquet_all_types_legacy_format"}
PARITY = ["basic-decimal-table", "data-reader-partition-values", "data-reader-primitives",
          "basic-with-inserts-deletes-checkpoint", "multi-part-checkpoint", "data-reader-escaped-chars",
          "data-reader-nested-struct", "data-reader-array-primitives", "data-skipping-basic-stats-all-types",
          "data-skipping-partition-and-data-column", "kernel-timestamp-pst", "decimal-various-scale-precision",
          "dv-partitioned-with-checkpoint", "dv-with-columnmapping", "data-reader-timestamp_ntz",
          "data-reader-timestamp_ntz-name-mode", "data-skipping-basic-stats-all-types-columnmapping-name",
          "log-replay-dv-key-cases", "data-reader-timestamp_ntz-id-mode", "parquet-all-types"]
# (tables with map columns are left out: the official client's frames cannot be brought back from its
# environment through pyarrow when a map holds structs — tahoe's rows of them are checked against the
# expected rows above)
NEEDS_DELTA = {"deletionVectors", "columnMapping"}


def _needs_delta(entry: dict) -> bool:
    p = entry["protocol"]
    return bool(entry.get("column_mapping")) or bool(set(p.get("readerFeatures") or ()) & NEEDS_DELTA) \
        or p["minReaderVersion"] == 2


# --- every conformance table, both formats -------------------------------------------------------------

@pytest.mark.parametrize("entry", conformance_params(ROWS_TABLES, [e["name"] for e in ROWS_TABLES]))
def test_conformance_tables_read_as_expected(share_server, entry):
    url = share_server.table_url("alice", "g", tname(entry["name"]))
    expected = read_expected(entry)
    for fmt in (True, False):     # (the server's own choice, use_delta_format=None, is one of them)
        if fmt is False and _needs_delta(entry):
            with pytest.raises(tds.SharingHTTPError) as ei:
                tds.load_as_arrow(url, use_delta_format=False)
            assert ei.value.status_code == 400 and ei.value.error_code == "UNSUPPORTED_OPERATION"
            continue
        assert_rows_equal(tds.load_as_arrow(url, use_delta_format=fmt), expected, f"{entry['name']} fmt={fmt}")


# --- the same frames as the official client -------------------------------------------------------------

DTYPES_COMPARED: list = []   # (table, format, dtypes compared) of test_same_frames_as_official_client


@pytest.mark.parametrize("golden", conformance_params(PARITY))
def test_same_frames_as_official_client(share_server, official, golden):
    entry = manifest_entry(golden)
    name = tname(golden)
    url = share_server.table_url("alice", "g", name)
    for fmt in ((True,) if _needs_delta(entry) else (True, False)):
        ours = tds.load_as_pandas(url, use_delta_format=fmt)
        if fmt is False and name in OFFICIAL_PARQUET_FAILS:
            with pytest.raises(OfficialClientError):
                official.load_as_pandas(url, use_delta_format=False)
            assert_rows_equal(pa.Table.from_pandas(ours, preserve_index=False).cast(tds.load_as_arrow(url).schema),
                              read_expected(entry), golden)
            continue
        compared_dtypes = assert_same_frame(ours, official, "load_as_pandas", url, use_delta_format=fmt)
        DTYPES_COMPARED.append((golden, fmt, compared_dtypes))


@pytest.mark.parametrize("fmt", [None, True, False])
def test_written_tables_same_as_official_and_as_written(share_server, official, fmt):
    url = share_server.table_url("alice", "w", "cdf")
    for v in CDF_ROWS:
        ours = tds.load_as_pandas(url, version=v, use_delta_format=fmt)
        assert frame_rows(ours) == rows(cdf_rows(v)), v
        assert assert_same_frame(ours, official, "load_as_pandas", url, version=v, use_delta_format=fmt), v
    ts = tds.load_as_pandas(url, timestamp="2024-01-01T02:30:00Z", use_delta_format=fmt)
    assert frame_rows(ts) == rows(cdf_rows(2))
    dv = share_server.table_url("alice", "w", "dvcm")
    if fmt is False:
        with pytest.raises(tds.SharingHTTPError) as ei:
            tds.load_as_pandas(dv, use_delta_format=False)
        assert ei.value.status_code == 400
        return
    ours = tds.load_as_pandas(dv, use_delta_format=fmt)
    assert list(ours.columns) == ["id", "Grp Name", "ts"]
    assert sorted(zip(ours["id"], ours["Grp Name"])) == DVCM_LATEST
    assert ours["ts"].isna().all() and str(ours["ts"].dtype).startswith("datetime64")
    assert assert_same_frame(ours, official, "load_as_pandas", dv, use_delta_format=fmt)
    v0 = tds.load_as_pandas(dv, version=0, use_delta_format=fmt)
    assert sorted(zip(v0["id"], v0["Grp Name"])) == sorted(DVCM_V0)


@pytest.mark.parametrize("fmt", [None, True, False])
def test_changes_as_written_and_as_official(share_server, official, fmt):
    url = share_server.table_url("alice", "w", "cdf")
    ours = tds.load_table_changes_as_pandas(url, starting_version=1, ending_version=5, use_delta_format=fmt)
    assert list(ours.columns) == ["id", "name", "score", "p", "_change_type", "_commit_version", "_commit_timestamp"]
    got = sorted(((tuple(r[:4]), r[4], r[5]) for r in frame_rows(ours)), key=repr)
    assert got == sorted(CDF_CHANGES, key=repr)
    for v, t in ours.groupby("_commit_version")["_commit_timestamp"].first().items():
        ms = int(t) if ours["_commit_timestamp"].dtype.kind == "i" else int(pd.Timestamp(t).value // 1_000_000)
        assert ms == BASE_MS + v * 3600_000
    if fmt is False:   # parquet format: epoch milliseconds, as the official client gives
        assert ours["_commit_timestamp"].dtype.kind == "i"
    if fmt is not None:
        assert_same_frame(ours, official, "load_table_changes_as_pandas", url, starting_version=1, ending_version=5,
                          use_delta_format=fmt)
    by_ts = tds.load_table_changes_as_pandas(url, starting_timestamp="2024-01-01T02:30:00Z",
                                             ending_timestamp="2024-01-01T04:30:00Z", use_delta_format=fmt)
    assert sorted(set(by_ts["_commit_version"])) == [3, 4]


def test_changes_of_a_table_with_deletion_vectors_and_column_mapping(share_server, official):
    url = share_server.table_url("alice", "w", "dvcm")
    ours = tds.load_table_changes_as_pandas(url, starting_version=0)
    got = sorted((int(i), g, ct, int(v)) for i, g, ct, v in
                 zip(ours["id"], ours["Grp Name"], ours["_change_type"], ours["_commit_version"]))
    want = sorted([(i, g, "insert", 0) for i, g in DVCM_V0] + [(i, g, "delete", 1) for i, g in DVCM_DELETED]
                  + [(i, g, "insert", 2) for i, g in DVCM_V2_ADDED])
    assert got == want
    theirs = official.load_table_changes_as_pandas(url, starting_version=0, use_delta_format=True).to_pydict()
    assert sorted((int(i), g, ct, int(v)) for i, g, ct, v in zip(theirs["id"], theirs["Grp Name"],
                                                                theirs["_change_type"], theirs["_commit_version"])) == want


# --- arguments the official client takes -----------------------------------------------------------------

@pytest.mark.parametrize("fmt", [True, False])
def test_limit_reads_the_first_rows_like_the_official_client(share_server, official, fmt):
    url = share_server.table_url("alice", "w", "stats")
    ours = tds.load_as_pandas(url, limit=15, use_delta_format=fmt)
    assert len(ours) == 15
    assert frame_rows(ours) == rows(official.load_as_pandas(url, limit=15, use_delta_format=fmt))
    assert len(tds.load_as_pandas(url, limit=0, use_delta_format=fmt)) == 0
    assert list(tds.load_as_pandas(url, limit=0).columns) == ["id", "ts"]
    with pytest.raises(ValueError):
        tds.load_as_pandas(url, limit=-1)


@pytest.mark.parametrize("fmt", [None, True, False])
def test_json_predicate_hints_are_applied_to_rows(share_server, official, fmt):
    url = share_server.table_url("alice", "w", "stats")
    hint = json.dumps({"op": "and", "children": [
        {"op": "greaterThanOrEqual", "children": [{"op": "column", "name": "id", "valueType": "long"},
                                                  {"op": "literal", "value": "35", "valueType": "long"}]},
        {"op": "lessThan", "children": [{"op": "column", "name": "ID", "valueType": "long"},
                                        {"op": "literal", "value": "52", "valueType": "long"}]}]})
    ours = tds.load_as_pandas(url, jsonPredicateHints=hint, use_delta_format=fmt)
    assert sorted(ours["id"]) == list(range(35, 52))
    # the official client only sends the hint: the server prunes files, the rows stay
    assert sorted(official.load_as_pandas(url, jsonPredicateHints=hint, use_delta_format=fmt)
                  .column("id").to_pylist()) == list(range(30, 60))
    ts_hint = {"op": "lessThan", "children": [{"op": "column", "name": "ts", "valueType": "timestamp"},
                                              {"op": "literal", "value": "2024-01-01T05:00:00Z",
                                               "valueType": "timestamp"}]}
    assert sorted(tds.load_as_pandas(url, jsonPredicateHints=ts_hint, use_delta_format=fmt)["id"]) == [0, 1, 2, 3, 4]
    if fmt is not False:
        dv = share_server.table_url("alice", "w", "dvcm")
        part = json.dumps({"op": "equal", "children": [{"op": "column", "name": "Grp Name", "valueType": "string"},
                                                       {"op": "literal", "value": "x", "valueType": "string"}]})
        df = tds.load_as_pandas(dv, jsonPredicateHints=part, use_delta_format=fmt)
        assert sorted(zip(df["id"], df["Grp Name"])) == [r for r in DVCM_LATEST if r[1] == "x"]
    with pytest.raises(ValueError):
        tds.load_as_pandas(url, jsonPredicateHints='{"op": "nope"}')
    with pytest.raises(ValueError):
        tds.load_as_pandas(url, jsonPredicateHints=json.dumps(
            {"op": "isNull", "children": [{"op": "column", "name": "missing", "valueType": "int"}]}))


def _fields(x, names):
    return {n: (getattr(x, n) if not isinstance(x, dict) else x.get(n)) for n in names}


def test_listing_version_metadata_protocol_like_the_official_client(share_server, official):
    for who in ("alice", "other"):
        prof = share_server.profiles[who]
        ours = tds.SharingClient(prof)
        assert [s.name for s in ours.list_shares()] == [s["name"] for s in official.client(prof, "list_shares")]
        assert sorted((t.share, t.schema, t.name) for t in ours.list_all_tables()) == \
            sorted((t["share"], t["schema"], t["name"]) for t in official.client(prof, "list_all_tables"))
        for s in ours.list_shares():
            theirs = official.client(prof, "list_schemas", {"$type": "Share", "name": s.name})
            assert [x.name for x in ours.list_schemas(s)] == [x["name"] for x in theirs]
            for sc in ours.list_schemas(s):
                theirs = official.client(prof, "list_tables", {"$type": "Schema", "name": sc.name, "share": sc.share})
                assert [t.name for t in ours.list_tables(sc)] == [t["name"] for t in theirs]
    assert {s.name for s in tds.SharingClient(share_server.profiles["other"]).list_shares()} == {"g"}
    md_fields = ("id", "name", "description", "schema_string", "configuration", "version", "size", "num_files",
                 "partition_columns")
    pr_fields = ("min_reader_version", "min_writer_version", "reader_features", "writer_features")
    for table in ("w.t.cdf", "w.t.dvcm"):
        url = f"{share_server.profiles['alice']}#{table}"
        assert tds.get_table_version(url) == official.call("get_table_version", url)
        assert tds.get_table_version(url, starting_timestamp="2024-01-01T01:30:00Z") == \
            official.call("get_table_version", url, starting_timestamp="2024-01-01T01:30:00Z")
        for fmt in (True, False):
            if table.endswith("dvcm") and fmt is False:
                continue
            m1, m2 = tds.get_table_metadata(url, use_delta_format=fmt), \
                official.call("get_table_metadata", url, use_delta_format=fmt)
            got = _fields(m1, md_fields)
            got["partition_columns"] = list(got["partition_columns"])
            assert got == _fields(m2, md_fields), table
            assert {"provider": m1.format.provider, "options": m1.format.options} == \
                {k: v for k, v in m2["format"].items() if k != "$type"}
            p1 = tds.get_table_protocol(url, use_delta_format=fmt)
            assert _fields(p1, pr_fields) == _fields(official.call("get_table_protocol", url, use_delta_format=fmt),
                                                     pr_fields)
    assert tds.get_table_version(share_server.table_url("alice", "w", "cdf")) == 5
    assert tds.get_table_protocol(share_server.table_url("alice", "w", "dvcm")).reader_features == \
        ["columnMapping", "deletionVectors", "timestampNtz"]


def test_errors_are_the_official_clients(share_server):
    import requests

    with pytest.raises(ValueError, match="Invalid 'url'"):
        tds.load_as_pandas("no-fragment")
    with pytest.raises(ValueError, match="Invalid 'url'"):
        tds.load_as_pandas(share_server.profiles["alice"] + "#a.b")
    with pytest.raises(requests.exceptions.HTTPError) as ei:
        tds.load_as_pandas(share_server.table_url("alice", "w", "missing"))
    assert ei.value.response.status_code == 404 and isinstance(ei.value, tds.SharingHTTPError)
    assert ei.value.error_code == "RESOURCE_DOES_NOT_EXIST"
    with pytest.raises(tds.SharingHTTPError) as ei:   # a share not granted answers as missing
        tds.load_as_pandas(share_server.table_url("other", "w", "cdf"))
    assert ei.value.status_code == 404
    with pytest.raises(tds.SharingHTTPError) as ei:
        tds.load_table_changes_as_pandas(share_server.table_url("alice", "w", "stats"), starting_version=0)
    assert ei.value.status_code == 400
    bad = share_server.dir / "v9.share"
    bad.write_text(json.dumps({"shareCredentialsVersion": 9, "endpoint": "http://x", "bearerToken": "t"}))
    with pytest.raises(ValueError, match="too new"):
        tds.SharingClient(str(bad))
    wrong = share_server.dir / "wrong.share"
    wrong.write_text(json.dumps({"shareCredentialsVersion": 1, "endpoint": share_server.url, "bearerToken": "nope"}))
    with pytest.raises(tds.SharingHTTPError) as ei:
        tds.SharingClient(str(wrong)).list_shares()
    assert ei.value.status_code == 401


def test_unsupported_reader_features_are_refused_by_name():
    from tahoe.errors import UnsupportedFeatureError
    from tahoe.sharing.reader import check_reader_features

    check_reader_features({"minReaderVersion": 3, "readerFeatures": ["deletionVectors", "columnMapping",
                                                                     "timestampNtz", "v2Checkpoint"]})
    with pytest.raises(UnsupportedFeatureError, match="variantType"):
        check_reader_features({"minReaderVersion": 3, "readerFeatures": ["deletionVectors", "variantType"]})
    with pytest.raises(UnsupportedFeatureError, match="reader version 4"):
        check_reader_features({"minReaderVersion": 4})


def test_batches_stream_the_rows(share_server):
    url = share_server.table_url("alice", "w", "stats")
    reader = tds.load_as_batches(url)
    batches = list(reader)
    assert len(batches) == 10 and all(isinstance(b, pa.RecordBatch) for b in batches)
    assert sorted(pa.Table.from_batches(batches).column("id").to_pylist()) == list(range(100))
    ch = tds.load_table_changes_as_batches(share_server.table_url("alice", "w", "cdf"), starting_version=1)
    assert sum(b.num_rows for b in ch) == len(CDF_CHANGES)


def test_the_official_readme_examples_run_after_the_import_swap(share_server, tmp_path):
    """The Python connector's quick start (README.md, "Python Connector" — delta format, batch
    conversion and predicate hints included), unchanged but for the import line and the
    placeholders (the hint names this table's partition column); its Spark lines run in
    tests/spark/test_sharing_source.py."""
    profile = share_server.profiles["alice"]
    code = f'''
import tahoe.sharing as delta_sharing

# Point to the profile file. It can be a file on the local file system or a file on a remote storage.
profile_file = {profile!r}

# Create a SharingClient.
client = delta_sharing.SharingClient(profile_file)

# List all shared tables.
client.list_all_tables()

# Create a url to access a shared table.
# A table path is the profile file path following with `#` and the fully qualified name of a table
# (`<share-name>.<schema-name>.<table-name>`).
table_url = profile_file + "#w.t.cdf"

# Fetch 10 rows from a table and convert it to a Pandas DataFrame. This can be used to read sample data
# from a table that cannot fit in the memory.
delta_sharing.load_as_pandas(table_url, limit=10)

# Load a table as a Pandas DataFrame. This can be used to process tables that can fit in the memory.
delta_sharing.load_as_pandas(table_url)

# Load a table as a Pandas DataFrame explicitly using Delta Format
delta_sharing.load_as_pandas(table_url, use_delta_format=True)

# Load a table as a Pandas DataFrame, using batch conversion to potentially reduce memory usage.
delta_sharing.load_as_pandas(table_url, convert_in_batches=True)

# Load a table as a Pandas DataFrame explicitly using jsonPredicateHints
hintOnP = """{{
  "op": "equal",
  "children": [
    {{"op": "column", "name":"p", "valueType":"string"}},
    {{"op":"literal","value":"b","valueType":"string"}}
  ]
}}"""
delta_sharing.load_as_pandas(table_url, jsonPredicateHints = hintOnP)

# Load table changes from version 0 to version 5, as a Pandas DataFrame.
delta_sharing.load_table_changes_as_pandas(table_url, starting_version=0, ending_version=5)

print(len(client.list_all_tables()), len(delta_sharing.load_as_pandas(table_url, limit=10)),
      len(delta_sharing.load_as_pandas(table_url)),
      len(delta_sharing.load_table_changes_as_pandas(table_url, starting_version=0, ending_version=5)),
      len(delta_sharing.load_as_pandas(table_url, use_delta_format=True)),
      len(delta_sharing.load_as_pandas(table_url, convert_in_batches=True)),
      sorted(delta_sharing.load_as_pandas(table_url, jsonPredicateHints = hintOnP)["p"].unique()))
'''
    out = subprocess.run([sys.executable, "-c", code], cwd=str(REPO), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    n_tables, n10, n_all, n_changes, n_delta, n_batches, ps = out.stdout.split(maxsplit=6)
    assert int(n_tables) >= 3 and int(n10) == 5 and int(n_all) == 5 and int(n_changes) == len(CDF_CHANGES)
    assert int(n_delta) == int(n_batches) == 5 and ps.strip() == "['b']"


def test_cli_ls_read_changes(share_server, tmp_path):
    def run(*args):
        r = subprocess.run([sys.executable, "-m", "tahoe", "sharing", *args], cwd=str(REPO), capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        return r
    listing = run("ls", share_server.profiles["alice"]).stdout.split()
    assert {"w.t.cdf", "w.t.dvcm", "w.t.stats"} <= set(listing)
    out = tmp_path / "dvcm.parquet"
    r = run("read", share_server.table_url("alice", "w", "dvcm"), "--out", str(out))
    t = pq.read_table(out)
    assert sorted(zip(t.column("id").to_pylist(), t.column("Grp Name").to_pylist())) == DVCM_LATEST
    assert "wrote 19 rows" in r.stderr
    run("read", share_server.table_url("alice", "w", "cdf"), "--version", "2", "--limit", "3", "--out", str(out), "-q")
    assert pq.read_table(out).num_rows == 3
    run("changes", share_server.table_url("alice", "w", "cdf"), "--starting-version", "3", "--out", str(out))
    t = pq.read_table(out)
    assert sorted(zip(t.column("_change_type").to_pylist(), t.column("_commit_version").to_pylist())) == \
        sorted((ct, v) for _, ct, v in CDF_CHANGES if v >= 3)
    bad = subprocess.run([sys.executable, "-m", "tahoe", "sharing", "read", share_server.table_url("alice", "w", "nope"),
                          "--out", str(tmp_path / "x.parquet")], cwd=str(REPO), capture_output=True, text=True)
    assert bad.returncode == 1 and "404" in bad.stderr and not (tmp_path / "x.parquet").exists()

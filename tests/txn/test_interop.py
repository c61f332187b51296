"""Tables created and committed by tahoe open in delta-rs (`deltalake.DeltaTable`) with the same
version, files, properties, schema and protocol. delta-rs runs in a subprocess (it can abort at
interpreter exit); it is judged by the JSON it prints."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq

from tahoe import Table
from tahoe.protocol.actions import AddFile, RemoveFile
from tahoe.protocol.table_features import reader_features_of, writer_features_of
from tests.txn._helpers import fake_add

_PROBE = r"""
import json, os, sys
from deltalake import DeltaTable
out = {}
for path in sys.argv[1:]:
    try:
        dt = DeltaTable(path)
        p = dt.protocol()
        adds = dt.get_add_actions(flatten=True)
        try:
            paths = adds.column("path").to_pylist()
        except AttributeError:
            import pyarrow as pa
            paths = pa.table(adds).column("path").to_pylist()
        entry = {
            "version": dt.version(),
            "schema": json.loads(dt.schema().to_json()),
            "files": sorted(paths),
            "configuration": dict(dt.metadata().configuration),
            "partitionColumns": list(dt.metadata().partition_columns),
            "protocol": [p.min_reader_version, p.min_writer_version,
                         sorted(p.reader_features or []), sorted(p.writer_features or [])],
            "txn": dt.transaction_version("app-1"),
        }
        if os.path.exists(os.path.join(path, "READ_ROWS")):
            t = dt.to_pyarrow_table()
            entry["rows"] = sorted(([r[c] for c in sorted(t.column_names)] for r in t.to_pylist()), key=repr)
        out[path] = entry
    except Exception as e:
        out[path] = {"error": f"{type(e).__name__}: {e}"}
sys.stdout.write(json.dumps(out) + "\n")
sys.stdout.flush()
os._exit(0)
"""


def delta_rs(*paths: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", _PROBE, *paths], capture_output=True, text=True, timeout=120)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"delta-rs printed nothing (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(lines[-1])


def _commit(t: Table, adds=(), removes=(), app=None) -> None:
    txn = t.transaction("WRITE")
    txn.add_files(adds)
    txn.remove_files(removes)
    if app:
        txn.set_txn(*app)
    txn.commit()
    t.refresh()


def _build_tables(root) -> dict[str, Table]:
    tables: dict[str, Table] = {}

    # partitioned, with real data so delta-rs reads rows too
    t = Table.create(str(root / "partitioned"), "id BIGINT, p STRING, v DOUBLE", ["p"],
                     {"owner": "tahoe-tests"})
    adds = []
    for part, ids in (("a", [1, 2]), ("b", [3])):
        rel = f"p={part}/part-{part}.parquet"
        full = root / "partitioned" / rel
        full.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([0.5] * len(ids))}), full)
        adds.append(AddFile(rel, {"p": part}, full.stat().st_size, 1_700_000_000_000, True,
                            json.dumps({"numRecords": len(ids)})))
    _commit(t, adds, app=("app-1", 5))
    (root / "partitioned" / "READ_ROWS").write_text("")
    tables["partitioned"] = t

    t = Table.create(str(root / "cdf"), "id BIGINT, p STRING", ["p"], {"delta.enableChangeDataFeed": "true"})
    _commit(t, [fake_add("p=x/1.parquet", "x"), fake_add("p=x/2.parquet", "x")])
    _commit(t, removes=[RemoveFile("p=x/1.parquet", partition_values={"p": "x"}, size=110)])
    tables["cdf"] = t

    for mode in ("name", "id"):
        t = Table.create(str(root / f"cm_{mode}"), "id BIGINT, p STRING, s STRUCT<a: INT, b: STRING>", ["p"],
                         {"delta.columnMapping.mode": mode})
        phys = t.schema.field("p").metadata["delta.columnMapping.physicalName"]
        _commit(t, [AddFile(f"{phys}=q/1.parquet", {phys: "q"}, 10, 1, True, json.dumps({"numRecords": 1}))])
        if mode == "name":
            t.rename_column("id", "ident")
        tables[f"cm_{mode}"] = t

    t = Table.create(str(root / "rowtracking"), "id BIGINT", properties={"delta.enableRowTracking": "true"})
    _commit(t, [fake_add("1.parquet", n=5), fake_add("2.parquet", n=7)])
    tables["rowtracking"] = t

    t = Table.create(str(root / "constraints"), "id BIGINT, v DOUBLE")
    t.add_constraint("positive", "v > 0")
    _commit(t, [fake_add("1.parquet")])
    tables["constraints"] = t

    t = Table.create(str(root / "dv_ntz"), "id BIGINT, ts TIMESTAMP_NTZ",
                     properties={"delta.enableDeletionVectors": "true", "delta.enableInCommitTimestamps": "true"})
    _commit(t, [fake_add("1.parquet")])
    tables["dv_ntz"] = t
    return tables


def _logical_names(schema_json: dict) -> list[str]:
    return [f["name"] for f in schema_json["fields"]]


def test_tahoe_tables_open_in_delta_rs(tmp_path):
    tables = _build_tables(tmp_path)
    seen = delta_rs(*(t.table_root for t in tables.values()))
    for name, t in tables.items():
        rs = seen[t.table_root]
        assert "error" not in rs, f"{name}: delta-rs failed: {rs.get('error')}"
        assert rs["version"] == t.version, name
        assert rs["files"] == sorted(t.files(["path"]).column("path").to_pylist()), name
        assert rs["configuration"] == t.metadata.configuration, name
        assert rs["partitionColumns"] == t.partition_columns, name
        assert _logical_names(rs["schema"]) == t.schema.names, name
        p = t.protocol
        r, w, rf, wf = rs["protocol"]
        assert (r, w) == (p.min_reader_version, p.min_writer_version), name
        if p.min_reader_version >= 3:
            assert set(rf) == reader_features_of(p), name
        if p.min_writer_version >= 7:
            assert set(wf) == set(p.writer_features), name
    # rows as [id, p, v] (columns sorted by name): the partition value comes from the log
    assert seen[tables["partitioned"].table_root]["rows"] == [[1, "a", 0.5], [2, "a", 0.5], [3, "b", 0.5]]
    assert seen[tables["partitioned"].table_root]["txn"] == 5
    assert seen[tables["cdf"].table_root]["configuration"]["delta.enableChangeDataFeed"] == "true"
    assert _logical_names(seen[tables["cm_name"].table_root]["schema"])[0] == "ident"
    assert {"rowTracking", "domainMetadata"} <= writer_features_of(tables["rowtracking"].protocol)


def test_tahoe_commits_on_a_delta_rs_table(tmp_path):
    """delta-rs creates and writes, tahoe commits on top, delta-rs reads tahoe's commit."""
    path = str(tmp_path / "rs")
    script = (
        "import sys, os, pyarrow as pa\n"
        "from deltalake import write_deltalake\n"
        f"write_deltalake({path!r}, pa.table({{'id': pa.array([1, 2], pa.int64()), 'p': ['a', 'b']}}), partition_by=['p'])\n"
        "os._exit(0)\n")
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    t = Table(path)
    victim = [a for a in t.snapshot.add_files() if a.partition_values == {"p": "a"}][0]
    txn = t.transaction("DELETE", {"predicate": "p = 'a'"})
    txn.read_predicate(lambda pv: pv["p"] == "a")
    txn.read_files([victim])
    txn.remove_files([victim])
    assert txn.commit() == 1
    t.set_properties({"delta.appendOnly": "true"})
    (tmp_path / "rs" / "READ_ROWS").write_text("")
    rs = delta_rs(path)[t.table_root]
    assert "error" not in rs, rs
    assert rs["version"] == 2 and rs["rows"] == [[2, "b"]]   # [id, p]: the row of partition b is left
    assert rs["configuration"]["delta.appendOnly"] == "true"
    assert rs["files"] == sorted(t.refresh().files(["path"]).column("path").to_pylist())

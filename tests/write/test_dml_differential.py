"""DELETE / UPDATE / MERGE against delta-rs: the same operations — every clause kind, conditions
meeting NULLs, partitioned and not, column mapping, deletion vectors and copy-on-write — run by
tahoe's Arrow executor and by `deltalake` on copies of the same table give the same rows; delta-rs
reads every table tahoe's DML wrote (QueryBuilder: deletion vectors, column mapping), and its
`load_cdf` returns the change rows tahoe's reader returns for the same operations.

Oracle: delta-rs (its own DML on its own copy). The Spark executor is held to the same oracle in
tests/spark/test_dml.py (SCENARIOS are shared)."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest

import tahoe
from tahoe.log import DeltaLog
from tahoe.read.changes import read_changes_arrow
from tahoe.write.writer import write_table
from tests.fixtures.deltars import run_deltars, sorted_rows, source_file

COLS = ["id", "day", "v", "s"]


def base_rows(n: int = 36) -> pa.Table:
    return pa.table({
        "id": pa.array(range(n), pa.int64()),
        "day": [["mon", "tue", "wed"][i % 3] for i in range(n)],
        "v": pa.array([None if i % 7 == 3 else (i * 37) % 11 for i in range(n)], pa.int64()),
        "s": [None if i % 5 == 2 else ["a", "b", "c"][i % 4 % 3] for i in range(n)],
    })


SOURCE = pa.table({
    "id": pa.array([0, 3, 5, 7, 8, 13, 40, 41, 42, None], pa.int64()),
    "day": ["mon", "mon", "wed", "tue", "wed", "tue", "mon", "tue", None, "wed"],
    "v": pa.array([9, None, 4, 2, 1, 6, None, 3, 8, 5], pa.int64()),
    "s": ["x", "y", None, "z", "x", "y", "z", None, "x", "q"],
})

# name -> list of ops (the same specs drive tahoe and delta-rs)
SCENARIOS: dict[str, list[dict]] = {
    "delete-nulls": [{"op": "delete", "predicate": "v > 5 OR s = 'c'"}],
    "delete-partition-and-null": [{"op": "delete", "predicate": "day = 'mon'"},
                                  {"op": "delete", "predicate": "s IS NULL OR v = 3"}],
    "update": [{"op": "update", "updates": {"v": "v * 2 + 1", "s": "'z'"}, "predicate": "s = 'a' OR v < 2"},
               # every row changes: delta-rs leaves rows an UPDATE did not change out of its change data
               # (delta-spark, and tahoe, record every updated row)
               {"op": "update", "updates": {"s": "concat(coalesce(s, 'n'), CASE WHEN v IS NULL THEN '?' ELSE '!' END)"},
                "predicate": None}],
    "merge-all-clauses": [{"op": "merge", "source": "SOURCE", "predicate": "t.id = s.id",
                           "source_alias": "s", "target_alias": "t", "clauses": [
                               ["when_matched_update", {"updates": {"v": "s.v", "s": "s.s"}, "predicate": "s.v % 2 = 0"}],
                               ["when_matched_delete", {"predicate": "s.v IS NULL"}],
                               ["when_matched_update", {"updates": {"v": "t.v + 100"}}],
                               ["when_not_matched_insert", {"updates": {"id": "s.id", "day": "s.day", "v": "s.v * 10",
                                                                        "s": "'ins'"}, "predicate": "s.v > 4"}],
                               ["when_not_matched_insert_all", {}],
                               ["when_not_matched_by_source_update", {"updates": {"v": "t.v - 1"}, "predicate": "t.v < 3"}],
                               ["when_not_matched_by_source_delete", {"predicate": "t.s IS NULL"}],
                           ]}],
    "merge-upsert": [{"op": "merge", "source": "SOURCE", "predicate": "t.id = s.id AND t.day = s.day",
                      "source_alias": "s", "target_alias": "t",
                      "clauses": [["when_matched_update_all", {}], ["when_not_matched_insert_all", {}]]}],
    "merge-insert-only": [{"op": "merge", "source": "SOURCE", "predicate": "t.id = s.id", "source_alias": "s",
                           "target_alias": "t", "clauses": [["when_not_matched_insert_all", {"predicate": "s.id IS NOT NULL"}]]}],
}

VARIANTS = {   # name -> (partitioned, table properties)
    "cow": (True, {}),
    "cow-flat": (False, {}),
    "dv": (True, {"delta.enableDeletionVectors": "true"}),
    "dv-flat": (False, {"delta.enableDeletionVectors": "true"}),
    "cm-dv": (True, {"delta.columnMapping.mode": "name", "delta.enableDeletionVectors": "true"}),
    "cm-flat": (False, {"delta.columnMapping.mode": "name"}),
}


def make_table(path: str, partitioned: bool, props: dict) -> None:
    write_table(path, base_rows(), partition_by=["day"] if partitioned else None, target_file_rows=5,
                properties={"delta.enableChangeDataFeed": "true", **props})


def run_tahoe(path: str, ops: list[dict], source: pa.Table = SOURCE) -> list[dict]:
    """The ops through tahoe's Spark-free API (delta-rs's method names)."""
    out = []
    for op in ops:
        if op["op"] == "delete":
            out.append(tahoe.delete(path, op.get("predicate")))
        elif op["op"] == "update":
            out.append(tahoe.update(path, op["updates"], predicate=op.get("predicate")))
        else:
            m = tahoe.merge(path, source, op["predicate"], source_alias=op["source_alias"],
                            target_alias=op["target_alias"])
            for name, kw in op["clauses"]:
                m = getattr(m, name)(**kw)
            out.append(m.execute())
    return out


def deltars_ops(ops: list[dict], source_path: str) -> list[dict]:
    return [dict(op, source=source_path) if op["op"] == "merge" else op for op in ops]


def cdf_rows(t: pa.Table) -> list[tuple]:
    return sorted_rows(t, COLS + ["_change_type", "_commit_version"])


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    """delta-rs's results: each scenario on a plain copy (partitioned and not) of the base table."""
    work = tmp_path_factory.mktemp("oracle")
    src = source_file(SOURCE, work, "source")
    jobs, keys = [], []
    for partitioned in (True, False):
        for name, ops in SCENARIOS.items():
            path = str(work / f"{name}-{partitioned}")
            make_table(path, partitioned, {})
            jobs.append({"path": path, "ops": deltars_ops(ops, src), "cdf_from": 1})
            keys.append((name, partitioned))
    results = run_deltars(jobs, work / "rs")
    out = {}
    for k, r in zip(keys, results):
        assert r["error"] is None, (k, r["error"])
        out[k] = r
    return out


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_dml_matches_delta_rs(variant, oracle, tmp_path):
    """Every scenario, on this variant of the table: tahoe's rows = delta-rs's rows (tahoe
    reading its table, and delta-rs reading it); change rows (tahoe's reader; delta-rs's load_cdf
    where it reads the table: not under column mapping) = delta-rs's load_cdf on its own copy."""
    partitioned, props = VARIANTS[variant]
    paths = {}
    for name, ops in SCENARIOS.items():
        path = str(tmp_path / name)
        make_table(path, partitioned, props)
        run_tahoe(path, ops)
        paths[name] = path
        want = oracle[(name, partitioned)]
        assert sorted_rows(tahoe.Table(path).to_arrow(), COLS) == sorted_rows(want["rows"], COLS), name
        ours = read_changes_arrow(DeltaLog.for_table(path), 1)
        assert cdf_rows(ours) == cdf_rows(want["cdf"]), name
    # delta-rs reads what tahoe wrote (deletion vectors and column mapping through its QueryBuilder)
    cdf = "delta.columnMapping.mode" not in props    # delta-rs's load_cdf refuses column mapping
    read = run_deltars([{"path": p, "ops": [], "cdf_from": 1 if cdf else None} for p in paths.values()],
                       tmp_path / "rs")
    for (name, path), r in zip(paths.items(), read):
        assert r["error"] is None, (name, r["error"])
        want = oracle[(name, partitioned)]
        assert sorted_rows(r["rows"], COLS) == sorted_rows(want["rows"], COLS), name
        if cdf:
            assert cdf_rows(r["cdf"]) == cdf_rows(want["cdf"]), name


def test_dv_mode_writes_no_data_file_for_a_delete_and_only_changed_rows_for_an_update(tmp_path):
    """Merge-on-read: a DELETE of a few rows adds no data file (deletion vectors only); an UPDATE
    writes exactly the updated rows; nothing is removed but tombstones of the DV'd files."""
    path = str(tmp_path / "t")
    make_table(path, True, {"delta.enableDeletionVectors": "true"})
    files_before = {a.path for a in DeltaLog.for_table(path).snapshot().add_files()}
    m = tahoe.delete(path, "id IN (1, 2, 30)")
    snap = DeltaLog.for_table(path).snapshot()
    assert m["numAddedFiles"] == 0 and m["numDeletedRows"] == 3 and m["numDeletionVectorsAdded"] == 3
    assert {a.path for a in snap.add_files()} == files_before          # the same data files, now with DVs
    assert sum(a.deletion_vector is not None for a in snap.add_files()) == 3
    m = tahoe.update(path, {"v": "-1"}, predicate="id IN (4, 5)")
    snap = DeltaLog.for_table(path).snapshot()
    new = [a for a in snap.add_files() if a.path not in files_before]
    assert m["numUpdatedRows"] == 2 and m["numCopiedRows"] == 0
    assert sum(a.num_records for a in new) == 2                       # only the changed rows are written
    rows = sorted_rows(tahoe.Table(path).to_arrow(), COLS)
    want = sorted_rows(base_rows(), COLS)
    want = [(i, d, -1 if i in (4, 5) else v, s) for i, d, v, s in want if i not in (1, 2, 30)]
    assert rows == sorted(want, key=lambda r: tuple((x is not None, x if x is not None else 0) for x in r))


def test_copy_of_untouched_files_is_skipped(tmp_path):
    """Partition pruning and stats skipping: a DELETE on one partition's id range leaves every
    other file alone; a partition-only DELETE removes files without rewriting any."""
    path = str(tmp_path / "t")
    make_table(path, True, {})
    before = {a.path for a in DeltaLog.for_table(path).snapshot().add_files()}
    m = tahoe.delete(path, "day = 'tue' AND id = 4")
    assert m["numRemovedFiles"] == 1 and m["numAddedFiles"] == 1
    after = {a.path for a in DeltaLog.for_table(path).snapshot().add_files()}
    assert len(before - after) == 1
    m = tahoe.delete(path, "day = 'wed'")
    assert m["numAddedFiles"] == 0 and m["numCopiedRows"] == 0 and m["numAddedChangeFiles"] == 0
    shutil.rmtree(path)

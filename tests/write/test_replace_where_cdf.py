"""replaceWhere on data columns of a table with the change data feed on, without Spark: the
commit records change data as delta-spark's WriteIntoDelta does — every replaced row a
`delete`, every written row an `insert`, the other rows of the touched files (written again) no
change — and the table's rows are the predicate's complement plus the new rows.

Oracles: rows derived by hand; deltalake's `load_cdf` of the same table (it reads the commit's
change data files)."""

from __future__ import annotations

import pyarrow as pa

import tahoe


def _rows(t) -> list:
    return sorted(tuple(r.values()) for r in t.to_pylist())


def test_replace_where_on_data_columns_records_change_data(tmp_path):
    path = str(tmp_path / "t")
    base = pa.table({"id": pa.array([1, 2, 3, 4, 5, 6], pa.int64()), "v": ["a", "b", "c", "d", "e", "f"]})
    tahoe.write_table(path, base.slice(0, 3), properties={"delta.enableChangeDataFeed": "true"})   # v0: 1..3
    tahoe.write_table(path, base.slice(3, 3), mode="append")                                         # v1: 4..6
    new = pa.table({"id": pa.array([2, 4, 40], pa.int64()), "v": ["B", "D", "X"]})
    v = tahoe.write_table(path, new, mode="overwrite", predicate="id >= 2 AND id < 5 OR id = 40")
    assert v == 2
    assert _rows(tahoe.Table(path).to_arrow()) == [(1, "a"), (2, "B"), (4, "D"), (5, "e"), (6, "f"), (40, "X")]
    changes = tahoe.Table(path).changes(2, 2)
    got = sorted((r["id"], r["v"], r["_change_type"], r["_commit_version"]) for r in changes.to_pylist())
    want = sorted([(2, "b", "delete", 2), (3, "c", "delete", 2), (4, "d", "delete", 2),
                   (2, "B", "insert", 2), (4, "D", "insert", 2), (40, "X", "insert", 2)])
    assert got == want
    metrics = tahoe.Table(path).history(1)[0]["operationMetrics"]
    assert int(metrics["numAddedChangeFiles"]) >= 1 and int(metrics["numDeletedRows"]) == 3
    # delta-rs reads the same change rows from the commit's change data files
    import deltalake

    rs = pa.table(deltalake.DeltaTable(path).load_cdf(starting_version=2, ending_version=2).read_all())
    assert sorted((r["id"], r["v"], r["_change_type"], r["_commit_version"]) for r in rs.to_pylist()) == want


def test_replace_where_matching_nothing_records_only_inserts(tmp_path):
    path = str(tmp_path / "t")
    tahoe.write_table(path, pa.table({"id": pa.array([1, 2], pa.int64())}),
                      properties={"delta.enableChangeDataFeed": "true"})
    tahoe.write_table(path, pa.table({"id": pa.array([9], pa.int64())}), mode="overwrite", predicate="id = 9")
    rows = tahoe.Table(path).changes(1, 1).to_pylist()
    assert [(r["id"], r["_change_type"]) for r in rows] == [(9, "insert")]

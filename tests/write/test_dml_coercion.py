"""Issue 35: DML prunes files with the same skipping engine as reads, so a comparison of two
numeric types that skipping got wrong was a silent no-op write. Tables one row per file (tahoe's
writer, `target_file_rows=1`); expected rows and metrics derived by hand from Spark 4's answers
(`d = 0.3D` compares CAST(d AS DOUBLE) with 0.3: TRUE for the decimal 0.3; `x <= 0.1` casts the
decimal literal to DOUBLE: TRUE for the double 0.1). Both failed on main (numDeletedRows 0,
nothing updated). The Spark wing is held to the same in tests/spark/test_dml_coercion.py."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa

import tahoe


def decimal_table(path: str) -> None:
    tahoe.write_table(path, pa.table({"id": pa.array([1, 2], pa.int64()),
                                      "d": pa.array([Decimal("0.3"), Decimal("5")], pa.decimal128(38, 18))}),
                      target_file_rows=1)


def double_table(path: str) -> None:
    tahoe.write_table(path, pa.table({"id": pa.array([1, 2], pa.int64()), "x": [0.1, 7.0]}), target_file_rows=1)


def test_delete_decimal38_with_double_literal(tmp_path):
    path = str(tmp_path / "t")
    decimal_table(path)
    assert len(tahoe.Table(path).files()) == 2
    m = tahoe.delete(path, "d = 0.3D")
    assert m["numDeletedRows"] == 1
    assert tahoe.Table(path).to_arrow().column("id").to_pylist() == [2]


def test_update_double_with_decimal_literal(tmp_path):
    path = str(tmp_path / "t")
    double_table(path)
    m = tahoe.update(path, {"id": "id + 100"}, predicate="x <= 0.1")
    assert m["numUpdatedRows"] == 1
    assert sorted(tahoe.Table(path).to_arrow().column("id").to_pylist()) == [2, 101]


def test_delete_float32_with_double_literal(tmp_path):
    """The float 0.1f (0.10000000149011612) is > 0.1D: its stats, read as a double 0.1, dropped it."""
    path = str(tmp_path / "t")
    tahoe.write_table(path, pa.table({"id": pa.array([1, 2], pa.int64()),
                                      "f": pa.array([0.1, 0.05], pa.float32())}), target_file_rows=1)
    assert tahoe.delete(path, "f > 0.1D")["numDeletedRows"] == 1
    assert tahoe.Table(path).to_arrow().column("id").to_pylist() == [2]

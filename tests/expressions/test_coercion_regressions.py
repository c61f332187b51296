"""Issue 35, "Data skipping and the Spark-free row filter": each repro as a test. Tables ONE ROW PER
FILE (so a file dropped by skipping is a row lost), written by tahoe — and by delta-rs where its
stats are the point. The expected rows are Spark 4's answers to the same predicates over the
same rows (checked on plain Spark over a parquet copy; the reasoning is in each test), for both
`Table.to_arrow(filter=)` (skipping + the row filter) and the Arrow row filter alone (`matches`
over every row, no skipping), and the file holding each expected row must be kept by
`Table.files(filter=)`. Every one of these failed on main before the coercion rule
(`tahoe.expressions.coercion`)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tahoe
from tahoe.expressions import matches, parse


def _table(tmp_path, name: str, data: pa.Table) -> str:
    path = str(tmp_path / name)
    tahoe.write_table(path, data, target_file_rows=1)
    return path


def check(path: str, predicate: str, want: list[int]) -> None:
    """`predicate` selects exactly the rows `want` (by `id`), through skipping and the row filter,
    and through the row filter alone; every file holding one of them is kept."""
    t = tahoe.Table(path)
    got = sorted(t.to_arrow(filter=predicate).column("id").to_pylist())
    assert got == sorted(want), f"to_arrow(filter={predicate!r})"
    rows = t.to_arrow()
    direct = sorted(rows.filter(matches(parse(predicate), rows)).column("id").to_pylist())
    assert direct == sorted(want), f"row filter {predicate!r}"
    kept = set(t.files(filter=predicate).column("path").to_pylist())
    for p in t.files().column("path").to_pylist():
        ids = pq.read_table(os.path.join(path, p), columns=["id"]).column("id").to_pylist()
        if set(ids) & set(want):
            assert p in kept, f"files(filter={predicate!r}) dropped the file of rows {ids}"


@pytest.fixture
def decimals(tmp_path):
    """decimal(38,18) rows 0.3 and 5 (and the most negative 38-digit value), top level and nested."""
    vals = [Decimal("0.3"), Decimal("5"), Decimal("-99999999999999999999.999999999999999999")]
    d = pa.array(vals, pa.decimal128(38, 18))
    return _table(tmp_path, "dec", pa.table({"id": [1, 2, 3], "d": d,
                                              "st": pa.StructArray.from_arrays([d], ["d"])}))


def test_decimal38_equals_double_literal(decimals):
    # Spark: CAST(d AS DOUBLE) = 0.3 -> the 0.3 row; `<>` the other two
    check(decimals, "d = 0.3D", [1])
    check(decimals, "d <> 0.3D", [2, 3])


def test_decimal38_mixed_numeric_in_between_nullsafe_nested(decimals):
    # IN widens the whole list to DOUBLE; BETWEEN is two comparisons, each as DOUBLE or DECIMAL
    check(decimals, "d IN (0.3D, 7)", [1])
    check(decimals, "d BETWEEN 0.3D AND 1", [1])
    check(decimals, "d <=> 0.3D", [1])
    check(decimals, "st.d = 0.3D", [1])
    check(decimals, "st.d IN (5L, 0.3F)", [2])   # DOUBLE: 0.3F is 0.30000001192092896, not 0.3


def test_negative_decimal_literal_keeps_all_38_digits(decimals):
    # parsed under Python's 28-digit context it was -100000000000000000000.0000000: no row matched
    check(decimals, "d = -99999999999999999999.999999999999999999", [3])
    check(decimals, "d < -99999999999999999999.999999999999999998BD", [3])


def test_bigint_beyond_2_53_equals_double_literal(tmp_path):
    # Spark casts l to DOUBLE: 2^53 + 1 becomes 2^53
    p = _table(tmp_path, "big", pa.table({"id": [1, 2], "l": pa.array([2 ** 53 + 1, 5], pa.int64())}))
    check(p, "l = 9007199254740992D", [1])
    check(p, "l IN (9007199254740992D, 1)", [1])


def test_double_compared_with_decimal_literal(tmp_path):
    # Spark casts the decimal literal 0.1 to DOUBLE: the 0.1 row matches
    p = _table(tmp_path, "dbl", pa.table({"id": [1, 2], "x": [0.1, 7.0]}))
    check(p, "x = 0.1", [1])
    check(p, "x <= 0.1", [1])
    check(p, "x BETWEEN 0.1 AND 0.1", [1])


def test_float32_stats_read_as_float32(tmp_path):
    # the stats say 0.1 for the float 0.1f = 0.10000000149011612 (read as a double, 0.1 < it)
    p = _table(tmp_path, "flt", pa.table({"id": [1, 2], "f": pa.array([0.1, 2.0], pa.float32())}))
    check(p, "f >= 0.10000000149011612F", [1, 2])
    check(p, "f > 0.1D", [1, 2])
    check(p, "f = 0.1", [])          # DOUBLE: 0.10000000149011612 <> 0.1
    check(p, "f = 0.1F", [1])


def test_float_literals_rounded_to_float32(tmp_path):
    # 0.1F is 0.10000000149011612 > 0.1; CAST('1e+308' AS FLOAT) is Infinity > 1.5e308
    p = _table(tmp_path, "dbl2", pa.table({"id": [1, 2, 3], "x": [0.1, 7.0, 1.5e308]}))
    check(p, "x < 0.1F", [1])
    check(p, "x < CAST('1e+308' AS FLOAT)", [1, 2, 3])
    check(p, "x = CAST('1e+308' AS FLOAT)", [])


def test_nullsafe_equal_nan(tmp_path):
    # Spark: NaN <=> NaN is TRUE (and NaN = NaN); NaN is larger than any other value
    p = _table(tmp_path, "nan", pa.table({"id": [1, 2, 3], "x": [float("nan"), 1.0, None]}))
    check(p, "x <=> CAST('NaN' AS DOUBLE)", [1])
    check(p, "x = CAST('NaN' AS DOUBLE)", [1])
    check(p, "x > CAST('Infinity' AS DOUBLE)", [1])
    check(p, "NOT (x <=> CAST('NaN' AS DOUBLE))", [2, 3])


def test_predicates_that_raised_now_answer(tmp_path):
    # Arrow's checked int -> double cast raised above 2^53; Arrow's decimal promotion raised
    # "precision out of range" for DECIMAL(20,0) vs DECIMAL(38,18) (Spark: DECIMAL(38,18))
    p = _table(tmp_path, "raise", pa.table({"id": [1, 2], "x": [float(2 ** 60), 16777217.0],
                                            "i": pa.array([5, 7], pa.int32())}))
    check(p, "x = 1152921504606846976", [1])
    check(p, "x = 16777217", [2])
    check(p, "CAST(i AS DECIMAL(20,0)) = 5.000000000000000000", [1])
    check(p, "CAST(i AS DECIMAL(20,0)) < 12345678901234567890.123456789012345678", [1, 2])


_DELTARS_WRITE = r"""
import os, sys
import pyarrow as pa
from decimal import Decimal
from deltalake import write_deltalake
vals = [Decimal("12345678901234567890.123456789012345678"), Decimal("0.300000000000000001"), Decimal("5")]
for i, v in enumerate(vals):
    write_deltalake(sys.argv[1], pa.table({"id": pa.array([i + 1], pa.int64()),
                                           "d": pa.array([v], pa.decimal128(38, 18))}), mode="append")
print("ok")
os._exit(0)
"""


def test_deltars_decimal_stats_rounded_through_a_double(tmp_path):
    """delta-rs writes a decimal(38,18) min/max as a JSON double (1.2345678901234567e+19): not a
    bound of the value any more; such a bound is widened (`tahoe.protocol.stats.bound_value`)."""
    path = str(tmp_path / "deltars")
    res = subprocess.run([sys.executable, "-c", _DELTARS_WRITE, path], capture_output=True, text=True, timeout=300)
    assert "ok" in res.stdout, res.stderr[-2000:]
    assert any("1.2345678901234567e" in line for f in sorted(os.listdir(f"{path}/_delta_log"))
               for line in open(f"{path}/_delta_log/{f}"))   # the premise: delta-rs's stats are doubles
    check(path, "d = 12345678901234567890.123456789012345678", [1])
    check(path, "d > 12345678901234567890.123456789012345677", [1])
    check(path, "d = 0.300000000000000001", [2])   # written as 0.3
    check(path, "d > 0.3", [1, 2, 3])
    check(path, "d = 5", [3])
    assert math.isfinite(float(tahoe.Table(path).to_arrow().column("d")[0].as_py()))

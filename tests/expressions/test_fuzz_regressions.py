"""Every mismatch the differential fuzzer (tests/expressions/test_differential_fuzz.py) found,
kept as a named test: the predicate, the rows it met (tables one row per file, written by tahoe),
and Spark 4's answer over a parquet copy of those rows (re-checked by hand on plain Spark).
The seed that found each is in its docstring."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

import tahoe
from tests.expressions.test_coercion_regressions import check


@pytest.fixture
def ints(tmp_path):
    path = str(tmp_path / "ints")
    tahoe.write_table(path, pa.table({
        "id": pa.array([1, 2, 3], pa.int64()),
        "i8": pa.array([5, None, -3], pa.int8()),
        "i": pa.array([2147483647, 16777217, None], pa.int32()),
        "d": pa.array([Decimal("2147483648"), Decimal("16777217"), None], pa.decimal128(18, 6)),
    }), target_file_rows=1)
    return path


def test_integer_vs_decimal_literal_beyond_bigint_is_a_constant(ints):
    """Seed 3: `i8 > -99999999999999999999.999999999999999999` — Spark's analyzer reduces an
    integer compared with a DECIMAL literal beyond BIGINT's range to TRUE / FALSE, NULL rows
    included (DecimalPrecision); `=` is not reduced."""
    check(ints, "i8 > -99999999999999999999.999999999999999999", [1, 2, 3])
    check(ints, "-99999999999999999999.5 <= i8", [1, 2, 3])
    check(ints, "i8 < -9223372036854775809", [])
    check(ints, "i8 <= 9223372036854775808", [1, 2, 3])
    check(ints, "NOT (i8 > -99999999999999999999)", [])
    check(ints, "i8 = -99999999999999999999", [])
    check(ints, "NOT (i8 = -99999999999999999999)", [1, 3])
    check(ints, "i8 BETWEEN -99999999999999999999 AND 99999999999999999999", [1, 2, 3])
    check(ints, "i8 > CAST(-99999999999999999999 AS DECIMAL(20,0))", [1, 3])   # not a literal: NULL stays NULL
    check(ints, "i8 > 2.5", [1])


def test_float_cast_of_an_integer_dropped_before_double(ints):
    """Seed 2: `CAST(i32 AS FLOAT) = d18_6` with i32 2147483647 and d18_6 2147483648 — Spark's
    optimizer (SimplifyCasts) turns CAST(CAST(i AS FLOAT) AS DOUBLE) into CAST(i AS DOUBLE), so the
    FLOAT rounding (to 2147483648) never happens where a comparison casts it on to DOUBLE; BETWEEN
    evaluates its value once, as a FLOAT."""
    check(ints, "CAST(i AS FLOAT) = d", [2])
    check(ints, "CAST(i AS FLOAT) = 2147483647", [1])
    check(ints, "CAST(CAST(i AS FLOAT) AS DOUBLE) = 2147483647", [1])
    check(ints, "CAST(i AS FLOAT) IN (1, 2147483647)", [1])
    check(ints, "CAST(i AS FLOAT) = 2147483648F", [1])          # FLOAT against FLOAT: rounded
    check(ints, "CAST(i AS FLOAT) BETWEEN 2147483647 AND 2147483647", [])
    check(ints, "CAST(i AS FLOAT) = i", [1, 2])
    check(ints, "CAST(i AS FLOAT) = '2147483647'", [1])   # a string meets the FLOAT as DOUBLE


def test_negative_bigdecimal_literal_with_38_digits(tmp_path):
    """Seed 1: `(p_i <= i64) OR (p_d <= -99999999999999999999.999999999999999999BD)` raised
    CAST_INVALID_INPUT: the BD literal's digits were quantized in Python's 28-digit context."""
    path = str(tmp_path / "t")
    tahoe.write_table(path, pa.table({
        "id": pa.array([1, 2, 3], pa.int64()), "i64": pa.array([5, 0, None], pa.int64()),
        "p_i": pa.array([1, 2, 3], pa.int32()), "p_d": pa.array([Decimal("1.5"), None, Decimal("0")], pa.decimal128(10, 2)),
    }), partition_by=["p_i", "p_d"], target_file_rows=1)
    check(path, "(p_i <= i64) OR (p_d <= -99999999999999999999.999999999999999999BD)", [1])
    check(path, "p_d > -99999999999999999999.999999999999999999BD", [1, 3])


def test_in_list_with_string_items_widens_in_order(tmp_path):
    """Seeds 10, 25, 26, 27, 28, 29: an IN list mixing numbers and numeric strings — Spark (ANSI) folds the
    wider type left to right, a string meeting an integer as BIGINT and any other number as
    DOUBLE: `l IN ('9007199254740992', 2.5)` is DECIMAL(21,1) (exact), `l IN (2.5,
    '9007199254740992')` DOUBLE (2^53 + 1 equals 2^53). Skipping compared item by item, exactly."""
    path = str(tmp_path / "t")
    tahoe.write_table(path, pa.table({
        "id": pa.array([1, 2, 3], pa.int64()),
        "l": pa.array([2 ** 53 + 1, 5, None], pa.int64()),
        "d": pa.array([Decimal("0.300000000000000001"), Decimal("-1.5"), Decimal("2")], pa.decimal128(38, 18)),
    }), target_file_rows=1)
    check(path, "l IN ('9007199254740992', 2.5)", [])
    check(path, "l IN (2.5, '9007199254740992')", [1])
    check(path, "l IN (4611686018427387904BD, 7S, '9007199254740994', 9007199254740992BD)", [1])
    check(path, "l IN ('5')", [2])
    check(path, "l IN ('1', '9007199254740992', 1F)", [1])          # BIGINT, then DOUBLE with the FLOAT
    check(path, "d IN (0.300000000000000000BD, CAST('-1.5' AS DOUBLE), '-1.5')", [1, 2])
    check(path, "d IN (CAST(9007199254740992 AS DECIMAL(20,0)), '0.0000', -0.3000, 2)", [3])
    check(path, "d IN ('1.005000', 2147483648.000000F, 0.30000000000000001BD, 5.000000, NULL)", [1])
    check(path, "d NOT IN (CAST(4611686018427387904 AS BIGINT), '99.99', CAST(0 AS DECIMAL(38,0)))", [1, 2, 3])


def test_in_list_of_dates_timestamps_and_strings_meets_in_one_type(tmp_path):
    """The Spark-read fuzzer (tests/fixtures/spark_read_fuzz.py), seed 2, America/Los_Angeles:
    `p_dt NOT IN ('2024-03-31 01:30:00', TIMESTAMP '2024-01-02 00:00:00')` over a DATE. Spark casts
    the value and every item to the list's one type — DATE, STRING and TIMESTAMP meet as
    TIMESTAMP — so the date (midnight) is not the string's 01:30 and NOT IN is TRUE; tahoe compared
    item by item (the string as a DATE: equal) and dropped the row and its file. Spark 4.3, by hand:
    `DATE'2024-03-31' IN ('2024-03-31 01:30:00', TIMESTAMP '2024-01-02 00:00:00')` is false (either
    order), `DATE'2024-03-31' IN ('2024-03-31 01:30:00')` true (one string: DATE),
    `DATE'2024-03-31' IN ('2024-03-31', TIMESTAMP '2024-01-02 00:00:00')` true."""
    import datetime as dt

    path = str(tmp_path / "dates")
    tahoe.write_table(path, pa.table({"id": pa.array([1, 2, 3], pa.int64()),
                                      "d": pa.array([dt.date(2024, 3, 31), dt.date(2024, 1, 2), None], pa.date32())}),
                      target_file_rows=1)
    check(path, "d NOT IN ('2024-03-31 01:30:00', TIMESTAMP '2024-01-02 00:00:00')", [1])
    check(path, "d IN ('2024-03-31 01:30:00', TIMESTAMP '2024-01-02 00:00:00')", [2])
    check(path, "d IN (TIMESTAMP '2024-01-02 00:00:00', '2024-03-31 01:30:00')", [2])
    check(path, "d IN ('2024-03-31 01:30:00')", [1])
    check(path, "d IN ('2024-03-31', TIMESTAMP '2024-01-02 00:00:00')", [1, 2])
    check(path, "d IN ('2024-03-31 00:00:00', TIMESTAMP_NTZ '2024-01-02 00:00:00')", [1, 2])
    check(path, "d NOT IN ('2024-03-31 00:00:01', TIMESTAMP_NTZ '2024-01-02 00:00:00')", [1])

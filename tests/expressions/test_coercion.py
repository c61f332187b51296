"""The one type-coercion rule for comparisons (`tahoe.expressions.coercion`), against Spark: the
types Spark 4's analyzer casts both sides of a comparison (and of an IN list) to — read from its
analysed plans, in ANSI mode (the default) and legacy mode — and the value casts (FLOAT
literals rounded once from their exact text, decimals to DOUBLE correctly rounded). The
hand-written table below was read off the same plans (pyspark 4.3); the Spark test re-reads them."""

from __future__ import annotations

import json
import math
from decimal import Decimal

import pyarrow as pa
import pytest

from tahoe.expressions import parse
from tahoe.expressions.coercion import cast_array, comparison_type, in_type, to_float32
from tahoe.protocol.schema import (
    BYTE, DOUBLE, FLOAT, INTEGER, LONG, SHORT, DecimalType, parse_data_type,
)

D = DecimalType
TYPES = {"b": BYTE, "s": SHORT, "i": INTEGER, "l": LONG, "f": FLOAT, "d": DOUBLE, "d38_18": D(38, 18),
         "d20_0": D(20, 0), "d10_2": D(10, 2), "d38_0": D(38, 0), "d5_4": D(5, 4), "d38_37": D(38, 37)}

# (left, right, ANSI result, legacy result): columns of TYPES, or literals ("lit:<SQL>")
PAIRS = [
    ("b", "s", SHORT, SHORT), ("i", "l", LONG, LONG), ("i", "f", DOUBLE, FLOAT), ("l", "f", DOUBLE, FLOAT),
    ("i", "d", DOUBLE, DOUBLE), ("f", "d", DOUBLE, DOUBLE), ("f", "d38_18", DOUBLE, DOUBLE),
    ("d", "d10_2", DOUBLE, DOUBLE), ("b", "d38_18", D(38, 18), D(38, 18)), ("b", "d5_4", D(7, 4), D(7, 4)),
    ("b", "d38_37", D(38, 35), D(38, 35)), ("i", "d5_4", D(14, 4), D(14, 4)), ("i", "d38_37", D(38, 28), D(38, 28)),
    ("l", "d10_2", D(22, 2), D(22, 2)), ("l", "d38_37", D(38, 18), D(38, 18)), ("d38_18", "d38_0", D(38, 0), D(38, 0)),
    ("d38_18", "d38_37", D(38, 18), D(38, 18)), ("d20_0", "d10_2", D(22, 2), D(22, 2)),
    ("d10_2", "d38_37", D(38, 30), D(38, 30)), ("d20_0", "d38_37", D(38, 18), D(38, 18)),
    ("d38_18", "lit:1", D(38, 18), D(38, 18)), ("d38_37", "lit:1", D(38, 37), D(38, 37)),
    ("d38_37", "lit:1L", D(38, 37), D(38, 37)), ("d38_37", "lit:CAST(1 AS BIGINT)", D(38, 18), D(38, 18)),
    ("d38_37", "lit:12345678901234567890", D(38, 18), D(38, 18)), ("d20_0", "lit:1.0", D(21, 1), D(21, 1)),
    ("d38_18", "lit:0.3D", DOUBLE, DOUBLE), ("d38_18", "lit:1.0F", DOUBLE, DOUBLE), ("i", "lit:1.0F", DOUBLE, FLOAT),
    ("f", "lit:1", DOUBLE, FLOAT), ("f", "lit:1.0", DOUBLE, DOUBLE), ("b", "lit:1.5BD", D(4, 1), D(4, 1)),
    ("l", "lit:12345678901234567890", D(20, 0), D(20, 0)), ("f", "lit:12345678901234567890", DOUBLE, DOUBLE),
]


def _side(name: str):
    if name.startswith("lit:"):
        e = parse(name[4:])
        return e.type, (e.value if isinstance(e.value, int) and not e.folded else None)
    return TYPES[name], None


@pytest.mark.parametrize("left,right,ansi,legacy", PAIRS, ids=[f"{a}={b}" for a, b, _, _ in PAIRS])
def test_comparison_types_as_spark_analyses_them(left, right, ansi, legacy):
    (ta, la), (tb, lb) = _side(left), _side(right)
    assert comparison_type(ta, tb, a_literal=la, b_literal=lb) == ansi
    assert comparison_type(ta, tb, ansi=False, a_literal=la, b_literal=lb) == legacy
    assert comparison_type(tb, ta, a_literal=lb, b_literal=la) == ansi   # symmetric


def test_in_list_type_widens_whole_types():
    # Spark: `i IN (1, 2.5)` -> DECIMAL(11,1); `CAST(d AS DECIMAL(38,37)) IN (1)` -> DECIMAL(38,28)
    # (no literal rule in an IN list); `f IN (1, 2)` -> DOUBLE (legacy: FLOAT)
    assert in_type([INTEGER, INTEGER, D(2, 1)]) == D(11, 1)
    assert in_type([D(38, 37), INTEGER]) == D(38, 28)
    assert in_type([FLOAT, INTEGER, INTEGER]) == DOUBLE
    assert in_type([FLOAT, INTEGER, INTEGER], ansi=False) == FLOAT
    assert in_type([D(38, 18), DOUBLE, INTEGER]) == DOUBLE


def test_float_literals_round_once_from_their_text():
    # Spark: 0.1F is 0.10000000149011612; CAST('1e+308' AS FLOAT) is Infinity; the decimal
    # 1 + 2^-24 + 1e-20 rounds up to 1.0000001192092896 (through a double it would tie to 1.0)
    assert parse("0.1F").value == 0.10000000149011612
    assert parse("CAST('1e+308' AS FLOAT)").value == math.inf
    assert parse("CAST(1e308 AS FLOAT)").value == math.inf
    assert parse("1.00000005960464477539062501F").value == 1.0000001192092896
    assert to_float32(Decimal("1.00000005960464477539062501")) == 1.0000001192092896
    assert to_float32("-Infinity") == -math.inf and math.isnan(to_float32("NaN"))


def test_negative_decimal_literal_keeps_every_digit():
    e = parse("-99999999999999999999.999999999999999999")
    assert e.value == Decimal("-99999999999999999999.999999999999999999") and e.type == D(38, 18)
    assert parse("-9223372036854775808L").value == -(1 << 63)


def test_decimal_to_double_is_correctly_rounded():
    # Arrow's own decimal -> double cast is off by an ulp for many 38-digit values; Spark's is not
    vals = [Decimal("0.123456789012345678"), Decimal("12345678901234567890.123456789012345678"),
            Decimal("-0.000000000000000001")]
    got = cast_array(pa.array(vals, pa.decimal128(38, 18)), pa.float64()).to_pylist()
    assert got == [float(v) for v in vals]
    assert cast_array(pa.array([2 ** 53 + 1], pa.int64()), pa.float64()).to_pylist() == [float(2 ** 53)]


@pytest.mark.spark
@pytest.mark.xdist_group("spark")
def test_rules_match_sparks_analyzer(spark):
    """Spark's analysed plan for each pair: the type the comparison's left side ends up as."""
    cols = ", ".join(f"CAST(NULL AS {_sql(t)}) AS {n}" for n, t in TYPES.items())
    spark.sql(f"SELECT {cols}").createOrReplaceTempView("coercion_types")
    prior = spark.conf.get("spark.sql.ansi.enabled")
    try:
        for ansi in ("true", "false"):
            spark.conf.set("spark.sql.ansi.enabled", ansi)
            for left, right, want_ansi, want_legacy in PAIRS:
                a = left[4:] if left.startswith("lit:") else left
                b = right[4:] if right.startswith("lit:") else right
                plan = spark.sql(f"SELECT ({a}) = ({b}) AS r FROM coercion_types")._jdf.queryExecution().analyzed()
                eq = plan.projectList().head().child()
                got = parse_data_type(json.loads(eq.left().dataType().json()))
                assert got == (want_ansi if ansi == "true" else want_legacy), (ansi, left, right)
            plan = spark.sql("SELECT i IN (1, 2.5) AS r FROM coercion_types")._jdf.queryExecution().analyzed()
            assert parse_data_type(json.loads(plan.projectList().head().child().value().dataType().json())) == D(11, 1)
    finally:
        spark.conf.set("spark.sql.ansi.enabled", prior)


def _sql(t) -> str:
    from tahoe.expressions.tree import type_sql

    return type_sql(t)


ARITH_ROWS = pa.table({
    "d38": pa.array([Decimal("12345678901234567890.123456789012345678")], pa.decimal128(38, 18)),
    "s38": pa.array([Decimal("0.123456789012345678")], pa.decimal128(38, 18)),
    "d5": pa.array([Decimal("1.25")], pa.decimal128(5, 2)), "d20": pa.array([Decimal("99999.9999")], pa.decimal128(20, 4)),
    "i": pa.array([7], pa.int32()), "l": pa.array([2 ** 53 + 1], pa.int64()),
})


@pytest.mark.parametrize("sql,value,typ", [
    # Spark 4.3's answers (`SELECT e, typeof(e)` over the same row)
    ("d38 + 1", "12345678901234567891.12345678901234568", D(38, 17)),
    ("s38 * s38", "0.015242", D(38, 6)),
    ("d5 * 1.1", "1.375", D(8, 3)),
    ("i + 0.5", "7.5", D(12, 1)),
    ("d5 - d20", "-99998.7499", D(21, 4)),
    ("d38 - s38", "12345678901234567890.00000000000000000", D(38, 17)),
    ("s38 * 3", "0.3703703670370370", D(38, 16)),
    ("d5 * i", "8.75", D(16, 2)),
    ("d38 + d38", "24691357802469135780.24691357802469136", D(38, 17)),
    ("s38 + 1.5BD", "1.62345678901234568", D(38, 17)),
])
def test_decimal_arithmetic_as_spark_types_it(sql, value, typ):
    from tahoe.expressions import evaluate
    from tahoe.protocol.schema import from_arrow_type

    out = evaluate(parse(sql), ARITH_ROWS)
    assert (out[0].as_py(), from_arrow_type(out.type)) == (Decimal(value), typ)


def test_arithmetic_with_a_double_casts_like_spark():
    from tahoe.errors import ArithmeticException
    from tahoe.expressions import evaluate

    # Spark: CAST(l AS DOUBLE) + 0.1 (Arrow's checked cast refused 2^53 + 1); d38 * d38 overflows
    assert evaluate(parse("l + 0.1D"), ARITH_ROWS).to_pylist() == [9007199254740992.0]
    with pytest.raises(ArithmeticException, match="NUMERIC_VALUE_OUT_OF_RANGE"):
        evaluate(parse("d38 * d38"), ARITH_ROWS)

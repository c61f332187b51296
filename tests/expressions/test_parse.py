"""Parsing Spark SQL into the expression tree: node shapes, Spark's literal typing, SQL rendering
that parses back to the same tree, column references, and clear errors."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from tahoe.errors import AnalysisException, DeltaError, ParseException
from tahoe.expressions import (
    And, Arithmetic, Between, Case, Cast, Column, Comparison, Func, In, IsNull, Like, Literal, Negate, Not, Opaque,
    Or, parse,
)
from tahoe.protocol.schema import (
    BINARY, BOOLEAN, BYTE, DATE, DOUBLE, FLOAT, INTEGER, LONG, SHORT, STRING, TIMESTAMP, VOID, DecimalType,
)

c = lambda *parts: Column(parts)  # noqa: E731


@pytest.mark.parametrize("sql, tree", [
    ("x = 1", Comparison("=", c("x"), Literal(1, INTEGER))),
    ("x <> 1 OR NOT y", Or(Comparison("<>", c("x"), Literal(1, INTEGER)), Not(c("y")))),
    ("a AND b AND c", And(And(c("a"), c("b")), c("c"))),
    ("t.id = s.id", Comparison("=", c("t", "id"), c("s", "id"))),
    ("st.x.y >= -2", Comparison(">=", c("st", "x", "y"), Literal(-2, INTEGER))),
    ("`a.b` IS NOT NULL", Not(IsNull(c("a.b")))),
    ("x IS NULL", IsNull(c("x"))),
    ("x IN (1, 2, NULL)", In(c("x"), (Literal(1, INTEGER), Literal(2, INTEGER), Literal(None, VOID)))),
    ("x NOT IN (1)", Not(In(c("x"), (Literal(1, INTEGER),)))),
    ("x BETWEEN 1 AND 2", Between(c("x"), Literal(1, INTEGER), Literal(2, INTEGER))),
    ("x NOT BETWEEN 1 AND 2", Not(Between(c("x"), Literal(1, INTEGER), Literal(2, INTEGER)))),
    ("s LIKE 'a%'", Like(c("s"), Literal("a%", STRING))),
    ("s NOT ILIKE 'A%'", Not(Like(c("s"), Literal("A%", STRING), None, True))),
    ("s LIKE 'a!%' ESCAPE '!'", Like(c("s"), Literal("a!%", STRING), "!")),
    ("s RLIKE '^a'", Func("rlike", (c("s"), Literal("^a", STRING)))),
    ("x + 1 * y", Arithmetic("+", c("x"), Arithmetic("*", Literal(1, INTEGER), c("y")))),
    ("x div 2 - x % 3", Arithmetic("-", Arithmetic("div", c("x"), Literal(2, INTEGER)),
                                   Arithmetic("%", c("x"), Literal(3, INTEGER)))),
    ("-x", Negate(c("x"))),
    ("x <=> NULL", Comparison("<=>", c("x"), Literal(None, VOID))),
    ("b IS TRUE", Comparison("<=>", c("b"), Literal(True, BOOLEAN))),
    ("CASE WHEN x > 0 THEN 'p' ELSE 'n' END",
     Case(None, ((Comparison(">", c("x"), Literal(0, INTEGER)), Literal("p", STRING)),), Literal("n", STRING))),
    ("CASE x WHEN 1 THEN 'a' END", Case(c("x"), ((Literal(1, INTEGER), Literal("a", STRING)),), None)),
    ("CAST(x AS DECIMAL(10,2))", Cast(c("x"), DecimalType(10, 2))),
    ("TRY_CAST(s AS INT)", Cast(c("s"), INTEGER, safe=True)),
    ("coalesce(a, b, 0)", Func("coalesce", (c("a"), c("b"), Literal(0, INTEGER)))),
    ("nvl(a, b)", Func("coalesce", (c("a"), c("b")))),
    ("if(a, 1, 2)", Func("if", (c("a"), Literal(1, INTEGER), Literal(2, INTEGER)))),
    ("upper(s) || lower(s)", Func("concat", (Func("upper", (c("s"),)), Func("lower", (c("s"),))))),
    ("substr(s, 2, 3)", Func("substring", (c("s"), Literal(2, INTEGER), Literal(3, INTEGER)))),
    ("year(d) = 2024", Comparison("=", Func("year", (c("d"),)), Literal(2024, INTEGER))),
    ("isnull(x)", IsNull(c("x"))),
    ("my_udf(x)", Func("my_udf", (c("x"),))),
])
def test_tree_shapes(sql, tree):
    assert parse(sql) == tree


@pytest.mark.parametrize("sql, value, type_", [
    ("5", 5, INTEGER), ("3000000000", 3000000000, LONG), ("5L", 5, LONG), ("5S", 5, SHORT), ("5Y", 5, BYTE),
    ("-5L", -5, LONG), ("1.50", Decimal("1.50"), DecimalType(3, 2)), ("1.5D", 1.5, DOUBLE), ("1e3", 1000.0, DOUBLE),
    ("1.5F", 1.5, FLOAT), ("1.5BD", Decimal("1.5"), DecimalType(2, 1)), ("'it\\'s'", "it's", STRING),
    ("TRUE", True, BOOLEAN), ("NULL", None, VOID), ("X'0A'", b"\n", BINARY),
    ("DATE '2024-02-29'", dt.date(2024, 2, 29), DATE), ("CAST('7' AS BIGINT)", 7, LONG),
])
def test_literals_typed_as_spark_types_them(sql, value, type_):
    assert parse(sql) == Literal(value, type_)


def test_timestamp_literal_waits_for_the_session_time_zone():
    assert parse("TIMESTAMP '2024-01-01 10:00:00'") == Cast(Literal("2024-01-01 10:00:00", STRING), TIMESTAMP)


def test_opaque_keeps_spark_sql_and_columns_but_not_lambda_parameters():
    e = parse("exists(arr, x -> x > lim) AND m['k'] = 1")
    assert isinstance(e, And) and isinstance(e.left, Opaque)
    assert [col.parts for col in e.columns()] == [("arr",), ("lim",), ("m",)]
    assert "->" in e.left.sql


@pytest.mark.parametrize("sql", [
    "x = 1", "t.id = s.id AND s.v IS NOT NULL", "`we``ird name` > 'a\\'b\\\\c'", "x IN (1, 2L, 3.50, 'z')",
    "NOT (x BETWEEN -1 AND 1.5D)", "CASE WHEN x > 0 THEN x * 2 WHEN x IS NULL THEN 0 ELSE -x END",
    "CASE x WHEN 1 THEN 'a' ELSE 'b' END", "CAST(s AS DATE) >= DATE '2024-01-01'", "TRY_CAST(s AS DECIMAL(5,1))",
    "s LIKE 'a!_%' ESCAPE '!'", "s ILIKE 'A%'", "x div 2 + x % 3 - (x / 4)", "coalesce(a, b) <=> NULL",
    "substring(s, -2) = concat(s, '!')", "TIMESTAMP '2024-01-01 00:00:00' < ts", "5Y + 5S + 5L + 1.5F + X'FF'",
    "array_contains(arr, 3) OR exists(arr, x -> x > lim)",
])
def test_rendered_sql_parses_back_to_the_same_tree(sql):
    e = parse(sql)
    assert parse(e.to_sql()) == e


def test_parse_errors_name_the_expression():
    for bad in ["x >", "garbage ((", "(((", "", "   ", "SELECT 1", "x = 1; y = 2"]:
        with pytest.raises(ParseException) as err:
            parse(bad)
        assert isinstance(err.value, AnalysisException) and isinstance(err.value, DeltaError)
        if bad.strip():
            assert repr(bad) in str(err.value) or "empty" in str(err.value)


def test_columns_in_order_each_once():
    assert [x.name for x in parse("b > a AND a < c.d OR b IS NULL").columns()] == ["b", "a", "c.d"]


def test_unqualify_keeps_one_side_of_a_merge_condition():
    from tahoe.expressions import conjuncts, unqualify

    cond = parse("t.day = 'mon' AND t.id = s.id AND CASE WHEN T.v > 0 THEN s.w END IS NULL")
    target_only = [c for c in conjuncts(cond) if all(x.parts[0].lower() == "t" for x in c.columns())]
    assert [unqualify(c, "t") for c in target_only] == [parse("day = 'mon'")]
    assert unqualify(cond, "t") == parse("day = 'mon' AND id = s.id AND CASE WHEN v > 0 THEN s.w END IS NULL")

"""Translation to Spark, with Spark as the oracle: the translated Column, and the rendered SQL,
give what Spark's own SQL text gives — and so does tahoe's Arrow evaluation of the same
expressions over the same rows (one Spark job computes every expression three ways)."""

from __future__ import annotations

import math

import pytest

from tahoe.expressions import Scope, evaluate, parse
from tahoe.spark.columns import to_spark_column

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

DDL = ("id BIGINT, x INT, s STRING, f DOUBLE, d DATE, ts TIMESTAMP, m DECIMAL(5,2), b BOOLEAN, "
       "st STRUCT<k: INT>")
SQL_ROWS = [
    "(0, 1, 'ab', 1.5, DATE '2024-01-31', TIMESTAMP '2024-01-01 23:30:00', 1.25BD, TRUE, named_struct('k', 1))",
    "(1, NULL, 'Cd', CAST('NaN' AS DOUBLE), NULL, NULL, -3.10BD, NULL, NULL)",
    "(2, 5, NULL, NULL, DATE '2023-12-01', TIMESTAMP '2024-06-01 00:00:01', NULL, FALSE, named_struct('k', NULL))",
    "(3, -7, ' e ', -0.0D, DATE '2024-02-29', NULL, 0.00BD, TRUE, named_struct('k', 4))",
    "(4, 3, 'b', 3.0D, DATE '2024-01-01', TIMESTAMP '2024-01-01 00:00:00', 2.50BD, FALSE, named_struct('k', 2))",
]

PREDICATES = [
    "x > 2", "x > 2 AND s LIKE 'a%'", "x IN (1, NULL)", "x NOT IN (1, 3)", "s <=> NULL", "x <=> 5",
    "f > 100", "f = CAST('NaN' AS DOUBLE)", "f = 0", "d >= '2024-01-01'", "ts < '2024-01-02 00:00:00'",
    "m > 1", "m = 1.25", "x BETWEEN 1 AND 3", "NOT (x = 1 OR s IS NULL)", "b", "b IS NOT TRUE",
    "st.k > 1", "s ILIKE 'C%'", "s RLIKE 'b$'", "upper(s) = 'AB'", "length(s) > 1", "coalesce(x, 0) = 0",
    "year(d) = 2024", "CASE WHEN x > 1 THEN TRUE ELSE b END", "isnan(f)", "d < ts", "s LIKE '!_%' ESCAPE '!'",
    "x IN (id, 3)", "NOT b OR x IS NULL",
]
SCALARS = [
    "x + 1", "x / 2", "x div 2", "x % 2", "-x", "m * 2", "m / 3", "x / 2.0", "d + 1", "5L + x", "1.5D * x",
    "CASE x WHEN 1 THEN 'one' WHEN 5 THEN 'five' ELSE 'other' END", "if(b, x, 0)", "concat(s, '-', x)",
    "concat_ws('/', s, x)", "substring(s, 2, 1)", "substring(s, -1)", "trim(s)", "round(m, 1)", "floor(m)",
    "CAST(x AS STRING)", "CAST(f AS STRING)", "CAST(m AS INT)", "CAST(ts AS STRING)", "CAST(d AS TIMESTAMP)",
    "hour(ts)", "greatest(x, 2)", "least(x, id)", "nullif(x, 1)", "TRY_CAST(s AS INT)", "pmod(x - 3, 2)",
    "abs(x)", "st.k * 10", "ceil(f * 0)", "nanvl(f, 0.0D)",
]


def _norm(v):
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    return v


@pytest.fixture(scope="module")
def frame(spark):
    columns = [c.split(" ", 1) for c in DDL.split(", ")]
    df = spark.sql(f"SELECT * FROM VALUES {', '.join(SQL_ROWS)} AS t({', '.join(n for n, _ in columns)})")
    return df.selectExpr(*[f"CAST({n} AS {t}) AS {n}" for n, t in columns]).orderBy("id")


def test_translations_agree_with_spark_sql_and_tahoe_agrees_with_spark(spark, frame):
    from pyspark.sql import functions as F

    from tahoe.spark.session import session_time_zone

    exprs = PREDICATES + SCALARS
    cols = []
    for i, sql in enumerate(exprs):
        e = parse(sql)
        cols += [F.expr(sql).alias(f"spark_{i}"), to_spark_column(e).alias(f"column_{i}"),
                 F.expr(e.to_sql()).alias(f"rendered_{i}")]
    out = frame.select("id", *cols).orderBy("id").toArrow()
    rows = frame.toArrow()
    scope = Scope.of(rows)
    tz = session_time_zone(spark)
    for i, sql in enumerate(exprs):
        want = [_norm(v) for v in out.column(f"spark_{i}").to_pylist()]
        assert [_norm(v) for v in out.column(f"column_{i}").to_pylist()] == want, sql
        assert [_norm(v) for v in out.column(f"rendered_{i}").to_pylist()] == want, sql
        got = [_norm(v) for v in evaluate(parse(sql), scope, time_zone=tz).to_pylist()]
        assert got == want, sql


def test_filter_rows_are_spark_filter_rows(frame):
    for sql in ["x > 2 AND s IS NOT NULL", "m BETWEEN 0 AND 2 OR b IS NULL", "NOT (f > 1) AND d < '2024-02-01'"]:
        want = sorted(r.id for r in frame.filter(sql).collect())
        assert sorted(r.id for r in frame.filter(to_spark_column(parse(sql))).collect()) == want, sql


def test_qualified_names_resolve_against_dataframe_aliases(spark):
    target = spark.createDataFrame([(1, 10), (2, 20), (3, 30)], "id INT, v INT").alias("t")
    source = spark.createDataFrame([(1, 11), (3, 29), (4, 40)], "id INT, v INT").alias("s")
    cond = to_spark_column(parse("t.id = s.id AND s.v > t.v"))
    assert [(r[0], r[1]) for r in target.join(source, cond).select("t.id", "s.v").collect()] == [(1, 11)]

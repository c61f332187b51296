"""File skipping for SQL queries reading one Delta table: `SELECT ... FROM <delta table> [alias]
WHERE cond` reads only the files whose partition values and stats may hold rows matching the
conjuncts of `cond` on the table's columns; Spark applies the whole condition to the rows.

Oracle: the table is 20 files of 5,000 consecutive ids each (file k holds ids 5000k..5000k+4999,
g = id % 3), written by the Spark-free writer with stats; the files a query must read and the rows
it must return are derived by hand from that layout."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

FILES = 20
PER_FILE = 5000


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    from tahoe.write.writer import write_table

    path = str(tmp_path_factory.mktemp("skipping") / "t")
    for k in range(FILES):
        ids = list(range(k * PER_FILE, (k + 1) * PER_FILE))
        write_table(path, pa.table({"id": pa.array(ids, pa.int64()), "g": pa.array([i % 3 for i in ids], pa.int64())}),
                    mode="append")
    return path


def _files_scanned(df) -> list[int]:
    """The number of files of each parquet scan in the executed plan."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    return [int(n) for n in re.findall(r"InMemoryFileIndex\((\d+) paths?\)", plan)]


def _ids(df) -> list[int]:
    return sorted(r["id"] for r in df.collect())


@pytest.mark.parametrize("where, files, ids", [
    ("id < 100", [1], list(range(100))),
    ("t.id BETWEEN 5000 AND 5001", [1], [5000, 5001]),
    ("id < 100 OR id >= 99990", [2], list(range(100)) + list(range(99990, 100000))),
    ("id >= 99990 AND g = 1", [1], [i for i in range(99990, 100000) if i % 3 == 1]),
    ("id < 10 AND rand() < 2", [1], list(range(10))),               # a conjunct tahoe cannot judge
    ("CASE WHEN id < 100 THEN true ELSE false END", [FILES], list(range(100))),   # not used to skip
    ("id < 10 OR g = 5", [1], list(range(10))),                     # g = 5: no file (g's max is 2)
])
def test_where_of_a_single_table_query_skips_files(sql_spark, table, where, files, ids):
    df = sql_spark.sql(f"SELECT * FROM delta.`{table}` AS t WHERE {where}")
    assert _files_scanned(df) == files
    assert _ids(df) == ids


def test_skipping_keeps_the_query_around_it(sql_spark, table):
    """GROUP BY / ORDER BY after the condition, a subquery's own WHERE, time travel."""
    df = sql_spark.sql(f"SELECT g, count(*) AS n FROM delta.`{table}` WHERE id < 300 GROUP BY g ORDER BY g")
    assert _files_scanned(df) == [1]
    assert [(r["g"], r["n"]) for r in df.collect()] == [(0, 100), (1, 100), (2, 100)]
    df = sql_spark.sql(f"SELECT * FROM (SELECT * FROM delta.`{table}` WHERE id >= 99000) x WHERE x.id > 5")
    assert _files_scanned(df) == [1]
    assert _ids(df) == list(range(99000, 100000))
    df = sql_spark.sql(f"SELECT * FROM delta.`{table}` VERSION AS OF 1 WHERE id >= 5000")
    assert _files_scanned(df) == [1]                # version 1: files 0 and 1
    assert _ids(df) == list(range(5000, 10000))


def test_no_skipping_where_the_condition_is_not_the_tables_alone(sql_spark, table):
    """A join: the WHERE may read both sides (left to Spark); a qualifier that is also a column
    name of the table (`g.id` could be the field id of a column g): its conjuncts are left out."""
    df = sql_spark.sql(f"SELECT t.id FROM delta.`{table}` t JOIN delta.`{table}` u ON t.id = u.id WHERE t.id < 100")
    assert _files_scanned(df) == [FILES, FILES]
    assert _ids(df) == list(range(100))
    df = sql_spark.sql(f"SELECT * FROM delta.`{table}` AS g WHERE g.id < 100")
    assert _files_scanned(df) == [FILES]
    assert _ids(df) == list(range(100))


def test_catalog_table_query_skips_files(sql_spark, db, table):
    sql_spark.sql(f"CREATE TABLE events USING DELTA LOCATION '{table}'")
    df = sql_spark.sql("SELECT id FROM events e WHERE e.id >= 10000 AND id < 10003")
    assert _files_scanned(df) == [1]
    assert _ids(df) == [10000, 10001, 10002]


def test_a_qualifier_that_is_also_a_struct_column_is_not_read_as_the_field(sql_spark, tmp_path):
    """`FROM x AS t WHERE t.id < 100` on a table with a struct column t whose field id is 10**6 in
    every row: Spark reads `t.id` as the column id of the alias t — 100 rows; skipping by the
    field t.id would drop every file."""
    from tahoe.write.writer import write_table

    path = str(tmp_path / "x")
    for k in range(4):
        ids = list(range(k * 1000, (k + 1) * 1000))
        write_table(path, pa.table({"id": pa.array(ids, pa.int64()),
                                    "t": pa.array([{"id": 10**6}] * len(ids), pa.struct([("id", pa.int64())]))}),
                    mode="append")
    df = sql_spark.sql(f"SELECT id FROM delta.`{path}` AS t WHERE t.id < 100")
    assert _files_scanned(df) == [4]
    assert _ids(df) == list(range(100))

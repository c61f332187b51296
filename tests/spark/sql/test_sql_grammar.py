"""The grammar of Delta's SQL statements (tahoe.spark.sql.parser, tahoe.spark.sql.statements), without Spark: each statement
of delta-spark's grammar (DeltaSqlBase.g4) and the Spark statements tahoe runs on Delta tables,
parsed into the parts written by hand below; statements that are not Delta's give None; broken
ones a ParseException at the token Spark would point at."""

from __future__ import annotations

import pytest

from tahoe.errors import ParseException
from tahoe.spark.sql import statements as g
from tahoe.spark.sql.parser import parse_statement


def name(*parts):
    return g.TableName(parts=parts, text=".".join(parts))


T = name("t")


CASES = [
    ("VACUUM '/data/events' RETAIN 100 HOURS DRY RUN",
     g.Vacuum(g.TableName(path="/data/events", text="'/data/events'"), 100.0, True, False)),
    ("VACUUM delta.`/data/events/` LITE",
     g.Vacuum(g.TableName(path="/data/events/", text="delta.`/data/events/`", format="delta"), None, False, True)),
    ("VACUUM eventsTable", g.Vacuum(name("eventsTable"))),
    ("DESCRIBE HISTORY db.t LIMIT 1", g.DescribeHistory(name("db", "t"), 1)),
    ("DESC DETAIL '/p'", g.DescribeDetail(g.TableName(path="/p", text="'/p'"))),
    ("DESCRIBE TABLE EXTENDED t", g.DescribeTable(T, True, None)),
    ("DESCRIBE t id", g.DescribeTable(T, False, "id")),
    ("GENERATE symlink_format_manifest FOR TABLE t", g.Generate("symlink_format_manifest", T)),
    ("CONVERT TO DELTA parquet.`/p` NO STATISTICS PARTITIONED BY (day DATE, c STRING)",
     g.Convert(g.TableName(path="/p", text="parquet.`/p`", format="parquet"), False, "day DATE, c STRING")),
    ("RESTORE TABLE t TO VERSION AS OF 3", g.Restore(T, g.Temporal(version=3))),
    ("RESTORE t TIMESTAMP AS OF '2024-01-01'", g.Restore(T, g.Temporal(timestamp="2024-01-01"))),
    ("RESTORE t TO TIMESTAMP AS OF date_sub(current_date(), 1)",
     g.Restore(T, g.Temporal(timestamp_expr="date_sub(current_date(), 1)"))),
    ("OPTIMIZE t WHERE date >= '2024-01-01' ZORDER BY (a, b)", g.Optimize(T, "date >= '2024-01-01'", ("a", "b"))),
    ("OPTIMIZE t ZORDER BY a, b.c", g.Optimize(T, None, ("a", "b.c"))),
    ("REORG TABLE t WHERE p = 1 APPLY (PURGE)", g.Reorg(T, "p = 1")),
    ("CREATE TABLE t2 SHALLOW CLONE t VERSION AS OF 2 TBLPROPERTIES ('a' = 'b') LOCATION '/x'",
     g.Clone(name("t2"), T, True, "error", g.Temporal(version=2), (("a", "b"),), "/x")),
    ("CREATE OR REPLACE TABLE t2 DEEP CLONE t", g.Clone(name("t2"), T, False, "overwrite")),
    ("ALTER TABLE t ADD CONSTRAINT c CHECK (a > 0 AND b IS NOT NULL)",
     g.AlterTable(T, ("add_constraint", "c", "a > 0 AND b IS NOT NULL"))),
    ("ALTER TABLE t DROP CONSTRAINT IF EXISTS c", g.AlterTable(T, ("drop_constraint", "c", True))),
    ("ALTER TABLE t DROP FEATURE deletionVectors TRUNCATE HISTORY",
     g.AlterTable(T, ("drop_feature", "deletionVectors", True))),
    ("ALTER TABLE t CLUSTER BY NONE", g.AlterTable(T, ("cluster_by", None))),
    ("ALTER TABLE t CLUSTER BY (a, b)", g.AlterTable(T, ("cluster_by", ("a", "b")))),
    ("ALTER TABLE t RENAME COLUMN a TO b", g.AlterTable(T, ("rename_column", "a", "b"))),
    ("ALTER TABLE t DROP COLUMNS (a, b)", g.AlterTable(T, ("drop_columns", ("a", "b"), False))),
    ("ALTER TABLE t ALTER COLUMN a TYPE BIGINT", g.AlterTable(T, ("alter_column", "a", {"type": "BIGINT"}))),
    ("ALTER TABLE t CHANGE COLUMN a DROP NOT NULL", g.AlterTable(T, ("alter_column", "a", {"nullable": True}))),
    ("ALTER TABLE t SET TBLPROPERTIES ('a' = 'b', delta.appendOnly = true, 'n' = 1)",
     g.AlterTable(T, ("set_properties", (("a", "b"), ("delta.appendOnly", "true"), ("n", "1"))))),
    ("ALTER TABLE t UNSET TBLPROPERTIES IF EXISTS ('a', c.d)",
     g.AlterTable(T, ("unset_properties", ("a", "c.d"), True))),
    ("UPDATE t SET a = a + 1, b = 'x' WHERE c = 'y'", g.Update(T, None, (("a", "a + 1"), ("b", "'x'")), "c = 'y'")),
    ("UPDATE t u SET u.a = 1", g.Update(T, "u", (("u.a", "1"),), None)),
    ("DELETE FROM t WHERE id IN (SELECT id FROM s)", g.Delete(T, None, "id IN (SELECT id FROM s)")),
    ("DELETE FROM delta.`/p` AS x", g.Delete(g.TableName(path="/p", text="delta.`/p`", format="delta"), "x", None)),
    ("INSERT INTO t VALUES (1, 'a'), (2, 'b')", g.Insert(T, False, "VALUES (1, 'a'), (2, 'b')")),
    ("INSERT OVERWRITE TABLE t REPLACE WHERE d >= '2024' SELECT * FROM s",
     g.Insert(T, True, "SELECT * FROM s", replace_where="d >= '2024'")),
    ("INSERT INTO t (a, b) SELECT 1, 2", g.Insert(T, False, "SELECT 1, 2", columns=("a", "b"))),
    ("INSERT INTO t BY NAME SELECT 1 AS b", g.Insert(T, False, "SELECT 1 AS b", by_name=True)),
    ("INSERT OVERWRITE t PARTITION (d = '2024-01-01') SELECT 1",
     g.Insert(T, True, "SELECT 1", partition_spec=(("d", "2024-01-01"),))),
    ("DROP TABLE IF EXISTS db.t", g.DropTable(name("db", "t"), True)),
    ("TRUNCATE TABLE t", g.Truncate(T)),
    ("SHOW TBLPROPERTIES t ('delta.appendOnly')", g.ShowTblProperties(T, "delta.appendOnly")),
]


@pytest.mark.parametrize("sql,expected", CASES, ids=[c[0][:40] for c in CASES])
def test_statements_parse_into_their_parts(sql, expected):
    assert parse_statement(sql) == expected


def test_create_table_with_every_column_kind():
    s = parse_statement(
        "CREATE OR REPLACE TABLE db.t (id BIGINT GENERATED ALWAYS AS IDENTITY (START WITH 10 INCREMENT BY -2) "
        "NOT NULL COMMENT 'the id', d DATE GENERATED ALWAYS AS (CAST(ts AS DATE)), ts TIMESTAMP, "
        "m MAP<STRING, ARRAY<DECIMAL(10,2)>>, v STRING DEFAULT 'x', "
        "k BIGINT GENERATED BY DEFAULT AS IDENTITY) USING delta PARTITIONED BY (d) LOCATION '/tmp/x' "
        "COMMENT 'c' TBLPROPERTIES ('delta.enableChangeDataFeed' = true, delta.appendOnly=false);")
    assert s == g.CreateTable(
        table=name("db", "t"), mode="overwrite", provider="delta",
        columns=(g.ColumnDef("id", "BIGINT", False, "the id", None, (10, -2, False)),
                 g.ColumnDef("d", "DATE", True, None, "CAST(ts AS DATE)"),
                 g.ColumnDef("ts", "TIMESTAMP"),
                 g.ColumnDef("m", "MAP<STRING, ARRAY<DECIMAL(10,2)>>"),
                 g.ColumnDef("v", "STRING", default_sql="'x'"),
                 g.ColumnDef("k", "BIGINT", identity=(1, 1, True))),
        partition_by=("d",), location="/tmp/x", comment="c",
        properties=(("delta.enableChangeDataFeed", "true"), ("delta.appendOnly", "false")))


def test_create_table_as_select_and_cluster_by():
    s = parse_statement("CREATE TABLE IF NOT EXISTS t USING DELTA CLUSTER BY (a, b) AS WITH x AS (SELECT 1) SELECT * FROM x")
    assert (s.mode, s.provider, s.cluster_by, s.query) == ("ignore", "delta", ("a", "b"),
                                                          "WITH x AS (SELECT 1) SELECT * FROM x")
    s = parse_statement("REPLACE TABLE t USING delta AS SELECT 1 a")
    assert (s.mode, s.query) == ("replace", "SELECT 1 a")


def test_merge_with_every_clause_kind():
    s = parse_statement(
        "MERGE INTO t AS tgt USING (SELECT * FROM s WHERE x > 1) src ON tgt.id = src.id "
        "WHEN MATCHED AND src.op = 'd' THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET tgt.v = src.v, w = src.w + 1 "
        "WHEN NOT MATCHED AND src.x IS NOT NULL THEN INSERT (id, v) VALUES (src.id, concat(src.v, ',')) "
        "WHEN NOT MATCHED BY SOURCE AND tgt.v < 0 THEN UPDATE SET v = 0 "
        "WHEN NOT MATCHED BY SOURCE THEN DELETE")
    assert s == g.Merge(
        target=T, target_alias="tgt", source_table=None, source_query="SELECT * FROM s WHERE x > 1",
        source_temporal=None, source_alias="src", condition="tgt.id = src.id",
        clauses=(g.MergeClause("matched", "delete", "src.op = 'd'", None),
                 g.MergeClause("matched", "update", None, (("tgt.v", "src.v"), ("w", "src.w + 1"))),
                 g.MergeClause("notMatched", "insert", "src.x IS NOT NULL",
                               (("id", "src.id"), ("v", "concat(src.v, ',')"))),
                 g.MergeClause("notMatchedBySource", "update", "tgt.v < 0", (("v", "0"),)),
                 g.MergeClause("notMatchedBySource", "delete", None, None)))
    s = parse_statement("MERGE WITH SCHEMA EVOLUTION INTO delta.`/p` t USING s VERSION AS OF 2 ON t.id = s.id "
                        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED BY TARGET THEN INSERT *")
    assert s.schema_evolution and s.source_table == name("s") and s.source_temporal == g.Temporal(version=2)
    assert [(c.kind, c.action, c.assignments) for c in s.clauses] == [("matched", "update", None),
                                                                     ("notMatched", "insert", None)]


@pytest.mark.parametrize("sql", ["SELECT * FROM t VERSION AS OF 1", "SHOW TABLES", "CREATE TABLE t LIKE s",
                                 "ALTER TABLE t RENAME TO u", "CREATE TEMP VIEW v AS SELECT 1", "WITH x AS (SELECT 1) "
                                 "SELECT * FROM x", "DESCRIBE FUNCTION abs", "INSERT OVERWRITE DIRECTORY '/x' SELECT 1"])
def test_other_statements_are_sparks(sql):
    assert parse_statement(sql) is None


@pytest.mark.parametrize("sql,pos,near,delta_only", [
    ("VACUUM t RETAIN x HOURS", 16, "'x'", True),
    ("OPTIMIZE", 8, "end of input", True),
    ("RESTORE t TO VERSIONN AS OF 1", 13, "'VERSIONN'", True),
    ("MERGE INTO t USING s ON a = b", 29, None, False),
    ("CREATE TABLE t (a INT) USING delta BLAH", 35, "'BLAH'", False),
    ("UPDATE t SET a", 14, "end of input", False),
])
def test_broken_statements_point_at_the_token(sql, pos, near, delta_only):
    with pytest.raises(ParseException) as e:
        parse_statement(sql)
    text = str(e.value)
    assert text.startswith("[PARSE_SYNTAX_ERROR]") and f"(line 1, pos {pos})" in text
    assert text.endswith(sql + "\n" + "-" * pos + "^^^")
    if near is not None:
        assert f"at or near {near}" in text
    assert e.value.delta_only is delta_only
    assert e.value.target == (T if sql.split()[0] not in ("OPTIMIZE",) else None)

"""ALTER TABLE ... RENAME COLUMN of a partition column under column mapping, as delta-spark
allows it on a table holding data: the rows stay reachable under the new name, WHERE on it
included (expected rows by hand; the log's partition values keep their physical keys)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


def test_rename_a_partition_column_in_sql(sql_spark, db, tmp_path):
    from tahoe import Table

    t = f"{db}.events"
    sql_spark.sql(f"CREATE TABLE {t} (id BIGINT, day STRING) USING delta PARTITIONED BY (day) "
                  f"TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    sql_spark.sql(f"INSERT INTO {t} VALUES (1, 'mon'), (2, 'tue'), (3, 'mon')")
    sql_spark.sql(f"ALTER TABLE {t} RENAME COLUMN day TO weekday")
    assert sorted(tuple(r) for r in sql_spark.sql(f"SELECT id, weekday FROM {t} WHERE weekday = 'mon'").collect()) == \
        [(1, "mon"), (3, "mon")]
    sql_spark.sql(f"INSERT INTO {t} VALUES (4, 'wed')")
    assert sorted(tuple(r) for r in sql_spark.table(t).collect()) == [(1, "mon"), (2, "tue"), (3, "mon"), (4, "wed")]
    loc = sql_spark.sql(f"DESCRIBE DETAIL {t}").collect()[0]["location"]
    assert Table(loc).partition_columns == ["weekday"]

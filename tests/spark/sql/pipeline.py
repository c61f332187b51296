"""A pipeline written only in SQL (tahoe's Delta SQL layer), shared by the local and the Spark
Connect test: create, insert, merge, update, delete, optimize, history, time travel, change feed,
vacuum. `run(spark)` returns what each step gave, as plain Python values; the expected values
below are derived by hand from the statements."""

from __future__ import annotations

import datetime as dt

D1, D2, D3 = dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2024, 1, 3)

SETUP = [
    "CREATE TABLE sales (id BIGINT, item STRING, qty INT, day DATE) USING delta PARTITIONED BY (day) "
    "TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true', 'delta.enableDeletionVectors' = 'true')",
    "INSERT INTO sales VALUES (1, 'apple', 3, DATE'2024-01-01'), (2, 'pear', 5, DATE'2024-01-01'), "
    "(3, 'fig', 1, DATE'2024-01-02'), (4, 'kiwi', 7, DATE'2024-01-02')",
    "CREATE OR REPLACE TEMP VIEW changes AS SELECT * FROM VALUES (2, 'pear', 6, DATE'2024-01-01', 'U'), "
    "(4, 'kiwi', 0, DATE'2024-01-02', 'D'), (5, 'plum', 2, DATE'2024-01-03', 'I') AS c(id, item, qty, day, op)",
]
MERGE = ("MERGE INTO sales AS t USING changes AS c ON t.id = c.id "
         "WHEN MATCHED AND c.op = 'D' THEN DELETE "
         "WHEN MATCHED THEN UPDATE SET qty = c.qty "
         "WHEN NOT MATCHED THEN INSERT (id, item, qty, day) VALUES (c.id, c.item, c.qty, c.day)")
UPDATE = "UPDATE sales SET qty = qty * 10 WHERE item = 'fig'"
DELETE = "DELETE FROM sales WHERE id = 1"
APPEND = "INSERT INTO sales SELECT 6, 'lime', 4, DATE'2024-01-03'"   # a second small file in 2024-01-03

INITIAL = [(1, "apple", 3, D1), (2, "pear", 5, D1), (3, "fig", 1, D2), (4, "kiwi", 7, D2)]
AFTER_DML = [(2, "pear", 6, D1), (3, "fig", 10, D2), (5, "plum", 2, D3)]
FINAL = AFTER_DML + [(6, "lime", 4, D3)]
CHANGES = sorted([
    ("update_preimage", 2, 2, "pear", 5), ("update_postimage", 2, 2, "pear", 6), ("delete", 2, 4, "kiwi", 7),
    ("insert", 2, 5, "plum", 2),
    ("update_preimage", 3, 3, "fig", 1), ("update_postimage", 3, 3, "fig", 10),
    ("delete", 4, 1, "apple", 3),
])
OPERATIONS = ["CREATE TABLE", "WRITE", "MERGE", "UPDATE", "DELETE", "WRITE", "OPTIMIZE", "VACUUM START", "VACUUM END"]


def _rows(df) -> list:
    return sorted(tuple(r) for r in df.collect())


def run(spark) -> dict:
    out: dict = {}
    for s in SETUP:
        spark.sql(s).collect()
    out["merge"] = [tuple(r) for r in spark.sql(MERGE).collect()]
    out["update"] = [tuple(r) for r in spark.sql(UPDATE).collect()]
    out["delete"] = [tuple(r) for r in spark.sql(DELETE).collect()]
    out["rows"] = _rows(spark.sql("SELECT id, item, qty, day FROM sales"))
    out["v1"] = _rows(spark.sql("SELECT id, item, qty, day FROM sales VERSION AS OF 1"))
    out["v1_at"] = _rows(spark.sql("SELECT s.id, s.item, s.qty, s.day FROM sales@v1 s"))
    out["changes"] = _rows(spark.sql(
        "SELECT _change_type, _commit_version, id, item, qty FROM table_changes('sales', 2, 4)"))
    spark.sql(APPEND).collect()
    metrics = spark.sql("OPTIMIZE sales").collect()[0]["metrics"]
    out["optimize"] = [metrics["numFilesRemoved"], metrics["numFilesAdded"]]
    spark.sql("SET spark.databricks.delta.retentionDurationCheck.enabled = false")
    out["vacuum"] = [r["path"] for r in spark.sql("VACUUM sales RETAIN 0 HOURS").collect()]
    spark.sql("SET spark.databricks.delta.retentionDurationCheck.enabled = true")
    out["history"] = [r["operation"] for r in spark.sql("DESCRIBE HISTORY sales").collect()][::-1]
    out["location"] = spark.sql("DESCRIBE DETAIL sales").collect()[0]["location"]
    out["after_vacuum"] = _rows(spark.sql("SELECT id, item, qty, day FROM sales"))
    return out

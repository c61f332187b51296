"""delta-spark's documentation as the oracle: the SQL examples of docs.delta.io (the pages in
`docs_oracle.PAGES`: batch reads and writes, deletes / updates / merges, utility commands,
optimizations, constraints, column mapping, change data feed, liquid clustering), each run through
tahoe's SQL (`spark.sql` of a session with `tahoe.spark.enable`) on small hand-made tables and
checked against what the page documents — rows derived by hand, errors, schemas, history entries;
the table's `_delta_log` read as JSON and delta-rs (QueryBuilder, in a subprocess) reading the
tables the SQL wrote, never tahoe reading its own work alone.

Each case names the page and carries the page's SQL it runs (`doc(...)`). Where a page's example
is written in Python (`DeltaTableBuilder`, `spark.read.option(...)`) or its SQL has a typo the
reference's parser rejects too, the case runs the SQL equivalent / the corrected statement and
says so; the typo'd text itself is checked to fail to parse, as it does on delta-spark."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from pathlib import Path

import pytest

from tests.spark.sql.docs_oracle import (
    CASES, Ctx, commit_actions, commit_info, data_files, doc, last_metadata, last_protocol, log_versions, norm,
    now, params, schema_fields, set_commit_time,
)

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

UTC = {"spark.sql.session.timeZone": "UTC"}
HOUR = 3600.0


def epoch(text: str) -> float:
    """'2018-10-18T22:00:00' (UTC) as epoch seconds."""
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.timezone.utc).timestamp()


def ts(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


# people10m, the docs' running example (a few hand-made people)
PEOPLE_DDL = """(
  id INT,
  firstName STRING,
  middleName STRING,
  lastName STRING,
  gender STRING,
  birthDate TIMESTAMP,
  ssn STRING,
  salary INT
)"""
PEOPLE_COLUMNS = [("id", "int"), ("firstName", "string"), ("middleName", "string"), ("lastName", "string"),
                  ("gender", "string"), ("birthDate", "timestamp"), ("ssn", "string"), ("salary", "int")]
PEOPLE = [
    (1, "Pennie", "Carry", "Hirschmann", "F", ts("1955-07-02 04:00:00"), "981-43-9345", 56172),
    (2, "An", "Amira", "Cowper", "F", ts("1992-02-08 05:00:00"), "978-97-8086", 40203),
    (3, "Quyen", "Marlen", "Dome", "M", ts("1970-10-11 04:00:00"), "957-57-8246", 53417),
    (4, "Coralie", "Antonina", "Marshall", "F", ts("1990-04-11 05:00:00"), "963-39-4885", 94727),
    (5, "Terrie", "Wava", "Bonar", "M", ts("1954-01-10 05:00:00"), "911-22-3333", 79908),
]


def values(rows) -> str:
    """SQL VALUES rows of Python tuples (str, int, None, datetime, date, bool)."""
    def lit(v):
        if v is None:
            return "NULL"
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, dt.datetime):
            return f"TIMESTAMP'{v:%Y-%m-%d %H:%M:%S}'"
        if isinstance(v, dt.date):
            return f"DATE'{v:%Y-%m-%d}'"
        if isinstance(v, str):
            return "'" + v.replace("'", "\\'") + "'"
        return str(v)
    return ", ".join("(" + ", ".join(lit(v) for v in r) + ")" for r in rows)


def people_view(ctx: Ctx, name: str, rows) -> None:
    ctx.sql(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT * FROM VALUES {values(rows)} "
            f"AS v(id, firstName, middleName, lastName, gender, birthDate, ssn, salary)")


def make_people(ctx: Ctx, name: str, rows=PEOPLE, extra: str = "") -> str:
    """people10m in the case's database (managed), with `rows`; its path."""
    ctx.sql(f"CREATE TABLE {ctx.db}.{name} {PEOPLE_DDL} USING DELTA {extra}")
    if rows:
        ctx.sql(f"INSERT INTO {ctx.db}.{name} VALUES {values(rows)}")
    return ctx.managed(name)


def by_id(rows, ids):
    return [r for r in rows if r[0] in ids]


def ids_of(rows):
    return [(r[0],) for r in rows]


def history(ctx: Ctx, table: str, limit: str = ""):
    return ctx.sql(f"DESCRIBE HISTORY {table} {limit}")


# ================================================================================================
# Table batch reads and writes — https://docs.delta.io/delta-batch/
# ================================================================================================

@doc("batch", "create-if-not-exists-then-create-or-replace",
     "CREATE TABLE IF NOT EXISTS default.people10m (...) USING DELTA",
     "CREATE OR REPLACE TABLE default.people10m (...) USING DELTA")
def _(ctx: Ctx):
    t, path = f"{ctx.db}.people10m", ctx.managed("people10m")
    ctx.sql(f"CREATE TABLE IF NOT EXISTS {t} {PEOPLE_DDL} USING DELTA")
    assert log_versions(path) == [0]
    ctx.sql(f"CREATE TABLE IF NOT EXISTS {t} {PEOPLE_DDL} USING DELTA")   # exists: nothing happens
    assert log_versions(path) == [0]
    ctx.sql(f"INSERT INTO {t} VALUES {values(PEOPLE[:2])}")
    ctx.sql(f"CREATE OR REPLACE TABLE {t} {PEOPLE_DDL} USING DELTA")
    assert log_versions(path) == [0, 1, 2]
    assert commit_info(path, 2)["operation"] == "CREATE OR REPLACE TABLE"
    assert ctx.rows(f"SELECT * FROM {t}") == []
    assert [r.operation for r in history(ctx, t)] == ["CREATE OR REPLACE TABLE", "WRITE", "CREATE TABLE"]
    assert [(r.col_name, r.data_type) for r in ctx.sql(f"DESCRIBE TABLE {t}")] == PEOPLE_COLUMNS
    assert [(f["name"], f["type"]) for f in schema_fields(path)] == [
        (n, {"int": "integer"}.get(ty, ty)) for n, ty in PEOPLE_COLUMNS]
    ctx.deltars(path, ["id"], [])


@doc("batch", "create-or-replace-by-path",
     "CREATE OR REPLACE TABLE delta.`/tmp/delta/people10m` (...) USING DELTA")
def _(ctx: Ctx):
    p = ctx.path("people10m")
    ctx.sql(f"CREATE OR REPLACE TABLE delta.`{p}` {PEOPLE_DDL} USING DELTA")
    assert log_versions(p) == [0]
    assert [f["name"] for f in schema_fields(p)] == [n for n, _ in PEOPLE_COLUMNS]
    assert "people10m" not in ctx.tables()          # no catalog entry
    ctx.sql(f"INSERT INTO delta.`{p}` VALUES {values(PEOPLE[:2])}")
    ctx.deltars(p, ["id", "firstName", "salary"], [(1, "Pennie", 56172), (2, "An", 40203)])


@doc("batch", "partitioned-by-and-read",
     "CREATE TABLE default.people10m (...) USING DELTA PARTITIONED BY (gender)",
     "SELECT COUNT(*) > 0 AS `Partition exists` FROM default.people10m WHERE gender = \"M\"",
     "SELECT * FROM default.people10m -- query table in the metastore",
     "SELECT * FROM delta.`/tmp/delta/people10m` -- query table by path")
def _(ctx: Ctx):
    t = f"{ctx.db}.people10m"
    path = make_people(ctx, "people10m", extra="PARTITIONED BY (gender)")
    assert last_metadata(path)["partitionColumns"] == ["gender"]
    assert {f.split("/")[0] for f in data_files(path)} == {"gender=F", "gender=M"}
    found = ctx.df(f'SELECT COUNT(*) > 0 AS `Partition exists` FROM {t} WHERE gender = "M"')
    assert found.columns == ["Partition exists"] and [tuple(r) for r in found.collect()] == [(True,)]
    assert [tuple(r) for r in ctx.sql(f'SELECT COUNT(*) > 0 AS `Partition exists` FROM {t} WHERE gender = "X"')] \
        == [(False,)]
    assert ctx.rows(f"SELECT * FROM {t}") == norm(PEOPLE)
    assert ctx.rows(f"SELECT * FROM delta.`{path}`") == norm(PEOPLE)
    ctx.deltars(path, ["id", "gender"], [(r[0], r[4]) for r in PEOPLE])


@doc("batch", "create-table-location-inherits",
     "CREATE TABLE default.people10m USING DELTA LOCATION '/tmp/delta/people10m'")
def _(ctx: Ctx):
    p = ctx.path("people10m")
    ctx.sql(f"CREATE TABLE delta.`{p}` {PEOPLE_DDL} USING DELTA PARTITIONED BY (gender) "
            f"TBLPROPERTIES ('department' = 'hr')")
    ctx.sql(f"INSERT INTO delta.`{p}` VALUES {values(PEOPLE)}")
    before = log_versions(p)
    t = f"{ctx.db}.people10m"
    ctx.sql(f"CREATE TABLE {t} USING DELTA LOCATION '{p}'")
    assert log_versions(p) == before                       # importing commits nothing
    detail = ctx.sql(f"DESCRIBE DETAIL {t}")[0]
    assert detail.partitionColumns == ["gender"] and detail.properties.get("department") == "hr"
    assert [r.col_name for r in ctx.sql(f"DESCRIBE TABLE {t}")][:8] == [n for n, _ in PEOPLE_COLUMNS]
    assert ctx.rows(f"SELECT * FROM {t}") == norm(PEOPLE)
    # any configuration given must match the existing data exactly
    ctx.fails(f"CREATE TABLE {ctx.db}.other (id INT) USING DELTA LOCATION '{p}'",
              r"DELTA_CREATE_TABLE_SCHEME_MISMATCH|does not match", table=p)
    ctx.fails(f"CREATE TABLE {ctx.db}.other2 {PEOPLE_DDL} USING DELTA PARTITIONED BY (lastName) LOCATION '{p}'",
              r"DELTA_CREATE_TABLE_WITH_DIFFERENT_PARTITIONING|partitioning", table=p)
    ctx.fails(f"CREATE TABLE {ctx.db}.other3 USING DELTA LOCATION '{p}' TBLPROPERTIES ('owner' = 'me')",
              r"DELTA_CREATE_TABLE_WITH_DIFFERENT_PROPERTY|propert", table=p)
    assert not {"other", "other2", "other3"} & ctx.tables()
    # an unmanaged table's files stay when it is dropped; a managed table's go
    ctx.sql(f"DROP TABLE {t}")
    assert "people10m" not in ctx.tables() and (Path(p) / "_delta_log").is_dir()
    m = make_people(ctx, "managed", rows=PEOPLE[:1])
    assert Path(m, "_delta_log").is_dir()
    ctx.sql(f"DROP TABLE {ctx.db}.managed")
    assert not Path(m).exists()
    ctx.deltars(p, ["id"], ids_of(PEOPLE))


@doc("batch", "default-table-properties-conf",
     "SET spark.databricks.delta.properties.defaults.appendOnly = true",
     'spark.sql("SET spark.databricks.delta.properties.defaults.appendOnly = true")')
def _(ctx: Ctx):
    with ctx.conf({"spark.databricks.delta.properties.defaults.appendOnly": "true"}):
        ctx.sql(f"CREATE TABLE {ctx.db}.t1 (id INT) USING DELTA")
    ctx.sql(f"CREATE TABLE {ctx.db}.t2 (id INT) USING DELTA")
    assert last_metadata(ctx.managed("t1"))["configuration"].get("delta.appendOnly") == "true"
    assert "delta.appendOnly" not in last_metadata(ctx.managed("t2"))["configuration"]
    assert dict((r.key, r.value) for r in ctx.sql(f"SHOW TBLPROPERTIES {ctx.db}.t1"))["delta.appendOnly"] == "true"
    ctx.sql(f"INSERT INTO {ctx.db}.t1 VALUES (1), (2)")
    ctx.fails(f"DELETE FROM {ctx.db}.t1 WHERE id = 1", r"DELTA_CANNOT_MODIFY_APPEND_ONLY|append-only|appendOnly",
              table=ctx.managed("t1"))
    ctx.deltars(ctx.managed("t1"), ["id"], [(1,), (2,)])


@doc("batch", "time-travel-as-of",
     "SELECT * FROM table_name TIMESTAMP AS OF timestamp_expression",
     "SELECT * FROM table_name VERSION AS OF version",
     "SELECT * FROM default.people10m TIMESTAMP AS OF '2018-10-18T22:15:12.013Z'",
     "SELECT * FROM delta.`/tmp/delta/people10m` VERSION AS OF 123",
     'spark.sql("DESCRIBE HISTORY delta.`/tmp/delta/people10m`") ... max(version)')
def _(ctx: Ctx):
    p, t = ctx.path("people10m"), f"{ctx.db}.people10m"
    ctx.sql(f"CREATE TABLE {t} (id INT, name STRING) USING DELTA LOCATION '{p}'")
    for i, n in [(1, "a"), (2, "b"), (3, "c")]:
        ctx.sql(f"INSERT INTO {t} VALUES ({i}, '{n}')")
    assert log_versions(p) == [0, 1, 2, 3]
    t0 = now()
    set_commit_time(p, 0, epoch("2018-10-18T00:00:00"))
    set_commit_time(p, 1, epoch("2018-10-18T22:00:00"))
    set_commit_time(p, 2, t0 - 50 * HOUR)
    set_commit_time(p, 3, t0 - 1 * HOUR)
    v1, v2, v3 = [(1, "a")], [(1, "a"), (2, "b")], [(1, "a"), (2, "b"), (3, "c")]
    with ctx.conf(UTC):
        assert ctx.rows(f"SELECT * FROM {t} TIMESTAMP AS OF '2018-10-18T22:15:12.013Z'") == v1
        assert ctx.rows(f"SELECT * FROM delta.`{p}` VERSION AS OF 2") == v2
        ctx.fails(f"SELECT * FROM delta.`{p}` VERSION AS OF 123", r"VERSION_NOT_FOUND|123")
        # the timestamp expressions the page lists
        assert ctx.rows(f"SELECT * FROM {t} TIMESTAMP AS OF '2018-10-18'") == []                    # version 0
        assert ctx.rows(f"SELECT * FROM {t} TIMESTAMP AS OF cast('2018-10-18 23:36:32 UTC' as timestamp)") == v1
        assert ctx.rows(f"SELECT * FROM {t} TIMESTAMP AS OF current_timestamp() - interval 12 hours") == v2
        assert ctx.rows(f"SELECT * FROM {t} TIMESTAMP AS OF date_sub(current_date(), 1)") == v2
        ctx.fails(f"SELECT * FROM {t} TIMESTAMP AS OF '2018-10-17'", r"TIMESTAMP_EARLIER|before|earliest")
        # neither can be a subquery
        ctx.fails(f"SELECT * FROM {t} VERSION AS OF (SELECT 1)", r"PARSE|subquer|syntax|integer")
    # "fix the data returned by the DataFrame across invocations"
    latest = ctx.df(f"DESCRIBE HISTORY delta.`{p}`").selectExpr("max(version)").collect()[0][0]
    assert latest == 3
    df = ctx.spark.read.format("delta").option("versionAsOf", latest).load(p)
    assert norm(df.collect()) == v3


@doc("batch", "merge-from-time-travel-view",
     "MERGE INTO delta.`/tmp/delta/events` target USING my_table_yesterday source "
     "ON source.userId = target.userId WHEN MATCHED THEN UPDATE SET *")
def _(ctx: Ctx):
    p = ctx.path("events")
    ctx.sql(f"CREATE TABLE delta.`{p}` (userId INT, data STRING) USING DELTA")
    ctx.sql(f"INSERT INTO delta.`{p}` VALUES (111, 'good'), (222, 'kept')")
    ctx.sql(f"UPDATE delta.`{p}` SET data = 'broken' WHERE userId = 111")
    t0 = now()
    set_commit_time(p, 0, t0 - 80 * HOUR)
    set_commit_time(p, 1, t0 - 72 * HOUR)
    set_commit_time(p, 2, t0 - 1 * HOUR)
    yesterday = ctx.sql("SELECT CAST(date_sub(current_date(), 1) AS STRING)")[0][0]
    df = ctx.spark.read.format("delta").option("timestampAsOf", yesterday).load(p)
    df.createOrReplaceTempView("my_table_yesterday")
    out = ctx.sql(f"""
      MERGE INTO delta.`{p}` target
        USING my_table_yesterday source
        ON source.userId = target.userId
        WHEN MATCHED THEN UPDATE SET *
      """)
    assert [tuple(r) for r in out] == [(2, 2, 0, 0)]
    assert ctx.rows(f"SELECT * FROM delta.`{p}`") == [(111, "good"), (222, "kept")]
    ctx.deltars(p, ["userId", "data"], [(111, "good"), (222, "kept")])


@doc("batch", "insert-into-and-overwrite",
     "INSERT INTO default.people10m SELECT * FROM morePeople",
     "INSERT OVERWRITE TABLE default.people10m SELECT * FROM morePeople")
def _(ctx: Ctx):
    t = f"{ctx.db}.people10m"
    path = make_people(ctx, "people10m", rows=PEOPLE[:2])
    people_view(ctx, "morePeople", PEOPLE[2:4])
    ctx.sql(f"INSERT INTO {t} SELECT * FROM morePeople")
    assert ctx.rows(f"SELECT * FROM {t}") == norm(PEOPLE[:4])
    ci = commit_info(path, 2)
    assert ci["operation"] == "WRITE" and ci["operationParameters"]["mode"] == "Append"
    ctx.sql(f"INSERT OVERWRITE TABLE {t} SELECT * FROM morePeople")
    assert ctx.rows(f"SELECT * FROM {t}") == norm(PEOPLE[2:4])
    ci = commit_info(path, 3)
    assert ci["operation"] == "WRITE" and ci["operationParameters"]["mode"] == "Overwrite"
    ctx.deltars(path, ["id"], ids_of(PEOPLE[2:4]))
    ctx.deltars(path, ["id"], ids_of(PEOPLE[:4]), version=2)


EVENTS = [(1, dt.date(2016, 12, 30), dt.date(2016, 12, 31), "old"), (2, dt.date(2017, 1, 5), dt.date(2017, 1, 6), "old"),
          (3, dt.date(2017, 1, 20), dt.date(2017, 1, 25), "old"), (4, dt.date(2017, 2, 1), dt.date(2017, 2, 3), "old")]
REPLACE = [(5, dt.date(2017, 1, 10), dt.date(2017, 1, 11), "new"), (6, dt.date(2017, 1, 30), dt.date(2017, 1, 31), "new")]
OUTSIDE = [(7, dt.date(2017, 3, 1), dt.date(2017, 3, 2), "outside")]


def make_events(ctx: Ctx) -> str:
    ctx.sql(f"CREATE TABLE {ctx.db}.events (event_id INT, start_date DATE, end_date DATE, data STRING) USING DELTA "
            f"PARTITIONED BY (start_date)")
    ctx.sql(f"INSERT INTO {ctx.db}.events VALUES {values(EVENTS)}")
    for name, rows in [("replace_data", REPLACE), ("replace_outside", REPLACE[:1] + OUTSIDE)]:
        ctx.sql(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT * FROM VALUES {values(rows)} "
                f"AS v(event_id, start_date, end_date, data)")
    return ctx.managed("events")


@doc("batch", "insert-replace-where",
     "INSERT INTO TABLE events REPLACE WHERE start_data >= '2017-01-01' AND end_date <= '2017-01-31' "
     "SELECT * FROM replace_data",
     "SET spark.databricks.delta.replaceWhere.constraintCheck.enabled=false")
def _(ctx: Ctx):
    path = make_events(ctx)
    t = f"{ctx.db}.events"
    # the page's text names a column `start_data` the table does not have (a typo): an error
    ctx.fails("INSERT INTO TABLE events REPLACE WHERE start_data >= '2017-01-01' AND end_date <= '2017-01-31' "
              "SELECT * FROM replace_data", r"UNRESOLVED_COLUMN|start_data", table=path)
    pred = "start_date >= '2017-01-01' AND end_date <= '2017-01-31'"
    ctx.sql(f"INSERT INTO TABLE events REPLACE WHERE {pred} SELECT * FROM replace_data")
    after = [EVENTS[0], EVENTS[3]] + REPLACE
    assert ctx.rows(f"SELECT * FROM {t}") == norm(after)
    ci = commit_info(path, 2)                # one commit: the matching rows out, the new rows in
    assert (ci["operation"], ci["operationParameters"]["mode"]) == ("WRITE", "Overwrite")
    assert ci["operationParameters"]["predicate"] == f'["{pred}"]' or pred in ci["operationParameters"]["predicate"]
    assert (ci["operationMetrics"]["numOutputRows"], ci["operationMetrics"]["numDeletedRows"]) == ("2", "2")
    # data that does not all match the predicate is refused ...
    ctx.fails(f"INSERT INTO TABLE events REPLACE WHERE {pred} SELECT * FROM replace_outside",
              r"DELTA_REPLACE_WHERE_MISMATCH|does not (conform|match)|replaceWhere", table=path)
    # ... unless the constraint check is off: the matching rows are replaced, the rest written too
    with ctx.conf({"spark.databricks.delta.replaceWhere.constraintCheck.enabled": "false"}):
        ctx.sql(f"INSERT INTO TABLE events REPLACE WHERE {pred} SELECT * FROM replace_outside")
    after = [EVENTS[0], EVENTS[3]] + REPLACE[:1] + OUTSIDE
    assert ctx.rows(f"SELECT * FROM {t}") == norm(after)
    ctx.deltars(path, ["event_id", "data"], [(r[0], r[3]) for r in after])


@doc("batch", "insert-replace-where-partition-columns",
     "SET spark.databricks.delta.replaceWhere.dataColumns.enabled=false",
     "(INSERT INTO TABLE events REPLACE WHERE <partition predicate> SELECT * FROM replace_data; "
     "SET spark.databricks.delta.replaceWhere.constraintCheck.enabled=false)")
def _(ctx: Ctx):
    path = make_events(ctx)
    t = f"{ctx.db}.events"
    pred = "start_date >= '2017-01-01' AND start_date <= '2017-01-31'"
    # the old behaviour: predicates over partition columns only
    with ctx.conf({"spark.databricks.delta.replaceWhere.dataColumns.enabled": "false"}):
        ctx.fails("INSERT INTO TABLE events REPLACE WHERE start_date >= '2017-01-01' AND end_date <= '2017-01-31' "
                  "SELECT * FROM replace_data", r"non-partition column|partition column", table=path)
        ctx.sql(f"INSERT INTO TABLE events REPLACE WHERE {pred} SELECT * FROM replace_data")
    after = [EVENTS[0], EVENTS[3]] + REPLACE
    assert ctx.rows(f"SELECT * FROM {t}") == norm(after)
    ci = commit_info(path, 2)
    assert (ci["operation"], ci["operationParameters"]["mode"]) == ("WRITE", "Overwrite")
    ctx.fails(f"INSERT INTO TABLE events REPLACE WHERE {pred} SELECT * FROM replace_outside",
              r"DELTA_REPLACE_WHERE_MISMATCH|does not (conform|match)|replaceWhere", table=path)
    with ctx.conf({"spark.databricks.delta.replaceWhere.constraintCheck.enabled": "false"}):
        ctx.sql(f"INSERT INTO TABLE events REPLACE WHERE {pred} SELECT * FROM replace_outside")
    after = [EVENTS[0], EVENTS[3]] + REPLACE[:1] + OUTSIDE
    assert ctx.rows(f"SELECT * FROM {t}") == norm(after)
    ctx.deltars(path, ["event_id", "data"], [(r[0], r[3]) for r in after])


@doc("batch", "dynamic-partition-overwrite",
     "SET spark.sql.sources.partitionOverwriteMode=dynamic;",
     "INSERT OVERWRITE TABLE default.people10m SELECT * FROM morePeople;")
def _(ctx: Ctx):
    t = f"{ctx.db}.people10m"
    path = make_people(ctx, "people10m", extra="PARTITIONED BY (gender)")
    new = [(6, "Ana", "B", "C", "M", ts("1980-01-01 00:00:00"), "000-00-0000", 1000)]
    people_view(ctx, "morePeople", new)
    with ctx.conf({"spark.sql.sources.partitionOverwriteMode": "dynamic"}):
        ctx.sql(f"INSERT OVERWRITE TABLE {t} SELECT * FROM morePeople")
    after = [r for r in PEOPLE if r[4] == "F"] + new          # partition M replaced, F untouched
    assert ctx.rows(f"SELECT * FROM {t}") == norm(after)
    ctx.deltars(path, ["id", "gender"], [(r[0], r[4]) for r in after])


@doc("batch", "idempotent-writes-confs",
     "SET spark.databricks.delta.write.txnAppId = ...;",
     "SET spark.databricks.delta.write.txnVersion = ...;",
     "SET spark.databricks.delta.write.txnVersion.autoReset.enabled = true;")
def _(ctx: Ctx):
    t, path = f"{ctx.db}.t", ctx.managed("t")
    ctx.sql(f"CREATE TABLE {t} (id INT) USING DELTA")
    app, ver = "spark.databricks.delta.write.txnAppId", "spark.databricks.delta.write.txnVersion"
    with ctx.conf({app: "dailyETL", ver: "23423"}):
        ctx.sql(f"INSERT INTO {t} VALUES (1)")
        assert {"appId": "dailyETL", "version": 23423} in [
            {k: a["txn"][k] for k in ("appId", "version")} for a in commit_actions(path, 1) if "txn" in a]
        ctx.sql(f"INSERT INTO {t} VALUES (1)")                 # the same write again: ignored
    with ctx.conf({app: "dailyETL", ver: "23422"}):
        ctx.sql(f"INSERT INTO {t} VALUES (2)")                 # an older version: ignored
    assert log_versions(path) == [0, 1]
    with ctx.conf({app: "dailyETL", ver: "23424"}):
        ctx.sql(f"INSERT INTO {t} VALUES (3)")
    with ctx.conf({app: "anotherETL", ver: "23424"}):
        ctx.sql(f"INSERT INTO {t} VALUES (4)")
    with ctx.conf({app: "dailyETL", ver: "23425", "spark.databricks.delta.write.txnVersion.autoReset.enabled": "true"}):
        ctx.sql(f"INSERT INTO {t} VALUES (5)")
        assert ctx.spark.conf.get(ver, None) is None         # reset after the write
    assert log_versions(path) == [0, 1, 2, 3, 4]
    assert ctx.rows(f"SELECT * FROM {t}") == [(1,), (3,), (4,), (5,)]
    ctx.deltars(path, ["id"], [(1,), (3,), (4,), (5,)])


@doc("batch", "user-metadata-conf",
     "SET spark.databricks.delta.commitInfo.userMetadata=overwritten-for-fixing-incorrect-data",
     "INSERT OVERWRITE default.people10m SELECT * FROM morePeople")
def _(ctx: Ctx):
    t = f"{ctx.db}.people10m"
    path = make_people(ctx, "people10m", rows=PEOPLE[:2])
    people_view(ctx, "morePeople", PEOPLE[2:])
    with ctx.conf({"spark.databricks.delta.commitInfo.userMetadata": "overwritten-for-fixing-incorrect-data"}):
        ctx.sql(f"INSERT OVERWRITE {t} SELECT * FROM morePeople")
    assert commit_info(path, 2)["userMetadata"] == "overwritten-for-fixing-incorrect-data"
    assert "userMetadata" not in commit_info(path, 1)
    top = history(ctx, t)[0]
    assert top.version == 2 and top.userMetadata == "overwritten-for-fixing-incorrect-data"
    assert ctx.rows(f"SELECT id FROM {t}") == ids_of(PEOPLE[2:])


def make_boxes(ctx: Ctx, name: str = "boxes", props: str = "") -> str:
    """boxes(colA, colB STRUCT<field1, field2>), the page's schema examples, with one row."""
    ctx.sql(f"CREATE TABLE {ctx.db}.{name} (colA STRING, colB STRUCT<field1: STRING, field2: STRING>) USING DELTA "
            f"{props}")
    ctx.sql(f"INSERT INTO {ctx.db}.{name} VALUES ('a', named_struct('field1', 'x', 'field2', 'y'))")
    return ctx.managed(name)


def struct_names(fields: list[dict], name: str) -> list[str]:
    return [f["name"] for f in next(f for f in fields if f["name"] == name)["type"]["fields"]]


@doc("batch", "add-columns",
     "ALTER TABLE table_name ADD COLUMNS (col_name data_type [COMMENT col_comment] [FIRST|AFTER colA_name], ...)",
     "ALTER TABLE table_name ADD COLUMNS (col_name.nested_col_name data_type [COMMENT col_comment] "
     "[FIRST|AFTER colA_name], ...)",
     "ALTER TABLE boxes ADD COLUMNS (colB.nested STRING AFTER field1)")
def _(ctx: Ctx):
    t = f"{ctx.db}.boxes"
    path = make_boxes(ctx)
    ctx.sql(f"ALTER TABLE {t} ADD COLUMNS (colC INT COMMENT 'c comment' FIRST, colD STRING AFTER colA)")
    fields = schema_fields(path)
    assert [f["name"] for f in fields] == ["colC", "colA", "colD", "colB"]
    assert fields[0]["metadata"].get("comment") == "c comment" and all(f["nullable"] for f in fields)
    ctx.sql(f"ALTER TABLE {t} ADD COLUMNS (colB.nested STRING AFTER field1)")
    assert struct_names(schema_fields(path), "colB") == ["field1", "nested", "field2"]
    assert commit_info(path, 3)["operation"] == "ADD COLUMNS"
    assert ctx.rows(f"SELECT colC, colA, colD, colB.field1, colB.nested, colB.field2 FROM {t}") == \
        [(None, "a", None, "x", None, "y")]
    ctx.deltars(path, ["colA", "colD"], [("a", None)])


@doc("batch", "change-column-comment-or-order",
     "ALTER TABLE table_name ALTER [COLUMN] col_name col_name data_type [COMMENT col_comment] [FIRST|AFTER colA_name]",
     "ALTER TABLE table_name ALTER [COLUMN] col_name.nested_col_name nested_col_name data_type [COMMENT col_comment] "
     "[FIRST|AFTER colA_name]",
     "ALTER TABLE boxes CHANGE COLUMN colB.field2 field2 STRING FIRST")
def _(ctx: Ctx):
    # the syntax lines write ALTER where Spark's grammar has CHANGE (`ALTER COLUMN a a STRING` does
    # not parse on delta-spark either); the example uses CHANGE COLUMN
    t = f"{ctx.db}.boxes"
    path = make_boxes(ctx)
    ctx.sql(f"ALTER TABLE {t} CHANGE COLUMN colB.field2 field2 STRING FIRST")
    assert struct_names(schema_fields(path), "colB") == ["field2", "field1"]
    ctx.sql(f"ALTER TABLE {t} CHANGE COLUMN colA colA STRING COMMENT 'the a column' AFTER colB")
    fields = schema_fields(path)
    assert [f["name"] for f in fields] == ["colB", "colA"] and fields[1]["metadata"].get("comment") == "the a column"
    assert commit_info(path, 3)["operation"] == "CHANGE COLUMN"
    assert ctx.rows(f"SELECT colB.field2, colB.field1, colA FROM {t}") == [("y", "x", "a")]
    ctx.deltars(path, ["colA"], [("a",)])


@doc("batch", "replace-columns",
     "ALTER TABLE table_name REPLACE COLUMNS (col_name1 col_type1 [COMMENT col_comment1], ...)",
     "ALTER TABLE boxes REPLACE COLUMNS (colC STRING, colB STRUCT<field2:STRING, nested:STRING, field1:STRING>, "
     "colA STRING)")
def _(ctx: Ctx):
    t = f"{ctx.db}.boxes"
    path = make_boxes(ctx)
    ctx.sql(f"ALTER TABLE {t} REPLACE COLUMNS (colC STRING, colB STRUCT<field2:STRING, nested:STRING, field1:STRING>, "
            f"colA STRING)")
    fields = schema_fields(path)
    assert [f["name"] for f in fields] == ["colC", "colB", "colA"]
    assert struct_names(fields, "colB") == ["field2", "nested", "field1"]
    assert commit_info(path, 2)["operation"] == "REPLACE COLUMNS"
    assert ctx.rows(f"SELECT colC, colB.field2, colB.nested, colB.field1, colA FROM {t}") == [(None, "y", None, "x", "a")]
    ctx.deltars(path, ["colA", "colC"], [("a", None)])


CM_PROPS = "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')"


@doc("batch", "rename-columns",
     "ALTER TABLE table_name RENAME COLUMN old_col_name TO new_col_name",
     "ALTER TABLE table_name RENAME COLUMN col_name.old_nested_field TO new_nested_field",
     "ALTER TABLE boxes RENAME COLUMN colB.field1 TO field001")
def _(ctx: Ctx):
    plain = make_boxes(ctx, "plain")
    ctx.fails(f"ALTER TABLE {ctx.db}.plain RENAME COLUMN colA TO colA2", r"column mapping|DELTA_UNSUPPORTED_RENAME",
              table=plain)
    t = f"{ctx.db}.boxes"
    path = make_boxes(ctx, props=CM_PROPS)
    files = data_files(path)
    ctx.sql(f"ALTER TABLE {t} RENAME COLUMN colA TO colA2")
    ctx.sql(f"ALTER TABLE {t} RENAME COLUMN colB.field1 TO field001")
    fields = schema_fields(path)
    assert [f["name"] for f in fields] == ["colA2", "colB"] and struct_names(fields, "colB") == ["field001", "field2"]
    assert data_files(path) == files                       # no data rewritten
    assert ctx.rows(f"SELECT colA2, colB.field001, colB.field2 FROM {t}") == [("a", "x", "y")]
    ctx.deltars(path, ["colA2"], [("a",)])


@doc("batch", "drop-columns",
     "ALTER TABLE table_name DROP COLUMN col_name",
     "ALTER TABLE table_name DROP COLUMNS (col_name_1, col_name_2)")
def _(ctx: Ctx):
    t = f"{ctx.db}.wide"
    ctx.sql(f"CREATE TABLE {t} (a INT, b INT, c INT, d INT) USING DELTA {CM_PROPS}")
    ctx.sql(f"INSERT INTO {t} VALUES (1, 2, 3, 4)")
    path = ctx.managed("wide")
    files = data_files(path)
    ctx.sql(f"ALTER TABLE {t} DROP COLUMN a")
    ctx.sql(f"ALTER TABLE {t} DROP COLUMNS (c, d)")
    assert [f["name"] for f in schema_fields(path)] == ["b"] and data_files(path) == files
    assert commit_info(path, 3)["operation"] == "DROP COLUMNS"
    assert ctx.rows(f"SELECT * FROM {t}") == [(2,)]
    ctx.deltars(path, ["b"], [(2,)])


@doc("batch", "insert-with-schema-evolution",
     "INSERT WITH SCHEMA EVOLUTION INTO target_table SELECT * FROM source_table",
     "SET spark.databricks.delta.schema.autoMerge.enabled=true")
def _(ctx: Ctx):
    for name in ("target_table", "target2"):
        ctx.sql(f"CREATE TABLE {ctx.db}.{name} (id INT, v STRING) USING DELTA")
        ctx.sql(f"INSERT INTO {ctx.db}.{name} VALUES (1, 'a')")
    ctx.sql("CREATE OR REPLACE TEMP VIEW source_table AS SELECT * FROM VALUES (2, 'b', 10) AS s(id, v, extra)")
    ctx.sql(f"INSERT WITH SCHEMA EVOLUTION INTO {ctx.db}.target_table SELECT * FROM source_table")
    after = [(1, "a", None), (2, "b", 10)]
    assert [f["name"] for f in schema_fields(ctx.managed("target_table"))] == ["id", "v", "extra"]
    assert ctx.rows(f"SELECT * FROM {ctx.db}.target_table") == norm(after)
    # without schema evolution the extra column is an error; with the session conf it evolves
    ctx.fails(f"INSERT INTO {ctx.db}.target2 SELECT * FROM source_table",
              r"INSERT_COLUMN_ARITY_MISMATCH|too many|schema mismatch|DELTA_METADATA_MISMATCH",
              table=ctx.managed("target2"))
    with ctx.conf({"spark.databricks.delta.schema.autoMerge.enabled": "true"}):
        ctx.sql(f"INSERT INTO {ctx.db}.target2 SELECT * FROM source_table")
    assert ctx.rows(f"SELECT * FROM {ctx.db}.target2") == norm(after)
    ctx.deltars(ctx.managed("target_table"), ["id", "v", "extra"], after)
    ctx.deltars(ctx.managed("target2"), ["id", "v", "extra"], after)


@doc("batch", "table-properties-and-metadata",
     "ALTER TABLE default.people10m SET TBLPROPERTIES ('department' = 'accounting', 'delta.appendOnly' = 'true');",
     "SHOW TBLPROPERTIES default.people10m;",
     "SHOW TBLPROPERTIES default.people10m ('department');",
     "SHOW COLUMNS (Table metadata)", "DESCRIBE TABLE (Table metadata)")
def _(ctx: Ctx):
    t = f"{ctx.db}.people10m"
    path = make_people(ctx, "people10m", rows=PEOPLE[:1])
    ctx.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('department' = 'accounting', 'delta.appendOnly' = 'true')")
    props = {r.key: r.value for r in ctx.sql(f"SHOW TBLPROPERTIES {t}")}
    assert props["department"] == "accounting" and props["delta.appendOnly"] == "true"
    assert [tuple(r) for r in ctx.sql(f"SHOW TBLPROPERTIES {t} ('department')")] == [("department", "accounting")]
    assert last_metadata(path)["configuration"] == {"department": "accounting", "delta.appendOnly": "true"}
    # appendOnly blocks deletes and updates
    ctx.fails(f"DELETE FROM {t} WHERE id = 1", r"APPEND_ONLY|append-only", table=path)
    ctx.fails(f"UPDATE {t} SET salary = 0", r"APPEND_ONLY|append-only", table=path)
    ctx.sql(f"ALTER TABLE {t} ADD COLUMNS (nickname STRING)")
    cols = [n for n, _ in PEOPLE_COLUMNS] + ["nickname"]
    assert [r[0] for r in ctx.sql(f"SHOW COLUMNS IN {t}")] == cols
    assert [r.col_name for r in ctx.sql(f"DESCRIBE TABLE {t}")] == cols


@doc("batch", "generated-columns",
     "DeltaTable.create(...).addColumn('dateOfBirth', DateType(), generatedAlwaysAs='CAST(birthDate AS DATE)')"
     " [Python; run as SQL: dateOfBirth DATE GENERATED ALWAYS AS (CAST(birthDate AS DATE))]",
     "events: eventDate DATE GENERATED ALWAYS AS (CAST(eventTime AS DATE)), PARTITIONED BY (eventType, eventDate)"
     " + SELECT ... WHERE eventTime >= ... [Python]",
     "events: year/month/day GENERATED ALWAYS AS (YEAR/MONTH/DAY(eventTime)) + SELECT ... [Python]")
def _(ctx: Ctx):
    t, path = f"{ctx.db}.people10m", ctx.managed("people10m")
    ctx.sql(f"""CREATE TABLE {t} (
      id INT, firstName STRING, middleName STRING, lastName STRING, gender STRING, birthDate TIMESTAMP,
      dateOfBirth DATE GENERATED ALWAYS AS (CAST(birthDate AS DATE)), ssn STRING, salary INT)
      USING DELTA PARTITIONED BY (gender)""")
    fields = {f["name"]: f for f in schema_fields(path)}
    assert fields["dateOfBirth"]["metadata"]["delta.generationExpression"] == "CAST(birthDate AS DATE)"
    ctx.sql(f"INSERT INTO {t} (id, firstName, middleName, lastName, gender, birthDate, ssn, salary) "
            f"VALUES {values(PEOPLE[:2])}")
    # values given for a generated column must equal the expression's
    ctx.sql(f"INSERT INTO {t} VALUES (3, 'Quyen', 'Marlen', 'Dome', 'M', TIMESTAMP'1970-10-11 04:00:00', "
            f"DATE'1970-10-11', '957-57-8246', 53417)")
    ctx.fails(f"INSERT INTO {t} VALUES (4, 'X', 'Y', 'Z', 'F', TIMESTAMP'1990-04-11 05:00:00', DATE'2000-01-01', "
              f"'s', 1)", r"Generated Column|DELTA_VIOLATE_CONSTRAINT|generat", table=path)
    assert ctx.rows(f"SELECT id, dateOfBirth FROM {t}") == [
        (1, dt.date(1955, 7, 2)), (2, dt.date(1992, 2, 8)), (3, dt.date(1970, 10, 11))]
    ctx.deltars(path, ["id", "dateOfBirth"], [(1, dt.date(1955, 7, 2)), (2, dt.date(1992, 2, 8)),
                                              (3, dt.date(1970, 10, 11))])
    # partition columns generated from a timestamp; queries filter on the timestamp
    ctx.sql(f"""CREATE TABLE {ctx.db}.events (eventId BIGINT, data STRING, eventType STRING, eventTime TIMESTAMP,
      eventDate DATE GENERATED ALWAYS AS (CAST(eventTime AS DATE))) USING DELTA PARTITIONED BY (eventType, eventDate)""")
    ctx.sql(f"""CREATE TABLE {ctx.db}.events2 (eventId BIGINT, data STRING, eventType STRING, eventTime TIMESTAMP,
      year INT GENERATED ALWAYS AS (YEAR(eventTime)), month INT GENERATED ALWAYS AS (MONTH(eventTime)),
      day INT GENERATED ALWAYS AS (DAY(eventTime))) USING DELTA PARTITIONED BY (eventType, year, month, day)""")
    ev = [(1, "d1", "click", ts("2020-10-01 03:00:00")), (2, "d2", "view", ts("2020-10-01 11:59:59")),
          (3, "d3", "click", ts("2020-10-01 12:00:01")), (4, "d4", "click", ts("2020-09-30 23:59:59"))]
    for name in ("events", "events2"):
        ctx.sql(f"INSERT INTO {ctx.db}.{name} (eventId, data, eventType, eventTime) VALUES {values(ev)}")
        got = ctx.rows(f"SELECT eventId FROM {ctx.db}.{name} WHERE eventTime >= '2020-10-01 00:00:00' "
                       f"AND eventTime <= '2020-10-01 12:00:00'")
        assert got == [(1,), (2,)]
    assert {f.split("/")[1] for f in data_files(ctx.managed("events"))} == {"eventDate=2020-10-01", "eventDate=2020-09-30"}
    assert ctx.rows(f"SELECT eventId, year, month, day FROM {ctx.db}.events2") == [
        (1, 2020, 10, 1), (2, 2020, 10, 1), (3, 2020, 10, 1), (4, 2020, 9, 30)]


@doc("batch", "identity-columns",
     "DeltaTable.create().addColumn('id_col1', LongType(), generatedAlwaysAs=IdentityGenerator()) ... id_col4"
     " [Python; run as SQL: GENERATED ALWAYS | BY DEFAULT AS IDENTITY (START WITH -1 INCREMENT BY 1)]",
     "new_table: id generatedByDefaultAs=IdentityGenerator(start=5, step=1), insert with and without ids [Python]",
     "ALTER TABLE table_name ALTER COLUMN column_name SYNC IDENTITY")
def _(ctx: Ctx):
    t, path = f"{ctx.db}.table_name", ctx.managed("table_name")
    ctx.sql(f"""CREATE TABLE {t} (
      id_col1 BIGINT GENERATED ALWAYS AS IDENTITY,
      id_col2 BIGINT GENERATED ALWAYS AS IDENTITY (START WITH -1 INCREMENT BY 1),
      id_col3 BIGINT GENERATED BY DEFAULT AS IDENTITY,
      id_col4 BIGINT GENERATED BY DEFAULT AS IDENTITY (START WITH -1 INCREMENT BY 1),
      v STRING) USING DELTA""")
    ctx.sql(f"INSERT INTO {t} (v) VALUES ('a'), ('b'), ('c')")
    got = ctx.sql(f"SELECT id_col1, id_col2, id_col3, id_col4 FROM {t}")
    for i, start in enumerate([1, -1, 1, -1]):
        col = [r[i] for r in got]
        assert len(set(col)) == 3 and all(x >= start for x in col), col   # unique, step 1 from start
    # BY DEFAULT takes the values given; ALWAYS refuses them
    ctx.sql(f"INSERT INTO {t} (id_col3, id_col4, v) VALUES (100, 200, 'x')")
    assert ctx.rows(f"SELECT id_col3, id_col4 FROM {t} WHERE v = 'x'") == [(100, 200)]
    ctx.fails(f"INSERT INTO {t} (id_col1, v) VALUES (5, 'y')", r"IDENTITY", table=path)
    ctx.fails(f"UPDATE {t} SET id_col1 = 5", r"IDENTITY", table=path)
    # SYNC IDENTITY: the next value after the largest one written
    ctx.sql(f"ALTER TABLE {t} ALTER COLUMN id_col3 SYNC IDENTITY")
    ctx.sql(f"INSERT INTO {t} (v) VALUES ('z')")
    assert ctx.rows(f"SELECT id_col3 FROM {t} WHERE v = 'z'") == [(101,)]
    # the limitations
    for ddl, pattern in [
            ("(id BIGINT GENERATED ALWAYS AS IDENTITY (INCREMENT BY 0), v STRING) USING DELTA", r"IDENTITY|step"),
            ("(id INT GENERATED ALWAYS AS IDENTITY, v STRING) USING DELTA", r"IDENTITY|LongType|BIGINT"),
            ("(id BIGINT GENERATED ALWAYS AS IDENTITY, v STRING) USING DELTA PARTITIONED BY (id)", r"IDENTITY|partition"),
            ("(id BIGINT GENERATED ALWAYS AS IDENTITY) USING DELTA AS SELECT 1 AS id", r"AS SELECT|CTAS|schema")]:
        ctx.fails(f"CREATE TABLE {ctx.db}.bad {ddl}", pattern)
    assert "bad" not in ctx.tables()
    # a new table with an identity column, filled from an old one and then from new records
    ctx.sql(f"CREATE TABLE {ctx.db}.old_table (id BIGINT, event_date DATE, some_value BIGINT) USING DELTA")
    ctx.sql(f"INSERT INTO {ctx.db}.old_table VALUES (1, DATE'2024-01-01', 10), (2, DATE'2024-01-02', 20)")
    ctx.sql(f"""CREATE TABLE {ctx.db}.new_table (id BIGINT GENERATED BY DEFAULT AS IDENTITY (START WITH 5 INCREMENT BY 1),
      event_date DATE, some_value BIGINT) USING DELTA""")
    ctx.sql(f"INSERT INTO {ctx.db}.new_table SELECT id, event_date, some_value FROM {ctx.db}.old_table")
    ctx.sql(f"INSERT INTO {ctx.db}.new_table (event_date, some_value) VALUES (DATE'2024-01-03', 30), "
            f"(DATE'2024-01-04', 40)")
    got = ctx.rows(f"SELECT id, some_value FROM {ctx.db}.new_table")
    assert [r for r in got if r[1] <= 20] == [(1, 10), (2, 20)]
    generated = [r[0] for r in got if r[1] > 20]
    assert len(set(generated)) == 2 and all(x >= 5 for x in generated)
    ctx.deltars(ctx.managed("new_table"), ["some_value"], [(10,), (20,), (30,), (40,)])


# ================================================================================================
# Table deletes, updates, and merges — https://docs.delta.io/delta-update/
# ================================================================================================

@doc("update", "delete-and-update-by-name-and-path",
     "DELETE FROM people10m WHERE birthDate < '1955-01-01'",
     "DELETE FROM delta.`/tmp/delta/people-10m` WHERE birthDate < '1955-01-01'",
     "UPDATE people10m SET gender = 'Female' WHERE gender = 'F';",
     "UPDATE people10m SET gender = 'Male' WHERE gender = 'M';",
     "UPDATE delta.`/tmp/delta/people-10m` SET gender = 'Female' WHERE gender = 'F';",
     "UPDATE delta.`/tmp/delta/people-10m` SET gender = 'Male' WHERE gender = 'M';")
def _(ctx: Ctx):
    path = make_people(ctx, "people10m")
    p = ctx.path("people-10m")
    ctx.sql(f"CREATE TABLE delta.`{p}` USING DELTA AS SELECT * FROM people10m")
    kept = [r for r in PEOPLE if r[5] >= ts("1955-01-01 00:00:00")]
    expected = [r[:4] + ({"F": "Female", "M": "Male"}[r[4]],) + r[5:] for r in kept]
    for target, where in [("people10m", path), (f"delta.`{p}`", p)]:
        assert [tuple(r) for r in ctx.sql(f"DELETE FROM {target} WHERE birthDate < '1955-01-01'")] == [(1,)]
        assert [tuple(r) for r in ctx.sql(f"UPDATE {target} SET gender = 'Female' WHERE gender = 'F'")] == [(3,)]
        assert [tuple(r) for r in ctx.sql(f"UPDATE {target} SET gender = 'Male' WHERE gender = 'M'")] == [(1,)]
        assert ctx.rows(f"SELECT * FROM {target}") == norm(expected)
        ctx.deltars(where, ["id", "gender"], [(r[0], r[4]) for r in expected])
    assert [r.operation for r in history(ctx, "people10m")][:3] == ["UPDATE", "UPDATE", "DELETE"]


@doc("update", "merge-upsert",
     "MERGE INTO people10m USING people10mupdates ON people10m.id = people10mupdates.id "
     "WHEN MATCHED THEN UPDATE SET id = people10mupdates.id, ... "
     "WHEN NOT MATCHED THEN INSERT (id, ...) VALUES (people10mupdates.id, ...)")
def _(ctx: Ctx):
    path = make_people(ctx, "people10m", rows=PEOPLE[:3])
    changed = (3, "Quyen", "Marlen", "Dome-Smith", "M", ts("1970-10-11 04:00:00"), "957-57-8246", 60000)
    new = (6, "Ana", "B", "C", "F", ts("1980-01-01 00:00:00"), "000-00-0000", 1000)
    make_people(ctx, "people10mupdates", rows=[changed, new])
    out = ctx.sql("""
    MERGE INTO people10m
    USING people10mupdates
    ON people10m.id = people10mupdates.id
    WHEN MATCHED THEN
      UPDATE SET
        id = people10mupdates.id,
        firstName = people10mupdates.firstName,
        middleName = people10mupdates.middleName,
        lastName = people10mupdates.lastName,
        gender = people10mupdates.gender,
        birthDate = people10mupdates.birthDate,
        ssn = people10mupdates.ssn,
        salary = people10mupdates.salary
    WHEN NOT MATCHED
      THEN INSERT (
        id,
        firstName,
        middleName,
        lastName,
        gender,
        birthDate,
        ssn,
        salary
      )
      VALUES (
        people10mupdates.id,
        people10mupdates.firstName,
        people10mupdates.middleName,
        people10mupdates.lastName,
        people10mupdates.gender,
        people10mupdates.birthDate,
        people10mupdates.ssn,
        people10mupdates.salary
      )
    """)
    assert [tuple(r) for r in out] == [(2, 1, 0, 1)]
    after = PEOPLE[:2] + [changed, new]
    assert ctx.rows("SELECT * FROM people10m") == norm(after)
    m = commit_info(path, 2)["operationMetrics"]
    assert (m["numSourceRows"], m["numTargetRowsUpdated"], m["numTargetRowsInserted"], m["numTargetRowsDeleted"]) == \
        ("2", "1", "1", "0")
    ctx.deltars(path, ["id", "lastName", "salary"], [(r[0], r[3], r[7]) for r in after])


def key_value_tables(ctx: Ctx, target_rows, source_rows, target_cols="key INT, value STRING",
                     source_cols="key, value", source_is_view=True) -> str:
    ctx.sql(f"CREATE TABLE {ctx.db}.target ({target_cols}) USING DELTA")
    if target_rows:
        ctx.sql(f"INSERT INTO {ctx.db}.target VALUES {values(target_rows)}")
    ctx.sql(f"CREATE OR REPLACE TEMP VIEW source AS SELECT * FROM VALUES {values(source_rows)} AS s({source_cols})")
    return ctx.managed("target")


@doc("update", "merge-not-matched-by-source-delete",
     "MERGE INTO target USING source ON source.key = target.key WHEN MATCHED UPDATE SET * "
     "WHEN NOT MATCHED INSERT * WHEN NOT MATCHED BY SOURCE DELETE")
def _(ctx: Ctx):
    path = key_value_tables(ctx, [(1, "a"), (2, "b"), (3, "c")], [(2, "B"), (4, "D")])
    # the page leaves out THEN, which Spark's grammar (delta-spark's too) requires: a parse error
    ctx.fails("MERGE INTO target USING source ON source.key = target.key WHEN MATCHED UPDATE SET * "
              "WHEN NOT MATCHED INSERT * WHEN NOT MATCHED BY SOURCE DELETE", r"PARSE_SYNTAX_ERROR|ParseException",
              table=path)
    out = ctx.sql("""
    MERGE INTO target
    USING source
    ON source.key = target.key
    WHEN MATCHED THEN
      UPDATE SET *
    WHEN NOT MATCHED THEN
      INSERT *
    WHEN NOT MATCHED BY SOURCE THEN
      DELETE
    """)
    assert [tuple(r) for r in out] == [(4, 1, 2, 1)]
    assert ctx.rows("SELECT * FROM target") == [(2, "B"), (4, "D")]
    ctx.deltars(path, ["key", "value"], [(2, "B"), (4, "D")])


@doc("update", "merge-not-matched-by-source-update",
     "MERGE INTO target USING source ON source.key = target.key "
     "WHEN MATCHED THEN UPDATE SET target.lastSeen = source.timestamp "
     "WHEN NOT MATCHED THEN INSERT (key, lastSeen, status) VALUES (source.key,  source.timestamp, 'active') "
     "WHEN NOT MATCHED BY SOURCE AND target.lastSeen >= (current_date() - INTERVAL '5' DAY) THEN "
     "UPDATE SET target.status = 'inactive'")
def _(ctx: Ctx):
    ctx.sql(f"CREATE TABLE {ctx.db}.target (key INT, lastSeen DATE, status STRING) USING DELTA")
    ctx.sql(f"INSERT INTO {ctx.db}.target VALUES (1, date_sub(current_date(), 1), 'active'), "
            f"(2, date_sub(current_date(), 2), 'active'), (3, date_sub(current_date(), 30), 'active')")
    ctx.sql("CREATE OR REPLACE TEMP VIEW source AS SELECT key, current_date() AS timestamp "
            "FROM VALUES (1), (4) AS s(key)")
    ctx.sql("""
    MERGE INTO target
    USING source
    ON source.key = target.key
    WHEN MATCHED THEN
      UPDATE SET target.lastSeen = source.timestamp
    WHEN NOT MATCHED THEN
      INSERT (key, lastSeen, status) VALUES (source.key,  source.timestamp, 'active')
    WHEN NOT MATCHED BY SOURCE AND target.lastSeen >= (current_date() - INTERVAL '5' DAY) THEN
      UPDATE SET target.status = 'inactive'
    """)
    after = [(1, 0, "active"), (2, 2, "inactive"), (3, 30, "active"), (4, 0, "active")]
    assert ctx.rows("SELECT key, datediff(current_date(), lastSeen), status FROM target") == after
    ctx.deltars(ctx.managed("target"), ["key", "status"], [(k, s) for k, _, s in after])


@doc("update", "merge-semantics",
     "(a merge fails when several source rows match one target row: Operation semantics)",
     "(MERGE on a SQL VIEW defined as CREATE VIEW viewName AS SELECT * FROM deltaTable)",
     "(the types of update / insert expressions are cast to the table's: Schema validation)",
     "(UPDATE SET * / INSERT * need every target column in the source; extra source columns are ignored)")
def _(ctx: Ctx):
    path = key_value_tables(ctx, [(1, "a"), (2, "b")], [(1, "x"), (1, "y")])
    ctx.fails("MERGE INTO target USING source ON source.key = target.key WHEN MATCHED THEN UPDATE SET *",
              r"DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE|multiple source rows", table=path)
    # a view over the Delta table is a MERGE target
    ctx.sql(f"CREATE VIEW {ctx.db}.viewName AS SELECT * FROM {ctx.db}.target")
    ctx.sql("CREATE OR REPLACE TEMP VIEW src2 AS SELECT * FROM VALUES (2, 'B', 'ignored') AS s(key, value, extra)")
    ctx.sql(f"MERGE INTO {ctx.db}.viewName v USING src2 s ON v.key = s.key WHEN MATCHED THEN UPDATE SET *")
    assert ctx.rows("SELECT * FROM target") == [(1, "a"), (2, "B")]
    assert ctx.rows(f"SELECT * FROM {ctx.db}.viewName") == [(1, "a"), (2, "B")]        # the view reads it too
    assert norm(ctx.spark.table(f"{ctx.db}.viewName").collect()) == [(1, "a"), (2, "B")]
    ctx.sql("CREATE OR REPLACE TEMP VIEW tempView AS SELECT key FROM target WHERE key > 1")   # and a temporary one
    assert ctx.rows("SELECT * FROM tempView") == [(2,)]
    # a source of other types: cast to the table's (BIGINT key and INT value into INT key, STRING value)
    ctx.sql("CREATE OR REPLACE TEMP VIEW src3 AS SELECT CAST(3 AS BIGINT) AS key, 33 AS value")
    ctx.sql("MERGE INTO target t USING src3 s ON t.key = s.key WHEN NOT MATCHED THEN INSERT *")
    assert ctx.rows("SELECT * FROM target") == [(1, "a"), (2, "B"), (3, "33")]
    assert [(f["name"], f["type"]) for f in schema_fields(path)] == [("key", "integer"), ("value", "string")]
    # a source missing a target column: UPDATE SET * is an analysis error
    ctx.sql("CREATE OR REPLACE TEMP VIEW src4 AS SELECT 1 AS key")
    ctx.fails("MERGE INTO target t USING src4 s ON t.key = s.key WHEN MATCHED THEN UPDATE SET *",
              r"UNRESOLVED|cannot resolve|value", table=path)
    ctx.deltars(path, ["key", "value"], [(1, "a"), (2, "B"), (3, "33")])


AUTO_MERGE = {"spark.databricks.delta.schema.autoMerge.enabled": "true"}


@doc("update", "merge-schema-evolution",
     "MERGE INTO target_table t USING source_table s ON t.key = s.key WHEN MATCHED THEN UPDATE SET * "
     "WHEN NOT MATCHED THEN INSERT * [target key, value; source key, value, new_value]",
     "MERGE INTO target_table t USING source_table s ON t.key = s.key WHEN MATCHED THEN UPDATE SET * "
     "WHEN NOT MATCHED THEN INSERT * [target key, old_value; source key, new_value]",
     "MERGE INTO target_table t USING source_table s ON t.key = s.key WHEN MATCHED THEN UPDATE SET new_value = s.new_value",
     "MERGE INTO target_table t USING source_table s ON t.key = s.key WHEN NOT MATCHED THEN INSERT (key, new_value) "
     "VALUES (s.key, s.new_value)")
def _(ctx: Ctx):
    db = ctx.db

    def tables(name, target_cols, target_rows, source_cols, source_rows):
        ctx.sql(f"CREATE TABLE {db}.{name} ({target_cols}) USING DELTA")
        ctx.sql(f"INSERT INTO {db}.{name} VALUES {values(target_rows)}")
        ctx.sql(f"CREATE OR REPLACE TEMP VIEW source_table AS SELECT * FROM VALUES {values(source_rows)} "
                f"AS s({source_cols})")
        return ctx.managed(name)

    star = "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    # 1. a new source column: ignored without evolution, added with it
    for name, conf in [("t1", {}), ("t1e", AUTO_MERGE)]:
        tables(name, "key INT, value STRING", [(1, "a"), (2, "b")], "key, value, new_value",
               [(1, "A", "nA"), (3, "C", "nC")])
        with ctx.conf(conf):
            ctx.sql(f"MERGE INTO {db}.{name} t USING source_table s ON t.key = s.key {star}")
    assert ctx.rows(f"SELECT * FROM {db}.t1") == [(1, "A"), (2, "b"), (3, "C")]
    assert ctx.rows(f"SELECT * FROM {db}.t1e") == [(1, "A", "nA"), (2, "b", None), (3, "C", "nC")]
    # 2.-4. a target column missing from the source, a source column missing from the target
    queries = [star, "WHEN MATCHED THEN UPDATE SET new_value = s.new_value",
               "WHEN NOT MATCHED THEN INSERT (key, new_value) VALUES (s.key, s.new_value)"]
    expected = [[(1, "o1", "n1"), (2, "o2", None), (3, None, "n3")],
                [(1, "o1", "n1"), (2, "o2", None)],
                [(1, "o1", None), (2, "o2", None), (3, None, "n3")]]
    path = tables("t2", "key INT, old_value STRING", [(1, "o1"), (2, "o2")], "key, new_value",
                  [(1, "n1"), (3, "n3")])
    for q in queries:
        ctx.fails(f"MERGE INTO {db}.t2 t USING source_table s ON t.key = s.key {q}",
                  r"UNRESOLVED|cannot resolve|new_value|old_value|DELTA_MERGE", table=path)
    for i, (q, rows) in enumerate(zip(queries, expected)):
        name = f"t2e{i}"
        p = tables(name, "key INT, old_value STRING", [(1, "o1"), (2, "o2")], "key, new_value", [(1, "n1"), (3, "n3")])
        with ctx.conf(AUTO_MERGE):
            ctx.sql(f"MERGE INTO {db}.{name} t USING source_table s ON t.key = s.key {q}")
        assert [f["name"] for f in schema_fields(p)] == ["key", "old_value", "new_value"], q
        assert ctx.rows(f"SELECT * FROM {db}.{name}") == rows, q
        ctx.deltars(p, ["key", "old_value", "new_value"], rows)


@doc("update", "merge-arrays-of-structs",
     "(array<struct<b: string, a: string>> into array<struct<a: int, b: int>>: resolved by name)",
     "(array<struct<a: int, c: string, d: string>> into array<struct<a: string, b: string>>: error / evolves)",
     "(array<struct<a: string, b: struct<c: string, d: string>>> into array<struct<a: string, b: struct<c: string>>>)")
def _(ctx: Ctx):
    db = ctx.db
    star = "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"

    def tables(name, target_type, target_value, source_sql):
        ctx.sql(f"CREATE TABLE {db}.{name} (key INT, arr {target_type}) USING DELTA")
        ctx.sql(f"INSERT INTO {db}.{name} SELECT 1, {target_value}")
        ctx.sql(f"CREATE OR REPLACE TEMP VIEW source_table AS {source_sql}")
        return ctx.managed(name)

    # 1. by name, cast: the same with and without evolution
    src1 = ("SELECT * FROM VALUES (1, array(named_struct('b', '20', 'a', '10'))), "
            "(2, array(named_struct('b', '40', 'a', '30'))) AS s(key, arr)")
    p = tables("a1", "ARRAY<STRUCT<a: INT, b: INT>>", "array(named_struct('a', 1, 'b', 2))", src1)
    ctx.sql(f"MERGE INTO {db}.a1 t USING source_table s ON t.key = s.key {star}")
    assert ctx.rows(f"SELECT key, arr[0].a, arr[0].b FROM {db}.a1") == [(1, 10, 20), (2, 30, 40)]
    assert schema_fields(p)[1]["type"]["elementType"]["fields"][0] == {"name": "a", "type": "integer",
                                                                       "nullable": True, "metadata": {}}
    # 2. new struct fields c, d
    src2 = ("SELECT * FROM VALUES (1, array(named_struct('a', 5, 'c', 'c1', 'd', 'd1'))), "
            "(2, array(named_struct('a', 6, 'c', 'c2', 'd', 'd2'))) AS s(key, arr)")
    p = tables("a2", "ARRAY<STRUCT<a: STRING, b: STRING>>", "array(named_struct('a', 'x', 'b', 'y'))", src2)
    ctx.fails(f"MERGE INTO {db}.a2 t USING source_table s ON t.key = s.key {star}", r"c|d|struct|cast|DELTA", table=p)
    ctx.sql(f"INSERT INTO {db}.a2 SELECT 3, array(named_struct('a', 'z', 'b', 'w'))")
    with ctx.conf(AUTO_MERGE):
        ctx.sql(f"MERGE INTO {db}.a2 t USING source_table s ON t.key = s.key {star}")
    assert [f["name"] for f in schema_fields(p)[1]["type"]["elementType"]["fields"]] == ["a", "b", "c", "d"]
    assert ctx.rows(f"SELECT key, arr[0].a, arr[0].b, arr[0].c, arr[0].d FROM {db}.a2") == [
        (1, "5", None, "c1", "d1"), (2, "6", None, "c2", "d2"), (3, "z", "w", None, None)]
    # 3. a new field of a struct inside the array's struct
    src3 = ("SELECT * FROM VALUES (1, array(named_struct('a', 'A', 'b', named_struct('c', 'C', 'd', 'D')))) "
            "AS s(key, arr)")
    p = tables("a3", "ARRAY<STRUCT<a: STRING, b: STRUCT<c: STRING>>>",
               "array(named_struct('a', 'x', 'b', named_struct('c', 'y')))", src3)
    ctx.fails(f"MERGE INTO {db}.a3 t USING source_table s ON t.key = s.key {star}", r"d|struct|cast|DELTA", table=p)
    ctx.sql(f"INSERT INTO {db}.a3 SELECT 2, array(named_struct('a', 'q', 'b', named_struct('c', 'r')))")
    with ctx.conf(AUTO_MERGE):
        ctx.sql(f"MERGE INTO {db}.a3 t USING source_table s ON t.key = s.key {star}")
    assert ctx.rows(f"SELECT key, arr[0].a, arr[0].b.c, arr[0].b.d FROM {db}.a3") == [
        (1, "A", "C", "D"), (2, "q", "r", None)]


@doc("update", "merge-deduplication-and-search-space",
     "MERGE INTO logs USING newDedupedLogs ON logs.uniqueId = newDedupedLogs.uniqueId AND logs.date > current_date() - "
     "INTERVAL 7 DAYS WHEN NOT MATCHED AND newDedupedLogs.date > current_date() - INTERVAL 7 DAYS THEN INSERT *",
     "(the same statement, the page's second SQL tab)",
     "events.date = current_date() AND events.country = 'USA' -- Performance tuning: a MERGE condition")
def _(ctx: Ctx):
    db = ctx.db
    ctx.sql(f"CREATE TABLE {db}.logs (uniqueId INT, date DATE, msg STRING) USING DELTA")
    ctx.sql(f"INSERT INTO {db}.logs VALUES (1, date_sub(current_date(), 1), 'a'), (2, date_sub(current_date(), 30), 'b')")
    ctx.sql("CREATE OR REPLACE TEMP VIEW newDedupedLogs AS SELECT uniqueId, date_sub(current_date(), age) AS date, msg "
            "FROM VALUES (1, 1, 'a'), (2, 30, 'b'), (3, 2, 'c'), (4, 20, 'd') AS n(uniqueId, age, msg)")
    for _ in range(2):   # the page shows the statement twice; running it again inserts nothing more
        ctx.sql("""
        MERGE INTO logs
        USING newDedupedLogs
        ON logs.uniqueId = newDedupedLogs.uniqueId AND logs.date > current_date() - INTERVAL 7 DAYS
        WHEN NOT MATCHED AND newDedupedLogs.date > current_date() - INTERVAL 7 DAYS
          THEN INSERT *
        """)
    assert ctx.rows("SELECT uniqueId, msg FROM logs") == [(1, "a"), (2, "b"), (3, "c")]
    ctx.deltars(ctx.managed("logs"), ["uniqueId", "msg"], [(1, "a"), (2, "b"), (3, "c")])
    ctx.sql(f"CREATE TABLE {db}.events (id INT, date DATE, country STRING, v INT) USING DELTA PARTITIONED BY (date, country)")
    ctx.sql(f"INSERT INTO {db}.events VALUES (1, current_date(), 'USA', 0), (1, current_date(), 'FR', 0), "
            f"(1, date_sub(current_date(), 1), 'USA', 0)")
    ctx.sql("CREATE OR REPLACE TEMP VIEW updates AS SELECT 1 AS id, 9 AS v")
    ctx.sql("MERGE INTO events USING updates ON events.id = updates.id AND events.date = current_date() "
            "AND events.country = 'USA' WHEN MATCHED THEN UPDATE SET events.v = updates.v")
    assert ctx.rows("SELECT datediff(current_date(), date), country, v FROM events") == [
        (0, "FR", 0), (0, "USA", 9), (1, "USA", 0)]


# ================================================================================================
# Table utility commands — https://docs.delta.io/delta-utility/
# ================================================================================================

def make_events_table(ctx: Ctx) -> str:
    ctx.sql(f"CREATE TABLE {ctx.db}.eventsTable (id INT, v STRING) USING DELTA")
    ctx.sql(f"INSERT INTO {ctx.db}.eventsTable VALUES (1, 'a'), (2, 'b')")
    return ctx.managed("eventsTable")


def stray(path: str, name: str, age_hours: float) -> Path:
    f = Path(path) / name
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_bytes(b"not referenced by the table")
    t = now() - age_hours * HOUR
    os.utime(f, (t, t))
    return f


@doc("utility", "vacuum",
     "VACUUM eventsTable", "VACUUM eventsTable LITE", "VACUUM '/data/events'", "VACUUM delta.`/data/events/`",
     "VACUUM delta.`/data/events/` RETAIN 100 HOURS", "VACUUM eventsTable DRY RUN")
def _(ctx: Ctx):
    path = make_events_table(ctx)
    old = stray(path, "stray_old.parquet", 240)        # older than the 7-day default
    mid = stray(path, "stray_120h.parquet", 120)       # older than 100 hours, younger than 7 days
    fresh = stray(path, "stray_fresh.parquet", 0)
    hidden = stray(path, "_checkpoints/offsets.txt", 240)   # directories starting with _ are left alone
    dry = ctx.sql("VACUUM eventsTable DRY RUN")
    assert [Path(re.sub(r"^file:", "", r.path)).name for r in dry] == ["stray_old.parquet"] and old.exists()
    ctx.sql("VACUUM eventsTable LITE")                  # from the log: untracked files are not its business
    assert old.exists()
    out = ctx.sql("VACUUM eventsTable")
    assert [re.sub(r"^file:", "", r.path).rstrip("/") for r in out] == [path]
    assert not old.exists() and mid.exists() and fresh.exists() and hidden.exists()
    # a retention below the table's (7 days) is refused while the safety check is on
    ctx.fails(f"VACUUM delta.`{path}` RETAIN 100 HOURS", r"retention|Are you sure", table=path)
    with ctx.conf({"spark.databricks.delta.retentionDurationCheck.enabled": "false"}):
        ctx.sql(f"VACUUM delta.`{path}` RETAIN 100 HOURS")
    assert not mid.exists() and fresh.exists()
    ctx.sql(f"VACUUM '{path}'")
    ops = [(r.operation, r.operationMetrics) for r in history(ctx, "eventsTable")]
    assert [o for o, _ in ops][:2] == ["VACUUM END", "VACUUM START"]
    starts = [m for o, m in ops if o == "VACUUM START"]
    ends = [m for o, m in ops if o == "VACUUM END"]
    assert all("numFilesToDelete" in m for m in starts)
    assert all({"numDeletedFiles", "numVacuumedDirectories"} <= set(m) for m in ends)
    assert sorted(int(m["numDeletedFiles"]) for m in ends) == [0, 0, 1, 1]   # LITE, FULL, RETAIN 100, path
    ctx.deltars(path, ["id"], [(1,), (2,)])


@doc("utility", "vacuum-using-inventory",
     "VACUUM eventsTable USING INVENTORY inventoryTable",
     "VACUUM eventsTable USING INVENTORY (select * from inventoryTable)")
def _(ctx: Ctx):
    path = make_events_table(ctx)
    listed = stray(path, "listed_old.parquet", 240)
    unlisted = stray(path, "unlisted_old.parquet", 240)
    ctx.sql(f"CREATE TABLE {ctx.db}.inventoryTable (path STRING, length BIGINT, isDir BOOLEAN, "
            f"modificationTime BIGINT) USING DELTA")
    files = [Path(path) / f for f in active_files(path)]
    entries = [(f"file:{f}", f.stat().st_size, False, int(f.stat().st_mtime * 1000)) for f in files + [listed]]
    ctx.sql(f"INSERT INTO {ctx.db}.inventoryTable VALUES {values(entries)}")
    ctx.sql("VACUUM eventsTable USING INVENTORY inventoryTable")
    assert not listed.exists() and unlisted.exists()      # only what the inventory lists is considered
    listed2 = stray(path, "listed2_old.parquet", 240)
    ctx.sql(f"INSERT INTO {ctx.db}.inventoryTable VALUES "
            f"{values([(f'file:{listed2}', listed2.stat().st_size, False, int(listed2.stat().st_mtime * 1000))])}")
    ctx.sql("VACUUM eventsTable USING INVENTORY (select * from inventoryTable)")
    assert not listed2.exists() and unlisted.exists()
    assert ctx.rows("SELECT * FROM eventsTable") == [(1, "a"), (2, "b")]


HISTORY_COLUMNS = ["version", "timestamp", "userId", "userName", "operation", "operationParameters", "job",
                   "notebook", "clusterId", "readVersion", "isolationLevel", "isBlindAppend", "operationMetrics",
                   "userMetadata"]
METRICS = {
    "CREATE TABLE AS SELECT": {"numFiles", "numOutputBytes", "numOutputRows"},
    "WRITE": {"numFiles", "numOutputBytes", "numOutputRows"},
    "DELETE": {"numAddedFiles", "numRemovedFiles", "numDeletedRows", "numCopiedRows", "executionTimeMs", "scanTimeMs",
               "rewriteTimeMs"},
    "UPDATE": {"numAddedFiles", "numRemovedFiles", "numUpdatedRows", "numCopiedRows", "executionTimeMs", "scanTimeMs",
               "rewriteTimeMs"},
    "MERGE": {"numSourceRows", "numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted",
              "numTargetRowsCopied", "numOutputRows", "numTargetFilesAdded", "numTargetFilesRemoved", "executionTimeMs",
              "scanTimeMs", "rewriteTimeMs"},
    "OPTIMIZE": {"numAddedFiles", "numRemovedFiles", "numAddedBytes", "numRemovedBytes", "minFileSize", "p25FileSize",
                 "p50FileSize", "p75FileSize", "maxFileSize"},
    "RESTORE": {"tableSizeAfterRestore", "numOfFilesAfterRestore", "numRemovedFiles", "numRestoredFiles",
                "removedFilesSize", "restoredFilesSize"},
}


def active_files(path: str) -> dict[str, int]:
    """The table's active files and sizes, replaying the JSON commits (an oracle apart from tahoe)."""
    files: dict[str, int] = {}
    for v in log_versions(path):
        for a in commit_actions(path, v):
            if "add" in a:
                files[a["add"]["path"]] = a["add"]["size"]
            elif "remove" in a:
                files.pop(a["remove"]["path"], None)
    return files


@doc("utility", "describe-history-and-detail",
     "DESCRIBE HISTORY '/data/events/'", "DESCRIBE HISTORY delta.`/data/events/`",
     "DESCRIBE HISTORY '/data/events/' LIMIT 1", "DESCRIBE HISTORY eventsTable",
     "DESCRIBE DETAIL '/data/events/'", "DESCRIBE DETAIL eventsTable")
def _(ctx: Ctx):
    db = ctx.db
    ctx.sql(f"CREATE TABLE {db}.eventsTable USING DELTA PARTITIONED BY (part) AS "
            f"SELECT * FROM VALUES (1, 'a', 0), (2, 'b', 0), (3, 'c', 1) AS s(id, v, part)")   # v0
    path = ctx.managed("eventsTable")
    ctx.sql(f"INSERT INTO {db}.eventsTable VALUES (4, 'd', 1)")                                   # v1
    ctx.sql(f"DELETE FROM {db}.eventsTable WHERE id = 1")                                         # v2
    ctx.sql(f"UPDATE {db}.eventsTable SET v = 'C' WHERE id = 3")                                  # v3
    ctx.sql("CREATE OR REPLACE TEMP VIEW s AS SELECT * FROM VALUES (2, 'B', 0), (5, 'e', 1) AS s(id, v, part)")
    ctx.sql(f"MERGE INTO {db}.eventsTable t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET * "
            f"WHEN NOT MATCHED THEN INSERT *")                                                    # v4
    ctx.sql(f"OPTIMIZE {db}.eventsTable")                                                         # v5
    ctx.sql(f"RESTORE TABLE {db}.eventsTable TO VERSION AS OF 4")                                 # v6
    ops = ["RESTORE", "OPTIMIZE", "MERGE", "UPDATE", "DELETE", "WRITE", "CREATE TABLE AS SELECT"]
    for form in (f"'{path}'", f"delta.`{path}`", "eventsTable"):
        df = ctx.df(f"DESCRIBE HISTORY {form}")
        assert df.columns[:len(HISTORY_COLUMNS)] == HISTORY_COLUMNS
        got = df.collect()
        assert [(r.version, r.operation) for r in got] == list(zip(range(6, -1, -1), ops))   # newest first
    types = dict(ctx.df("DESCRIBE HISTORY eventsTable").dtypes)
    assert (types["version"], types["timestamp"], types["isBlindAppend"]) == ("bigint", "timestamp", "boolean")
    assert types["operationParameters"].startswith("map") and types["operationMetrics"].startswith("map")
    last = ctx.sql(f"DESCRIBE HISTORY '{path}' LIMIT 1")
    assert [(r.version, r.operation) for r in last] == [(6, "RESTORE")]
    by_version = {r.version: r for r in ctx.sql("DESCRIBE HISTORY eventsTable")}
    for r in by_version.values():
        assert METRICS[r.operation] <= set(r.operationMetrics), (r.operation, r.operationMetrics)
        assert r.readVersion == (None if r.version == 0 else r.version - 1)
        assert r.isBlindAppend == (r.operation in ("WRITE", "CREATE TABLE AS SELECT"))
    m = {v: by_version[v].operationMetrics for v in by_version}
    assert (m[0]["numOutputRows"], m[1]["numOutputRows"], m[2]["numDeletedRows"], m[3]["numUpdatedRows"]) == \
        ("3", "1", "1", "1")
    assert (m[4]["numSourceRows"], m[4]["numTargetRowsUpdated"], m[4]["numTargetRowsInserted"]) == ("2", "1", "1")
    # DESCRIBE DETAIL: one row, the page's columns, the values the log holds
    files = active_files(path)
    protocol = last_protocol(path)
    for form in (f"'{path}'", "eventsTable"):
        df = ctx.df(f"DESCRIBE DETAIL {form}")
        cols = ["format", "id", "name", "description", "location", "createdAt", "lastModified", "partitionColumns",
                "numFiles", "sizeInBytes", "properties", "minReaderVersion", "minWriterVersion"]
        assert [c for c in df.columns if c in cols] == cols
        (d,) = df.collect()
        assert d.format == "delta" and d.id == last_metadata(path)["id"]
        assert re.sub(r"^file:", "", d.location).rstrip("/") == path
        assert d.partitionColumns == ["part"] and d.numFiles == len(files) and d.sizeInBytes == sum(files.values())
        assert (d.minReaderVersion, d.minWriterVersion) == (protocol["minReaderVersion"], protocol["minWriterVersion"])
        assert d.name == (None if form.startswith("'") else f"spark_catalog.{db}.eventstable")
    rows = [(2, "B", 0), (3, "C", 1), (4, "d", 1), (5, "e", 1)]
    assert ctx.rows("SELECT * FROM eventsTable") == rows
    ctx.deltars(path, ["id", "v", "part"], rows)


@doc("utility", "generate-manifest",
     "GENERATE symlink_format_manifest FOR TABLE delta.`<path-to-delta-table>`")
def _(ctx: Ctx):
    p = ctx.path("events")
    ctx.sql(f"CREATE TABLE delta.`{p}` USING DELTA AS SELECT * FROM VALUES (1, 'a'), (2, 'b') AS s(id, v)")
    ctx.sql(f"GENERATE symlink_format_manifest FOR TABLE delta.`{p}`")
    manifest = (Path(p) / "_symlink_format_manifest" / "manifest").read_text().split()
    assert sorted(Path(re.sub(r"^file:", "", m)).name for m in manifest) == sorted(
        Path(f).name for f in active_files(p))


def parquet_dir(ctx: Ctx, name: str, partitioned: bool) -> str:
    """A plain parquet table written by Spark (not Delta)."""
    p = ctx.path(name)
    df = ctx.spark.createDataFrame([(1, "a", 1, 10), (2, "b", 1, 20), (3, "c", 2, 10)], "id INT, v STRING, part INT, part2 INT")
    w = df.write.mode("overwrite")
    (w.partitionBy("part", "part2") if partitioned else w).parquet(p)
    return p


@doc("utility", "convert-parquet",
     "CONVERT TO DELTA parquet.`<path-to-table>`",
     "CONVERT TO DELTA parquet.`<path-to-table>` NO STATISTICS",
     "CONVERT TO DELTA parquet.`<path-to-table>` PARTITIONED BY (part int, part2 int)",
     "CONVERT TO DELTA parquet.`<path-to-table>` NO STATISTICS PARTITIONED BY (part int, part2 int)")
def _(ctx: Ctx):
    rows = [(1, "a", 1, 10), (2, "b", 1, 20), (3, "c", 2, 10)]
    for name, clause, partitioned, stats in [("p1", "", False, True), ("p2", "NO STATISTICS", False, False),
                                             ("p3", "PARTITIONED BY (part int, part2 int)", True, True),
                                             ("p4", "NO STATISTICS PARTITIONED BY (part int, part2 int)", True, False)]:
        p = parquet_dir(ctx, name, partitioned)
        n_files = len(data_files(p))
        ctx.sql(f"CONVERT TO DELTA parquet.`{p}` {clause}")
        assert log_versions(p) == [0]
        ci = commit_info(p, 0)
        assert ci["operation"] == "CONVERT" and ci["operationMetrics"]["numConvertedFiles"] == str(n_files)
        adds = [a["add"] for a in commit_actions(p, 0) if "add" in a]
        assert len(adds) == n_files and all(bool(a.get("stats")) == stats for a in adds), name
        assert last_metadata(p)["partitionColumns"] == (["part", "part2"] if partitioned else [])
        assert ctx.rows(f"SELECT id, v, part, part2 FROM delta.`{p}`") == rows
        ctx.deltars(p, ["id", "v", "part", "part2"], rows)
    # (tahoe's own contract) an Iceberg source is refused by name, nothing written
    ice = ctx.path("not_converted")
    ctx.fails(f"CONVERT TO DELTA iceberg.`{ice}`", r"Iceberg tables are not supported")
    ctx.fails(f"CREATE TABLE {ctx.db}.ice SHALLOW CLONE iceberg.`{ice}`", r"Iceberg tables are not supported")
    assert not Path(ice, "_delta_log").exists() and "ice" not in ctx.tables()


def iceberg_copy(ctx: Ctx, name: str) -> str:
    """An Iceberg table (parquet data): tahoe's UniForm table with its Delta log taken away."""
    import shutil

    p = ctx.path(name + "_uniform")
    ctx.sql(f"CREATE TABLE delta.`{p}` (id INT, v STRING) USING DELTA TBLPROPERTIES ("
            f"'delta.enableIcebergCompatV2' = 'true', 'delta.universalFormat.enabledFormats' = 'iceberg', "
            f"'delta.columnMapping.mode' = 'name')")
    ctx.sql(f"INSERT INTO delta.`{p}` VALUES (1, 'a'), (2, 'b')")
    target = ctx.path(name)
    shutil.copytree(p, target)
    shutil.rmtree(Path(target) / "_delta_log")
    assert (Path(target) / "metadata").is_dir()
    return target


# Converting or cloning an Iceberg table needs delta-iceberg, a module (jar) apart from delta-spark; tahoe
# has no Iceberg metadata reader, so these examples are refused by name (README: "Not supported") —
# what is asserted below, on a real Iceberg table, with nothing written.
ICEBERG_REFUSED = r"Iceberg tables are not supported by tahoe"


@doc("utility", "convert-iceberg",
     "CONVERT TO DELTA iceberg.`<path-to-table>`",
     "CONVERT TO DELTA iceberg.`<path-to-table>` NO STATISTICS")
def _(ctx: Ctx):
    p = iceberg_copy(ctx, "ice")
    for statement in (f"CONVERT TO DELTA iceberg.`{p}`", f"CONVERT TO DELTA iceberg.`{p}` NO STATISTICS"):
        ctx.fails(statement, ICEBERG_REFUSED)
    assert not (Path(p) / "_delta_log").exists()


@doc("utility", "restore",
     "RESTORE TABLE db.target_table TO VERSION AS OF <version>",
     "RESTORE TABLE delta.`/data/target/` TO TIMESTAMP AS OF <timestamp>",
     "(the page's table: INSERT, INSERT, OPTIMIZE, RESTORE(version=1) and its log entries)")
def _(ctx: Ctx):
    db = ctx.db
    ctx.sql(f"CREATE TABLE {db}.people USING DELTA AS SELECT * FROM VALUES ('Viktor', 29), ('George', 55) AS s(name, age)")
    path = ctx.managed("people")
    ctx.sql(f"INSERT INTO {db}.people VALUES ('George', 39)")
    v1_files = active_files(path)
    ctx.sql(f"OPTIMIZE {db}.people")
    optimized = active_files(path)
    assert len(optimized) == 1 and all(not a["add"]["dataChange"] for a in commit_actions(path, 2) if "add" in a)
    set_commit_time(path, 0, epoch("2019-02-13T10:00:00"))
    set_commit_time(path, 1, epoch("2019-02-14T10:00:00"))
    set_commit_time(path, 2, epoch("2019-02-15T10:00:00"))
    out = ctx.df(f"RESTORE TABLE {db}.people TO VERSION AS OF 1")
    assert out.columns == ["table_size_after_restore", "num_of_files_after_restore", "num_removed_files",
                           "num_restored_files", "removed_files_size", "restored_files_size"]
    assert [tuple(r) for r in out.collect()] == [(sum(v1_files.values()), len(v1_files), 1, len(v1_files),
                                                  sum(optimized.values()), sum(v1_files.values()))]
    acts = commit_actions(path, 3)
    assert {a["add"]["path"] for a in acts if "add" in a} == set(v1_files)
    assert all(a["add"]["dataChange"] for a in acts if "add" in a)
    assert [a["remove"]["path"] for a in acts if "remove" in a] == list(optimized)
    assert commit_info(path, 3)["operation"] == "RESTORE"
    three = [("George", 39), ("George", 55), ("Viktor", 29)]
    assert ctx.rows(f"SELECT * FROM {db}.people") == three
    with ctx.conf(UTC):
        ctx.sql(f"RESTORE TABLE delta.`{path}` TO TIMESTAMP AS OF '2019-02-14'")            # a date: version 0
        assert ctx.rows(f"SELECT * FROM {db}.people") == [("George", 55), ("Viktor", 29)]
        ctx.sql(f"RESTORE TABLE delta.`{path}` TO TIMESTAMP AS OF '2019-02-14 12:00:00'")   # version 1, again
    assert ctx.rows(f"SELECT * FROM {db}.people") == three
    # a version whose files VACUUM deleted cannot be restored, unless missing files are ignored
    with ctx.conf({"spark.databricks.delta.retentionDurationCheck.enabled": "false"}):
        ctx.sql(f"VACUUM {db}.people RETAIN 0 HOURS")
    ctx.fails(f"RESTORE TABLE {db}.people TO VERSION AS OF 2", r"not found|missing|FileNotFound|DELTA_", table=path)
    with ctx.conf({"spark.sql.files.ignoreMissingFiles": "true"}):
        ctx.sql(f"RESTORE TABLE {db}.people TO VERSION AS OF 2")
        assert ctx.rows(f"SELECT * FROM {db}.people") == []          # its one file is gone
    ctx.deltars(path, ["name", "age"], three, version=5)


def clone_source(ctx: Ctx) -> str:
    ctx.sql(f"CREATE TABLE {ctx.db}.source_table (id INT, v STRING) USING DELTA")
    ctx.sql(f"INSERT INTO {ctx.db}.source_table VALUES (1, 'a'), (2, 'b')")
    ctx.sql(f"INSERT INTO {ctx.db}.source_table VALUES (3, 'c')")
    return ctx.managed("source_table")


@doc("utility", "shallow-clone",
     "CREATE TABLE delta.`/data/target/` SHALLOW CLONE delta.`/data/source/`",
     "CREATE OR REPLACE TABLE db.target_table SHALLOW CLONE db.source_table",
     "CREATE TABLE IF NOT EXISTS delta.`/data/target/` SHALLOW CLONE db.source_table",
     "CREATE TABLE db.target_table SHALLOW CLONE delta.`/data/source`",
     "CREATE TABLE db.target_table SHALLOW CLONE delta.`/data/source` VERSION AS OF version",
     "CREATE TABLE db.target_table SHALLOW CLONE delta.`/data/source` TIMESTAMP AS OF timestamp_expression",
     "CREATE TABLE delta.`/model/dataset` SHALLOW CLONE entire_dataset VERSION AS OF 15")
def _(ctx: Ctx):
    db = ctx.db
    src = clone_source(ctx)
    files = active_files(src)
    all_rows = [(1, "a"), (2, "b"), (3, "c")]
    tgt = ctx.path("target")
    out = ctx.df(f"CREATE TABLE delta.`{tgt}` SHALLOW CLONE delta.`{src}`")
    assert out.columns[:2] == ["source_table_size", "source_num_of_files"]
    assert tuple(out.collect()[0])[:2] == (sum(files.values()), len(files))
    assert log_versions(tgt) == [0] and commit_info(tgt, 0)["operation"] == "CLONE"   # its own history
    assert ctx.rows(f"SELECT * FROM delta.`{tgt}`") == all_rows
    assert data_files(tgt) == set()                           # the clone's files are the source's
    ctx.sql(f"CREATE TABLE IF NOT EXISTS delta.`{tgt}` SHALLOW CLONE {db}.source_table")
    assert log_versions(tgt) == [0]
    for _ in range(2):   # creates, then replaces
        ctx.sql(f"CREATE OR REPLACE TABLE {db}.target_table SHALLOW CLONE {db}.source_table")
        assert ctx.rows(f"SELECT * FROM {db}.target_table") == all_rows
    assert log_versions(ctx.managed("target_table")) == [0, 1]
    ctx.sql(f"CREATE TABLE {db}.target2 SHALLOW CLONE delta.`{src}`")
    assert ctx.rows(f"SELECT * FROM {db}.target2") == all_rows
    ctx.sql(f"CREATE TABLE {db}.target_v SHALLOW CLONE delta.`{src}` VERSION AS OF 1")
    assert ctx.rows(f"SELECT * FROM {db}.target_v") == all_rows[:2]
    t0 = now()
    for v, age in [(0, 80), (1, 72), (2, 1)]:
        set_commit_time(src, v, t0 - age * HOUR)
    ctx.sql(f"CREATE TABLE {db}.target_ts SHALLOW CLONE delta.`{src}` TIMESTAMP AS OF date_sub(current_date(), 1)")
    assert ctx.rows(f"SELECT * FROM {db}.target_ts") == all_rows[:2]
    # a changed clone leaves its source as it was
    ctx.sql(f"DELETE FROM {db}.target2 WHERE id = 1")
    assert ctx.rows(f"SELECT * FROM {db}.source_table") == all_rows
    ctx.deltars(ctx.managed("target2"), ["id", "v"], all_rows[1:])
    ctx.deltars(tgt, ["id", "v"], all_rows)
    # the machine-learning example: a clone of version 15
    ctx.sql(f"CREATE TABLE {db}.entire_dataset (id INT) USING DELTA")
    ctx.sql(f"INSERT INTO {db}.entire_dataset VALUES (1)")
    for i in range(2, 16):
        ctx.sql(f"ALTER TABLE {db}.entire_dataset SET TBLPROPERTIES ('step' = '{i}')")
    ctx.sql(f"INSERT INTO {db}.entire_dataset VALUES (2)")                  # version 16
    model = ctx.path("model_dataset")
    ctx.sql(f"CREATE TABLE delta.`{model}` SHALLOW CLONE {db}.entire_dataset VERSION AS OF 15")
    assert ctx.rows(f"SELECT * FROM delta.`{model}`") == [(1,)]
    assert last_metadata(model)["configuration"].get("step") == "15"


@doc("utility", "clone-short-term-experiment",
     "CREATE OR REPLACE TABLE my_test SHALLOW CLONE my_prod_table;",
     "UPDATE my_test WHERE user_id is null SET invalid=true;",
     "MERGE INTO my_prod_table USING my_test ON my_test.user_id <=> my_prod_table.user_id "
     "WHEN MATCHED AND my_test.user_id is null THEN UPDATE *;",
     "DROP TABLE my_test;")
def _(ctx: Ctx):
    db = ctx.db
    ctx.sql(f"CREATE TABLE {db}.my_prod_table (user_id INT, invalid BOOLEAN) USING DELTA")
    ctx.sql(f"INSERT INTO {db}.my_prod_table VALUES (1, false), (NULL, false), (2, false)")
    prod = ctx.managed("my_prod_table")
    ctx.sql("CREATE OR REPLACE TABLE my_test SHALLOW CLONE my_prod_table")
    clone = ctx.managed("my_test")
    # two of the page's statements do not parse on delta-spark either (WHERE before SET; UPDATE *)
    ctx.fails("UPDATE my_test WHERE user_id is null SET invalid=true", r"PARSE_SYNTAX_ERROR|ParseException",
              table=clone)
    ctx.fails("MERGE INTO my_prod_table USING my_test ON my_test.user_id <=> my_prod_table.user_id "
              "WHEN MATCHED AND my_test.user_id is null THEN UPDATE *", r"PARSE_SYNTAX_ERROR|ParseException", table=prod)
    assert [tuple(r) for r in ctx.sql("UPDATE my_test SET invalid=true WHERE user_id is null")] == [(1,)]
    assert ctx.rows("SELECT * FROM my_prod_table") == [(1, False), (2, False), (None, False)]
    ctx.sql("MERGE INTO my_prod_table USING my_test ON my_test.user_id <=> my_prod_table.user_id "
            "WHEN MATCHED AND my_test.user_id is null THEN UPDATE SET *")
    after = [(1, False), (2, False), (None, True)]
    assert ctx.rows("SELECT * FROM my_prod_table") == norm(after)
    ctx.sql("DROP TABLE my_test")
    assert "my_test" not in ctx.tables() and not Path(clone).exists()
    assert ctx.rows("SELECT * FROM my_prod_table") == norm(after)      # the source's files are untouched
    ctx.deltars(prod, ["user_id", "invalid"], after)


@doc("utility", "clone-table-property-overrides",
     "CREATE OR REPLACE TABLE archive.my_table SHALLOW CLONE prod.my_table TBLPROPERTIES ("
     "delta.logRetentionDuration = '3650 days', delta.deletedFileRetentionDuration = '3650 days') "
     "LOCATION 'xx://archive/my_table'")
def _(ctx: Ctx):
    archive, prod = f"{ctx.db}_archive", f"{ctx.db}_prod"
    for d in (archive, prod):
        ctx.sql(f"CREATE DATABASE {d} LOCATION '{ctx.tmp / d}'")
    try:
        ctx.sql(f"CREATE TABLE {prod}.my_table (id INT) USING DELTA")
        ctx.sql(f"INSERT INTO {prod}.my_table VALUES (1), (2)")
        loc = ctx.path("archive_my_table")
        ctx.sql(f"""CREATE OR REPLACE TABLE {archive}.my_table SHALLOW CLONE {prod}.my_table
        TBLPROPERTIES (
          delta.logRetentionDuration = '3650 days',
          delta.deletedFileRetentionDuration = '3650 days'
        )
        LOCATION '{loc}'""")
        conf = last_metadata(loc)["configuration"]
        assert conf["delta.logRetentionDuration"] == "3650 days"
        assert conf["delta.deletedFileRetentionDuration"] == "3650 days"
        assert ctx.rows(f"SELECT * FROM {archive}.my_table") == [(1,), (2,)]
        ctx.deltars(loc, ["id"], [(1,), (2,)])
        ctx.finish()
    finally:
        for d in (archive, prod):
            ctx.sql(f"DROP DATABASE IF EXISTS {d} CASCADE")


@doc("utility", "clone-parquet",
     "CREATE OR REPLACE TABLE <target_table_name> SHALLOW CLONE parquet.`/path/to/data`;")
def _(ctx: Ctx):
    p = parquet_dir(ctx, "plain", partitioned=False)
    ctx.sql(f"CREATE OR REPLACE TABLE {ctx.db}.target_table SHALLOW CLONE parquet.`{p}`")
    assert not (Path(p) / "_delta_log").exists()                  # the source stays a parquet table
    rows = [(1, "a", 1, 10), (2, "b", 1, 20), (3, "c", 2, 10)]
    assert ctx.rows(f"SELECT * FROM {ctx.db}.target_table") == rows
    ctx.deltars(ctx.managed("target_table"), ["id", "v", "part", "part2"], rows)


@doc("utility", "clone-iceberg",
     "CREATE OR REPLACE TABLE <target_table_name> SHALLOW CLONE iceberg.`/path/to/data`;")
def _(ctx: Ctx):
    p = iceberg_copy(ctx, "ice")
    ctx.fails(f"CREATE OR REPLACE TABLE {ctx.db}.target_table SHALLOW CLONE iceberg.`{p}`", ICEBERG_REFUSED)
    assert not ctx.spark.catalog.tableExists(f"{ctx.db}.target_table")


# ================================================================================================
# Optimizations — https://docs.delta.io/optimizations-oss/
# ================================================================================================

@doc("optimizations", "optimize-compaction",
     "OPTIMIZE '/path/to/delta/table'", "OPTIMIZE delta_table_name;", "OPTIMIZE delta.`/path/to/delta/table`;",
     "OPTIMIZE delta_table_name WHERE date >= '2017-01-01'")
def _(ctx: Ctx):
    db = ctx.db
    ctx.sql(f"CREATE TABLE {db}.delta_table_name (id INT, date DATE) USING DELTA PARTITIONED BY (date)")
    path = ctx.managed("delta_table_name")
    rows = []
    for i in range(3):   # three small files in each of two partitions
        batch = [(10 * i + 1, dt.date(2016, 12, 31)), (10 * i + 2, dt.date(2017, 1, 2))]
        ctx.sql(f"INSERT INTO {db}.delta_table_name VALUES {values(batch)}")
        rows += batch

    def per_partition():
        out: dict[str, int] = {}
        for f in active_files(path):
            out[f.split("/")[0]] = out.get(f.split("/")[0], 0) + 1
        return out

    assert per_partition() == {"date=2016-12-31": 3, "date=2017-01-02": 3}
    res = ctx.sql(f"OPTIMIZE {db}.delta_table_name WHERE date >= '2017-01-01'")
    assert res[0].metrics.numFilesAdded == 1 and res[0].metrics.numFilesRemoved == 3
    assert per_partition() == {"date=2016-12-31": 3, "date=2017-01-02": 1}
    ctx.fails(f"OPTIMIZE {db}.delta_table_name WHERE id > 1", r"partition|DELTA_", table=path)   # partition columns only
    ctx.sql(f"OPTIMIZE {db}.delta_table_name")
    assert per_partition() == {"date=2016-12-31": 1, "date=2017-01-02": 1}
    versions = log_versions(path)
    for form in (f"'{path}'", f"delta.`{path}`"):       # idempotent: nothing left to compact
        res = ctx.sql(f"OPTIMIZE {form}")
        assert (res[0].metrics.numFilesAdded, res[0].metrics.numFilesRemoved) == (0, 0)
    assert log_versions(path) == versions
    assert all(not a["add"]["dataChange"] for v in versions[-2:] for a in commit_actions(path, v) if "add" in a)
    assert ctx.rows(f"SELECT * FROM {db}.delta_table_name") == norm(rows)
    ctx.deltars(path, ["id", "date"], rows)


@doc("optimizations", "optimize-zorder",
     "OPTIMIZE events ZORDER BY (eventType)",
     "OPTIMIZE events WHERE date = '2021-11-18' ZORDER BY (eventType)")
def _(ctx: Ctx):
    db = ctx.db
    ctx.sql(f"CREATE TABLE {db}.events (id INT, eventType STRING, date DATE) USING DELTA PARTITIONED BY (date)")
    path = ctx.managed("events")
    rows = []
    for i in range(2):
        batch = [(10 * i + 1, "click", dt.date(2021, 11, 18)), (10 * i + 2, "view", dt.date(2021, 11, 18)),
                 (10 * i + 3, "view", dt.date(2021, 11, 19))]
        ctx.sql(f"INSERT INTO {db}.events VALUES {values(batch)}")
        rows += batch
    ctx.sql("OPTIMIZE events WHERE date = '2021-11-18' ZORDER BY (eventType)")
    ci = commit_info(path, log_versions(path)[-1])
    assert ci["operation"] == "OPTIMIZE" and ci["operationParameters"]["zOrderBy"] == '["eventType"]'
    parts = sorted(f.split("/")[0] for f in active_files(path))
    assert parts == ["date=2021-11-18", "date=2021-11-19", "date=2021-11-19"]
    ctx.sql("OPTIMIZE events ZORDER BY (eventType)")
    assert sorted(f.split("/")[0] for f in active_files(path)) == ["date=2021-11-18", "date=2021-11-19"]
    ctx.fails("OPTIMIZE events ZORDER BY (date)", r"partition", table=path)     # not a partition column
    assert ctx.rows("SELECT * FROM events") == norm(rows)
    ctx.deltars(path, ["id", "eventType"], [(r[0], r[1]) for r in rows])


# ================================================================================================
# Constraints — https://docs.delta.io/delta-constraints/
# ================================================================================================

@doc("constraints", "not-null",
     "CREATE TABLE default.people10m (id INT NOT NULL, firstName STRING, middleName STRING NOT NULL, ...) USING DELTA;",
     "ALTER TABLE default.people10m CHANGE COLUMN middleName DROP NOT NULL;")
def _(ctx: Ctx):
    db = ctx.db
    t, path = f"{db}.people10m", ctx.managed("people10m")
    ctx.sql(f"""CREATE TABLE {t} (
        id INT NOT NULL,
        firstName STRING,
        middleName STRING NOT NULL,
        lastName STRING,
        gender STRING,
        birthDate TIMESTAMP,
        ssn STRING,
        salary INT
    ) USING DELTA""")
    assert [f["nullable"] for f in schema_fields(path)][:3] == [False, True, False]
    no_middle = (1, "A", None, "B", "F", ts("1990-01-01 00:00:00"), "s", 1)
    ctx.fails(f"INSERT INTO {t} VALUES {values([no_middle])}", r"NOT_NULL|NOT NULL|null", table=path)
    ctx.sql(f"ALTER TABLE {t} CHANGE COLUMN middleName DROP NOT NULL")
    assert [f["nullable"] for f in schema_fields(path)][:3] == [False, True, True]
    ctx.sql(f"INSERT INTO {t} VALUES {values([no_middle])}")
    ctx.fails(f"INSERT INTO {t} VALUES {values([(None,) + no_middle[1:]])}", r"NOT_NULL|NOT NULL|null", table=path)
    assert ctx.rows(f"SELECT id, middleName FROM {t}") == [(1, None)]
    # NOT NULL inside a struct constrains the struct too; inside arrays and maps it is not accepted
    ctx.sql(f"CREATE TABLE {db}.nested (id INT, s STRUCT<a: INT NOT NULL>) USING DELTA")
    ctx.fails(f"INSERT INTO {db}.nested VALUES (1, NULL)", r"NOT_NULL|NOT NULL|null", table=ctx.managed("nested"))
    ctx.sql(f"INSERT INTO {db}.nested VALUES (2, named_struct('a', 5))")
    ctx.fails(f"CREATE TABLE {db}.arr (id INT, xs ARRAY<STRUCT<a: INT NOT NULL>>) USING DELTA",
              r"NOT NULL|NESTED_NOT_NULL")
    ctx.deltars(path, ["id", "middleName"], [(1, None)])


@doc("constraints", "check",
     "ALTER TABLE default.people10m ADD CONSTRAINT dateWithinRange CHECK (birthDate > '1900-01-01');",
     "ALTER TABLE default.people10m DROP CONSTRAINT dateWithinRange;",
     "ALTER TABLE default.people10m ADD CONSTRAINT validIds CHECK (id > 1 and id < 99999999);",
     "DESCRIBE DETAIL default.people10m;",
     "SHOW TBLPROPERTIES default.people10m;")
def _(ctx: Ctx):
    t = f"{ctx.db}.people10m"
    path = make_people(ctx, "people10m", rows=PEOPLE[:2])
    old = (9, "Old", "O", "O", "M", ts("1899-12-31 00:00:00"), "s", 1)
    ctx.sql(f"ALTER TABLE {t} ADD CONSTRAINT dateWithinRange CHECK (birthDate > '1900-01-01')")
    assert last_metadata(path)["configuration"]["delta.constraints.datewithinrange"] == "birthDate > '1900-01-01'"
    assert commit_info(path, 2)["operation"] == "ADD CONSTRAINT"
    ctx.fails(f"INSERT INTO {t} VALUES {values([old])}", r"CHECK constraint|DELTA_VIOLATE_CONSTRAINT|datewithinrange",
              table=path)
    ctx.sql(f"ALTER TABLE {t} DROP CONSTRAINT dateWithinRange")
    assert "delta.constraints.datewithinrange" not in last_metadata(path)["configuration"]
    ctx.sql(f"INSERT INTO {t} VALUES {values([old])}")
    # adding a constraint checks the rows already there
    ctx.fails(f"ALTER TABLE {t} ADD CONSTRAINT dateWithinRange CHECK (birthDate > '1900-01-01')",
              r"DELTA_NEW_CHECK_CONSTRAINT_VIOLATION|violate", table=path)
    ctx.sql(f"DELETE FROM {t} WHERE id = 9")
    ctx.fails(f"ALTER TABLE {t} ADD CONSTRAINT validIds CHECK (id > 1 and id < 99999999)",
              r"DELTA_NEW_CHECK_CONSTRAINT_VIOLATION|violate", table=path)   # id 1 is there
    ctx.sql(f"DELETE FROM {t} WHERE id = 1")
    ctx.sql(f"ALTER TABLE {t} ADD CONSTRAINT validIds CHECK (id > 1 and id < 99999999)")
    detail = ctx.sql(f"DESCRIBE DETAIL {t}")[0]
    assert detail.properties["delta.constraints.validids"] == "id > 1 and id < 99999999"
    props = {r.key: r.value for r in ctx.sql(f"SHOW TBLPROPERTIES {t}")}
    assert props["delta.constraints.validids"] == "id > 1 and id < 99999999"
    ctx.fails(f"INSERT INTO {t} VALUES {values([(1,) + PEOPLE[0][1:]])}", r"CHECK constraint|validids", table=path)
    ctx.deltars(path, ["id"], [(2,)])


# ================================================================================================
# Column mapping — https://docs.delta.io/delta-column-mapping/
# ================================================================================================

@doc("column-mapping", "enable-rename-drop",
     "ALTER TABLE <table_name> SET TBLPROPERTIES ('delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5', "
     "'delta.columnMapping.mode' = 'name')",
     "ALTER TABLE <table_name> RENAME COLUMN old_col_name TO new_col_name",
     "ALTER TABLE table_name DROP COLUMN col_name;",
     "ALTER TABLE table_name DROP COLUMNS (col_name_1, col_name_2, ...);")
def _(ctx: Ctx):
    t, path = f"{ctx.db}.table_name", ctx.managed("table_name")
    ctx.sql(f"CREATE TABLE {t} (a INT, b STRING, c INT, d INT, e INT) USING DELTA")
    ctx.sql(f"INSERT INTO {t} VALUES (1, 'x', 3, 4, 5)")
    files = data_files(path)
    ctx.sql(f"""ALTER TABLE {t} SET TBLPROPERTIES (
      'delta.minReaderVersion' = '2',
      'delta.minWriterVersion' = '5',
      'delta.columnMapping.mode' = 'name'
    )""")
    proto = last_protocol(path)
    assert proto["minReaderVersion"] >= 2 and proto["minWriterVersion"] >= 5
    assert last_metadata(path)["configuration"]["delta.columnMapping.mode"] == "name"
    assert all({"delta.columnMapping.id", "delta.columnMapping.physicalName"} <= set(f["metadata"])
               for f in schema_fields(path))
    ctx.fails(f"ALTER TABLE {t} SET TBLPROPERTIES ('delta.columnMapping.mode' = 'none')", r"column mapping|mode",
              table=path)
    ctx.sql(f"ALTER TABLE {t} RENAME COLUMN b TO b_renamed")
    ctx.sql(f"ALTER TABLE {t} DROP COLUMN c")
    ctx.sql(f"ALTER TABLE {t} DROP COLUMNS (d, e)")
    assert [f["name"] for f in schema_fields(path)] == ["a", "b_renamed"] and data_files(path) == files
    assert ctx.rows(f"SELECT * FROM {t}") == [(1, "x")]
    ctx.deltars(path, ["a", "b_renamed"], [(1, "x")])


@doc("column-mapping", "special-characters",
     "(Supported characters in column names: spaces and ,;{}()=, with column mapping)")
def _(ctx: Ctx):
    cols = "`a b` INT, `c,d` STRING, `e;f` INT, `g{h}` INT, `i(j)` INT, `k=l` INT"
    ctx.fails(f"CREATE TABLE {ctx.db}.plain ({cols}) USING DELTA", r"invalid character|INVALID_CHARACTERS|column mapping")
    assert "plain" not in ctx.tables()
    ctx.sql(f"CREATE TABLE {ctx.db}.special ({cols}) USING DELTA {CM_PROPS}")
    ctx.sql(f"INSERT INTO {ctx.db}.special VALUES (1, 'x', 2, 3, 4, 5)")
    assert ctx.rows(f"SELECT `a b`, `c,d`, `k=l` FROM {ctx.db}.special") == [(1, "x", 5)]
    ctx.deltars(ctx.managed("special"), ["a b", "c,d", "k=l"], [(1, "x", 5)])


# ================================================================================================
# Change data feed — https://docs.delta.io/delta-change-data-feed/
# ================================================================================================

@doc("cdf", "enable-and-read",
     "CREATE TABLE student (id INT, name STRING, age INT) TBLPROPERTIES (delta.enableChangeDataFeed = true)",
     "SELECT * FROM table_changes('tableName', 0, 10)",
     "SELECT * FROM table_changes('tableName', '2021-04-21 05:45:46', '2021-05-21 12:00:00')",
     "SELECT * FROM table_changes('tableName', 0)",
     "SELECT * FROM table_changes('dbName.`dotted.tableName`', '2021-04-21 06:45:46' , '2021-05-21 12:00:00')",
     "SELECT * FROM table_changes_by_path('\\path', '2021-04-21 05:45:46')",
     "set spark.databricks.delta.changeDataFeed.timestampOutOfRange.enabled = true;")
def _(ctx: Ctx):
    db = ctx.db
    path = ctx.managed("student")
    # the page's CREATE TABLE names no provider: a session whose default source is delta
    with ctx.conf({"spark.sql.sources.default": "delta"}):
        ctx.sql(f"CREATE TABLE {db}.student (id INT, name STRING, age INT) "
                f"TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    assert last_metadata(path)["configuration"]["delta.enableChangeDataFeed"] == "true"
    ctx.sql(f"INSERT INTO {db}.student VALUES (1, 'a', 10), (2, 'b', 20)")                     # v1
    assert not any("cdc" in a for a in commit_actions(path, 1))   # insert-only: no _change_data
    ctx.sql(f"UPDATE {db}.student SET age = 11 WHERE id = 1")                                  # v2
    ctx.sql(f"DELETE FROM {db}.student WHERE id = 2")                                          # v3
    ctx.sql("CREATE OR REPLACE TEMP VIEW s AS SELECT 3 AS id, 'c' AS name, 30 AS age")
    ctx.sql(f"MERGE INTO {db}.student t USING s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *")  # v4
    for i in range(5, 11):
        ctx.sql(f"ALTER TABLE {db}.student SET TBLPROPERTIES ('pad' = '{i}')")                  # v5..v10
    ctx.sql(f"INSERT INTO {db}.student VALUES (4, 'd', 40)")                                   # v11
    times = {0: "2021-04-20T00:00:00", 1: "2021-04-21T05:45:46", 2: "2021-05-01T00:00:00", 3: "2021-05-21T12:00:00",
             4: "2021-05-22T00:00:00"}
    for v in range(5, 11):
        times[v] = f"2021-06-{v:02d}T00:00:00"
    for v, when in times.items():
        set_commit_time(path, v, epoch(when))
    changes = {1: [(1, "a", 10, "insert"), (2, "b", 20, "insert")],
               2: [(1, "a", 10, "update_preimage"), (1, "a", 11, "update_postimage")],
               3: [(2, "b", 20, "delete")], 4: [(3, "c", 30, "insert")], 11: [(4, "d", 40, "insert")]}

    def expect(versions):
        return norm([r + (v,) for v in versions for r in changes.get(v, [])])

    q = "SELECT id, name, age, _change_type, _commit_version FROM {}"
    with ctx.conf(UTC):
        df = ctx.df(f"SELECT * FROM table_changes('{db}.student', 0, 10)")
        assert df.dtypes[3:] == [("_change_type", "string"), ("_commit_version", "bigint"),
                                 ("_commit_timestamp", "timestamp")]
        got = df.collect()
        assert norm([tuple(r)[:5] for r in got]) == expect(range(0, 11))
        assert {r._commit_version: r._commit_timestamp for r in got}[1] == ts("2021-04-21 05:45:46")
        assert ctx.rows(q.format(f"table_changes('{db}.student', '2021-04-21 05:45:46', '2021-05-21 12:00:00')")) \
            == expect([1, 2, 3])
        assert ctx.rows(q.format(f"table_changes('{db}.student', 0)")) == expect(range(12))
        assert ctx.rows(q.format(f"table_changes_by_path('{path}', '2021-04-21 05:45:46')")) == expect(range(1, 12))
        # a start after the last commit is an error, unless out-of-range reads are allowed
        ctx.fails(f"SELECT * FROM table_changes('{db}.student', 20)", r"latest|greater|DELTA_")
        with ctx.conf({"spark.databricks.delta.changeDataFeed.timestampOutOfRange.enabled": "true"}):
            assert ctx.rows(q.format(f"table_changes('{db}.student', 20)")) == []
            assert ctx.rows(q.format(f"table_changes('{db}.student', 3, 30)")) == expect(range(3, 12))
        # a database and a backquoted table name inside the string (Spark's session catalog refuses
        # table names with a dot, so the quoted name here has none)
        dotted = f"{db}.`dotted_tableName`"
        ctx.sql(f"CREATE TABLE {dotted} (id INT) USING DELTA TBLPROPERTIES (delta.enableChangeDataFeed = true)")
        ctx.sql(f"INSERT INTO {dotted} VALUES (1)")
        ctx.sql(f"INSERT INTO {dotted} VALUES (2)")
        dpath = ctx.managed("dotted_tableName")
        for v, when in [(0, "2021-04-20T00:00:00"), (1, "2021-04-21T07:00:00"), (2, "2021-06-01T00:00:00")]:
            set_commit_time(dpath, v, epoch(when))
        assert ctx.rows(f"SELECT id, _change_type FROM table_changes('{db}.`dotted_tableName`', "
                        f"'2021-04-21 06:45:46' , '2021-05-21 12:00:00')") == [(1, "insert")]


@doc("cdf", "enable-later-and-defaults",
     "ALTER TABLE myDeltaTable SET TBLPROPERTIES (delta.enableChangeDataFeed = true)",
     "set spark.databricks.delta.properties.defaults.enableChangeDataFeed = true;")
def _(ctx: Ctx):
    db = ctx.db
    ctx.sql(f"CREATE TABLE {db}.myDeltaTable (id INT, part STRING) USING DELTA PARTITIONED BY (part)")
    ctx.sql(f"INSERT INTO {db}.myDeltaTable VALUES (1, 'x')")                             # v1: before
    ctx.sql(f"ALTER TABLE {db}.myDeltaTable SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")   # v2
    ctx.sql(f"INSERT INTO {db}.myDeltaTable VALUES (2, 'y'), (3, 'x')")                   # v3
    ctx.sql(f"DELETE FROM {db}.myDeltaTable WHERE part = 'y'")                            # v4: a whole partition
    path = ctx.managed("myDeltaTable")
    assert not any("cdc" in a for a in commit_actions(path, 4))   # full partition deletes write no change data
    # only changes after enabling are recorded
    ctx.fails(f"SELECT * FROM table_changes('{db}.myDeltaTable', 0)", r"change data|CDC|not enabled|DELTA_")
    assert ctx.rows(f"SELECT id, _change_type, _commit_version FROM table_changes('{db}.myDeltaTable', 2)") == [
        (2, "delete", 4), (2, "insert", 3), (3, "insert", 3)]
    with ctx.conf({"spark.databricks.delta.properties.defaults.enableChangeDataFeed": "true"}):
        ctx.sql(f"CREATE TABLE {db}.fresh (id INT) USING DELTA")
    assert last_metadata(ctx.managed("fresh"))["configuration"]["delta.enableChangeDataFeed"] == "true"
    ctx.sql(f"INSERT INTO {db}.fresh VALUES (7)")
    assert ctx.rows(f"SELECT id, _change_type FROM table_changes('{db}.fresh', 0)") == [(7, "insert")]


# ================================================================================================
# Liquid clustering — https://docs.delta.io/delta-clustering/
# ================================================================================================

def clustering(path: str) -> list:
    """The clustering columns the log's delta.clustering domain metadata holds."""
    cols = None
    for v in log_versions(path):
        for a in commit_actions(path, v):
            dm = a.get("domainMetadata")
            if dm and dm["domain"] == "delta.clustering":
                cols = json.loads(dm["configuration"])["clusteringColumns"]
    return cols


@doc("clustering", "create-optimize-alter",
     "CREATE TABLE table1(col0 int, col1 string) USING DELTA CLUSTER BY (col0);",
     "CREATE EXTERNAL TABLE table2 CLUSTER BY (col0) LOCATION 'table_location' AS SELECT * FROM table1;",
     "ALTER TABLE <table_name> CLUSTER BY (<clustering_columns>)",
     "OPTIMIZE table_name;", "OPTIMIZE table_name FULL;",
     "SELECT * FROM table_name WHERE clustering_column_name = \"some_value\";",
     "ALTER TABLE table_name CLUSTER BY (new_column1, new_column2);",
     "ALTER TABLE table_name CLUSTER BY NONE;", "DESCRIBE DETAIL table_name;")
def _(ctx: Ctx):
    db = ctx.db
    ctx.sql(f"CREATE TABLE {db}.table1(col0 int, col1 string) USING DELTA CLUSTER BY (col0);")
    p1 = ctx.managed("table1")
    proto = last_protocol(p1)
    assert proto["minReaderVersion"] == 1 and proto["minWriterVersion"] == 7
    assert {"clustering", "domainMetadata"} <= set(proto["writerFeatures"])
    assert clustering(p1) == [["col0"]]
    rows = []
    for i in range(3):
        batch = [(i * 10 + 1, "a"), (i * 10 + 2, "b")]
        ctx.sql(f"INSERT INTO {db}.table1 VALUES {values(batch)}")
        rows += batch
    loc = ctx.path("table_location")
    with ctx.conf({"spark.sql.sources.default": "delta"}):   # the page's CTAS names no provider
        ctx.sql(f"CREATE EXTERNAL TABLE {db}.table2 CLUSTER BY (col0) LOCATION '{loc}' AS SELECT * FROM table1;")
    assert clustering(loc) == [["col0"]] and ctx.rows(f"SELECT * FROM {db}.table2") == norm(rows)
    assert ctx.sql(f"DESCRIBE DETAIL {db}.table1;")[0].clusteringColumns == ["col0"]
    before = len(active_files(p1))
    assert before >= 3
    res = ctx.sql(f"OPTIMIZE {db}.table1;")
    assert res[0].metrics.numFilesRemoved == before and len(active_files(p1)) == 1
    assert commit_info(p1, log_versions(p1)[-1])["operation"] == "OPTIMIZE"
    ctx.sql(f"ALTER TABLE {db}.table1 CLUSTER BY (col1, col0);")
    assert clustering(p1) == [["col1"], ["col0"]]
    assert ctx.sql(f"DESCRIBE DETAIL {db}.table1")[0].clusteringColumns == ["col1", "col0"]
    ctx.sql(f"OPTIMIZE {db}.table1 FULL;")
    assert commit_info(p1, log_versions(p1)[-1])["operation"] == "OPTIMIZE"
    assert ctx.rows(f'SELECT * FROM {db}.table1 WHERE col1 = "b";') == norm([r for r in rows if r[1] == "b"])
    ctx.sql(f"ALTER TABLE {db}.table1 CLUSTER BY NONE;")
    assert clustering(p1) == [] and ctx.sql(f"DESCRIBE DETAIL {db}.table1")[0].clusteringColumns == []
    # an existing unpartitioned table gets clustering; a partitioned one cannot
    ctx.sql(f"CREATE TABLE {db}.plain (a INT, b INT) USING DELTA")
    ctx.sql(f"ALTER TABLE {db}.plain CLUSTER BY (a)")
    assert clustering(ctx.managed("plain")) == [["a"]]
    ctx.sql(f"CREATE TABLE {db}.parted (a INT, b INT) USING DELTA PARTITIONED BY (b)")
    ctx.fails(f"ALTER TABLE {db}.parted CLUSTER BY (a)", r"partition", table=ctx.managed("parted"))
    # not with partitioning, at most 4 columns
    ctx.fails(f"CREATE TABLE {db}.both (a INT, b INT) USING DELTA PARTITIONED BY (a) CLUSTER BY (b)",
              r"PARSE|partition|cluster")
    ctx.fails(f"CREATE TABLE {db}.many (a INT, b INT, c INT, d INT, e INT) USING DELTA CLUSTER BY (a, b, c, d, e)",
              r"4|clustering columns")
    assert not {"both", "many"} & ctx.tables()
    ctx.deltars(p1, ["col0", "col1"], rows)
    ctx.deltars(loc, ["col0", "col1"], rows)


@pytest.mark.parametrize("case", params())
def test_doc_example(case, sql_spark, db, tmp_path):
    ctx = Ctx(sql_spark, db, tmp_path)
    case.fn(ctx)
    ctx.finish()


def test_every_case_names_its_page():
    assert len({c.id for c in CASES}) == len(CASES)
    assert all(c.examples for c in CASES)

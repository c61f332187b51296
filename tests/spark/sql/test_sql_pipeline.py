"""A pipeline written only in SQL on local[2] and over Spark Connect (tests/spark/sql/pipeline.py),
checked against the values derived by hand there and against delta-rs reading the table the SQL
wrote; a catalog table that outlives its session in the Hive metastore; bad input that commits
nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tahoe.log import DeltaLog
from tests.maintenance.helpers import delta_rs_read, rows
from tests.spark.sql import pipeline

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

REPO = Path(__file__).resolve().parents[3]


def _check(out: dict, tmp_path) -> None:
    assert out["merge"] == [(3, 1, 1, 1)]     # affected, updated, deleted, inserted
    assert out["update"] == [(1,)] and out["delete"] == [(1,)]
    assert out["rows"] == pipeline.AFTER_DML
    assert out["v1"] == pipeline.INITIAL and out["v1_at"] == pipeline.INITIAL
    assert out["changes"] == pipeline.CHANGES
    assert out["optimize"] == [2, 1]          # the two files of 2024-01-03 packed into one
    assert out["history"] == pipeline.OPERATIONS
    assert out["after_vacuum"] == pipeline.FINAL
    location = out["location"]
    assert out["vacuum"] == [location]
    # delta-rs reads what the SQL wrote (the latest version; older ones were vacuumed)
    (latest,) = delta_rs_read([(location, None)], tmp_path)
    assert rows(latest, ["id", "item", "qty", "day"]) == pipeline.FINAL


def test_sql_pipeline_local(sql_spark, db, tmp_path):
    out = pipeline.run(sql_spark)
    out["merge"] = [tuple(int(v) for v in r) for r in out["merge"]]
    _check(out, tmp_path)
    assert out["location"].startswith(str(tmp_path / "db"))   # a managed table, in its database's directory


def _connect_env() -> dict:
    import pyspark

    env = dict(os.environ)
    env.update({"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
                "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_HOME": os.path.dirname(pyspark.__file__),
                "SPARK_TESTING": "1", "PYTHONPATH": str(REPO)})   # SPARK_TESTING: an ephemeral Connect port
    return env


def _driver(code: str, env: dict, cwd: Path, timeout: int = 600) -> dict:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env,
                       cwd=str(cwd))
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("TAHOE-OUT ")]
    errors = "\n".join(ln for ln in r.stderr.splitlines() if not ln.startswith(("\tat ", "\t...")) and " WARN " not in ln)
    assert lines, (r.returncode, r.stdout[-3000:], errors[-5000:])
    return json.loads(lines[-1][len("TAHOE-OUT "):])


def test_sql_pipeline_over_spark_connect(tmp_path):
    code = textwrap.dedent(f"""
        import json, os
        from pyspark.sql import SparkSession
        import tahoe.spark
        from tests.spark.sql import pipeline
        spark = (SparkSession.builder.remote("local[2]")
                 .config("spark.connect.grpc.binding.address", "127.0.0.1")
                 .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
                 .config("spark.sql.warehouse.dir", {str(tmp_path / 'wh')!r}).getOrCreate())
        tahoe.spark.enable(spark)
        out = pipeline.run(spark)
        print("TAHOE-OUT " + json.dumps(out, default=str), flush=True)
        os._exit(0)
    """)
    out = _driver(code, _connect_env(), tmp_path)
    for k in ("rows", "v1", "v1_at", "after_vacuum"):
        out[k] = [(i, item, q, __import__("datetime").date.fromisoformat(d)) for i, item, q, d in out[k]]
    for k in ("merge", "update", "delete", "changes"):
        out[k] = [tuple(r) for r in out[k]]
    _check(out, tmp_path)
    assert out["location"].startswith(str(tmp_path / "wh"))


def test_catalog_table_outlives_its_session_with_hive(tmp_path):
    """A managed table created in one process (Hive support: Derby metastore, warehouse in tmp) is
    found by name in the next one; DROP TABLE removes its files."""
    conf = {"spark.sql.warehouse.dir": str(tmp_path / "wh"),
            "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={tmp_path / 'metastore'};create=true"}
    head = textwrap.dedent(f"""
        import json, os
        from pyspark.sql import SparkSession
        from tahoe.spark import configure_spark_with_delta_pip, DeltaTable
        b = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
        for k, v in {conf!r}.items():
            b = b.config(k, v)
        spark = configure_spark_with_delta_pip(b.enableHiveSupport()).getOrCreate()
    """)
    first = head + textwrap.dedent("""
        spark.sql("CREATE DATABASE shop")
        spark.sql("CREATE TABLE shop.orders (id BIGINT, total DOUBLE) USING delta")
        spark.sql("INSERT INTO shop.orders VALUES (1, 9.5), (2, 20.0)")
        print("TAHOE-OUT " + json.dumps(spark.sql("DESCRIBE DETAIL shop.orders").collect()[0]["location"]), flush=True)
        os._exit(0)
    """)
    second = head + textwrap.dedent("""
        t = DeltaTable.forName(spark, "shop.orders")
        rows = sorted(tuple(r) for r in t.toDF().collect())
        rows2 = sorted(tuple(r) for r in spark.sql("SELECT * FROM shop.orders").collect())
        kind = [r for r in spark.sql("SHOW TABLE EXTENDED IN shop LIKE 'orders'").collect()][0]["information"]
        spark.sql("DROP TABLE shop.orders")
        print("TAHOE-OUT " + json.dumps([rows, rows2, "Type: MANAGED" in kind]), flush=True)
        os._exit(0)
    """)
    env = _connect_env()
    env.pop("SPARK_TESTING")
    location = _driver(first, env, tmp_path)
    assert location == str(tmp_path / "wh" / "shop.db" / "orders")
    assert DeltaLog.for_table(location).snapshot().version == 1
    rows_forname, rows_sql, managed = _driver(second, env, tmp_path)
    assert [tuple(r) for r in rows_forname] == [(1, 9.5), (2, 20.0)] == [tuple(r) for r in rows_sql]
    assert managed and not os.path.exists(location)   # a managed table's files go with DROP TABLE


def _state(path: str) -> tuple:
    log = DeltaLog.for_table(path)
    files = sorted(f for _, _, fs in os.walk(path) for f in fs)
    return log.snapshot().version, files


def test_bad_input_is_refused_clearly_and_commits_nothing(sql_spark, db):
    from pyspark.errors import AnalysisException, ParseException

    from tahoe.errors import TableNotFoundError, VersionNotFoundError

    spark = sql_spark
    spark.sql("CREATE TABLE t (id BIGINT, v STRING) USING delta")
    spark.sql("INSERT INTO t VALUES (1, 'a')")
    path = spark.sql("DESCRIBE DETAIL t").collect()[0]["location"]
    before = _state(path)

    with pytest.raises(AnalysisException, match=r"TABLE_OR_VIEW_NOT_FOUND.*`nope`"):
        spark.sql("DELETE FROM nope WHERE id = 1")
    with pytest.raises(TableNotFoundError, match=r"TABLE_OR_VIEW_NOT_FOUND"):
        spark.sql("OPTIMIZE nope")
    with pytest.raises(AnalysisException, match=r"(?i)unresolved|cannot be resolved|no column.*missing"):
        spark.sql("UPDATE t SET missing = 1")
    with pytest.raises(AnalysisException, match=r"missing"):
        spark.sql("DELETE FROM t WHERE missing = 1")
    with pytest.raises(ParseException, match=r"APPLY \(UPGRADE UNIFORM\(\.\.\.\)\) is not supported"):
        spark.sql("REORG TABLE t APPLY (UPGRADE UNIFORM(ICEBERG_COMPAT_VERSION = 2))")
    with pytest.raises(ParseException, match=r"at or near 'VERSIONN'"):
        spark.sql("RESTORE TABLE t TO VERSIONN AS OF 0")
    with pytest.raises(VersionNotFoundError) as e:
        spark.sql("RESTORE TABLE t TO VERSION AS OF 7")
    assert isinstance(e.value, AnalysisException) and "7" in str(e.value)
    with pytest.raises(AnalysisException, match=r"ALREADY_EXISTS"):
        spark.sql("CREATE TABLE t (id BIGINT) USING delta")
    assert _state(path) == before
    assert sorted(tuple(r) for r in spark.sql("SELECT * FROM t").collect()) == [(1, "a")]

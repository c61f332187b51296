"""tahoe on a standalone Spark cluster (executors in their own JVMs and Python workers) and over
Spark Connect. Each runs its driver in a subprocess: one JVM can hold only one SparkContext, and the
test run's shared session already has it.

Each driver first uses `format("delta")` the way a user with tahoe installed on the nodes does —
no tahoe import, no register(), no addPyFile (and tahoe's .pth hook off in the driver, so nothing
of tahoe runs there): Spark finds the source on the nodes by itself (`pyspark_tahoe_delta`, in
the worktree's virtual environment that PYSPARK_PYTHON names). Then tahoe's own API in the same
driver (read_delta / write_delta; on the cluster, tahoe also shipped with addPyFile)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

REPO = Path(__file__).resolve().parents[2]


def _spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


def _env(tmp_path) -> dict:
    env = dict(os.environ)
    env.update({"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
                "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_HOME": _spark_home(),
                "SPARK_LOG_DIR": str(tmp_path / "logs"), "SPARK_WORKER_DIR": str(tmp_path / "work"),
                "SPARK_NO_DAEMONIZE": "1"})
    env.pop("PYTHONPATH", None)  # executors get tahoe from addPyFile, not from the environment
    return env


def connect_env(tmp_path) -> dict:
    """`_env` for a driver using `SparkSession.builder.remote("local[...]")`: its local Connect
    server on an ephemeral port and the client told that port (what pyspark does under
    SPARK_TESTING), since the default 15002 may be taken by another Connect server on the machine."""
    env = _env(tmp_path)
    env["SPARK_TESTING"] = "1"
    return env


# the no-register part of a driver: tahoe installed where Spark's Python runs, nothing of tahoe in
# the driver (TAHOE_PYSPARK_HOOK=0 keeps its .pth hook off there); rows checked by hand
_NO_REGISTER = """
import sys
from pyspark.sql import SparkSession
def no_register_round_trip(spark, path):
    df = spark.sql("select id, cast(id % 3 as string) as p from range(300)")
    df.write.format("delta").mode("append").option("partitionBy", "p").save(path)
    df.filter("id < 10").write.format("delta").mode("append").save(path)
    got = sorted((r.id, r.p) for r in spark.read.format("delta").load(path).filter("p = '1'").collect())
    want = sorted([(i, "1") for i in range(300) if i % 3 == 1] + [(i, "1") for i in range(10) if i % 3 == 1])
    assert got == want, got[:5]
    assert spark.read.format("delta").load(path).count() == 310
    assert not [m for m in sys.modules if m == "tahoe" or m.startswith("tahoe.")], "the driver imported tahoe"
"""


def _run_driver(code: str, env: dict, timeout: int = 600) -> str:
    """Run a driver script in its own process; it must print TAHOE-OK. The limit is generous:
    a local Connect server alone takes about 2 minutes to start on a loaded 2-core machine."""
    env = dict(env)
    env["PYTHONPATH"] = str(REPO)  # the driver imports tahoe from the checkout (after its no-register part)
    env["TAHOE_PYSPARK_HOOK"] = "0"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)
    # the driver's own errors, without the JVM's stack traces and log lines
    errors = "\n".join(ln for ln in r.stderr.splitlines()
                       if not ln.startswith(("\tat ", "\t...")) and " WARN " not in ln and " INFO " not in ln)
    assert "TAHOE-OK" in r.stdout, (r.returncode, r.stdout[-3000:], errors[-5000:])
    return r.stdout


def test_standalone_cluster(tmp_path):
    from tests.storage.conftest import Emulators, new_bucket

    ems = Emulators()
    try:
        stores = {}
        for kind in ("s3", "azure", "gcs"):
            em = ems.get(kind)
            stores[kind] = (em.uri(new_bucket(em), "t"), em.options)
        _standalone_cluster(tmp_path, stores)
    finally:
        ems.stop()


# tables on object stores from the cluster's executors (their own processes; no store's
# credentials in any environment): S3's as session Hadoop confs (spark.hadoop.fs.s3a.*, handed
# to the source by tahoe), Azure's and GCS's as storage.<key> options; a write, a read and a
# DELETE (an Arrow scan job, then a write job) each, rows by hand
_OBJECT_STORES = """
def object_store_round_trips(spark, stores):
    from tahoe.spark import DeltaTable
    for kind, (uri, options) in sorted(stores.items()):
        opts = {} if kind == "s3" else {f"storage.{k}": v for k, v in options.items()}
        df = spark.sql("select id, cast(id % 2 as string) as p from range(20)")
        df.write.format("delta").options(**opts).save(uri)
        got = sorted(r.id for r in spark.read.format("delta").options(**opts).load(uri).collect())
        assert got == list(range(20)), (kind, got)
        dt = DeltaTable.forPath(spark, uri, None if kind == "s3" else options)
        dt.delete("id >= 15")
        got = sorted(r.id for r in dt.toDF().collect())
        assert got == list(range(15)), (kind, got)
"""


def _s3_hadoop_confs(options: dict) -> dict:
    return {"spark.hadoop.fs.s3a.access.key": options["AWS_ACCESS_KEY_ID"],
            "spark.hadoop.fs.s3a.secret.key": options["AWS_SECRET_ACCESS_KEY"],
            "spark.hadoop.fs.s3a.endpoint": options["AWS_ENDPOINT_URL"],
            "spark.hadoop.fs.s3a.endpoint.region": options["AWS_REGION"],
            "spark.hadoop.fs.s3a.path.style.access": "true"}


def _standalone_cluster(tmp_path, stores: dict):
    from bench.cluster import standalone_cluster

    env = _env(tmp_path)
    with standalone_cluster(cores=1, memory="1g", env=env) as master:
        port = master.rsplit(":", 1)[1]
        zip_base = str(tmp_path / "tahoe_pkg")
        shutil.make_archive(zip_base, "zip", root_dir=str(REPO), base_dir="tahoe")
        table = str(tmp_path / "t")
        extra = {"spark.executor.memory": "512m", "spark.cores.max": "1", **_s3_hadoop_confs(stores["s3"][1])}
        code = _NO_REGISTER + _OBJECT_STORES + textwrap.dedent(f"""
            import os
            spark = (SparkSession.builder.master("spark://127.0.0.1:{port}").appName("tahoe-no-register")
                     .config("spark.executor.memory", "512m").config("spark.cores.max", "1")
                     .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
                     .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
            no_register_round_trip(spark, {str(tmp_path / "plain")!r})
            pids = spark.sparkContext.parallelize(range(2), 2).map(lambda _: os.getpid()).collect()
            assert os.getpid() not in pids            # the source ran in the executors' Python workers
            spark.stop()

            from tahoe.spark import local_session, read_delta, write_delta, register
            spark = local_session("spark://127.0.0.1:{port}", "tahoe-cluster-test", extra={extra!r}, quick_start=True)
            spark.sparkContext.addPyFile({zip_base + '.zip'!r})   # ship tahoe to the executors
            register(spark)
            df = spark.sql("select id, cast(id % 3 as string) as p from range(1000)")
            write_delta(df, {table!r}, partition_by=["p"])
            rows = lambda d: sorted((r.id, r.p) for r in d.collect())
            assert rows(read_delta(spark, {table!r})) == [(i, str(i % 3)) for i in range(1000)]
            assert rows(read_delta(spark, {table!r}, filters="p = '1'")) == \
                [(i, "1") for i in range(1000) if i % 3 == 1]
            # the data-source path runs tahoe's Python reader on the executors
            assert rows(spark.read.format("delta").load({table!r}).filter("p = '2'")) == \
                [(i, "2") for i in range(1000) if i % 3 == 2]
            pids = spark.sparkContext.parallelize(range(2), 2).map(lambda _: os.getpid()).collect()
            assert os.getpid() not in pids
            object_store_round_trips(spark, {stores!r})
            print("TAHOE-OK")
            spark.stop()
        """)
        _run_driver(code, env)


def test_spark_connect(connect_server, tmp_path):
    """Both read paths over Spark Connect, on a table with column mapping (name mode), partitions and
    deletion vectors, against rows derived by hand (the rows written minus the rows deleted); then
    a write, a read and a DELETE of a table on S3 (moto) through the Connect server."""
    from tests.storage.conftest import Emulators, new_bucket

    ems = Emulators()
    try:
        em = ems.get("s3")
        _spark_connect(tmp_path, connect_server, (em.uri(new_bucket(em), "t"), em.options))
    finally:
        ems.stop()


def _spark_connect(tmp_path, connect_server, s3):
    import pyarrow as pa

    import tahoe
    from tahoe.log import DeltaLog
    from tahoe.write import delete_rows

    env = connect_env(tmp_path)
    table = str(tmp_path / "t")
    data = pa.table({"id": pa.array(range(40), pa.int64()), "name": [f"n{i}" for i in range(40)],
                     "part": [i % 2 for i in range(40)]})
    tahoe.write_table(table, data, partition_by="part",
                      properties={"delta.columnMapping.mode": "name", "delta.enableDeletionVectors": "true"})
    adds = DeltaLog.for_table(table).snapshot().add_files()
    assert len(adds) == 2
    # delete file-row positions 0 and 3 of each file: the rows are in write order within a partition
    delete_rows(table, {a.path: [0, 3] for a in adds})
    deleted = {0, 6, 1, 7}   # positions 0 and 3 of part 0 (ids 0, 2, 4, 6 ...) and of part 1 (1, 3, 5, 7 ...)
    expected = sorted((i, f"n{i}", i % 2) for i in range(40) if i not in deleted)
    code = _NO_REGISTER + textwrap.dedent(f"""
        import os
        spark = SparkSession.builder.remote({connect_server!r}).getOrCreate()   # the test session's server
        no_register_round_trip(spark, {str(tmp_path / "plain")!r})
        from tahoe.spark import read_delta, register
        expected = {expected!r}
        rows = lambda t: sorted((r["id"], r["name"], r["part"]) for r in t.to_pylist())
        got = read_delta(spark, {table!r}).toArrow()
        assert sorted(got.column_names) == ["id", "name", "part"], got.column_names
        assert rows(got) == expected, rows(got)
        register(spark)
        ds = spark.read.format("delta").load({table!r}).toArrow()
        assert rows(ds) == expected, rows(ds)
        from tahoe.spark import DeltaTable
        uri, options = {s3!r}
        opts = {{f"storage.{{k}}": v for k, v in options.items()}}
        spark.sql("select id from range(10)").write.format("delta").options(**opts).save(uri)
        assert sorted(r.id for r in spark.read.format("delta").options(**opts).load(uri).collect()) == list(range(10))
        DeltaTable.forPath(spark, uri, options).delete("id < 3")
        assert sorted(r.id for r in spark.read.format("delta").options(**opts).load(uri).collect()) == list(range(3, 10))
        print("TAHOE-OK")
        os._exit(0)
    """)
    _run_driver(code, env)

"""Spark on every object store, from plain PySpark (no Hadoop connector jars): S3 (moto, custom
endpoint), Azure Blob (Azurite) and GCS (fake-gcs-server), started once per module
(tests/fixtures/emulators.py).

On each store, through delta-spark's API: `format("delta")` writes and reads (time travel, the
change data feed), `DeltaTable` DML (DELETE / UPDATE / MERGE with deletion vectors), OPTIMIZE and
Z-order, a streaming source and sink — credentials given as delta-spark users give them (Hadoop
keys as reader / writer options, `DeltaTable.forPath(spark, uri, hadoopConf)`) or as `storage.<key>`
options. Rows are checked against rows derived by hand and against delta-rs reading the same
table with the same options. The JVM cannot reach these stores (plain PySpark ships no
connector): reads go through the `delta` data source and, for DML, through Arrow scan tasks —
asserted, not assumed (`jvm_reaches`)."""

from __future__ import annotations

import pytest

from tahoe.table import Table
from tests.fixtures.deltars import run_deltars
from tests.storage.conftest import Emulators, new_bucket

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

KINDS = ["s3", "azure", "gcs"]


@pytest.fixture(scope="module")
def emulators():
    ems = Emulators()
    yield ems
    ems.stop()


@pytest.fixture(params=KINDS)
def store(request, emulators):
    em = emulators.get(request.param)
    return em, new_bucket(em)


def hadoop_keys(em) -> dict:
    """The emulator's credentials as a delta-spark user writes them (Hadoop keys), plus the
    endpoint where Hadoop has no key tahoe maps (an emulator's address)."""
    o = em.options
    if em.kind == "s3":
        return {"fs.s3a.access.key": o["AWS_ACCESS_KEY_ID"], "fs.s3a.secret.key": o["AWS_SECRET_ACCESS_KEY"],
                "fs.s3a.endpoint": o["AWS_ENDPOINT_URL"].split("://", 1)[1], "fs.s3a.connection.ssl.enabled": "false",
                "fs.s3a.path.style.access": "true", "fs.s3a.endpoint.region": o["AWS_REGION"]}
    if em.kind == "azure":
        return {f"fs.azure.account.key.{o['AZURE_STORAGE_ACCOUNT_NAME']}.dfs.core.windows.net":
                o["AZURE_STORAGE_ACCOUNT_KEY"],
                "storage.azure_storage_endpoint": o["AZURE_STORAGE_ENDPOINT"], "storage.allow_http": "true"}
    return {"fs.gs.auth.service.account.json.keyfile": o["GOOGLE_SERVICE_ACCOUNT"],
            "storage.google_allow_http": "true"}


def storage_keys(em) -> dict:
    return {f"storage.{k}": v for k, v in em.options.items()}


def rows(df, *cols):
    return sorted(tuple(r[c] for c in cols) for r in df.collect())


def deltars_rows(em, uri, *cols, version=None):
    """The table's rows as delta-rs reads them (its QueryBuilder: deletion vectors applied), with
    the same storage options."""
    import tempfile
    from pathlib import Path

    job = {"path": uri, "storage_options": em.options}
    if version is not None:
        job["version"] = version
    res = run_deltars([job], Path(tempfile.mkdtemp(prefix="tahoe-deltars-")))[0]
    assert res["error"] is None, res["error"]
    return sorted(tuple(r[c] for c in cols) for r in res["rows"].to_pylist())


def test_spark_on_every_store(spark, store):
    """Writes, reads, time travel, CDF, DML with deletion vectors, OPTIMIZE / Z-order on one table
    per store; every read checked by hand and by delta-rs."""
    from tahoe.spark import DeltaTable
    from tahoe.spark.read import jvm_reaches

    em, bucket = store
    uri = em.uri(bucket, "events")
    assert not jvm_reaches(uri, spark)     # plain PySpark: no connector for any of them
    df = spark.createDataFrame([(i, f"d{i % 3}", "a b" if i % 2 else "c%d") for i in range(12)],
                               "id long, day string, tag string")
    (df.write.format("delta").options(**hadoop_keys(em)).partitionBy("tag")
     .option("delta.enableDeletionVectors", "true").option("delta.enableChangeDataFeed", "true").save(uri))
    more = spark.createDataFrame([(100, "d9", "a b")], "id long, day string, tag string")
    more.write.format("delta").mode("append").options(**storage_keys(em)).save(uri)

    want = sorted([(i, f"d{i % 3}", "a b" if i % 2 else "c%d") for i in range(12)] + [(100, "d9", "a b")])
    back = spark.read.format("delta").options(**hadoop_keys(em)).load(uri)
    assert rows(back, "id", "day", "tag") == want
    assert deltars_rows(em, uri, "id", "day", "tag") == want
    v0 = spark.read.format("delta").options(**storage_keys(em)).option("versionAsOf", 0).load(uri)
    assert v0.count() == 12

    # DML through delta-spark's DeltaTable, the credentials as forPath's hadoopConf
    conf = {k: v for k, v in hadoop_keys(em).items() if not k.startswith("storage.")}
    conf.update({k[len("storage."):]: v for k, v in hadoop_keys(em).items() if k.startswith("storage.")})
    dt = DeltaTable.forPath(spark, uri, conf)
    dt.delete("id = 3")
    dt.update("id = 4", {"day": "'upd'"})
    src = spark.createDataFrame([(5, "m5", "a b"), (200, "new", "c%d")], "id long, day string, tag string")
    m = (dt.alias("t").merge(src.alias("s"), "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll()
         .execute().collect()[0])
    assert (m["num_updated_rows"], m["num_inserted_rows"]) == (1, 1)
    want = sorted([r for r in want if r[0] != 3 and r[0] not in (4, 5)]
                  + [(4, "upd", "a b" if 4 % 2 else "c%d"), (5, "m5", "a b"), (200, "new", "c%d")])
    assert rows(dt.toDF(), "id", "day", "tag") == want
    assert deltars_rows(em, uri, "id", "day", "tag") == want
    t = Table(uri, storage_options=em.options)
    assert t.history(1)[0]["operation"] == "MERGE"
    assert any(r["deletionVector"] for r in t.files(["deletionVector"]).to_pylist())   # rows marked, not rewritten

    # the change data feed of the DELETE (version 2)
    cdf = (spark.read.format("delta").options(**storage_keys(em)).option("readChangeFeed", "true")
           .option("startingVersion", 2).option("endingVersion", 2).load(uri))
    assert rows(cdf, "id", "_change_type") == [(3, "delete")]

    # OPTIMIZE and Z-order: same rows, fewer files
    before = t.files(["path"]).num_rows
    res = dt.optimize().executeCompaction().collect()[0]
    assert res["metrics"]["numFilesRemoved"] > 0
    dt.optimize().executeZOrderBy("id")
    t = Table(uri, storage_options=em.options)
    assert t.files(["path"]).num_rows < before
    assert deltars_rows(em, uri, "id", "day", "tag") == want
    assert rows(spark.read.format("delta").options(**storage_keys(em)).load(uri), "id", "day", "tag") == want


def test_streaming_on_every_store(spark, store, tmp_path):
    """A stream from a table on the store into another table on the same store, AvailableNow,
    then once more after an append: each row once. (The checkpoint is Spark's own — its offset
    log is written by the JVM — so it lives where the JVM reaches: local disk here.)"""
    em, bucket = store
    src, dst = em.uri(bucket, "src"), em.uri(bucket, "dst")
    opts = storage_keys(em)
    spark.range(5).selectExpr("id", "'a' as k").write.format("delta").options(**opts).save(src)

    def run():
        q = (spark.readStream.format("delta").options(**opts).load(src).writeStream.format("delta")
             .options(**opts).option("checkpointLocation", str(tmp_path / "chk"))
             .trigger(availableNow=True).start(dst))
        q.awaitTermination(120)
        assert q.exception() is None

    run()
    assert deltars_rows(em, dst, "id") == [(i,) for i in range(5)]
    spark.range(5, 8).selectExpr("id", "'b' as k").write.format("delta").mode("append").options(**opts).save(src)
    run()
    assert deltars_rows(em, dst, "id") == [(i,) for i in range(8)]
    assert Table(dst, storage_options=em.options).version == 1


def test_hadoop_keys_refused_by_name(spark, emulators):
    """A Hadoop key tahoe cannot map fails the read with an error naming it (never ignored)."""
    from tahoe.errors import InvalidOptionError

    em = emulators.get("s3")
    uri = em.uri(new_bucket(em), "t")
    with pytest.raises(Exception, match="fs.s3a.assumed.role.arn") as e:
        spark.read.format("delta").options(**storage_keys(em)).option("fs.s3a.assumed.role.arn", "x").load(uri)
    assert isinstance(e.value, InvalidOptionError) or "InvalidOptionError" in str(e.value)


def test_session_hadoop_confs_and_explicit_options(spark, emulators):
    """delta-spark's session confs (`spark.hadoop.fs.s3a.*`) reach the source's tasks with no
    option given — batch and streaming reads; an explicit `storage.<key>` option wins over them."""
    em = emulators.get("s3")
    uri = em.uri(new_bucket(em), "t")
    spark.range(4).write.format("delta").options(**storage_keys(em)).save(uri)
    confs = {f"spark.hadoop.{k}": v for k, v in hadoop_keys(em).items()}
    try:
        for k, v in confs.items():
            spark.conf.set(k, v)
        assert rows(spark.read.format("delta").load(uri), "id") == [(i,) for i in range(4)]
        assert rows(DeltaTable_for(spark, uri).toDF(), "id") == [(i,) for i in range(4)]
        # the session's endpoint made wrong (moto checks no signature, so a wrong key would pass)
        from tests.fixtures.emulators import free_port

        spark.conf.set("spark.hadoop.fs.s3a.endpoint", f"127.0.0.1:{free_port()}")
        with pytest.raises(Exception, match="cannot be reached"):
            spark.read.format("delta").option("storage.max_retries", "0").load(uri).collect()
        ok = spark.read.format("delta").option("storage.aws_endpoint_url", em.options["AWS_ENDPOINT_URL"])
        assert rows(ok.load(uri), "id") == [(i,) for i in range(4)]
        stream = (spark.readStream.format("delta")
                  .option("storage.aws_endpoint_url", em.options["AWS_ENDPOINT_URL"]).load(uri))
        q = stream.writeStream.format("memory").queryName("tahoe_session_confs").trigger(availableNow=True).start()
        q.awaitTermination(120)
        assert rows(spark.table("tahoe_session_confs"), "id") == [(i,) for i in range(4)]
    finally:
        for k in confs:
            spark.conf.unset(k)


def DeltaTable_for(spark, uri):
    from tahoe.spark import DeltaTable

    return DeltaTable.forPath(spark, uri)

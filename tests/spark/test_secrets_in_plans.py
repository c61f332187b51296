"""No storage secret in what Spark shows (GUIDE: "No secret ever appears in a log, error message or
printed output"): credentials given as `format("delta")` options — tahoe's `storage.*` keys and
delta-spark's Hadoop `fs.s3a.*` keys — for an s3:// table on moto's S3 server never appear in
`df.explain` (every mode), the query execution's plan strings, the SQL executions Spark records
(the plans its UI and listeners show), the table's log, tahoe's log records, or the text (notes
included) of the errors a bad option, a missing table, a store that refuses (403, on the log and
on a data file written by a Spark task) or cannot be reached give — on classic Spark and over
Spark Connect.

The secret is a random string no plan could hold by chance (moto does not check signatures)."""

from __future__ import annotations

import contextlib
import io
import logging
import uuid

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

SECRET = "tahoeSecret/" + uuid.uuid4().hex + "+Key"


def _deny(method: str, key: str, query: str):
    """403 for everything under denied/, and for data files (not the log) PUT under wdenied/."""
    if key.startswith("denied/") or (key.startswith("wdenied/") and method == "PUT" and "_delta_log" not in key):
        return 403
    return None


@pytest.fixture(scope="module")
def s3():
    from tests.fixtures.emulators import start_s3

    em = start_s3(intercept=_deny)
    bucket = f"secrets-{uuid.uuid4().hex[:10]}"
    em.make_bucket(bucket)
    yield em, bucket
    em.stop()


def _storage(em) -> dict:
    return {"storage.aws_access_key_id": "AKIATAHOETEST", "storage.aws_secret_access_key": SECRET,
            "storage.region": "us-east-1", "storage.endpoint_url": em.options["AWS_ENDPOINT_URL"],
            "storage.allow_http": "true"}


def _hadoop(em) -> dict:
    return {"fs.s3a.access.key": "AKIATAHOETEST", "fs.s3a.secret.key": SECRET,
            "fs.s3a.endpoint": em.options["AWS_ENDPOINT_URL"], "fs.s3a.endpoint.region": "us-east-1",
            "fs.s3a.connection.ssl.enabled": "false", "fs.s3a.path.style.access": "true"}


def _explained(df) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for mode in ("simple", "extended", "codegen", "cost", "formatted"):
            df.explain(mode=mode)
    return out.getvalue()


def _error_text(call) -> str:
    with pytest.raises(Exception) as e:
        call()
    exc, parts = e.value, []
    while exc is not None:
        parts += [type(exc).__name__, str(exc), *getattr(exc, "__notes__", []),
                  str(getattr(exc, "spark_error", "") or "")]
        exc = exc.__cause__ or exc.__context__
    return "\n".join(parts)


def _log_text(em, bucket: str, prefix: str) -> str:
    import boto3

    c = boto3.client("s3", endpoint_url=em.options["AWS_ENDPOINT_URL"], region_name="us-east-1",
                     aws_access_key_id="x", aws_secret_access_key="y")
    keys = [o["Key"] for o in c.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/_delta_log/")["Contents"]]
    assert keys
    return "".join(c.get_object(Bucket=bucket, Key=k)["Body"].read().decode("utf-8", "replace") for k in keys)


def _refusals(session, bucket: str, ok: str, options: dict) -> list[tuple[str, str]]:
    """(what, error text) of each failing call, every one with the secret among its options (`ok`:
    the test's table, of one bigint column `id`)."""
    cases = [
        ("a misspelt storage key", lambda: session.read.format("delta").options(**options)
         .option("storage.aws_secret_acess_key", SECRET).load(ok).collect()),
        ("an unmapped Hadoop key", lambda: session.read.format("delta").options(**options)
         .option("fs.s3a.secrett.key", SECRET).load(ok).collect()),
        ("a missing table", lambda: session.read.format("delta").options(**options)
         .load(f"s3://{bucket}/missing").collect()),
        ("a store refusing the log (403)", lambda: session.read.format("delta").options(**options)
         .load(f"s3://{bucket}/denied/t").collect()),
        ("a write refused (403) on the log", lambda: session.range(2).write.format("delta").mode("append")
         .options(**options).save(f"s3://{bucket}/denied/w")),
        ("a Spark task refused (403) writing a data file", lambda: session.range(2).write.format("delta")
         .mode("append").options(**options).save(f"s3://{bucket}/wdenied/w")),
        ("a schema mismatch", lambda: session.sql("SELECT 'x' AS id").write.format("delta").mode("append")
         .options(**options).save(ok)),
    ]
    return [(what, _error_text(call)) for what, call in cases]


@pytest.mark.parametrize("kind", ["storage", "hadoop"])
def test_no_secret_in_plans_logs_or_errors_classic(spark, s3, kind, caplog):
    em, bucket = s3
    options = _storage(em) if kind == "storage" else _hadoop(em)
    prefix = f"classic-{kind}"
    uri = f"s3://{bucket}/{prefix}/t"
    seen = []
    with caplog.at_level(logging.DEBUG, logger="tahoe"):
        spark.range(5).write.format("delta").options(**options).save(uri)
        spark.range(3).write.format("delta").mode("overwrite").options(**options).save(uri)
        df = spark.read.format("delta").options(**options).load(uri).filter("id > 0")
        assert sorted(r.id for r in df.collect()) == [1, 2]          # the options did reach the store
        seen.append(("explain", _explained(df)))
        qe = df._jdf.queryExecution()
        seen.append(("queryExecution", qe.toString() + qe.executedPlan().toString()
                     + qe.analyzed().toJSON() + qe.optimizedPlan().toJSON()))
        streamed = str(uuid.uuid4())
        q = spark.readStream.format("delta").options(**options).load(uri).writeStream.format("memory") \
            .queryName("secrets_" + streamed[:8]).trigger(availableNow=True).start()
        q.awaitTermination(120)
        seen.append(("stream progress", str(q.lastProgress) + str(q.recentProgress) + q._jsq.toString()))
        spark.catalog.dropTempView("secrets_" + streamed[:8])
        for what, text in _refusals(spark, bucket, uri, options):
            seen.append((what, text))
    store = spark._jsparkSession.sharedState().statusStore().executionsList()
    seen.append(("Spark's SQL executions", "".join(
        store.apply(i).description() + store.apply(i).details() + store.apply(i).physicalPlanDescription()
        for i in range(store.size()))))
    seen.append(("the table's log", _log_text(em, bucket, f"{prefix}/t")))
    seen.append(("tahoe's log records", "\n".join(r.getMessage() for r in caplog.records
                                                     if r.name.startswith("tahoe")) or "(none)"))
    for what, text in seen:
        assert text and SECRET not in text, what
        assert SECRET.split("/")[1] not in text, what              # nor the secret's random part alone
    assert any("403" in t or "denied" in t.lower() for w, t in seen if "403" in w)


def test_no_secret_in_plans_or_errors_over_connect(connect, s3):
    em, bucket = s3
    options = _storage(em)
    uri = f"s3://{bucket}/connect/t"
    connect.range(4).write.format("delta").options(**options).save(uri)
    df = connect.read.format("delta").options(**options).load(uri).filter("id > 1")
    assert sorted(r.id for r in df.collect()) == [2, 3]
    seen = [("explain", _explained(df))]
    seen += _refusals(connect, bucket, uri, options)
    for what, text in seen:
        assert text and SECRET not in text and SECRET.split("/")[1] not in text, what

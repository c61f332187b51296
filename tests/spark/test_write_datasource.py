"""The `df.write.format("delta")` writer beside `write_delta`: save modes (Spark refuses
ErrorIfExists/Ignore for Python data sources; tahoe maps them), identity columns (shared
generation, overflow refused), schema conflicts and constraint violations — each refused with
nothing committed. (Unsupported writer features: test_write.py.)"""

from __future__ import annotations

import os

import pytest

from tahoe.spark import IdentityGenerator
from tests.spark.test_write import delta_rs_read

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


def _version(path: str) -> int:
    from tahoe import Table

    return Table(path).version


def test_save_modes_like_delta_spark(spark, tmp_path):
    from tahoe import Table
    from tahoe.errors import InvalidTableOperationError
    from tahoe.spark import write_delta

    path = str(tmp_path / "modes")
    spark.range(3).write.format("delta").save(path)            # the default mode (ErrorIfExists) creates
    assert _version(path) == 0 and Table(path).to_arrow().num_rows == 3
    files = sorted(os.listdir(path))
    for mode in (None, "error", "errorifexists", "ErrorIfExists"):
        w = spark.range(5).write.format("delta")
        w = w.mode(mode) if mode else w
        with pytest.raises(Exception, match="already exists") as ei:
            w.save(path)
        assert "UNSUPPORTED_DATA_SOURCE_SAVE_MODE" not in str(ei.value)
    spark.range(5).write.format("delta").mode("ignore").save(path)
    spark.range(5).write.save(path, format="delta", mode="ignore")
    assert _version(path) == 0 and Table(path).to_arrow().num_rows == 3
    assert sorted(os.listdir(path)) == files          # refused and ignored writes left no files

    spark.range(4).write.format("delta").mode("ignore").save(str(tmp_path / "ignored_new"))   # ignore creates
    assert Table(str(tmp_path / "ignored_new")).to_arrow().num_rows == 4
    spark.range(2).write.format("delta").mode("errorifexists").save(str(tmp_path / "err_new"))
    assert Table(str(tmp_path / "err_new")).to_arrow().num_rows == 2
    # the option the modes map to works on its own, e.g. where the wrapper is not installed
    with pytest.raises(Exception, match="already exists"):
        spark.range(1).write.format("delta").mode("append").option("saveMode", "error").save(path)
    spark.range(1).write.format("delta").mode("append").option("SAVEMODE", "ignore").save(path)
    # append/overwrite are unchanged, and other formats keep Spark's own modes
    spark.range(2).write.format("delta").mode("append").save(path)
    assert _version(path) == 1 and Table(path).to_arrow().num_rows == 5
    spark.range(1).write.format("delta").mode("overwrite").save(path)
    assert Table(path).to_arrow().num_rows == 1
    parquet_dir = str(tmp_path / "plain_parquet")
    spark.range(1).write.parquet(parquet_dir)
    with pytest.raises(Exception, match="already exists"):
        spark.range(1).write.format("parquet").save(parquet_dir)
    spark.range(1).write.format("parquet").mode("ignore").save(parquet_dir)

    # write_delta: error/ignore create a missing table, refuse/skip an existing one
    p2 = str(tmp_path / "wd")
    assert write_delta(spark.range(3), p2, mode="error") == 0
    assert write_delta(spark.range(3), str(tmp_path / "wd_ignore"), mode="ignore") == 0
    with pytest.raises(InvalidTableOperationError, match="already exists"):
        write_delta(spark.range(3), p2, mode="error")
    assert write_delta(spark.range(9), p2, mode="ignore") == 0
    assert Table(p2).to_arrow().num_rows == 3


def _identity_table(spark, path, **kw):
    from tahoe.spark import DeltaTable

    (DeltaTable.create(spark).location(path)
        .addColumn("id", "BIGINT", **kw)
        .addColumn("x", "INT")
        .addColumn("y", "INT", generatedAlwaysAs="x * 2")
        .property("delta.constraints.x_pos", "x > 0")
        .execute())


def test_identity_columns_through_the_data_source(spark, tmp_path):
    from tahoe import Table
    from tahoe.spark import read_delta, write_delta

    path = str(tmp_path / "ident")
    _identity_table(spark, path, generatedAlwaysAs=IdentityGenerator(start=10, step=5))
    df = spark.sql("select cast(id + 1 as int) as x from range(30)").repartition(3)
    df.write.format("delta").mode("append").save(path)

    def ids():
        return [r.id for r in read_delta(spark, path).collect()]

    first = ids()
    assert len(first) == 30 and len(set(first)) == 30
    assert all(i >= 10 and (i - 10) % 5 == 0 for i in first)
    hwm = int(Table(path).schema.field("id").metadata["delta.identity.highWaterMark"])
    assert hwm == max(first)
    assert all(r.y == r.x * 2 for r in read_delta(spark, path).collect())
    # both writers continue beyond the high-water mark
    spark.sql("select 100 as x").write.format("delta").mode("append").save(path)
    write_delta(spark.sql("select 200 as x"), path)
    rows = {r.x: r.id for r in read_delta(spark, path).collect()}
    assert hwm < rows[100] < rows[200] and (rows[100] - 10) % 5 == 0 and (rows[200] - 10) % 5 == 0
    assert int(Table(path).schema.field("id").metadata["delta.identity.highWaterMark"]) == rows[200]
    # GENERATED ALWAYS: explicit values refused, on the driver, nothing committed
    v = _version(path)
    with pytest.raises(Exception, match="identity column"):
        spark.sql("select 1L as id, 1 as x").write.format("delta").mode("append").save(path)
    assert _version(path) == v
    # delta-rs reads the identity values tahoe generated
    rs = delta_rs_read(path, tmp_path)
    assert rs.num_rows == 32 and len(set(rs.column("id").to_pylist())) == 32

    # GENERATED BY DEFAULT: explicit values are written as given, absent ones generated
    by_default = str(tmp_path / "by_default")
    _identity_table(spark, by_default, generatedByDefaultAs=IdentityGenerator())
    spark.sql("select -7L as id, 3 as x").write.format("delta").mode("append").save(by_default)
    spark.sql("select 4 as x").write.format("delta").mode("append").save(by_default)
    assert sorted(r.id for r in read_delta(spark, by_default).collect()) == [-7, 1]


def test_identity_overflow_is_refused(spark, tmp_path):
    import pyarrow as pa

    import tahoe
    from tahoe.errors import ConstraintViolationError
    from tahoe.spark import read_delta, write_delta

    top = (1 << 63) - 1
    path = str(tmp_path / "overflow")
    _identity_table(spark, path, generatedAlwaysAs=IdentityGenerator(start=top - 10, step=5))
    write_delta(spark.sql("select 1 as x union all select 2").coalesce(1), path)   # top-10, top-5
    assert sorted(r.id for r in read_delta(spark, path).collect()) == [top - 10, top - 5]
    v = _version(path)
    two = spark.sql("select 3 as x union all select 4").coalesce(1)                 # top, then top + 5
    with pytest.raises(ConstraintViolationError, match="overflows BIGINT"):
        write_delta(two, path)
    with pytest.raises(Exception, match="overflows BIGINT"):
        two.write.format("delta").mode("append").save(path)
    with pytest.raises(ConstraintViolationError, match="overflows BIGINT"):
        tahoe.write_table(path, pa.table({"x": pa.array([3, 4], pa.int32())}))
    assert _version(path) == v
    write_delta(spark.sql("select 3 as x"), path)                                    # top itself fits
    assert max(r.id for r in read_delta(spark, path).collect()) == top
    with pytest.raises(ConstraintViolationError, match="overflows BIGINT"):          # nothing is left
        write_delta(spark.sql("select 5 as x"), path)

    down = str(tmp_path / "overflow_down")
    bottom = -(1 << 63)
    _identity_table(spark, down, generatedAlwaysAs=IdentityGenerator(start=bottom + 2, step=-1))
    with pytest.raises(ConstraintViolationError, match="overflows BIGINT"):
        write_delta(spark.sql("select cast(id + 1 as int) as x from range(4)").coalesce(1), down)
    write_delta(spark.sql("select cast(id + 1 as int) as x from range(3)").coalesce(1), down)
    assert sorted(r.id for r in read_delta(spark, down).collect()) == [bottom, bottom + 1, bottom + 2]


def test_data_source_refusals_commit_nothing(spark, tmp_path):
    from tahoe import Table

    path = str(tmp_path / "refusals")
    spark.sql("select id, cast(id as int) as n from range(5)").write.format("delta").save(path)
    v = _version(path)
    with pytest.raises(Exception, match=r"the data has columns \['extra'\] that the table does not have") as ei:
        spark.sql("select 1L as id, 1 as n, 'z' as extra").write.format("delta").mode("append").save(path)
    assert "'.option(\"mergeSchema\", \"true\")'" in str(ei.value)   # delta-spark's _LEGACY_ERROR_TEMP_DELTA_0007 text
    with pytest.raises(Exception, match=r"column 'n' has type string in the data but integer in the table"):
        spark.sql("select 1L as id, 'text' as n").write.format("delta").mode("append").save(path)
    assert _version(path) == v
    # the option names are case-insensitive (Spark lower-cases them): mergeSchema works
    spark.sql("select 9L as id, 9 as n, 'z' as extra").write.format("delta").mode("append") \
        .option("mergeSchema", "true").save(path)
    assert Table(path).schema.names == ["id", "n", "extra"]
    v = _version(path)

    Table(path).add_constraint("n_small", "n < 100")
    v = _version(path)
    before = sorted(os.listdir(path))
    with pytest.raises(Exception, match="n_small"):
        spark.sql("select id, cast(id * 50 as int) as n from range(4)").coalesce(1) \
            .write.format("delta").mode("append").save(path)
    assert _version(path) == v and sorted(os.listdir(path)) == before



def test_write_delta_schema_conflict_names_the_column(spark, tmp_path):
    from tahoe.errors import SchemaError
    from tahoe.spark import write_delta

    path = str(tmp_path / "conflict")
    write_delta(spark.sql("select id, cast(id as int) as n from range(3)"), path)
    with pytest.raises(SchemaError, match=r"column 'n' has type string in the data but integer in the table") as ei:
        write_delta(spark.sql("select 1L as id, 'text' as n"), path)
    assert "merge_schema=True" in str(ei.value) and "overwrite_schema=True" in str(ei.value)
    assert _version(path) == 0


def test_not_null_identity_and_generated_columns_may_be_omitted(spark, tmp_path):
    """Every writer computes NOT NULL identity/generated columns the data omits (the schema check
    does not demand them), continuing one identity sequence."""
    import pyarrow as pa

    import tahoe
    from tahoe.spark import DeltaTable, write_delta

    path = str(tmp_path / "not_null")
    (DeltaTable.create(spark).location(path)
        .addColumn("id", "BIGINT", nullable=False, generatedAlwaysAs=IdentityGenerator())
        .addColumn("x", "INT")
        .addColumn("y", "INT", nullable=False, generatedAlwaysAs="x + 1").execute())
    tahoe.write_table(path, pa.table({"x": pa.array([1], pa.int32())}))
    write_delta(spark.sql("select 2 as x"), path)
    spark.sql("select 3 as x").write.format("delta").mode("append").save(path)
    rows = sorted(tahoe.Table(path).to_arrow().to_pylist(), key=lambda r: r["x"])
    assert [(r["x"], r["y"]) for r in rows] == [(1, 2), (2, 3), (3, 4)]
    ids = [r["id"] for r in rows]
    assert ids == sorted(ids) and len(set(ids)) == 3 and ids[0] == 1


def test_save_modes_over_spark_connect(connect_server, tmp_path):
    """The same mode mapping — and optimized writes — for Spark Connect's DataFrameWriter (its own
    class), in a driver process of its own on the test session's Connect server."""
    import textwrap

    from tests.spark.test_clusters import _run_driver, connect_env

    path = str(tmp_path / "connect_modes")
    code = textwrap.dedent(f"""
        import os
        from pyspark.sql import SparkSession
        from tahoe import Table
        from tahoe.spark import register
        spark = SparkSession.builder.remote({connect_server!r}).getOrCreate()
        register(spark)
        spark.range(3).write.format("delta").save({path!r})
        try:
            spark.range(3).write.format("delta").mode("error").save({path!r})
            raise SystemExit("no error")
        except Exception as e:
            assert "already exists" in str(e), str(e)[:500]
        spark.range(7).write.format("delta").mode("ignore").save({path!r})
        assert Table({path!r}).version == 0 and Table({path!r}).to_arrow().num_rows == 3
        # an optimized write through Connect's writer: one file per partition value (the adds of
        # the commit's JSON), where the DataFrame's 4 tasks each hold rows of every value
        df = spark.range(60).selectExpr("id", "cast(id % 3 as string) as p").repartition(4, "id")
        df.write.format("delta").partitionBy("p").option("optimizeWrite", "true").save({path + "_ow"!r})
        with open(os.path.join({path + "_ow"!r}, "_delta_log", "0" * 20 + ".json")) as f:
            adds = [line for line in f if line.startswith('{{"add"')]
        assert len(adds) == 3, adds
        print("TAHOE-OK")
        os._exit(0)
    """)
    _run_driver(code, connect_env(tmp_path))


# --- dynamic partition overwrite and the write options ------------------------------------------

def _dpo_expected():
    from tests.write.test_writer import _SPECIAL

    return sorted([(2, "b"), (10, "a"), (30, None), (40, _SPECIAL)], key=str)


def _rows(path):
    from tahoe import Table

    return sorted(((r["id"], r["p"]) for r in Table(path).to_arrow().to_pylist()), key=str)


def test_dynamic_partition_overwrite_through_every_spark_entry_point(spark, tmp_path):
    """write_delta(partition_overwrite_mode=...), .option("partitionOverwriteMode", ...), and the
    session conf for both; the option wins over the session; the commit removes exactly the
    replaced partitions' files (null and special-character partitions included)."""
    from tahoe.errors import InvalidTableOperationError
    from tahoe.spark import write_delta
    from tests.txn._helpers import commit_actions, commit_info
    from tests.write.test_writer import _SPECIAL, _dpo_base, _files_by_partition

    new = spark.createDataFrame([(10, "a"), (30, None), (40, _SPECIAL)], "id long, p string")
    conf = "spark.sql.sources.partitionOverwriteMode"

    def run(name, write):
        path = str(tmp_path / name)
        _dpo_base(path)
        before = _files_by_partition(path)
        write(path)
        v = _version(path)
        assert _rows(path) == _dpo_expected(), name
        removed = {a["remove"]["path"] for a in commit_actions(path, v) if "remove" in a}
        assert removed == before["a"] | before[None] | before[_SPECIAL], name
        assert commit_info(path, v)["operationParameters"]["isDynamicPartitionOverwrite"] == "true"
        return path

    kwarg = run("kwarg", lambda p: write_delta(new, p, mode="overwrite", partition_overwrite_mode="dynamic"))
    run("option", lambda p: new.write.format("delta").mode("overwrite")
        .option("partitionOverwriteMode", "dynamic").save(p))
    spark.conf.set(conf, "dynamic")
    try:
        run("session_write_delta", lambda p: write_delta(new, p, mode="overwrite"))
        run("session_datasource", lambda p: new.write.format("delta").mode("overwrite").save(p))
        # the write's own setting wins over the session's
        static = str(tmp_path / "static")
        _dpo_base(static)
        new.write.format("delta").mode("overwrite").option("partitionOverwriteMode", "static").save(static)
        assert len(_rows(static)) == 3
        # replaceWhere with dynamic only in the session: replaceWhere decides
        rw = str(tmp_path / "rw_session")
        _dpo_base(rw)
        write_delta(spark.createDataFrame([(10, "a")], "id long, p string"), rw, mode="overwrite",
                    replace_where="p = 'a'")
        assert sorted((i, p) for i, p in _rows(rw) if p == "a") == [(10, "a")] and len(_rows(rw)) == 4
    finally:
        spark.conf.unset(conf)
    # replaceWhere and dynamic both given to the write: refused, nothing committed
    v = _version(kwarg)
    with pytest.raises(InvalidTableOperationError, match="replaceWhere"):
        write_delta(new, kwarg, mode="overwrite", replace_where="p = 'a'", partition_overwrite_mode="dynamic")
    with pytest.raises(Exception, match="replaceWhere"):
        new.write.format("delta").mode("overwrite").option("replaceWhere", "p = 'a'") \
            .option("partitionOverwriteMode", "dynamic").save(kwarg)
    with pytest.raises(Exception, match="overwriteSchema"):
        new.write.format("delta").mode("overwrite").option("overwriteSchema", "true") \
            .option("partitionOverwriteMode", "dynamic").save(kwarg)
    assert _version(kwarg) == v
    # delta-rs reads the dynamically overwritten table identically
    rs = delta_rs_read(kwarg, tmp_path)
    assert sorted(zip(rs.column("id").to_pylist(), rs.column("p").to_pylist()), key=str) == _dpo_expected()


def test_dynamic_overwrite_on_spark_conflicts_only_with_writers_into_replaced_partitions(spark, tmp_path, monkeypatch):
    """A concurrent append between write_delta's read and its commit: into a replaced partition
    (Serializable table) → ConcurrentAppendException, nothing committed; into another
    partition → both land."""
    import pyarrow as pa

    import tahoe
    import tahoe.spark.write as spark_write
    from tahoe import Table
    from tahoe.errors import ConcurrentAppendException
    from tahoe.spark import write_delta
    from tests.write.test_writer import _dpo_base

    original = spark_write._write_native
    for target, conflicts in (("a", True), ("b", False)):
        path = str(tmp_path / f"concurrent_{target}")
        _dpo_base(path)
        Table(path).set_properties({"delta.isolationLevel": "Serializable"})

        def hooked(*a, _path=path, _target=target, **kw):
            out = original(*a, **kw)
            tahoe.write_table(_path, pa.table({"id": [99], "p": [_target]}))
            return out

        monkeypatch.setattr(spark_write, "_write_native", hooked)
        df = spark.createDataFrame([(10, "a")], "id long, p string")
        v = _version(path)
        if conflicts:
            with pytest.raises(ConcurrentAppendException, match="p=a"):
                write_delta(df, path, mode="overwrite", partition_overwrite_mode="dynamic")
            assert _version(path) == v + 1 and (99, "a") in _rows(path) and (1, "a") in _rows(path)
        else:
            write_delta(df, path, mode="overwrite", partition_overwrite_mode="dynamic")
            rows = _rows(path)
            assert (99, "b") in rows and (10, "a") in rows and (1, "a") not in rows and (5, "a") not in rows


def test_data_source_write_options(spark, tmp_path):
    """replaceWhere (a row outside it refused, nothing committed), delta.* properties on create,
    userMetadata, txnAppId/txnVersion — option names in any case."""
    from tahoe import Table
    from tests.txn._helpers import commit_info

    path = str(tmp_path / "opts")
    base = spark.createDataFrame([(1, "a"), (2, "b"), (3, "c")], "id long, p string")
    (base.write.format("delta").option("partitionBy", "p")
        .option("delta.enableChangeDataFeed", "true").option("DELTA.APPENDONLY", "false")
        .option("delta.dataSkippingNumIndexedCols", "5").option("userMetadata", "created by test")
        .save(path))
    conf = Table(path).snapshot.configuration
    assert conf["delta.enableChangeDataFeed"] == "true" and conf["delta.appendOnly"] == "false"
    assert conf["delta.dataSkippingNumIndexedCols"] == "5"
    assert commit_info(path, 0)["userMetadata"] == "created by test"
    with pytest.raises(Exception, match="(?i)unknown configuration.*delta.noSuchProperty"):  # Spark lower-cases it
        base.write.format("delta").mode("append").option("delta.noSuchProperty", "1").save(path)

    # replaceWhere: a row outside the predicate fails the write, nothing is committed
    v = _version(path)
    bad = spark.createDataFrame([(10, "a"), (20, "b")], "id long, p string").coalesce(1)
    with pytest.raises(Exception, match="replaceWhere"):
        bad.write.format("delta").mode("overwrite").option("replaceWhere", "p = 'a'").save(path)
    assert _version(path) == v and _rows(path) == sorted([(1, "a"), (2, "b"), (3, "c")], key=str)
    good = spark.createDataFrame([(10, "a")], "id long, p string")
    good.write.format("delta").mode("overwrite").option("REPLACEWHERE", "p = 'a'").save(path)
    assert _rows(path) == sorted([(10, "a"), (2, "b"), (3, "c")], key=str)
    assert commit_info(path, v + 1)["operationParameters"]["predicate"] == '["p = \'a\'"]'

    # idempotent writes: a recorded (txnAppId, txnVersion) writes nothing
    more = spark.createDataFrame([(7, "d")], "id long, p string")
    for _ in range(2):
        more.write.format("delta").mode("append").option("txnAppId", "job-1").option("txnVersion", "3").save(path)
    assert [r for r in _rows(path) if r[1] == "d"] == [(7, "d")]
    assert Table(path).snapshot.txn_version("job-1") == 3
    with pytest.raises(Exception, match="txnVersion"):
        more.write.format("delta").mode("append").option("txnAppId", "job-1").save(path)


def test_partition_by_on_the_writer_as_delta_spark(spark, tmp_path):
    """`df.write.format("delta").partitionBy(...)` (Spark refuses partitionBy for a Python data
    source; tahoe's save wrapper hands it over): the table is created partitioned, appends with
    the same columns go in, other columns are refused naming both, nothing committed. Oracles: the
    raw log's metaData, the directory layout, delta-rs reading the table."""
    import json

    path = str(tmp_path / "parts")
    df = spark.createDataFrame([(1, "a"), (2, "b"), (3, "a")], "id long, p string")
    df.write.format("delta").partitionBy("p").save(path)
    with open(os.path.join(path, "_delta_log", "00000000000000000000.json")) as f:
        md = next(json.loads(ln)["metaData"] for ln in f if '"metaData"' in ln)
    assert md["partitionColumns"] == ["p"]
    assert sorted(d for d in os.listdir(path) if d.startswith("p=")) == ["p=a", "p=b"]
    spark.createDataFrame([(4, "c")], "id long, p string").write.format("delta").mode("append") \
        .partitionBy("p").save(path)
    with pytest.raises(Exception, match=r"option partitionBy \['id'\] does not match the table's partition columns \['p'\]"):
        spark.createDataFrame([(5, "c")], "id long, p string").write.format("delta").mode("append") \
            .partitionBy("id").save(path)
    assert _version(path) == 1
    rs = delta_rs_read(path, tmp_path)
    assert sorted(zip(rs.column("id").to_pylist(), rs.column("p").to_pylist())) == [(1, "a"), (2, "b"), (3, "a"),
                                                                                 (4, "c")]

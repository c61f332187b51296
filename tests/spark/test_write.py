"""Writing with tahoe on Spark: round trips with delta-rs (both directions), constraints,
generated and identity columns, schema enforcement, replaceWhere, refused protocols."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.conftest import assert_rows_equal

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


def delta_rs_read(path: str, tmp_path, sql: bool = True) -> pa.Table:
    """The table's rows as delta-rs (QueryBuilder SQL) reads them, in a subprocess (delta-rs can
    abort at interpreter exit)."""
    out = str(tmp_path / f"rs_{abs(hash(path))}.parquet")
    code = textwrap.dedent(f"""
        import os, pyarrow.parquet as pq
        from deltalake import DeltaTable, QueryBuilder
        dt = DeltaTable({path!r})
        import pyarrow as pa
        t = pa.table(QueryBuilder().register("t", dt).execute("select * from t").read_all())
        pq.write_table(t, {out!r})
        os._exit(0)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert os.path.exists(out), r.stderr[-2000:]
    return pq.read_table(out)


def delta_rs_write(path: str, table: pa.Table, tmp_path, **kw) -> None:
    src = str(tmp_path / f"src_{abs(hash(path))}.parquet")
    pq.write_table(table, src)
    code = textwrap.dedent(f"""
        import os, pyarrow.parquet as pq
        from deltalake import write_deltalake
        write_deltalake({path!r}, pq.read_table({src!r}), **{kw!r})
        print("OK")
        os._exit(0)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "OK" in r.stdout, r.stderr[-2000:]


def _norm(t: pa.Table) -> pa.Table:
    """Compare values: delta-rs reads timestamps/strings with its own Arrow types."""
    cols = {}
    for f in t.schema:
        c = t.column(f.name)
        if pa.types.is_timestamp(f.type):
            c = c.cast(pa.timestamp("us", tz=f.type.tz and "UTC"))
        elif pa.types.is_large_string(f.type) or pa.types.is_string_view(f.type):
            c = c.cast(pa.string())
        elif pa.types.is_dictionary(f.type):
            c = c.cast(f.type.value_type)
            if pa.types.is_large_string(c.type) or pa.types.is_string_view(c.type):
                c = c.cast(pa.string())
        cols[f.name] = c
    return pa.table(cols)


def test_roundtrip_partitioned_to_delta_rs(spark, tmp_path):
    from tahoe.spark import read_delta, write_delta

    path = str(tmp_path / "parted")
    df = spark.sql("""
        select id, cast(id * 1.5 as double) as x,
               case when id % 4 = 0 then null when id % 4 = 1 then 'a b' when id % 4 = 2 then 'c%3Ad/e=f' else 'ü' end as p,
               date'2024-02-29' + cast(id % 2 as int) as d,
               timestamp'2024-01-01 10:11:12.345678' + make_interval(0,0,0,0,id,0,0) as ts
        from range(40)""")
    write_delta(df, path, partition_by=["p", "d"])
    expected = df.toArrow()
    assert_rows_equal(_norm(read_delta(spark, path).toArrow()), _norm(expected), "tahoe")
    assert_rows_equal(_norm(delta_rs_read(path, tmp_path)), _norm(expected), "delta-rs")
    # a second append and an overwrite
    write_delta(df.filter("id < 5"), path)
    appended = pa.concat_tables([expected, expected.filter(pc.less(expected.column("id"), 5))])
    assert_rows_equal(_norm(read_delta(spark, path).toArrow()), _norm(appended), "after append")
    write_delta(df.filter("id >= 37"), path, mode="overwrite")
    last3 = expected.filter(pc.greater_equal(expected.column("id"), 37))
    assert_rows_equal(_norm(read_delta(spark, path).toArrow()), _norm(last3), "after overwrite")
    assert_rows_equal(_norm(delta_rs_read(path, tmp_path)), _norm(last3), "delta-rs after overwrite")


def test_roundtrip_column_mapping_ntz_to_delta_rs(spark, tmp_path):
    from tahoe import Table
    from tahoe.spark import read_delta, write_delta

    path = str(tmp_path / "cm")
    df = spark.sql("""
        select id, cast(id as string) as `my col`, named_struct('a', id, 'b b', 'x') as s,
               timestamp_ntz'2024-01-01 00:00:00' + make_interval(0,0,0,id,0,0,0) as tntz,
               cast(id % 2 as int) as part
        from range(20)""")
    write_delta(df, path, partition_by=["part"], properties={"delta.columnMapping.mode": "name"})
    t = Table(path)
    assert t.snapshot.column_mapping_mode == "name"
    phys = [column for column in pq.read_schema(os.path.join(path, t.files(["path"]).column("path")[0].as_py().replace("%20", " "))).names]
    assert all(n.startswith("col-") for n in phys), phys
    expected = df.toArrow()
    assert_rows_equal(read_delta(spark, path).toArrow(), expected, "tahoe fast")
    assert_rows_equal(t.to_arrow().cast(expected.schema), expected, "tahoe arrow")
    rs = delta_rs_read(path, tmp_path)
    assert sorted(rs.column("id").to_pylist()) == list(range(20))
    assert sorted(rs.column("my col").to_pylist()) == sorted(str(i) for i in range(20))
    assert sorted(rs.column("tntz").cast(pa.timestamp("us")).to_pylist()) == \
        sorted(expected.column("tntz").to_pylist())


def test_identity_generated_constraints(spark, tmp_path):
    from tahoe import Table
    from tahoe.errors import ConstraintViolationError
    from tahoe.spark import DeltaTable, IdentityGenerator, read_delta, write_delta

    path = str(tmp_path / "special")
    (DeltaTable.create(spark).location(path)
        .addColumn("id", "BIGINT", generatedAlwaysAs=IdentityGenerator(start=10, step=5))
        .addColumn("x", "INT", nullable=False)
        .addColumn("y", "INT", generatedAlwaysAs="x * 2")
        .addColumn("p", "STRING")
        .partitionedBy("p")
        .property("delta.constraints.x_pos", "x > 0")
        .execute())
    write_delta(spark.sql("select cast(id + 1 as int) as x, 'a' as p from range(50)"), path)
    rows = read_delta(spark, path).collect()
    ids = [r.id for r in rows]
    assert len(set(ids)) == 50 and all(i >= 10 and (i - 10) % 5 == 0 for i in ids)
    assert all(r.y == r.x * 2 for r in rows)
    hwm = Table(path).schema.field("id").metadata["delta.identity.highWaterMark"]
    assert int(hwm) == max(ids)
    write_delta(spark.sql("select 7 as x, 'b' as p"), path)
    new_id = [r.id for r in read_delta(spark, path, filters="p = 'b'").collect()][0]
    assert new_id > max(ids) and (new_id - 10) % 5 == 0
    v = Table(path).version

    files_before = sorted(os.listdir(path))
    with pytest.raises(ConstraintViolationError, match="x_pos") as ei:
        write_delta(spark.sql("select -1 as x, 'c' as p"), path)
    assert '"x":-1' in str(ei.value)
    with pytest.raises(ConstraintViolationError, match="NOT NULL"):
        write_delta(spark.sql("select cast(null as int) as x, 'c' as p"), path)
    with pytest.raises(ConstraintViolationError, match="Generated Column"):
        write_delta(spark.sql("select 3 as x, 5 as y, 'c' as p"), path)
    write_delta(spark.sql("select 3 as x, 6 as y, 'c' as p"), path)  # a correct given value is fine
    assert Table(path).version == v + 1
    assert sorted(os.listdir(path)) == sorted(files_before + ["p=c"])
    rs = delta_rs_read(path, tmp_path)
    assert rs.num_rows == 52 and len(set(rs.column("id").to_pylist())) == 52
    ours = read_delta(spark, path).toArrow()
    cols = ["id", "x", "y", "p"]
    assert sorted(zip(*(rs.column(c).to_pylist() for c in cols))) == \
        sorted(zip(*(ours.column(c).to_pylist() for c in cols)))


def test_spark_and_arrow_writers_read_table_sql_the_same_way(spark, tmp_path):
    """A table's SQL (CHECK constraint, generation expression, replaceWhere) is parsed by tahoe's
    expression engine for both executors. `"x"` is a string in Spark SQL — unless the session
    sets spark.sql.ansi.doubleQuotedIdentifiers, under which Spark's own parser (F.expr) reads it
    as a column: the Spark writer must still check the constraint as the table (and the Arrow
    writer) means it. Oracle: the rows each writer accepts and refuses, derived by hand."""
    import tahoe
    from tahoe import Table
    from tahoe.errors import ConstraintViolationError
    from tahoe.spark import write_delta

    path = str(tmp_path / "dq")
    tahoe.write_table(path, pa.table({"s": ["a"], "p": ["x"]}), partition_by="p")
    Table(path).add_constraint("not_b", 's <> "b"')
    conf = "spark.sql.ansi.doubleQuotedIdentifiers"
    before = spark.conf.get(conf, "false")
    spark.conf.set(conf, "true")
    try:
        write_delta(spark.sql("select 'c' as s, 'x' as p"), path)                    # 'c' <> 'b'
        with pytest.raises(ConstraintViolationError, match="not_b"):
            write_delta(spark.sql("select 'b' as s, 'x' as p"), path)
        write_delta(spark.sql("select 'd' as s, 'y' as p"), path, mode="overwrite", replace_where='p = "y"')
        with pytest.raises(ConstraintViolationError, match="replaceWhere"):
            write_delta(spark.sql("select 'e' as s, 'x' as p"), path, mode="overwrite", replace_where='p = "y"')
    finally:
        spark.conf.set(conf, before)
    with pytest.raises(ConstraintViolationError, match="not_b"):
        tahoe.write_table(path, pa.table({"s": ["b"], "p": ["x"]}))                # the Arrow writer agrees
    assert sorted(zip(*Table(path).to_arrow().select(["s", "p"]).to_pydict().values())) == \
        [("a", "x"), ("c", "x"), ("d", "y")]


def test_schema_enforcement_merge_replace_where(spark, tmp_path):
    from tahoe import Table
    from tahoe.errors import ConstraintViolationError, SchemaError
    from tahoe.spark import read_delta, write_delta

    path = str(tmp_path / "schema")
    write_delta(spark.sql("select id, cast(id % 3 as int) as p from range(9)"), path, partition_by="p")
    with pytest.raises(SchemaError, match="extra"):
        write_delta(spark.sql("select 1L as id, 1 as p, 'z' as extra"), path)
    write_delta(spark.sql("select 100L as id, 1 as p, 'z' as extra"), path, merge_schema=True)
    assert Table(path).schema.names == ["id", "p", "extra"]
    assert [tuple(r) for r in read_delta(spark, path).filter("extra is not null").collect()] == [(100, 1, "z")]
    v = Table(path).version
    with pytest.raises(ConstraintViolationError, match="replaceWhere"):
        write_delta(spark.sql("select 5L as id, 2 as p"), path, mode="overwrite", replace_where="p = 1")
    assert Table(path).version == v
    write_delta(spark.sql("select 5L as id, 1 as p"), path, mode="overwrite", replace_where="p = 1")
    got = sorted((r.id, r.p) for r in read_delta(spark, path).collect())
    assert got == [(0, 0), (2, 2), (3, 0), (5, 1), (5, 2), (6, 0), (8, 2)]
    # idempotent writes
    v = write_delta(spark.range(1).selectExpr("id", "0 as p"), path, txn_app_id="app", txn_version=1)
    assert write_delta(spark.range(1).selectExpr("id", "0 as p"), path, txn_app_id="app", txn_version=1) == v
    # error / ignore modes
    from tahoe.errors import InvalidTableOperationError
    with pytest.raises(InvalidTableOperationError):
        write_delta(spark.range(1), path, mode="error")
    assert write_delta(spark.range(1), path, mode="ignore") == v


def test_unsupported_writer_feature_refused(spark, tmp_path):
    from tahoe.errors import UnsupportedFeatureError
    from tahoe.spark import write_delta

    path = tmp_path / "future"
    (path / "_delta_log").mkdir(parents=True)
    schema = json.dumps({"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]})
    lines = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["someFutureFeature"]}},
        {"metaData": {"id": "x", "format": {"provider": "parquet", "options": {}}, "schemaString": schema,
                      "partitionColumns": [], "configuration": {}, "createdTime": 0}},
    ]
    (path / "_delta_log" / "00000000000000000000.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    with pytest.raises(UnsupportedFeatureError, match="someFutureFeature"):
        write_delta(spark.range(3), str(path))
    with pytest.raises(Exception, match="someFutureFeature"):   # the data source refuses it on the driver
        spark.range(3).write.format("delta").mode("append").save(str(path))
    assert sorted(os.listdir(path)) == ["_delta_log"]


def test_delta_rs_written_tables_read_by_tahoe_spark(spark, tmp_path):
    from tahoe.spark import read_delta

    t = pa.table({"id": pa.array(range(30), pa.int64()), "s": [f"v{i}" for i in range(30)],
                  "p": [["x", "y z", None][i % 3] for i in range(30)],
                  "ts": pa.array([1_700_000_000_000_000 + i for i in range(30)], pa.timestamp("us", tz="UTC"))})
    plain = str(tmp_path / "rs_plain")
    delta_rs_write(plain, t, tmp_path, partition_by=["p"])
    delta_rs_write(plain, t.slice(0, 5), tmp_path, mode="append", partition_by=["p"])
    exp = pa.concat_tables([t, t.slice(0, 5)])
    assert_rows_equal(read_delta(spark, plain).toArrow().select(exp.column_names), exp, "fast")
    assert_rows_equal(spark.read.format("delta").load(plain).toArrow().select(exp.column_names), exp, "datasource")
    cm = str(tmp_path / "rs_cm")
    delta_rs_write(cm, t, tmp_path, configuration={"delta.columnMapping.mode": "name"})
    assert_rows_equal(read_delta(spark, cm).toArrow().select(exp.column_names), t, "cm fast")


def test_datasource_writer(spark, tmp_path):
    from tahoe.spark import read_delta

    path = str(tmp_path / "dsw")
    df = spark.sql("select id, cast(id % 2 as string) as s from range(100)")
    df.write.format("delta").mode("append").save(path)
    df.write.format("delta").mode("append").save(path)
    rows = lambda d: sorted(tuple(r) for r in d.collect())
    assert rows(read_delta(spark, path)) == sorted([(i, str(i % 2)) for i in range(100)] * 2)
    df.filter("id < 10").write.format("delta").mode("overwrite").save(path)
    assert rows(spark.read.format("delta").load(path)) == [(i, str(i % 2)) for i in range(10)]
    rs = delta_rs_read(path, tmp_path)
    assert sorted(zip(rs.column("id").to_pylist(), rs.column("s").to_pylist())) == [(i, str(i % 2)) for i in range(10)]


def test_float_stats_from_spark_footers(spark, tmp_path):
    """Float/double min/max after a native Spark write: parquet-mr orders NaN last, so a NaN makes
    the max "NaN" (min NaN only when all values are), as the Arrow writer and delta-spark's
    Spark ordering do; a bound on zero covers both signed zeros. Data skipping keeps NaN rows,
    and delta-rs reads the stats."""
    from tahoe import Table
    from tahoe.spark import read_delta, write_delta

    nan, inf = float("nan"), float("inf")
    rows = [("a", nan, 1.5), ("a", 1.0, nan), ("a", 5.0, -2.0),
            ("b", nan, None), ("b", nan, None),
            ("c", -0.0, 0.0), ("c", 0.0, 3.25),
            ("d", -inf, 0.1), ("d", inf, None),
            ("e", -0.0, -0.0)]
    df = spark.createDataFrame(rows, "p string, d double, f float").coalesce(1)
    path = str(tmp_path / "floats")
    write_delta(df, path, partition_by="p")
    files = Table(path).files(["partitionValues", "stats"])
    stats = {dict(pv)["p"]: json.loads(s) for pv, s in zip(files.column("partitionValues").to_pylist(),
                                                          files.column("stats").to_pylist())}

    def bounds(p, c):
        return stats[p]["minValues"].get(c), stats[p]["maxValues"].get(c)

    assert bounds("a", "d") == (1.0, "NaN") and bounds("a", "f") == (-2.0, "NaN")
    assert bounds("b", "d") == ("NaN", "NaN") and bounds("b", "f") == (None, None)
    assert stats["b"]["nullCount"]["f"] == 2
    assert bounds("c", "d") == (-0.0, 0.0) and str(stats["c"]["minValues"]["d"]) == "-0.0"
    assert bounds("c", "f") == (-0.0, 3.25) and str(stats["c"]["minValues"]["f"]) == "-0.0"
    assert bounds("d", "d") == ("-Infinity", "Infinity") and bounds("d", "f") == (0.1, 0.1)
    assert bounds("e", "d") == (-0.0, 0.0) and str(stats["e"]["maxValues"]["d"]) == "0.0"

    # skipping with these stats keeps every matching row (NaN is above every value in Spark)
    def values(d):   # rows as comparable text (NaN == NaN, -0.0 kept apart from 0.0)
        return sorted(repr((r.p, r.d, r.f)) for r in d.collect())

    f32 = lambda x: None if x is None else float(pa.array([x], pa.float32())[0].as_py())
    for pred, want in [("d > 2", 5), ("d < -1", 1), ("d = 0", 3), ("f > 3", 2), ("f < 0", 1), ("isnan(d)", 3),
                       ("d > 6", 4), ("f > 4", 1)]:
        got = values(read_delta(spark, path, filters=[pred]))
        assert len(got) == want and got == values(df.filter(pred)), pred
    all_rows = sorted(repr((p, d, f32(f))) for p, d, f in rows)   # hand-written rows, f as float32
    assert values(read_delta(spark, path)) == all_rows
    rs = delta_rs_read(path, tmp_path)
    assert sorted(repr((p, d, None if f is None else float(f))) for p, d, f in
                  zip(*(rs.column(c).to_pylist() for c in ("p", "d", "f")))) == all_rows
    preds = ["d > 6", "f > 4", "d = 0", "d < -1"]
    code = textwrap.dedent(f"""
        import os, pyarrow as pa
        from deltalake import DeltaTable, QueryBuilder
        dt = DeltaTable({path!r})
        for q in {preds!r}:
            print(pa.table(QueryBuilder().register("t", dt).execute("select * from t where " + q).read_all()).num_rows)
        os._exit(0)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.split() == [str(df.filter(q).count()) for q in preds], r.stderr[-2000:]


def test_footer_float_bounds_only_from_nan_ordering_writers(tmp_path):
    """A footer from a writer that leaves NaN out of min/max (Arrow C++) yields no float bounds;
    row groups combine with NaN above every value."""
    from tahoe.protocol.schema import StructType
    from tahoe.write.footer_stats import float_bounds as _float_bounds, footer_stats
    from tahoe.write.footer_stats import nan_ordering_writer as _nan_ordering_writer

    t = pa.table({"d": [float("nan"), 1.0, 2.0], "i": [1, 2, 3]})
    pq.write_table(t, tmp_path / "arrow.parquet", row_group_size=2)
    md = pq.ParquetFile(tmp_path / "arrow.parquet").metadata
    schema = StructType.from_json(json.dumps({"type": "struct", "fields": [
        {"name": "d", "type": "double", "nullable": True, "metadata": {}},
        {"name": "i", "type": "long", "nullable": True, "metadata": {}}]}))
    st = json.loads(footer_stats(md, schema, False)[0])
    assert st["minValues"] == {"i": 1} and st["maxValues"] == {"i": 3}
    assert not _nan_ordering_writer(md.created_by)
    assert _nan_ordering_writer("parquet-mr version 1.17.0 (build fac0c74)")
    assert not _nan_ordering_writer("parquet-mr version 1.8.1")
    nan = float("nan")
    lo, hi = _float_bounds([nan, 1.0], [nan, 4.0])
    assert lo == 1.0 and hi != hi
    lo, hi = _float_bounds([nan, nan], [nan, nan])
    assert lo != lo and hi != hi
    assert _float_bounds([2.0, -1.0], [3.0, 0.5]) == (-1.0, 3.0)


def test_concurrent_spark_writers_commit_exactly_their_files(spark, tmp_path):
    """Two write_delta appends into one partitioned table at the same time, from two threads
    of one session: each commit adds exactly the files holding its own rows, every row lands
    once, and no staging directory is left under the table root."""
    from concurrent.futures import ThreadPoolExecutor

    from pyspark.sql import functions as F

    from tahoe import Table
    from tahoe.spark import write_delta

    path = str(tmp_path / "two_writers")
    write_delta(spark.range(0).select(F.col("id"), F.lit("x").alias("p")), path, partition_by=["p"])

    def append(k: int):
        df = spark.range(k * 1000, k * 1000 + 500, 1, 3).select(
            F.col("id"), (F.col("id") % 2).cast("string").alias("p"))
        write_delta(df, path, mode="append")

    with ThreadPoolExecutor(2) as ex:
        list(ex.map(append, [1, 2]))
    t = Table(path)
    assert t.version == 2
    assert sorted(t.to_arrow(columns=["id"]).column("id").to_pylist()) == \
        list(range(1000, 1500)) + list(range(2000, 2500))
    for v in (1, 2):
        with open(os.path.join(path, "_delta_log", f"{v:020d}.json")) as f:
            adds = [json.loads(line)["add"] for line in f if '"add"' in line]
        assert adds
        ids = set()
        for a in adds:
            ids |= set(pq.read_table(os.path.join(path, unquote(a["path"])), columns=["id"]).column("id").to_pylist())
        k = min(ids) // 1000  # one writer's rows, all of them
        assert ids == set(range(k * 1000, k * 1000 + 500))
    assert not [n for n in os.listdir(path) if n.startswith("_tahoe_staging")]


def test_failed_spark_job_commits_nothing(spark, tmp_path):
    """A write whose tasks fail part way (some tasks' files already written) commits nothing:
    the table stays at its version with its rows, and the staging directory is gone."""
    from pyspark.sql import functions as F

    from tahoe import Table
    from tahoe.spark import write_delta

    path = str(tmp_path / "failing")
    write_delta(spark.range(10), path)
    # task 3 of 4 fails; the others finish and write their files first
    bad = spark.range(0, 4000, 1, 4).select(
        F.when(F.col("id") == 3500, F.raise_error(F.lit("boom in a task"))).otherwise(F.col("id")).alias("id"))
    with pytest.raises(Exception, match="boom in a task"):
        write_delta(bad, path, mode="append")
    t = Table(path)
    assert t.version == 0
    assert sorted(t.to_arrow().column("id").to_pylist()) == list(range(10))
    assert not [n for n in os.listdir(path) if n.startswith("_tahoe_staging")]


def test_stats_cover_the_indexed_columns_and_truncate_strings(spark, tmp_path):
    """Stats from the Spark writers' footers: only the first `delta.dataSkippingNumIndexedCols`
    columns (or `delta.dataSkippingStatsColumns`), strings cut to the prefix length — the max
    rounded up so it still bounds every value — and the same from both Spark writers."""
    from tahoe import Table
    from tahoe.spark import write_delta

    long = "m" * 40
    df = spark.createDataFrame([(1, long, 2.5, "x"), (2, "a", 1.5, None)], "id long, s string, d double, t string")
    for name, props in [("n2", {"delta.dataSkippingNumIndexedCols": "2"}),
                        ("cols", {"delta.dataSkippingStatsColumns": "s,t"})]:
        native, ds = str(tmp_path / f"{name}_native"), str(tmp_path / f"{name}_ds")
        write_delta(df.coalesce(1), native, properties=props)
        w = df.coalesce(1).write.format("delta").mode("append")
        for k, v in props.items():
            w = w.option(k, v)
        w.save(ds)
        for path in (native, ds):
            (st,) = [json.loads(s) for s in Table(path).files(["stats"]).column("stats").to_pylist()]
            cols = ["id", "s"] if name == "n2" else ["s", "t"]
            assert st["numRecords"] == 2, path
            assert sorted(st["minValues"]) == sorted(st["maxValues"]) == sorted(st["nullCount"]) == cols, (path, st)
            assert st["minValues"]["s"] == "a"
            mx = st["maxValues"]["s"]
            assert mx == "m" * 32 + "\x7f", (path, mx)  # cut to 32, a tie-breaker keeps it an upper bound
            if name == "cols":
                assert st["nullCount"]["t"] == 1


def test_append_only_table_refuses_overwrites_from_spark(spark, tmp_path):
    from tahoe import Table
    from tahoe.errors import InvalidTableOperationError
    from tahoe.spark import write_delta

    path = str(tmp_path / "ao")
    write_delta(spark.range(3), path, properties={"delta.appendOnly": "true"})
    with pytest.raises(InvalidTableOperationError, match="DELTA_CANNOT_MODIFY_APPEND_ONLY.*only allow appends"):
        write_delta(spark.range(2), path, mode="overwrite")
    with pytest.raises(Exception, match="DELTA_CANNOT_MODIFY_APPEND_ONLY.*only allow appends"):
        spark.range(2).write.format("delta").mode("overwrite").save(path)
    assert Table(path).version == 0
    write_delta(spark.range(3, 5), path, mode="append")
    spark.range(5, 6).write.format("delta").mode("append").save(path)
    assert sorted(Table(path).to_arrow().column("id").to_pylist()) == list(range(6))


def test_reads_and_writes_under_a_non_utc_session_time_zone(spark, tmp_path):
    """The test session pins UTC; here the session is America/Los_Angeles (restored after).
    Timestamp literals mean LA wall time, on the day DST starts (01:30 PST = 09:30Z; 03:30 PDT =
    10:30Z). Oracles: instants computed by hand (epoch micros, session-independent via
    unix_micros), timestamp_ntz wall times kept as written, delta-rs, and the Spark-free reader."""
    from datetime import datetime, timezone

    from tahoe import Table
    from tahoe.protocol.partition_values import parse_partition_value
    from tahoe.protocol.schema import TIMESTAMP
    from tahoe.spark import read_delta, write_delta

    key = "spark.sql.session.timeZone"
    before = spark.conf.get(key)
    path = str(tmp_path / "la")
    utc = lambda *a: datetime(*a, tzinfo=timezone.utc)
    want_ts = {1: utc(2024, 3, 10, 9, 30), 2: utc(2024, 3, 10, 10, 30)}
    micros = {i: int(t.timestamp() * 1_000_000) for i, t in want_ts.items()}
    try:
        spark.conf.set(key, "America/Los_Angeles")
        df = spark.sql("""
            select 1 as id, timestamp'2024-03-10 01:30:00' as ts, timestamp'2024-03-10 01:30:00' as pts,
                   timestamp_ntz'2024-03-10 01:30:00' as ntz, date'2024-03-10' as d
            union all
            select 2, timestamp'2024-03-10 03:30:00', timestamp'2024-03-10 03:30:00',
                   timestamp_ntz'2024-03-10 03:30:00', date'2024-03-10'""")
        write_delta(df, path, partition_by=["pts"])
        # partition values in the log name the UTC instants
        pvs = sorted(parse_partition_value(dict(pv)["pts"], TIMESTAMP)
                     for pv in Table(path).files(["partitionValues"]).column("partitionValues").to_pylist())
        assert pvs == [want_ts[1], want_ts[2]]
        # both read paths, under the LA session: the same instants and wall times
        q = "id, unix_micros(ts) as ts, unix_micros(pts) as pts, cast(ntz as string) as ntz, cast(d as string) as d"
        want = [(1, micros[1], micros[1], "2024-03-10 01:30:00", "2024-03-10"),
                (2, micros[2], micros[2], "2024-03-10 03:30:00", "2024-03-10")]
        for read in (lambda: read_delta(spark, path), lambda: spark.read.format("delta").load(path)):
            assert sorted(tuple(r) for r in read().selectExpr(*q.split(", ")).collect()) == want
        # filters with LA literals: partition pruning and data skipping interpret them in the session zone
        for f in ("pts = timestamp'2024-03-10 03:30:00'", "ts > timestamp'2024-03-10 02:00:00'",
                  "ntz = timestamp_ntz'2024-03-10 03:30:00'"):
            assert [r.id for r in read_delta(spark, path, filters=f).collect()] == [2], f
            assert [r.id for r in spark.read.format("delta").load(path).filter(f).collect()] == [2], f
    finally:
        spark.conf.set(key, before)
    # the session-independent readers agree: tahoe's Arrow reader and delta-rs
    for got in (Table(path).to_arrow(), delta_rs_read(path, tmp_path)):
        rows = sorted(zip(*(got.column(c).to_pylist() for c in ("id", "ts", "pts", "ntz"))))
        assert [(i, a.astimezone(timezone.utc), b.astimezone(timezone.utc), n) for i, a, b, n in rows] == \
            [(i, want_ts[i], want_ts[i], datetime(2024, 3, 10, 1 if i == 1 else 3, 30)) for i in (1, 2)]

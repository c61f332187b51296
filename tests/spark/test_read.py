"""Every conformance table through both Spark read paths, plus skipping."""

from __future__ import annotations

import os
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import GOLDEN, assert_rows_equal, conformance_params, manifest_params, read_expected

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


def _arrow(df):
    return df.toArrow()


@pytest.mark.parametrize("entry", manifest_params("rows"))
def test_fast_path(spark, entry):
    from tahoe.spark import read_delta

    df = read_delta(spark, str(GOLDEN / entry["table"]))
    assert_rows_equal(_arrow(df), read_expected(entry), entry["name"])


@pytest.mark.parametrize("entry", manifest_params("rows"))
def test_datasource_path(datasource_reads, entry):
    df = datasource_reads.read.format("delta").load(str(GOLDEN / entry["table"]))
    assert "(Python)" in _plan(df)
    assert_rows_equal(_arrow(df), read_expected(entry), entry["name"])


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def test_format_delta_is_the_native_scan_where_the_jvm_reaches(spark, tmp_path):
    """A batch `format("delta")` load of a local table is Spark's own parquet scan, deletion
    vectors, column mapping, partition values and time travel included (rows derived by hand);
    a change data feed read, a given schema or `spark.tahoe.read.nativeScan=false` keep the
    Python data source."""
    import tahoe
    from tahoe import write_table
    from tahoe.errors import InvalidOptionError
    from tahoe.spark.calls import NATIVE_READ_CONF

    path = str(tmp_path / "t")
    write_table(path, pa.table({"id": list(range(10)), "day": ["mon", "tue"] * 5}), partition_by=["day"],
                properties={"delta.enableDeletionVectors": "true", "delta.columnMapping.mode": "name",
                            "delta.enableChangeDataFeed": "true"})
    tahoe.delete(path, "id % 3 = 0")                                       # v1: ids 0, 3, 6, 9 go (DVs)
    df = spark.read.format("delta").load(path)
    plan = _plan(df)
    assert "FileScan parquet" in plan and "(Python)" not in plan
    assert sorted((r.id, r.day) for r in df.collect()) == [(1, "tue"), (2, "mon"), (4, "mon"), (5, "tue"),
                                                           (7, "tue"), (8, "mon")]
    old = spark.read.format("delta").option("versionAsOf", 0).load(path)
    assert "(Python)" not in _plan(old) and sorted(r.id for r in old.collect()) == list(range(10))
    assert spark.read.format("delta").load(path).filter("day = 'mon'").count() == 3
    cdf = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 1).load(path)
    assert "(Python)" in _plan(cdf)
    assert sorted(r.id for r in cdf.collect()) == [0, 3, 6, 9]
    spark.conf.set(NATIVE_READ_CONF, "false")
    try:
        assert "(Python)" in _plan(spark.read.format("delta").load(path))
        spark.conf.set(NATIVE_READ_CONF, "no")            # a value the conf does not take: refused by name
        with pytest.raises(InvalidOptionError, match="spark.tahoe.read.nativeScan takes true or false, got 'no'"):
            spark.read.format("delta").load(path)
    finally:
        spark.conf.unset(NATIVE_READ_CONF)


def test_skipping_opens_few_files(spark, tmp_path):
    """A selective filter on a sorted column opens <= 10% of a 100-file table's files."""
    from pyspark.sql import functions as F

    from tahoe import Table
    from tahoe.spark import read_delta, write_delta

    path = str(tmp_path / "sorted")
    df = spark.range(0, 100_000, 1, 100).withColumn("v", F.col("id") * 2)
    write_delta(df, path)
    assert Table(path).snapshot.num_files == 100
    out = read_delta(spark, path, filters=["id >= 4200 and id < 4300"])
    assert len(out.inputFiles()) <= 10
    assert out.count() == 100
    out = read_delta(spark, path, filters=[F.col("id") == 99_999])
    assert len(out.inputFiles()) <= 10
    assert [r.v for r in out.collect()] == [199_998]
    # the data-source path skips with the filters Spark pushes down to it
    from tahoe.spark.calls import NATIVE_READ_CONF

    spark.conf.set(NATIVE_READ_CONF, "false")
    try:
        ds = spark.read.format("delta").load(path).filter("id = 7")
        assert [r.v for r in ds.collect()] == [14]
    finally:
        spark.conf.unset(NATIVE_READ_CONF)
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, LessThan

    from tahoe.spark.datasource import DeltaDataSource
    from tahoe.spark.options import PUSHDOWN_OPTION

    for pushed, rows in [([EqualTo(("id",), 7)], [7]),
                         ([GreaterThanOrEqual(("id",), 4200), LessThan(("id",), 4300)], range(4200, 4300))]:
        src = DeltaDataSource({"path": path, PUSHDOWN_OPTION: "true"})   # as tahoe's load() says where pushdown is on
        reader = src.reader(src.schema())
        assert list(reader.pushFilters(pushed)) == pushed  # Spark still applies them to the rows
        files = [f for part in reader.partitions() for f in part.files]
        assert 1 <= len(files) <= 10
        got = pa.concat_tables([pa.Table.from_batches(list(reader.read(part))) for part in reader.partitions()])
        assert set(rows) <= set(got.column("id").to_pylist())


def test_partition_pruning_and_time_travel(spark, tmp_path):
    from tahoe.spark import DeltaTable, read_delta, write_delta

    path = str(tmp_path / "parts")
    df = spark.range(30).selectExpr("id", "cast(id % 3 as int) as p")
    write_delta(df, path, partition_by=["p"])
    write_delta(spark.range(5).selectExpr("id + 100 as id", "cast(9 as int) as p"), path)
    out = read_delta(spark, path, filters="p = 1")
    assert len(out.inputFiles()) >= 1
    assert all("p=1" in f for f in out.inputFiles())
    assert sorted(r.id for r in out.collect()) == list(range(1, 30, 3))
    assert read_delta(spark, path, version=0).count() == 30
    assert spark.read.format("delta").option("versionAsOf", 0).load(path).count() == 30
    assert spark.read.format("delta").load(path).count() == 35
    hist = DeltaTable.forPath(spark, path).history()
    assert [r.version for r in hist.collect()] == [1, 0]
    ts = hist.collect()[1].timestamp
    assert spark.read.format("delta").option("timestampAsOf", ts.isoformat()).load(path).count() == 30


def test_delta_table_api(spark, tmp_path):
    from tahoe.spark import DeltaTable, write_delta

    path = str(tmp_path / "api")
    write_delta(spark.range(10), path)
    dt = DeltaTable.forPath(spark, path)
    assert dt.toDF().count() == 10
    assert DeltaTable.isDeltaTable(spark, path)
    assert not DeltaTable.isDeltaTable(spark, str(tmp_path / "nope"))
    d = dt.detail().collect()[0]
    assert d.format == "delta" and d.numFiles >= 1 and d.location.endswith("api")
    h = dt.history(1).collect()
    assert len(h) == 1 and h[0].operation == "WRITE"   # a first save: delta-spark logs WRITE
    a = dt.alias("t").toDF()
    assert a.select("t.id").count() == 10


_JOIN_TABLES = [p for p in manifest_params("rows")
                if p.values[0] and (p.values[0]["partition_columns"] or p.values[0]["deletion_vectors"])]


def _force_plan(monkeypatch, plan: str) -> None:
    """Steer the fast path away from its first choices to `plan`:
    `union` — one scan per partition (directories don't name the partition values);
    `join` — a broadcast join on `_metadata.file_path` (many partitions, or files of equal size:
    the DV word array is located through the join);
    `words-join` — the DV words in a broadcast join keyed by (file size, word), as when they are
    too many to ship with the query; `words-join-by-id` — the same keyed by the file id from the
    path join; `unpacked` — that join keyed by two columns instead of one packed long."""
    from tahoe.spark import read as R, read_delta

    if plan == "metadata-row-index":  # row indexes from `_metadata` (another Spark version)
        monkeypatch.setattr(R, "_row_index_column", lambda spark, schema: None)
        return
    if plan != "words-join":
        monkeypatch.setattr(R, "_hive_layout", lambda *a: False)
    if plan.startswith("words-join") or plan == "unpacked":
        monkeypatch.setattr(R, "_MAX_DV_WORDS", 0)
    if plan in ("join", "words-join-by-id"):
        monkeypatch.setattr(R, "_MAX_UNION_GROUPS", 0)
        monkeypatch.setattr(R, "_unique_sizes", lambda *a: None)
    if plan == "unpacked":
        monkeypatch.setattr(R, "_packable", lambda files, sizes: False)


_PLANS = ["union", "join", "words-join", "words-join-by-id", "unpacked", "metadata-row-index"]


# the DV-only variants only for tables with deletion vectors
_PLAN_CASES = [(p.values[0], plan, f"{p.id}-{plan}")
               for p in _JOIN_TABLES for plan in _PLANS
               if plan in ("union", "join") or p.values[0]["deletion_vectors"]]


@pytest.mark.parametrize("entry,plan", conformance_params([c[:2] for c in _PLAN_CASES], [c[2] for c in _PLAN_CASES], n=2))
def test_fast_path_other_plans(spark, entry, plan, monkeypatch):
    """The plans the fast path falls back to (see `_force_plan`) return the same rows."""
    from tahoe.spark import read as R, read_delta

    _force_plan(monkeypatch, plan)
    df = read_delta(spark, str(GOLDEN / entry["table"]))
    assert_rows_equal(_arrow(df), read_expected(entry), entry["name"])


def _add_dvs(path: str, deleted: list[list[int]]) -> None:
    """Mark rows of each active file (in `add_files()` order) deleted with deletion vectors."""
    from tahoe.log import DeltaLog
    from tahoe.write import delete_rows

    adds = DeltaLog.for_table(path).snapshot().add_files()
    delete_rows(path, {a.path: rows for a, rows in zip(adds, deleted)})


@pytest.mark.parametrize("plan", ["directories", *_PLANS, "many-files"])
def test_deletion_vector_words(spark, tmp_path, plan, monkeypatch):
    """Deleted rows on 64-row word edges (bit 0, bit 63 — a negative mask — and the next word),
    a lone row far into a file and a file's last row are removed exactly, and rows past a file's
    last deleted word are kept, in every plan."""
    from pyspark.sql import functions as F

    from tahoe import Table
    from tahoe.spark import read as R, read_delta, write_delta

    path = str(tmp_path / "dv")
    df = spark.range(0, 3000, 1, 1).select(F.col("id"), (F.col("id") % 2).cast("int").alias("p"))
    write_delta(df.repartition(1), path, partition_by=["p"], properties={"delta.enableDeletionVectors": "true"})
    files = Table(path).files(["partitionValues", "stats"])
    assert files.num_rows == 2
    deleted = [[0, 62, 63, 64, 127, 128, 1000, 1499], [1, 63]]
    _add_dvs(path, deleted)
    if plan == "many-files":  # more files with DVs than a CASE tree on the file size takes
        monkeypatch.setattr(R, "_MAX_KEYED_FILES", 1)
    elif plan != "directories":
        _force_plan(monkeypatch, plan)
    out = read_delta(spark, path)
    got = sorted(r.id for r in out.collect())
    if plan == "directories":  # the word array on one scan: no join at all
        assert "Join" not in out._jdf.queryExecution().executedPlan().toString()
    gone = set()  # the ids at the deleted row positions of each file
    for add, rows in zip(Table(path, version=0).snapshot.add_files(), deleted):
        ids = pq.read_table(os.path.join(path, unquote(add.path)), columns=["id"]).column("id").to_pylist()
        gone.update(ids[r] for r in rows)
    assert got == sorted(set(range(3000)) - gone)
    assert got == sorted(Table(path).to_arrow(columns=["id"]).column("id").to_pylist())


def test_deletion_vectors_on_split_files(spark, tmp_path):
    """Row indexes stay right when Spark splits a file (many row groups, small splits) and the
    DV'd scan runs as many tasks."""
    from pyspark.sql import functions as F

    from tahoe import Table
    from tahoe.spark import read_delta, write_delta

    path = str(tmp_path / "split")
    hconf = spark.sparkContext._jsc.hadoopConfiguration()
    hconf.set("parquet.block.size", "4096")
    try:
        write_delta(spark.range(0, 20000, 1, 1).select(F.col("id"), (F.col("id") * 7).alias("v")), path,
                    properties={"delta.enableDeletionVectors": "true"})
    finally:
        hconf.unset("parquet.block.size")
    assert pq.ParquetFile(Table(path).file_uris()[0].removeprefix("file://")).num_row_groups > 4
    deleted = sorted({0, 1, 63, 64, 4095, 4096, 9999, 19999} | set(range(500, 20000, 997)))
    _add_dvs(path, [deleted])
    old = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "8192")
    try:
        df = read_delta(spark, path)
        assert df.rdd.getNumPartitions() > 4
        got = sorted(r.id for r in df.collect())
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", old)
    assert got == sorted(set(range(20000)) - set(deleted))


def test_unfilled_row_index_fails_loudly(spark, tmp_path, monkeypatch):
    """Should a Spark version stop filling the row-index column, a DV'd read fails with a clear
    error instead of dropping or keeping rows silently."""
    from pyspark.sql import functions as F

    from tahoe.spark import read as R, read_delta, write_delta

    path = str(tmp_path / "t")
    write_delta(spark.range(0, 100, 1, 1).select(F.col("id")), path, properties={"delta.enableDeletionVectors": "true"})
    _add_dvs(path, [[3, 4]])
    monkeypatch.setattr(R, "_ROW_INDEX_COLUMN", "__tahoe_not_a_row_index")
    with pytest.raises(Exception, match="did not fill the row index column"):
        read_delta(spark, path).collect()


def test_directory_plan_is_one_scan(spark, tmp_path):
    """A table whose files sit in the directories their partition values name is read with one
    scan and Spark's partition discovery (no union, no join), partition columns typed from the log."""
    from tahoe.spark import read_delta, write_delta

    path = str(tmp_path / "dirs")
    df = spark.sql("select id, cast(id % 3 as int) as p, cast(id % 2 = 0 as boolean) as b, "
                   "case when id % 4 = 0 then null else concat('x y/', id % 4) end as s, "
                   "date_add(date'2024-01-01', cast(id % 2 as int)) as d from range(40)")
    write_delta(df, path, partition_by=["p", "b", "s", "d"])
    out = read_delta(spark, path)
    plan = out._jdf.queryExecution().executedPlan().toString()
    assert "Union" not in plan and "Join" not in plan, plan
    assert out.schema.simpleString() == "struct<id:bigint,p:int,b:boolean,s:string,d:date>"
    assert sorted(map(tuple, out.collect())) == sorted(map(tuple, df.collect()))


def test_footer_stats_odd_names(spark, tmp_path):
    """Stats from parquet footers: nested, dotted and absent columns."""
    import json

    from tahoe import Table
    from tahoe.spark import read_delta, write_delta

    path = str(tmp_path / "odd")
    df = spark.sql("select id as `a.b`, named_struct('x', id, 'y.z', cast(id as string)) as s, "
                   "array(id) as arr, cast(null as int) as n from range(10)").coalesce(1)
    write_delta(df, path)
    st = json.loads(Table(path).files(["stats"]).column("stats")[0].as_py())
    assert st["numRecords"] == 10
    assert st["minValues"]["a.b"] == 0 and st["maxValues"]["a.b"] == 9
    assert st["minValues"]["s"]["y.z"] == "0" and st["nullCount"]["s"]["x"] == 0
    assert st["nullCount"]["n"] == 10 and st["nullCount"]["a.b"] == 0
    assert read_delta(spark, path, filters="`a.b` > 5").count() == 4


def test_id_mode_reads_parquet_fields_by_id_when_names_differ(spark, tmp_path):
    """Both Spark read paths find an id-mode table's columns by Parquet field id, not by name (the
    file's names differ from the physical names; a decoy has the physical name): hand-written rows."""
    from tahoe.spark import read_delta
    from tests.read.test_arrow_reader import id_mode_table_with_other_names

    path, rows = id_mode_table_with_other_names(tmp_path)

    def got(df):
        return sorted((r.asDict(recursive=True) for r in df.collect()), key=lambda r: r["id"])

    assert got(read_delta(spark, path)) == rows
    assert got(spark.read.format("delta").load(path)) == rows
    assert [r.name for r in read_delta(spark, path, filters="s.a = 30").collect()] == [None]


def test_datasource_splits_a_small_table_over_the_cores(datasource_reads, tmp_path):
    """The data source splits files as Spark's own file scan does (FilePartition.maxSplitBytes: at
    most the bytes per core of the session's default parallelism), so a small table gives every
    core a task: the oracle is `spark.read.parquet` over the same files, and the rows."""
    spark = datasource_reads
    from pyspark.sql import functions as F

    from tahoe import Table
    from tahoe.spark import write_delta
    from tahoe.spark.scan import max_split_bytes, pack_by_size

    path = str(tmp_path / "t")
    write_delta(spark.range(0, 40000, 1, 6).select(F.col("id"), (F.col("id") % 3).alias("v")), path)
    files = [u.removeprefix("file://") for u in Table(path).file_uris()]
    assert len(files) == 6
    ours = spark.read.format("delta").load(path)
    theirs = spark.read.parquet(*files)
    assert ours.rdd.getNumPartitions() == theirs.rdd.getNumPartitions() == spark.sparkContext.defaultParallelism
    assert sorted(r.id for r in ours.collect()) == list(range(40000))
    # Spark's rule by hand: 8 files of 22 MB over 2 cores -> splits of (8 * 26 MB) / 2 = 104 MB,
    # 4 files each (without the per-core bound: 128 MB, 5 files and 3)
    mb = 1 << 20
    sizes = [22 * mb] * 8
    assert max_split_bytes(sizes, 2) == 104 * mb
    assert [len(g) for g in pack_by_size([(i, s) for i, s in enumerate(sizes)], max_split_bytes(sizes, 2))] == [4, 4]
    assert [len(g) for g in pack_by_size([(i, s) for i, s in enumerate(sizes)], max_split_bytes(sizes, None))] == [5, 3]


@pytest.mark.conformance
def test_every_conformance_table_over_spark_connect(connect):
    """Every conformance table with expected rows read by a Spark Connect client (one test: a
    client session is reused), against the reference's rows."""
    from tests.conftest import MANIFEST

    entries = [e for e in MANIFEST if e["expect"] == "rows"]
    assert entries
    wrong = []
    for e in entries:
        try:
            got = connect.read.format("delta").load(str(GOLDEN / e["table"])).toArrow()
            assert_rows_equal(got, read_expected(e), e["name"])
        except Exception as ex:  # noqa: BLE001 - every table reported at once
            wrong.append(f"{e['name']}: {type(ex).__name__}: {str(ex)[:300]}")
    assert not wrong, "\n".join(wrong)

"""VARIANT columns on Spark: `parse_json` → write (write_delta, format("delta")) → read (native
fast path, data-source path, tahoe's Arrow reader, delta-rs) → `to_json` equals the input JSON;
shredded files (Spark's own shredding writer) reassembled by tahoe's Arrow reader.

Oracles: the input JSON documents (Spark's `to_json` of Spark's reads), Spark's own variant bytes
(tahoe's Arrow reads must return the bytes Spark encoded), delta-rs's reads of the same table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

DOCS = ['{"a":1,"b":"x"}', '[1,2.5,null]', None, '"str"', '{"a":2,"b":"y","c":{"d":[true,false]}}',
        'null', '12345678901234', '{"a":"not an int","b":"z"}']


def _df(spark):
    rows = ", ".join(f"({i}, {'NULL' if d is None else repr(d)})" for i, d in enumerate(DOCS))
    return spark.sql(f"SELECT CAST(id AS BIGINT) AS id, parse_json(j) AS v FROM VALUES {rows} AS t(id, j)")


def _json_rows(df) -> dict[int, str | None]:
    return {r["id"]: r["j"] for r in df.selectExpr("id", "to_json(v) AS j").collect()}


def _expected() -> dict[int, str | None]:
    return {i: (None if d is None else json.dumps(json.loads(d), separators=(",", ":"), sort_keys=True))
            for i, d in enumerate(DOCS)}


def _canon(j: str | None) -> str | None:
    return None if j is None else json.dumps(json.loads(j), separators=(",", ":"), sort_keys=True)


def _spark_bytes(spark) -> dict[int, tuple[bytes, bytes] | None]:
    """The (metadata, value) bytes Spark's parse_json produces, read back from a plain parquet
    file Spark wrote without shredding (the physical encoding of each document)."""
    return {i: b for i, b in enumerate(_bytes_of(spark, DOCS))}


def _bytes_of(spark, docs):
    from pyspark.sql import functions as F

    out = []
    for d in docs:
        if d is None:
            out.append(None)
            continue
        v = spark.range(1).select(F.parse_json(F.lit(d)).alias("v")).collect()[0]["v"]
        out.append((bytes(v.metadata), bytes(v.value)))
    return out


def _arrow_bytes(t: pa.Table) -> dict[int, tuple[bytes, bytes] | None]:
    return {i: (None if v is None else (v["metadata"], v["value"]))
            for i, v in zip(t.column("id").to_pylist(), t.column("v").to_pylist())}


def _delta_rs(path: str, tmp_path) -> pa.Table:
    out = str(tmp_path / f"rs_{abs(hash(path))}.parquet")
    code = textwrap.dedent(f"""
        import os, pyarrow as pa, pyarrow.parquet as pq
        from deltalake import DeltaTable
        t = DeltaTable({path!r}).to_pyarrow_table()
        pq.write_table(t, {out!r})
        os._exit(0)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert os.path.exists(out), r.stderr[-2000:]
    return pq.read_table(out)


def _read_all_ways(spark, path: str):
    import tahoe
    from tahoe.spark import read_delta

    fast = _json_rows(read_delta(spark, path))
    ds = _json_rows(spark.read.format("delta").load(path))
    arrow = tahoe.Table(path).to_arrow()
    return fast, ds, arrow


def test_write_delta_variant_round_trip(spark, tmp_path):
    from tahoe.spark import write_delta

    path = str(tmp_path / "v")
    write_delta(_df(spark), path)
    log0 = [json.loads(line) for line in open(os.path.join(path, "_delta_log", "00000000000000000000.json"))]
    proto = next(a["protocol"] for a in log0 if "protocol" in a)
    assert proto["minReaderVersion"] == 3 and "variantType" in proto["readerFeatures"] \
        and "variantType" in proto["writerFeatures"]
    # stats: nullCount for the variant column, no min/max (spec "Variant Data Type")
    adds = [a["add"] for a in log0 if "add" in a]
    stats = [json.loads(a["stats"]) for a in adds]
    assert sum(s["nullCount"]["v"] for s in stats) == 1
    assert all("v" not in s.get("minValues", {}) and "v" not in s.get("maxValues", {}) for s in stats)
    # unshredded files (no delta.enableVariantShredding): Spark 4's writer would shred by default
    for a in adds:
        t = pq.ParquetFile(os.path.join(path, a["path"])).schema_arrow.field("v").type
        assert sorted(t.field(i).name for i in range(t.num_fields)) == ["metadata", "value"]

    fast, ds, arrow = _read_all_ways(spark, path)
    assert fast == _expected() and ds == _expected()
    assert _arrow_bytes(arrow) == _spark_bytes(spark)
    rs = _delta_rs(path, tmp_path)
    assert _arrow_bytes(rs) == _spark_bytes(spark)


def test_datasource_write_variant_and_append(spark, tmp_path):
    import tahoe

    path = str(tmp_path / "ds")
    _df(spark).write.format("delta").mode("overwrite").save(path)
    _df(spark).where("id < 2").selectExpr("id + 100 AS id", "v").write.format("delta").mode("append").save(path)
    fast, ds, arrow = _read_all_ways(spark, path)
    want = _expected() | {100 + i: _expected()[i] for i in (0, 1)}
    assert fast == want and ds == want
    sb = _spark_bytes(spark)
    assert _arrow_bytes(arrow) == sb | {100: sb[0], 101: sb[1]}
    assert tahoe.Table(path).version == 1


def test_arrow_writer_variant_read_by_spark_and_delta_rs(spark, tmp_path):
    """Variants written by tahoe's Arrow writer (the bytes Spark encodes, given as
    struct<metadata, value>) read back by Spark's two paths and by delta-rs."""
    import tahoe

    sb = _spark_bytes(spark)
    ids = sorted(sb)
    metas = [None if sb[i] is None else sb[i][0] for i in ids]
    vals = [None if sb[i] is None else sb[i][1] for i in ids]
    # the untagged form delta-rs uses is accepted for an existing variant column; a new table
    # needs the tagged form (tahoe.protocol.variant.ARROW_TYPE) to know the column is a variant
    from tahoe.protocol.variant import arrow_array

    path = str(tmp_path / "aw")
    tahoe.write_table(path, pa.table({"id": pa.array(ids, pa.int64()), "v": arrow_array(metas, vals)}))
    untagged = pa.StructArray.from_arrays(
        [pa.array([sb[0][1]]), pa.array([sb[0][0]])], names=["value", "metadata"])   # pyspark's order
    tahoe.write_table(path, pa.table({"id": pa.array([50], pa.int64()), "v": untagged}), mode="append")
    fast, ds, _ = _read_all_ways(spark, path)
    want = _expected() | {50: _expected()[0]}
    assert fast == want and ds == want
    assert _arrow_bytes(_delta_rs(path, tmp_path)) == sb | {50: sb[0]}


def test_delta_rs_written_variant_read_by_tahoe(spark, tmp_path):
    path = str(tmp_path / "rs")
    sb = _spark_bytes(spark)
    src = str(tmp_path / "src.parquet")
    ids = sorted(sb)
    arr = pa.StructArray.from_arrays(
        [pa.array([b"" if sb[i] is None else sb[i][0] for i in ids], pa.binary()),
         pa.array([b"" if sb[i] is None else sb[i][1] for i in ids], pa.binary())],
        fields=[pa.field("metadata", pa.binary(), False), pa.field("value", pa.binary(), False)],
        mask=pa.array([sb[i] is None for i in ids]))
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "v": arr}), src)
    code = textwrap.dedent(f"""
        import os, pyarrow.parquet as pq
        from deltalake import DeltaTable, write_deltalake
        from deltalake.schema import Schema, Field, VariantType
        DeltaTable.create({path!r}, schema=Schema([Field("id", "long"), Field("v", VariantType())]))
        write_deltalake({path!r}, pq.read_table({src!r}), mode="append")
        print("OK")
        os._exit(0)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "OK" in r.stdout, r.stderr[-2000:]
    fast, ds, arrow = _read_all_ways(spark, path)
    assert fast == _expected() and ds == _expected()
    assert _arrow_bytes(arrow) == sb


def test_shredded_variant_table(spark, tmp_path):
    """delta.enableVariantShredding=true: the table gets variantShredding, Spark's writer shreds
    (a forced shredding schema), and every reader reassembles the same values — tahoe's Arrow
    reader byte for byte the values Spark's own shredded reader rebuilds."""
    from tahoe.spark import write_delta

    path = str(tmp_path / "sh")
    spark.conf.set("spark.sql.variant.forceShreddingSchemaForTest", "struct<a:int,b:string,c:struct<d:array<boolean>>>")
    try:
        write_delta(_df(spark), path, properties={"delta.enableVariantShredding": "true"})
    finally:
        spark.conf.unset("spark.sql.variant.forceShreddingSchemaForTest")
    log0 = [json.loads(line) for line in open(os.path.join(path, "_delta_log", "00000000000000000000.json"))]
    proto = next(a["protocol"] for a in log0 if "protocol" in a)
    assert {"variantType", "variantShredding"} <= set(proto["readerFeatures"])
    files = [a["add"]["path"] for a in log0 if "add" in a]
    shredded = [f for f in files if "typed_value" in
                [x.name for x in pq.ParquetFile(os.path.join(path, f)).schema_arrow.field("v").type]]
    assert shredded, "Spark did not shred: the test would not exercise reassembly"
    fast, ds, arrow = _read_all_ways(spark, path)
    assert fast == _expected() and ds == _expected()
    got = _arrow_bytes(arrow)
    from tahoe.protocol.variant import to_json

    assert {i: None if b is None else _canon(to_json(*b)) for i, b in got.items()} == _expected()
    # the reassembled values are the ones Spark's own shredded reader rebuilds (a shredded int
    # column gives int32 variants, not parse_json's int8: the type is the shredding schema's)
    from tahoe.spark import read_delta

    spark_vals = {r["id"]: None if r["v"] is None else bytes(r["v"].value)
                  for r in read_delta(spark, path).collect()}
    assert {i: None if b is None else b[1] for i, b in got.items()} == spark_vals

"""Optimized writes through `df.write.format("delta")`: the writer option `optimizeWrite`, the
session conf `spark.databricks.delta.optimizeWrite.enabled` and the table property
`delta.autoOptimize.optimizeWrite`, with delta-spark's precedence (option > session conf > table
property): an optimized write of a partitioned table gets one file per partition value.

Oracles: the add actions of each commit's JSON (files counted from the log); the number of files
an unoptimized write must make, counted from Spark's own partitioning of the DataFrame (distinct
(spark_partition_id, p) pairs); the rows written (hand-built) against delta-rs reading the tables."""

from __future__ import annotations

import json
import os

import pandas as pd
import pyarrow as pa
import pytest

from tahoe.errors import InvalidOptionError
from tests.write.test_writer import delta_rs_rows, same_rows

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

CONF = "spark.databricks.delta.optimizeWrite.enabled"


def _adds(path: str, version: int) -> list[dict]:
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as f:
        return [a["add"] for a in map(json.loads, filter(str.strip, f)) if "add" in a]


def _files_per_partition(path: str, version: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in _adds(path, version):
        p = a["partitionValues"]["p"]
        out[p] = out.get(p, 0) + 1
    return out


def test_optimized_writes_by_option_session_conf_and_table_property(spark, tmp_path):
    from pyspark.sql import functions as F

    rows = pd.DataFrame({"id": range(300), "p": [["a", "b", "c"][i % 3] for i in range(300)]})
    df = spark.createDataFrame(rows).repartition(4, "id")     # every task holds rows of every p
    pairs = {(r.task, r.p) for r in df.select(F.spark_partition_id().alias("task"), "p").collect()}
    tasks_per_p = {p: sum(1 for _, q in pairs if q == p) for p in "abc"}
    assert all(n > 1 for n in tasks_per_p.values())
    one_each = {"a": 1, "b": 1, "c": 1}
    expected_rows: dict[str, list] = {}

    def write(path, *, mode="append", **opts):
        w = df.write.format("delta").mode(mode).partitionBy("p")
        for k, v in opts.items():
            w = w.option(k, v)
        w.save(path)
        expected_rows.setdefault(path, []).append(rows)

    # the writer option; without it the files follow the DataFrame's own partitioning
    by_option = str(tmp_path / "by_option")
    write(by_option)
    assert _files_per_partition(by_option, 0) == tasks_per_p
    write(by_option, optimizeWrite="true")
    assert _files_per_partition(by_option, 1) == one_each
    write(by_option, optimizeWrite="false")
    assert _files_per_partition(by_option, 2) == tasks_per_p

    # the session conf, which the writer option overrides
    spark.conf.set(CONF, "true")
    try:
        write(by_option)
        assert _files_per_partition(by_option, 3) == one_each
        write(by_option, optimizeWrite="false")
        assert _files_per_partition(by_option, 4) == tasks_per_p
    finally:
        spark.conf.unset(CONF)

    # the table property: set by the write that creates the table, then read from the table;
    # the session conf overrides it
    by_property = str(tmp_path / "by_property")
    write(by_property, **{"delta.autoOptimize.optimizeWrite": "true"})
    assert _files_per_partition(by_property, 0) == one_each
    write(by_property)
    assert _files_per_partition(by_property, 1) == one_each
    spark.conf.set(CONF, "false")
    try:
        write(by_property)
        assert _files_per_partition(by_property, 2) == tasks_per_p
        write(by_property, optimizeWrite="true")
        assert _files_per_partition(by_property, 3) == one_each
    finally:
        spark.conf.unset(CONF)

    # unpartitioned: the rows (far under the 512 MiB bin size) go to one task, one file
    flat = str(tmp_path / "flat")
    df.write.format("delta").option("optimizeWrite", "true").save(flat)
    expected_rows[flat] = [rows]
    assert len(_adds(flat, 0)) == 1

    # a value that is not a boolean: refused by name, nothing committed
    with pytest.raises(InvalidOptionError, match="optimizeWrite"):
        df.write.format("delta").mode("append").option("optimizeWrite", "maybe").save(flat)
    assert sorted(os.listdir(os.path.join(flat, "_delta_log"))) == [f"{0:020d}.crc", f"{0:020d}.json"]

    theirs = delta_rs_rows(list(expected_rows), tmp_path)
    for path, written in expected_rows.items():
        same_rows(pa.Table.from_pandas(pd.concat(written), preserve_index=False), theirs[path], path)

"""DELETE / UPDATE / MERGE on Spark (`tahoe.spark.DeltaTable`, delta-spark's Python API).

Oracles: delta-rs running the same operations on its own copy of the table (the scenarios of
tests/write/test_dml_differential.py, translated to delta-spark's builder), delta-rs reading what
the Spark executor wrote (QueryBuilder: deletion vectors, column mapping) and its `load_cdf`;
expected rows, metrics and history entries derived by hand for the API checks. Spark work is kept
small: one shared session, tables of a few dozen rows.
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from tahoe.log import DeltaLog
from tahoe.read.changes import read_changes_arrow
from tests.fixtures.deltars import run_deltars, sorted_rows, source_file
from tests.write.test_dml_differential import (
    COLS, SCENARIOS, SOURCE, VARIANTS, base_rows, cdf_rows, deltars_ops, make_table,
)

SPARK_SCHEMA = "id long, day string, v long, s string"

# delta-rs TableMerger method -> (delta-spark DeltaMergeBuilder method, its keyword for the values)
BUILDER = {
    "when_matched_update": ("whenMatchedUpdate", "set"),
    "when_matched_update_all": ("whenMatchedUpdateAll", None),
    "when_matched_delete": ("whenMatchedDelete", None),
    "when_not_matched_insert": ("whenNotMatchedInsert", "values"),
    "when_not_matched_insert_all": ("whenNotMatchedInsertAll", None),
    "when_not_matched_by_source_update": ("whenNotMatchedBySourceUpdate", "set"),
    "when_not_matched_by_source_delete": ("whenNotMatchedBySourceDelete", None),
}


def spark_df(spark, t: pa.Table, schema: str = SPARK_SCHEMA):
    return spark.createDataFrame([tuple(r.values()) for r in t.to_pylist()], schema)


def run_spark(spark, path: str, ops: list[dict], source) -> list[list]:
    """The ops through delta-spark's API on tahoe; each op's result DataFrame as rows."""
    from tahoe.spark import DeltaTable

    out = []
    for op in ops:
        dt = DeltaTable.forPath(spark, path)
        if op["op"] == "delete":
            r = dt.delete(op.get("predicate"))
        elif op["op"] == "update":
            r = dt.update(op.get("predicate"), op["updates"])
        else:
            m = dt.alias(op["target_alias"]).merge(source.alias(op["source_alias"]), op["predicate"])
            for name, kw in op["clauses"]:
                method, key = BUILDER[name]
                args = {"condition": kw.get("predicate")}
                if key:
                    args[key] = kw["updates"]
                m = getattr(m, method)(**args)
            r = m.execute()
        out.append([tuple(x) for x in r.collect()])
    return out


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    work = tmp_path_factory.mktemp("oracle")
    src = source_file(SOURCE, work, "source")
    jobs, keys = [], []
    for partitioned in (True, False):
        for name, ops in SCENARIOS.items():
            path = str(work / f"{name}-{partitioned}")
            make_table(path, partitioned, {})
            jobs.append({"path": path, "ops": deltars_ops(ops, src), "cdf_from": 1})
            keys.append((name, partitioned))
    out = {}
    for k, r in zip(keys, run_deltars(jobs, work / "rs")):
        assert r["error"] is None, (k, r["error"])
        out[k] = r
    return out


@pytest.mark.parametrize("variant", ["cow-flat", "cm-dv"])
def test_spark_dml_matches_delta_rs(spark, variant, oracle, tmp_path):
    """Every scenario (every clause kind, NULLs in conditions) on Spark: the rows tahoe reads =
    delta-rs's rows for the same operations; delta-rs reads the table the Spark executor wrote
    and gets the same rows; change rows (tahoe's reader, and delta-rs's load_cdf where it can:
    not column mapping) = delta-rs's own load_cdf."""
    from tahoe.spark import read_delta

    partitioned, props = VARIANTS[variant]
    source = spark_df(spark, SOURCE)
    paths = {}
    for name, ops in SCENARIOS.items():
        path = str(tmp_path / name)
        make_table(path, partitioned, props)
        run_spark(spark, path, ops, source)
        paths[name] = path
        want = oracle[(name, partitioned)]
        got = read_delta(spark, path).toArrow()
        assert sorted_rows(got, COLS) == sorted_rows(want["rows"], COLS), name
        assert cdf_rows(read_changes_arrow(DeltaLog.for_table(path), 1)) == cdf_rows(want["cdf"]), name
    cdf = "delta.columnMapping.mode" not in props
    read = run_deltars([{"path": p, "ops": [], "cdf_from": 1 if cdf else None} for p in paths.values()],
                       tmp_path / "rs")
    for (name, path), r in zip(paths.items(), read):
        assert r["error"] is None, (name, r["error"])
        want = oracle[(name, partitioned)]
        assert sorted_rows(r["rows"], COLS) == sorted_rows(want["rows"], COLS), name
        if cdf:
            assert cdf_rows(r["cdf"]) == cdf_rows(want["cdf"]), name


def _history(path: str) -> list[dict]:
    """commitInfo of each version, read from the log files (not through tahoe)."""
    out = []
    log = os.path.join(path, "_delta_log")
    for name in sorted(f for f in os.listdir(log) if f.endswith(".json")):
        with open(os.path.join(log, name)) as fh:
            for line in fh:
                a = json.loads(line)
                if "commitInfo" in a:
                    out.append(a["commitInfo"])
    return out


def _actions(path: str, version: int) -> dict[str, list]:
    out: dict[str, list] = {}
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as fh:
        for line in fh:
            (k, v), = json.loads(line).items()
            out.setdefault(k, []).append(v)
    return out


def test_dv_mode_on_spark(spark, tmp_path):
    """Merge-on-read on Spark: a DELETE of a few rows adds no data file (only DVs on the same
    files); an UPDATE writes only the updated rows; the result reads the same (hand-derived rows)
    through the fast path, the data-source path and delta-rs; the metrics and result DataFrames
    are delta-spark's."""
    from tahoe.spark import DeltaTable, read_delta

    path = str(tmp_path / "t")
    make_table(path, True, {"delta.enableDeletionVectors": "true"})
    dt = DeltaTable.forPath(spark, path)
    assert dt.delete("id IN (1, 2, 30)").collect()[0].num_affected_rows == 3
    a = _actions(path, 1)
    assert "add" in a and all(x.get("deletionVector") is not None for x in a["add"])   # DVs only
    assert {x["path"] for x in a["add"]} == {x["path"] for x in a["remove"]}         # same data files
    assert len(a["add"]) == 3 and "cdc" in a                                         # CDF on: DV deletes need cdc
    from pyspark.sql import functions as F

    r = dt.update(F.col("id").isin(4, 5), {"v": F.lit(-1)}).collect()
    assert [tuple(x) for x in r] == [(2,)]
    a = _actions(path, 2)
    new = [x for x in a["add"] if x.get("deletionVector") is None]
    assert sum(json.loads(x["stats"])["numRecords"] for x in new) == 2              # only the changed rows
    want = [(i, d, -1 if i in (4, 5) else v, s) for i, d, v, s in sorted_rows(base_rows(), COLS)
            if i not in (1, 2, 30)]
    key = lambda r: tuple((x is not None, x if x is not None else 0) for x in r)   # noqa: E731
    want = sorted(want, key=key)
    assert sorted_rows(read_delta(spark, path).toArrow(), COLS) == want
    assert sorted_rows(spark.read.format("delta").load(path).toArrow(), COLS) == want
    (rs,) = run_deltars([{"path": path, "ops": [], "cdf_from": 1}], tmp_path / "rs")
    assert rs["error"] is None and sorted_rows(rs["rows"], COLS) == want
    cdf = sorted((r["id"], r["_change_type"], r["_commit_version"]) for r in rs["cdf"].to_pylist())
    assert cdf == [(1, "delete", 1), (2, "delete", 1), (4, "update_postimage", 2), (4, "update_preimage", 2),
                   (5, "update_postimage", 2), (5, "update_preimage", 2), (30, "delete", 1)]
    h = _history(path)
    assert [c["operation"] for c in h] == ["WRITE", "DELETE", "UPDATE"]
    m = h[1]["operationMetrics"]
    assert (m["numDeletedRows"], m["numAddedFiles"], m["numRemovedFiles"], m["numDeletionVectorsAdded"],
            m["numCopiedRows"]) == ("3", "0", "0", "3", "0")
    m = h[2]["operationMetrics"]
    assert (m["numUpdatedRows"], m["numCopiedRows"], m["numAddedFiles"]) == ("2", "0", str(len(new)))

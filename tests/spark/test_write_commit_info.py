"""delta-spark's commitInfo for every write tahoe does on Spark — checked against delta-spark's
operation names, parameters and metrics written out by hand, and (a `conformance` test, skipped
with the reason where the tables are absent) against delta-spark's own commits in the conformance
tables."""

from __future__ import annotations

import json

import pytest

from tests.conftest import GOLDEN, conformance
from tests.txn._helpers import commit_info

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


# --- commitInfo ------------------------------------------------------------------------------------------

def _conformance_write_commit(mode: str) -> dict:
    """A version-0 WRITE commitInfo of `mode` that delta-spark wrote (the conformance tables)."""
    for p in sorted(GOLDEN.rglob("00000000000000000000.json")):
        ci = json.loads(p.read_text().splitlines()[0]).get("commitInfo", {})
        if ci.get("operation") == "WRITE" and ci.get("operationParameters", {}).get("mode") == mode:
            return ci
    raise AssertionError(f"no delta-spark WRITE ({mode}) version 0 in {GOLDEN}")


def _first_save(spark, path: str) -> dict:
    """The commitInfo of a first `save` (default mode, partitioned) of two rows."""
    spark.createDataFrame([(1, "a"), (2, "b")], "id long, p string").write.format("delta") \
        .option("partitionBy", "p").save(path)
    return commit_info(path, 0)


@conformance
def test_first_write_commit_info_is_delta_sparks(spark, tmp_path):
    """The same keys as a version-0 WRITE (ErrorIfExists) delta-spark wrote: operation parameters,
    metrics, isBlindAppend, no readVersion."""
    oracle = _conformance_write_commit("ErrorIfExists")
    ci = _first_save(spark, str(tmp_path / "t"))
    assert ci["operation"] == oracle["operation"] == "WRITE"
    assert set(ci["operationMetrics"]) == set(oracle["operationMetrics"])
    assert set(ci["operationParameters"]) == set(oracle["operationParameters"])
    assert ci["isBlindAppend"] == oracle["isBlindAppend"] and "readVersion" not in oracle and "readVersion" not in ci


def test_commit_info_of_every_write(spark, tmp_path):
    """delta-spark's operation names, parameters and metrics: a first `save` is WRITE (mode
    ErrorIfExists, partitionBy JSON, isBlindAppend, no readVersion; numFiles / numOutputRows /
    numOutputBytes), as in delta-spark's own version-0 commits; DeltaTable.create is CREATE TABLE,
    createOrReplace CREATE OR REPLACE TABLE, replace REPLACE TABLE; replaceWhere adds the
    removal metrics."""
    from tahoe.spark import DeltaTable

    path = str(tmp_path / "t")
    ci = _first_save(spark, path)
    assert ci["operation"] == "WRITE" and "readVersion" not in ci and ci["isBlindAppend"] is True
    assert ci["operationParameters"] == {"mode": "ErrorIfExists", "partitionBy": '["p"]'}
    assert set(ci["operationMetrics"]) == {"numFiles", "numOutputRows", "numOutputBytes"}
    assert ci["operationMetrics"]["numOutputRows"] == "2"
    spark.createDataFrame([(3, "a")], "id long, p string").write.format("delta").mode("overwrite") \
        .option("replaceWhere", "p = 'a'").save(path)
    ci = commit_info(path, 1)
    assert ci["operationParameters"]["predicate"] == '["p = \'a\'"]'
    m = ci["operationMetrics"]
    assert m["numRemovedFiles"] == "1" and m["numOutputRows"] == "1" and m["numDeletedRows"] == "1"
    assert int(m["numRemovedBytes"]) > 0 and m["numCopiedRows"] == "0" and m["numAddedChangeFiles"] == "0"

    ops = []
    for name, builder in (("c", DeltaTable.create), ("i", DeltaTable.createIfNotExists),
                          ("o", DeltaTable.createOrReplace)):
        loc = str(tmp_path / name)
        builder(spark).location(loc).addColumn("id", "BIGINT").execute()
        ops.append(commit_info(loc, 0)["operation"])
    DeltaTable.replace(spark).location(str(tmp_path / "c")).addColumn("id", "BIGINT").execute()
    DeltaTable.createOrReplace(spark).location(str(tmp_path / "c")).addColumn("id", "BIGINT").execute()
    ops += [commit_info(str(tmp_path / "c"), 1)["operation"], commit_info(str(tmp_path / "c"), 2)["operation"]]
    assert ops == ["CREATE TABLE", "CREATE TABLE", "CREATE OR REPLACE TABLE", "REPLACE TABLE",
                   "CREATE OR REPLACE TABLE"]

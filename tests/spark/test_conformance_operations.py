"""Tables another engine wrote, changed by tahoe: conformance tables (delta-spark's, with deletion
vectors, column mapping, checkpoints, every partition type) compacted and changed by a DELETE
and an UPDATE — Spark-free (`tahoe.DeltaTable`, deltalake's API) and on Spark (`DeltaTable.forPath`)
— then read by both readers. Oracle: the reference's expected rows (less the deleted ones,
filtered with pyarrow). A full sweep of all 71 tables with rows ran clean on 2026-11-29; these
ten cover the shapes."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tests.conftest import MANIFEST, conformance_params

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

SAMPLE = ["dv-with-columnmapping", "dv-partitioned-with-checkpoint", "log-replay-dv-key-cases",
          "data-reader-partition-values", "data-reader-timestamp_ntz", "parquet-decimal-type",
          "table-with-columnmapping-mode-id", "data-reader-map", "data-reader-nested-struct",
          "data-skipping-basic-stats-all-types-checkpoint"]


def _entries() -> list:
    entries = [e for e in MANIFEST if e["name"] in SAMPLE]
    return conformance_params(entries, [e["name"] for e in entries])


def _key(expected: pa.Table) -> tuple[str, object]:
    """An integer column and its first row's value: the DELETE's / UPDATE's condition."""
    for f in expected.schema:
        if pa.types.is_integer(f.type):
            v = expected.column(f.name)[0].as_py()
            if v is not None:
                return f.name, v
    raise AssertionError("no integer column with a value in the first row")


@pytest.mark.parametrize("entry", _entries())
def test_compaction_delete_and_update_keep_the_reference_rows(spark, tmp_path, entry):
    import tahoe
    from tahoe.spark import DeltaTable
    from tests.conftest import GOLDEN, assert_rows_equal, read_expected

    expected = read_expected(entry)
    col, v = _key(expected)
    kept = expected.filter(pc.invert(pc.fill_null(pc.equal(expected.column(col), v), False)))
    cond = f"`{col}` = {v}"
    steps = [
        ("Spark-free OPTIMIZE", lambda p: tahoe.DeltaTable(p).optimize.compact(), expected),
        ("Spark-free DELETE", lambda p: tahoe.DeltaTable(p).delete(cond), kept),
        ("Spark OPTIMIZE", lambda p: DeltaTable.forPath(spark, p).optimize().executeCompaction(), expected),
        ("Spark DELETE", lambda p: DeltaTable.forPath(spark, p).delete(cond), kept),
        ("Spark UPDATE", lambda p: DeltaTable.forPath(spark, p).update(cond, {f"`{col}`": f"`{col}`"}), expected),
    ]
    for i, (name, run, want) in enumerate(steps):
        path = str(tmp_path / f"t{i}")
        shutil.copytree(GOLDEN / entry["table"], path)
        run(path)
        what = f"{entry['name']}, {name}"
        assert_rows_equal(tahoe.Table(path).to_arrow(), want, what + " (Spark-free read)")
        assert_rows_equal(spark.read.format("delta").load(path).toArrow(), want, what + " (Spark read)")

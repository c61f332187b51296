"""The differential DML fuzzer (tests/fixtures/dml_fuzz.py; the long run: `python -m bench.fuzz_dml`)
on a few fixed seeds, and the cases it found, kept as named tests. Oracles: plain Spark SQL over
the same rows (the fuzzer), delta-spark's documented / implemented rules (the named cases)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.fixtures.delta_log import latest_version

# a spread of shapes (found by `make_round`): DELETE / UPDATE / MERGE, tahoe- and delta-rs-written,
# partitioned, deletion vectors, three time zones, a multiple-match failure
FUZZ_SEEDS = [3, 7, 12, 129, 150, 224]


def test_dml_fuzz_fixed_seeds(spark, tmp_path):
    """Each seed's round: tahoe's rows, delta-rs's rows, metrics and failures = the oracle's."""
    from tests.fixtures import dml_fuzz

    bad = [(r.seed, o.mismatches, r.describe()[:2000]) for r, o in dml_fuzz.run_batch(spark, FUZZ_SEEDS, tmp_path)
           if o.mismatches]
    assert not bad, bad


def _table(path: str) -> None:
    from tahoe.write.writer import write_table

    write_table(path, pa.table({"id": pa.array([1, 2, 3, None], pa.int64()), "v": pa.array([10, 20, 30, 40], pa.int64())}),
                target_file_rows=1)


@pytest.mark.parametrize("condition", ["t.id = s.id", "t.id <=> s.id"])
def test_merge_not_matched_by_source_only_refuses_multiple_matches(spark, tmp_path, condition):
    """Fuzzer seeds 129 and 224: a MERGE with only WHEN NOT MATCHED BY SOURCE clauses whose target
    row is matched by two source rows. delta-spark (ClassicMergeExecutor.findTouchedFiles) counts
    every target row's matches by the ON condition alone — a right outer join when there are
    NOT MATCHED BY SOURCE clauses — and fails ([DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE])
    whenever some row has two, unless the matched clauses are exactly one unconditional delete
    (none here). tahoe's Spark executor checked only MERGEs with matched clauses, and committed."""
    from tahoe.errors import DeltaUnsupportedOperationException
    from tahoe.spark import DeltaTable

    path = str(tmp_path / "t")
    _table(path)
    key = 1 if condition == "t.id = s.id" else None
    src = spark.createDataFrame([(key, 0), (key, 1), (7, 2)], "id long, v long")
    v = latest_version(path)
    dt = DeltaTable.forPath(spark, path)
    with pytest.raises(DeltaUnsupportedOperationException, match="DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"):
        dt.alias("t").merge(src.alias("s"), condition).whenNotMatchedBySourceDelete("t.v > 15").execute()
    with pytest.raises(DeltaUnsupportedOperationException, match="DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"):
        (dt.alias("t").merge(src.alias("s"), condition).whenNotMatchedInsertAll()
         .whenNotMatchedBySourceUpdate(set={"v": "t.v + 1"}).execute())
    assert latest_version(path) == v
    # an insert-only MERGE never checks (delta-spark's insert-only path): the unmatched key 7 goes in once
    r = dt.alias("t").merge(src.alias("s"), condition).whenNotMatchedInsertAll("s.id = 7").execute()
    assert tuple(r.collect()[0]) == (1, 0, 0, 1)
    assert sorted((x.id or 0, x.v) for x in dt.toDF().collect()) == [(0, 40), (1, 10), (2, 20), (3, 30), (7, 2)]

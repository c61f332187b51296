"""A seeded differential fuzzer: tahoe's data skipping and Spark-free row filter against Spark
itself (tests/fixtures/predicate_fuzz.py has the generator, the tables and the oracle).

Small tables ONE ROW PER FILE — written by tahoe (two appends, a checkpoint between them) and by
delta-rs (one append per row, its own stats, a checkpoint half way) — with every column type,
NULLs, NaN, ±Infinity, -0.0, long and non-ASCII strings, decimals up to 38 digits, a nested
struct and three partition columns; a thousand random predicates mixing numeric types and
literal forms. Oracle: Spark (the suite's shared session) evaluating the same predicate strings
over a parquet copy of the rows, all predicates in a few queries. Checked for every table and
predicate: the rows `Table.to_arrow(filter=)` returns are exactly Spark's, and the files
`Table.files(filter=)` keeps include every file holding one of them. Deterministic (seeded).
The long run: `python -m bench.fuzz_predicates --cases N --seed S`. Every mismatch found is kept
in tests/expressions/test_fuzz_regressions.py."""

from __future__ import annotations

import random
import re

import pytest

from tests.fixtures import predicate_fuzz as fuzz

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

SEED = 35
PREDICATES = 1000
ROWS = 24


def test_predicates_cover_every_column_and_literal_form():
    """The generator (same seed) reaches every column, nested field and partition column, and
    every literal form Spark types differently — checked on the text, no Spark needed."""
    rng = random.Random(SEED)
    rows = fuzz.make_rows(rng, ROWS)
    text = "\n".join(fuzz.make_predicates(rng, rows, PREDICATES))
    for c in fuzz.COLUMNS:
        assert re.search(r"(?<![\w.])" + re.escape(c.name) + r"(?![\w])", text), c.name
    for form in [r"\b\d+L\b", r"\b\d+S\b", r"\b\d+Y\b", r"\d\.\d+(?![\dDFBEe])", r"\dD\b", r"\dF\b", r"\dE[-+]?\d",
                 r"\dBD\b", r"-\d", r"CAST\('NaN' AS", r"CAST\('-?Infinity' AS", r"AS FLOAT\)", r"AS DECIMAL\(38,",
                 r" IN \(", r" BETWEEN ", r"<=>", r"IS NULL", r"IS NOT NULL", r"\bNOT \(", r"\bAND\b", r"\bOR\b",
                 r" LIKE ", r"TIMESTAMP_NTZ '", r"DATE '", r"X'"]:
        assert re.search(form, text), form
    assert any(v != v for v in rows.column("f64").to_pylist() if v is not None)   # NaN rows
    assert any(isinstance(v, str) and len(v) > 32 for v in rows.column("s").to_pylist())


def test_differential_fuzz(spark, tmp_path):
    report = fuzz.run(spark, tmp_path, SEED, PREDICATES, ROWS)
    print(report.summary())
    assert not report.mismatches, (f"{len(report.mismatches)} mismatches with Spark (seed {SEED}):\n"
                                   + "\n".join(str(m) for m in report.mismatches[:25]))
    assert report.cases >= 1900   # both tables, every predicate Spark answers
    assert len(report.refused_by_spark) <= PREDICATES // 20, report.refused_by_spark
    # skipping is exercised: most files are dropped for most predicates
    assert report.files_kept < 0.6 * report.files_total, report.summary()

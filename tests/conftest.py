"""Shared test configuration: where the conformance tables are, and helpers to compare rows.

Conformance tables (`$TAHOE_SHARED/conformance/golden`, default `../shared`) are on CI and on the
maintainers' machines, not on a user's. A test that reads them says so, per test:

- request the `golden` fixture (it returns the `golden/` folder as a Path), or
- mark it `@pytest.mark.conformance` (or a whole module: `pytestmark = pytest.mark.conformance`), or
- parametrize over `manifest_params(...)` / `conformance_params(...)` (each param carries the mark).

Such a test is skipped (with the reason NO_GOLDEN) where the tables are absent, and FAILS in CI
(`CI=true`) when they are absent. Every other test runs everywhere: `tests.skip_guard` fails the
session on any other skip — and, in CI, on any skip at all. A module must not read the
tables at import time unguarded: `MANIFEST` is [] and `GOLDEN` may not exist; build params with
`conformance_params`, which yields one marked placeholder when its list is empty. No other skip is
allowed in the suite: a missing single table or a failing load is a failure, not a skip.

The suite runs with TAHOE_VALIDATE_CHECKSUMS=strict (see below).
"""

from __future__ import annotations

import json
import math
import os
from decimal import Decimal
from pathlib import Path

import pyarrow.compute as pc
import pytest

from tests import skip_guard
from tests.skip_guard import ALLOWED_REASON_START, in_ci

# Every snapshot the suite loads is checked against its version's `.crc` file when it has one
# (tahoe.log.crc, spec "State Validation"): a checksum tahoe derived incrementally at commit
# that disagrees with the replayed state fails the test that loaded it. Set before any Spark
# JVM or server subprocess starts, so they inherit it.
os.environ.setdefault("TAHOE_VALIDATE_CHECKSUMS", "strict")

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("TAHOE_SHARED", REPO.parent / "shared"))
GOLDEN = SHARED / "conformance" / "golden"


def load_manifest() -> list[dict]:
    path = GOLDEN / "manifest.json"
    if not path.exists():
        return []
    return json.loads(path.read_text())


MANIFEST = load_manifest()
HAVE_GOLDEN = bool(MANIFEST)


IN_CI = in_ci()
NO_GOLDEN = (f"{ALLOWED_REASON_START} ({GOLDEN}); set TAHOE_SHARED to the folder "
             "that holds conformance/golden to run these tests")

conformance = pytest.mark.conformance


def conformance_params(values, ids=None, n: int = 1):
    """pytest params over values taken from the conformance tables, each marked `conformance`
    (with `n` > 1 argnames, each value is a tuple of n); without the tables (empty `values`): one
    marked placeholder param (skipped on a user's machine, failed in CI)."""
    values = list(values)
    if not values:
        return [pytest.param(*([None] * n), id="no-conformance-tables", marks=conformance)]
    ids = ids if ids is not None else [None] * len(values)
    return [pytest.param(*(v if n > 1 else (v,)), id=i, marks=conformance) for v, i in zip(values, ids)]


def manifest_params(expect: str | None = None):
    """pytest params over the manifest entries (optionally only one `expect` kind), marked
    `conformance`."""
    entries = [e for e in MANIFEST if expect is None or e["expect"] == expect]
    return conformance_params(entries, [e["name"] for e in entries])


def manifest_entry(name: str) -> dict:
    """The manifest entry of one conformance table (call it inside a `conformance` test)."""
    return next(e for e in MANIFEST if e["name"] == name)


def pytest_configure(config):
    skip_guard.install(config)
    config.addinivalue_line(
        "markers", "conformance: reads the Delta conformance tables; skipped where they are absent, "
                   "failed in CI (see tests/conftest.py)")


def pytest_collection_modifyitems(config, items):
    """Requesting the `golden` fixture marks a test `conformance`."""
    for item in items:
        if "golden" in getattr(item, "fixturenames", ()) and item.get_closest_marker("conformance") is None:
            item.add_marker(conformance)


def pytest_runtest_setup(item):
    """A `conformance` test without the tables: skip on a user's machine, fail in CI."""
    if item.get_closest_marker("conformance") is not None and not HAVE_GOLDEN:
        if IN_CI:
            pytest.fail(f"CI must run the conformance suite: {NO_GOLDEN}", pytrace=False)
        pytest.skip(NO_GOLDEN)


@pytest.fixture(scope="session")
def golden() -> Path:
    """The conformance tables' `golden/` folder; a test requesting it is marked `conformance`."""
    return GOLDEN


def _norm(v):
    if isinstance(v, float) and math.isnan(v):
        return ("NaN",)
    if isinstance(v, dict):
        return tuple(sorted((k, _norm(x)) for k, x in v.items()))
    if isinstance(v, list):
        if v and all(isinstance(x, tuple) and len(x) == 2 for x in v):  # map
            return ("map", tuple(sorted((repr(_norm(k)), _norm(x)) for k, x in v)))
        return tuple(_norm(x) for x in v)
    if isinstance(v, Decimal):
        return ("dec", str(v))
    return v


def normalized_rows(table) -> list:
    """Rows of an Arrow table as comparable, order-insensitive values (NaN equal to NaN, maps
    compared as sets of entries)."""
    rows = [tuple(_norm(r[c]) for c in table.column_names) for r in table.to_pylist()]
    return sorted(rows, key=repr)


def same_type(a, b) -> bool:
    """Arrow types equal up to the names of list/map child fields."""
    import pyarrow as pa

    if pa.types.is_map(a) and pa.types.is_map(b):
        return same_type(a.key_type, b.key_type) and same_type(a.item_type, b.item_type)
    if pa.types.is_list(a) and pa.types.is_list(b):
        return same_type(a.value_type, b.value_type)
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        return a.num_fields == b.num_fields and all(
            a.field(i).name == b.field(i).name and same_type(a.field(i).type, b.field(i).type)
            for i in range(a.num_fields))
    return a == b


def read_expected(entry: dict):
    import pyarrow.dataset as ds

    return ds.dataset(str(GOLDEN / entry["expected"]), format="parquet", exclude_invalid_files=True).to_table()


def assert_rows_equal(actual, expected, context: str = "") -> None:
    """Same column names and types (up to child field names) and the same multiset of rows."""
    assert sorted(actual.column_names) == sorted(expected.column_names), \
        f"{context}: columns {actual.column_names} != expected {expected.column_names}"
    expected = expected.select(actual.column_names)
    for name in actual.column_names:
        at, et = actual.schema.field(name).type, expected.schema.field(name).type
        assert same_type(at, et), f"{context}: column {name} has type {at}, expected {et}"
    assert actual.num_rows == expected.num_rows, f"{context}: {actual.num_rows} rows, expected {expected.num_rows}"
    if _sortable(actual):
        # vectorised: sort both by every column and compare (large tables)
        keys = [(c, "ascending") for c in actual.column_names]
        a = actual.take(pc.sort_indices(actual, sort_keys=keys))
        e = expected.cast(actual.schema).take(pc.sort_indices(expected.cast(actual.schema), sort_keys=keys))
        assert a.equals(e), f"{context}: rows differ"
        return
    assert normalized_rows(actual) == normalized_rows(expected), f"{context}: rows differ"


def _sortable(t) -> bool:
    import pyarrow as pa

    for f in t.schema:
        ty = f.type
        if pa.types.is_nested(ty) or pa.types.is_null(ty):
            return False
        if pa.types.is_floating(ty) and pc.any(pc.is_nan(t.column(f.name))).as_py():
            return False
    return True

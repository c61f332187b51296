"""Shared test configuration: where the conformance tables are, and helpers to compare rows."""

from __future__ import annotations

import json
import math
import os
from decimal import Decimal
from pathlib import Path

import pyarrow.compute as pc
import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("TAHOE_SHARED", REPO.parent / "shared"))
GOLDEN = SHARED / "conformance" / "golden"


def load_manifest() -> list[dict]:
    path = GOLDEN / "manifest.json"
    if not path.exists():
        return []
    return json.loads(path.read_text())


MANIFEST = load_manifest()


IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
NO_GOLDEN = (f"the Delta conformance tables are not here ({GOLDEN}); set TAHOE_SHARED to the folder "
             "that holds conformance/golden to run these tests")


def manifest_params(expect: str | None = None):
    """pytest params over the manifest entries (optionally only one `expect` kind). Without the
    conformance tables: one skipped param on a user's machine, a hard failure in CI."""
    if not MANIFEST:
        if IN_CI:
            raise RuntimeError(f"CI must run the conformance suite: {NO_GOLDEN}")
        return [pytest.param(None, id="no-conformance-tables", marks=pytest.mark.skip(reason=NO_GOLDEN))]
    return [pytest.param(e, id=e["name"]) for e in MANIFEST if expect is None or e["expect"] == expect]


def pytest_collection_modifyitems(config, items):
    """Tests that read the conformance tables are skipped (with the reason) where they are absent,
    e.g. on a user's machine; CI has them and a missing folder fails there (see manifest_params)."""
    if GOLDEN.exists():
        return
    if IN_CI:
        raise RuntimeError(f"CI must run the conformance suite: {NO_GOLDEN}")
    uses: dict[str, bool] = {}
    skip = pytest.mark.skip(reason=NO_GOLDEN)
    for item in items:
        path = str(item.fspath)
        if path not in uses:
            try:
                text = Path(path).read_text()
            except OSError:
                text = ""
            uses[path] = "GOLDEN" in text or "golden" in text
        if uses[path]:
            item.add_marker(skip)


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

"""`tahoe.read.changes`: per-version actions, CDF checks and CDF rows (cdc files when present, else
adds/removes), on hand-built tables."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tahoe.log import DeltaLog
from tahoe.read.changes import CdfNotEnabledError, cdf_enabled_at, read_changes_arrow, table_changes
from tests.sharing.tablegen import TableBuilder


@pytest.fixture
def cdf_table(tmp_path):
    sch = pa.schema([("id", pa.int64()), ("p", pa.string())])
    tb = TableBuilder(tmp_path / "t", sch, ["p"])                       # v0: CDF off
    tb.append(pa.table({"id": [1], "p": ["a"]}, schema=sch))           # v1
    tb.set_configuration({"delta.enableChangeDataFeed": "true"})       # v2
    tb.append(pa.table({"id": [2, 3], "p": ["a", "b"]}, schema=sch))   # v3
    b = [k for k, v in tb.files.items() if v["partitionValues"]["p"] == "b"]
    tb.remove(b)                                                        # v4: delete without cdc files
    a = [k for k, v in tb.files.items() if v["partitionValues"]["p"] == "a"]
    cdc = pa.table({"id": [2, 2], "p": ["a", "a"], "_change_type": ["update_preimage", "update_postimage"]})
    tb.rewrite(a[-1:], pa.table({"id": [2], "p": ["a"]}, schema=sch), cdc=cdc)   # v5: with cdc
    return DeltaLog.for_table(str(tmp_path / "t"))


def test_table_changes(cdf_table):
    vs = list(table_changes(cdf_table, 0))
    assert [v.version for v in vs] == [0, 1, 2, 3, 4, 5]
    assert vs[0].protocol is not None and vs[0].metadata is not None
    assert len(vs[3].adds) == 2 and len(vs[4].removes) == 1 and len(vs[5].cdcs) == 1
    stamps = dict(cdf_table.commit_timestamps())
    assert all(v.timestamp == stamps[v.version] for v in vs)
    assert [v.version for v in table_changes(cdf_table, 2, 3)] == [2, 3]


def test_cdf_checks(cdf_table):
    assert not cdf_enabled_at(cdf_table, 1)
    assert cdf_enabled_at(cdf_table, 2)
    with pytest.raises(CdfNotEnabledError):
        read_changes_arrow(cdf_table, 0, 3)


def test_read_changes(cdf_table):
    t = read_changes_arrow(cdf_table, 2, 5)
    rows = sorted((r["id"], r["p"], r["_change_type"], r["_commit_version"]) for r in t.to_pylist())
    assert rows == [(2, "a", "insert", 3), (2, "a", "update_postimage", 5), (2, "a", "update_preimage", 5),
                    (3, "b", "delete", 4), (3, "b", "insert", 3)]
    assert t.schema.field("_commit_timestamp").type == pa.timestamp("us", tz="UTC")
    assert t.column_names[:2] == ["id", "p"]


def test_bad_ranges(cdf_table):
    from tahoe.errors import VersionNotFoundError

    with pytest.raises(VersionNotFoundError):
        list(table_changes(cdf_table, 9))
    with pytest.raises(ValueError):
        list(table_changes(cdf_table, 3, 2))

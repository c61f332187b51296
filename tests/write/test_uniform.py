"""UniForm (Iceberg) with the Arrow writer: after every commit pyiceberg (an independent Iceberg
reader, `StaticTable.from_metadata`) reads exactly the expected rows; Iceberg-incompatible writes
are refused with delta-spark's error conditions and leave nothing behind; a failed conversion does
not fail the Delta commit and is caught up by the next one.

Oracles: the expected rows (kept by the test as plain Python), pyiceberg's reads."""

from __future__ import annotations

import datetime as dt
import json
import os
from decimal import Decimal

import pyarrow as pa
import pytest

import tahoe
from tahoe.errors import IcebergCompatViolationError, UniversalFormatViolationError


UNIFORM = {"delta.enableIcebergCompatV2": "true", "delta.universalFormat.enabledFormats": "iceberg"}


def iceberg_rows(path: str) -> list[dict]:
    from pyiceberg.table import StaticTable

    from tahoe.uniform import latest_metadata_path

    t = StaticTable.from_metadata(latest_metadata_path(path)).scan().to_arrow()
    return sorted(t.to_pylist(), key=lambda r: r["id"])


def _rows(ids, day, amount=None):
    return [{"id": i, "name": f"n{i}", "day": day, "amount": Decimal(amount or i) / 100,
             "ts": dt.datetime(2024, 1, 1, i % 24, tzinfo=dt.timezone.utc), "d": dt.date(2024, 2, 1 + i % 28)}
            for i in ids]


SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("day", pa.string()),
                    ("amount", pa.decimal128(10, 2)), ("ts", pa.timestamp("us", tz="UTC")), ("d", pa.date32())])


def _table(rows):
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def _by_id(rows):
    return sorted(rows, key=lambda r: r["id"])


def test_uniform_arrow_writer_several_commits(tmp_path):
    path = str(tmp_path / "u")
    expected = _rows(range(0, 6), "mon") + _rows(range(6, 9), "tue")
    tahoe.write_table(path, _table(expected), partition_by=["day"], properties=UNIFORM)
    log0 = [json.loads(x) for x in open(os.path.join(path, "_delta_log", "00000000000000000000.json"))]
    md = next(a["metaData"] for a in log0 if "metaData" in a)
    proto = next(a["protocol"] for a in log0 if "protocol" in a)
    assert md["configuration"]["delta.columnMapping.mode"] == "name"     # auto-set, as delta-spark
    assert {"icebergCompatV2", "columnMapping"} <= set(proto["writerFeatures"])
    assert iceberg_rows(path) == _by_id(expected)

    more = _rows(range(9, 12), "wed")                                    # append
    tahoe.write_table(path, _table(more), mode="append")
    expected += more
    assert iceberg_rows(path) == _by_id(expected)

    mon = _rows(range(100, 102), "mon")                                  # overwrite one partition
    tahoe.write_table(path, _table(mon), mode="overwrite", predicate="day = 'mon'")
    expected = [r for r in expected if r["day"] != "mon"] + mon
    assert iceberg_rows(path) == _by_id(expected)

    tahoe.delete(path, "id = 10")                                        # copy-on-write delete
    expected = [r for r in expected if r["id"] != 10]
    assert iceberg_rows(path) == _by_id(expected)

    everything = _rows(range(200, 203), "thu")                           # full overwrite
    tahoe.write_table(path, _table(everything), mode="overwrite")
    expected = everything
    assert iceberg_rows(path) == _by_id(expected)

    meta = json.load(open(os.path.join(path, "metadata", "v5.metadata.json")))
    assert meta["properties"]["delta-version"] == "4"
    assert [s["summary"]["operation"] for s in meta["snapshots"]] == \
        ["append", "append", "overwrite", "overwrite", "overwrite"]


@pytest.mark.parametrize("props, data, error, condition", [
    ({**UNIFORM, "delta.enableDeletionVectors": "true"}, None, IcebergCompatViolationError,
     "DELETION_VECTORS_SHOULD_BE_DISABLED"),
    ({"delta.universalFormat.enabledFormats": "iceberg"}, None, UniversalFormatViolationError,
     "DELTA_UNIVERSAL_FORMAT_VIOLATION"),
    ({**UNIFORM, "delta.enableIcebergCompatV1": "true"}, None, IcebergCompatViolationError, "VERSION_MUTUAL_EXCLUSIVE"),
    ({**UNIFORM, "delta.columnMapping.mode": "none"}, None, IcebergCompatViolationError,
     "WRONG_REQUIRED_TABLE_PROPERTY"),
])
def test_incompatible_create_refused(tmp_path, props, data, error, condition):
    path = str(tmp_path / "bad")
    with pytest.raises(error, match=condition):
        tahoe.write_table(path, _table(_rows(range(3), "mon")), properties=props)
    assert not os.path.exists(os.path.join(path, "_delta_log", "00000000000000000000.json"))
    assert not os.path.exists(os.path.join(path, "metadata"))
    leftovers = [f for _d, _s, fs in os.walk(path) for f in fs if f.endswith(".parquet")]
    assert leftovers == []


def test_incompatible_changes_to_a_uniform_table_refused(tmp_path):
    """Enabling DVs, adding a type Iceberg lacks (variant): refused, the Delta and Iceberg
    tables unchanged."""
    from tahoe.protocol.variant import arrow_array, encode_json

    path = str(tmp_path / "u")
    rows = _rows(range(3), "mon")
    tahoe.write_table(path, _table(rows), properties=UNIFORM)
    with pytest.raises(IcebergCompatViolationError, match="DELETION_VECTORS_SHOULD_BE_DISABLED"):
        tahoe.Table(path).set_properties({"delta.enableDeletionVectors": "true"})
    m, v = encode_json('{"a":1}')
    with_variant = _table(_rows([7], "mon")).append_column("v", arrow_array([m], [v]))
    with pytest.raises(IcebergCompatViolationError, match="UNSUPPORTED_DATA_TYPE"):
        tahoe.write_table(path, with_variant, mode="append", schema_mode="merge")
    assert tahoe.Table(path).version == 0
    assert iceberg_rows(path) == _by_id(rows)
    assert sorted(os.listdir(os.path.join(path, "metadata")))[-2:] == ["v1.metadata.json", "version-hint.text"]


def test_failed_conversion_does_not_fail_the_commit_and_is_caught_up(tmp_path, monkeypatch):
    from tahoe.uniform import iceberg

    path = str(tmp_path / "u")
    rows = _rows(range(3), "mon")
    tahoe.write_table(path, _table(rows), properties=UNIFORM)

    def broken(*a, **k):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(iceberg, "_avro_bytes", broken)
    more = _rows(range(3, 5), "tue")
    v = tahoe.write_table(path, _table(more), mode="append")          # committed in Delta all the same
    assert tahoe.Table(path).version == 1
    assert iceberg_rows(path) == _by_id(rows)                         # Iceberg still at version 0
    monkeypatch.undo()
    last = _rows(range(5, 6), "wed")
    tahoe.write_table(path, _table(last), mode="append")               # the next commit catches up
    assert iceberg_rows(path) == _by_id(rows + more + last)
    meta_dir = os.path.join(path, "metadata")
    latest = json.load(open(os.path.join(meta_dir, open(os.path.join(meta_dir, "version-hint.text")).read().join(["v", ".metadata.json"]))))
    assert latest["properties"]["delta-version"] == "2"
    assert [s["summary"]["delta-version"] for s in latest["snapshots"]] == ["0", "1", "2"]
    del v


def test_enable_uniform_on_existing_table_converts_all_files(tmp_path):
    path = str(tmp_path / "u")
    rows = _rows(range(4), "mon")
    tahoe.write_table(path, _table(rows), properties={"delta.columnMapping.mode": "name"})
    with pytest.raises(IcebergCompatViolationError, match="CHANGE_VERSION_NEED_REWRITE"):
        tahoe.Table(path).set_properties(UNIFORM)
    tahoe.Table(path).set_properties({"delta.enableIcebergCompatV1": "true",
                                      "delta.universalFormat.enabledFormats": "iceberg"})
    assert iceberg_rows(path) == _by_id(rows)

"""Marking rows deleted with deletion vectors (`tahoe.write.delete_rows`): the rows tahoe and
delta-rs read, the descriptors and stats the spec asks for, DVs that grow, skipping over wide
bounds, and bad input refused before anything is written."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from tahoe import Table
from tahoe.errors import InvalidTableOperationError
from tahoe.log import DeltaLog
from tahoe.write import delete_rows, write_table
from tests.write.test_writer import read_back

DATA = pa.table({"id": pa.array(range(200), pa.int64()), "day": ["a", "b"] * 100,
                 "v": [f"x{i}" for i in range(200)]})


def _without(ids: set[int]) -> pa.Table:
    """The rows written, minus the ids deleted (hand-derived expectation)."""
    return DATA.filter(pa.array([i not in ids for i in range(200)]))


_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def _dv_positions_by_hand(table: str, dv: dict) -> list[int]:
    """Decode an on-disk DV from the spec's text alone (not tahoe's decoder): Z85 of the UUID after
    the random prefix, the file at `offset` = 4-byte big-endian size, the magic 1681511377
    (little-endian), a 64-bit roaring treemap (8-byte LE bucket count; per bucket a 4-byte LE key
    and a 32-bit portable roaring bitmap), then a CRC-32 (big-endian) of the data."""
    import uuid
    import zlib

    from pyroaring import BitMap

    assert dv["storageType"] == "u"
    text, raw = dv["pathOrInlineDv"], b""
    prefix, encoded = text[:-20], text[-20:]
    for i in range(0, 20, 5):
        n = 0
        for ch in encoded[i:i + 5]:
            n = n * 85 + _Z85.index(ch)
        raw += n.to_bytes(4, "big")
    name = f"deletion_vector_{uuid.UUID(bytes=raw)}.bin"
    with open(os.path.join(table, prefix, name) if prefix else os.path.join(table, name), "rb") as f:
        blob = f.read()
    off = dv.get("offset", 1)
    size = int.from_bytes(blob[off:off + 4], "big")
    assert size == dv["sizeInBytes"]
    data = blob[off + 4:off + 4 + size]
    assert zlib.crc32(data) == int.from_bytes(blob[off + 4 + size:off + 8 + size], "big")
    assert int.from_bytes(data[:4], "little") == 1681511377
    buckets, pos, rows = int.from_bytes(data[4:12], "little"), 12, []
    for _ in range(buckets):
        key = int.from_bytes(data[pos:pos + 4], "little")
        bm = BitMap.deserialize(data[pos + 4:])
        rows += [(key << 32) | r for r in bm]
        pos += 4 + len(bm.serialize())
    assert pos == size and len(rows) == dv["cardinality"]
    return rows


def _log_adds(path: str, version: int) -> dict[str, dict]:
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as f:
        return {a["add"]["path"]: a["add"] for a in map(json.loads, f) if "add" in a}


def _table(path: str, **props) -> list:
    data = DATA
    write_table(path, data, partition_by=["day"],
                properties={"delta.enableDeletionVectors": "true", **props})
    return DeltaLog.for_table(path).snapshot().add_files()


def _ids(path: str) -> list[int]:
    return sorted(Table(path).to_arrow(columns=["id"]).column("id").to_pylist())


def test_deleted_rows_are_gone_for_tahoe_and_delta_rs(tmp_path):
    path = str(tmp_path / "t")
    a, b = sorted(_table(path), key=lambda f: f.partition_values["day"])  # day=a: even ids, b: odd
    v = delete_rows(path, {a.path: [0, 1, 99], b.path: [5]}, predicate="id in (0, 2, 198, 11)")
    assert v == 1
    gone = {0, 2, 198, 11}
    assert _ids(path) == [i for i in range(200) if i not in gone]
    snap = DeltaLog.for_table(path).snapshot()
    for add in snap.add_files():
        dv = add.deletion_vector
        assert dv.storage_type == "u" and dv.cardinality == (3 if add.path == a.path else 1)
        st = json.loads(add.stats)
        assert st["numRecords"] == 100 and st["tightBounds"] is False  # physical rows; wide bounds
    commit = DeltaLog.for_table(path).history(1)[0].commit_info
    assert commit["operation"] == "DELETE"
    adds = _log_adds(path, 1)
    assert _dv_positions_by_hand(path, adds[a.path]["deletionVector"]) == [0, 1, 99]
    assert _dv_positions_by_hand(path, adds[b.path]["deletionVector"]) == [5]
    read_back(path, tmp_path, _without(gone), sql=True)


def test_a_second_delete_grows_the_deletion_vector(tmp_path):
    path = str(tmp_path / "t")
    a = sorted(_table(path), key=lambda f: f.partition_values["day"])[0]
    delete_rows(path, {a.path: [1, 2]})
    assert delete_rows(path, {a.path: [2]}) is None  # nothing new: no commit
    assert Table(path).version == 1
    delete_rows(path, {a.path: [3]})
    (now,) = [f for f in DeltaLog.for_table(path).snapshot().add_files() if f.path == a.path]
    assert now.deletion_vector.cardinality == 3
    assert _dv_positions_by_hand(path, _log_adds(path, 2)[a.path]["deletionVector"]) == [1, 2, 3]
    read_back(path, tmp_path, _without({2, 4, 6}), sql=True)
    # the log keys logical files by (path, DV): the version-2 remove names the version-1 DV
    with open(os.path.join(path, "_delta_log", f"{2:020d}.json")) as f:
        acts = [json.loads(line) for line in f]
    (rm,) = [x["remove"] for x in acts if "remove" in x]
    assert rm["deletionVector"]["cardinality"] == 2


def test_skipping_still_uses_the_wide_bounds(tmp_path):
    """After a DV the min/max still bound the valid rows: files are kept or skipped by them."""
    from tahoe.spark.skipping import file_mask  # pure: no Spark needed for SQL filters

    path = str(tmp_path / "t")
    a = sorted(_table(path), key=lambda f: f.partition_values["day"])[0]  # ids 0, 2, ..., 198
    delete_rows(path, {a.path: [0, 99]})   # ids 0 and 198: its min and max rows are gone
    snap = DeltaLog.for_table(path).snapshot()
    files = snap.files_table(["path", "partitionValues", "stats", "deletionVector"])
    by_path = files.column("path").to_pylist()

    def kept(sql: str) -> set[str]:
        mask = file_mask(files, [sql], snap.schema, snap.partition_columns, snap.column_mapping_mode)
        return {p for p, m in zip(by_path, mask) if m}

    assert a.path in kept("id = 2") and a.path in kept("id = 0")  # wide: 0 is within [0, 198]
    assert a.path not in kept("id > 198")
    assert _ids(path) == [i for i in range(200) if i not in (0, 198)]


@pytest.mark.parametrize("case, match", [
    ("no-feature", "does not support deletion vectors"),
    ("unknown-path", "not active files"),
    ("past-the-end", "row index 100 is outside"),
    ("negative", "row index -1 is outside"),
    ("append-only", "DELTA_CANNOT_MODIFY_APPEND_ONLY"),
])
def test_bad_input_is_refused_and_writes_nothing(tmp_path, case, match):
    path = str(tmp_path / "t")
    if case == "no-feature":
        write_table(path, pa.table({"id": pa.array(range(10), pa.int64())}))
        adds = DeltaLog.for_table(path).snapshot().add_files()
    else:
        adds = _table(path, **({"delta.appendOnly": "true"} if case == "append-only" else {}))
    before = sorted(os.listdir(path))
    rows = {"unknown-path": {"day=a/nope.parquet": [1]}, "past-the-end": {adds[0].path: [100]},
            "negative": {adds[0].path: [-1, 3]}}.get(case, {adds[0].path: [1]})
    with pytest.raises(InvalidTableOperationError, match=match):
        delete_rows(path, rows)
    assert Table(path).version == 0
    if case != "append-only":  # refused before the DV file is written
        assert sorted(os.listdir(path)) == before

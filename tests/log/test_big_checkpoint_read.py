"""Replay over a checkpoint big enough to be decoded in several batches: the checkpoint is written
here with pyarrow alone (not tahoe's writer), its non-file rows sit in the middle and at the end
of different batches, and the commits after it remove and replace files in every batch. The
expected active files are derived by hand from those actions; delta-rs reads the same count."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq

import tahoe
from tahoe.log import DeltaLog
from tahoe.log import replay as replay_module

N = 300_000                       # adds in the checkpoint: 3 batches of the reader's 131,072 rows
PROTOCOL_ROW = 150_001            # inside the second batch
SCHEMA_STRING = json.dumps({"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "p", "type": "string", "nullable": True, "metadata": {}}]})


def _path(i: int) -> str:
    return f"p={i % 3}/f{i:06d}.parquet"


def _dv(i: int) -> dict | None:
    """Every 1,000th file has an inline deletion vector (its id: 'i' + the file number)."""
    if i % 1000:
        return None
    return {"storageType": "i", "pathOrInlineDv": f"dv{i:06d}", "offset": None, "sizeInBytes": 10,
            "cardinality": 2, "maxRowIndex": None}


def _write_checkpoint(log) -> None:
    dv_type = pa.struct([("storageType", pa.string()), ("pathOrInlineDv", pa.string()), ("offset", pa.int32()),
                         ("sizeInBytes", pa.int32()), ("cardinality", pa.int64()), ("maxRowIndex", pa.int64())])
    add_type = pa.struct([("path", pa.string()), ("partitionValues", pa.map_(pa.string(), pa.string())),
                          ("size", pa.int64()), ("modificationTime", pa.int64()), ("dataChange", pa.bool_()),
                          ("stats", pa.string()), ("deletionVector", dv_type)])
    protocol_type = pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32()),
                               ("readerFeatures", pa.list_(pa.string())), ("writerFeatures", pa.list_(pa.string()))])
    meta_type = pa.struct([("id", pa.string()), ("format", pa.struct([("provider", pa.string()),
                                                                       ("options", pa.map_(pa.string(), pa.string()))])),
                           ("schemaString", pa.string()), ("partitionColumns", pa.list_(pa.string())),
                           ("configuration", pa.map_(pa.string(), pa.string())), ("createdTime", pa.int64())])
    rows = N + 2
    # adds in every row but PROTOCOL_ROW and the last one (the metaData), files in order
    add_rows = [r for r in range(rows) if r not in (PROTOCOL_ROW, rows - 1)]
    adds = [None] * rows
    for i, r in enumerate(add_rows):
        adds[r] = {"path": _path(i), "partitionValues": [("p", str(i % 3))], "size": i + 1, "modificationTime": 1,
                   "dataChange": False, "stats": json.dumps({"numRecords": 5}), "deletionVector": _dv(i)}
    protocol = [None] * rows
    protocol[PROTOCOL_ROW] = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                              "writerFeatures": ["deletionVectors"]}
    meta = [None] * rows
    meta[rows - 1] = {"id": "big-checkpoint", "format": {"provider": "parquet", "options": []},
                      "schemaString": SCHEMA_STRING, "partitionColumns": ["p"],
                      "configuration": [("delta.enableDeletionVectors", "true")], "createdTime": 1}
    table = pa.table({"add": pa.array(adds, add_type), "protocol": pa.array(protocol, protocol_type),
                      "metaData": pa.array(meta, meta_type)})
    pq.write_table(table, log / "00000000000000000010.checkpoint.parquet", row_group_size=1 << 20)
    (log / "_last_checkpoint").write_text(json.dumps({"version": 10, "size": rows}))


def _commit(log, version: int, *actions: dict) -> None:
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")


def _remove(i: int, dv: dict | None) -> dict:
    r = {"path": _path(i), "deletionTimestamp": 2, "dataChange": True, "partitionValues": {"p": str(i % 3)}}
    if dv is not None:
        r["deletionVector"] = dv
    return {"remove": r}


def test_a_checkpoint_read_in_batches_reconciles_with_every_batch(tmp_path):
    root = tmp_path / "big"
    log = root / "_delta_log"
    log.mkdir(parents=True)
    _write_checkpoint(log)
    new_dv = {"storageType": "i", "pathOrInlineDv": "dvnew", "sizeInBytes": 10, "cardinality": 3}
    _commit(log, 11, _remove(5, None), _remove(140_001, None), _remove(N - 1, None),
            _remove(1000, _dv(1000)),
            _remove(3000, None),                 # names file 3000 without its DV: another logical file
            {"commitInfo": {"operation": "DELETE"}})
    _commit(log, 12, _remove(2000, _dv(2000)),
            {"add": {"path": _path(2000), "partitionValues": {"p": str(2000 % 3)}, "size": 2001,
                     "modificationTime": 2, "dataChange": True, "deletionVector": new_dv}},
            {"add": {"path": "p=0/new.parquet", "partitionValues": {"p": "0"}, "size": 7, "modificationTime": 2,
                     "dataChange": True}})

    # the expected active files, by hand: (path, DV id or None)
    expected = {(_path(i), (_dv(i) or {}).get("pathOrInlineDv")) for i in range(N)}
    for i in (5, 140_001, N - 1):
        expected.remove((_path(i), None))
    expected.remove((_path(1000), "dv001000"))
    expected.remove((_path(2000), "dv002000"))
    expected |= {(_path(2000), "dvnew"), ("p=0/new.parquet", None)}

    snap = DeltaLog.for_table(str(root)).snapshot()
    assert snap.version == 12
    assert snap.partition_columns == ["p"]
    assert (snap.protocol.min_reader_version, snap.protocol.min_writer_version) == (3, 7)
    files = tahoe.Table(str(root)).files()
    assert N > replay_module._BATCH_ROWS and files.column("path").num_chunks > 1   # read in batches
    dvs = files.column("deletionVector").to_pylist()
    got = [(p, dv["pathOrInlineDv"] if dv else None) for p, dv in zip(files.column("path").to_pylist(), dvs)]
    assert len(got) == len(expected) == N - 3 - 1 + 1
    assert set(got) == expected
    sizes = dict(zip(files.column("path").to_pylist(), files.column("size").to_pylist()))
    assert sizes[_path(299_998)] == 299_999 and sizes["p=0/new.parquet"] == 7
    pvs = files.column("partitionValues").to_pylist()
    assert all(dict(pv) == {"p": p.split("/")[0][2:]} for p, pv in zip(files.column("path").to_pylist(), pvs))

    # delta-rs, in its own process, counts the same active files
    out = subprocess.run([sys.executable, "-c", "import sys, deltalake, os; "
                          "print(len(deltalake.DeltaTable(sys.argv[1]).file_uris()), flush=True); os._exit(0)",
                          str(root)], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == str(len(expected)), out.stderr[-2000:]

    # streamed: the same rows in the same order, a checkpoint batch at a time, with and
    # without a filter (p = '1': the files whose partition value is 1, by hand)
    reader = tahoe.Table(str(root)).files_reader(["path", "deletionVector", "size"])
    batches = list(reader)
    assert len(batches) > 2 and all(b.num_rows <= replay_module._BATCH_ROWS for b in batches)
    streamed = pa.Table.from_batches(batches, reader.schema)
    assert streamed.to_pylist() == files.select(["path", "deletionVector", "size"]).to_pylist()
    ones = pa.Table.from_batches(list(tahoe.Table(str(root)).files_reader(["path"], filter="p = '1'")))
    assert sorted(ones.column("path").to_pylist()) == sorted(p for p, _ in expected if p.startswith("p=1/"))


def test_rows_kept_as_slices_or_copied_equal_a_filter():
    """The checkpoint rows a replay keeps: one run, a few runs (slices, no copy) or many runs
    (copied) — always exactly `Table.filter`'s rows."""
    import numpy as np

    n = 10_000
    t = pa.table({"path": [f"f{i}" for i in range(n)], "size": list(range(n))})
    rng = np.random.default_rng(1)
    cases = {"all": np.ones(n, bool), "none": np.zeros(n, bool), "one run": np.arange(n) >= 3,
             "a few holes": ~np.isin(np.arange(n), [0, 1, 17, 5000, 9999]),
             "many holes": rng.random(n) > 0.1}
    for name, m in cases.items():
        mask = pa.array(m)
        got = replay_module._keep(t, mask)
        assert got.to_pylist() == t.filter(mask).to_pylist(), name
    assert replay_module._keep(t, pa.array(cases["a few holes"])).column("path").num_chunks > 1   # sliced, not copied

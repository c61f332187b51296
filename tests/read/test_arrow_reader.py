"""The Spark-free reader's row-group path (`ArrowFileReader.read_row_groups`, what the `delta`
data source's tasks use): the same rows as whole-file reads on every conformance table, deletion
vectors applied by file position across row-group boundaries, any run of row groups on its own."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tahoe import Table
from tahoe.errors import CorruptLogError
from tahoe.log import DeltaLog
from tahoe.read.arrow_reader import ArrowFileReader
from tests.conftest import GOLDEN, assert_rows_equal, manifest_params, read_expected


def _reader(snap) -> ArrowFileReader:
    return ArrowFileReader(snap.store, snap.table_root, snap.schema, snap.partition_columns,
                           snap.column_mapping_mode)


@pytest.mark.parametrize("entry", manifest_params("rows"))
def test_row_groups_read_every_conformance_table(entry, monkeypatch):
    """Every file read whole, by row groups, and — the small files being read into memory in one
    call — once more streamed from the file (no size read whole): the same rows, the expected ones."""
    from tahoe.read import arrow_reader

    snap = DeltaLog.for_table(str(GOLDEN / entry["table"])).snapshot()
    reader = _reader(snap)
    parts = []
    for a in snap.add_files():
        dv = a.deletion_vector.to_dict() if a.deletion_vector else None
        whole = reader.read_file(a.path, a.partition_values, dv)
        groups = list(reader.read_row_groups(a.path, a.partition_values, dv))
        got = pa.concat_tables(groups) if groups else whole.slice(0, 0)
        assert got.equals(whole), a.path
        with monkeypatch.context() as m:
            m.setattr(arrow_reader, "SMALL_FILE_BYTES", -1)
            assert reader.read_file(a.path, a.partition_values, dv).equals(whole), a.path
        parts.append(got)
    expected = read_expected(entry)
    actual = pa.concat_tables(parts) if parts else expected.slice(0, 0)
    assert_rows_equal(actual, expected, entry["name"])


def _table_with_row_groups(tmp_path, monkeypatch, deleted: list[int]):
    """One data file of 1000 rows in 10 row groups of 100; `deleted` rows removed by a DV."""
    from tahoe.write import delete_rows, files, write_table

    path = str(tmp_path / "t")
    monkeypatch.setattr(files, "ROW_GROUP_ROWS", 100)
    write_table(path, pa.table({"id": pa.array(range(1000), pa.int64())}),
                properties={"delta.enableDeletionVectors": "true"})
    (add,) = DeltaLog.for_table(path).snapshot().add_files()
    delete_rows(path, {add.path: deleted})
    return path


def test_deletion_vectors_apply_by_file_position_across_row_groups(tmp_path, monkeypatch):
    deleted = [0, 99, 100, 101, 555, 899, 900, 999]
    path = _table_with_row_groups(tmp_path, monkeypatch, deleted)
    snap = DeltaLog.for_table(path).snapshot()
    (add,) = snap.add_files()
    reader = _reader(snap)
    dv = add.deletion_vector.to_dict()
    assert pq.ParquetFile(os.path.join(path, add.path)).num_row_groups == 10
    assert reader.row_group_bytes(add.path) and len(reader.row_group_bytes(add.path)) == 10
    groups = list(reader.read_row_groups(add.path, {}, dv))
    assert [g.num_rows for g in groups] == [98, 98, 100, 100, 100, 99, 100, 100, 99, 98]
    assert pa.concat_tables(groups).column("id").to_pylist() == [i for i in range(1000) if i not in deleted]
    # a run of row groups on its own: what one task of a split file reads
    run = pa.concat_tables(reader.read_row_groups(add.path, {}, dv, [5, 6, 7]))
    assert run.column("id").to_pylist() == [i for i in range(500, 800) if i not in deleted]
    assert Table(path).to_arrow().num_rows == 1000 - len(deleted)
    with pytest.raises(CorruptLogError, match="10 row groups, not a row group 10"):
        list(reader.read_row_groups(add.path, {}, dv, [10]))
    # decoded in pieces of 30 rows (what format("deltaSharing")'s tasks do): the mask follows
    # the pieces' positions inside each row group of 100 rows
    import numpy as np

    pf = pq.ParquetFile(os.path.join(path, add.path))
    mask = np.zeros(1000, dtype=bool)
    mask[deleted] = True
    pieces = list(reader.read_parquet(pf, add.path, {}, mask, batch_rows=30))
    assert [p.num_rows for p in pieces[:4]] == [29, 30, 30, 9]     # rows 0 and 99 deleted
    assert len(pieces) == 40 and pa.concat_tables(pieces).column("id").to_pylist() == \
        [i for i in range(1000) if i not in deleted]


def test_data_source_splits_a_large_file_by_row_groups(tmp_path, monkeypatch):
    """The `delta` data source's planning: a file larger than a task's share is split into runs
    of row groups (here: a share of ~3 row groups) packed into partitions no larger than the
    share, and the partitions' reads, DVs applied, are the table's rows exactly once."""
    from tahoe.spark import datasource as D
    from tahoe.spark import scan

    deleted = [0, 99, 100, 101, 555, 899, 900, 999]
    path = _table_with_row_groups(tmp_path, monkeypatch, deleted)
    per_group = DeltaLog.for_table(path).snapshot().add_files()[0].size // 10
    monkeypatch.setattr(scan, "PARTITION_BYTES", per_group * 3)
    src = D.DeltaDataSource({"path": path})
    reader = src.reader(src.schema())
    parts = reader.partitions()
    runs = [f[3] for p in parts for f in p.files]
    assert len(parts) >= 3 and sorted(i for r in runs for i in r) == list(range(10))
    # no partition over its share: at most 3 of the equal row groups each
    assert all(sum(len(f[3]) for f in p.files) <= 3 for p in parts)
    ids = [i for p in parts for b in reader.read(p) for i in b.column("id").to_pylist()]
    assert sorted(ids) == [i for i in range(1000) if i not in deleted]


def id_mode_table_with_other_names(root) -> tuple[str, list[dict]]:
    """A column-mapping id-mode table whose one data file names its columns differently from the
    schema's physical names (as after a writer that renamed them): the columns are found by their
    Parquet field ids only. A decoy column carries the physical name `col-name` with another field
    id and wrong values; struct children are stored in the other order. Returns the path and the
    rows a reader must return (hand-written)."""
    import json

    path = root / "idmode"
    (path / "_delta_log").mkdir(parents=True)

    def fid(name, typ, i):
        return pa.field(name, typ, metadata={b"PARQUET:field_id": str(i).encode()})

    struct = pa.struct([fid("q", pa.string(), 5), fid("p", pa.int32(), 4)])
    schema = pa.schema([fid("renamed_id", pa.int64(), 1), fid("col-name", pa.string(), 99),
                        fid("other_name", pa.string(), 2), fid("x_struct", struct, 3)])
    data = pa.table([pa.array([1, 2, 3], pa.int64()), pa.array(["WRONG"] * 3),
                     pa.array(["a", "b", None]),
                     pa.array([{"q": "x", "p": 10}, None, {"q": None, "p": 30}], struct)], schema=schema)
    pq.write_table(data, path / "part-0.parquet")

    def field(name, typ, i, meta=None):
        return {"name": name, "type": typ, "nullable": True,
                "metadata": {"delta.columnMapping.id": i, "delta.columnMapping.physicalName": f"col-{name}"}}

    s_type = {"type": "struct", "fields": [field("a", "integer", 4), field("b", "string", 5)]}
    table_schema = {"type": "struct", "fields": [field("id", "long", 1), field("name", "string", 2),
                                                 field("s", s_type, 3)]}
    actions = [
        {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}},
        {"metaData": {"id": "idmode", "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps(table_schema), "partitionColumns": [],
                      "configuration": {"delta.columnMapping.mode": "id", "delta.columnMapping.maxColumnId": "5"},
                      "createdTime": 1}},
        {"add": {"path": "part-0.parquet", "partitionValues": {}, "size": (path / "part-0.parquet").stat().st_size,
                 "modificationTime": 1, "dataChange": True}},
    ]
    (path / "_delta_log" / f"{0:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    rows = [{"id": 1, "name": "a", "s": {"a": 10, "b": "x"}}, {"id": 2, "name": "b", "s": None},
            {"id": 3, "name": None, "s": {"a": 30, "b": None}}]
    return str(path), rows


def test_id_mode_reads_parquet_fields_by_id_when_names_differ(tmp_path):
    path, rows = id_mode_table_with_other_names(tmp_path)
    t = Table(path).to_arrow()
    assert t.column_names == ["id", "name", "s"]
    assert sorted(t.to_pylist(), key=lambda r: r["id"]) == rows
    snap = DeltaLog.for_table(path).snapshot()
    (add,) = snap.add_files()
    groups = pa.concat_tables(list(_reader(snap).read_row_groups(add.path, add.partition_values, None)))
    assert sorted(groups.to_pylist(), key=lambda r: r["id"]) == rows
    assert Table(path).to_arrow(columns=["name"]).column("name").to_pylist() == ["a", "b", None]

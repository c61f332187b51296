"""What every write must keep, held in DELETE / UPDATE / MERGE by the Spark-free executor
(`tahoe.update` / `tahoe.merge` / `tahoe.delete`): generated columns recomputed when their inputs
change, identity columns (inserted rows numbered beyond the high-water mark, which advances;
assigning one refused as delta-spark refuses it), NOT NULL / CHECK / invariants broken by an
UPDATE or MERGE refused with nothing committed, appendOnly, row tracking (copy-on-write and
deletion vectors, UPDATE and MERGE); and bad input — a type that cannot be stored, a MERGE with
duplicate matches, a constraint broken — failing with a clear error and the table unchanged
(the log's version and every file in the table's directory).

Oracles: values derived by hand from the rows and the generation expressions / identity specs;
the data files and the log read with pyarrow and json (row tracking: the spec's stable row id —
the materialized value, else baseRowId + the row's physical position — and the row commit
version — the materialized value, else the file's defaultRowCommitVersion; deletion vectors
decoded with the protocol codec, tests/protocol/test_deletion_vectors.py holds it to Delta's
own files); delta-spark's error classes.
"""

from __future__ import annotations

import json
from decimal import Decimal
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tahoe
from tahoe.errors import (
    AnalysisException, ConstraintViolationError, DeltaUnsupportedOperationException, InvalidTableOperationError,
    NumberFormatException,
)
from tahoe.protocol.schema import LONG, STRING, StructField, StructType
from tahoe.txn import create_table
from tahoe.write.writer import write_table
from tests.fixtures.delta_log import latest_version, log_actions


def rows(path: str, key: str = "k") -> list[dict]:
    return sorted(tahoe.Table(path).to_arrow().to_pylist(), key=lambda r: r[key])


def state(path: str) -> tuple[list[str], list[str]]:
    """The log's commit files and every other file under the table's directory."""
    log = sorted(f for f in os.listdir(os.path.join(path, "_delta_log")) if f.endswith(".json"))
    files = sorted(os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path) for f in fs
                   if "_delta_log" not in d)
    return log, files


def _field_metadata(path: str, column: str) -> dict:
    """The column's metadata in the newest metaData action of the log (json)."""
    md = None
    for v in range(latest_version(path) + 1):
        md = log_actions(path, v).get("metaData", [md])[-1]
    return next(x["metadata"] for x in json.loads(md["schemaString"])["fields"] if x["name"] == column)


# --- generated and identity columns -------------------------------------------------------------

def _computed_table(path: str) -> None:
    schema = StructType([
        StructField("id", LONG, True, {"delta.identity.start": 100, "delta.identity.step": 10,
                                       "delta.identity.allowExplicitInsert": False}),
        StructField("k", LONG), StructField("v", LONG),
        StructField("g", LONG, True, {"delta.generationExpression": "v * 2 + k"}),
    ])
    create_table(path, schema)
    tahoe.write_table(path, pa.table({"k": pa.array([1, 2, 3], pa.int64()), "v": pa.array([10, 20, 30], pa.int64())}))


@pytest.mark.parametrize("dv", [False, True])
def test_generated_columns_recomputed_and_identity_values_for_merge_inserts(tmp_path, dv):
    """UPDATE and MERGE (matched update, not-matched-by-source update, insert) recompute the
    generated column g = v * 2 + k from each new row; MERGE's inserted rows get identity values
    start + n * step beyond the high-water mark, which the commit advances."""
    path = str(tmp_path / "t")
    _computed_table(path)
    if dv:
        from tahoe.txn import set_properties

        set_properties(path, {"delta.enableDeletionVectors": "true"})
    # ids 100, 110, 120 given at the write; high-water mark 120
    assert rows(path) == [{"id": 100, "k": 1, "v": 10, "g": 21}, {"id": 110, "k": 2, "v": 20, "g": 42},
                          {"id": 120, "k": 3, "v": 30, "g": 63}]
    tahoe.update(path, {"v": "v + 1"}, predicate="k = 1")                            # g = 11 * 2 + 1
    tahoe.update(path, {"k": "k * 10"}, predicate="k = 3")                           # g = 30 * 2 + 30
    assert rows(path, "id") == [{"id": 100, "k": 1, "v": 11, "g": 23}, {"id": 110, "k": 2, "v": 20, "g": 42},
                                {"id": 120, "k": 30, "v": 30, "g": 90}]
    src = pa.table({"k": pa.array([2, 7, 8], pa.int64()), "v": pa.array([5, 6, 7], pa.int64())})
    m = (tahoe.merge(path, src, "t.k = s.k", source_alias="s", target_alias="t")
         .when_matched_update({"v": "s.v"})
         .when_not_matched_insert({"k": "s.k", "v": "s.v"})
         .when_not_matched_by_source_update({"v": "t.v + 100"}, predicate="t.k = 30")
         .execute())
    assert (m["numTargetRowsUpdated"], m["numTargetRowsInserted"]) == (2, 2)
    assert rows(path, "id") == [
        {"id": 100, "k": 1, "v": 11, "g": 23},
        {"id": 110, "k": 2, "v": 5, "g": 12},          # matched: 5 * 2 + 2
        {"id": 120, "k": 30, "v": 130, "g": 290},      # not matched by source: 130 * 2 + 30
        {"id": 130, "k": 7, "v": 6, "g": 19},          # inserted: next identity values 130, 140
        {"id": 140, "k": 8, "v": 7, "g": 22},
    ]
    assert _field_metadata(path, "id")["delta.identity.highWaterMark"] == 140     # read from the log
    # insert * (source without the identity column) continues from the new mark
    (tahoe.merge(path, pa.table({"k": pa.array([9], pa.int64()), "v": pa.array([1], pa.int64())}), "t.k = s.k",
                 source_alias="s", target_alias="t").when_not_matched_insert_all().execute())
    assert rows(path, "id")[-1] == {"id": 150, "k": 9, "v": 1, "g": 11}
    # assigning a generated column a value other than its expression is a constraint violation
    before = state(path)
    with pytest.raises(ConstraintViolationError, match="Generated Column"):
        tahoe.update(path, {"g": "5"}, predicate="k = 1")
    assert state(path) == before


def test_identity_columns_cannot_be_updated(tmp_path):
    """delta-spark refuses to assign an identity column in UPDATE and in a MERGE update clause
    ([DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED]), before reading anything."""
    path = str(tmp_path / "t")
    _computed_table(path)
    before = state(path)
    src = pa.table({"k": pa.array([1], pa.int64()), "v": pa.array([0], pa.int64()), "id": pa.array([5], pa.int64())})
    attempts = [
        lambda: tahoe.update(path, {"id": "id + 1"}),
        lambda: tahoe.update(path, new_values={"ID": 7}, predicate="k = 1"),
        lambda: tahoe.merge(path, src, "t.k = s.k", source_alias="s", target_alias="t")
        .when_matched_update({"id": "s.id"}).execute(),
        lambda: tahoe.merge(path, src, "t.k = s.k", source_alias="s", target_alias="t")
        .when_not_matched_by_source_update({"id": "t.id * 2"}).execute(),
        lambda: tahoe.merge(path, src, "t.k = s.k", source_alias="s", target_alias="t")
        .when_matched_update_all().execute(),                    # * assigns the source's id
    ]
    for attempt in attempts:
        with pytest.raises(AnalysisException, match=r"\[DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED\].*`id`"):
            attempt()
    assert state(path) == before


# --- NOT NULL, CHECK, invariants ------------------------------------------------------------------

def _constrained_table(path: str, dv: bool) -> None:
    schema = StructType([
        StructField("k", LONG, nullable=False),
        StructField("v", LONG),
        StructField("s", STRING, True, {"delta.invariants": json.dumps({"expression": {"expression": "s <> 'bad'"}})}),
    ])
    props = {"delta.constraints.vsmall": "v < 100"}
    if dv:
        props["delta.enableDeletionVectors"] = "true"
    create_table(path, schema, properties=props)
    tahoe.write_table(path, pa.table({"k": pa.array([1, 2, 3], pa.int64()), "v": pa.array([10, 20, 30], pa.int64()),
                                      "s": ["a", "b", "c"]}))


@pytest.mark.parametrize("dv", [False, True])
def test_constraints_broken_by_update_or_merge_commit_nothing(tmp_path, dv):
    """A NOT NULL column set to NULL, a CHECK constraint or a column invariant broken — by an
    UPDATE, a MERGE update (matched or not matched by source) or a MERGE insert — fails the
    whole operation with ConstraintViolationError naming it; no commit, no file left behind."""
    path = str(tmp_path / "t")
    _constrained_table(path, dv)
    before = state(path)
    src = pa.table({"k": pa.array([1, 9], pa.int64()), "v": pa.array([150, 1], pa.int64()), "s": ["x", "bad"]})

    def merge():
        return tahoe.merge(path, src, "t.k = s.k", source_alias="s", target_alias="t")

    cases = [
        (lambda: tahoe.update(path, {"k": "NULL"}, predicate="k = 2"), "NOT NULL constraint violated for column: k"),
        (lambda: tahoe.update(path, {"v": "v * 10"}, predicate="k = 3"), "CHECK constraint vsmall"),
        (lambda: tahoe.update(path, {"s": "'bad'"}, predicate="k = 1"), r"Invariant \(s <> 'bad'\) on column s"),
        (lambda: merge().when_matched_update({"v": "s.v"}).execute(), "CHECK constraint vsmall"),
        (lambda: merge().when_not_matched_by_source_update({"k": "NULL"}, "t.k = 3").execute(),
         "NOT NULL constraint violated for column: k"),
        (lambda: merge().when_not_matched_insert_all().execute(), r"Invariant \(s <> 'bad'\)"),
        (lambda: merge().when_not_matched_insert({"k": "NULL", "v": "s.v"}).execute(),
         "NOT NULL constraint violated for column: k"),
    ]
    for attempt, message in cases:
        with pytest.raises(ConstraintViolationError, match=message):
            attempt()
        assert state(path) == before, message
    assert rows(path) == [{"k": 1, "v": 10, "s": "a"}, {"k": 2, "v": 20, "s": "b"}, {"k": 3, "v": 30, "s": "c"}]
    tahoe.update(path, {"v": "v * 3"}, predicate="k < 3")          # 30, 60: within the constraint
    assert [r["v"] for r in rows(path)] == [30, 60, 30]


@pytest.mark.parametrize("dv", [False, True])
def test_append_only_refuses_update_and_merge_that_changes_rows(tmp_path, dv):
    """delta.appendOnly: DELETE, UPDATE and a MERGE with an update or delete clause are refused
    (InvalidTableOperationError, nothing committed); an insert-only MERGE appends."""
    path = str(tmp_path / "t")
    props = {"delta.appendOnly": "true", "delta.enableDeletionVectors": str(dv).lower()}
    write_table(path, pa.table({"k": pa.array([1, 2], pa.int64()), "v": ["a", "b"]}), properties=props)
    before = state(path)
    src = pa.table({"k": pa.array([2, 3], pa.int64()), "v": ["B", "C"]})

    def merge():
        return tahoe.merge(path, src, "t.k = s.k", source_alias="s", target_alias="t")

    for attempt in (lambda: tahoe.delete(path, "k = 1"),
                    lambda: tahoe.update(path, {"v": "'z'"}),
                    lambda: merge().when_matched_update_all().when_not_matched_insert_all().execute(),
                    lambda: merge().when_matched_delete().execute(),
                    lambda: merge().when_not_matched_insert_all().when_not_matched_by_source_delete().execute()):
        with pytest.raises(InvalidTableOperationError, match="DELTA_CANNOT_MODIFY_APPEND_ONLY.*only allow appends"):
            attempt()
        assert state(path) == before
    m = merge().when_not_matched_insert_all().execute()
    assert m["numTargetRowsInserted"] == 1 and m["version"] == 1
    assert rows(path) == [{"k": 1, "v": "a"}, {"k": 2, "v": "b"}, {"k": 3, "v": "C"}]
    assert "remove" not in log_actions(path, 1)


# --- row tracking ---------------------------------------------------------------------------------

def _tracked(path: str) -> dict[int, tuple[int, int, int]]:
    """id → (v, stable row id, row commit version) of every live row, read from the data files
    and the log with pyarrow / json (spec: the materialized value when the hidden column holds
    one, else baseRowId + physical position / the file's defaultRowCommitVersion)."""
    from pyroaring import BitMap64

    from tahoe.protocol.deletion_vectors import load_deletion_vector

    version = latest_version(path)
    live: dict[str, dict] = {}
    conf: dict = {}
    for v in range(version + 1):
        for k, a in ((k, a) for k, xs in log_actions(path, v).items() for a in xs):
            if k == "metaData":
                conf = a["configuration"]
            elif k == "add":
                live[a["path"]] = a
            elif k == "remove":
                if live.get(a["path"], {}).get("deletionVector") == a.get("deletionVector"):
                    live.pop(a["path"], None)
    rid_col = conf["delta.rowTracking.materializedRowIdColumnName"]
    rcv_col = conf["delta.rowTracking.materializedRowCommitVersionColumnName"]
    out = {}
    for a in live.values():
        t = pq.read_table(os.path.join(path, a["path"]))
        deleted = BitMap64()
        if a.get("deletionVector"):
            from tahoe.protocol.deletion_vectors import DeletionVectorDescriptor
            from tahoe.storage import LocalLogStore

            deleted = load_deletion_vector(DeletionVectorDescriptor.from_dict(a["deletionVector"]), path,
                                           LocalLogStore().read_range)
        rids = t.column(rid_col).to_pylist() if rid_col in t.column_names else [None] * t.num_rows
        rcvs = t.column(rcv_col).to_pylist() if rcv_col in t.column_names else [None] * t.num_rows
        for i, (id_, v, rid, rcv) in enumerate(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), rids, rcvs)):
            if i in deleted:
                continue
            out[id_] = (v, rid if rid is not None else a["baseRowId"] + i,
                        rcv if rcv is not None else a["defaultRowCommitVersion"])
    return out


def _high_water_mark(path: str, version: int) -> int:
    mark = -1
    for v in range(version + 1):
        for d in log_actions(path, v).get("domainMetadata", []):
            if d["domain"] == "delta.rowTracking":
                mark = json.loads(d["configuration"])["rowIdHighWaterMark"]
    return mark


@pytest.mark.parametrize("dv", [False, True])
def test_row_tracking_keeps_row_ids_and_sets_new_commit_versions(tmp_path, dv):
    """delta.enableRowTracking: every row an UPDATE or MERGE rewrites (updated, or copied with
    copy-on-write) keeps its stable row id; updated rows get the commit's version as their row
    commit version, copied ones keep theirs; MERGE's inserted rows get fresh ids above the
    previous high-water mark. In DV mode the unchanged rows stay where they are. Two files of
    4 rows at version 0: baseRowId 0 and 4, so row i has id i and commit version 0."""
    path = str(tmp_path / "t")
    write_table(path, pa.table({"id": pa.array(range(8), pa.int64()), "v": pa.array(range(8), pa.int64())}),
                target_file_rows=4, properties={"delta.enableRowTracking": "true",
                                                "delta.enableDeletionVectors": str(dv).lower()})
    assert _tracked(path) == {i: (i, i, 0) for i in range(8)}
    files0 = {a["path"] for a in log_actions(path, 0)["add"]}
    assert tahoe.update(path, {"v": "v + 100"}, predicate="id IN (1, 6)")["version"] == 1
    want = {i: (i, i, 0) for i in range(8)}
    want[1], want[6] = (101, 1, 1), (106, 6, 1)
    assert _tracked(path) == want
    mark = _high_water_mark(path, 1)
    src = pa.table({"id": pa.array([2, 9], pa.int64()), "v": pa.array([-2, -9], pa.int64())})
    m = (tahoe.merge(path, src, "t.id = s.id", source_alias="s", target_alias="t")
         .when_matched_update_all().when_not_matched_insert_all().execute())
    assert m["version"] == 2
    got = _tracked(path)
    want[2] = (-2, 2, 2)
    assert {k: v for k, v in got.items() if k != 9} == want
    v9, rid9, rcv9 = got[9]
    assert (v9, rcv9) == (-9, 2) and rid9 > mark                 # a fresh id, above every earlier one
    assert _high_water_mark(path, 2) >= rid9
    assert len({r for _, r, _ in got.values()}) == len(got)      # stable ids stay unique
    live = {a["path"] for a in log_actions(path, 2).get("add", [])} | {a["path"] for a in log_actions(path, 1)["add"]}
    if dv:   # the original files stay (with deletion vectors); only changed rows were written
        assert files0 <= {a["path"] for v in (1, 2) for a in log_actions(path, v)["add"]}
        assert tahoe.delete(path, "id = 3")["numAddedFiles"] == 0
    else:
        assert not files0 & live
        tahoe.delete(path, "id = 3")
    del want[3]
    want[9] = got[9]
    assert _tracked(path) == want                                # a DELETE moves no row id


# --- bad input ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dv", [False, True])
def test_bad_input_fails_clearly_and_leaves_the_table_unchanged(tmp_path, dv):
    """A value whose type cannot be stored in its column (Spark's ANSI store assignment:
    [INCOMPATIBLE_DATA_FOR_TABLE.CANNOT_SAFELY_CAST] naming the column), a string value that does
    not parse as the column's number (delta-spark's run-time ANSI cast: [CAST_INVALID_INPUT]
    naming the value, the type and the column), a MERGE where two source
    rows match one target row (delta-spark's DeltaUnsupportedOperationException
    [DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE] and its message), an unknown
    column, a CHECK constraint broken by an UPDATE: each fails, the log's version and the files
    stay as they were. A duplicate match that only an unconditional delete clause sees is
    allowed (delta-spark allows it) and deletes the row once."""
    path = str(tmp_path / "t")
    write_table(path, pa.table({"k": pa.array([1, 2, 3], pa.int64()), "v": pa.array([10, 20, 30], pa.int64()),
                                "s": ["a", "b", "c"]}),
                properties={"delta.constraints.vpos": "v > 0", "delta.enableDeletionVectors": str(dv).lower()})
    before = state(path)
    src = pa.table({"k": pa.array([2, 2, 5], pa.int64()), "v": pa.array([7, 8, 9], pa.int64()), "s": ["x", "y", "z"]})

    def merge():
        return tahoe.merge(path, src, "t.k = s.k", source_alias="s", target_alias="t")

    # a string converts to bigint as delta-spark's UPDATE / MERGE store it (an ANSI cast, checked per
    # value: delta-spark PR #1938 / #1998's "valid implicit cast"): 'a', 'abc', 'x' do not parse
    for attempt in (lambda: tahoe.update(path, {"v": "s"}, predicate="k = 1"),              # string -> bigint
                    lambda: tahoe.update(path, new_values={"v": "abc"}),
                    lambda: tahoe.merge(path, src.slice(0, 1), "t.k = s.k", source_alias="s", target_alias="t")
                    .when_matched_update({"v": "s.s"}).execute()):
        with pytest.raises(NumberFormatException, match=r"CAST_INVALID_INPUT.*'(a|abc|x)'.*BIGINT.*`v`"):
            attempt()
        assert state(path) == before
    # no ANSI cast from a date to bigint (a boolean converts: see test_booleans_and_numbers_convert)
    for attempt in (lambda: tahoe.update(path, {"v": "DATE'2024-01-01'"}),):            # date -> bigint
        with pytest.raises(AnalysisException, match=r"INCOMPATIBLE_DATA_FOR_TABLE\.CANNOT_SAFELY_CAST.*`[vs]`"):
            attempt()
        assert state(path) == before
    for attempt in (lambda: merge().when_matched_update_all().execute(),
                    lambda: merge().when_matched_delete("s.v = 7").when_not_matched_insert_all().execute(),
                    lambda: merge().when_matched_update({"v": "s.v"}, "s.v > 100").execute()):
        with pytest.raises(DeltaUnsupportedOperationException,
                           match="multiple source rows matched and attempted to modify the same target row") as e:
            attempt()
        assert e.value.error_class == "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"
        assert state(path) == before
    with pytest.raises(AnalysisException, match="UNRESOLVED_COLUMN.*`nope`"):
        tahoe.update(path, {"v": "nope + 1"})
    with pytest.raises(AnalysisException, match="`nope`"):
        merge().when_matched_update({"nope": "s.v"}).execute()
    with pytest.raises(ConstraintViolationError, match="CHECK constraint vpos"):
        tahoe.update(path, {"v": "v - 25"})                          # 10 - 25 breaks it; 30 - 25 does not
    assert state(path) == before
    assert rows(path) == [{"k": 1, "v": 10, "s": "a"}, {"k": 2, "v": 20, "s": "b"}, {"k": 3, "v": 30, "s": "c"}]
    m = merge().when_matched_delete().execute()
    assert (m["numTargetRowsDeleted"], m["version"]) == (1, 1)
    assert rows(path) == [{"k": 1, "v": 10, "s": "a"}, {"k": 3, "v": 30, "s": "c"}]


# --- what a merge-on-read DELETE reads ----------------------------------------------------------------

def test_dv_delete_reads_only_the_condition_columns_and_rewrites_nothing(tmp_path, monkeypatch):
    """A DELETE in DV mode reads, from each candidate file, only the columns its condition
    names (pyarrow's parquet reads recorded), writes one deletion-vector file and no data file;
    a file with no matching row is not read beyond those columns either. With copy-on-write
    the files holding a match are then read whole (their other rows are copied)."""
    import pyarrow.parquet as pq_mod

    for dv in (True, False):
        path = str(tmp_path / f"t{dv}")
        write_table(path, pa.table({"id": pa.array(range(40), pa.int64()), "v": [f"v{i}" for i in range(40)],
                                    "w": pa.array([i * 0.5 for i in range(40)])}),
                    target_file_rows=10, properties={"delta.enableDeletionVectors": str(dv).lower()})
        reads: list = []
        real = pq_mod.ParquetFile.read

        def recording(self, columns=None, *a, **kw):
            reads.append(tuple(columns) if columns is not None else "ALL")
            return real(self, columns, *a, **kw)

        monkeypatch.setattr(pq_mod.ParquetFile, "read", recording)
        m = tahoe.delete(path, "id % 10 = 3 AND id < 25")          # rows 3, 13, 23: in 3 of the 4 files
        monkeypatch.undo()
        assert m["numDeletedRows"] == 3
        if dv:
            assert reads == [("id",)] * 3                           # the 4th file (ids 30-39) skipped by stats
            assert (m["numAddedFiles"], m["numRemovedFiles"], m["numDeletionVectorsAdded"]) == (0, 0, 3)
            dvs = {os.path.basename(f) for f in state(path)[1] if f.endswith(".bin")}
            assert len(dvs) == 1                                    # one DV file for the three files
        else:
            assert sorted(reads, key=str) == sorted([("id",)] * 3 + [("id", "v", "w")] * 3, key=str)
            assert (m["numAddedFiles"], m["numRemovedFiles"], m["numCopiedRows"]) == (1, 3, 27)
        assert sorted(r["id"] for r in tahoe.Table(path).to_arrow().to_pylist()) == \
            [i for i in range(40) if i not in (3, 13, 23)]


# --- structs inside arrays: stored by name -------------------------------------------------------

# target: k, arr array<struct<a: int, b: struct<x: string, y: bigint>>>; the source's element
# struct lists its fields in another order, with strings where the table has numbers
ARR_TARGET = pa.table({
    "k": pa.array([1, 2], pa.int64()),
    "arr": pa.array([[{"a": 1, "b": {"x": "p", "y": 10}}], [{"a": 2, "b": None}]],
                    pa.list_(pa.struct([("a", pa.int32()), ("b", pa.struct([("x", pa.string()), ("y", pa.int64())]))])))})
ARR_SOURCE = pa.table({
    "k": pa.array([1, 3, 4], pa.int64()),
    "arr": pa.array([[{"b": {"y": "11", "x": "q"}, "a": " 7 "}, None], None, [{"b": None, "a": "8"}]],
                    pa.list_(pa.struct([("b", pa.struct([("y", pa.string()), ("x", pa.string())])),
                                        ("a", pa.string())])))})
# by hand: fields matched by name, ' 7 ' -> 7 (Spark's cast trims), NULL element / array / struct kept
ARR_MERGED = [{"k": 1, "arr": [{"a": 7, "b": {"x": "q", "y": 11}}, None]},
              {"k": 2, "arr": [{"a": 2, "b": None}]},
              {"k": 3, "arr": None},
              {"k": 4, "arr": [{"a": 8, "b": None}]}]
# a new element field c, and no b: an error without schema evolution; with it the element
# struct becomes <a, b, c> (b NULL for the updated row, c NULL for the others)
ARR_NEW_FIELD = pa.table({"k": pa.array([2], pa.int64()),
                          "arr": pa.array([[{"a": 5, "c": "new"}]],
                                          pa.list_(pa.struct([("a", pa.int64()), ("c", pa.string())])))})
ARR_EVOLVED = [{"k": 1, "arr": [{"a": 7, "b": {"x": "q", "y": 11}, "c": None}, None]},
               {"k": 2, "arr": [{"a": 5, "b": None, "c": "new"}]},
               {"k": 3, "arr": None},
               {"k": 4, "arr": [{"a": 8, "b": None, "c": None}]}]
ARR_BAD_VALUE = pa.table({"k": pa.array([1], pa.int64()),
                          "arr": pa.array([[{"a": "x1", "b": None}]],
                                          pa.list_(pa.struct([("a", pa.string()),
                                                              ("b", pa.struct([("x", pa.string()),
                                                                               ("y", pa.int64())]))])))})


def test_merge_stores_structs_inside_arrays_by_name(tmp_path):
    """MERGE UPDATE * / INSERT * of an array of structs whose fields come in another order and
    as strings: stored by name with ANSI casts (delta-spark's UPDATE / MERGE,
    docs.delta.io "Merge - arrays of structs"); a struct field the table lacks fails
    ([DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION]) and a string that is no number fails
    ([CAST_INVALID_INPUT] naming the field) with the table unchanged; with schema evolution the
    element struct gains the field. Rows derived by hand (ARR_MERGED, ARR_EVOLVED)."""
    path = str(tmp_path / "t")
    write_table(path, ARR_TARGET)

    def merge(src, **kw):
        return tahoe.merge(path, src, "t.k = s.k", source_alias="s", target_alias="t", **kw) \
            .when_matched_update_all().when_not_matched_insert_all().execute()

    m = merge(ARR_SOURCE)
    assert (m["numTargetRowsUpdated"], m["numTargetRowsInserted"]) == (1, 2)
    assert rows(path) == ARR_MERGED
    before = state(path)
    with pytest.raises(AnalysisException, match=r"DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION.*STRUCT<`a`: BIGINT, `c`: STRING>"):
        merge(ARR_NEW_FIELD)
    assert state(path) == before
    with pytest.raises(NumberFormatException, match=r"CAST_INVALID_INPUT.*'x1'.*arr\.element\.a"):
        merge(ARR_BAD_VALUE)
    assert state(path) == before
    merge(ARR_NEW_FIELD, merge_schema=True)
    element = tahoe.Table(path).schema.fields[1].type.element_type
    assert [(f.name, f.type.simple_string()) for f in element.fields] == [
        ("a", "integer"), ("b", "struct<x:string,y:long>"), ("c", "string")]
    assert rows(path) == ARR_EVOLVED


# UPDATE / MERGE SET of nested struct fields (delta-spark's `set={"s.a": ...}`, qualified by the
# target's alias or not): the struct is rebuilt with the other fields kept — also where it was
# NULL, which becomes a struct (delta-spark's CreateNamedStruct). Rows derived by hand.
NESTED_TYPE = pa.struct([("a", pa.int64()), ("b", pa.string()),
                         ("c", pa.struct([("x", pa.int32()), ("y", pa.string())]))])
NESTED_TARGET = pa.table({"k": pa.array([1, 2, 3], pa.int64()),
                          "s": pa.array([{"a": 1, "b": "x", "c": {"x": 1, "y": "q"}}, None,
                                         {"a": 3, "b": "z", "c": None}], NESTED_TYPE)})
# UPDATE SET s.a = k * 10, s.c.y = 'new' WHERE k <= 2
NESTED_UPDATE = ({"s.a": "k * 10", "s.c.y": "'new'"}, "k <= 2")
NESTED_UPDATED = [{"k": 1, "s": {"a": 10, "b": "x", "c": {"x": 1, "y": "new"}}},
                  {"k": 2, "s": {"a": 20, "b": None, "c": {"x": None, "y": "new"}}},
                  {"k": 3, "s": {"a": 3, "b": "z", "c": None}}]
# then MERGE ... ON t.k = s.k WHEN MATCHED UPDATE SET t.s.b = CAST(src.v AS STRING)
#                              WHEN NOT MATCHED INSERT (t.k) VALUES (src.k)
NESTED_SOURCE = pa.table({"k": pa.array([1, 3, 4], pa.int64()), "v": pa.array([7, 8, 9], pa.int64())})
NESTED_MERGE = ({"t.s.b": "CAST(src.v AS STRING)"}, {"t.k": "src.k"})
NESTED_MERGED = [{"k": 1, "s": {"a": 10, "b": "7", "c": {"x": 1, "y": "new"}}},
                 {"k": 2, "s": {"a": 20, "b": None, "c": {"x": None, "y": "new"}}},
                 {"k": 3, "s": {"a": 3, "b": "8", "c": None}},
                 {"k": 4, "s": None}]
# with schema evolution: MERGE ... WHEN MATCHED AND src.v > 7 THEN UPDATE SET t.s.a = src.v
# WHEN MATCHED THEN UPDATE SET * — updateAll adds s.d and v; the nested SET keeps the other fields,
# the new field d NULL, and leaves the new column v NULL
NESTED_EVOLVE_TYPE = pa.struct([("a", pa.int64()), ("b", pa.string()),
                                ("c", pa.struct([("x", pa.int32()), ("y", pa.string())])), ("d", pa.string())])
NESTED_EVOLVE_SOURCE = pa.table({"k": pa.array([1, 3], pa.int64()),
                                 "s": pa.array([{"a": 5, "b": "B", "c": None, "d": "D1"},
                                                {"a": 6, "b": "B3", "c": {"x": 9, "y": "z"}, "d": "D3"}],
                                               NESTED_EVOLVE_TYPE),
                                 "v": pa.array([7, 8], pa.int64())})
NESTED_EVOLVED = [{"k": 1, "s": {"a": 5, "b": "B", "c": None, "d": "D1"}, "v": 7},
                  {"k": 2, "s": None, "v": None},
                  {"k": 3, "s": {"a": 8, "b": "z", "c": None, "d": None}, "v": None}]
# with schema evolution through explicit assignments (delta-spark 2.3+: a SET / VALUES key naming a
# source column or struct field carries it into the table): MERGE ... WHEN MATCHED THEN UPDATE SET
# t.s = src.s WHEN NOT MATCHED THEN INSERT (k, s) VALUES (src.k, src.s) adds the source struct's new
# field s.d (NULL where no row gave it) and not the unassigned column v; then SET s.d = ... names the
# new nested field itself. Rows derived by hand.
EXPLICIT_SOURCE = pa.table({"k": pa.array([1, 4], pa.int64()),
                            "s": pa.array([{"a": 5, "b": "B", "c": None, "d": "D1"},
                                           {"a": 6, "b": "B4", "c": {"x": 9, "y": "z"}, "d": "D4"}],
                                          NESTED_EVOLVE_TYPE),
                            "v": pa.array([7, 8], pa.int64())})
EXPLICIT_MERGE = ({"t.s": "src.s"}, {"k": "src.k", "s": "src.s"})
EXPLICIT_EVOLVED = [{"k": 1, "s": {"a": 5, "b": "B", "c": None, "d": "D1"}},
                    {"k": 2, "s": None},
                    {"k": 3, "s": {"a": 3, "b": "z", "c": None, "d": None}},
                    {"k": 4, "s": {"a": 6, "b": "B4", "c": {"x": 9, "y": "z"}, "d": "D4"}}]
EXPLICIT_FIELD_SOURCE = pa.table({"k": pa.array([3], pa.int64()),
                                  "s": pa.array([{"a": 0, "b": "-", "c": None, "d": "D3"}], NESTED_EVOLVE_TYPE),
                                  "w": pa.array([30], pa.int64())})
# then MERGE ... ON t.k = src.k WHEN MATCHED THEN UPDATE SET s.d = src.s.d, w = src.w + 1: the new
# column w (named by a key) is added, the other fields of s kept
EXPLICIT_FIELD = {"s.d": "src.s.d", "w": "src.w + 1"}
EXPLICIT_FIELD_EVOLVED = [{**r, "w": None} for r in EXPLICIT_EVOLVED]
EXPLICIT_FIELD_EVOLVED[2] = {"k": 3, "s": {"a": 3, "b": "z", "c": None, "d": "D3"}, "w": 31}
# bad keys: (set, the error class it must raise)
NESTED_BAD = [({"s.zz": "1"}, "DELTA_MISSING_SET_COLUMN"),
              ({"k.x": "1"}, "DELTA_UNSUPPORTED_FIELD_UPDATE_NON_STRUCT"),
              ({"s": "NULL", "s.a": "1"}, "DELTA_CONFLICT_SET_COLUMN"),
              ({"s.c": "NULL", "s.c.x": "1"}, "DELTA_CONFLICT_SET_COLUMN")]


def test_update_and_merge_assign_nested_fields(tmp_path):
    path = str(tmp_path / "t")
    write_table(path, NESTED_TARGET)
    tahoe.update(path, NESTED_UPDATE[0], predicate=NESTED_UPDATE[1])
    assert rows(path) == NESTED_UPDATED
    m = tahoe.merge(path, NESTED_SOURCE, "t.k = src.k", source_alias="src", target_alias="t") \
        .when_matched_update(NESTED_MERGE[0]).when_not_matched_insert(NESTED_MERGE[1]).execute()
    assert (m["numTargetRowsUpdated"], m["numTargetRowsInserted"]) == (2, 1)
    assert rows(path) == NESTED_MERGED
    before = state(path)
    for bad, error in NESTED_BAD:
        with pytest.raises(AnalysisException, match=error):
            tahoe.update(path, bad)
    with pytest.raises(NumberFormatException, match=r"CAST_INVALID_INPUT.*'abc'"):
        tahoe.update(path, {"s.a": "'abc'"})
    with pytest.raises(AnalysisException, match="DELTA_MERGE_INSERT_NESTED_FIELD"):
        tahoe.merge(path, NESTED_SOURCE, "t.k = src.k", source_alias="src", target_alias="t") \
            .when_not_matched_insert({"t.k": "src.k", "t.s.a": "src.v"}).execute()
    assert state(path) == before
    assert rows(path) == NESTED_MERGED
    from tests.fixtures.deltars import run_deltars

    read = run_deltars([{"path": path, "ops": []}], tmp_path / "rs")[0]   # delta-rs reads the same rows
    assert sorted(read["rows"].to_pylist(), key=lambda r: r["k"]) == NESTED_MERGED

    path = str(tmp_path / "evolve")
    write_table(path, NESTED_TARGET)
    tahoe.merge(path, NESTED_EVOLVE_SOURCE, "t.k = src.k", source_alias="src", target_alias="t", merge_schema=True) \
        .when_matched_update({"t.s.a": "src.v"}, predicate="src.v > 7").when_matched_update_all().execute()
    assert rows(path) == NESTED_EVOLVED


def test_merge_evolves_through_explicit_assignments(tmp_path):
    path = str(tmp_path / "t")
    write_table(path, NESTED_TARGET)
    before = state(path)
    with pytest.raises(AnalysisException, match="DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION"):   # no evolution
        tahoe.merge(path, EXPLICIT_SOURCE, "t.k = src.k", source_alias="src", target_alias="t") \
            .when_matched_update(EXPLICIT_MERGE[0]).execute()
    with pytest.raises(AnalysisException, match="DELTA_MISSING_SET_COLUMN"):   # not a source field either
        tahoe.merge(path, EXPLICIT_SOURCE, "t.k = src.k", source_alias="src", target_alias="t", merge_schema=True) \
            .when_matched_update({"s.zz": "src.v"}).execute()
    assert state(path) == before
    m = tahoe.merge(path, EXPLICIT_SOURCE, "t.k = src.k", source_alias="src", target_alias="t", merge_schema=True) \
        .when_matched_update(EXPLICIT_MERGE[0]).when_not_matched_insert(EXPLICIT_MERGE[1]).execute()
    assert (m["numTargetRowsUpdated"], m["numTargetRowsInserted"]) == (1, 1)
    assert tahoe.Table(path).schema.names == ["k", "s"]
    assert rows(path) == EXPLICIT_EVOLVED
    tahoe.merge(path, EXPLICIT_FIELD_SOURCE, "t.k = src.k", source_alias="src", target_alias="t", merge_schema=True) \
        .when_matched_update(EXPLICIT_FIELD).execute()
    assert rows(path) == EXPLICIT_FIELD_EVOLVED
    from tests.fixtures.deltars import run_deltars

    read = run_deltars([{"path": path, "ops": []}], tmp_path / "rs")[0]   # delta-rs reads the same rows
    assert sorted(read["rows"].to_pylist(), key=lambda r: r["k"]) == EXPLICIT_FIELD_EVOLVED


# booleans into numbers and numbers into booleans, as delta-spark's UPDATE / MERGE store them (an
# ANSI CAST: true -> 1, false -> 0; zero -> false, any other number -> true). Rows derived by hand.
BOOL_TARGET = pa.table({"k": pa.array([1, 2, 3], pa.int64()), "i": pa.array([10, 20, 30], pa.int32()),
                        "b": pa.array([True, False, None]),
                        "d": pa.array([Decimal("1.50"), None, Decimal("2.00")], pa.decimal128(5, 2))})
BOOL_UPDATE = {"i": "k = 2", "b": "k - 1", "d": "k <> 1"}
BOOL_UPDATED = [{"k": 1, "i": 0, "b": False, "d": Decimal("0.00")},
                {"k": 2, "i": 1, "b": True, "d": Decimal("1.00")},
                {"k": 3, "i": 0, "b": True, "d": Decimal("1.00")}]
BOOL_SOURCE = pa.table({"k": pa.array([1, 4], pa.int64()), "flag": [True, False], "n": [0.0, 3.5]})
BOOL_MERGE = ({"i": "s.flag", "b": "s.n"}, {"k": "s.k", "i": "s.flag", "b": "s.n", "d": "s.flag"})
BOOL_MERGED = [{"k": 1, "i": 1, "b": False, "d": Decimal("0.00")},
               {"k": 2, "i": 1, "b": True, "d": Decimal("1.00")},
               {"k": 3, "i": 0, "b": True, "d": Decimal("1.00")},
               {"k": 4, "i": 0, "b": True, "d": Decimal("0.00")}]


def test_booleans_and_numbers_convert(tmp_path):
    path = str(tmp_path / "t")
    write_table(path, BOOL_TARGET)
    tahoe.update(path, BOOL_UPDATE)
    assert rows(path) == BOOL_UPDATED
    tahoe.merge(path, BOOL_SOURCE, "t.k = s.k", source_alias="s", target_alias="t") \
        .when_matched_update(BOOL_MERGE[0]).when_not_matched_insert(BOOL_MERGE[1]).execute()
    assert rows(path) == BOOL_MERGED

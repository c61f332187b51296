"""The write planner's rules, through the Arrow writer (the Spark writers use the same planner:
tests/spark/test_write_plan.py): type widening recorded in `delta.typeChanges`, column defaults,
and that planning has one home."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pyarrow as pa
import pytest

import tahoe
from tahoe import DeltaLog, Table
from tahoe.errors import SchemaError
from tahoe.protocol.schema import LONG, STRING, StructField, StructType
from tahoe.txn import create_table
from tests.write.test_writer import read_back, same_rows

REPO = Path(__file__).resolve().parents[2]


def _schema_json(path: str, version: int) -> dict:
    lines = Path(path, "_delta_log", f"{version:020d}.json").read_text().splitlines()
    md = next(json.loads(x)["metaData"] for x in lines if '"metaData"' in x)
    return {f["name"]: f for f in json.loads(md["schemaString"])["fields"]}


def _protocol(path: str, version: int) -> dict:
    lines = Path(path, "_delta_log", f"{version:020d}.json").read_text().splitlines()
    return next(json.loads(x)["protocol"] for x in lines if '"protocol"' in x)


# --- type widening -----------------------------------------------------------------------------------

def test_type_widening_records_type_changes(tmp_path):
    """mergeSchema with delta.enableTypeWidening: int → long, float → double and a nested
    struct field and array element widen; each change is recorded on its nearest struct field as
    the spec's `delta.typeChanges` entries (fieldPath for the array element); the table carries the
    typeWidening reader-writer feature; old narrow files read as the wide type. Oracle: the raw
    schemaString JSON and hand-made rows."""
    path = str(tmp_path / "t")
    s1 = pa.struct([("a", pa.int16())])
    first = pa.table({"id": pa.array([1], pa.int32()), "x": pa.array([1.5], pa.float32()),
                      "s": pa.array([{"a": 1}], s1), "arr": pa.array([[1]], pa.list_(pa.int32()))})
    tahoe.write_table(path, first, properties={"delta.enableTypeWidening": "true"})
    s2 = pa.struct([("a", pa.int32())])
    second = pa.table({"id": pa.array([2**40], pa.int64()), "x": pa.array([2.25], pa.float64()),
                       "s": pa.array([{"a": 70000}], s2), "arr": pa.array([[2**40]], pa.list_(pa.int64()))})
    v = tahoe.write_table(path, second, schema_mode="merge")
    fields = _schema_json(path, v)
    assert fields["id"]["type"] == "long"
    assert fields["id"]["metadata"]["delta.typeChanges"] == [{"fromType": "integer", "toType": "long"}]
    assert fields["x"]["metadata"]["delta.typeChanges"] == [{"fromType": "float", "toType": "double"}]
    inner = fields["s"]["type"]["fields"][0]
    assert inner["type"] == "integer" and inner["metadata"]["delta.typeChanges"] == [
        {"fromType": "short", "toType": "integer"}]
    assert "delta.typeChanges" not in fields["s"]["metadata"]
    assert fields["arr"]["metadata"]["delta.typeChanges"] == [
        {"fromType": "integer", "toType": "long", "fieldPath": "element"}]
    proto = _protocol(path, 0)
    assert "typeWidening" in proto["readerFeatures"] and "typeWidening" in proto["writerFeatures"]
    expected = pa.table({"id": [1, 2**40], "x": [1.5, 2.25], "s": pa.array([{"a": 1}, {"a": 70000}], s2),
                         "arr": [[1], [2**40]]})
    same_rows(Table(path).to_arrow(), expected)
    # a second widening appends to the history
    tahoe.write_table(path, pa.table({"s": pa.array([{"a": 2**40}], pa.struct([("a", pa.int64())]))}),
                      schema_mode="merge")
    inner = _schema_json(path, v + 1)["s"]["type"]["fields"][0]
    assert inner["metadata"]["delta.typeChanges"] == [{"fromType": "short", "toType": "integer"},
                                                      {"fromType": "integer", "toType": "long"}]


def test_type_change_refused_when_type_widening_is_off(tmp_path):
    """A table with the typeWidening feature but delta.enableTypeWidening=false: the spec says
    writers must reject widening type changes; nothing is committed."""
    path = str(tmp_path / "t")
    tahoe.write_table(path, pa.table({"id": pa.array([1], pa.int16())}),
                      properties={"delta.enableTypeWidening": "true"})
    Table(path).set_properties({"delta.enableTypeWidening": "false"})
    with pytest.raises(SchemaError, match="type widening is not enabled"):
        tahoe.write_table(path, pa.table({"id": pa.array([70000], pa.int32())}), schema_mode="merge")
    assert Table(path).version == 1


def test_no_type_changes_without_a_change(tmp_path):
    path = str(tmp_path / "t")
    tahoe.write_table(path, pa.table({"id": [1]}), properties={"delta.enableTypeWidening": "true"})
    tahoe.write_table(path, pa.table({"id": [2], "extra": ["x"]}), schema_mode="merge")
    fields = _schema_json(path, 1)
    assert fields["id"]["metadata"] == {} and fields["extra"]["metadata"] == {}


# --- column defaults ------------------------------------------------------------------------------------

def test_column_defaults_are_applied_to_omitted_columns(tmp_path):
    """Spec "Default Columns": a row lacking a value for a column with `CURRENT_DEFAULT` gets the
    default — also for a NOT NULL column the data omits; an explicit NULL is kept. delta-rs (an
    independent reader) sees the defaults."""
    path = str(tmp_path / "t")
    schema = StructType([StructField("id", LONG), StructField("status", STRING, False, {"CURRENT_DEFAULT": "'new'"}),
                         StructField("n", LONG, True, {"CURRENT_DEFAULT": "40 + 2"})])
    create_table(path, schema)
    tahoe.write_table(path, pa.table({"id": [1, 2]}))
    tahoe.write_table(path, pa.table({"id": [3], "n": pa.array([None], pa.int64()), "status": ["old"]}))
    expected = pa.table({"id": [1, 2, 3], "status": ["new", "new", "old"], "n": [42, 42, None]})
    read_back(path, tmp_path, expected)


# --- one planner ----------------------------------------------------------------------------------------

_PLANNING = {"merge_schemas", "check_write_compatible", "assign_ids_for_table", "normalize_properties",
             "use_dynamic_overwrite", "write_parameters", "identity_generation", "stage_overwrite",
             "Transaction", "record_type_changes", "constraint_expressions"}


def _names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
        elif isinstance(node, ast.ImportFrom):
            out.update(a.name for a in node.names)
    return out


@pytest.mark.parametrize("executor", ["tahoe/write/writer.py", "tahoe/spark/write.py"])
def test_executors_plan_and_commit_through_the_shared_modules(executor):
    """Both executors take every decision from `tahoe.write.plan` and commit through
    `tahoe.write.commit`: none of them touches schema merging, properties, overwrite rules,
    identity generation rules or the transaction itself."""
    names = _names(REPO / executor)
    assert {"plan_write", "commit_write"} <= names
    assert not (names & _PLANNING), f"{executor} plans by itself: {sorted(names & _PLANNING)}"


def test_plan_rows_and_the_commit_step_for_an_operation_of_its_own(tmp_path):
    """The pieces DML builds on: a plan for rows written into an existing table (`plan_rows`: an
    identity column the rows omit is generated beyond its high-water mark, a default applied),
    the Arrow executor's file work (`write_rows`), and the commit step on a transaction of the
    operation's own (`commit_new_files`), which here also removes a file."""
    from tahoe.protocol.schema import StructField as F
    from tahoe.txn import Transaction
    from tahoe.write.writer import write_rows
    from tahoe.write.commit import commit_new_files
    from tahoe.write.plan import plan_rows

    path = str(tmp_path / "t")
    schema = StructType([F("id", LONG, True, {"delta.identity.start": 1, "delta.identity.step": 1,
                                              "delta.identity.allowExplicitInsert": False}),
                         F("v", STRING), F("tag", STRING, True, {"CURRENT_DEFAULT": "'dml'"})])
    create_table(path, schema)
    tahoe.write_table(path, pa.table({"v": ["a", "b"]}))                   # ids 1, 2
    log = DeltaLog.for_table(path)
    snap = log.snapshot()
    old = [a for a in snap.add_files()]
    plan = plan_rows(snap, StructType([F("v", STRING)]), "MERGE", {"predicate": "[]"})
    adds, marks, n = write_rows(log, pa.table({"v": ["c"]}), plan)
    txn = Transaction(log, plan.operation, plan.parameters, snapshot=snap)

    def stage(t):
        t.remove_files(old)
        t.add_files(adds)
        for col, mark in marks.items():
            t.update_identity_high_water_mark(col, mark)
        return {"numTargetRowsInserted": n}

    v = commit_new_files(txn, adds, stage)
    assert v == 2 and marks == {"id": 3}
    read_back(path, tmp_path, pa.table({"id": [3], "v": ["c"], "tag": ["dml"]}))

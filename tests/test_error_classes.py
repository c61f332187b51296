"""delta-spark's error classes on tahoe's errors, without Spark: for each failure delta-spark names
with an error class, tahoe's error carries the same class (`error_class`, `getCondition()`) and
its message starts with `[CLASS] ` followed by delta-spark's message text (from delta-spark's
`delta-error-classes.json` and its DeltaErrorsSuite), tahoe's detail after it.

Oracle: the message templates of delta-spark's delta-error-classes.json, filled in by hand."""

from __future__ import annotations

import os
import pickle
import re
import time

import pyarrow as pa
import pytest

import tahoe
from tahoe.errors import (
    ChangeDataFeedError, ConstraintViolationError, DeltaError, InvalidTableOperationError, SchemaError,
    UnsupportedFeatureError, VersionNotFoundError, TableNotFoundError,
)


def _check(e: DeltaError, cls: str, pattern: str) -> None:
    assert e.error_class == cls and e.getCondition() == cls and e.getErrorClass() == cls
    assert str(e).startswith(f"[{cls}] "), str(e)
    assert re.match(pattern, str(e)[len(cls) + 3:], re.S), str(e)
    again = pickle.loads(pickle.dumps(e))      # errors cross process boundaries (Spark tasks)
    assert str(again) == str(e) and again.error_class == cls


@pytest.fixture
def table(tmp_path):
    path = str(tmp_path / "t")
    tahoe.write_table(path, pa.table({"id": pa.array([1, 2], pa.int64()), "s": ["a", "b"]}))
    time.sleep(0.01)
    tahoe.write_table(path, pa.table({"id": pa.array([3], pa.int64()), "s": ["c"]}), mode="append")
    return path


def test_version_not_found(table):
    with pytest.raises(VersionNotFoundError) as e:
        tahoe.Table(table, version=5)
    _check(e.value, "DELTA_VERSION_NOT_FOUND", r"Cannot time travel Delta table to version 5\. Available versions: \[0, 1\]\.")


def test_timestamps_out_of_range(table):
    with pytest.raises(VersionNotFoundError) as e:
        tahoe.Table(table, timestamp="2100-01-01 00:00:00")
    _check(e.value, "DELTA_TIMESTAMP_GREATER_THAN_COMMIT",
           r"The provided timestamp \(2100-01-01.*\) is after the latest version available to this table "
           r"\(.*\)\. Please use a timestamp before or at ")
    with pytest.raises(VersionNotFoundError) as e:
        tahoe.Table(table, timestamp="2000-01-01 00:00:00")
    _check(e.value, "DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION",
           r"The provided timestamp \(2000-01-01.*\) is before the earliest version available to this table "
           r"\(.*\)\. Please use a timestamp after ")


def test_not_a_delta_table(tmp_path):
    missing = str(tmp_path / "missing")
    with pytest.raises(TableNotFoundError) as e:
        tahoe.Table(missing)
    _check(e.value, "DELTA_MISSING_DELTA_TABLE", re.escape(f"`{missing}` is not a Delta table"))
    os.makedirs(tmp_path / "plain")
    with pytest.raises(TableNotFoundError) as e:
        tahoe.Table(str(tmp_path / "plain"))
    _check(e.value, "DELTA_MISSING_DELTA_TABLE", r"`.*plain` is not a Delta table")


def test_schema_mismatch_on_write(table):
    with pytest.raises(SchemaError) as e:
        tahoe.write_table(table, pa.table({"id": pa.array([4], pa.int64()), "s": ["d"], "extra": [1]}), mode="append")
    tid = tahoe.Table(table).metadata.id
    _check(e.value, "_LEGACY_ERROR_TEMP_DELTA_0007",
           re.escape(f"A schema mismatch detected when writing to the Delta table (Table ID: {tid}).\n"
                     "To enable schema migration using DataFrameWriter or DataStreamWriter, please set:\n"
                     "'.option(\"mergeSchema\", \"true\")'."))
    with pytest.raises(SchemaError) as e:
        tahoe.write_table(table, pa.table({"id": ["not a number"], "s": ["d"]}), mode="append")
    _check(e.value, "DELTA_FAILED_TO_MERGE_FIELDS", r"Failed to merge fields 'id' and 'id'\.")
    with pytest.raises(SchemaError) as e:     # with schema evolution: the types still cannot merge
        tahoe.write_table(table, pa.table({"id": ["x"], "s": ["d"]}), mode="append", schema_mode="merge")
    _check(e.value, "DELTA_FAILED_TO_MERGE_FIELDS", r"Failed to merge fields 'id' and 'id'\.")
    assert tahoe.Table(table).version == 1          # nothing committed


def test_constraint_violations(table):
    t = tahoe.Table(table)
    t.add_constraint("positive", "id > 0")
    with pytest.raises(ConstraintViolationError) as e:
        tahoe.write_table(table, pa.table({"id": pa.array([-1], pa.int64()), "s": ["x"]}), mode="append")
    _check(e.value, "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES",
           r"CHECK constraint positive \(id > 0\) violated by row with values:\n - id : -1")
    with pytest.raises(InvalidTableOperationError) as e:
        tahoe.Table(table).add_constraint("positive", "id > 1")
    _check(e.value, "DELTA_CONSTRAINT_ALREADY_EXISTS",
           r"Constraint 'positive' already exists\. Please delete the old constraint first\.\nOld constraint:\nid > 0")


def test_not_null_violation(tmp_path):
    from tahoe.protocol.schema import LONG, StructField, StructType

    path = str(tmp_path / "nn")
    tahoe.Table.create(path, StructType([StructField("id", LONG, False)]))
    with pytest.raises(ConstraintViolationError) as e:
        tahoe.write_table(path, pa.table({"id": pa.array([None], pa.int64())}), mode="append")
    _check(e.value, "DELTA_NOT_NULL_CONSTRAINT_VIOLATED", r"NOT NULL constraint violated for column: id\.")


def test_append_only(tmp_path):
    path = str(tmp_path / "ao")
    tahoe.write_table(path, pa.table({"id": pa.array([1], pa.int64())}),
                      properties={"delta.appendOnly": "true"})
    with pytest.raises(InvalidTableOperationError) as e:
        tahoe.delete(path, "id = 1")
    _check(e.value, "DELTA_CANNOT_MODIFY_APPEND_ONLY",
           re.escape("This table is configured to only allow appends. If you would like to permit updates or "
                     "deletes, use 'ALTER TABLE <table_name> SET TBLPROPERTIES (delta.appendOnly=false)'."))


def test_error_mode_on_an_existing_table(table):
    with pytest.raises(InvalidTableOperationError) as e:
        tahoe.write_table(table, pa.table({"id": pa.array([9], pa.int64()), "s": ["z"]}), mode="error")
    _check(e.value, "DELTA_PATH_EXISTS",
           re.escape(f"Cannot write to already existent path {table} without setting OVERWRITE = 'true'."))


def test_unsupported_features(tmp_path):
    from tahoe.protocol.actions import Protocol
    from tahoe.protocol.table_features import check_readable, check_writable

    with pytest.raises(UnsupportedFeatureError) as e:
        check_readable(Protocol(3, 7, ("futureThing",), ("futureThing",)))
    _check(e.value, "DELTA_UNSUPPORTED_FEATURES_FOR_READ",
           r"Unable to read this table because it requires reader table feature\(s\) that are unsupported by this "
           r"version of Delta Lake: futureThing\.")
    with pytest.raises(UnsupportedFeatureError) as e:
        check_writable(Protocol(1, 7, None, ("futureWriter",)))
    _check(e.value, "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE",
           r"Unable to write this table because it requires writer table feature\(s\) that are unsupported by this "
           r"version of Delta Lake: futureWriter\.")
    with pytest.raises(UnsupportedFeatureError) as e:
        check_readable(Protocol(4, 7, (), ()))
    _check(e.value, "DELTA_INVALID_PROTOCOL_VERSION",
           r"Delta protocol version is not supported by this version of Delta Lake")


def test_restore_out_of_range(table):
    with pytest.raises(VersionNotFoundError) as e:
        tahoe.Table(table).restore(7)
    _check(e.value, "DELTA_CANNOT_RESTORE_TABLE_VERSION", r"Cannot restore table to version 7\. Available versions: \[0, 1\]\.")


def test_missing_change_data(table):
    with pytest.raises(ChangeDataFeedError) as e:
        tahoe.Table(table).changes(0, 1)
    _check(e.value, "DELTA_MISSING_CHANGE_DATA",
           r"Error getting change data for range \[0 , 1\] as change data was not\nrecorded for version \[0\]\.")


def test_unclassed_errors_have_no_condition():
    e = SchemaError("plain")
    assert e.error_class is None and e.getCondition() is None and str(e) == "plain"

"""Action models: parsing (nulls, unknown fields/actions, malformed input) and exact serialization."""

from __future__ import annotations

import json

import pytest

from tahoe.errors import CorruptLogError
from tahoe.protocol.actions import (
    AddFile, CommitInfo, DomainMetadata, Metadata, Protocol, RemoveFile, RowIdHighWaterMark,
    SetTransaction, Sidecar, actions_to_json_lines, parse_action, parse_actions,
)


def test_add_with_explicit_nulls_and_unknown_fields():
    a = parse_action({"add": {"path": "a%20b.parquet", "partitionValues": {"p": None}, "size": 10,
                              "modificationTime": 1, "dataChange": True, "stats": None, "tags": None,
                              "deletionVector": None, "baseRowId": None, "somethingNew": 1}})
    assert isinstance(a, AddFile)
    assert a.partition_values == {"p": None} and a.stats is None and a.deletion_vector is None
    assert a.key_tuple == ("a%20b.parquet", None)
    assert "somethingNew" not in a.to_dict() and "stats" not in a.to_dict()


def test_unknown_action_is_ignored():
    assert parse_action({"someFutureAction": {"x": 1}}) is None


def test_missing_required_field_names_it():
    with pytest.raises(CorruptLogError, match="'size'"):
        parse_action({"add": {"path": "x", "partitionValues": {}, "modificationTime": 1, "dataChange": True}})
    with pytest.raises(CorruptLogError, match="minReaderVersion"):
        parse_action({"protocol": {"minWriterVersion": 2}})


def test_two_actions_on_one_line_refused():
    with pytest.raises(CorruptLogError, match="more than one action"):
        parse_action({"txn": {"appId": "a", "version": 1}, "protocol": {"minReaderVersion": 1, "minWriterVersion": 2}})


def test_malformed_line_names_source_and_line():
    with pytest.raises(CorruptLogError, match=r"00\.json: line 2 is not valid JSON"):
        list(parse_actions(b'{"txn":{"appId":"a","version":1}}\n{"add": {\n', "00.json"))


def test_round_trip_every_action():
    actions = [
        CommitInfo({"timestamp": 1, "operation": "WRITE"}),
        Protocol(3, 7, ("deletionVectors",), ("deletionVectors", "appendOnly")),
        Metadata(id="id", schema_string='{"type":"struct","fields":[]}', partition_columns=("p",),
                 configuration={"delta.appendOnly": "true"}, created_time=5),
        AddFile("p=1/f.parquet", {"p": "1"}, 10, 2, True, stats='{"numRecords":1}', base_row_id=0,
                default_row_commit_version=3),
        RemoveFile("p=1/g.parquet", deletion_timestamp=9, extended_file_metadata=True,
                   partition_values={"p": "1"}, size=3),
        SetTransaction("app", 4, 100),
        RowIdHighWaterMark(99, True),
        DomainMetadata("delta.rowTracking", '{"rowIdHighWaterMark":99}'),
        Sidecar("s.parquet", 10, 1),
    ]
    body = actions_to_json_lines(actions)
    back = list(parse_actions(body))
    assert back == actions
    # protocol feature lists serialize sorted, and only when present
    assert json.loads(Protocol(1, 2).to_json()) == {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}


def test_add_remove_carries_extended_metadata():
    a = AddFile("f.parquet", {"p": "x"}, 10, 2, stats='{"numRecords":3}', base_row_id=7)
    r = a.remove(1000)
    assert r.extended_file_metadata and r.size == 10 and r.partition_values == {"p": "x"}
    assert r.base_row_id == 7 and r.deletion_timestamp == 1000 and a.num_records == 3

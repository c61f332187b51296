"""Creating and evolving tables: protocols derived from properties and schema, property
validation, constraints, schema evolution, column mapping operations — and bad input that must
leave the table at its version."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from tahoe import Table
from tahoe.errors import (
    ConstraintViolationError, InvalidTableOperationError, SchemaError, UnsupportedFeatureError,
)
from tahoe.log import DeltaLog
from tahoe.protocol.actions import Protocol
from tahoe.protocol.schema import LONG, STRING, TIMESTAMP_NTZ, StructField, StructType
from tahoe.protocol.table_features import reader_features_of, writer_features_of
from tahoe.txn import (
    add_constraint, add_feature, create_table, drop_column, drop_constraint, parse_ddl,
    rename_column, set_identity_high_water_mark, set_properties, unset_properties,
    update_schema, upgrade_protocol,
)
from tahoe.protocol.properties import normalize_properties, parse_interval_ms
from tests.txn._helpers import commit_actions, commit_info, fake_add, latest_version

SCHEMA = "id BIGINT, p STRING, v DOUBLE"


def feats(p: Protocol) -> set[str]:
    return writer_features_of(p) | reader_features_of(p)


# --- create: protocol from features ---------------------------------------------------------------

@pytest.mark.parametrize("props, schema, expect_versions, must_have", [
    ({}, SCHEMA, (1, 2), {"appendOnly", "invariants"}),
    ({"delta.appendOnly": "true"}, SCHEMA, (1, 2), {"appendOnly"}),
    ({"delta.enableChangeDataFeed": "true"}, SCHEMA, (1, 4), {"changeDataFeed"}),
    ({"delta.constraints.pos": "v > 0"}, SCHEMA, (1, 3), {"checkConstraints"}),
    ({"delta.columnMapping.mode": "name"}, SCHEMA, (2, 5), {"columnMapping"}),
    ({"delta.columnMapping.mode": "id", "delta.enableChangeDataFeed": "true"}, SCHEMA, (2, 5), {"columnMapping", "changeDataFeed"}),
    ({"delta.enableDeletionVectors": "true"}, SCHEMA, (3, 7), {"deletionVectors"}),
    ({"delta.enableRowTracking": "true"}, SCHEMA, (1, 7), {"rowTracking", "domainMetadata"}),
    ({"delta.enableInCommitTimestamps": "true"}, SCHEMA, (1, 7), {"inCommitTimestamp"}),
    ({"delta.feature.domainMetadata": "supported"}, SCHEMA, (1, 7), {"domainMetadata"}),
    ({"delta.minWriterVersion": "4"}, SCHEMA, (1, 4), {"generatedColumns"}),
    ({}, "id BIGINT, ts TIMESTAMP_NTZ", (3, 7), {"timestampNtz"}),
])
def test_create_protocol(tmp_path, props, schema, expect_versions, must_have):
    snap = create_table(str(tmp_path / "t"), schema, properties=props)
    p = snap.protocol
    assert (p.min_reader_version, p.min_writer_version) == expect_versions
    assert must_have <= feats(p)
    assert not any(k.startswith("delta.feature.") or k.startswith("delta.min") for k in snap.configuration)
    assert snap.version == 0


def test_create_schema_features(tmp_path):
    schema = StructType([
        StructField("id", LONG, False, {"delta.identity.start": 1, "delta.identity.step": 1}),
        StructField("g", LONG, True, {"delta.generationExpression": "id * 2"}),
        StructField("s", STRING, True, {"delta.invariants": json.dumps({"expression": {"expression": "s IS NOT NULL"}})}),
    ])
    p = create_table(str(tmp_path / "t"), schema).protocol
    assert (p.min_reader_version, p.min_writer_version) == (1, 6)
    assert {"identityColumns", "generatedColumns", "invariants"} <= feats(p)


def test_create_column_mapping_assigns_ids(tmp_path):
    schema = parse_ddl("a BIGINT, s STRUCT<x: INT, y: ARRAY<STRUCT<z: STRING>>>")
    snap = create_table(str(tmp_path / "t"), schema, properties={"delta.columnMapping.mode": "id"})
    ids, names = [], []

    def walk(dt):
        for f in getattr(dt, "fields", ()):
            ids.append(f.metadata["delta.columnMapping.id"])
            names.append(f.metadata["delta.columnMapping.physicalName"])
            t = f.type
            while hasattr(t, "element_type"):
                t = t.element_type
            walk(t)
    walk(snap.schema)
    assert sorted(ids) == [1, 2, 3, 4, 5]  # a, s, s.x, s.y, s.y.element.z
    assert all(n.startswith("col-") for n in names) and len(set(names)) == 5
    assert snap.configuration["delta.columnMapping.maxColumnId"] == "5"


def test_create_metadata_and_commit(tmp_path):
    path = str(tmp_path / "t")
    snap = create_table(path, SCHEMA, ["p"], {"foo.bar": "x", "delta.appendOnly": True},
                        name="events", description="all the events")
    md = snap.metadata
    assert md.name == "events" and md.description == "all the events"
    assert md.partition_columns == ("p",) and md.configuration == {"foo.bar": "x", "delta.appendOnly": "true"}
    ci = commit_info(path, 0)
    assert ci["operation"] == "CREATE TABLE"
    assert ci["operationParameters"]["partitionBy"] == '["p"]'
    assert json.loads(ci["operationParameters"]["properties"]) == {"foo.bar": "x", "delta.appendOnly": "true"}
    lines = commit_actions(path, 0)
    assert [next(iter(a)) for a in lines] == ["commitInfo", "protocol", "metaData"]


def test_create_modes(tmp_path):
    path = str(tmp_path / "t")
    create_table(path, SCHEMA, ["p"])
    log = DeltaLog.for_table(path)
    from tahoe.txn import Transaction

    t = Transaction(log, "WRITE")
    t.add_files([fake_add("p=a/1.parquet", "a")])
    t.commit()
    with pytest.raises(InvalidTableOperationError, match="already exists"):
        create_table(path, SCHEMA)
    assert create_table(path, "x INT", mode="ignore").version == 1
    snap = create_table(path, "x INT, y STRING", mode="overwrite")
    assert snap.version == 2 and snap.schema.names == ["x", "y"] and snap.num_files == 0
    assert snap.metadata.id == log.snapshot(version=0).metadata.id
    assert commit_info(path, 2)["operation"] == "CREATE OR REPLACE TABLE"


def test_create_schema_forms(tmp_path):
    arrow = pa.schema([("a", pa.int64()), ("b", pa.string())])
    assert create_table(str(tmp_path / "a"), arrow).schema.names == ["a", "b"]
    js = StructType([StructField("a", LONG)]).to_json()
    assert create_table(str(tmp_path / "b"), js).schema.names == ["a"]
    t = Table.create(str(tmp_path / "c"), "a INT NOT NULL COMMENT 'key', m MAP<STRING, DECIMAL(10,2)>, `we ird` STRING")
    assert t.schema.field("a").nullable is False and t.schema.field("a").metadata == {"comment": "key"}
    assert t.schema.field("m").type.simple_string() == "map<string,decimal(10,2)>"
    assert t.schema.names[2] == "we ird"


# --- bad input: clear errors, nothing committed ---------------------------------------------------

def _identity_schema(type_, extra: dict | None = None) -> StructType:
    md = {"delta.identity.start": 1, "delta.identity.step": 1, "delta.identity.allowExplicitInsert": False}
    return StructType([StructField("id", type_, False, {**md, **(extra or {})}), StructField("v", LONG)])


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(properties={"delta.appendOnly": "yes"}), InvalidTableOperationError, "delta.appendOnly"),
    (dict(properties={"delta.checkpointInterval": "0"}), InvalidTableOperationError, "checkpointInterval"),
    (dict(properties={"delta.logRetentionDuration": "interval 2 months"}), InvalidTableOperationError, "logRetentionDuration"),
    (dict(properties={"delta.columnMapping.mode": "names"}), InvalidTableOperationError, "none, name, id"),
    (dict(properties={"delta.isolationLevel": "ReadCommitted"}), InvalidTableOperationError, "isolationLevel"),
    (dict(properties={"delta.noSuchThing": "1"}), InvalidTableOperationError, "delta.noSuchThing"),
    (dict(properties={"delta.feature.noSuchFeature": "supported"}), UnsupportedFeatureError, "noSuchFeature"),
    (dict(properties={"delta.feature.deletionVectors": "on"}), InvalidTableOperationError, "supported"),
    (dict(properties={"delta.constraints.c": "nope > 1"}), SchemaError, "nope"),
    (dict(partition_columns=["missing"]), SchemaError, "missing"),
    (dict(partition_columns=["s"]), SchemaError, "atomic"),
    (dict(schema="id BIGINT, ID STRING"), SchemaError, "duplicate"),
    (dict(schema="id BIGINT, s STRUCT<a: INT, A: INT>"), SchemaError, "duplicate"),
    (dict(schema="id BIGINT", partition_columns=["id"]), SchemaError, "all columns"),
    (dict(schema="id WHATEVER"), SchemaError, "WHATEVER"),
    # identity columns: delta-spark's rules
    (dict(schema=_identity_schema(STRING)), SchemaError, "identity column 'id' has type string"),
    (dict(schema=_identity_schema(LONG, {"delta.identity.step": 0})), SchemaError, "step 0"),
    (dict(schema=_identity_schema(LONG, {"delta.identity.start": "x"})), SchemaError, "not an integer"),
    (dict(schema=_identity_schema(LONG, {"delta.generationExpression": "v + 1"})), SchemaError,
     "generation expression"),
    (dict(schema=_identity_schema(LONG), partition_columns=["id"]), SchemaError, "cannot be a partition column"),
])
def test_create_bad_input(tmp_path, kwargs, exc, match):
    path = str(tmp_path / "t")
    kwargs.setdefault("schema", "id BIGINT, s STRUCT<a: INT>")
    schema = kwargs.pop("schema")
    with pytest.raises(exc, match=match):
        create_table(path, schema, **kwargs)
    assert not DeltaLog.for_table(path).exists()


@pytest.fixture
def t(tmp_path) -> Table:
    return Table.create(str(tmp_path / "t"), SCHEMA, ["p"])


@pytest.mark.parametrize("op, exc, match", [
    (lambda t: t.set_properties({"delta.enableChangeDataFeed": "maybe"}), InvalidTableOperationError, "enableChangeDataFeed"),
    (lambda t: t.set_properties({"delta.unknownKey": "1"}), InvalidTableOperationError, "delta.unknownKey"),
    (lambda t: t.set_properties({"delta.constraints.x": "v > 0"}), InvalidTableOperationError, "add_constraint"),
    (lambda t: t.set_properties({"delta.columnMapping.maxColumnId": "5"}), InvalidTableOperationError, "maintained"),
    (lambda t: t.unset_properties(["nope"]), InvalidTableOperationError, "nope"),
    (lambda t: t.add_feature("noSuchFeature"), UnsupportedFeatureError, "noSuchFeature"),
    (lambda t: t.add_constraint("c", "missing_col > 0"), SchemaError, "missing_col"),
    (lambda t: t.add_constraint("c", "v >"), InvalidTableOperationError, "parse"),
    (lambda t: t.add_constraint("c", "v > 0", validate=lambda e: 3), ConstraintViolationError, r"\[DELTA_NEW_CHECK_CONSTRAINT_VIOLATION\] 3 rows in .* violate the new CHECK constraint \(v > 0\)"),
    (lambda t: t.drop_constraint("nope", if_exists=False), InvalidTableOperationError, "nope"),
    (lambda t: t.update_schema("id STRING", merge=True), SchemaError, "id"),
    (lambda t: t.update_schema("id BIGINT, v DOUBLE", merge=False), SchemaError, "partition column"),
    (lambda t: t.rename_column("v", "w"), InvalidTableOperationError, "column mapping"),
    (lambda t: t.drop_column("v"), InvalidTableOperationError, "column mapping"),
    (lambda t: t.upgrade_protocol(3, 5), InvalidTableOperationError, "writer version 7"),
    (lambda t: t.set_properties({"delta.minWriterVersion": "9"}), InvalidTableOperationError, "minWriterVersion"),
])
def test_evolution_bad_input(t, op, exc, match):
    before = t.version
    with pytest.raises(exc, match=match):
        op(t)
    assert latest_version(t.table_root) == before


def test_lossy_schema_changes_with_data(t):
    txn = t.transaction("WRITE")
    txn.add_files([fake_add("p=a/1.parquet", "a")])
    txn.commit()
    t.refresh()
    for new, match in [("id INT, p STRING, v DOUBLE", "type of column 'id'"),
                       ("id BIGINT, p STRING", "drop column 'v'"),
                       ("id BIGINT NOT NULL, p STRING, v DOUBLE", "NOT NULL"),
                       ("id BIGINT, p STRING, v DOUBLE, w INT NOT NULL", "must be nullable")]:
        with pytest.raises(SchemaError, match=match):
            t.update_schema(new, merge=False)
    assert latest_version(t.table_root) == 1


# --- evolution that works ---------------------------------------------------------------------------

def test_set_and_unset_properties(t):
    t.set_properties({"Delta.AppendOnly": "TRUE", "owner": "me", "delta.logRetentionDuration": "interval 60 days"})
    conf = t.metadata.configuration
    assert conf["delta.appendOnly"] == "true" and conf["owner"] == "me"
    assert commit_info(t.table_root, 1)["operation"] == "SET TBLPROPERTIES"
    t.set_properties({"delta.enableChangeDataFeed": "true"})
    assert (t.protocol.min_reader_version, t.protocol.min_writer_version) == (1, 4)
    t.unset_properties(["owner", "nope"], if_exists=True)
    assert "owner" not in t.metadata.configuration
    v = t.version
    t.unset_properties(["nope"], if_exists=True)
    assert t.version == v  # nothing to change, nothing committed


def test_enable_features_later_never_removes(t):
    t.set_properties({"delta.enableChangeDataFeed": "true"})
    t.set_properties({"delta.enableDeletionVectors": "true"})
    p = t.protocol
    assert (p.min_reader_version, p.min_writer_version) == (3, 7)
    assert {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns",
            "deletionVectors"} <= set(p.writer_features)
    assert set(p.reader_features) == {"deletionVectors"}
    t.set_properties({"delta.enableDeletionVectors": "false", "delta.enableChangeDataFeed": "false"})
    assert feats(t.protocol) == feats(p)


def test_enable_column_mapping_on_existing_table(t):
    t.set_properties({"delta.columnMapping.mode": "name"})
    assert t.snapshot.supports_feature("columnMapping")
    for f in t.schema:
        assert f.metadata["delta.columnMapping.physicalName"] == f.name  # existing data stays readable
    assert t.metadata.configuration["delta.columnMapping.maxColumnId"] == "3"
    with pytest.raises(InvalidTableOperationError, match="'name' to 'id'"):
        t.set_properties({"delta.columnMapping.mode": "id"})
    with pytest.raises(InvalidTableOperationError, match="cannot be unset"):
        t.unset_properties(["delta.columnMapping.mode"])


def test_upgrade_protocol_and_add_feature(t):
    t.upgrade_protocol(writer_version=4)
    assert (t.protocol.min_reader_version, t.protocol.min_writer_version) == (1, 4)
    v = t.version
    t.upgrade_protocol(1, 1)      # lower than the table's: a no-op, as delta-spark 3+ ("downgradeIgnored")
    assert t.version == v and (t.protocol.min_reader_version, t.protocol.min_writer_version) == (1, 4)
    t.upgrade_protocol(3, 7)
    p = t.protocol
    assert (p.min_reader_version, p.min_writer_version) == (3, 7) and p.reader_features == ()
    assert set(p.writer_features) == {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns"}
    v = t.version
    t.add_feature("changeDataFeed")
    assert t.version == v  # already supported
    t.add_feature("rowtracking")  # case-insensitive, pulls in domainMetadata
    assert {"rowTracking", "domainMetadata"} <= set(t.protocol.writer_features)
    t.add_feature("deletionVectors")
    assert "deletionVectors" in t.protocol.reader_features


def test_constraints(t):
    seen = []
    t.add_constraint("Positive", "v > 0 AND id IS NOT NULL", validate=lambda e: seen.append(e) or 0)
    assert seen == ["v > 0 AND id IS NOT NULL"]
    assert t.metadata.configuration["delta.constraints.positive"] == "v > 0 AND id IS NOT NULL"
    assert t.snapshot.supports_feature("checkConstraints")
    assert commit_info(t.table_root, 1)["operationParameters"] == {"name": "Positive", "expr": "v > 0 AND id IS NOT NULL"}
    with pytest.raises(InvalidTableOperationError, match="already exists"):
        t.add_constraint("positive", "v > 1")
    t.add_constraint("nested_ok", "exists(array(1, 2), x -> x > 0) OR v IS NULL")
    t.drop_constraint("POSITIVE")
    assert "delta.constraints.positive" not in t.metadata.configuration
    v = t.version
    t.drop_constraint("positive")  # if_exists
    assert t.version == v


def test_update_schema_merge_and_replace(t):
    t.update_schema(StructType([StructField("w", STRING), StructField("ID", LONG)]), merge=True)
    assert t.schema.names == ["id", "p", "v", "w"]
    assert commit_info(t.table_root, 1)["operation"] == "UPDATE SCHEMA"
    v = t.version
    t.update_schema("id BIGINT", merge=True)  # nothing new
    assert t.version == v
    t.update_schema("p STRING, id BIGINT, v DOUBLE, w STRING, z DATE", merge=False)
    assert t.schema.names == ["p", "id", "v", "w", "z"]
    assert commit_info(t.table_root, 2)["operation"] == "REPLACE COLUMNS"


def test_column_mapping_schema_ops(tmp_path):
    t = Table.create(str(tmp_path / "cm"), SCHEMA, ["p"], {"delta.columnMapping.mode": "name"})
    phys = {f.name: f.metadata["delta.columnMapping.physicalName"] for f in t.schema}
    t.update_schema("x STRUCT<a: INT>", merge=True)
    x = t.schema.field("x")
    assert x.metadata["delta.columnMapping.id"] == 4 and x.type.fields[0].metadata["delta.columnMapping.id"] == 5
    assert t.metadata.configuration["delta.columnMapping.maxColumnId"] == "5"
    t.rename_column("v", "value")
    assert t.schema.field("value").metadata["delta.columnMapping.physicalName"] == phys["v"]
    t.rename_column("p", "part")
    assert t.partition_columns == ["part"]
    t.rename_column("x.a", "b")
    assert t.schema.field("x").type.names == ["b"]
    t.drop_column("value")
    assert "value" not in t.schema.names
    assert t.metadata.configuration["delta.columnMapping.maxColumnId"] == "5"
    t.update_schema("value DOUBLE", merge=True)  # a new column, a new id and physical name
    f = t.schema.field("value")
    assert f.metadata["delta.columnMapping.id"] == 6 and f.metadata["delta.columnMapping.physicalName"] != phys["v"]
    with pytest.raises(InvalidTableOperationError, match="partition column"):
        t.drop_column("part")
    t.add_constraint("c", "id > 0")
    with pytest.raises(InvalidTableOperationError, match="constraint"):
        t.drop_column("id")
    with pytest.raises(InvalidTableOperationError, match="constraint"):
        t.rename_column("id", "ident")
    # replace keeps the physical names of same-named columns
    t.update_schema("id BIGINT, part STRING, x STRUCT<b: INT>, value DOUBLE, extra STRING", merge=False)
    assert t.schema.field("id").metadata["delta.columnMapping.physicalName"] == phys["id"]


def test_identity_high_water_mark_op(tmp_path):
    schema = StructType([StructField("id", LONG, False, {"delta.identity.start": 10, "delta.identity.step": -2}),
                         StructField("v", STRING)])
    path = str(tmp_path / "t")
    create_table(path, schema)
    log = DeltaLog.for_table(path)
    snap = set_identity_high_water_mark(log, "id", 4)
    assert snap.version == 1 and snap.schema.field("id").metadata["delta.identity.highWaterMark"] == 4
    assert set_identity_high_water_mark(log, "id", 8).version == 1  # backwards for step -2: no-op
    with pytest.raises(SchemaError, match="not generated"):
        set_identity_high_water_mark(log, "id", 3)
    with pytest.raises(SchemaError, match="not an identity column"):
        set_identity_high_water_mark(log, "v", 3)


def test_detail(tmp_path):
    t = Table.create(str(tmp_path / "t"), SCHEMA, ["p"], {"delta.enableChangeDataFeed": "true"},
                     name="n", description="d")
    txn = t.transaction("WRITE")
    adds = [fake_add("p=a/1.parquet", "a", n=10), fake_add("p=b/2.parquet", "b", n=25)]
    txn.add_files(adds)
    txn.commit()
    d = t.refresh().detail()
    assert d["format"] == "delta" and d["name"] == "n" and d["description"] == "d"
    assert d["location"] == t.table_root and d["partitionColumns"] == ["p"]
    # sizeInBytes is the sum of the active files' `size`: fake_add gives a file 100 + n bytes
    assert d["numFiles"] == 2 and d["sizeInBytes"] == (100 + 10) + (100 + 25)
    assert d["properties"] == {"delta.enableChangeDataFeed": "true"}
    assert (d["minReaderVersion"], d["minWriterVersion"]) == (1, 4)
    assert "changeDataFeed" in d["tableFeatures"] and isinstance(d["createdAt"], int)
    assert d["lastModified"] >= d["createdAt"]


def test_property_helpers():
    assert parse_interval_ms("interval 7 days") == 7 * 86_400_000
    assert parse_interval_ms("1 day 12 hours") == 36 * 3_600_000
    assert parse_interval_ms("interval 1 week") == 7 * 86_400_000
    assert normalize_properties({"delta.autoOptimize.optimizeWrite": False, "delta.dataSkippingNumIndexedCols": 5}) == \
        {"delta.autoOptimize.optimizeWrite": "false", "delta.dataSkippingNumIndexedCols": "5"}
    for bad in ("interval 1 month", "seven days", "interval -1 day", ""):
        with pytest.raises(ValueError):
            parse_interval_ms(bad)


def test_ddl_types():
    s = parse_ddl("a TINYINT, b SMALLINT, c INT, d BIGINT, e FLOAT, f DOUBLE, g BOOLEAN, h STRING, "
                  "i VARCHAR(10), j BINARY, k DATE, l TIMESTAMP, m TIMESTAMP_NTZ, n DECIMAL(38, 18), "
                  "o ARRAY<MAP<STRING, BIGINT>>, q STRUCT<r: STRUCT<s INT>>")
    assert [f.type.simple_string() for f in s] == [
        "byte", "short", "integer", "long", "float", "double", "boolean", "string", "string", "binary",
        "date", "timestamp", "timestamp_ntz", "decimal(38,18)", "array<map<string,long>>",
        "struct<r:struct<s:integer>>"]
    assert s.field("m").type == TIMESTAMP_NTZ
    for bad in ("a", "a INT,", "a ARRAY<INT", "a INT b INT"):
        with pytest.raises(SchemaError):
            parse_ddl(bad)


def test_set_properties_by_path(tmp_path):
    path = str(tmp_path / "t")
    create_table(path, SCHEMA)
    assert set_properties(path, {"k": "v"}).configuration == {"k": "v"}
    assert unset_properties(path, ["k"]).configuration == {}
    assert add_feature(path, "appendOnly").version == 2  # already supported by (1, 2): no commit
    assert upgrade_protocol(path, writer_version=3).protocol.min_writer_version == 3
    assert add_constraint(path, "c", "id > 0").version == 4
    assert drop_constraint(path, "c").version == 5
    assert update_schema(path, "w INT").schema.names[-1] == "w"
    assert latest_version(path) == 6
    with pytest.raises(InvalidTableOperationError):
        rename_column(path, "w", "x")
    with pytest.raises(InvalidTableOperationError):
        drop_column(path, "w")


def test_rename_and_drop_under_id_mode(tmp_path):
    """delta-spark refuses RENAME / DROP COLUMN only without column mapping (`columnMappingMode ==
    NoMapping`): in id mode they are metadata-only too (the files are read by field id)."""
    t = Table.create(str(tmp_path / "idmode"), SCHEMA, properties={"delta.columnMapping.mode": "id"})
    ids = {f.name: f.metadata["delta.columnMapping.id"] for f in t.schema}
    t = t.rename_column("v", "w")
    assert t.schema.field("w").metadata["delta.columnMapping.id"] == ids["v"]
    t = t.drop_column("w")
    assert "w" not in t.schema.names and latest_version(t.table_root) == 2


def test_rename_a_partition_column_under_column_mapping(tmp_path):
    """delta-spark renames a partition column of a table holding data (the files keep their
    partition values under the column's physical name); tahoe refused it as repartitioning. The
    data stays reachable under the new name — filters and partition pruning included — new
    writes use it, and delta-rs reads the table (QueryBuilder) with the new name."""
    from tests.maintenance.helpers import delta_rs_read, rows

    path = str(tmp_path / "t")
    tahoe_write = __import__("tahoe").write_table
    tahoe_write(path, pa.table({"id": [1, 2, 3], "day": ["mon", "tue", "mon"]}), partition_by=["day"],
                properties={"delta.columnMapping.mode": "name"})
    phys_before = [sorted(dict(r).keys()) for r in Table(path).files(["partitionValues"]).column("partitionValues").to_pylist()]
    t = Table(path).rename_column("day", "weekday")
    assert t.partition_columns == ["weekday"] and t.schema.names == ["id", "weekday"]
    t = Table(path)
    assert [sorted(dict(r).keys()) for r in t.files(["partitionValues"]).column("partitionValues").to_pylist()] == phys_before
    assert sorted(r["id"] for r in t.to_arrow(filter="weekday = 'mon'").to_pylist()) == [1, 3]
    assert t.files(filter="weekday = 'mon'").num_rows == 1           # pruned by the renamed column
    ci = commit_info(path, 1)
    assert ci["operation"] == "RENAME COLUMN" and ci["operationParameters"] == {"oldColumnPath": "day",
                                                                                 "newColumnPath": "weekday"}
    tahoe_write(path, pa.table({"id": [4], "weekday": ["wed"]}), mode="append")
    want = [(1, "mon"), (2, "tue"), (3, "mon"), (4, "wed")]
    assert rows(Table(path).to_arrow(), ["id", "weekday"]) == want
    assert rows(delta_rs_read([(path, None)], tmp_path)[0], ["id", "weekday"]) == want
    # a real repartitioning is still refused on a table holding data
    from tahoe.txn import Transaction

    snap = DeltaLog.for_table(path).snapshot()
    txn = Transaction(DeltaLog.for_table(path), "WRITE", {}, snapshot=snap)
    import dataclasses

    txn.update_metadata(dataclasses.replace(snap.metadata, partition_columns=("id",)))
    with pytest.raises(InvalidTableOperationError, match="partition columns"):
        txn.commit()

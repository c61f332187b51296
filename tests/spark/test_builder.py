"""`DeltaTable.create(...)` builders with delta-spark's `addColumn` signature: generation
expressions and `IdentityGenerator` identity columns land in the column metadata the protocol
names, and arguments delta-spark refuses are refused the same way, before anything is written.
No Spark session is needed: the builder commits through tahoe's core."""

from __future__ import annotations

import pytest

from tahoe.errors import SchemaError
from tahoe.log import DeltaLog
from tahoe.protocol.table_features import writer_features_of
from tahoe.spark import DeltaTable, IdentityGenerator


def test_identity_and_generated_columns_in_delta_spark_form(tmp_path):
    path = str(tmp_path / "t")
    (DeltaTable.create().location(path)
        .addColumn("id", "BIGINT", nullable=False, generatedAlwaysAs=IdentityGenerator())
        .addColumn("seq", "BIGINT", generatedByDefaultAs=IdentityGenerator(start=-1, step=-3))
        .addColumn("x", "INT", comment="the input")
        .addColumn("y", "INT", generatedAlwaysAs="x * 2")
        .execute())
    snap = DeltaLog.for_table(path).snapshot()
    md = {f.name: f.metadata for f in snap.schema.fields}
    assert md["id"] == {"delta.identity.start": 1, "delta.identity.step": 1,
                        "delta.identity.allowExplicitInsert": False}
    assert md["seq"] == {"delta.identity.start": -1, "delta.identity.step": -3,
                         "delta.identity.allowExplicitInsert": True}
    assert md["x"] == {"comment": "the input"}
    assert md["y"] == {"delta.generationExpression": "x * 2"}
    assert not snap.schema.field("id").nullable
    # legacy writer version 6 is the lowest that has both (as delta-spark creates it)
    assert (snap.protocol.min_reader_version, snap.protocol.min_writer_version) == (1, 6)
    assert {"identityColumns", "generatedColumns"} <= writer_features_of(snap.protocol)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(generatedAlwaysAs=IdentityGenerator(), generatedByDefaultAs=IdentityGenerator()), ValueError,
     "cannot both be set"),
    (dict(generatedAlwaysAs=5), TypeError, "str or IdentityGenerator"),
    (dict(generatedByDefaultAs="x + 1"), TypeError, "must be IdentityGenerator"),
    (dict(nullable="no"), TypeError, "nullable must be bool"),
    (dict(comment=3), TypeError, "Column comment must be str"),
])
def test_add_column_refuses_what_delta_spark_refuses(tmp_path, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        DeltaTable.create().location(str(tmp_path / "t")).addColumn("id", "BIGINT", **kwargs)


def test_identity_generator_arguments():
    assert IdentityGenerator() == IdentityGenerator(1, 1)
    with pytest.raises(ValueError, match="step cannot be 0"):
        IdentityGenerator(step=0)
    with pytest.raises(TypeError, match="start must be int"):
        IdentityGenerator(start=1.5)


@pytest.mark.parametrize("type_, partition, match", [
    ("INT", False, "identity column 'id' has type int"),
    ("BIGINT", True, "cannot be a partition column"),
])
def test_identity_column_rules_leave_no_table(tmp_path, type_, partition, match):
    path = str(tmp_path / "t")
    b = (DeltaTable.create().location(path)
         .addColumn("id", type_, generatedAlwaysAs=IdentityGenerator()).addColumn("v", "STRING"))
    if partition:
        b = b.partitionedBy("id")
    with pytest.raises(SchemaError, match=match):
        b.execute()
    assert not DeltaLog.for_table(path).exists()


def _ops(path: str) -> list[str]:
    return [e.commit_info["operation"] for e in DeltaLog.for_table(path).history()][::-1]


def test_create_if_not_exists_create_or_replace_and_replace(tmp_path):
    """delta-spark's builder modes on a path table. Oracles: delta-spark's documented behaviour
    and its history operation names (DeltaOperations.CreateTable / ReplaceTable(orCreate)), the
    rows written by hand, and delta-rs reading the table after each step."""
    import pyarrow as pa

    import tahoe
    from tahoe.errors import InvalidTableOperationError, TableNotFoundError
    from tests.write.test_writer import delta_rs_rows

    path = str(tmp_path / "t")
    # createIfNotExists on nothing creates; on a table it changes nothing
    DeltaTable.createIfNotExists().location(path).addColumn("id", "BIGINT").addColumn("p", "STRING") \
        .partitionedBy("p").property("delta.appendOnly", "false").execute()
    tahoe.write_table(path, pa.table({"id": pa.array([1, 2], pa.int64()), "p": ["a", "b"]}))
    DeltaTable.createIfNotExists().location(path).addColumn("other", "STRING").execute()
    snap = DeltaLog.for_table(path).snapshot()
    assert snap.version == 1 and snap.schema.names == ["id", "p"] and snap.partition_columns == ["p"]
    assert sorted(map(tuple, (r.values() for r in tahoe.Table(path).to_arrow().to_pylist()))) == [(1, "a"), (2, "b")]
    with pytest.raises(InvalidTableOperationError, match="already exists"):
        DeltaTable.create().location(path).addColumn("id", "BIGINT").execute()

    # createOrReplace on a table: new schema, partitioning and properties, no rows, same table id
    table_id = snap.metadata.id
    DeltaTable.createOrReplace().location(path).addColumn("name", "STRING").addColumn("n", "INT") \
        .property("delta.enableChangeDataFeed", "true").comment("replaced").execute()
    snap = DeltaLog.for_table(path).snapshot()
    assert snap.version == 2 and snap.schema.names == ["name", "n"] and snap.partition_columns == []
    assert snap.metadata.id == table_id and snap.metadata.description == "replaced"
    assert snap.configuration == {"delta.enableChangeDataFeed": "true"} and snap.num_files == 0
    rs = delta_rs_rows([path], tmp_path)[path]
    assert rs.num_rows == 0 and sorted(rs.column_names) == ["n", "name"]

    # replace: an existing table only
    tahoe.write_table(path, pa.table({"name": ["x"], "n": pa.array([7], pa.int32())}))
    DeltaTable.replace().location(path).addColumn("k", "BIGINT").execute()
    snap = DeltaLog.for_table(path).snapshot()
    assert snap.version == 4 and snap.schema.names == ["k"] and snap.num_files == 0
    missing = str(tmp_path / "missing")
    with pytest.raises(TableNotFoundError, match="replace"):
        DeltaTable.replace().location(missing).addColumn("k", "BIGINT").execute()
    assert not (tmp_path / "missing" / "_delta_log").exists()

    # createOrReplace on nothing creates (delta-spark names it CREATE OR REPLACE TABLE all the same)
    fresh = str(tmp_path / "fresh")
    DeltaTable.createOrReplace().location(fresh).addColumn("a", "INT").execute()
    assert DeltaLog.for_table(fresh).snapshot().version == 0
    assert _ops(fresh) == ["CREATE OR REPLACE TABLE"]
    assert _ops(path) == ["CREATE TABLE", "WRITE", "CREATE OR REPLACE TABLE", "WRITE", "REPLACE TABLE"]

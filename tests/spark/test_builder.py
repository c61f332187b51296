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
    (dict(comment=3), TypeError, "Comment must be str"),
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

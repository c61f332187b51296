"""`tahoe create` and `tahoe set-property`: success paths and clear, non-zero failures."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from tahoe import Table
from tahoe.cli import app

runner = CliRunner()


def test_create_with_ddl_partitions_and_properties(tmp_path):
    path = str(tmp_path / "t")
    r = runner.invoke(app, ["create", path, "--schema", "id BIGINT, day DATE, v DOUBLE",
                            "--partition-by", "day", "--property", "delta.enableChangeDataFeed=true",
                            "--property", "team=data", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["partitionColumns"] == ["day"] and d["minWriterVersion"] == 4
    t = Table(path)
    assert t.schema.names == ["id", "day", "v"]
    assert t.metadata.configuration == {"delta.enableChangeDataFeed": "true", "team": "data"}


def test_create_with_json_schema(tmp_path):
    schema = json.dumps({"type": "struct", "fields": [
        {"name": "a", "type": "long", "nullable": True, "metadata": {}}]})
    r = runner.invoke(app, ["create", str(tmp_path / "t"), "--schema", schema])
    assert r.exit_code == 0, r.output
    assert "at version 0" in " ".join(r.stdout.split())


def test_set_property(tmp_path):
    path = str(tmp_path / "t")
    assert runner.invoke(app, ["create", path, "--schema", "id BIGINT"]).exit_code == 0
    r = runner.invoke(app, ["set-property", path, "delta.appendOnly=true", "owner=me"])
    assert r.exit_code == 0, r.output
    assert "committed version 1" in " ".join(r.stdout.split())
    assert Table(path).metadata.configuration == {"delta.appendOnly": "true", "owner": "me"}


def test_failures_are_clear_and_nonzero(tmp_path):
    path = str(tmp_path / "t")
    cases = [
        (["create", path, "--schema", "id NOPE"], "NOPE"),
        (["create", path, "--schema", "id BIGINT", "--property", "delta.bogus=1"], "delta.bogus"),
        (["create", path, "--schema", "id BIGINT", "--property", "novalue"], "KEY=VALUE"),
        (["create", path, "--schema", "id BIGINT", "--partition-by", "x"], "x"),
        (["set-property", str(tmp_path / "missing"), "a=b"], "TableNotFoundError"),
    ]
    for args, needle in cases:
        r = runner.invoke(app, args)
        assert r.exit_code != 0, args
        assert needle in "".join(r.output.split("\n")), (args, r.output)
    assert runner.invoke(app, ["create", path, "--schema", "id BIGINT"]).exit_code == 0
    r = runner.invoke(app, ["create", path, "--schema", "id BIGINT"])
    assert r.exit_code == 1 and "already exists" in " ".join(r.output.split())
    r = runner.invoke(app, ["set-property", path, "delta.checkpointInterval=-3"])
    assert r.exit_code == 1 and "checkpointInterval" in r.output
    assert Table(path).version == 0

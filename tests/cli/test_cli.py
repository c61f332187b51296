"""The `tahoe` CLI: describe / history / files / export over every conformance table."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tahoe.cli import app
from tests.conftest import GOLDEN, assert_rows_equal, manifest_params, read_expected

runner = CliRunner()


def _run(*args):
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.mark.parametrize("entry", manifest_params())
def test_cli_commands_on_conformance_table(entry, tmp_path):
    path = str(GOLDEN / entry["table"])
    if entry["expect"] == "error":
        r = _run("export", path, str(tmp_path / "out.parquet"))
        assert r.exit_code == 1
        assert "error:" in r.output
        return
    r = _run("files", path, "--json")
    assert r.exit_code == 0, r.output
    files = json.loads(r.stdout)
    assert files["version"] == entry["latest_version"]
    for f in files["files"]:
        assert f["path"] and f["size"] >= 0
    r = _run("history", path, "--json")
    assert r.exit_code == 0, r.output
    hist = json.loads(r.stdout)
    assert hist and hist[0]["version"] == entry["latest_version"]
    if entry["partition_columns"] is None:  # a log without metaData: describe names the problem
        r = _run("describe", path, "--json")
        assert r.exit_code == 1 and "no metaData" in r.output
        return
    r = _run("describe", path, "--json")
    if r.exit_code == 1:  # a hand-written log whose metaData lacks a schema
        assert "no schemaString" in r.output
        return
    d = json.loads(r.stdout)
    assert d["version"] == entry["latest_version"]
    assert d["protocol"]["minReaderVersion"] == entry["protocol"]["minReaderVersion"]
    assert d["partitionColumns"] == entry["partition_columns"]
    assert d["numFiles"] == len(files["files"])
    r = _run("describe", path)  # the human form renders too
    assert r.exit_code == 0 and str(entry["latest_version"]) in r.output
    if entry["expect"] == "rows":
        out = tmp_path / "out.parquet"
        r = _run("export", path, str(out))
        assert r.exit_code == 0, r.output
        assert_rows_equal(pq.read_table(out), read_expected(entry), entry["name"])


def test_time_travel_options():
    path = str(GOLDEN / "time-travel-start-start20-start40" / "delta")
    if not (GOLDEN / "time-travel-start-start20-start40").exists():
        pytest.skip("table not in this conformance set")
    r = _run("describe", path, "--version", "0", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["version"] == 0
    r = _run("describe", path, "--version", "0", "--timestamp", "2020-01-01")
    assert r.exit_code == 2
    r = _run("describe", path, "--version", "999")
    assert r.exit_code == 1 and "VersionNotFoundError" in r.output


def test_errors_go_to_stderr_with_nonzero_exit(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "tahoe", "describe", str(tmp_path / "nope")],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "not a Delta table" in proc.stderr


def test_a_path_that_is_a_file_is_one_clear_line(tmp_path):
    f = tmp_path / "a_file"
    f.write_text("x")
    for cmd in (["describe", str(f)], ["files", str(f)], ["create", str(f / "t"), "--schema", "id BIGINT"]):
        proc = subprocess.run([sys.executable, "-m", "tahoe", *cmd], capture_output=True, text=True)
        assert proc.returncode == 1, cmd
        assert proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr, proc.stderr
        assert "is a file" in proc.stderr and len(proc.stderr.strip().splitlines()) <= 2, proc.stderr


def test_export_creates_the_output_directory_or_says_why_not(tmp_path):
    import pyarrow as pa

    from tahoe.write import write_table

    root = str(tmp_path / "t")
    write_table(root, pa.table({"id": [3, 1, 2]}))
    out = tmp_path / "new" / "dir" / "rows.parquet"
    r = _run("export", root, str(out))
    assert r.exit_code == 0, r.output
    assert sorted(pq.read_table(out).column("id").to_pylist()) == [1, 2, 3]
    r = _run("export", root, str(tmp_path / "new"))          # a directory, not a file
    assert r.exit_code == 2 and "is a directory" in r.output
    (tmp_path / "blocker").write_text("x")
    r = _run("export", root, str(tmp_path / "blocker" / "rows.parquet"))
    assert r.exit_code == 1 and "error:" in r.output and "blocker" in r.output

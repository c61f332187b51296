"""The `tahoe` CLI: describe / history / files / export over every conformance table."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tahoe.cli import app
from tests.conftest import GOLDEN, assert_rows_equal, manifest_params, read_expected
from tests.fixtures.conformance_oracle import expected_error, expected_files

runner = CliRunner()


def _run(*args):
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.mark.parametrize("entry", manifest_params())
def test_cli_commands_on_conformance_table(entry, tmp_path):
    path = str(GOLDEN / entry["table"])
    if entry["expect"] == "error":
        cls, pattern = expected_error(entry)
        r = _run("export", path, str(tmp_path / "out.parquet"))
        assert r.exit_code == 1
        unwrapped = "".join(r.output.splitlines())   # the console wraps long lines
        assert re.search(rf"error: {cls.__name__}: .*{pattern}", unwrapped), r.output
        return
    r = _run("files", path, "--json")
    assert r.exit_code == 0, r.output
    files = json.loads(r.stdout)
    assert files["version"] == entry["latest_version"]
    assert {f["path"]: f["size"] for f in files["files"]} == expected_files(entry)
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


def test_time_travel_options(golden):
    path = str(golden / "time-travel-start-start20-start40" / "delta")
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


def _three_appends(root) -> tuple[str, list[dict]]:
    """A table of three appends of two rows each, commit v written at 1_700_000_000 + 10 v seconds
    (file times); returns the path and each commit's add actions as the raw JSON log holds them."""
    import os

    import pyarrow as pa

    import tahoe

    path = str(root / "t")
    for v in range(3):
        tahoe.write_table(path, pa.table({"id": pa.array([10 * v, 10 * v + 1], pa.int64())}))
    adds = []
    for v in range(3):
        log = os.path.join(path, "_delta_log", f"{v:020d}.json")
        os.utime(log, (1_700_000_000 + 10 * v,) * 2)
        with open(log) as f:
            adds.append([json.loads(line)["add"] for line in f if '"add"' in line])
    return path, adds


def test_files_and_export_at_a_version_or_timestamp(tmp_path):
    """Oracles: the add actions of the raw JSON commits, the file sizes on disk, the rows written."""
    import os

    path, adds = _three_appends(tmp_path)
    # 1700000015 s = 2023-11-14T22:13:35Z: after commit 1 (…:30), before commit 2 (…:40)
    for args, version in [(["--version", "0"], 0), (["-v", "1"], 1), (["--timestamp", "2023-11-14T22:13:35Z"], 1),
                          (["-t", "2023-11-14T22:13:40Z"], 2), ([], 2)]:
        r = _run("files", path, *args, "--json")
        assert r.exit_code == 0, r.output
        got = json.loads(r.stdout)
        assert got["version"] == version, args
        want = {a["path"]: a["size"] for c in adds[:version + 1] for a in c}
        assert {f["path"]: f["size"] for f in got["files"]} == want, args
        assert all(os.path.getsize(os.path.join(path, p)) == s for p, s in want.items())
        out = tmp_path / f"out-{version}-{len(args)}.parquet"
        r = _run("export", path, str(out), *args)
        assert r.exit_code == 0, r.output
        ids = sorted(pq.read_table(out).column("id").to_pylist())
        assert ids == sorted(i for v in range(version + 1) for i in (10 * v, 10 * v + 1)), args
    for cmd in (["files", path], ["export", path, str(tmp_path / "x.parquet")]):
        r = _run(*cmd, "--timestamp", "2023-11-14T22:13:19Z")   # before commit 0
        assert r.exit_code == 1 and "VersionNotFoundError" in r.output and "before the earliest" in " ".join(r.output.split())
        r = _run(*cmd, "--version", "3")
        assert r.exit_code == 1 and "VersionNotFoundError" in r.output
        r = _run(*cmd, "--version", "0", "--timestamp", "2023-11-14T22:13:35Z")
        assert r.exit_code == 2   # both: refused as a usage error


def test_history_limit(tmp_path):
    path, _ = _three_appends(tmp_path)
    for limit, versions in [(None, [2, 1, 0]), (1, [2]), (2, [2, 1]), (5, [2, 1, 0])]:
        r = _run("history", path, *(["--limit", str(limit)] if limit else []), "--json")
        assert r.exit_code == 0, r.output
        hist = json.loads(r.stdout)
        assert [h["version"] for h in hist] == versions, limit
        assert [h["timestamp"] for h in hist] == [(1_700_000_000 + 10 * v) * 1000 for v in versions]
        assert all(h["operation"] == "WRITE" for h in hist if h["version"] > 0)
    r = _run("history", path, "-n", "1")   # the human form honours it too
    assert r.exit_code == 0 and "WRITE" in r.output


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

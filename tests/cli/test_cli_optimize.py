"""`tahoe optimize` and `tahoe reorg`: the summary table, the JSON metrics, refusals.

Oracles: file counts derived by hand from the appends (one file per partition per append), the
files on disk, the commit JSON of the log, and the rows pyarrow reads from the parquet files."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

from tahoe.cli import app
from tahoe.write.writer import write_table
from tahoe.write.deletion_vectors import delete_rows

runner = CliRunner()


def _run(*args):
    return runner.invoke(app, list(args), catch_exceptions=False)


def _log_versions(path) -> list[str]:
    return sorted(f for f in os.listdir(path / "_delta_log") if f.endswith(".json"))


def _table(path):
    for i in range(4):   # four appends, each one file in 'a' and one in 'b' (8 x 10 rows)
        write_table(str(path), pa.table({"id": list(range(i * 10, i * 10 + 10)), "day": ["a", "b"] * 5}),
                    partition_by=["day"], mode="append", properties={"delta.enableDeletionVectors": "true"})


def test_optimize_and_reorg_commands(tmp_path):
    path = tmp_path / "t"
    _table(path)
    sizes_a = [os.path.getsize(p) for p in (path / "day=a").glob("*.parquet")]
    assert len(sizes_a) == 4

    r = _run("optimize", str(path), "--where", "day = 'a'")
    assert r.exit_code == 0, r.output
    assert "OPTIMIZE: version 4" in r.output
    removed = next(line for line in r.output.splitlines() if "removed" in line)
    assert removed.split("│")[2].strip() == "4"          # files column
    added = next(line for line in r.output.splitlines() if "added" in line)
    assert added.split("│")[2].strip() == "1"
    assert "1 partition(s), 4 file(s) considered, 0 kept" in r.output

    r = _run("optimize", str(path), "--json")             # the rest: partition 'b'
    assert r.exit_code == 0, r.output
    m = json.loads(r.stdout)
    assert (m["numFilesRemoved"], m["numFilesAdded"], m["partitionsOptimized"], m["version"]) == (4, 1, 1, 5)
    assert m["totalConsideredFiles"] == 5 and m["totalFilesSkipped"] == 1   # the 'a' file of the last run

    r = _run("optimize", str(path))                       # nothing left: no commit
    assert r.exit_code == 0 and "nothing to rewrite: the table stays at version 5" in r.output
    assert len(_log_versions(path)) == 6

    # --zorder-by with a 100-byte target: each partition's one ~600-byte file cut into several
    r = _run("optimize", str(path), "--zorder-by", "id", "--target-size", "100", "--json")
    assert r.exit_code == 0, r.output
    m = json.loads(r.stdout)
    assert m["numFilesRemoved"] == 2 and m["numFilesAdded"] > 2 and m["version"] == 6
    commit = [json.loads(x) for x in (path / "_delta_log" / _log_versions(path)[-1]).read_text().splitlines()]
    info = next(a["commitInfo"] for a in commit if "commitInfo" in a)
    assert info["operation"] == "OPTIMIZE" and json.loads(info["operationParameters"]["zOrderBy"]) == ["id"]

    # REORG --purge: the deleted rows physically gone
    target = next(p for p in path.rglob("*.parquet") if p.name in
                  {a["add"]["path"].split("/")[-1] for a in commit if "add" in a})
    rel = str(target.relative_to(path))
    n = pq.read_table(target).num_rows
    delete_rows(str(path), {rel: [0]})
    r = _run("reorg", str(path), "--purge", "--json")
    assert r.exit_code == 0, r.output
    m = json.loads(r.stdout)
    assert (m["numFilesRemoved"], m["numFilesAdded"]) == (1, 1)
    assert m["deletionVectorStats"] == {"numDeletionVectorsRemoved": 1, "numDeletionVectorRowsRemoved": 1}
    commit = [json.loads(x) for x in (path / "_delta_log" / _log_versions(path)[-1]).read_text().splitlines()]
    assert next(a["commitInfo"] for a in commit if "commitInfo" in a)["operation"] == "REORG"
    add = next(a["add"] for a in commit if "add" in a)
    assert pq.read_table(path / add["path"]).num_rows == n - 1
    ids = sorted(i for p in path.rglob("*.parquet") for i in pq.read_table(p).column("id").to_pylist()
                 if str(p.relative_to(path)) in _active(path))
    assert ids == sorted(set(range(40)) - {pq.read_table(target).column("id")[0].as_py()})


def _active(path) -> set[str]:
    import tahoe

    return set(tahoe.Table(str(path)).files(["path"]).column("path").to_pylist())


def test_refusals_change_nothing(tmp_path):
    path = tmp_path / "t"
    _table(path)
    before = _log_versions(path)
    for args, code, text in [
        (["optimize", str(path), "--where", "id > 3"], 1, "DELTA_NON_PARTITION_COLUMN_REFERENCE"),
        (["optimize", str(path), "--zorder-by", "day"], 1, "DELTA_ZORDERING_ON_PARTITION_COLUMN"),
        (["optimize", str(path), "--target-size", "big"], 2, "--target-size must be a size in bytes"),
        (["optimize", str(path), "--max-concurrent-tasks", "0"], 2, "--max-concurrent-tasks must be >= 1"),
        (["reorg", str(path)], 2, "give --purge"),
        (["optimize", str(tmp_path / "missing")], 1, "error:"),
    ]:
        r = _run(*args)
        assert r.exit_code == code, (args, r.output)
        assert text in "".join(r.output.splitlines()), (args, r.output)
    assert _log_versions(path) == before

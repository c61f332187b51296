"""What a fresh process imports: `import tahoe` stays light, and `tahoe describe` of a table that
keeps version checksums answers from the `.crc` without the Arrow stack (issue 18, "Import").

tahoe imports at module top, except where these checks need an import inside a function:
  1. `import tahoe`, `import tahoe.cli`: the package facade and the command line (`cli.py`,
     `sharing/cli.py`) import each command's modules when it runs;
  2. `tahoe describe`: the log core reads a `.crc` without Arrow (`log/snapshot.py`, `log/crc.py`,
     `protocol/schema.py`'s variant types, `storage/__init__.py`'s object stores);
  3. PySpark's discovery of the `delta` source and the first wrapped PySpark call, which every Spark
     session of the environment makes (`spark/datasource.py`, `spark/options.py`, `spark/scan.py`,
     `spark/session.py`, the patch layer's `spark/calls.py`, `spark/surfacing.py`, `spark/sql/`):
     no Arrow, no log core;
  4. a transaction or a write loads Avro only for UniForm tables (`uniform/__init__.py`,
     `txn/post_commit.py`);
  5. a file listing (`Table(p).files()`, `files_reader()`; timed whole-process against delta-rs by
     bench/replay) imports the log core and the file planner only — no transaction, writer,
     expression or maintenance module, no pyarrow.compute, no pandas (`table.py`, `read/scan.py`,
     `log/compute.py`, `log/last_checkpoint.py`'s checksum);
  6. `sharing/official_client.py` also runs as a script in the recipient's environment (the official
     client's own venv, without tahoe): nothing of tahoe at its top (test below).

A behavioural guard, not a timing: each check runs in its own interpreter and reads that
interpreter's `sys.modules`. The oracle for describe's figures is the table directory itself (its
parquet files counted and sized with `os`), for its schema the schema that was written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

import tahoe

HEAVY = ["pyarrow", "numpy", "pandas", "sqlglot", "fastapi", "starlette", "uvicorn", "boto3", "botocore",
         "pyspark", "pydantic", "pyroaring", "yaml", "httpx", "fastavro"]


def _python(code: str, **env: str) -> str:
    e = {**os.environ, **env}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _loaded(after: str, **env: str) -> set[str]:
    out = _python(after + f"\nimport sys, json\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))",
                  **env)
    return set(json.loads(out.strip().splitlines()[-1]))


def test_import_tahoe_imports_no_heavy_dependency():
    assert _loaded("import tahoe") == set()


def test_cli_module_and_version_import_no_heavy_dependency():
    # the console script's module, and `tahoe --version`
    assert _loaded("import tahoe.cli") == set()
    assert _loaded("import tahoe.cli\ntry:\n    tahoe.cli.app(['--version'])\nexcept SystemExit:\n    pass") == set()


def test_describe_answers_from_the_checksum_without_arrow(tmp_path):
    path = tmp_path / "t"
    for i in range(3):
        tahoe.write_table(str(path), pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64()),
                                               "part": pa.array([f"p{j % 2}" for j in range(10)])}),
                          mode="append", partition_by=["part"])
    assert (path / "_delta_log" / "00000000000000000002.crc").exists()
    code = ("import tahoe.cli\n"
            "try:\n"
            f"    tahoe.cli.app(['describe', {str(path)!r}, '--json'])\n"
            "except SystemExit as e:\n"
            "    assert not e.code, e.code\n")
    # the suite's strict checksum validation replays the log (and needs Arrow): off here, as users run
    assert _loaded(code, TAHOE_VALIDATE_CHECKSUMS="off") == set()
    out = _python(code, TAHOE_VALIDATE_CHECKSUMS="off")
    d = json.loads(out[:out.rindex("}") + 1])
    data = [p for p in path.rglob("*.parquet")]
    assert d["version"] == 2
    assert d["numFiles"] == len(data) == 6
    assert d["sizeInBytes"] == sum(os.path.getsize(p) for p in data)
    assert d["partitionColumns"] == ["part"]
    assert [(f["name"], f["type"]) for f in d["schema"]["fields"]] == [("id", "long"), ("part", "string")]


def test_describe_without_a_checksum_replays_the_log(tmp_path):
    path = tmp_path / "t"
    for i in range(2):
        tahoe.write_table(str(path), pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    for crc in (path / "_delta_log").glob("*.crc"):
        crc.unlink()
    code = ("import tahoe.cli\n"
            "try:\n"
            f"    tahoe.cli.app(['describe', {str(path)!r}, '--json'])\n"
            "except SystemExit as e:\n"
            "    assert not e.code, e.code\n")
    out = _python(code, TAHOE_VALIDATE_CHECKSUMS="off")
    d = json.loads(out[:out.rindex("}") + 1])
    data = list(path.glob("*.parquet"))
    assert d["version"] == 1
    assert d["numFiles"] == len(data) == 2
    assert d["sizeInBytes"] == sum(os.path.getsize(p) for p in data)


def test_spark_discovery_and_the_patch_layer_import_no_arrow():
    """Rule 3: what every Spark session loads — the `delta` source's discovery module and the
    behaviours behind tahoe's wrappers of PySpark's calls — stays free of Arrow and the log core."""
    code = ("import pyspark_tahoe_delta, tahoe.spark.calls, tahoe.spark.surfacing, tahoe.spark.sql.hooks, "
            "tahoe.spark.session")
    assert _loaded(code) - {"pyspark"} == set()
    out = _python(code + "\nimport sys\nprint(sorted(m for m in sys.modules if m.startswith('tahoe.log')))")
    assert out.strip().splitlines()[-1] == "[]"


def test_transactions_and_writes_load_avro_only_for_uniform():
    """Rule 4."""
    out = _python("import sys, tahoe.txn, tahoe.write\nprint('fastavro' in sys.modules)\n"
                  "from tahoe.uniform import sync_iceberg\nprint('fastavro' in sys.modules)")
    assert out.split() == ["False", "True"]


def test_a_file_listing_imports_neither_pyarrow_compute_nor_pandas(tmp_path):
    """`tahoe.Table(p).files()` (and its streamed form) of a table of large JSON commits and of a
    table with a checkpoint: pyarrow's compute wrappers (~300 of them, built on import) and pandas
    are not imported; the listing's rows are the ones written."""
    import pyarrow.compute  # noqa: F401 - (this process's own imports do not matter: each check runs in its own)

    json_path, cp_path = tmp_path / "json", tmp_path / "cp"
    rows = pa.table({"id": pa.array(range(4000), pa.int64()), "part": pa.array([f"p{i % 3}" for i in range(4000)])})
    tahoe.write_table(str(json_path), rows, partition_by=["part"], target_file_rows=1,
                      properties={"tahoe.checkpoint.jsonSizeThreshold": "0"})   # one JSON commit of 4,000 adds
    assert (json_path / "_delta_log" / "00000000000000000000.json").stat().st_size > 1 << 20
    tahoe.write_table(str(cp_path), rows.slice(0, 10), partition_by=["part"])
    for i in range(11):   # a checkpoint at version 10, one commit after it
        tahoe.write_table(str(cp_path), rows.slice(10 + i, 1), mode="append")
    assert list((cp_path / "_delta_log").glob("*.checkpoint.parquet"))
    for path in (json_path, cp_path):
        n = len([f for f in path.rglob("*.parquet") if "_delta_log" not in f.parts])   # appends only: all active
        code = (f"import tahoe\nt = tahoe.Table({str(path)!r})\nassert t.files().num_rows == {n}\n"
                f"assert sum(b.num_rows for b in t.files_reader(['path'])) == {n}")
        assert _loaded(code, TAHOE_VALIDATE_CHECKSUMS="off") == {"pyarrow", "numpy"}
        out = _python(code + "\nimport sys\nprint(sorted(m for m in sys.modules if m in ('pyarrow.compute', 'pandas')))",
                      TAHOE_VALIDATE_CHECKSUMS="off")
        assert out.strip().splitlines()[-1] == "[]", (path, out)


def test_the_official_client_driver_runs_as_a_plain_script(tmp_path):
    """The driver the tests and the demo start in the official client's environment is run by
    path, not as a package module: it must import nothing of tahoe at its top."""
    from tahoe.sharing import official_client

    r = subprocess.run([sys.executable, "-c", "import runpy, sys; sys.argv = ['x', '--check-imports'];"
                        f"runpy.run_path({official_client.__file__!r}, run_name='not_main')"],
                       capture_output=True, text=True, timeout=60, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr

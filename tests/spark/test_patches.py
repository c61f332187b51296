"""tahoe's one patch layer over PySpark (`tahoe.spark.patches`) and its start-up hook.

Oracles: which function sits on PySpark's classes (read back from the classes), call counters
kept by third-party-style wrappers, rows derived by hand, and Spark's own refusal of a
`format("delta")` write with the default save mode when tahoe's wrappers are off. Wrappers
installed before tahoe's need a process where tahoe's are not in yet: those run in subprocesses
(`TAHOE_PYSPARK_HOOK=0`); Spark Connect drivers use the shared server (tests/fixtures/connect.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

REPO = Path(__file__).resolve().parents[2]


def _run(code: str, timeout: int = 300, **env: str) -> str:
    e = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable, **env}
    e.pop("SPARK_CONNECT_MODE_ENABLED", None)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=timeout, env=e, cwd=str(REPO))
    errors = "\n".join(ln for ln in r.stderr.splitlines() if not ln.startswith(("\tat ", "\t...")))
    assert r.returncode == 0 and "TAHOE-OK" in r.stdout, (r.returncode, r.stdout[-2000:], errors[-4000:])
    return r.stdout


def test_every_listed_method_is_wrapped_on_classic_and_connect():
    import importlib

    import pyspark.sql.connect.session  # noqa: F401 - Spark Connect's classes imported (the finder wraps them)
    from tahoe.spark import patches

    patches.install()
    assert patches.missing() == []
    for p in patches.PATCHES:
        for module in filter(None, patches.MODULES[p.cls]):
            cls = getattr(importlib.import_module(module), p.cls)
            assert (cls, p.method) in patches.installed(), (module, p.cls, p.method)
            fn = cls.__dict__[p.method]
            while getattr(fn, "__tahoe_patch__", None) is None:   # another library's wrapper on top, if any
                fn = fn.__wrapped__
            assert fn.__tahoe_patch__ == p.behaviour
            # the behaviour exists: a typo in the list would fail only at the first call otherwise
            mod, attr = p.behaviour.split(":")
            assert callable(getattr(importlib.import_module(mod), attr))


def test_install_is_idempotent_with_another_wrapper_on_top():
    _run("""
        import functools
        from pyspark.sql.readwriter import DataFrameReader
        original = DataFrameReader.__dict__["load"]
        from tahoe.spark import patches
        patches.install()
        ours = DataFrameReader.__dict__["load"]
        assert ours.__wrapped__ is original and ours.__tahoe_patch__ == "tahoe.spark.calls:batch_load"

        @functools.wraps(ours)
        def theirs(self, *a, **k):
            return ours(self, *a, **k)
        DataFrameReader.load = theirs
        patches.install(); patches.install()
        import tahoe.spark                           # installs again: nothing added
        assert DataFrameReader.__dict__["load"] is theirs
        print("TAHOE-OK")
    """, TAHOE_PYSPARK_HOOK="0")


# A third-party library's wrappers: `before` is installed before tahoe's (tahoe's wraps it),
# `after` after (it wraps tahoe's). Each counts its calls; tahoe's work shows in the write's
# default save mode (ErrorIfExists, which Spark refuses for a Python data source) and partitionBy.
_THIRD_PARTY = """
import functools, sys
CALLS = {}
def wrap(cls, name, tag):
    inner = cls.__dict__[name]
    @functools.wraps(inner)
    def wrapper(self, *args, **kwargs):
        CALLS[(tag, name)] = CALLS.get((tag, name), 0) + 1
        return inner(self, *args, **kwargs)
    setattr(cls, name, wrapper)
def round_trip(spark, path):
    CALLS.clear()
    df = spark.createDataFrame([(1, "a"), (2, "b")], "id BIGINT, p STRING")
    df.write.format("delta").partitionBy("p").save(path)          # default mode: tahoe's wrapper maps it
    rows = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
    assert rows == [(1, "a"), (2, "b")], rows
    from tahoe.log import DeltaLog
    assert list(DeltaLog.for_table(path).snapshot().metadata.partition_columns) == ["p"]
    return dict(CALLS)
"""


def _before_and_after(session_code: str, module: str, path: str) -> None:
    _run(_THIRD_PARTY + textwrap.dedent(f"""
        from {module} import DataFrameReader, DataFrameWriter
        for cls, name in ((DataFrameReader, "load"), (DataFrameWriter, "save")):
            wrap(cls, name, "before")
        assert "tahoe" not in sys.modules
        import tahoe.spark                                             # tahoe's wrappers go on top
        for cls, name in ((DataFrameReader, "load"), (DataFrameWriter, "save")):
            wrap(cls, name, "after")
        {session_code}
        calls = round_trip(spark, {path!r})
        assert calls == {{("before", "save"): 1, ("after", "save"): 1, ("before", "load"): 1,
                          ("after", "load"): 1}}, calls
        print("TAHOE-OK")
    """), TAHOE_PYSPARK_HOOK="0")


def test_third_party_wrappers_before_and_after_tahoes_classic(tmp_path):
    # on classic Spark a batch read of a local table is tahoe's native parquet scan, which replaces
    # the load below tahoe's wrapper (README: a wrapper installed before tahoe's does not see those
    # reads); through the data source (nativeScan off) the load goes down the whole chain
    _before_and_after("""
        from tahoe.spark import local_session
        spark = local_session("local[1]", quick_start=True)
        spark.conf.set("spark.tahoe.read.nativeScan", "false")
    """, "pyspark.sql.readwriter", str(tmp_path / "t"))


def test_third_party_wrappers_before_and_after_tahoes_connect(connect_server, tmp_path):
    _before_and_after(f"""
        from pyspark.sql import SparkSession
        spark = SparkSession.builder.remote({connect_server!r}).getOrCreate()
    """, "pyspark.sql.connect.readwriter", str(tmp_path / "t"))


def test_start_up_hook_with_a_wrapper_put_on_before_the_first_call(connect_server, tmp_path):
    """The start-up hook installed tahoe's wrappers when PySpark was imported; a library then wraps
    load/save before the first call (once a RecursionError): both run, once each."""
    _run(_THIRD_PARTY + textwrap.dedent(f"""
        from pyspark.sql.connect.readwriter import DataFrameReader, DataFrameWriter
        assert DataFrameReader.__dict__["load"].__tahoe_patch__ == "tahoe.spark.calls:batch_load"
        assert "tahoe.spark.calls" not in sys.modules                  # behaviours come at the first call
        for cls, name in ((DataFrameReader, "load"), (DataFrameWriter, "save")):
            wrap(cls, name, "after")
        from pyspark.sql import SparkSession
        spark = SparkSession.builder.remote({connect_server!r}).getOrCreate()
        calls = round_trip(spark, {str(tmp_path / "t")!r})
        assert calls == {{("after", "save"): 1, ("after", "load"): 1}}, calls
        print("TAHOE-OK")
    """), TAHOE_PYSPARK_HOOK="1")


def test_the_start_up_hook_stays_out_of_processes_without_pyspark_and_can_be_turned_off():
    out = _run("""
        import sys, json
        print(json.dumps(["tahoe" in sys.modules, "pyspark" in sys.modules])); print("TAHOE-OK")
    """, TAHOE_PYSPARK_HOOK="1")
    assert out.splitlines()[0] == "[false, false]"
    out = _run("""
        import sys
        from pyspark.sql.readwriter import DataFrameWriter
        print(hasattr(DataFrameWriter.save, "__tahoe_patch__"), "tahoe" in sys.modules); print("TAHOE-OK")
    """, TAHOE_PYSPARK_HOOK="0")
    assert out.splitlines()[0] == "False False"


def test_disable_hands_every_call_to_pyspark(spark, tmp_path):
    from pyspark.errors import AnalysisException

    from tahoe.spark import patches

    df = spark.createDataFrame([(1,)], "id BIGINT")
    patches.disable()
    try:
        with pytest.raises(AnalysisException, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
            df.write.format("delta").save(str(tmp_path / "off"))      # Spark's own refusal, as without tahoe
    finally:
        patches.enable()
    df.write.format("delta").save(str(tmp_path / "on"))
    assert [tuple(r) for r in spark.read.format("delta").load(str(tmp_path / "on")).collect()] == [(1,)]


def test_delta_reads_writes_and_merges_from_worker_threads(spark, tmp_path):
    """Pipelines that ingest several tables at once (`multiprocessing.pool.ThreadPool`): each
    worker thread writes with format("delta"), MERGEs and reads back — Spark looks `delta` up in
    the thread's active session, which a worker thread does not have (DATA_SOURCE_NOT_FOUND before).
    Oracle: rows derived by hand (0..4 merged with 3..7, matches deleted: 0, 1, 2, 5, 6, 7)."""
    from multiprocessing.pool import ThreadPool

    from tahoe.spark import DeltaTable

    def job(i: int) -> list[int]:
        path = str(tmp_path / f"t{i}")
        spark.range(5).write.format("delta").save(path)
        DeltaTable.forPath(spark, path).alias("t").merge(spark.range(3, 8).alias("s"), "t.id = s.id") \
            .whenMatchedDelete().whenNotMatchedInsertAll().execute()
        return sorted(r.id for r in spark.read.format("delta").load(path).collect())

    with ThreadPool(3) as pool:
        assert pool.map(job, range(3)) == [[0, 1, 2, 5, 6, 7]] * 3


def test_the_readme_lists_exactly_what_is_patched():
    import re

    from tahoe.spark import patches

    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("### What tahoe changes in PySpark"):readme.index("### From delta-spark")]
    listed = {}
    for cls, methods in re.findall(r"^\| `(\w+)` \| (.+) \|$", section, re.M):
        listed[cls] = re.findall(r"`(\w+)`", methods)
    want: dict[str, list[str]] = {}
    for p in patches.PATCHES:
        want.setdefault(p.cls, []).append(p.method)
    assert listed == want

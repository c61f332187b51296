"""tahoe's `.pth` hook (`_tahoe_pyspark_hook`): in a process that never imports tahoe, PySpark's
reader/writer methods carry shims from their import on, and the first call installs tahoe's
wrappers (`tahoe.spark.calls`); processes that never call them never import tahoe; the hook can be
turned off. Oracles: the methods' markers and `sys.modules` in fresh interpreters (the end-to-end
effect — partitionBy honoured in a fresh Spark process — is in test_streaming.py's pipeline)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str, **env) -> str:
    import os

    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, **env})
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.strip()


def test_the_hook_shims_pyspark_and_installs_the_wrappers_at_the_first_call():
    out = _run("""
        import sys
        assert any(type(f).__name__ == "_Finder" for f in sys.meta_path)
        from pyspark.sql.readwriter import DataFrameReader, DataFrameWriter
        from pyspark.sql.streaming.readwriter import DataStreamWriter
        assert DataStreamWriter.partitionBy._tahoe_shim and DataFrameWriter.save._tahoe_shim
        assert "tahoe" not in sys.modules                       # imported PySpark: not tahoe yet
        w = DataFrameWriter.__new__(DataFrameWriter)            # a writer without a session
        try:
            w.partitionBy("p")                                  # the first call: tahoe's wrappers go in
        except Exception:
            pass                                                # (no JVM writer behind it)
        assert "tahoe.spark" in sys.modules
        for cls, name in ((DataFrameWriter, "partitionBy"), (DataFrameWriter, "save"), (DataStreamWriter, "start"),
                          (DataFrameReader, "option"), (DataFrameReader, "load")):
            m = cls.__dict__[name]
            assert getattr(m, "_tahoe_calls", False) and not getattr(m, "_tahoe_shim", False), (cls, name)
        print("OK")
    """)
    assert out == "OK"


def test_importing_tahoe_first_takes_the_shims_off_and_the_hook_can_be_turned_off():
    out = _run("""
        import sys
        import pyspark.sql
        import tahoe.spark
        from pyspark.sql.readwriter import DataFrameWriter
        m = DataFrameWriter.__dict__["partitionBy"]
        assert m._tahoe_calls and not getattr(m, "_tahoe_shim", False)
        print("OK")
    """)
    assert out == "OK"
    out = _run("""
        import sys
        from pyspark.sql.streaming.readwriter import DataStreamWriter
        print(getattr(DataStreamWriter.partitionBy, "_tahoe_shim", False), "tahoe" in sys.modules)
    """, TAHOE_PYSPARK_HOOK="0")
    assert out == "False False"

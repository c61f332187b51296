"""A standalone Spark cluster on 127.0.0.1 for a bench (and tests/spark/test_clusters.py): one master and one worker (their own JVMs,
executors with their own Python workers), started from the `spark-class` that ships with pyspark
and stopped when the `with` block ends.

    with standalone_cluster(cores=2, memory="4g") as master_url:
        spark = local_session(master_url, "bench", extra={"spark.cores.max": "2"})
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, timeout: float = 120) -> None:
    end = time.time() + timeout
    while time.time() < end:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.3)
    raise SystemExit(f"the standalone master did not listen on 127.0.0.1:{port} within {timeout:.0f} s")


@contextlib.contextmanager
def standalone_cluster(cores: int = 2, memory: str = "4g", env: dict | None = None):
    """Yield the master's URL (`spark://127.0.0.1:<port>`) of a running master + worker; the
    worker offers `cores` and `memory`, its executors' Python workers run this interpreter
    (tahoe is installed in it, so the nodes find the `delta` source by themselves). `env`: the
    daemons' environment instead of this one's with Spark's settings (logs in a temporary folder)."""
    import pyspark

    home = os.path.dirname(pyspark.__file__)
    if env is None:
        work = tempfile.mkdtemp(prefix="tahoe-bench-cluster-")
        env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
                   PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_HOME=home, SPARK_NO_DAEMONIZE="1",
                   SPARK_LOG_DIR=os.path.join(work, "logs"), SPARK_WORKER_DIR=os.path.join(work, "work"))
    spark_class = os.path.join(home, "bin", "spark-class")
    port = _free_port()
    procs = []
    try:
        procs.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(_free_port())], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True))
        _wait_port(port)
        procs.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}", "--host",
             "127.0.0.1", "--cores", str(cores), "--memory", memory, "--webui-port", str(_free_port())],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        yield f"spark://127.0.0.1:{port}"
    finally:
        for p in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)

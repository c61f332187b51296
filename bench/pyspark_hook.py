"""What tahoe's start-up hook (`tahoe-pyspark-hook.pth` -> `_tahoe_pyspark_hook`) costs a process,
measured against the same process with the hook off (`TAHOE_PYSPARK_HOOK=0`) in the same run.

    python -m bench.pyspark_hook              # median of 15 alternating runs per command
    python -m bench.pyspark_hook --runs 31

Timed, each a whole `python` process (CPU = user + sys of the child, wall beside it):
  - start:    python -c pass                           (every Python process of the environment)
  - pyspark:  python -c "import pyspark.sql"           (the hook installs tahoe.spark.patches here)
  - connect:  python -c "import pyspark.sql.connect.session"

Measured 2026-11-29 05:10 (2 cores shared, load 11; medians of 15; wall / CPU of the child):
  start    hook on 0.037 s / 0.011 s   off 0.035 s / 0.011 s   CPU ratio 0.95 (noise: no cost seen)
  pyspark  hook on 0.378 s / 0.120 s   off 0.386 s / 0.116 s   CPU ratio 1.03 (+4 ms: tahoe.spark.patches)
  connect  hook on 1.872 s / 0.573 s   off 1.743 s / 0.563 s   CPU ratio 1.02
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "start": "pass",
    "pyspark": "import pyspark.sql",
    "connect": "import pyspark.sql.connect.session",
}


def _time(code: str, hook: str) -> tuple[float, float]:
    env = {**os.environ, "TAHOE_PYSPARK_HOOK": hook}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    for name, code in COMMANDS.items():
        _time(code, "1")   # warm the page cache and the byte code
        on, off = [], []
        for _ in range(args.runs):
            on.append(_time(code, "1"))
            off.append(_time(code, "0"))
        w_on, c_on = statistics.median(w for w, _ in on), statistics.median(c for _, c in on)
        w_off, c_off = statistics.median(w for w, _ in off), statistics.median(c for _, c in off)
        print(f"{name:8s} hook on {w_on:.3f} s / cpu {c_on:.3f} s   off {w_off:.3f} s / cpu {c_off:.3f} s   "
              f"ratio (cpu) {c_on / c_off:.3f}")


if __name__ == "__main__":
    main()

"""Process start as users time it: `import tahoe`, opening a small table, `tahoe describe`, each a
whole `python` process, tahoe beside delta-rs in the same run (issue 18, "Import").

    python -m bench.startup               # median of 7 alternating runs per command
    python -m bench.startup --runs 11

The package is byte-compiled first (`compileall`), as `pip install` leaves it: with an editable
install and PYTHONDONTWRITEBYTECODE set, every run would otherwise compile tahoe's sources again
and time the compiler. Wall time is quoted with CPU time (user + sys of the child) beside it: on a
shared machine the wall time carries the load, the CPU time much less.

Timed (the small table: 3 appends of 100 rows, partitioned, built here once):
  - import:     python -c "import tahoe"                      vs  python -c "import deltalake"
                target: tahoe <= 0.15 s
  - open:       python -c "import tahoe; t = tahoe.Table(p); t.version; t.schema"
                vs  python -c "import deltalake; t = deltalake.DeltaTable(p); t.version(); t.schema()"
  - files:      python -c "import tahoe; tahoe.Table(p).files()"
                vs  python -c "import deltalake; deltalake.DeltaTable(p).file_uris()"
  - describe:   tahoe describe p  (console script)           vs  the `open` command of delta-rs plus
                its metadata(), protocol() and files: what `tahoe describe` shows
                target: tahoe describe <= 0.4 s

Measured 2026-11-27 (load 2.2): import 0.018 s (delta-rs 0.041 s), describe 0.109 s (targets
  <= 0.15 s and <= 0.4 s met); open + files 0.17-0.18 s against delta-rs's 0.05 s (no target).
Measured (2-core machine shared with other sessions; wall, with CPU = user + sys of the process):
  before (main, load 6):   describe 0.433 s (cpu 0.400): typer 0.29 imports pydantic for every
                           command's parameters, and the table was replayed with pyarrow
  after (load 5, by hand): describe 0.14-0.18 s (cpu 0.13-0.14), --version / --help 0.09-0.10 s;
                           `import tahoe` 0.02 s
  after (this script, load 7.4):  import 0.016 s (cpu 0.016); describe 0.149 s (cpu 0.118),
                           delta-rs's open + metadata + files 0.058 s
  after (this script, load 16.7): import 0.084 s (cpu 0.024); describe 0.562 s (cpu 0.160) —
                           the wall time at that load is mostly waiting for a core
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

DATA = Path(__file__).resolve().parent / ".data"
ROOT = Path(__file__).resolve().parent.parent

EXIT = "; import sys, os; sys.stdout.flush(); os._exit(0)"    # delta-rs can abort in interpreter teardown
PY = sys.executable
TAHOE_CLI = str(Path(PY).with_name("tahoe"))


def compile_tahoe() -> None:
    """Byte-compile the tahoe package, as an installed wheel is."""
    compileall.compile_dir(str(ROOT / "tahoe"), quiet=1)


def build_small(path: Path) -> None:
    if (path / "_delta_log" / "_bench_complete").exists():
        return
    import shutil

    import pyarrow as pa

    import tahoe

    shutil.rmtree(path, ignore_errors=True)
    for i in range(3):
        t = pa.table({"id": pa.array(range(i * 100, i * 100 + 100), pa.int64()),
                      "name": pa.array([f"n{j}" for j in range(100)]),
                      "part": pa.array([f"p{j % 4}" for j in range(100)])})
        tahoe.write_table(str(path), t, mode="append", partition_by=["part"])
    (path / "_delta_log" / "_bench_complete").write_text("ok")


def run_once(argv: list[str]) -> tuple[float, float]:
    """(wall s, cpu s of the child) of one process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{argv} failed: {err[-2000:]}")
    return wall, ru.ru_utime + ru.ru_stime


def side_by_side(a: list[str], b: list[str], runs: int) -> dict:
    """Median wall and CPU of each command over `runs` alternating runs (after one warm-up each);
    ratio = median of the per-pair wall ratios."""
    run_once(a)
    run_once(b)
    got: dict[str, list] = {"tahoe": [], "ref": []}
    for _ in range(runs):
        got["tahoe"].append(run_once(a))
        got["ref"].append(run_once(b))
    out = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in got.items()}
    out["ratio"] = statistics.median(x[0] / y[0] for x, y in zip(got["tahoe"], got["ref"]))
    out["cpu_ratio"] = statistics.median(x[1] / y[1] for x, y in zip(got["tahoe"], got["ref"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7, help="runs per command (median quoted)")
    args = ap.parse_args()
    compile_tahoe()
    DATA.mkdir(parents=True, exist_ok=True)
    small = DATA / "startup_small"
    build_small(small)
    p = str(small)
    cases = [
        ("import", [PY, "-c", "import tahoe"], [PY, "-c", "import deltalake" + EXIT], "<= 0.15 s"),
        ("open", [PY, "-c", f"import tahoe; t = tahoe.Table({p!r}); t.version; t.schema"],
         [PY, "-c", f"import deltalake; t = deltalake.DeltaTable({p!r}); t.version(); t.schema()" + EXIT], ""),
        ("files", [PY, "-c", f"import tahoe; tahoe.Table({p!r}).files()"],
         [PY, "-c", f"import deltalake; deltalake.DeltaTable({p!r}).file_uris()" + EXIT], ""),
        ("describe", [TAHOE_CLI, "describe", p],
         [PY, "-c", f"import deltalake; t = deltalake.DeltaTable({p!r}); t.version(); t.schema(); t.metadata(); "
                    f"t.protocol(); t.file_uris()" + EXIT], "<= 0.4 s"),
    ]
    rows = []
    for name, a, b, target in cases:
        r = side_by_side(a, b, args.runs)
        rows.append((name, r, target))
        print(f"{name:>9}: tahoe {r['tahoe'][0]:.3f} s (cpu {r['tahoe'][1]:.3f}), delta-rs {r['ref'][0]:.3f} s "
              f"(cpu {r['ref'][1]:.3f}), ratio {r['ratio']:.2f} (cpu {r['cpu_ratio']:.2f})  target {target or '-'}",
              flush=True)
    print(f"\n(whole process, median of {args.runs} alternating runs; load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()

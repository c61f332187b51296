"""Writer processes for the concurrency and crash tests (imported by name in spawned children)."""

from __future__ import annotations

import os
import random
import signal
import sys


def blind_appender(uri: str, storage_options: dict | None, writer: int, commits: int,
                   barrier, queue) -> None:
    """Commit `commits` blind appends of one fake file each; report (writer, versions, retries)."""
    from tahoe.log import DeltaLog
    from tahoe.txn import Transaction
    from tests.txn._helpers import fake_add

    log = DeltaLog.for_table(uri, storage_options)
    versions, retries = [], 0
    try:
        barrier.wait()
        for i in range(commits):
            t = Transaction(log, "WRITE", {"mode": "Append"}, max_retries=200)
            t.add_files([fake_add(f"p={writer}/w{writer}-{i:04d}.parquet", str(writer), n=i + 1)])
            versions.append(t.commit({"numFiles": 1}))
            retries += t.attempts - 1
        queue.put((writer, versions, retries, None))
    except BaseException as e:  # report instead of dying silently
        queue.put((writer, versions, retries, f"{type(e).__name__}: {e}"))


def _arm_self_kill(rng: random.Random) -> None:
    """SIGKILL this process at a random point inside the log store's file writing: during a
    temp-file write, its fsync, or right before/after the put-if-absent link."""
    targets = ["write", "fsync", "link"]
    target = rng.choice(targets)
    countdown = [rng.randint(1, 40)]
    original = getattr(os, target)

    def wrapper(*args, **kwargs):
        countdown[0] -= 1
        if countdown[0] <= 0:
            if target == "link" and rng.random() < 0.5:
                original(*args, **kwargs)  # published, but the writer never hears back
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)

    setattr(os, target, wrapper)


def crash_writer(uri: str, writer: int, seed: int, self_kill: bool) -> None:
    """Commit forever (until killed). After each commit returns, print `COMMITTED <version>
    <first path>` and flush: what is printed was acknowledged."""
    from tahoe.log import DeltaLog
    from tahoe.txn import Transaction
    from tests.txn._helpers import fake_add

    rng = random.Random(seed)
    log = DeltaLog.for_table(uri)
    print("READY", flush=True)
    if self_kill:
        _arm_self_kill(rng)
    i = 0
    while True:
        t = Transaction(log, "WRITE", {"mode": "Append"}, max_retries=1000)
        adds = [fake_add(f"w{writer}-s{seed}-c{i}-{j:03d}.parquet", n=j + 1) for j in range(40)]
        t.add_files(adds)
        v = t.commit()
        sys.stdout.write(f"COMMITTED {v} {adds[0].path}\n")
        sys.stdout.flush()
        i += 1


if __name__ == "__main__":  # python -m tests.txn._workers crash URI WRITER SEED SELF_KILL
    _, cmd, uri, writer, seed, self_kill = sys.argv
    assert cmd == "crash"
    crash_writer(uri, int(writer), int(seed), self_kill == "1")

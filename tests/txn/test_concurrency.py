"""Many writers, one table: processes racing blind appends on local disk and on S3 (moto), and
writers SIGKILLed at random points of their commits. The log must stay contiguous, every
acknowledged commit must be there, and nothing half-written may ever be visible."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tahoe import Table
from tahoe.log import DeltaLog
from tahoe.log.replay import read_commit
from tahoe.log.segment import list_log
from tahoe.protocol.filenames import LogFileKind
from tahoe.txn import create_table
from tests.txn import _workers

REPO = Path(__file__).resolve().parents[2]


def _race(uri: str, storage_options: dict | None, writers: int, commits: int, timeout: float) -> list[tuple]:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(writers)
    queue = ctx.Queue()
    procs = [ctx.Process(target=_workers.blind_appender,
                         args=(uri, storage_options, w, commits, barrier, queue)) for w in range(writers)]
    for p in procs:
        p.start()
    results = []
    deadline = time.time() + timeout
    try:
        for _ in procs:
            results.append(queue.get(timeout=max(1.0, deadline - time.time())))
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    errors = [r for r in results if r[3]]
    assert not errors, errors
    return results


def _check_log(uri: str, storage_options: dict | None, writers: int, commits: int, results) -> None:
    total = writers * commits
    acknowledged = sorted(v for r in results for v in r[1])
    assert acknowledged == list(range(1, total + 1)), "every commit got its own version, no gaps"
    log = DeltaLog.for_table(uri, storage_options)
    snap = log.snapshot()
    assert snap.version == total
    commits_listed = [f for f in list_log(log.store, log.log_dir, 0) if f.name.kind == LogFileKind.COMMIT]
    assert [f.version for f in commits_listed] == list(range(total + 1))
    seen = []
    for f in commits_listed[1:]:
        actions = read_commit(log.store, f.path)
        assert "commitInfo" in actions[0]
        adds = [a["add"]["path"] for a in actions if "add" in a]
        assert len(adds) == 1
        seen.extend(adds)
    expected = sorted(f"p={w}/w{w}-{i:04d}.parquet" for w in range(writers) for i in range(commits))
    assert sorted(seen) == expected, "every add present exactly once"
    files = Table(uri, storage_options=storage_options).files(["path"])
    assert files.num_rows == total
    assert sorted(files.column("path").to_pylist()) == expected


@pytest.mark.slow
def test_eight_processes_fifty_blind_appends_local(tmp_path):
    uri = str(tmp_path / "race")
    create_table(uri, "id BIGINT, p STRING", ["p"])
    results = _race(uri, None, writers=8, commits=50, timeout=600)
    _check_log(uri, None, 8, 50, results)
    assert sum(r[2] for r in results) > 0, "the writers really raced"


# --- S3 (moto) ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def moto_endpoint():
    from tests.fixtures.moto import start_moto_server

    url, stop = start_moto_server()
    yield url
    stop()


@pytest.fixture
def isolated_aws_env(monkeypatch):
    """No ambient AWS configuration leaks into this process or the spawned writers."""
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_ENDPOINT_URL",
                "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/tahoe-test-aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/tahoe-test-aws-credentials")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.mark.slow
def test_four_processes_blind_appends_s3(moto_endpoint, isolated_aws_env):
    import boto3

    from tests.fixtures.moto import TEST_CREDENTIALS

    bucket = f"tahoe-txn-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1",
                 aws_access_key_id="testing", aws_secret_access_key="testing").create_bucket(Bucket=bucket)
    options = {"endpoint_url": moto_endpoint, **TEST_CREDENTIALS}
    uri = f"s3://{bucket}/tables/race"
    create_table(uri, "id BIGINT, p STRING", ["p"], storage_options=options)
    # the deadline only stops a hung race; a loaded 2-core machine needs minutes for 60 S3 commits
    results = _race(uri, options, writers=4, commits=15, timeout=600)
    _check_log(uri, options, 4, 15, results)


# --- crashes -----------------------------------------------------------------------------------

def _spawn_crash_writer(uri: str, writer: int, seed: int, self_kill: bool) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.txn._workers", "crash", uri, str(writer), str(seed), "1" if self_kill else "0"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _check_intact(uri: str, acknowledged: dict[int, str]) -> int:
    """The table opens, every acknowledged commit is there with its own adds, every commit file
    is complete JSON; returns the latest version."""
    log = DeltaLog.for_table(uri)
    snap = log.snapshot()
    commits = [f for f in list_log(log.store, log.log_dir, 0) if f.name.kind == LogFileKind.COMMIT]
    versions = [f.version for f in commits]
    assert versions == list(range(versions[0], versions[-1] + 1)) and versions[-1] == snap.version
    total_adds = 0
    for f in commits:
        data = log.store.read(f.path)
        assert data.endswith(b"\n"), f"{f.path} is not a complete commit"
        actions = read_commit(log.store, f.path)  # raises on a torn line
        if f.version > 0:
            assert "commitInfo" in actions[0]
        paths = [a["add"]["path"] for a in actions if "add" in a]
        total_adds += len(paths)
        if f.version in acknowledged:
            assert acknowledged[f.version] in paths, f"acknowledged commit {f.version} lost its data"
    for v in acknowledged:
        assert v <= snap.version, f"acknowledged version {v} is missing"
    assert Table(uri).files().num_rows == total_adds
    return snap.version


@pytest.mark.slow
def test_sigkill_writers_at_random_points(tmp_path):
    """Rounds of 3 writers on one table. A self-killing writer SIGKILLs itself inside the log
    store's file writing at a point drawn from its seed (a temp-file write, its fsync, or just
    before/after the put-if-absent link); the others are SIGKILLed from here as soon as they have
    acknowledged their first commit, i.e. while they are in the middle of the next one. Nothing
    waits on a clock: every kill follows an event, so each round kills 3 writers and every
    externally killed writer has at least one acknowledged commit, whatever the machine's speed."""
    uri = str(tmp_path / "crash")
    create_table(uri, "id BIGINT")
    acknowledged: dict[int, str] = {}
    kills = external = 0
    rounds, per_round = 8, 3

    def collect(line: str) -> None:
        _, v, path = line.strip().split(" ", 2)
        assert int(v) not in acknowledged, "two writers acknowledged the same version"
        acknowledged[int(v)] = path

    for r in range(rounds):
        procs = []
        for w in range(per_round):
            self_kill = (r + w) % 2 == 0
            procs.append((_spawn_crash_writer(uri, w, r * 10 + w, self_kill), self_kill))
        for p, _ in procs:  # wait until each writer is up
            assert p.stdout.readline().strip() == "READY", p.stderr.read()
        for p, self_kill in procs:
            if not self_kill:   # the event: its first acknowledged commit
                line = p.stdout.readline()
                assert line.startswith("COMMITTED "), (line, p.stderr.read())
                collect(line)
                os.kill(p.pid, signal.SIGKILL)
                external += 1
        for p, self_kill in procs:
            try:
                p.wait(timeout=120)   # a self-killing writer dies within 40 calls of its target
            except subprocess.TimeoutExpired:
                p.kill()
                raise AssertionError(f"writer {p.args} did not kill itself")
            assert p.returncode == -signal.SIGKILL, (p.returncode, p.stderr.read())
            kills += 1
            for line in p.stdout.read().splitlines():
                if line.startswith("COMMITTED "):
                    collect(line)
            p.stdout.close()
            p.stderr.close()
        _check_intact(uri, acknowledged)
    assert kills == rounds * per_round
    assert len(acknowledged) >= external >= rounds   # each round kills one or two writers from here
    # the table is still writable after all that
    from tahoe.txn import Transaction
    from tests.txn._helpers import fake_add

    t = Transaction(DeltaLog.for_table(uri), "WRITE")
    t.add_files([fake_add("after-crashes.parquet")])
    v = t.commit()
    assert _check_intact(uri, acknowledged) == v

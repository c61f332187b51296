"""Worker processes for the put-if-absent races (imported by name in spawned children)."""

from __future__ import annotations

import json
import os


def payload(writer: int, version: int, size: int) -> bytes:
    head = json.dumps({"writer": writer, "version": version, "size": size}).encode()
    return head + b"\n" + bytes([65 + writer % 26]) * size + b"\nEND\n"


def parse_payload(data: bytes) -> dict | None:
    """The header of a complete payload, or None if `data` is torn/partial."""
    head, sep, rest = data.partition(b"\n")
    if not sep:
        return None
    try:
        meta = json.loads(head)
    except ValueError:
        return None
    if len(rest) != meta["size"] + 5 or not rest.endswith(b"\nEND\n"):
        return None
    return meta


def refuse_hard_links_and_write_slowly(chunk: int = 4096) -> None:
    """Make this process's file system refuse link(2) (EPERM, as FAT or some FUSE/SMB mounts do)
    and write at most `chunk` bytes per write(2), pausing between writes (a slow disk): a file
    written in place would be visible half-written for a long while."""
    import errno
    import time

    real_write = os.write

    def no_links(src, dst, *a, **kw):
        raise OSError(errno.EPERM, "Operation not permitted", src)

    def slow_write(fd, data):
        time.sleep(0.0005)
        return real_write(fd, bytes(memoryview(data)[:chunk]))

    os.link = no_links
    os.write = slow_write


def local_writer(log_dir: str, writer: int, versions: int, size: int, barrier, queue,
                 no_hard_links: bool = False) -> None:
    from tahoe.storage.local import LocalLogStore

    if no_hard_links:
        refuse_hard_links_and_write_slowly()
    store = LocalLogStore()
    wins, torn = [], []
    barrier.wait()
    for v in range(versions):
        path = os.path.join(log_dir, f"{v:020d}.json")
        try:
            store.write(path, payload(writer, v, size))
            wins.append(v)
        except FileExistsError:
            if parse_payload(store.read(path)) is None:  # a reader must never see a partial file
                torn.append(v)
    queue.put((writer, wins, torn))


def s3_writer(endpoint: str, root: str, writer: int, versions: int, barrier, queue) -> None:
    from tahoe.storage.s3 import S3LogStore
    from tests.fixtures.moto import TEST_CREDENTIALS

    store = S3LogStore({"endpoint_url": endpoint, **TEST_CREDENTIALS})
    wins, torn = [], []
    for v in range(versions):
        barrier.wait()  # lockstep: all writers PUT the same key at the same moment
        path = store.join(root, f"{v:020d}.json")
        try:
            store.write(path, payload(writer, v, 1024))
            wins.append(v)
        except FileExistsError:
            if parse_payload(store.read(path)) is None:
                torn.append(v)
    queue.put((writer, wins, torn))

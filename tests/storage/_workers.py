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


def local_writer(log_dir: str, writer: int, versions: int, size: int, barrier, queue) -> None:
    from tahoe.storage.local import LocalLogStore

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

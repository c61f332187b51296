"""What runs after a commit landed (delta-spark's post-commit hooks), in one list and one order:
  1. `version_checksum`: the version's `.crc`, derived incrementally (`tahoe.log.crc`);
  2. `keep_snapshot`: the snapshot kept for the next load (`tahoe.log.snapshot_cache`), checked against its
     `.crc` when TAHOE_VALIDATE_CHECKSUMS asks;
  3. `checkpoint`: when due, then log cleanup (`tahoe.log.checkpoint_policy`; the commit's properties
     may skip the checkpoint or force / suppress the cleanup, `tahoe.txn.commit_properties`);
  4. `symlink_manifest`, with `delta.compatibility.symlinkFormatManifest.enabled`;
  5. `uniform_iceberg`, with `delta.universalFormat.enabledFormats=iceberg`;
  6. the writer's own hooks (`Transaction.add_post_commit_hook`, e.g. auto compaction).
A failing hook never fails the commit (logged, kept in `post_commit_errors`), except a strict checksum
disagreement in step 2, which raises as a load's would."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Callable

from ..log import checkpoint_policy
from ..log.crc import checksum_after_commit, validation_mode, write_version_checksum
from ..log.delta_log import DeltaLog
from ..log.snapshot import Snapshot
from ..log.snapshot_cache import forget, remember
from ..protocol import iceberg_compat
from ..protocol.actions import Action
from ..protocol.properties import bool_property
from ..uniform.symlink_manifest import generate_symlink_manifest

__all__ = ["Committed", "PostCommitHook", "POST_COMMIT_HOOKS", "run_post_commit_hooks", "SYMLINK_MANIFEST_KEY"]

_log = logging.getLogger(__name__)

SYMLINK_MANIFEST_KEY = "delta.compatibility.symlinkFormatManifest.enabled"


@dataclasses.dataclass
class Committed:
    """A version this process just committed, as the hooks see it."""
    log: DeltaLog
    version: int
    actions: list[Action]
    size: int                           # bytes of the commit file
    configuration: dict | None          # the table's configuration at `version`
    read_snapshot: Snapshot | None      # the snapshot the transaction read
    snapshot: Snapshot | None           # the snapshot of `version`, derived from the read one (None: not derived)
    create_checkpoint: bool = True      # False: no checkpoint, even when due
    cleanup_expired_logs: bool | None = None   # True: after every commit; False: never; None: the table's


@dataclasses.dataclass(frozen=True)
class PostCommitHook:
    name: str
    run: Callable[[Committed], Any]
    raises: bool = False                # a failure propagates (else it is logged and kept)


def version_checksum(c: Committed) -> None:
    """Step 1. A version whose checksum cannot be derived without a replay gets none."""
    crc = checksum_after_commit(c.log.store, c.log.log_dir, c.log.table_root, c.version, c.actions, c.read_snapshot)
    if crc is not None and write_version_checksum(c.log.store, c.log.log_dir, c.version, crc) \
            and c.snapshot is not None:
        c.snapshot.known_checksum(crc)


def keep_snapshot(c: Committed) -> None:
    """Step 2 (strict validation: a disagreement raises)."""
    if c.snapshot is None:
        forget(c.log.store, c.log.table_root)
        return
    mode = validation_mode()
    if mode is not None:
        c.snapshot.validate_checksum(strict=mode == "strict")
    remember(c.snapshot, validated=mode is not None)


def checkpoint(c: Committed) -> None:
    """Step 3. The JSON a reader replays after the newest checkpoint is known without a listing
    when this commit directly follows the snapshot it read (its segment + this commit)."""
    snap = c.read_snapshot
    tail = None
    if snap is not None and snap.version == c.version - 1:
        tail = sum(f.status.size for f in snap.segment.deltas) + c.size
    conf = dict(c.configuration) if c.configuration is not None else None
    if c.create_checkpoint:
        checkpoint_policy.checkpoint_if_needed(c.log, c.version, configuration=conf, tail_bytes=tail,
                                               snapshot=c.snapshot, cleanup=c.cleanup_expired_logs is None)
    if c.cleanup_expired_logs:
        checkpoint_policy.cleanup_logs(c.log, c.version, conf)


def symlink_manifest(c: Committed) -> None:
    """Step 4 (delta-spark's GenerateSymlinkManifest hook)."""
    if c.configuration and bool_property(c.configuration, SYMLINK_MANIFEST_KEY):
        generate_symlink_manifest(c.log, c.version)


def uniform_iceberg(c: Committed) -> None:
    """Step 5. The next commit (or `tahoe.uniform.sync_iceberg`) converts every version missed."""
    if iceberg_compat.uniform_iceberg_enabled(c.configuration):
        from ..uniform.iceberg import convert_after_commit   # Avro for UniForm tables only (tests/test_startup.py)

        convert_after_commit(c.log, c.version)


POST_COMMIT_HOOKS = (
    PostCommitHook("version checksum", version_checksum),
    PostCommitHook("kept snapshot", keep_snapshot, raises=True),
    PostCommitHook("checkpoint", checkpoint),
    PostCommitHook("symlink manifest", symlink_manifest),
    PostCommitHook("UniForm Iceberg metadata", uniform_iceberg),
)


def run_post_commit_hooks(c: Committed, hooks: tuple[PostCommitHook, ...] | list[PostCommitHook],
                          errors: list[Exception]) -> None:
    """Run `hooks` in order; a failure is logged and appended to `errors` (see the module docstring)."""
    for hook in hooks:
        try:
            hook.run(c)
        except Exception as e:  # noqa: BLE001 - a post-commit hook never fails the committed write
            if hook.raises:
                raise
            errors.append(e)
            _log.warning("post-commit hook '%s' after version %s of %s failed (the commit stands): %s: %s",
                         hook.name, c.version, c.log.table_root, type(e).__name__, e)

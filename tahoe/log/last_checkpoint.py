"""The `_delta_log/_last_checkpoint` hint (spec "Last Checkpoint File").

A reader uses it only as a hint: a missing, empty, unparsable or checksum-failing file is ignored
(the caller falls back to listing the log), never an error. Writers rewrite it after each checkpoint
with the checksum (spec "JSON checksum").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..protocol.filenames import LAST_CHECKPOINT
from ..storage.base import LogStore

# logging and the checksum (hashlib) are imported when a hint has to be checked or refused: a
# file listing of a table without checkpoints needs neither


def _warn(msg: str, *args: Any) -> None:
    import logging

    logging.getLogger(__name__).warning(msg, *args)

__all__ = ["LastCheckpoint", "read_last_checkpoint", "write_last_checkpoint"]


@dataclass(frozen=True)
class LastCheckpoint:
    version: int
    size: int | None = None
    parts: int | None = None
    size_in_bytes: int | None = None
    num_of_add_files: int | None = None
    v2_checkpoint_file: str | None = None   # v2Checkpoint: the top-level checkpoint file name
    # the `v2Checkpoint` entry as delta-spark writes it: path, sizeInBytes, modificationTime and,
    # when small enough, nonFileActions and sidecarFiles
    v2_checkpoint: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"version": self.version, "size": self.size or 0}
        if self.parts is not None:
            d["parts"] = self.parts
        if self.size_in_bytes is not None:
            d["sizeInBytes"] = self.size_in_bytes
        if self.num_of_add_files is not None:
            d["numOfAddFiles"] = self.num_of_add_files
        if self.v2_checkpoint is not None:
            d["v2Checkpoint"] = self.v2_checkpoint
        return d


def read_last_checkpoint(store: LogStore, log_dir: str) -> LastCheckpoint | None:
    path = store.join(log_dir, LAST_CHECKPOINT)
    try:
        text = store.read(path).decode("utf-8")
    except (FileNotFoundError, NotADirectoryError):  # no hint (or no table: listing says so)
        return None
    except (OSError, UnicodeDecodeError) as e:
        _warn("ignoring unreadable %s: %s", path, e)
        return None
    try:
        obj = json.loads(text)
        if not isinstance(obj, dict) or not isinstance(obj.get("version"), int):
            raise ValueError("no integer 'version'")
        if "checksum" in obj:
            from ..protocol import last_checkpoint_checksum as checksum

            if not checksum.verify(text):
                raise ValueError("checksum mismatch")
    except Exception as e:  # any problem: the hint is not trusted
        _warn("ignoring invalid %s (%s); listing the log instead", path, e)
        return None
    v2 = obj.get("v2Checkpoint") or {}
    return LastCheckpoint(
        version=obj["version"],
        size=obj.get("size"),
        parts=obj.get("parts"),
        size_in_bytes=obj.get("sizeInBytes"),
        num_of_add_files=obj.get("numOfAddFiles"),
        v2_checkpoint_file=v2.get("path") if isinstance(v2, dict) else None,
        v2_checkpoint=v2 if isinstance(v2, dict) and v2 else None,
    )


def write_last_checkpoint(store: LogStore, log_dir: str, lc: LastCheckpoint) -> None:
    from ..protocol import last_checkpoint_checksum as checksum

    body = checksum.with_checksum(lc.to_dict())
    store.write(store.join(log_dir, LAST_CHECKPOINT),
                json.dumps(body, separators=(",", ":")).encode("utf-8"), overwrite=True)

"""The official `delta-sharing` Python client (1.4.2), run the way a recipient runs it: in its own virtual
environment (`ensure_env`; it pins `pandas<3` and `pyarrow<=23.0.1`), driven over a pipe (`OfficialClient`).

  1. This file also runs there as a plain script: module level is standard library only.
  2. Calls mirror the client's functions: DataFrames come back as Arrow tables, dataclasses as dicts with
     a `$type` key; a client exception is an `OfficialClientError` (type, HTTP status, response body).
  3. `python -m tahoe.sharing.official_client ensure DIR` creates the environment (Makefile `setup`);
     `ensure_env` is safe from several processes at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

__all__ = ["REQUIREMENT", "OfficialClient", "OfficialClientError", "ensure_env", "env_python"]

REQUIREMENT = "delta-sharing==1.4.2"
_STAMP = ".tahoe-recipient-env"

# what the driver may call: module functions, and SharingClient(profile) methods
_FUNCTIONS = {"load_as_pandas", "load_table_changes_as_pandas", "get_table_version", "get_table_metadata",
              "get_table_protocol"}
_CLIENT_METHODS = {"list_shares", "list_schemas", "list_tables", "list_all_tables"}


# --- the recipient's environment -------------------------------------------------------------------
def env_python(path: str) -> str:
    """The interpreter of the virtual environment at `path`."""
    if os.name == "nt":
        return os.path.join(path, "Scripts", "python.exe")
    return os.path.join(path, "bin", "python")


def _ready(path: str) -> bool:
    try:
        with open(os.path.join(path, _STAMP)) as f:
            return f.read().strip() == REQUIREMENT and os.path.exists(env_python(path))
    except OSError:
        return False


def ensure_env(path: str, base_python: str | None = None, quiet: bool = True) -> str:
    """A virtual environment at `path` holding the official client (REQUIREMENT), created when
    missing or made for another requirement; returns its interpreter. Concurrent callers wait for
    the one that creates it (a lock on `<path>.lock`)."""
    import shutil

    # inside: this file also runs as a script in the recipient's environment, where it has no package
    from .locks import exclusive_lock

    path = os.path.abspath(path)
    if _ready(path):
        return env_python(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with exclusive_lock(path + ".lock"):
        if _ready(path):
            return env_python(path)
        if os.path.exists(path):
            shutil.rmtree(path)
        # `python -m venv` run from inside a venv builds on the base interpreter
        _run([base_python or sys.executable, "-m", "venv", path], "create the recipient environment")
        pip = [env_python(path), "-m", "pip", "install", "--disable-pip-version-check"]
        if quiet:
            pip.append("--quiet")
        _run(pip + [REQUIREMENT], f"install {REQUIREMENT} into {path}")
        with open(os.path.join(path, _STAMP), "w") as f:
            f.write(REQUIREMENT + "\n")
    return env_python(path)


def _run(cmd: list[str], what: str) -> None:
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"could not {what} (exit {r.returncode}):\n{r.stdout[-4000:]}")


# --- the driver (tahoe's side) ----------------------------------------------------------------------
class OfficialClientError(Exception):
    """An exception the official client raised: `type` is its qualified class name (e.g.
    `requests.exceptions.HTTPError`), `types` those of its bases, `status` the HTTP status when
    it is an HTTP error, `body` the server's response body."""

    def __init__(self, type: str, types: list[str], message: str, status: int | None, body: str | None):
        super().__init__(f"{type}: {message}")
        self.type = type
        self.types = types
        self.message = message
        self.status = status
        self.body = body

    def error_code(self) -> str | None:
        """The protocol's `errorCode` in the server's response body, if any."""
        try:
            return json.loads(self.body or "").get("errorCode")
        except (ValueError, AttributeError):
            return None


class OfficialClient:
    """One recipient process running the official client; calls are answered one at a time."""

    def __init__(self, python: str, timeout: float = 600, stderr: Any = None):
        import queue
        import tempfile
        import threading

        self.timeout = timeout
        self._tmp = tempfile.TemporaryDirectory(prefix="tahoe-recipient-")
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env["PYTHONUNBUFFERED"] = "1"
        # absolute (the process runs in a temporary folder), but not resolved: a venv's python is a symlink
        self._proc = subprocess.Popen([os.path.abspath(python), "-I", os.path.abspath(__file__)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=stderr, env=env, text=True,
                                      cwd=self._tmp.name)
        self._lines: "queue.Queue[str | None]" = queue.Queue()
        self._queue_empty = queue.Empty

        def pump() -> None:
            for line in self._proc.stdout:
                self._lines.put(line)
            self._lines.put(None)
        threading.Thread(target=pump, name="official-client-reader", daemon=True).start()
        self._n = 0
        self.last_dtypes: dict = {}   # column -> dtype of the last DataFrame the recipient returned
        self.versions = self._ask({"op": "versions"})

    def _ask(self, req: dict) -> Any:
        if self._proc.poll() is not None:
            raise RuntimeError(f"the official client's process has exited ({self._proc.returncode})")
        self._proc.stdin.write(json.dumps(req) + "\n")
        self._proc.stdin.flush()
        try:
            line = self._lines.get(timeout=self.timeout)
        except self._queue_empty:
            self.close()
            raise TimeoutError(f"the official client did not answer within {self.timeout} s: {req}") from None
        if line is None:
            raise RuntimeError(f"the official client's process exited ({self._proc.wait()}) during {req}")
        resp = json.loads(line)
        if "error" in resp:
            e = resp["error"]
            raise OfficialClientError(e["type"], e["types"], e["message"], e.get("status"), e.get("body"))
        return resp["ok"]

    def _frame(self, req: dict):
        import pyarrow.parquet as pq

        self._n += 1
        out = os.path.join(self._tmp.name, f"frame-{self._n}.parquet")
        req["out"] = out
        reply = self._ask(req)
        self.last_dtypes = reply.get("dtypes", {})
        try:
            return pq.read_table(out)
        finally:
            os.unlink(out)

    def pandas(self, function: str, *args, **kwargs):
        """`delta_sharing.<function>` (a load) as a pandas DataFrame rebuilt here from the Arrow
        table the recipient's frame was written to (pandas metadata: dtypes restored), and whether
        its dtypes are the ones the recipient's frame had (`dtypes_survived`): (frame, bool)."""
        df = self.call(function, *args, **kwargs).to_pandas()
        return df, {str(c): str(t) for c, t in df.dtypes.items()} == self.last_dtypes

    def call(self, function: str, *args, **kwargs) -> Any:
        """`delta_sharing.<function>(*args, **kwargs)` in the recipient's process (a DataFrame
        result comes back as a pyarrow Table)."""
        req = {"op": "call", "function": function, "args": list(args), "kwargs": kwargs}
        if function in ("load_as_pandas", "load_table_changes_as_pandas"):
            return self._frame(req)
        return self._ask(req)

    def timed(self, function: str, *args, **kwargs) -> tuple[int, float, float]:
        """Run `delta_sharing.<function>` (a load) in the recipient's process and drop its
        DataFrame: (rows, seconds the call took there, CPU seconds of the recipient's process
        during it) — for benchmarks, free of the cost of bringing the rows back."""
        r = self._ask({"op": "call", "function": function, "args": list(args), "kwargs": kwargs})
        return r["rows"], r["seconds"], r["cpu_seconds"]

    @property
    def pid(self) -> int:
        return self._proc.pid

    def client(self, profile: str, method: str, *args) -> Any:
        """`delta_sharing.SharingClient(profile).<method>(*args)`; pass Share/Schema arguments
        as `{"$type": "Share", "name": ...}`."""
        return self._ask({"op": "client", "profile": profile, "method": method, "args": list(args)})

    def load_as_pandas(self, url: str, **kwargs):
        return self.call("load_as_pandas", url, **kwargs)

    def load_table_changes_as_pandas(self, url: str, **kwargs):
        return self.call("load_table_changes_as_pandas", url, **kwargs)

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self._proc.stdin.close()
                self._proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        self._tmp.cleanup()

    def __enter__(self) -> "OfficialClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --- the recipient's side (runs in the recipient's environment) -------------------------------------
def _plain(v: Any) -> Any:
    import dataclasses

    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {"$type": type(v).__name__, **{f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return repr(v)


def _serve() -> None:
    # replies go to the original stdout; anything the client prints goes to stderr
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import delta_sharing
    import pandas
    import pyarrow
    import pyarrow.parquet

    def arg(v: Any) -> Any:
        if isinstance(v, dict) and "$type" in v:
            fields = {k: x for k, x in v.items() if k != "$type"}
            return getattr(delta_sharing, v["$type"])(**fields)
        return v

    def run(req: dict) -> Any:
        op = req["op"]
        if op == "versions":
            return {"delta-sharing": delta_sharing.__version__, "pandas": pandas.__version__,
                    "pyarrow": pyarrow.__version__, "python": sys.version.split()[0]}
        t0, c0 = time.perf_counter(), time.process_time()
        if op == "call" and req["function"] in _FUNCTIONS:
            result = getattr(delta_sharing, req["function"])(*map(arg, req["args"]),
                                                             **{k: arg(v) for k, v in req["kwargs"].items()})
        elif op == "client" and req["method"] in _CLIENT_METHODS:
            result = getattr(delta_sharing.SharingClient(req["profile"]), req["method"])(*map(arg, req["args"]))
        else:
            raise ValueError(f"not a call this driver makes: {req!r}")
        if isinstance(result, pandas.DataFrame):
            took = {"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0}
            if req.get("out"):
                pyarrow.parquet.write_table(pyarrow.Table.from_pandas(result, preserve_index=False), req["out"])
            return {"rows": len(result), "dtypes": {str(c): str(t) for c, t in result.dtypes.items()}, **took}
        return _plain(result)

    for line in sys.stdin:
        req = json.loads(line)
        try:
            reply = {"ok": run(req)}
        except BaseException as e:  # every failure goes back to the caller, named
            resp = getattr(e, "response", None)
            reply = {"error": {
                "type": f"{type(e).__module__}.{type(e).__qualname__}",
                "types": [f"{t.__module__}.{t.__qualname__}" for t in type(e).__mro__],
                "message": str(e),
                "status": getattr(resp, "status_code", None),
                "body": getattr(resp, "text", None) if resp is not None else None}}
        out.write(json.dumps(reply) + "\n")
        out.flush()


def _main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "ensure":
        print(ensure_env(argv[1], quiet=False))
        return 0
    sys.stderr.write("usage: python -m tahoe.sharing.official_client ensure DIR\n")
    return 2


if __name__ == "__main__":
    if __package__:   # python -m tahoe.sharing.official_client ...
        sys.exit(_main(sys.argv[1:]))
    _serve()          # executed as a script by OfficialClient, in the recipient's environment

"""README.md as a user meets it: every code block runs as written, in order, and what it says about
the command line and the `delta` source's options is what they do.

`test_readme_blocks_run_in_order` extracts the fenced blocks and runs them on scratch paths
(`/data/...` -> a tmp dir, `s3://bucket/` -> a bucket on a local moto server whose credentials
replace the block's `s3 = {...}` line, the sharing config's port -> a free port): python blocks
are executed in one namespace (so later blocks see earlier names, as a reader's session would),
in the scratch dir, with the Spark blocks getting the test session (`local_session()` returns the
running session); bash blocks run line by line with the venv's `tahoe`, `tahoe sharing serve` in
the background until the test ends (a real server, which the recipient block then reads through);
a yaml block whose first line names a file (`# sharing.yaml ...`) is written to that file; `text`
blocks (the command synopsis) are documentation, checked by `test_cli_synopsis_matches_help`.
The first block must stay `make demo` / `make test` (`make -n` checks both targets exist; the demo
itself is tests/test_demo.py, and `make test` is this suite).

Oracles: hand-derived rows (the exported version 1 of /data/events, the shared orders read by the
official `delta-sharing` client), the files on disk for `tahoe files` output, the server's banner,
and for the synopsis the CLI's own `--help` text.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tahoe.sharing.official_client import ensure_env

from tests.conftest import REPO
from tests.fixtures.moto import TEST_CREDENTIALS, start_moto_server
from tests.sharing.conftest import free_port
from tests.spark.conftest import spark  # noqa: F401 - the session-scoped Spark fixture

README = REPO / "README.md"
BIN = Path(sys.executable).parent
FENCE = re.compile(r"^```(\w+)\n(.*?)^```\s*$", re.M | re.S)


def readme_blocks() -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(README.read_text())]


def _logical_lines(code: str) -> list[str]:
    """Shell lines with backslash continuations joined, comments and blanks dropped."""
    out, cur = [], ""
    for line in code.splitlines():
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        cur += line
        if cur.strip() and not cur.strip().startswith("#"):
            out.append(cur.strip())
        cur = ""
    return out


def _wait_http(url: str, proc: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited with {proc.returncode}")
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except urllib.error.HTTPError:
            return  # it answers (401 without a token)
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"no answer from {url} within {timeout}s")


def test_first_lines_are_the_two_commands():
    lang, code = readme_blocks()[0]
    assert lang == "bash"
    assert [line.split("#")[0].strip() for line in code.strip().splitlines()] == ["make demo", "make test"]
    assert README.read_text().lstrip().startswith("# tahoe\n\n```bash\nmake demo")
    r = subprocess.run(["make", "-n", "demo", "test"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "tahoe demo" in r.stdout and "pytest" in r.stdout


def test_readme_does_not_depend_on_shared():
    assert "../shared" not in README.read_text()


@pytest.mark.spark
@pytest.mark.xdist_group("spark")
def test_readme_blocks_run_in_order(spark, tmp_path, monkeypatch):  # noqa: F811
    import boto3

    scratch = tmp_path / "readme"
    scratch.mkdir()
    monkeypatch.chdir(scratch)
    endpoint, stop_moto = start_moto_server()
    bucket = f"readme-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                 aws_secret_access_key="testing").create_bucket(Bucket=bucket)
    s3_opts = {**TEST_CREDENTIALS, "endpoint_url": endpoint, "allow_http": "true"}
    port = free_port()
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    servers: list[subprocess.Popen] = []
    ns: dict = {"__name__": "__readme__"}
    ran = {"python": 0, "bash": 0, "yaml": 0}
    shared = False

    # the object-store sections: Azurite and fake-gcs-server stand in for Azure and GCS, their
    # `az = {...}` / `gs = {...}` lines replaced by the emulators' options
    from tests.fixtures.emulators import start_azurite, start_gcs

    text = README.read_text()
    emulators = {k: start() for k, start in (("az", start_azurite), ("gs", start_gcs)) if f"{k}://" in text}
    names = {}
    for k, em in emulators.items():
        names[k] = f"readme-{uuid.uuid4().hex[:12]}"
        em.make_bucket(names[k])

    def rewrite(code: str) -> str:
        code = re.sub(r"(?<![\w.])/data/", f"{scratch}/data/", code)
        code = code.replace("az://container/", f"az://{names['az']}/") if "az" in names else code
        code = code.replace("gs://bucket/", f"gs://{names['gs']}/") if "gs" in names else code
        return code.replace("s3://bucket/", f"s3://{bucket}/")

    try:
        for i, (lang, code) in enumerate(readme_blocks()):
            where = f"README block {i} ({lang})"
            if i == 0 or lang == "text":
                continue
            code = rewrite(code)
            if lang == "python":
                if "s3://" in code and re.search(r"^s3 = \{", code, flags=re.M):
                    code, n = re.subn(r"^s3 = \{.*$", f"s3 = {s3_opts!r}", code, flags=re.M)
                    assert n == 1, f"{where}: the S3 block must define its options as one `s3 = {{...}}` line"
                for k, em in emulators.items():
                    if f"{k}://" in code and re.search(rf"^{k} = \{{", code, flags=re.M):
                        code, n = re.subn(rf"^{k} = \{{.*$", f"{k} = {em.options!r}", code, flags=re.M)
                        assert n == 1, f"{where}: define the options as one `{k} = {{...}}` line"
                if re.search(r"^import delta_sharing\b", code, flags=re.M):
                    # the recipient's block, while the server runs: its official-client paragraph
                    # runs where a recipient runs it, in the official client's own environment
                    official, _, code = code.partition("\n\n")
                    check = (official + "\nrows = delta_sharing.load_as_pandas('analyst.share#sales.default.orders')"
                             "\nprint(sorted(rows['order_id'].tolist()), sorted(rows['amount'].tolist()))")
                    r = subprocess.run([ensure_env(str(REPO / ".venv-recipient")), "-c", check], cwd=scratch,
                                       capture_output=True, text=True, timeout=600)
                    assert r.returncode == 0, f"{where}: {r.stderr}"
                    assert r.stdout.strip().splitlines()[-1] == "[1, 2, 3] [3.25, 9.5, 20.0]", r.stdout
                    shared = True
                exec(compile(code, where, "exec"), ns)  # noqa: S102 - the README's own code
            elif lang == "yaml":
                first = code.splitlines()[0]
                m = re.match(r"#\s*(\S+\.ya?ml)\b", first)
                assert m, f"{where}: a yaml block starts with '# <file name>'"
                code, n = re.subn(r"^port: \d+$", f"port: {port}", code, flags=re.M)
                assert n == 1
                (scratch / m.group(1)).write_text(code)
            elif lang == "bash":
                for line in _logical_lines(code):
                    if line.startswith("tahoe sharing serve"):
                        log = open(scratch / "serve.log", "w")
                        proc = subprocess.Popen(shlex.split(line.split("#")[0]), cwd=scratch, env=env,
                                                stdout=log, stderr=subprocess.STDOUT)
                        servers.append(proc)
                        _wait_http(f"http://127.0.0.1:{port}/delta-sharing/shares", proc)
                        continue
                    r = subprocess.run(["bash", "-ec", line], cwd=scratch, env=env, capture_output=True,
                                       text=True, timeout=300)
                    assert r.returncode == 0, f"{where}: `{line}` failed:\n{r.stdout}\n{r.stderr}"
            else:
                raise AssertionError(f"{where}: no rule to run a {lang} block")
            ran[lang] += 1
    finally:
        for proc in servers:
            proc.terminate()
            proc.wait(timeout=30)
        stop_moto()
        for em in emulators.values():
            em.stop()
        from tahoe.spark.sql import disable
        from tahoe.spark.sql.catalog import raw_sql

        for name in ("sales", "sales_copy"):   # the README's catalog tables (external: names only)
            raw_sql(spark, f"DROP TABLE IF EXISTS {name}")
        disable(spark)   # the shared session goes back to Spark's SQL for the other tests

    assert ran["python"] >= 6 and ran["bash"] >= 2 and ran["yaml"] == 1, ran
    # what the blocks did, against hand-derived expectations
    exported = pq.read_table(scratch / "out" / "events.parquet")
    assert sorted(exported.column("id").to_pylist()) == [1, 2, 3, 4, 5]  # version 1: create + append
    banner = (scratch / "serve.log").read_text()
    assert f"http://127.0.0.1:{port}/delta-sharing" in banner
    assert "sales.default.orders" in banner and "tahoe sharing recipient add" in banner
    assert (scratch / "analyst.share").exists() and shared


def test_files_prints_whole_paths_when_piped(tmp_path):
    import pyarrow as pa

    from tahoe.write import write_table

    root = tmp_path / "a-rather-long-directory-name-so-that-paths-exceed-eighty-columns" / "events"
    write_table(str(root), pa.table({"id": list(range(4)), "day": ["mon", "tue", "mon", "wed"]}),
                partition_by=["day"])
    r = subprocess.run([str(BIN / "tahoe"), "files", str(root)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().split("\n")
    assert lines[0].split("\t")[0] == "path"
    paths = [line.split("\t")[0] for line in lines[1:]]
    on_disk = sorted(str(p.relative_to(root)) for p in root.rglob("*.parquet"))
    assert sorted(paths) == on_disk


# --- the command line: README synopsis == --help ------------------------------------------------

_FLAG = re.compile(r"^(--[a-z][a-z-]*)$")


def _synopsis() -> list[str]:
    texts = [code for lang, code in readme_blocks() if lang == "text"]
    assert len(texts) == 1, "one `text` block: the command synopsis"
    return [line.strip() for line in texts[0].splitlines() if line.strip().startswith("tahoe")]


def _parse_synopsis(line: str) -> tuple[list[str], dict[str, str | None], list[str]]:
    """(command words, {flag: metavar or None}, positional metavars) of one synopsis line."""
    tokens = [t.strip("[]") for t in line.split()[1:]]
    words = []
    while tokens and re.fullmatch(r"[a-z][a-z-]*", tokens[0]):
        words.append(tokens.pop(0))
    flags: dict[str, str | None] = {}
    positional: list[str] = []
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if _FLAG.match(t):
            nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
            takes = nxt and not nxt.startswith("-") and nxt not in ("|", "...")
            flags[t] = nxt if takes else None
            i += 2 if takes else 1
            continue
        if t not in ("|", "...", "") and t.rstrip(".") not in positional:
            positional.append(t.rstrip("."))
        i += 1
    return words, flags, positional


def _parse_help(text: str) -> tuple[dict[str, str | None], dict[str, str], list[str]]:
    """({flag: metavar or None}, {flag: description}, positional metavars of the usage line)."""
    usage = re.search(r"Usage: \S+[^\n]*?\[OPTIONS\](.*)", text).group(1).split()
    positional = [u.strip("[]").rstrip(".") for u in usage if u not in ("COMMAND", "[ARGS]...")]
    flags: dict[str, str | None] = {}
    helps: dict[str, str] = {}
    section = text.split("\nOptions:\n", 1)[1].split("\nCommands:\n")[0]
    rows = re.findall(r"^  (?:-\w, )?(--[a-z][a-z-]*)(?: ([^ ]+))?(?: {2,}(.*))?$", section, re.M)
    for flag, metavar, desc in rows:
        flags[flag] = metavar or None
        helps[flag] = desc.strip()
    # a description wrapped onto the next line when the option column is wide
    for flag in [f for f, d in helps.items() if not d]:
        m = re.search(re.escape(flag) + r"[^\n]*\n {10,}(\S.*)", section)
        helps[flag] = m.group(1).strip() if m else ""
    return flags, helps, positional


def _all_commands(group, prefix=()):
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):
            yield from _all_commands(cmd, prefix + (name,))
        else:
            yield prefix + (name,)


def test_cli_synopsis_matches_help():
    import typer

    from tahoe.cli import app

    def run_help(words):   # the installed command, as a user runs it (piped: no terminal)
        r = subprocess.run([str(BIN / "tahoe"), *words, "--help"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        r.output = r.stdout
        return r

    seen = set()
    for line in _synopsis():
        words, flags, positional = _parse_synopsis(line)
        r = run_help(words)
        assert not re.search(r"<\w+(\[\w+\])?>", r.output), f"bare type placeholder in `tahoe {' '.join(words)} --help`"
        help_flags, helps, help_positional = _parse_help(r.output)
        help_flags.pop("--help")
        helps.pop("--help")
        where = f"README `{line}` vs `tahoe {' '.join(words)} --help`"
        if words:
            assert set(flags) == set(help_flags), where
            for flag, metavar in flags.items():
                assert metavar == help_flags[flag], f"{where}: {flag} {metavar} != {help_flags[flag]}"
            assert positional == help_positional, where
            assert "Examples:" in r.output, f"{where}: no example"
            seen.add(tuple(words))
        else:   # `tahoe --version`
            assert set(flags) <= set(help_flags)
        for flag, desc in helps.items():
            assert desc, f"{where}: {flag} has no description"
    assert seen == set(_all_commands(typer.main.get_command(app))), "a command missing from the README synopsis"
    # every flag the README names anywhere exists on some command
    every = set(_parse_help(run_help([]).output)[0])   # the top-level options (--storage-option)
    for cmd in seen:
        every |= set(_parse_help(run_help(list(cmd)).output)[0])
    text = re.sub(r"^```python\n.*?^```", "", README.read_text(), flags=re.M | re.S)
    for flag in set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", text)):
        assert flag in every | {"--version", "--help"}, f"README mentions {flag}, which no tahoe command has"


def test_cli_version():
    from tahoe import __version__

    r = subprocess.run([str(BIN / "tahoe"), "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == f"tahoe {__version__}"
    from importlib.metadata import version

    assert __version__ == version("tahoe")   # the installed distribution's version


def test_readme_lists_the_datasource_options():
    from tahoe.spark.options import READ_OPTIONS, WRITE_OPTIONS

    text = " ".join(README.read_text().split())
    para = text[text.index("Reader options of `format(\"delta\")`"):text.index("Every other option")]
    reader, writer = para.split("Writer options:")
    named_r = set(re.findall(r"`([A-Za-z.<>*]+)`", reader)) - {"format(\"delta\")"}
    named_w = set(re.findall(r"`([A-Za-z.<>*/]+)`", writer))
    named_w = {n for part in named_w for n in part.split("/")} - {"spark.sql.sources.partitionOverwriteMode", ".partitionBy()"}
    assert named_r == {*READ_OPTIONS[2:], "storage.<key>"}
    from tahoe.spark.options import STREAM_READ_OPTIONS

    streaming = text[text.index("Structured Streaming: `spark.readStream"):]
    assert {o for o in STREAM_READ_OPTIONS if o != "ignoreFileDeletion"} <= set(re.findall(r"`(\w+)`", streaming))
    assert named_w == {*(o for o in WRITE_OPTIONS if o not in ("path", "saveMode")), "storage.<key>", "delta.*"}

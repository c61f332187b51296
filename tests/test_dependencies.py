"""What `pip install tahoe` gives a user: the runtime dependencies in pyproject.toml are enough
for what tahoe imports outside Spark (the sharing client first of all), and their ranges are
tahoe's own — not the pins of the official delta-sharing client the tests run beside it.

Oracles: pyproject.toml read with tomllib; the distributions installed in this environment and the
official client's own requirements read from its environment (importlib.metadata); Python's
parser for what tahoe's modules import; and a fresh interpreter that cannot import anything but
the standard library and the runtime dependencies."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tahoe.sharing.official_client import env_python
from tests.test_module_boundaries import TAHOE, _module_name, _runtime_imports

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def _runtime_requirements() -> dict[str, Requirement]:
    reqs = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
    return {canonicalize_name(r.name): r for r in reqs if r.marker is None or r.marker.evaluate()}


def _top_level_modules_of(dists: set[str]) -> set[str]:
    """The importable top-level names the installed distributions `dists` (and what they require,
    transitively) provide."""
    provided = metadata.packages_distributions()   # top-level module -> [distribution]
    closure, todo = set(), list(dists)
    while todo:
        d = canonicalize_name(todo.pop())
        if d in closure:
            continue
        closure.add(d)
        for r in metadata.requires(d) or []:
            req = Requirement(r)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return {m for m, ds in provided.items() if any(canonicalize_name(x) in closure for x in ds)}


def test_httpx_is_a_runtime_dependency():
    """tahoe.sharing.client speaks HTTP with httpx: it must come with `pip install tahoe`, not only
    with the dev extras."""
    assert "httpx" in _runtime_requirements()
    assert "httpx" not in {canonicalize_name(Requirement(r).name) for r in PYPROJECT["project"]["optional-dependencies"]["dev"]}


def _optional_imports(tree: ast.AST) -> set[int]:
    """ids of the import statements inside a `try:` that handles ImportError — optional features
    that say what to install when the package is missing (e.g. `load_as_spark` and pyspark)."""
    out: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Try) and any(
                h.type is not None and {"ImportError", "ModuleNotFoundError"} & set(ast.unparse(h.type).replace("(", " ")
                                                                                .replace(")", " ").replace(",", " ").split())
                for h in n.handlers):
            out.update(id(x) for b in n.body for x in ast.walk(b))
    return out


def _import_time_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The import statements that run when the module is imported: not inside a function, not
    under `if TYPE_CHECKING:`."""
    in_functions = {id(x) for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                    for x in ast.walk(n)}
    return [n for n in _runtime_imports(tree) if id(n) not in in_functions]


def _third_party_imports(module: str, lazy_within: str | None = None) -> dict[str, str]:
    """Top-level names of the non-tahoe modules that importing `module` imports — through every
    tahoe module it imports in turn, package __init__ files included — except optional features
    (`_optional_imports`) -> a tahoe module that imports it. With `lazy_within` (a package), the
    imports inside functions of that package's modules too (what calling them imports)."""
    files = {_module_name(f): f for f in TAHOE.rglob("*.py")}
    seen, todo, out = set(), [module], {}
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        parts = m.split(".")
        todo.extend(".".join(parts[:i]) for i in range(2, len(parts)))   # its packages run first
        tree = ast.parse(files[m].read_text())
        optional = _optional_imports(tree)
        package = m if files[m].name == "__init__.py" else m.rsplit(".", 1)[0]
        lazy = lazy_within is not None and (m + ".").startswith(lazy_within + ".")
        for node in (_runtime_imports(tree) if lazy else _import_time_imports(tree)):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif node.level == 0:
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                base = package
                for _ in range(node.level - 1):
                    base = base.rsplit(".", 1)[0]
                mod = base + ("." + node.module if node.module else "")
                names = [mod] + [f"{mod}.{a.name}" for a in node.names]
            for n in names:
                if n.split(".")[0] == "tahoe":
                    while n not in files and "." in n:
                        n = n.rsplit(".", 1)[0]
                    todo.append(n)
                elif id(node) not in optional and n.split(".")[0] not in sys.stdlib_module_names:
                    out.setdefault(n.split(".")[0], m)
    return out


def test_the_sharing_client_imports_only_runtime_dependencies():
    """Every package that importing tahoe.sharing.client imports (through every tahoe module it
    imports in turn), and every package the functions of those tahoe.sharing modules import when
    called (httpx), belongs to a runtime dependency — never to pyspark, deltalake, moto or another
    dev-only package — except optional features guarded by `except ImportError` (`load_as_spark`
    needs pyspark, JWT profiles cryptography, profile URLs fsspec)."""
    allowed = _top_level_modules_of(set(_runtime_requirements()))
    used = _third_party_imports("tahoe.sharing.client", lazy_within="tahoe.sharing")
    assert "httpx" in used
    outside = {m: by for m, by in used.items() if m not in allowed}
    assert outside == {}, f"imported but not a runtime dependency: {outside}"


def test_the_sharing_client_works_with_the_runtime_dependencies_alone(tmp_path):
    """A fresh interpreter that refuses to import any installed package outside the runtime
    dependencies (pyspark, deltalake, moto, pytest, ...) imports the client and reads a profile
    with it."""
    allowed = _top_level_modules_of(set(_runtime_requirements()))
    refused = sorted(set(metadata.packages_distributions()) - allowed - {"tahoe", "_distutils_hack"})
    profile = tmp_path / "p.share"
    profile.write_text(json.dumps({"shareCredentialsVersion": 1, "endpoint": "http://127.0.0.1:9/delta-sharing",
                                   "bearerToken": "t"}))
    script = f"""
import sys
refused = set({refused!r})

class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in refused:
            raise ImportError(f"{{name}} is not a runtime dependency of tahoe")
        return None

sys.meta_path.insert(0, Refuse())
import tahoe.sharing.client as client
from tahoe.sharing.model import DeltaSharingProfile
p = DeltaSharingProfile.read_from_file({str(profile)!r})
assert p.endpoint.endswith("/delta-sharing"), p
print("ok", sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "deltalake", "moto", "pytest")))
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok []"


def _above(spec) -> Version:
    """A version just above an upper bound `<X` (X itself) or `<=X` (X with its last part + 1)."""
    v = Version(spec.version)
    if spec.operator == "<":
        return v
    release = list(v.release)
    release[-1] += 1
    return Version(".".join(map(str, release)))


def test_runtime_ranges_do_not_carry_the_official_clients_pins():
    """The official client (`delta-sharing`, in its own environment) caps pandas and pyarrow
    (`pandas<3`, `pyarrow<=23.0.1`). For every package both require, each of the client's upper
    bounds must be exceeded by a version tahoe's runtime range admits: tahoe follows what tahoe
    needs."""
    from tahoe.sharing.official_client import REQUIREMENT

    recipient = env_python(str(REPO / ".venv-recipient"))
    name = Requirement(REQUIREMENT).name
    out = subprocess.run([recipient, "-c", f"import importlib.metadata as m, json; print(json.dumps(m.requires({name!r})))"],
                         capture_output=True, text=True, check=True).stdout
    theirs = [Requirement(r) for r in json.loads(out) if "extra ==" not in r]
    ours = _runtime_requirements()
    capped = {canonicalize_name(r.name): [s for s in r.specifier if s.operator in ("<", "<=")] for r in theirs}
    shared = {n: caps for n, caps in capped.items() if caps and n in ours}
    assert {"pandas", "pyarrow"} <= set(shared), f"the client no longer caps these: {capped}"
    for n, caps in shared.items():
        for cap in caps:
            beyond = _above(cap)
            assert ours[n].specifier.contains(beyond, prereleases=True), \
                f"tahoe's runtime range {n}{ours[n].specifier} carries the official client's pin {cap} " \
                f"(it refuses {beyond})"

"""Seeded random sequences of DELETE / UPDATE / MERGE checked step by step against pandas.

Each sequence (a few dozen operations, from a seed) runs on a small table — partitioned and not,
copy-on-write and deletion vectors — through tahoe's Spark-free executor; the same operations are
applied to a pandas DataFrame by the oracle below, written here independently of tahoe: SQL's
three-valued logic by hand (a clause acts on a row only when its condition is TRUE; NULL is not
TRUE; AND / OR / NOT over NULL as Kleene's), MERGE's semantics by hand (the ON join; per
target row the first matched clause whose condition is TRUE, or — for a target row no source
row matched — the first not-matched-by-source clause; per unmatched source row the first insert
clause; a target row matched by two source rows fails the MERGE unless the only matched clause
is an unconditional delete). After every step the table's rows equal the oracle's, and the
operation's row counts equal the oracle's; a step the oracle says fails must fail and commit
nothing. At the end delta-rs reads each table (deletion vectors included) and gets the same rows.

Conditions mix NULL-bearing columns, partition and data columns, target-only and two-sided
conjuncts; MERGE uses every clause kind (matched update / update-all / delete, insert /
insert-all, not-matched-by-source update / delete), several per kind, in random order.

`Step` / `sequence` / `Oracle` are shared with tests/spark/test_dml.py, which runs a shorter
sequence through the Spark executor against the same oracle.
"""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

import tahoe
from tahoe.errors import DeltaUnsupportedOperationException
from tahoe.write.writer import write_table
from tests.fixtures.delta_log import latest_version
from tests.fixtures.deltars import run_deltars, sorted_rows

COLS = ["id", "p", "v", "s"]
PARTS = ["a", "b", "c"]
STRINGS = ["a", "b", "c", "x"]


def initial_rows(n: int = 40) -> list[dict]:
    return [{"id": i, "p": PARTS[i % 3], "v": None if i % 5 == 4 else (i * 7) % 13 - 3,
             "s": None if i % 4 == 1 else STRINGS[(i * 3) % 4]} for i in range(n)]


def arrow(rows: list[dict]) -> pa.Table:
    return pa.table({"id": pa.array([r["id"] for r in rows], pa.int64()),
                     "p": pa.array([r["p"] for r in rows], pa.string()),
                     "v": pa.array([r["v"] for r in rows], pa.int64()),
                     "s": pa.array([r["s"] for r in rows], pa.string())})


# --- expressions: SQL text and a by-hand evaluation -----------------------------------------------

def _sql_value(x: Any) -> str:
    if x is None:
        return "NULL"
    return f"'{x}'" if isinstance(x, str) else str(x)


@dataclasses.dataclass(frozen=True)
class Ref:
    side: str | None       # "t" / "s" (MERGE) or None (DELETE / UPDATE)
    col: str

    def sql(self) -> str:
        return f"{self.side}.{self.col}" if self.side else self.col

    def value(self, t: dict | None, s: dict | None) -> Any:
        row = s if self.side == "s" else t
        return None if row is None else row[self.col]


@dataclasses.dataclass(frozen=True)
class Cond:
    """A boolean expression: ("cmp", ref, op, literal) | ("null", ref) | ("notnull", ref) |
    ("mod", ref, k, r) | ("and" / "or", a, b) | ("not", a) | ("eq", ref, ref)."""
    node: tuple

    def sql(self) -> str:
        n = self.node
        k = n[0]
        if k == "cmp":
            return f"{n[1].sql()} {n[2]} {_sql_value(n[3])}"
        if k == "null":
            return f"{n[1].sql()} IS NULL"
        if k == "notnull":
            return f"{n[1].sql()} IS NOT NULL"
        if k == "mod":
            return f"{n[1].sql()} % {n[2]} = {n[3]}"
        if k == "eq":
            return f"{n[1].sql()} = {n[2].sql()}"
        if k == "not":
            return f"NOT ({n[1].sql()})"
        return f"({n[1].sql()}) {k.upper()} ({n[2].sql()})"

    def eval(self, t: dict | None, s: dict | None) -> bool | None:
        """TRUE / FALSE / None (NULL), by SQL's rules."""
        n = self.node
        k = n[0]
        if k == "cmp":
            a = n[1].value(t, s)
            if a is None:
                return None
            b = n[3]
            return {"<": a < b, ">": a > b, "=": a == b, "<>": a != b, "<=": a <= b, ">=": a >= b}[n[2]]
        if k == "null":
            return n[1].value(t, s) is None
        if k == "notnull":
            return n[1].value(t, s) is not None
        if k == "mod":
            a = n[1].value(t, s)
            return None if a is None else int(math.fmod(a, n[2])) == n[3]     # Spark's % truncates
        if k == "eq":
            a, b = n[1].value(t, s), n[2].value(t, s)
            return None if a is None or b is None else a == b
        if k == "not":
            a = n[1].eval(t, s)
            return None if a is None else not a
        a, b = n[1].eval(t, s), n[2].eval(t, s)
        if k == "and":
            if a is False or b is False:
                return False
            return None if a is None or b is None else True
        if a is True or b is True:
            return True
        return None if a is None or b is None else False


@dataclasses.dataclass(frozen=True)
class Val:
    """A value: ("lit", x) | ("ref", ref) | ("add", ref, n) | ("add2", ref, ref) |
    ("coalesce", ref, x) | ("concat", ref, str)."""
    node: tuple

    def sql(self) -> str:
        n = self.node
        k = n[0]
        if k == "lit":
            return _sql_value(n[1])
        if k == "ref":
            return n[1].sql()
        if k == "add":
            return f"{n[1].sql()} + {n[2]}"
        if k == "add2":
            return f"{n[1].sql()} + {n[2].sql()}"
        if k == "coalesce":
            return f"coalesce({n[1].sql()}, {_sql_value(n[2])})"
        return f"concat({n[1].sql()}, '{n[2]}')"

    def eval(self, t: dict | None, s: dict | None) -> Any:
        n = self.node
        k = n[0]
        if k == "lit":
            return n[1]
        if k == "ref":
            return n[1].value(t, s)
        if k == "add":
            a = n[1].value(t, s)
            return None if a is None else a + n[2]
        if k == "add2":
            a, b = n[1].value(t, s), n[2].value(t, s)
            return None if a is None or b is None else a + b
        if k == "coalesce":
            a = n[1].value(t, s)
            return n[2] if a is None else a
        a = n[1].value(t, s)
        return None if a is None else a + n[2]


# --- the operations -----------------------------------------------------------------------------

@dataclasses.dataclass
class Clause:
    kind: str                     # matched | notMatched | notMatchedBySource
    action: str                   # update | delete | insert
    cond: Cond | None
    values: dict[str, Val] | None  # None with update / insert: updateAll / insertAll


@dataclasses.dataclass
class Step:
    op: str                       # delete | update | merge
    cond: Cond | None = None      # DELETE / UPDATE: WHERE; MERGE: ON
    values: dict[str, Val] | None = None
    source: list[dict] | None = None
    clauses: list[Clause] | None = None

    def describe(self) -> str:
        if self.op == "delete":
            return f"DELETE WHERE {self.cond.sql()}"
        if self.op == "update":
            w = f" WHERE {self.cond.sql()}" if self.cond else ""
            return f"UPDATE SET {', '.join(f'{k} = {v.sql()}' for k, v in self.values.items())}{w}"
        cl = "; ".join(f"{c.kind} {c.action}" + (f" IF {c.cond.sql()}" if c.cond else "") +
                       (f" {{{', '.join(f'{k}: {v.sql()}' for k, v in c.values.items())}}}" if c.values else "")
                       for c in self.clauses)
        return f"MERGE ON {self.cond.sql()} ({len(self.source)} source rows): {cl}"


class Gen:
    """Random conditions, values and operations from one seeded generator."""

    def __init__(self, seed: int):
        self.r = random.Random(seed)
        self.next_id = 100

    def atom(self, side: str | None) -> Cond:
        r = self.r
        ref = lambda c: Ref(side, c)   # noqa: E731
        k = r.choice(["vcmp", "vcmp", "null", "notnull", "s", "p", "mod", "idcmp"])
        if k == "vcmp":
            return Cond(("cmp", ref("v"), r.choice(["<", ">", "=", "<>", "<=", ">="]), r.randint(-3, 9)))
        if k == "idcmp":
            return Cond(("cmp", ref("id"), r.choice(["<", ">", "="]), r.randint(0, 45)))
        if k == "null":
            return Cond(("null", ref(r.choice(["v", "s"]))))
        if k == "notnull":
            return Cond(("notnull", ref(r.choice(["v", "s"]))))
        if k == "s":
            return Cond(("cmp", ref("s"), r.choice(["=", "<>"]), r.choice(STRINGS)))
        if k == "p":
            return Cond(("cmp", ref("p"), "=", r.choice(PARTS)))
        return Cond(("mod", ref("id"), r.choice([2, 3, 4]), r.randint(0, 1)))

    def cond(self, sides: list[str | None], depth: int = 2) -> Cond:
        r = self.r
        if depth == 0 or r.random() < 0.4:
            return self.atom(r.choice(sides))
        k = r.choice(["and", "or", "and", "or", "and", "not"])
        if k == "not":
            return Cond(("not", self.cond(sides, depth - 1)))
        return Cond((k, self.cond(sides, depth - 1), self.cond(sides, depth - 1)))

    def value(self, col: str, sides: list[str | None]) -> Val:
        r = self.r
        side = r.choice(sides)
        ref = Ref(side, col)
        if col == "v":
            k = r.choice(["lit", "null", "add", "coalesce", "add2" if len(sides) > 1 else "add"])
            if k == "lit":
                return Val(("lit", r.randint(-5, 20)))
            if k == "null":
                return Val(("lit", None))
            if k == "add":
                return Val(("add", ref, r.randint(-3, 5)))
            if k == "coalesce":
                return Val(("coalesce", ref, r.randint(0, 3)))
            return Val(("add2", Ref("t", "v"), Ref("s", "v")))
        if col == "s":
            k = r.choice(["lit", "null", "concat", "ref"])
            if k == "lit":
                return Val(("lit", r.choice(STRINGS)))
            if k == "null":
                return Val(("lit", None))
            if k == "concat":
                return Val(("concat", ref, r.choice(["!", "x"])))
            return Val(("ref", ref))
        if col == "p":
            return Val(("lit", r.choice(PARTS)))
        return Val(("add", ref, 1000))            # id: keeps ids apart from the others

    def assignments(self, sides: list[str | None], with_id: bool = False) -> dict[str, Val]:
        r = self.r
        cols = r.sample(["v", "s", "p"] + (["id"] if with_id else []), r.randint(1, 2))
        return {c: self.value(c, sides) for c in cols}

    def step(self, rows: list[dict]) -> Step:
        r = self.r
        if len(rows) < 20:              # keep the table from emptying: a MERGE that mostly inserts
            return self.merge(rows, new_keys=0.8)
        op = r.choices(["delete", "update", "merge"], [0.25, 0.3, 0.45])[0]
        if op == "delete":            # usually narrowed by a second conjunct
            cond = self.cond([None]) if r.random() < 0.15 else Cond(("and", self.cond([None], 1), self.atom(None)))
            return Step("delete", cond)
        if op == "update":
            cond = self.cond([None]) if r.random() < 0.9 else None
            return Step("update", cond, self.assignments([None], with_id=r.random() < 0.1))
        return self.merge(rows)

    def merge(self, rows: list[dict], new_keys: float = 0.35) -> Step:
        r = self.r
        ids = [x["id"] for x in rows if x["id"] is not None]
        n = r.randint(3, 9)
        keys: list[int | None] = []
        for _ in range(n):
            u = r.random()
            if u < 0.9 - new_keys and ids:
                keys.append(r.choice(ids))
            elif u < 0.9:
                self.next_id += 1
                keys.append(self.next_id)
            else:
                keys.append(None)
        if r.random() > 0.15:           # usually one source row per key (a duplicate tests the error)
            seen: set = set()
            keys = [k for k in keys if k is None or not (k in seen or seen.add(k))]
        source = [{"id": k, "p": r.choice(PARTS), "v": r.choice([None, r.randint(-3, 9), r.randint(-3, 9)]),
                   "s": r.choice([None] + STRINGS)} for k in keys]
        on = Cond(("eq", Ref("t", "id"), Ref("s", "id")))
        extra = r.choice([None, None, "p", "s-notnull", "t-v"])
        if extra == "p":
            on = Cond(("and", on, Cond(("eq", Ref("t", "p"), Ref("s", "p")))))
        elif extra == "s-notnull":
            on = Cond(("and", on, Cond(("notnull", Ref("s", "v")))))
        elif extra == "t-v":
            on = Cond(("and", on, Cond(("cmp", Ref("t", "v"), ">", r.randint(-3, 4)))))
        clauses: list[Clause] = []
        for kind, sides, actions in (("matched", ["t", "s"], ["update", "update", "updateAll", "delete"]),
                                     ("notMatched", ["s"], ["insert", "insertAll"]),
                                     ("notMatchedBySource", ["t"], ["update", "delete"])):
            k = r.choices([0, 1, 2], [0.3, 0.45, 0.25])[0]
            for i in range(k):
                a = r.choice(actions)
                last = i == k - 1
                # the last clause of a kind may go without a condition (rarely by source: it
                # would reach every unmatched row of the table)
                bare = 0.5 if kind != "notMatchedBySource" else 0.1
                cond = self.cond(sides, 1) if not last or r.random() > bare else None
                if kind == "notMatchedBySource" and cond is not None and r.random() < 0.6:
                    cond = Cond(("and", cond, self.atom("t")))
                if a == "update":
                    clauses.append(Clause(kind, "update", cond, self.assignments(sides)))
                elif a == "updateAll":
                    clauses.append(Clause(kind, "update", cond, None))
                elif a == "delete":
                    clauses.append(Clause(kind, "delete", cond, None))
                elif a == "insertAll":
                    clauses.append(Clause(kind, "insert", cond, None))
                else:
                    vals = {"id": Val(("ref", Ref("s", "id"))), "p": Val(("ref", Ref("s", "p")))}
                    vals.update({c: self.value(c, ["s"]) for c in r.sample(["v", "s"], r.randint(0, 2))})
                    clauses.append(Clause(kind, "insert", cond, vals))
        if not clauses:
            clauses.append(Clause("notMatched", "insert", None, None))
        # the kinds interleaved at random; the order within a kind is kept
        order: list[Clause] = []
        pools = {k: [c for c in clauses if c.kind == k] for k in ("matched", "notMatched", "notMatchedBySource")}
        while any(pools.values()):
            k = r.choice([k for k, v in pools.items() if v])
            order.append(pools[k].pop(0))
        return Step("merge", on, source=source, clauses=order)


def sequence(seed: int, n: int, rows: list[dict]) -> list[Step]:
    """`n` operations from `seed`, each generated against the oracle's rows before it (so
    MERGE sources reuse live ids)."""
    gen = Gen(seed)
    oracle = Oracle(rows)
    out = []
    for _ in range(n):
        step = gen.step(oracle.rows())
        out.append(step)
        try:
            oracle.apply(step)
        except MultipleMatches:
            pass
    return out


# --- the oracle ---------------------------------------------------------------------------------

class MultipleMatches(Exception):
    pass


class Oracle:
    """The table as a pandas DataFrame; each operation applied by hand (see the module docstring)."""

    def __init__(self, rows: list[dict]):
        self.df = pd.DataFrame(rows, columns=COLS, dtype=object)

    def rows(self) -> list[dict]:
        return [{c: (None if pd.isna(v) else v) for c, v in r.items()} for r in self.df.to_dict("records")]

    def apply(self, step: Step) -> dict[str, int]:
        """Apply `step`; returns {deleted, updated, inserted}. MultipleMatches: the MERGE fails
        (the frame is left as it was)."""
        rows = self.rows()
        if step.op == "delete":
            keep = [step.cond.eval(r, None) is not True for r in rows]
            self.df = self.df[pd.Series(keep, index=self.df.index)].reset_index(drop=True)
            return {"deleted": keep.count(False), "updated": 0, "inserted": 0}
        if step.op == "update":
            hit = [step.cond is None or step.cond.eval(r, None) is True for r in rows]
            new = [dict(r, **{c: v.eval(r, None) for c, v in step.values.items()}) if h else r
                   for r, h in zip(rows, hit)]
            self.df = pd.DataFrame(new, columns=COLS, dtype=object)
            return {"deleted": 0, "updated": hit.count(True), "inserted": 0}
        return self._merge(step, rows)

    def _merge(self, step: Step, rows: list[dict]) -> dict[str, int]:
        src = step.source
        matches = {i: [j for j, s in enumerate(src) if step.cond.eval(t, s) is True] for i, t in enumerate(rows)}
        matched_clauses = [c for c in step.clauses if c.kind == "matched"]
        only_delete = len(matched_clauses) == 1 and matched_clauses[0].action == "delete" and matched_clauses[0].cond is None
        if any(len(js) > 1 for js in matches.values()) and not only_delete:
            raise MultipleMatches()
        out, deleted, updated = [], 0, 0
        for i, t in enumerate(rows):
            js = matches[i]
            s = src[js[0]] if js else None
            kind = "matched" if js else "notMatchedBySource"
            clause = next((c for c in step.clauses if c.kind == kind and (c.cond is None or c.cond.eval(t, s) is True)),
                          None)
            if clause is None:
                out.append(t)
            elif clause.action == "delete":
                deleted += 1
            else:
                vals = {c: s[c] for c in COLS} if clause.values is None else \
                    {c: v.eval(t, s) for c, v in clause.values.items()}
                out.append(dict(t, **vals))
                updated += 1
        hit = {j for js in matches.values() for j in js}
        inserted = 0
        for j, s in enumerate(src):
            if j in hit:
                continue
            clause = next((c for c in step.clauses if c.kind == "notMatched" and
                           (c.cond is None or c.cond.eval(None, s) is True)), None)
            if clause is not None:
                vals = dict(s) if clause.values is None else {c: v.eval(None, s) for c, v in clause.values.items()}
                out.append({c: vals.get(c) for c in COLS})
                inserted += 1
        self.df = pd.DataFrame(out, columns=COLS, dtype=object)
        return {"deleted": deleted, "updated": updated, "inserted": inserted}


# --- running a sequence through tahoe's Spark-free API --------------------------------------------

BUILDER = {("matched", "update"): "when_matched_update", ("matched", "delete"): "when_matched_delete",
           ("notMatched", "insert"): "when_not_matched_insert",
           ("notMatchedBySource", "update"): "when_not_matched_by_source_update",
           ("notMatchedBySource", "delete"): "when_not_matched_by_source_delete"}


def run_arrow(path: str, step: Step) -> dict[str, int]:
    if step.op == "delete":
        m = tahoe.delete(path, step.cond.sql())
        return {"deleted": m["numDeletedRows"], "updated": 0, "inserted": 0}
    if step.op == "update":
        m = tahoe.update(path, {c: v.sql() for c, v in step.values.items()},
                         predicate=step.cond.sql() if step.cond else None)
        return {"deleted": 0, "updated": m["numUpdatedRows"], "inserted": 0}
    mb = tahoe.merge(path, arrow(step.source), step.cond.sql(), source_alias="s", target_alias="t")
    for c in step.clauses:
        pred = c.cond.sql() if c.cond else None
        vals = {k: v.sql() for k, v in c.values.items()} if c.values else None
        if c.action == "delete":
            mb = getattr(mb, BUILDER[(c.kind, c.action)])(pred)
        elif vals is None:
            mb = (mb.when_matched_update_all if c.kind == "matched" else mb.when_not_matched_insert_all)(pred)
        else:
            mb = getattr(mb, BUILDER[(c.kind, c.action)])(vals, pred)
    m = mb.execute()
    return {"deleted": m["numTargetRowsDeleted"], "updated": m["numTargetRowsUpdated"],
            "inserted": m["numTargetRowsInserted"]}


def check_sequence(path: str, steps: list[Step], run, read) -> None:
    """Run `steps` with `run(path, step)`; after each, the rows `read(path)` returns equal the
    oracle's and so do the counts; a step the oracle fails must fail and commit nothing."""
    oracle = Oracle(initial_rows())
    for i, step in enumerate(steps):
        what = f"step {i}: {step.describe()}"
        before = latest_version(path)
        try:
            want = oracle.apply(step)
        except MultipleMatches:
            with pytest.raises(DeltaUnsupportedOperationException,
                               match="DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"):
                run(path, step)
            assert latest_version(path) == before, what
            continue
        got = run(path, step)
        assert got == want, what
        assert sorted_rows(read(path), COLS) == sorted_rows(arrow(oracle.rows()), COLS), what


VARIANTS = {   # name -> (partitioned, deletion vectors)
    "cow-flat": (False, False),
    "cow-partitioned": (True, False),
    "dv-flat": (False, True),
    "dv-partitioned": (True, True),
}
SEEDS = {"cow-flat": 11, "cow-partitioned": 12, "dv-flat": 13, "dv-partitioned": 14}
STEPS = 36


def make_table(path: str, partitioned: bool, dv: bool) -> None:
    write_table(path, arrow(initial_rows()), partition_by=["p"] if partitioned else None, target_file_rows=4,
                properties={"delta.enableDeletionVectors": str(dv).lower()})


def test_sequences_exercise_every_clause_kind_and_nulls():
    """The generator covers what the sequences are for: every MERGE clause kind and action,
    update-all / insert-all, NULL-bearing conditions, a duplicate-match failure."""
    steps = [s for seed in SEEDS.values() for s in sequence(seed, STEPS, initial_rows())]
    kinds = {(c.kind, c.action, c.values is None) for s in steps if s.op == "merge" for c in s.clauses}
    assert {("matched", "update", False), ("matched", "update", True), ("matched", "delete", True),
            ("notMatched", "insert", False), ("notMatched", "insert", True),
            ("notMatchedBySource", "update", False), ("notMatchedBySource", "delete", True)} <= kinds
    assert {"delete", "update", "merge"} == {s.op for s in steps}
    sql = " ".join(s.describe() for s in steps)
    assert "IS NULL" in sql and "NULL" in sql.replace("IS NULL", "").replace("IS NOT NULL", "")
    oracle_failures = 0
    for seed in SEEDS.values():
        o = Oracle(initial_rows())
        for s in sequence(seed, STEPS, initial_rows()):
            try:
                o.apply(s)
            except MultipleMatches:
                oracle_failures += 1
    assert oracle_failures >= 1


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_random_dml_sequence_matches_pandas(variant, tmp_path):
    partitioned, dv = VARIANTS[variant]
    path = str(tmp_path / "t")
    make_table(path, partitioned, dv)
    steps = sequence(SEEDS[variant], STEPS, initial_rows())
    check_sequence(path, steps, run_arrow, lambda p: tahoe.Table(p).to_arrow())
    # delta-rs reads the result (deletion vectors through its QueryBuilder)
    oracle = Oracle(initial_rows())
    for s in steps:
        try:
            oracle.apply(s)
        except MultipleMatches:
            pass
    (r,) = run_deltars([{"path": path, "ops": []}], tmp_path / "rs")
    assert r["error"] is None, r["error"]
    assert sorted_rows(r["rows"], COLS) == sorted_rows(arrow(oracle.rows()), COLS)

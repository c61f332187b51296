"""tahoe's multi-part checkpoint partitioning is Spark's: delta-spark writes part
`pmod(hash(coalesce(add.path, remove.path)), numParts)`, and Spark's own `hash()`/`pmod()` is the
oracle here, over paths of every length (each tail size of the 4-byte-word hash), non-ASCII
paths (sign-extended tail bytes) and null (non-file actions)."""

from __future__ import annotations

import random

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from tahoe.log.checkpoint_parts import checkpoint_part_of


def _paths() -> list[str | None]:
    rnd = random.Random(7)
    alphabet = "abcXYZ0189-_=/.%" + "éüß東京€😀"
    out: list[str | None] = ["", None, "a", "ab", "abc", "abcd", "é", "東", "😀"]
    for n in range(1, 90):
        out.append("".join(rnd.choice(alphabet) for _ in range(n)))
    out += [f"part-{i:05d}-3f1c2b7e-0a4d-4c6e-9f5b-{i:012d}.c000.snappy.parquet" for i in range(40)]
    out += [f"day=2024-05-{i % 28 + 1:02d}/part-{i:05d}.parquet" for i in range(40)]
    return out


def test_checkpoint_part_of_is_sparks_hash_partitioning(spark):
    paths = _paths()
    df = spark.createDataFrame([(i, p) for i, p in enumerate(paths)],
                               StructType([StructField("i", IntegerType()), StructField("p", StringType())]))
    for parts in (2, 3, 7, 10):
        rows = df.select("i", F.pmod(F.hash("p"), F.lit(parts)).alias("part")).collect()
        expected = [r["part"] for r in sorted(rows, key=lambda r: r["i"])]
        got = checkpoint_part_of(pa.array(paths, pa.string()), parts).tolist()
        assert got == expected, parts

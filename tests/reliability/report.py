"""Group the failures written by KAFKALOG_HARNESS_REPORT=FILE into classes (reader, damage kind,
problem) with a count and one example each: ``.venv/bin/python -m reliability.report FILE``
(run from tests/). ``--readers`` merges a reader with its opt-out twin only when asked."""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict


def damage_kind(name: str) -> str:
    """The damage without its file, positions and numbers: "flip-crc records middle"."""
    family, _, what = name.partition(":")
    if family == "random":
        return "random"
    what = re.sub(r"\d{20}\.(log|index|timeindex)", lambda m: f"X.{m.group(1)}", what)
    what = re.sub(r"batch@\d+", "batch", what)
    what = re.sub(r"\bbyte \d+", "byte", what)
    what = re.sub(r"\bat \d+", "at", what)
    what = re.sub(r"\[\d+, \d+\)", "[a, b)", what)
    what = re.sub(r"\(seed \d+\)", "", what)
    what = re.sub(r"\b\d+ (random|zero) bytes", r"N \1 bytes", what)
    return f"{family}: {what.strip()}"


def problem_kind(text: str) -> str:
    text = re.sub(r"/tmp/\S+", "PATH", text)
    text = re.sub(r"\d{20}\.log", "X.log", text)
    text = re.sub(r"-?\d+", "N", text)
    return text.split(":")[0][:90]


def main(path: str) -> None:
    groups: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    with open(path) as f:
        for line in f:
            x = json.loads(line)
            for p in x["problems"]:
                groups[(x["reader"], problem_kind(p), damage_kind(x["damage"]))].append(x)
    by_problem: dict[tuple[str, str], dict[str, list[dict]]] = defaultdict(dict)
    for (reader, problem, damage), xs in groups.items():
        by_problem[(reader, problem)][damage] = xs
    for (reader, problem), damages in sorted(by_problem.items()):
        total = sum(len(v) for v in damages.values())
        print(f"== {reader} | {problem} | {total} cases")
        for damage, xs in sorted(damages.items(), key=lambda kv: -len(kv[1]))[:12]:
            ex = xs[0]
            print(f"   {len(xs):4d} x {damage}")
            print(f"        e.g. {ex['source']} / {ex['damage']}")
            print(f"        expected: {ex['expected'][:300]}")
            print(f"        problems: {'; '.join(ex['problems'])[:300]}")
            print(f"        got: {ex['got'][:300]}")
        if len(damages) > 12:
            print(f"   ... and {len(damages) - 12} more damage kinds")


if __name__ == "__main__":
    main(sys.argv[1])

"""Run one harness case by hand and keep the damaged copy::

    cd tests && ../.venv/bin/python -m reliability.case SOURCE 'DAMAGE TEXT' [READER,READER]

SOURCE is a source name of damage.py (``v2-none``, ``v2-txn``, ``legacy-v0v1``, ``real:...``);
the first enumerated damage whose name contains DAMAGE TEXT is applied: give the damage's name as
a failure prints it (``flip-crc:00000000000000000000.log byte 876 ^0x10``; ``random:seed S/K``
names a random one). Prints the expected outcome, each disagreeing reader's failure (with the
command to run again) and where the damaged copy was kept.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from .contract import run_case
from .damage import SOURCES, grid, random_damages
from .expected import expected_for
from .readers import READERS


def main(argv: list[str]) -> int:
    source_name, text = argv[0], argv[1]
    wanted = argv[2].split(",") if len(argv) > 2 else None
    readers = [r for r in READERS if wanted is None or r.name in wanted]
    source = next(s for s in SOURCES if s.name == source_name)
    work = Path(tempfile.mkdtemp(prefix="kafkalog-case-"))
    root = work / "source"
    source.build(root)
    part = root / source.dirname
    damages = grid(part)
    if text.startswith("random:seed "):
        seed, k = text.split()[1].rstrip(":").split("/")
        damages = random_damages(part, int(seed), int(k) + 1)
    matching = [d for d in damages if text in d.name]
    if not matching:
        print(f"no damage of {source_name} contains {text!r}", file=sys.stderr)
        return 2
    damage = matching[0]
    print(f"damage: {damage.name}")
    failures = run_case(source, root, damage, work, readers)
    for f in failures:
        print(f"\n{f}")
    kept = sorted(work.glob("case-*"))
    if kept:
        print(f"\ndamaged copy kept at {kept[0]}")
        print(f"expected: {expected_for(kept[0] / source.dirname).describe()}")
    else:
        print("\nevery reader agrees with the contract")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

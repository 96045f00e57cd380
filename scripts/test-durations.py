"""Write tests/durations.json, each test module's time in a whole run, from JUnit reports
(`make test` writes one per shard: var/test-report-*.xml). tests/shards.py balances the shards
with it; a module it does not know is still run, at an estimated cost.

    usage: python scripts/test-durations.py REPORT.xml...
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "durations.json"


def module_of(classname: str) -> str:
    """`tests.integration.test_x.TestY` -> `tests/integration/test_x.py`."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        if parts[end - 1].startswith("test_"):
            return "/".join(parts[:end]) + ".py"
    return "/".join(parts) + ".py"


def main(reports: list[str]) -> int:
    if not reports:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    seconds: dict[str, float] = defaultdict(float)
    for report in reports:
        for case in ET.parse(report).iter("testcase"):  # noqa: S314 (our own pytest reports)
            seconds[module_of(case.get("classname", ""))] += float(case.get("time") or 0)
    OUT.write_text(json.dumps({m: round(s, 1) for m, s in sorted(seconds.items())}, indent=1) + "\n")
    print(f"{OUT}: {len(seconds)} modules, {sum(seconds.values()) / 60:.1f} minutes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

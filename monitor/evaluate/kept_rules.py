"""The rule files as the evaluate stage reads them every cycle, validated again only when one of
them changed.

Operators change thresholds without a restart, so every evaluation reads `evaluate.rules_dir`;
validating the shipped pack (YAML, the conditions' SQL parsed, the templates compiled) costs about
half a CPU-second, twice a minute, for files that almost never change. A file is taken as
unchanged while its identity and times are (`stat`: device, inode, size, modification and
change times in nanoseconds), and the set of files is the same list: an edit, a file added or
removed, and a link swapped to a new version (a Kubernetes ConfigMap's update) each read the files
again. A bad file stays bad, and its problems are reported again by each evaluation, from the
kept result."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from monitor.evaluate.rules import RuleSet, load_rules, rule_files

_Stamp = tuple[str, tuple[int, int, int, int, int] | None]


def _stamp(path: Path) -> _Stamp:
    """What says a file may have changed; None for one that cannot be read (the loader reports it)."""
    try:
        st = path.stat()
    except OSError:
        return str(path), None
    return str(path), (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class KeptRules:
    """The rules of `directory` (None: the shipped ones), loaded again only when a file changed."""

    def __init__(self, directory: Path | None) -> None:
        self._directory = directory
        self._stamps: Sequence[_Stamp] | None = None
        self._ruleset: RuleSet | None = None

    def load(self) -> RuleSet:
        paths = rule_files(self._directory)
        stamps = [_stamp(path) for path in paths]
        if self._ruleset is None or stamps != self._stamps:
            self._ruleset = load_rules(paths)
            self._stamps = stamps
        return self._ruleset

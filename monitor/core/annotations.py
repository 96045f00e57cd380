"""A finding's annotations: the named texts a rule gives its findings besides the summary and
description (`runbook`, `dashboard`, anything an operator adds to a rule file).

They travel as one map, name -> text, from the rule to the finding, the alert, every
notification, the alerts page and API, and the Prometheus rule export; nothing between knows
their names, so a new one is a rule-file change only. Each value is a template of the rule,
rendered per finding in the same sandbox as the summary, and bounded here: how many a rule may
have, what a name looks like, how long a rendered value may be.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

MAX_ANNOTATIONS: Final = 16
"""Annotations one rule may carry."""

MAX_ANNOTATION_TEXT: Final = 2_048
"""Characters an annotation's value may render to; a longer one is cut there, with a note."""

RUNBOOK: Final = "runbook"
"""The annotation whose value must render to an http(s) URL (a rule's top-level `runbook:` is
read as it)."""

FIRST_CLASS: Final = frozenset({"summary", "description"})
"""Names a rule gives with their own keys, not as annotations."""

ANNOTATION_NAME: Final = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_URL: Final = re.compile(r"^https?://[^\s<>|\"'`]+$")


def is_link(value: Any) -> bool:
    """Whether an annotation's value is shown as a link: an http(s) URL and nothing else."""
    return isinstance(value, str) and _URL.match(value) is not None


def name_problems(annotations: Mapping[Any, Any]) -> list[str]:
    """Why the names and values of a rule's `annotations:` map are not acceptable (empty: they
    are): too many, a name that is not lowercase snake_case or is given its own key, a value that
    is not text."""
    problems = []
    if len(annotations) > MAX_ANNOTATIONS:
        problems.append(f"{len(annotations)} annotations; a rule may carry at most {MAX_ANNOTATIONS}")
    for name, value in annotations.items():
        if not isinstance(name, str) or not ANNOTATION_NAME.match(name):
            problems.append(
                f"annotation name {name!r} must be lowercase letters, digits and '_', starting with a "
                "letter, at most 40 characters (e.g. dashboard)"
            )
        elif name in FIRST_CLASS:
            problems.append(f"annotation {name!r} is a key of the rule itself; give it as `{name}:` there")
        if not isinstance(value, str) or not value.strip():
            problems.append(f"annotation {name}: give a non-empty text (a template like the summary)")
    return problems


def rendered_problem(name: str, value: str) -> str | None:
    """Why `value`, an annotation rendered on a sample finding, is not acceptable (None: it is):
    a runbook that is not an http(s) URL."""
    if name == RUNBOOK and not is_link(value):
        return f"runbook renders to {value[:80]!r}, which is not an http(s) URL"
    return None


def annotations_of(value: Any) -> dict[str, str]:
    """A stored annotations map (JSONB, or a payload written before annotations) as name -> text."""
    if not isinstance(value, Mapping):
        return {}
    return {str(k): str(v) for k, v in value.items() if v is not None}

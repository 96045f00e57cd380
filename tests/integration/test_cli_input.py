"""Hostile values on the command line, through its real entry point (`kafka-health` is
`monitor.cli.main:main`) against a real PostgreSQL: every error is one line on stderr naming the
problem, exit status 2, no traceback and no SQL. Ids of 2^63 and more used to reach the database
(`retention approve` printed the statement PostgreSQL refused); `²` and 5,000-digit ids used to
end in a traceback of `int()`; `٣` was read as 3."""

from __future__ import annotations

import pytest

from monitor.cli.main import main

HUGE = "1" * 5_000
NOT_AN_ID = ["²", "٣", HUGE, str(2**63), "0", "1.5", "1_0"]

CASES: list[tuple[list[str], str]] = [
    *((["alerts", "ack", bad], "incident") for bad in ["9" * 30, HUGE, str(2**63)]),
    *((["alerts", "expire", bad], "silence id must be a whole number") for bad in NOT_AN_ID),
    *((["retention", command, bad, *extra], "request id must be a whole number") for bad in NOT_AN_ID
      for command, extra in [("approve", []), ("reject", ["-m", "no"]), ("revert", []),
                             ("extend", ["--for", "1d", "-m", "x"]), ("show", [])]),
    *((["repair", command, bad, *extra], "repair id must be a whole number") for bad in NOT_AN_ID
      for command, extra in [("approve", []), ("reject", ["-m", "no"]), ("show", [])]),
    *((["repair", command, bad, *extra], "finding id must be a whole number") for bad in NOT_AN_ID
      for command, extra in [("preview", []), ("request", ["-m", "x"])]),
    *((["retention", "raise", "c", "t", "--for", "1d", "-m", "x", "--retention-ms", bad], "--retention-ms")
      for bad in ["²", "٣", HUGE, str(2**63), "0", "1.5", "true"]),
    *((["retention", "raise", "c", "t", "--for", "1d", "-m", "x", "--retention-bytes", bad], "--retention-bytes")
      for bad in ["²", "٣GiB", HUGE, str(2**63)]),
    *((["retention", "raise", "c", "t", "--for", bad, "-m", "x", "--retention-ms", "2d"], "bad duration")
      for bad in ["٣d", "²h", HUGE]),
    *((["alerts", "silence", "team=payments", "-m", "x", "--for", bad], "--for") for bad in ["٣h", "²m", HUGE]),
    *((["alerts", "silence", "team=payments", "-m", "x", "--start", bad], "--start")
      for bad in ["0001-01-01T00:00:00Z", "2026-11-21T22:00:00", "٢٠٢٦-11-21T22:00:00Z", HUGE]),
    *((["alerts", "outbox", "--limit", bad], "--limit must be a whole number") for bad in ["٣", "0", HUGE]),
    (["retention", "approve"], "Missing argument 'REQUEST_ID'"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "named"), CASES, ids=[" ".join(a)[:70] for a, _ in CASES])
def test_a_bad_value_is_one_line_naming_it_and_exit_status_2(
    args: list[str],
    named: str,
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DATABASE_URL", db_url)
    with pytest.raises(SystemExit) as exited:
        main(args)
    said = capsys.readouterr()
    lines = said.err.splitlines()
    assert exited.value.code == 2, said
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], said.err[:500]
    assert len(lines[0]) < 400 and "Traceback" not in said.err and "SELECT" not in said.err.upper()

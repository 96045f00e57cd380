"""Act stage: the retention button (requests, guardrails, review, apply, revert, audit)."""

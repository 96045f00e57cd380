"""Notify: the durable outbox, the sender that drains it, the retry policy decided from typed
failure reasons, and the re-check that drops a notice no longer true when it is due."""

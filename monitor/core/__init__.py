"""The kernel every layer may import: settings, operator files, vocabulary, records, clock, errors."""

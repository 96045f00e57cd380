"""Alert stage: alert lifecycle from findings, routing, silences, inhibition and durable delivery."""

"""Dispatch (steps 3 and 4 of a cycle): the route tree, notification groups, and the timing,
escalation and acknowledgement decisions of each group's incident."""

"""`python -m monitor` is `kafka-health`."""

from monitor.cli import main

main()

"""`python -m monitor` is `kafka-health`."""

from monitor.cli.main import main

main()

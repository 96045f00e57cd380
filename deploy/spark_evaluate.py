"""The file spark-submit runs for one evaluation (spark-submit takes a Python file, not a module):

    spark-submit --master spark://host:7077 --jars postgresql-42.7.4.jar \\
        deploy/spark_evaluate.py --config monitor.yaml [--evaluated-at 2031-03-01T12:00:00Z]

The arguments after the file are those of `monitor.evaluate.submit.main` (`--help` lists them); the
`monitor` package must be importable by the driver's Python. README.md, "Running the evaluation
on a Spark cluster", covers the jars, the Python files and the masters.

It lives outside the package on purpose: Python puts a script's own folder first on `sys.path`,
where the package's module names (`io`, `types`, `kafka` ...) would hide other modules.
"""

import sys
from pathlib import Path

import monitor
from monitor.evaluate.submit import main

if __name__ == "__main__":
    # Which copy of the package runs (an installed one, or the zip given to --py-files) is the
    # first question when a cluster's result surprises.
    print(f"spark_evaluate: the monitor package from {Path(monitor.__file__).parents[1]}", file=sys.stderr)
    main()

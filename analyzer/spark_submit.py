"""``analyze lake build`` as spark-submit's main file: the driver on the cluster's terms.

::

    spark-submit --master spark://HOST:7077 --conf spark.executor.memory=4g \\
        "$(python -c 'import analyzer.spark_submit as m; print(m.__file__)')" \\
        s3a://proxy-logs/2026-11-23/ --lake /shared/lake --metrics metrics/

The arguments are those of ``analyze lake build`` (``analyze lake build -h``);
the master and the settings are spark-submit's. The driver needs the analyzer
installed (its SQL files come with it); the executors get it from the driver
(:mod:`analyzer.questions.spark.ship`).
"""

import sys
from pathlib import Path

if __name__ == "__main__":
    # Run as a file, this file's folder (the package's) is first on sys.path, where the
    # package's own folders would stand for top-level modules (analyzer/io for io).
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    from analyzer.cli.app import main

    main(["lake", "build", *sys.argv[1:]])

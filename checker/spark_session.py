"""The SparkSession every Spark workload here uses (the Spark engine, simulation campaigns)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

LOG4J = Path(__file__).with_name("log4j2.properties")


def session(master: str = "local[*]", app: str = "rebalance-check"):
    """A quiet SparkSession on ``master`` (no UI, no console progress bar, errors-only
    logging through log4j2.properties beside this file, SPARK_LOCAL_IP on loopback,
    shuffle partitions matched to cores). Raises MissingExtra (a ConfigError) without
    the ``[spark]`` extra."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYTHONHASHSEED", "0")  # RDD.lookup's partitioner insists
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from rebalance.extras import require
    require("spark", "Spark (--engine spark, simulate)")
    from pyspark.sql import SparkSession

    cores = os.cpu_count() or 2
    java_opts = f"-Dlog4j2.configurationFile=file:{LOG4J}"
    spark = (SparkSession.builder.master(master).appName(app)
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(cores))
             .config("spark.default.parallelism", str(cores))
             .config("spark.driver.extraJavaOptions", java_opts)
             .config("spark.executor.extraJavaOptions", java_opts)
             .config("spark.executorEnv.PYTHONHASHSEED", "0")
             # a cluster's executors register after the session starts: a barrier stage (the engine's
             # owners) waiting for their slots asks again every second, for up to two minutes
             .config("spark.scheduler.barrier.maxConcurrentTasksCheck.interval", "1s")
             .config("spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures", "120")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark

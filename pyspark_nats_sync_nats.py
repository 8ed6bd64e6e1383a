"""``format("nats")`` for Spark's lookup of installed Python data sources.

Spark (4.0+) imports every top-level module whose name starts with ``pyspark_`` and
registers its ``DefaultSource`` under the name that class gives: this module is how a
session finds ``format("nats")`` without ``nats_sync.spark.register``. The lookup
runs once per driver JVM (or Spark Connect server), in a Python worker started with
``PYSPARK_PYTHON``, so it sees what that interpreter has installed.

A re-export and nothing else. An import error here would make Spark skip the lookup of
every installed Python data source, other packages' too, so where nats_sync's spark
extra is missing (pyarrow) this module offers no ``DefaultSource`` and the lookup goes
on; ``register`` then names what is missing.
"""

try:  # DefaultSource: the name Spark's lookup takes
    from nats_sync.spark.datasource import NatsDataSource as DefaultSource  # noqa: F401
except ImportError:  # the spark extra is missing: no source here, and no error
    pass

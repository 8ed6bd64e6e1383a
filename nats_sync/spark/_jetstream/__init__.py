"""The "jetstream" data source's parts: the driver's reader (``source``) and its
planning (``plan``), the tasks' reads (``read``), the sink (``sink``, with its rows as
lists, ``rows``, fast-ingest batches, ``fast``, and the streaming commit log,
``commits``), and riding through a cluster's transient failures (``retry``). The
public data source class is ``nats_sync.spark.jetstream.JetStreamDataSource``.
"""

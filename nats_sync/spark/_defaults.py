"""The defaults and limits of Spark's data sources, sinks and lookup UDFs, as named constants.

No logic lives here, and nothing of the core: each extension keeps its own facts
(the core's are in ``nats_sync._defaults``). Times are in seconds, sizes in bytes.
"""

from __future__ import annotations

#: Seconds a request UDF and a key-value lookup UDF wait for each answer.
SPARK_REQUEST_TIMEOUT = 2.0
SPARK_KV_LOOKUP_TIMEOUT = 5.0
#: format("nats"): the sink's flush timeout; the streaming source's buffer (messages)
#: and the rows it gives one micro-batch at most.
SPARK_WRITE_TIMEOUT = 10.0
SPARK_MAX_BUFFERED = 100_000
SPARK_MAX_ROWS_PER_BATCH = 10_000
#: Sequences one read task covers at most (more tasks for a larger range).
SPARK_JS_MAX_SEQ_PER_PARTITION = 100_000
#: format("jetstream"): seconds per API call of the source (an answer takes milliseconds;
#: a call a dead node's leader never answers is asked again sooner, within
#: ``retryTimeout``), messages per pull, rows per Arrow batch.
SPARK_JS_TIMEOUT = 2.0
SPARK_JS_FETCH_BATCH = 5_000
SPARK_JS_ROWS_PER_BATCH = 10_000
#: Seconds between reads of a replica found behind its leader.
SPARK_JS_LAG_RETRY_WAIT = 0.1
#: Seconds the sink waits for each acknowledgement: an ack lost to a node's crash is
#: waited for this long before the task sends its rows again, so it is kept short.
SPARK_JS_ACK_TIMEOUT = 5.0
#: Seconds an async write still waits for its acks once its connection was remade, or
#: once a publish found no stream answering (acks of rows sent before are lost with the
#: old connection, or with the stream leader that died), and how often it looks.
SPARK_JS_ACKS_AFTER_RECONNECT = 1.0
SPARK_JS_RECONNECT_CHECK_INTERVAL = 0.25
#: Seconds a task waits beyond the ack timeout for the last futures to settle (the
#: context's ack timer fails each one at its timeout; this only guards against a stall).
SPARK_JS_SETTLE_GRACE = 5.0
#: Messages per flow-control ack the sink asks for (the server may lower it), and
#: acks outstanding before ``add`` waits: the product is the messages in flight at most.
SPARK_JS_FAST_FLOW = 500
SPARK_JS_FAST_MAX_OUTSTANDING_ACKS = 2
#: format("jetstream"): seconds a driver call, a read or a write task may keep retrying
#: what a cluster gets over by itself (a node restart, a leader election: 4-9 s after a
#: crash) before the query fails (option ``retryTimeout``); the first wait between tries,
#: doubling up to the last.
SPARK_JS_RETRY_TIMEOUT = 60.0
SPARK_JS_RETRY_FIRST_WAIT = 0.25
SPARK_JS_RETRY_MAX_WAIT = 2.0
#: Bytes of its input a write task keeps to send again after a transient failure; a
#: task with more input than this is retried by Spark instead (the whole task).
SPARK_JS_RETRY_KEEP_BYTES = 64 * 1024 * 1024
#: Seconds the child interpreter may take to import nats_sync; past it nothing is said.
SPARK_WORKER_PYTHON_CHECK_TIMEOUT = 30.0

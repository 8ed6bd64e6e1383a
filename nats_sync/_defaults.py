"""Every default and limit of nats_sync, as named constants, in one place.

No logic lives here. Times are in seconds, sizes in bytes.
"""

from __future__ import annotations

# --- connecting --------------------------------------------------------------------
DEFAULT_PORT = 4222
DEFAULT_URL = "nats://127.0.0.1:4222"
DEFAULT_CONNECT_TIMEOUT = 2.0
DEFAULT_INBOX_PREFIX = "_INBOX"
#: nats-py's ``flusher_queue_size`` default; accepted by ``connect()`` and ignored (the
#: writer thread takes everything queued at once, so there is no flusher queue to size).
NATS_PY_FLUSHER_QUEUE_SIZE = 1024
#: The default JetStream API prefix (``nc.jetstream(api_prefix=...)``, ``nc.jsm(prefix=...)``).
DEFAULT_JS_API_PREFIX = "$JS.API"
#: Seconds for JetStream API calls when the context is not told otherwise.
DEFAULT_JS_TIMEOUT = 5.0
#: publish_async acks awaited at once, and how long a full window waits for room.
DEFAULT_JS_MAX_PENDING_ACKS = 4000
DEFAULT_JS_STALL_WAIT = 0.2
#: JetStream publish (``publish``, ``publish_async``): attempts after a "no responders"
#: answer (no stream yet, or its leader changing), and seconds between them.
DEFAULT_JS_PUBLISH_RETRY_ATTEMPTS = 2
DEFAULT_JS_PUBLISH_RETRY_WAIT = 0.25
#: Headers of the WebSocket upgrade request that the upgrade itself writes, which
#: ``ws_connection_headers`` may therefore not set (lower case).
WS_RESERVED_HEADERS = frozenset(
    {"host", "upgrade", "connection", "sec-websocket-key", "sec-websocket-version"}
)

# --- reconnect ---------------------------------------------------------------------
DEFAULT_ALLOW_RECONNECT = True
DEFAULT_MAX_RECONNECT_ATTEMPTS = 60
DEFAULT_RECONNECT_TIME_WAIT = 2.0
#: Upper bound of the default exponential backoff between reconnect attempts.
MAX_RECONNECT_DELAY = 4.0
#: Jitter added to each backoff delay: plain and TLS pools (TLS handshakes cost more).
RECONNECT_JITTER = 0.1
RECONNECT_JITTER_TLS = 1.0

# --- keepalive ---------------------------------------------------------------------
DEFAULT_PING_INTERVAL = 120.0
DEFAULT_MAX_OUTSTANDING_PINGS = 2

# --- buffers -----------------------------------------------------------------------
#: Bytes of outgoing data the outbox holds (also the disconnect buffer).
DEFAULT_PENDING_SIZE = 2 * 1024 * 1024
DEFAULT_SUB_PENDING_MSGS_LIMIT = 512 * 1024
DEFAULT_SUB_PENDING_BYTES_LIMIT = 128 * 1024 * 1024
#: Size of the reader thread's receive buffer.
READ_BUFFER_SIZE = 256 * 1024
#: A reader thread that stepped aside for requesters reading their own replies looks at
#: the socket this often (for ops nobody waits for: PING, INFO) ...
READER_PARK_POLL = 0.01
#: ... and goes back to reading once no request was made for this long.
READER_LEAD_IDLE = 0.05
#: Payloads at least this large go to the socket as their own buffer (no copy); smaller
#: ones are joined into their frame. Below ~8 KiB the copy costs less than the frame list,
#: the extra ``sendmsg`` buffers and the writer's bookkeeping per message (4 KiB: 1.3x the
#: throughput, a quarter less CPU); from 16 KiB up not copying wins, more so with size
#: (benchmarks/large_payloads.py, BENCHMARKS.md).
LARGE_PAYLOAD_THRESHOLD = 8 * 1024
#: How many buffers one ``sendmsg`` call takes at most (IOV_MAX is 1024 on Linux).
MAX_IOVECS_PER_SEND = 256

# --- timeouts ----------------------------------------------------------------------
DEFAULT_REQUEST_TIMEOUT = 0.5
#: ``request_many``'s total wait: it gathers replies, so it waits longer than one reply.
DEFAULT_REQUEST_MANY_TIMEOUT = 1.0
DEFAULT_FLUSH_TIMEOUT = 10.0
#: ``sys.SystemClient``: the wait for one server's monitoring answer, and for all the
#: replies of a ``PING`` request in all.
DEFAULT_SYS_TIMEOUT = 5.0
#: ``sys.SystemClient``: a ``PING`` request ends this long after the last reply came (each
#: server answers once; orbit.go's natssysclient waits the same 300 ms).
DEFAULT_SYS_STALL = 0.3
DEFAULT_DRAIN_TIMEOUT = 30.0
DEFAULT_NEXT_MSG_TIMEOUT = 1.0
#: How long ``Client.trace`` gathers the servers' reports when the path stays incomplete.
DEFAULT_TRACE_TIMEOUT = 1.0
DEFAULT_REQUEST_MAX_IN_FLIGHT = 1024
#: How long ``close()`` waits for each of the client's threads to finish.
THREAD_JOIN_TIMEOUT = 5.0
#: How long ``close()`` lets the writer send what is queued before cutting the socket.
CLOSE_FLUSH_TIMEOUT = 1.0
#: How long ``close()`` waits, in all, for threads running user callbacks to return; a
#: callback that takes longer finishes on its own (daemon) thread after close() returns.
CLOSE_CALLBACK_GRACE = 0.25

# --- protocol limits ---------------------------------------------------------------
#: Longest control line (op name and arguments) the parser accepts without a CRLF.
MAX_CONTROL_LINE = 4096
#: The server's default max_payload, assumed until INFO says otherwise.
DEFAULT_MAX_PAYLOAD = 1024 * 1024
#: Extra room over max_payload the parser allows: for a message's header block, and for
#: the server's own messages, which max_payload does not bound (a JetStream API reply
#: listing a stream's subjects: 100,000 of them a page are 1.5 MB and more). 64 MiB is
#: the server's own default max_pending, so no reply it sends a client is larger.
MAX_PAYLOAD_HEADROOM = 64 * 1024 * 1024
#: Validated subjects kept to skip re-validation on hot publish paths.
SUBJECT_CACHE_SIZE = 4096
#: Subjects used once each (reply inboxes, JetStream ack subjects): never cached, as
#: caching them would only evict the subjects that repeat.
UNCACHED_SUBJECT_PREFIXES = (DEFAULT_INBOX_PREFIX + ".", "$JS.ACK.")

# --- status codes carried in HMSG headers ------------------------------------------
STATUS_NO_RESPONDERS = 503
STATUS_REQUEST_TIMEOUT = 408
STATUS_NOT_FOUND = 404
#: The end of a batched direct get's replies (ADR-31).
STATUS_END_OF_BATCH = 204
STATUS_CONTROL = 100
#: A batched direct get's patterns match more subjects than the server allows.
STATUS_TOO_MANY_RESULTS = 413
#: A pull refused for a pin id that is no longer the pin (ADR-42 priority groups).
STATUS_PIN_MISMATCH = 423
#: Seconds a fetch waits beyond its ``expires`` for the server's closing status.
JS_FETCH_MARGIN = 1.0
#: nats.go's batch for a byte-limited fetch: the bytes are the limit.
JS_BYTES_ONLY_BATCH = 1_000_000
#: Backoff after a refused or unanswered pull: first wait and cap, in seconds.
JS_PULL_RETRY_FIRST = 0.25
JS_PULL_RETRY_MAX = 5.0
#: How often a pull reader looks again while disconnected or with nothing asked for.
JS_PULL_POLL = 1.0
#: After a ``messages()`` read cut short (Ctrl-C): seconds without a message before
#: its count of what is owed is redone from zero.
JS_PULL_RECOUNT_AFTER = 1.0
#: Bytes a bulk read's pull asks for at most (unless the caller says), at least 4
#: messages of the server's largest size.
JS_BULK_PULL_BYTES = 16 * 1024 * 1024
#: "No Messages" answers in a row that end a bulk read the consumer said was not done.
JS_BULK_EMPTY_ANSWERS = 3
#: Seconds an ephemeral reading consumer outlives a reader that vanished (a crash).
JS_BULK_READER_INACTIVE = 30.0
#: A bulk read's first pulls answered "no responders" (its new consumer not ready yet):
#: asked again after 0.1, 0.2, ... s, this many times at most.
JS_BULK_NOT_READY_PAUSE = 0.1
JS_BULK_NOT_READY_PAUSES = 5
#: Seconds of its ``max_wait`` a fetch answered 423 must have left to pull again
#: without the pin id (else it ends with what it has).
JS_PIN_RETRY_MIN_WAIT = 0.1

# --- the connection's inner limits -------------------------------------------------------
#: A caller writing directly sends what others queued behind it at most this many times
#: before leaving the rest to the writer (its own request waits meanwhile).
DIRECT_WRITE_ROUNDS = 8
#: A writer waiting behind a caller's direct write looks this often whether that caller
#: is still writing (a Ctrl-C can leave the claim held by nobody; see Outbox.take).
DIRECT_CLAIM_CHECK = 0.25
#: Messages a callback subscription's thread takes from its queue at once.
CALLBACK_BATCH = 256
#: Parsed MSG/HMSG control lines the parser keeps (the same few lines repeat).
MSG_LINE_CACHE_SIZE = 1024
#: Consecutive authorization failures on every server after which reconnecting stops.
AUTH_FAILURES_TO_GIVE_UP = 2
#: Plain batch requests are queued this many at a time (one lock, one writer wake-up).
REQUEST_BATCH_CHUNK = 64
#: Bytes read at once: the WebSocket upgrade reply, the handshake (INFO, PONG or
#: -ERR), and the TLS stream (a large read takes many records at once).
WEBSOCKET_UPGRADE_READ_SIZE = 4096
HANDSHAKE_READ_SIZE = 4096
TLS_READ_SIZE = 256 * 1024
#: The first server version that traces messages.
TRACE_MIN_SERVER_VERSION = (2, 11)

# --- JetStream consumers, key-value and object store -------------------------------------
#: The server refuses a multi_last request matching more messages (413 Too Many Results).
KV_MULTI_LAST_MAX_KEYS = 1024
#: Requests of one lookup awaiting their EOB at once.
KV_MULTI_LAST_IN_FLIGHT = 4
#: Replies taken from the inbox in one go.
KV_MULTI_LAST_REPLIES_PER_TAKE = 256
#: Bytes of values one request may bring back before the server pauses it (an EOB with
#: messages pending; the rest is asked for again).
KV_MULTI_LAST_MAX_BYTES = 8 * 1024 * 1024
#: Seconds the server keeps an ordered consumer nobody reads.
JS_ORDERED_INACTIVE_THRESHOLD = 300.0
#: An ordered consumer remakes its server-side consumer after 1, 2, 4, ... s, at most 10.
JS_ORDERED_FIRST_BACKOFF = 1.0
JS_ORDERED_MAX_BACKOFF = 10.0
#: A fetch of at least this many seconds gets a heartbeat by default (nats.go's rule).
JS_FETCH_HEARTBEAT_FROM = 10.0
JS_FETCH_HEARTBEAT = 5.0
#: messages()/consume(): each pull's expires at least; the heartbeat's bounds.
JS_STREAM_MIN_WAIT = 1.0
JS_STREAM_MIN_HEARTBEAT = 0.5
JS_STREAM_MAX_HEARTBEAT = 30.0
#: Seconds a push read's check of its consumer (after a missed heartbeat) may take at
#: least, even when the caller's ``next(timeout)`` has less left.
JS_PUSH_MIN_CHECK = 0.5
#: Chunk bytes a put may have unacknowledged, and a read asks for per batch: enough to
#: keep the link busy, small enough that a 10 GB file needs no more memory than this.
OBJ_WINDOW_BYTES = 8 * 1024 * 1024

# --- JetStream publishing --------------------------------------------------------
#: Seconds a session lives on with nothing in flight before it unsubscribes and its
#: timer thread ends (a context made per call must not keep a thread forever).
JS_ACK_TIMER_IDLE_EXIT = 10.0
#: Seconds between the timer's sweeps of settled entries while acks are in flight.
JS_ACK_SWEEP_INTERVAL = 0.25
#: Seconds between the timer's looks for waiters a Ctrl-C left with nothing to settle
#: them (see ``AsyncPublisher._reap_orphans``); one is failed at its second sighting.
JS_ACK_ORPHAN_SCAN = 1.0
#: Longest wait for an ack before a ping asks the server to repeat it (a quarter of
#: ``ack_timeout`` when that is shorter): an ack lost on the way costs this much.
JS_FAST_PING_INTERVAL = 0.5
#: Answers taken from the inbox per look.
JS_FAST_REPLIES_PER_TAKE = 256
#: Seconds between the keep-alive's looks at an open batch (see the module docstring):
#: an idle batch is pinged this often, and the server hears from it at least every two
#: intervals, well within its 10 s idle timeout.
JS_FAST_KEEPALIVE_INTERVAL = 2.5
#: The server's default limit of messages per atomic batch (``streamDefaultMaxAtomicBatchSize``).
JS_ATOMIC_MAX_MESSAGES = 1000
OBJ_CHUNK_SIZE = 128 * 1024
# --- Locust (nats_sync.locust) -----------------------------------------------------------
#: Seconds the shared connection waits, when the test stops, for the ``publish_async``
#: acknowledgements still in flight (each then reported as it settles), before it closes.
LOCUST_CLOSE_ACK_WAIT = 2.0

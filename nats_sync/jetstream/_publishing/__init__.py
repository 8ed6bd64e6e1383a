"""JetStream publishing: one acknowledged message (``publish``), the ``publish_async``
window (``acks``) and its futures (``ack_future``, which also decodes acknowledgements),
fast-ingest (``fast``) and atomic (``atomic``) batches with the reply handling they share
(``batch_replies``), counters (``counter``) and message schedules (``schedule``).
"""

"""JetStream publishing: one acknowledged message (``publish``), the ``publish_async``
window (``acks``), fast-ingest (``fast``) and atomic (``atomic``) batches with the reply
handling they share (``batch_replies``), counters (``counter``) and message schedules
(``schedule``).
"""

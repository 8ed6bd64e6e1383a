"""Floor 2 of the core, the connection threads and the small threaded parts: the reader
and writer of one connection (``connection``), the bounded outbox they drain
(``outbox``), the callback runner (``callbacks``), the timer thread (``timer``), how
threads start and are joined (``lifecycle``) and how callers' threads wait so that a
Ctrl-C cannot leave a lock held (``waiting``). Each module names its threads and locks.
"""

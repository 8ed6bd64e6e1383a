"""The client's core, floor by floor, bottom up (docs/ARCHITECTURE.md draws the same floors).

- ``proto`` (sans-IO wire protocol), ``nuid``, ``validate``, ``state``: the protocol core
  and plain data; no I/O, no threads.
- ``transport``: addresses, credentials, connect options, the byte streams (TCP, TLS,
  WebSocket) and the handshake.
- ``threads``: the connection's reader and writer, its outbox, the callback and timer
  threads, and how every thread starts, waits and is joined.
- ``components``: the parts the handler composes (subscriptions, publishing, requests,
  reconnect, pings, instrumentation) and the port the extensions take.
- ``handler``: the one object that owns the connection's state and composes the rest.

Nothing here is public: ``nats_sync`` (``client.py``) is the door. Each module imports only
from its own floor or the floors below it (``tests/unit/test_import_layers.py``).
"""

"""Floor 1 of the core, transport: server addresses (``pool``), credentials (``auth``,
``contexts``), connect options (``options``), the byte streams under a connection
(``streams``: TCP, TLS, ``websocket``) and the CONNECT handshake (``handshake``).

Runs on whichever thread connects (the caller of ``connect()`` or the reconnect thread);
no module here starts a thread.
"""

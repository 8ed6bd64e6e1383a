"""Floor 3 of the core, the components the handler composes, each owning its own state
and lock: the request multiplexer (``reply_mux``), subscriptions and their deliveries
(``subscription``), publishing (``publishing``), requests (``requester``,
``request_many``), reconnect (``reconnect``), pings (``pings``), the instrumentation
hook (``instrumentation``) and the port the extensions reach the client through
(``port``). Each module names the threads that touch it.
"""

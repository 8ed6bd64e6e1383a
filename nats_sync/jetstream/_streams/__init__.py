"""JetStream's streams and its API: the wire (``wire``: subjects, JSON requests, error
mapping, units, names), the context (``context``, its protocol ``context_protocol`` and
nats-py's names on it, ``context_compat``), bound streams (``stream``) and range reads
(``ranges``). The other parts of ``jetstream/`` build on this one.
"""

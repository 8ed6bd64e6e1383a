"""The ``nats-sync`` command's subcommands, one module per family (``jetstream``,
``object``, ``counter``, ``micro``, ``pcgroups``, ``server``, ``trace``, ``sys``); the
parser and ``main`` are in ``nats_sync.cli``. Built on the public client only; runs on
the command's main thread.
"""

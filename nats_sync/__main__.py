"""``python -m nats_sync``: the command line (see :mod:`nats_sync.cli`)."""

from nats_sync.cli import main

raise SystemExit(main())

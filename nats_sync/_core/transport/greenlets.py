"""Whether this process runs the client's threads as greenlets (gevent's monkey-patching).

How it works: no thread, no state. Under ``gevent.monkey.patch_all()`` (gunicorn
``-k gevent``, Locust, Celery's gevent pool) ``threading`` makes greenlets and sockets
yield to gevent's hub, and everything the client does still works; what changes is
what is cheap. Greenlets never run at the same time, so a caller writing its request
to the socket itself (which saves a thread switch between OS threads) only makes every
caller pay a system call of its own: handed to the writer, the requests of all the
greenlets that ran meanwhile go out in one. Components ask :func:`threads_are_greenlets`
once, when a client is made. gevent is never imported here: a process that did not
import it is not patched.
"""

from __future__ import annotations

import sys


def threads_are_greenlets() -> bool:
    """Whether gevent has patched ``threading`` in this process."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is None:
        return False
    try:
        return bool(monkey.is_module_patched("threading"))
    except Exception:  # an odd gevent: take the threads' paths, which work everywhere
        return False


__all__ = ["threads_are_greenlets"]

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

Ctrl-C: Python runs signal handlers on the main OS thread, which under gevent is where
every greenlet runs, so the default handler raises KeyboardInterrupt in whichever
greenlet is running, often one of the client's (its reader, writer or a delivery
greenlet), ending it for good. :func:`route_ctrl_c_to_main_greenlet` (called when the
first client thread starts) replaces that default handler, and only it, with one that
raises in the main greenlet, as with threads it only reaches the main thread: run
there, it raises at once (but inside gevent's own code, see ``_in_gevent``); run
anywhere else, it has the hub throw it into the main greenlet at its next wait.
State: ``_ctrl_c_routed``, set once by the thread that installs the handler.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType
from typing import Any


def threads_are_greenlets() -> bool:
    """Whether gevent has patched ``threading`` in this process."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is None:
        return False
    try:
        return bool(monkey.is_module_patched("threading"))
    except Exception:  # an odd gevent: take the threads' paths, which work everywhere
        return False


#: Holds True once the handler was looked at in a patched process (a one-item list:
#: set in place, no ``global``).
_ctrl_c_routed: list[bool] = []


def route_ctrl_c_to_main_greenlet() -> None:
    """Under gevent, makes Ctrl-C raise KeyboardInterrupt in the main greenlet only.

    Does nothing in an unpatched process, once it has run, or where SIGINT has a
    handler other than Python's default (the program's own stays as it is).
    """
    if _ctrl_c_routed or not threads_are_greenlets():
        return
    _ctrl_c_routed.append(True)
    greenlet_module = sys.modules.get("greenlet")
    gevent = sys.modules.get("gevent")
    if greenlet_module is None or gevent is None:
        return
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return
    main = greenlet_module.getcurrent()
    while main.parent is not None:
        main = main.parent
    hub = gevent.get_hub()

    def raise_in_main_greenlet(signum: int, frame: FrameType | None) -> Any:
        in_main = greenlet_module.getcurrent() is main
        if main.dead or (in_main and not _in_gevent(frame)):
            raise KeyboardInterrupt
        hub.loop.run_callback(main.throw, KeyboardInterrupt)

    try:
        signal.signal(signal.SIGINT, raise_in_main_greenlet)
    except ValueError:  # not the main OS thread (a client made on a real thread pool)
        pass


def _in_gevent(frame: FrameType | None) -> bool:
    # Patched, the locks are Python code (gevent's lock, threading's Python RLock and
    # Condition over it): an interrupt raised in one just after it took its inner lock
    # leaves that lock taken for ever (with threads, the C locks have no such moment).
    # There the main greenlet gets it from the hub instead, at its next wait.
    if frame is None:
        return False
    module = str(frame.f_globals.get("__name__", ""))
    return module == "threading" or module.startswith("gevent")


__all__ = ["route_ctrl_c_to_main_greenlet", "threads_are_greenlets"]

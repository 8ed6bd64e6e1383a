"""The floor of handing replies to blocked threads, with no client at all (issue 33).

T threads each send a one-byte "request" through a socketpair to a forked echo
process and block on a lock of their own; one reader thread reads the echoes and wakes
the waiters. Two hand-offs are compared:

- ``all``: the reader releases every waiter of a read at once (what nats_sync does);
- ``relay``: the reader releases the first and queues the rest; each thread, after
  sending its next request and just before it blocks, releases the next queued one,
  so threads wake as the GIL comes free.

``--work N`` adds N loop iterations of Python per request (a caller doing something).
Prints requests/s, CPU per request and voluntary/involuntary context switches per
request of this process. Run: ``python -m benchmarks.handoff_floor all 16 [--work N]``.
"""

from __future__ import annotations

import _thread
import argparse
import os
import resource
import socket
import threading
import time
from collections import deque


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("all", "relay"))
    parser.add_argument("threads", type=int)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--work", type=int, default=0)
    args = parser.parse_args()
    threads, work, relay = args.threads, args.work, args.mode == "relay"
    assert 1 <= threads <= 255, "one byte names a thread"
    ours, echo_end = socket.socketpair()
    child = os.fork()
    if child == 0:  # the echo process
        ours.close()
        while data := echo_end.recv(65536):
            echo_end.sendall(data)
        os._exit(0)
    echo_end.close()
    waiters: dict[int, _thread.LockType] = {}
    queued: deque[_thread.LockType] = deque()

    def pass_on() -> None:
        try:
            queued.popleft().release()
        except IndexError:
            pass

    def reader() -> None:
        while data := ours.recv(65536):
            woken = [waiters.pop(token) for token in data]
            if relay:
                queued.extend(woken)
                pass_on()
            else:
                for lock in woken:
                    lock.release()

    def requester(token: int) -> None:
        for _ in range(args.requests // threads):
            for _ in range(work):
                pass
            lock = _thread.allocate_lock()
            lock.acquire()
            waiters[token] = lock
            ours.send(bytes([token]))
            if relay:
                pass_on()
            lock.acquire()
        if relay:
            pass_on()  # leaving: nobody else would wake the rest

    threading.Thread(target=reader, daemon=True).start()
    workers = [threading.Thread(target=requester, args=(n,)) for n in range(threads)]
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    total = args.requests // threads * threads
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    print(
        f"{args.mode:5s} T={threads:3d} work={work:4d} {total / elapsed:8.0f} req/s "
        f"cpu {cpu / total * 1e6:5.1f} µs/req "
        f"voluntary {(after.ru_nvcsw - before.ru_nvcsw) / total:.2f} "
        f"involuntary {(after.ru_nivcsw - before.ru_nivcsw) / total:.2f} switches/req"
    )
    ours.close()
    os.kill(child, 9)


if __name__ == "__main__":
    main()

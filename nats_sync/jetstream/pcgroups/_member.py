"""One member instance of a partitioned consumer group: its messages, as the source of a
``ConsumeContext``.

How it works: :class:`MemberSource` is the ``MessageSource`` a
:class:`~nats_sync.jetstream.ConsumeContext` reads, so the member's callback runs on
that context's one thread (``nats_sync-js-consume-<group>-<member>``), the *group's
thread*. Each ``next()`` there first reads what the group's key-value watcher has (the
config; at most every ``PCG_CONFIG_POLL`` seconds while messages flow, as each look
costs a millisecond), then waits on the member's message stream at most that long at a
time. So a config change is applied only between two callbacks, never while one runs:
an instance never deletes or remakes its consumer while its callback holds a message it
may still ack.

The member's consumer has the ADR-42 priority group ``PCG`` with the
``pinned_client`` policy: every instance of a member pulls from it, the server serves
one (the pin, sent for us by the ``PullConsumer``), the others wait as standbys and one
takes over when the pinned one stops pulling for ``priority_timeout`` (the ack wait, at
least 1 s) or after an unpin (step-down). A :class:`Kind` says what differs between
static and elastic groups: where the consumer lives, how it is made and what a new
config means.

Threads and state: the group's thread does everything here, except ``stop()`` and
``drain()``, which come from any thread. They set ``_stopped``/``_draining`` and stop
the current message stream and the watcher (both wake a waiting reader); the swap of
the message stream and those flags are under ``_lock``, held for no call.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Any, Protocol

from nats_sync.errors import (
    BadSubscriptionError,
    ConnectionClosedError,
    Error,
    TimeoutError,
)
from nats_sync.jetstream._consumers.consumer import PullConsumer
from nats_sync.jetstream._consumers.msg import JsMsg
from nats_sync.jetstream._consumers.priority import PIN_ID_HEADER
from nats_sync.jetstream._consumers.pull import MessageStream
from nats_sync.jetstream._kv.bucket import Entry, KeyValue, KeyWatcher
from nats_sync.jetstream._streams.wire import header_value
from nats_sync.jetstream.api import ConsumerConfig
from nats_sync.jetstream.errors import ConsumerNotFoundError, KeyNotFoundError
from nats_sync.jetstream.pcgroups._config import GroupJetStream, key_of
from nats_sync.jetstream.pcgroups._defaults import (
    PCG_CONFIG_PEEK,
    PCG_CONFIG_POLL,
    PCG_DEFAULT_ACK_WAIT,
    PCG_MIN_PULL_EXPIRY,
    PCG_PRIORITY_GROUP,
    PCG_STANDBY_BACKOFF,
)
from nats_sync.jetstream.pcgroups.errors import ConsumerGroupConfigError
from nats_sync.msg import Msg

log = logging.getLogger("nats_sync")


def member_template(config: ConsumerConfig | None) -> tuple[ConsumerConfig, float]:
    """The user's consumer config with orbit.go's defaults (explicit acks, 5 s ack wait)
    and the ack wait.

    Raises:
        ConsumerGroupConfigError: ``config`` is not a ConsumerConfig.
    """
    if config is None:
        config = ConsumerConfig()
    elif not isinstance(config, ConsumerConfig):
        raise ConsumerGroupConfigError(
            f"config must be a ConsumerConfig or None, got {type(config).__name__}"
        )
    ack_wait = config.ack_wait if config.ack_wait and config.ack_wait > 0 else PCG_DEFAULT_ACK_WAIT
    return config.replace(ack_wait=ack_wait, ack_policy=config.ack_policy or "explicit"), ack_wait


def pinned_config(
    template: ConsumerConfig, ack_wait: float, filters: list[str], **names: Any
) -> ConsumerConfig:
    """The member's consumer: the template with its partitions' filters and the
    ``PCG`` priority group (``pinned_client``, the pin kept for the ack wait)."""
    return template.replace(
        filter_subject=None,
        filter_subjects=filters,
        priority_groups=[PCG_PRIORITY_GROUP],
        priority_policy="pinned_client",
        priority_timeout=max(ack_wait, PCG_MIN_PULL_EXPIRY),
        **names,
    )


class Kind(Protocol):
    """What a static or an elastic member does that the other does not."""

    #: The stream the member's consumer reads.
    consumer_stream: str

    def join(self, source: MemberSource) -> PullConsumer | None:
        """Makes the member's consumer for the current config (None: nothing to read)."""
        ...

    def apply(self, source: MemberSource, entry: Entry) -> None:
        """Follows a stored config (a PUT): a no-op, a new consumer, or ``source.end``."""
        ...

    def idle(self, source: MemberSource) -> None:
        """Called between polls while the member reads nothing."""
        ...

    def lost(self, source: MemberSource, err: Error) -> None:
        """The member's message stream failed with ``err`` (e.g. its consumer was
        deleted)."""
        ...

    def on_group_deleted(self, source: MemberSource) -> None:
        """The group's config was deleted: clean up before the member ends."""
        ...


class MemberSource:
    """The messages of one member instance (see the module docstring).

    Args:
        js: the JetStream context.
        kv: the group's bucket.
        stream: the group's stream (the origin stream).
        group: the group's name.
        member: the member's name.
        ack_wait: the member's ack wait (seconds), from which the pulls' expiry comes.
        kind: the static or elastic behaviour.
    """

    def __init__(
        self,
        js: GroupJetStream,
        kv: KeyValue,
        stream: str,
        group: str,
        member: str,
        ack_wait: float,
        kind: Kind,
    ) -> None:
        self.js = js
        self.kv = kv
        self.stream = stream
        self.group = group
        self.member = member
        self.ack_wait = ack_wait
        self.kind = kind
        #: The pin id of the last message handed over (whether we were the pinned one).
        self.pin: str | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = False
        self._draining = False
        self._end: BaseException | None = None
        self.consumer: PullConsumer | None = None
        self._messages: MessageStream | None = None
        self._watcher: KeyWatcher = kv.watch(key_of(stream, group))
        #: When the group's thread next looks at the config between messages.
        self._config_due = 0.0

    def __repr__(self) -> str:
        return f"<pcgroups member {self.member!r} of {self.stream}/{self.group}>"

    # --- the consumer ----------------------------------------------------------------------

    @property
    def pull_expiry(self) -> float:
        """Each pull's expiry: half the ack wait, at least 1 s (orbit.go's rule)."""
        return max(self.ack_wait / 2, PCG_MIN_PULL_EXPIRY)

    def start(self, consumer: PullConsumer | None) -> None:
        """Reads ``consumer`` from now on (None: nothing)."""
        messages = None
        if consumer is not None:
            messages = consumer.messages(max_wait=self.pull_expiry, group=PCG_PRIORITY_GROUP)
        with self._lock:
            if self._stopped and messages is not None:
                messages.stop()
                return
            self.consumer, self._messages = consumer, messages

    def stop_consuming(self) -> None:
        """Stops reading the member's consumer (what was pulled is redelivered later)."""
        with self._lock:
            messages, self._messages, self.consumer = self._messages, None, None
        if messages is not None:
            messages.stop()

    def is_pinned(self) -> bool:
        """Whether the server's pin for the member's consumer is this instance's."""
        if self.consumer is None or self.pin is None:
            return False
        try:
            info = self.js.consumer_info(self.kind.consumer_stream, self.consumer.name)
        except Error:
            return False
        return any(
            state.group == PCG_PRIORITY_GROUP and state.pinned_client_id == self.pin
            for state in info.priority_groups or ()
        )

    def delete_consumer(self, name: str) -> None:
        """Deletes a consumer of the member's stream (gone already is fine)."""
        try:
            self.js.delete_consumer(self.kind.consumer_stream, name)
        except ConsumerNotFoundError:
            pass
        except Error as err:
            log.warning("nats_sync: %r could not delete consumer %r: %s", self, name, err)

    def backoff(self) -> bool:
        """A standby's wait before remaking the consumer; False when stopped meanwhile."""
        self._wake.wait(PCG_STANDBY_BACKOFF * (1 + random.random() / 4))
        return not self._stopped

    def end(self, err: BaseException | None) -> None:
        """Ends the member after the current message (``err`` None: a clean end)."""
        self.stop_consuming()
        with self._lock:
            if self._end is None:
                self._end = err or BadSubscriptionError(f"{self!r} left the group")

    def group_exists(self) -> bool:
        """Whether the group's config is still stored (True when that is unknown)."""
        try:
            self.kv.get(key_of(self.stream, self.group))
        except KeyNotFoundError:
            return False
        except Error:
            return True
        return True

    # --- MessageSource -------------------------------------------------------------------

    def next(self, timeout: float | None = None) -> JsMsg:
        """The next message of the member, its subject without the partition number.

        Raises:
            BadSubscriptionError: stopped, drained and read out, or the group was deleted.
            GroupConfigChangedError: the group's config changed beyond what it follows.
            ConnectionClosedError: the client closed.
            TimeoutError: nothing within ``timeout`` (None: no limit).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            now = time.monotonic()
            if now >= self._config_due:  # not before every message: a peek costs 1 ms
                self._config_due = now + PCG_CONFIG_POLL
                self._follow_config()
            with self._lock:
                end, messages, draining = self._end, self._messages, self._draining
            if end is not None:
                self._close()
                raise end
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"no message for {self!r} within {timeout}s")
            if messages is None:
                if draining:
                    self.end(None)
                    continue
                self.kind.idle(self)
                self._wait_config(PCG_CONFIG_POLL)
                continue
            try:
                msg = messages.next(timeout=PCG_CONFIG_POLL)
            except TimeoutError:
                continue
            except BadSubscriptionError:
                if self._draining:
                    self.end(None)
                continue  # stopped: by us (a new consumer), or by stop()
            except ConnectionClosedError:
                raise
            except Error as err:  # the consumer was deleted, ...
                self.stop_consuming()
                self.kind.lost(self, err)
                continue
            return self._handed(msg)

    def _handed(self, msg: JsMsg) -> JsMsg:
        core = msg.msg
        pin = header_value(core.headers, PIN_ID_HEADER)
        if pin:
            self.pin = pin
        stripped = Msg(
            core.subject.partition(".")[2] or core.subject,
            core.reply,
            core.data,
            core.headers,
            core.sid,
        )
        return JsMsg(stripped, self.js.client, self.js.timeout)

    def _follow_config(self) -> None:
        """Applies every config change stored meanwhile (not waiting)."""
        while self._take_config(PCG_CONFIG_PEEK):
            pass

    def _wait_config(self, seconds: float) -> None:
        """Waits up to ``seconds`` for a config change and applies it."""
        self._take_config(seconds)

    def _take_config(self, seconds: float) -> bool:
        """Waits up to ``seconds`` for the watcher's next entry and applies it; False when
        none came, the member is leaving, or the client closed (then the member ends)."""
        if self._stopped or self._draining:
            return False
        try:
            entry = self._watcher.updates(timeout=seconds)
        except TimeoutError:
            return False
        except ConnectionClosedError:
            self.end(None)
            return False
        if entry is not None:
            self._apply(entry)
        return True

    def _apply(self, entry: Entry) -> None:
        if entry.operation != "PUT":  # the group was deleted
            self.kind.on_group_deleted(self)
            self.end(None)
            return
        try:
            self.kind.apply(self, entry)
        except Error as err:
            self.end(err)

    def _close(self) -> None:
        self.stop_consuming()
        self._watcher.stop()

    def stop(self) -> None:
        """Leaves the group at once (from any thread); the reader wakes up."""
        with self._lock:
            self._stopped = True
            if self._end is None:
                self._end = BadSubscriptionError(f"{self!r} was stopped")
        self._wake.set()
        self.stop_consuming()
        self._watcher.stop()

    def drain(self, timeout: float | None = None) -> None:
        """Stops pulling; the messages already received are still handed over."""
        with self._lock:
            self._draining = True
            messages = self._messages
        self._wake.set()
        self._watcher.stop()
        if messages is not None:
            messages.drain(timeout)

"""A synchronous, threaded NATS client: connecting, publishing, subscribing, requesting.

Made for code that blocks: scripts, PySpark UDFs, WSGI apps. A reader thread parses
server ops into per-subscription queues, a writer thread sends what publishers queue,
and every call is safe from any thread. Every error the library raises is a subclass
of `Error`, listed at the end of this page.

```python
import nats_sync

with nats_sync.connect("nats://127.0.0.1:4222") as nc:
    sub = nc.subscribe("greet.*")
    nc.publish("greet.joe", b"hello")
    print(sub.next_msg(timeout=1.0).data)
```
"""

from nats_sync._core.components.subscription import Subscription
from nats_sync._process import process_client
from nats_sync._trace import MessageTrace
from nats_sync._version import __version__
from nats_sync.client import Client, connect
from nats_sync.errors import (
    AuthorizationError,
    BadCredentialsError,
    BadHeaderError,
    BadSubjectError,
    BadSubscriptionError,
    ConnectionClosedError,
    ConnectionDrainingError,
    ConnectionReconnectingError,
    DrainTimeoutError,
    Error,
    FlushTimeoutError,
    InvalidArgumentError,
    MaxPayloadError,
    MonitoringError,
    NatsConnectionError,
    NoRespondersError,
    NoServersError,
    NotSupportedError,
    OutboundBufferLimitError,
    PermissionsViolationError,
    ProtocolError,
    SecureConnFailedError,
    SecureConnRequiredError,
    ServerError,
    ServerMaxPayloadError,
    ServerSecureConnRequiredError,
    ServerStaleConnectionError,
    SlowConsumerError,
    StaleConnectionError,
    TimeoutError,
)
from nats_sync.msg import Msg

__all__ = [
    "AuthorizationError",
    "BadCredentialsError",
    "BadHeaderError",
    "BadSubjectError",
    "BadSubscriptionError",
    "Client",
    "ConnectionClosedError",
    "ConnectionDrainingError",
    "ConnectionReconnectingError",
    "DrainTimeoutError",
    "Error",
    "FlushTimeoutError",
    "InvalidArgumentError",
    "MaxPayloadError",
    "MessageTrace",
    "MonitoringError",
    "Msg",
    "NatsConnectionError",
    "NoRespondersError",
    "NoServersError",
    "NotSupportedError",
    "OutboundBufferLimitError",
    "PermissionsViolationError",
    "ProtocolError",
    "SecureConnFailedError",
    "SecureConnRequiredError",
    "ServerError",
    "ServerMaxPayloadError",
    "ServerSecureConnRequiredError",
    "ServerStaleConnectionError",
    "SlowConsumerError",
    "StaleConnectionError",
    "Subscription",
    "TimeoutError",
    "__version__",
    "connect",
    "process_client",
]

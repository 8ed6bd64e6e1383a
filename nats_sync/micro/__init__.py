"""NATS services (the service API of ADR-32, as nats.go's ``micro``), on the public client.

Example:
    ```python
    import nats_sync
    from nats_sync import micro

    nc = nats_sync.connect()
    with micro.add_service(nc, "lookup", "1.0.0") as svc:
        svc.add_endpoint("get", lambda req: req.respond(b"value of " + req.data))
        products = svc.add_group("products")
        products.add_endpoint("price", price, max_workers=4)   # products.price
        ...
    # a caller:
    reply = micro.check(nc.request("get", b"key"))   # ServiceError on an error reply
    ```

How it works: :mod:`~nats_sync.micro.service` holds the service (its threads and
locks are described there), :mod:`~nats_sync.micro.request` the request a handler
gets and the caller-side :func:`check`, :mod:`~nats_sync.micro.discovery` the
``$SRV`` questions (:func:`ping`, :func:`info`, :func:`stats`) and ``_api`` the JSON
records and subjects of the spec.
"""

from __future__ import annotations

from nats_sync.micro._api import (
    DEFAULT_QUEUE_GROUP,
    ERROR_CODE_HEADER,
    ERROR_HEADER,
    EndpointInfo,
    EndpointStats,
    ServiceInfo,
    ServicePing,
    ServiceStats,
    control_subject,
)
from nats_sync.micro.discovery import info, ping, stats
from nats_sync.micro.request import Request, ServiceError, check
from nats_sync.micro.service import (
    DoneHandler,
    Group,
    RequestHandler,
    Service,
    ServiceErrorHandler,
    StatsHandler,
    add_service,
)

__all__ = [
    "DEFAULT_QUEUE_GROUP",
    "ERROR_CODE_HEADER",
    "ERROR_HEADER",
    "DoneHandler",
    "EndpointInfo",
    "EndpointStats",
    "Group",
    "Request",
    "RequestHandler",
    "Service",
    "ServiceError",
    "ServiceErrorHandler",
    "ServiceInfo",
    "ServicePing",
    "ServiceStats",
    "StatsHandler",
    "add_service",
    "check",
    "control_subject",
    "info",
    "ping",
    "stats",
]

"""The exception hierarchy: families, str(), pickling, and mapping -ERR texts to classes."""

from __future__ import annotations

import builtins
import copy
import inspect
import pickle
import re
from pathlib import Path

import pytest

import nats_sync
from nats_sync import errors

# The names API.md's Errors section lists (all re-exported from nats_sync).
API_ERRORS = [
    "TimeoutError",
    "NoRespondersError",
    "ConnectionClosedError",
    "ConnectionDrainingError",
    "ConnectionReconnectingError",
    "NoServersError",
    "AuthorizationError",
    "PermissionsViolationError",
    "SecureConnRequiredError",
    "SecureConnFailedError",
    "BadSubjectError",
    "MaxPayloadError",
    "SlowConsumerError",
    "FlushTimeoutError",
    "DrainTimeoutError",
    "OutboundBufferLimitError",
    "StaleConnectionError",
    "ProtocolError",
]

EXCEPTION_CLASSES: list[type[BaseException]] = [
    cls
    for _, cls in inspect.getmembers(errors, inspect.isclass)
    if cls.__module__ == errors.__name__ and issubclass(cls, BaseException)
]
ERROR_CLASSES: list[type[errors.Error]] = [
    cls for cls in EXCEPTION_CLASSES if issubclass(cls, errors.Error)
]
CLASS_PARAMS = [pytest.param(cls, id=cls.__name__) for cls in ERROR_CLASSES]


def test_every_exception_class_is_found() -> None:
    names = {cls.__name__ for cls in EXCEPTION_CLASSES}
    assert set(API_ERRORS) <= names
    assert "Error" in names


@pytest.mark.parametrize("name", API_ERRORS)
def test_api_error_exists_and_is_re_exported(name: str) -> None:
    cls = getattr(errors, name)
    assert getattr(nats_sync, name) is cls
    assert name in errors.__all__
    assert name in nats_sync.__all__
    assert issubclass(cls, errors.Error)


def test_every_public_error_is_re_exported() -> None:
    for name in errors.__all__:
        if inspect.isclass(getattr(errors, name)):
            assert getattr(nats_sync, name) is getattr(errors, name), name


def test_all_lists_every_class() -> None:
    assert {cls.__name__ for cls in EXCEPTION_CLASSES} <= set(errors.__all__)


@pytest.mark.parametrize("cls", EXCEPTION_CLASSES, ids=[cls.__name__ for cls in EXCEPTION_CLASSES])
def test_everything_derives_from_error(cls: type[BaseException]) -> None:
    assert issubclass(cls, errors.Error)
    assert issubclass(cls, Exception)


@pytest.mark.parametrize("cls", CLASS_PARAMS)
def test_str_keeps_the_detail(cls: type[errors.Error]) -> None:
    err = cls("the detail: 42")
    assert str(err) == f"nats: {cls.label}: the detail: 42"
    assert err.detail == "the detail: 42"
    assert err.args == ("the detail: 42",)
    assert repr(err) == f"{cls.__name__}('the detail: 42')"


@pytest.mark.parametrize("cls", CLASS_PARAMS)
def test_str_without_detail(cls: type[errors.Error]) -> None:
    err = cls()
    assert str(err) == f"nats: {cls.label}"
    assert err.detail == ""


def test_labels_are_distinct() -> None:
    labels = [cls.label for cls in ERROR_CLASSES]
    assert len(labels) == len(set(labels))


@pytest.mark.parametrize("cls", CLASS_PARAMS)
def test_pickle_round_trip(cls: type[errors.Error]) -> None:
    err = cls("something broke")
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        clone = pickle.loads(pickle.dumps(err, protocol=protocol))
        assert type(clone) is cls
        assert clone.args == err.args
        assert str(clone) == str(err)
        assert clone.detail == "something broke"
    assert str(copy.deepcopy(err)) == str(err)


def test_pickle_keeps_slow_consumer_fields() -> None:
    err = errors.SlowConsumerError("dropped 3", subject="orders.>", sid=17)
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is errors.SlowConsumerError
    assert (clone.subject, clone.sid, clone.detail) == ("orders.>", 17, "dropped 3")
    assert str(clone) == "nats: slow consumer, messages dropped: dropped 3"


def test_pickle_keeps_permissions_fields() -> None:
    err = errors.PermissionsViolationError(
        'Permissions Violation for Subscription to "a" using queue "q"',
        operation="subscription",
        subject="a",
        queue="q",
    )
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is errors.PermissionsViolationError
    assert (clone.operation, clone.subject, clone.queue) == ("subscription", "a", "q")
    assert clone.detail == err.detail
    assert str(clone) == str(err)


def test_extra_fields_default_to_empty() -> None:
    slow = errors.SlowConsumerError()
    assert (slow.subject, slow.sid) == ("", 0)
    denied = errors.PermissionsViolationError()
    assert (denied.operation, denied.subject, denied.queue) == ("", "", "")


def test_pickle_of_an_error_raised_from_a_cause() -> None:
    try:
        try:
            raise OSError("refused")
        except OSError as cause:
            raise errors.NoServersError("no server could be reached") from cause
    except errors.NoServersError as err:
        assert isinstance(err.__cause__, OSError)
        clone = pickle.loads(pickle.dumps(err))
    assert str(clone) == "nats: no servers available for connection: no server could be reached"


@pytest.mark.parametrize(
    "cls", [errors.TimeoutError, errors.FlushTimeoutError, errors.DrainTimeoutError]
)
def test_timeouts_are_builtin_timeout_errors(cls: type[errors.TimeoutError]) -> None:
    assert issubclass(cls, builtins.TimeoutError)
    assert issubclass(cls, errors.TimeoutError)
    with pytest.raises(builtins.TimeoutError, match="took too long"):
        raise cls("took too long")
    clone = pickle.loads(pickle.dumps(cls("late")))
    assert isinstance(clone, builtins.TimeoutError)
    assert str(clone) == f"nats: {cls.label}: late"


def test_timeout_error_shadows_the_builtin_by_design() -> None:
    assert errors.TimeoutError is not builtins.TimeoutError
    assert nats_sync.TimeoutError is errors.TimeoutError


@pytest.mark.parametrize(
    "cls",
    [
        errors.ConnectionClosedError,
        errors.ConnectionDrainingError,
        errors.ConnectionReconnectingError,
        errors.NoServersError,
        errors.StaleConnectionError,
        errors.OutboundBufferLimitError,
        errors.SecureConnRequiredError,
        errors.SecureConnFailedError,
    ],
)
def test_connection_family(cls: type[errors.Error]) -> None:
    assert issubclass(cls, errors.NatsConnectionError)
    # Not the builtin ConnectionError family: that one is an OSError.
    assert not issubclass(cls, OSError)


@pytest.mark.parametrize(
    "cls",
    [
        errors.AuthorizationError,
        errors.PermissionsViolationError,
        errors.ServerMaxPayloadError,
        errors.ServerStaleConnectionError,
        errors.ServerSecureConnRequiredError,
    ],
)
def test_server_error_family(cls: type[errors.Error]) -> None:
    assert issubclass(cls, errors.ServerError)


@pytest.mark.parametrize(
    ("server_cls", "client_cls"),
    [
        (errors.ServerMaxPayloadError, errors.MaxPayloadError),
        (errors.ServerStaleConnectionError, errors.StaleConnectionError),
        (errors.ServerSecureConnRequiredError, errors.SecureConnRequiredError),
    ],
)
def test_server_variants_are_caught_as_the_client_error_too(
    server_cls: type[errors.Error], client_cls: type[errors.Error]
) -> None:
    # An ``except MaxPayloadError`` written before the server variants existed still works.
    with pytest.raises(client_cls):
        raise server_cls("from the server")
    with pytest.raises(errors.ServerError):
        raise server_cls("from the server")
    # The client-side error is not a server error: ``except ServerError`` means -ERR only.
    assert not issubclass(client_cls, errors.ServerError)


@pytest.mark.parametrize(
    "cls",
    [
        errors.InvalidArgumentError,
        errors.BadSubjectError,
        errors.BadHeaderError,
        errors.BadCredentialsError,
        errors.MaxPayloadError,
    ],
)
def test_argument_errors_are_value_errors(cls: type[errors.Error]) -> None:
    assert issubclass(cls, errors.InvalidArgumentError)
    assert issubclass(cls, ValueError)


def test_not_supported_is_not_implemented_error() -> None:
    assert issubclass(errors.NotSupportedError, NotImplementedError)


def test_protocol_error_is_its_own_family() -> None:
    assert not issubclass(errors.ProtocolError, errors.ServerError)
    assert not issubclass(errors.ProtocolError, errors.NatsConnectionError)


# --- server_error_from_description ---------------------------------------------------


def test_authorization_violation() -> None:
    err = errors.server_error_from_description("Authorization Violation")
    assert type(err) is errors.AuthorizationError
    assert err.detail == "Authorization Violation"
    assert str(err) == "nats: authorization violation: Authorization Violation"


def test_authentication_expired_is_authorization() -> None:
    err = errors.server_error_from_description("User Authentication Expired")
    assert type(err) is errors.AuthorizationError


def test_permissions_violation_for_publish() -> None:
    err = errors.server_error_from_description('Permissions Violation for Publish to "x"')
    assert isinstance(err, errors.PermissionsViolationError)
    assert (err.operation, err.subject, err.queue) == ("publish", "x", "")
    assert err.detail == 'Permissions Violation for Publish to "x"'


def test_permissions_violation_for_subscription_with_queue() -> None:
    err = errors.server_error_from_description(
        'Permissions Violation for Subscription to "x" using queue "q"'
    )
    assert isinstance(err, errors.PermissionsViolationError)
    assert (err.operation, err.subject, err.queue) == ("subscription", "x", "q")


def test_permissions_violation_unquoted_subject() -> None:
    err = errors.server_error_from_description("Permissions Violation for Publish to foo.bar")
    assert isinstance(err, errors.PermissionsViolationError)
    assert (err.operation, err.subject) == ("publish", "foo.bar")


def test_permissions_violation_without_details() -> None:
    err = errors.server_error_from_description("Permissions Violation")
    assert isinstance(err, errors.PermissionsViolationError)
    assert (err.operation, err.subject, err.queue) == ("", "", "")


#: Every -ERR text server_error_from_description knows: (text, class, what it was before
#: the server variants existed, so old ``except`` clauses must still catch it).
KNOWN_DESCRIPTIONS = [
    ("Maximum Payload Violation", errors.ServerMaxPayloadError, errors.MaxPayloadError),
    ("Stale Connection", errors.ServerStaleConnectionError, errors.StaleConnectionError),
    (
        "Secure Connection - TLS Required",
        errors.ServerSecureConnRequiredError,
        errors.SecureConnRequiredError,
    ),
    ("Authorization Violation", errors.AuthorizationError, errors.AuthorizationError),
    ("authorization violation", errors.AuthorizationError, errors.AuthorizationError),
    ("User Authentication Expired", errors.AuthorizationError, errors.AuthorizationError),
    (
        'Permissions Violation for Publish to "x"',
        errors.PermissionsViolationError,
        errors.PermissionsViolationError,
    ),
    ("Unknown Protocol Operation", errors.ServerError, errors.ServerError),
]


@pytest.mark.parametrize(
    ("description", "cls", "was"), KNOWN_DESCRIPTIONS, ids=[d for d, _, _ in KNOWN_DESCRIPTIONS]
)
def test_known_descriptions(
    description: str, cls: type[errors.Error], was: type[errors.Error]
) -> None:
    err = errors.server_error_from_description(description)
    assert type(err) is cls
    assert isinstance(err, errors.ServerError)
    assert isinstance(err, was)
    assert err.detail == description
    assert str(err) == f"nats: {cls.label}: {description}"


@pytest.mark.parametrize(
    "description", ["Unknown Protocol Operation", "Maximum Connections Exceeded", ""]
)
def test_unknown_description_is_a_plain_server_error(description: str) -> None:
    err = errors.server_error_from_description(description)
    assert type(err) is errors.ServerError
    assert err.detail == description


def test_mapped_errors_pickle() -> None:
    err = errors.server_error_from_description(
        'Permissions Violation for Subscription to "a.b" using queue "workers"'
    )
    clone = pickle.loads(pickle.dumps(err))
    assert isinstance(clone, errors.PermissionsViolationError)
    assert (clone.operation, clone.subject, clone.queue) == ("subscription", "a.b", "workers")


# --- the troubleshooting guide names exactly these errors ----------------------------

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "troubleshooting.md"


def _guide_core_errors_part() -> str:
    """The guide up to its JetStream section: the core client's error families."""
    text = GUIDE.read_text(encoding="utf-8")
    found = re.search(r"\A(.*?)^## JetStream", text, re.MULTILINE | re.DOTALL)
    assert found, "docs/guides/troubleshooting.md has no '## JetStream' section"
    return found.group(1)


def test_troubleshooting_guide_names_every_error_class_and_no_other() -> None:
    named = set(re.findall(r"`(?:nats_sync\.)?([A-Z]\w*Error|Error)`", _guide_core_errors_part()))
    classes = {cls.__name__ for cls in EXCEPTION_CLASSES}
    # The section may also name a builtin an error derives from (ValueError, ...).
    builtin_names = {name for name in named if isinstance(getattr(builtins, name, None), type)}
    assert classes - named == set(), "classes the guide does not name"
    assert named - classes - builtin_names == set(), "names in the guide that are no class"


def test_the_jetstream_500_has_a_name_of_its_own_and_keeps_nats_pys() -> None:
    """Two classes were both named ServerError (a -ERR and an API 500); the JetStream
    one is APIServerError now, nats-py's name an alias of it, never the -ERR one."""
    from nats_sync import jetstream
    from nats_sync.jetstream.errors import api_error

    assert jetstream.ServerError is jetstream.APIServerError
    assert not issubclass(jetstream.APIServerError, nats_sync.ServerError)
    error = api_error({"code": 500, "err_code": 0, "description": "boom"})
    assert type(error) is jetstream.APIServerError and isinstance(error, nats_sync.Error)

"""The package's imports run one way, down the layers of ``tools/layers.py`` (the table
docs/ARCHITECTURE.md shows and draws), with no circle: a module imports only modules of
its own layer or below, and the imports form no circle, ``TYPE_CHECKING`` imports
included (where a type is needed from above, a module names it as a protocol of its
own). Within ``jetstream/``, no part imports the context: they take it as
``jetstream._streams.context_protocol.JsContext``. Above the client's own modules, nothing touches
the client's private attributes: extensions go through its port
(``nats_sync._core.components.port.port_of``)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import nats_sync

PACKAGE_DIR = Path(nats_sync.__file__).parent
ROOT = Path(__file__).resolve().parents[2]
# The layer table (tools/layers.py), which tools/arch_diagram.py draws for the docs.
sys.path.insert(0, str(ROOT / "tools"))
from layers import LAYERS, module_name  # noqa: E402

#: The modules of ``jetstream/`` that may import ``jetstream._streams.context``, and why.
#: The context imports every part, so a part that imported it (even for a type) would
#: close a circle.
CONTEXT_IMPORTERS: dict[str, str] = {
    "jetstream": "the package exports JetStream",
}


def _module_name(path: Path) -> str:
    return module_name(path, PACKAGE_DIR)


def _exists(name: str) -> bool:
    relative = Path(*name.split(".")) if name else Path()
    return (PACKAGE_DIR / relative).with_suffix(".py").exists() or (
        PACKAGE_DIR / relative / "__init__.py"
    ).exists()


def _imports(path: Path) -> set[str]:
    """The package modules ``path`` imports, as names relative to the package: at the
    top, in functions and for types only (``if TYPE_CHECKING:``) alike."""
    own = _module_name(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
                module = f"nats_sync.{module}" if module else "nats_sync"
            else:
                module = node.module or ""
            # ``from pkg import name`` names a module when ``name`` is one.
            submodules = [f"{module}.{alias.name}" for alias in node.names]
            inside = [
                m
                for m in submodules
                if m.startswith("nats_sync.") and _exists(m.removeprefix("nats_sync."))
            ]
            names = inside or [module]
        for name in names:
            if name == "nats_sync" or name.startswith("nats_sync."):
                relative = name.removeprefix("nats_sync").removeprefix(".")
                if relative != own:
                    found.add(relative)
    return found


def _graph() -> dict[str, set[str]]:
    return {_module_name(path): _imports(path) for path in sorted(PACKAGE_DIR.rglob("*.py"))}


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(set(_graph()) - set(LAYERS))
    assert unplaced == [], (
        f"place these modules in tools/layers.py (and docs/ARCHITECTURE.md): {unplaced}"
    )


def test_every_layer_entry_is_a_module() -> None:
    stale = sorted(name for name in LAYERS if not _exists(name))
    assert stale == [], f"tools/layers.py places modules that do not exist: {stale}"


def test_imports_go_down_the_layers_only() -> None:
    upward = [
        f"{module or 'nats_sync'} (layer {LAYERS[module]}) imports "
        f"{target or 'nats_sync'} (layer {LAYERS[target]})"
        for module, targets in _graph().items()
        if module in LAYERS
        for target in sorted(targets)
        if target in LAYERS and LAYERS[target] > LAYERS[module]
    ]
    assert upward == []


def test_no_part_of_jetstream_imports_the_context() -> None:
    # The package itself re-exports the context: importing it is importing the context.
    importers = sorted(
        module
        for module, targets in _graph().items()
        if module.startswith("jetstream")
        and module not in CONTEXT_IMPORTERS
        and targets & {"jetstream", "jetstream._streams.context"}
    )
    assert importers == [], (
        f"{importers} import jetstream._streams.context (or the package): type the context as "
        "jetstream._streams.context_protocol.JsContext (add the members they use there)"
    )


def test_there_is_no_import_circle() -> None:
    """Not even through imports made for types only (issue 34): where a type is needed
    from above, the module names it as a protocol of its own."""
    graph = _graph()
    visiting: list[str] = []
    done: set[str] = set()
    circles: list[str] = []

    def visit(module: str) -> None:
        if module in done:
            return
        if module in visiting:
            circles.append(" -> ".join([*visiting[visiting.index(module) :], module]))
            return
        visiting.append(module)
        for target in sorted(graph.get(module, ())):
            visit(target)
        visiting.pop()
        done.add(module)

    for module in sorted(graph):
        visit(module)
    assert circles == []


def test_the_checker_sees_a_known_import() -> None:
    assert "_core.handler" in _graph()["client"]
    assert "_core.proto" in _graph()["_core.components.publishing"]


#: The client's own modules: the only ones that may touch its private attributes.
CLIENT_MODULES = {"client", "_core.components.port"}
#: The client's private attributes, and the hooks the port replaced (so that none comes
#: back as a side door).
CLIENT_PRIVATE = {
    "_handler",
    "_context",
    "_otel",
    "_port",
    "_instrument",
    "_add_status_listener",
    "_instrumentation",
    "_inbox_route",
    "_publish_inbox",
    "_schedule",
}


def _private_client_uses(source: str) -> list[str]:
    """``line: x.<name>`` for a name of CLIENT_PRIVATE, ``x`` not ``self`` or ``cls``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in CLIENT_PRIVATE
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        ):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_extensions_reach_the_client_through_its_port_only() -> None:
    uses = [
        f"{_module_name(path)}:{use}"
        for path in sorted(PACKAGE_DIR.rglob("*.py"))
        if LAYERS.get(_module_name(path), 0) >= LAYERS["_core.handler"]
        and _module_name(path) not in CLIENT_MODULES
        for use in _private_client_uses(path.read_text())
    ]
    assert uses == [], "use nats_sync._core.components.port.port_of(client) instead: " + "; ".join(
        uses
    )


def test_the_port_check_sees_a_private_use() -> None:
    sample = "def f(nc, js):\n    return nc._add_status_listener, js.client._port, self._port\n"
    assert _private_client_uses(sample) == ["2: nc._add_status_listener", "2: js.client._port"]


#: The packages built on the core (an extension's modules are ``<package>.<name>``).
EXTENSION_PACKAGES = ("jetstream", "micro", "spark")
#: The private modules a package lets the other packages import: the root's tools and
#: the port (with the types it hands out), and jetstream's wire names and units. The
#: connection machinery (handler, connection, outbox, publisher, requester, ...) and
#: every other package's insides are reached only through the port or a public API.
SHARED_PRIVATE = {
    "": {
        "_defaults",
        "_version",
        "_process",
        "_core.validate",
        "_core.nuid",
        "_core.components.port",
        "_core.components.reply_mux",
        # the public Subscription's own module (nats_sync exports it; packages below
        # the client cannot import nats_sync itself)
        "_core.components.subscription",
        "_core.components.instrumentation",
        "_core.threads.waiting",
        "_core.threads.lifecycle",
        "_core.proto",
        "_core.proto.ops",
        "_core.proto.headers",
        "_core.proto.encoder",
        "_core.proto.parser",
    },
    "jetstream": {"jetstream._streams.wire"},
}


def _package_of(module: str) -> str:
    top = module.split(".", maxsplit=1)[0]
    return top if top in EXTENSION_PACKAGES else ""


def _private_crossings(graph: dict[str, set[str]]) -> list[str]:
    """``a imports b`` where ``a`` is an extension's module and ``b`` a private module of
    another package (the root included) that it does not share."""
    found = []
    for module, targets in sorted(graph.items()):
        package = _package_of(module)
        if not package:
            continue
        for target in sorted(targets):
            owner = _package_of(target)
            private = any(part.startswith("_") for part in target.split("."))
            if owner != package and private and target not in SHARED_PRIVATE.get(owner, ()):
                found.append(f"{module} imports {target}")
    return found


def test_extensions_import_no_other_package_s_private_module() -> None:
    assert _private_crossings(_graph()) == [], (
        "import the public API, or reach the client through its port; a module meant "
        "for other packages goes into SHARED_PRIVATE (and docs/ARCHITECTURE.md)"
    )


def test_the_crossing_check_sees_one() -> None:
    graph = {
        "spark._jetstream.sink": {"jetstream._kv.config", "jetstream._streams.wire", "_defaults"},
        "micro.service": {"_core.handler"},
        "jetstream._kv.bucket": {"jetstream._kv.config"},
    }
    assert _private_crossings(graph) == [
        "micro.service imports _core.handler",
        "spark._jetstream.sink imports jetstream._kv.config",
    ]


#: Numbers named at module level outside ``_defaults`` that are facts of a format or a
#: protocol, or of a tool's own screen, not defaults or limits to tune: each with why.
NOT_DEFAULTS = {
    "_core.nuid.PREFIX_LENGTH": "the NUID format",
    "_core.nuid.SEQUENCE_LENGTH": "the NUID format",
    "_core.nuid._MIN_INCREMENT": "the NUID format",
    "_core.nuid._MAX_INCREMENT": "the NUID format",
    "_core.nuid._MAX_SEQUENCE": "the NUID format",
    "_core.transport.auth._SIGNATURE_SIZE": "ed25519",
    "jetstream._streams.wire._NS_PER_SECOND": "a unit",
    "jetstream._streams.wire.MAX_TTL_SECONDS": "the wire's int64 nanoseconds",
    "jetstream._consumers.msg._V2_STREAM_AT": "the ack subject's v2 layout",
    "jetstream.pcgroups.elastic._WQ_NOT_UNIQUE": "a server error code",
    "jetstream._publishing.fast._OP_START": "ADR-50 wire op",
    "jetstream._publishing.fast._OP_APPEND": "ADR-50 wire op",
    "jetstream._publishing.fast._OP_COMMIT": "ADR-50 wire op",
    "jetstream._publishing.fast._OP_END_OF_BATCH": "ADR-50 wire op",
    "jetstream._publishing.fast._OP_PING": "ADR-50 wire op",
    "jetstream._publishing.fast.MAX_FLOW": "the server's uint16",
    "jetstream._publishing.fast.MAX_OUTSTANDING_ACKS": "ADR-50's bound",
    "jetstream._kv.config.MAX_HISTORY": "the server's limit",
    "cli._PROGRESS_WIDTH": "the CLI's screen",
    "cli._INTERRUPT_POLL": "the CLI's own wait",
    "_cli.server._ALIVE_POLL": "the CLI's own wait",
    "testing._POLL_INTERVAL": "the test server's start-up wait",
    "spark.testing._POLL_INTERVAL": "the test cluster's start-up wait",
}


def _numeric(node: ast.expr, inside: bool = False) -> bool:
    """A number, or arithmetic on numbers and names (a name alone is an alias)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.BinOp):
        return _numeric(node.left, True) and _numeric(node.right, True)
    if isinstance(node, ast.Name):
        return inside
    return isinstance(node, ast.UnaryOp) and _numeric(node.operand, inside)


def _named_numbers(path: Path) -> list[str]:
    """``<module>.<NAME>`` for each module-level ``NAME = <number>``."""
    found = []
    for node in ast.parse(path.read_text()).body:
        target = (
            node.targets[0]
            if isinstance(node, ast.Assign)
            else (node.target if isinstance(node, ast.AnnAssign) else None)
        )
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if (
            isinstance(target, ast.Name)
            and target.id.lstrip("_").isupper()
            and value is not None
            and _numeric(value)
        ):
            found.append(f"{_module_name(path)}.{target.id}")
    return found


def test_defaults_and_limits_live_in_defaults() -> None:
    stray = [
        name
        for path in sorted(PACKAGE_DIR.rglob("*.py"))
        if path.name != "_defaults.py"
        for name in _named_numbers(path)
        if name not in NOT_DEFAULTS
    ]
    assert stray == [], (
        "move these to a _defaults.py: the core's, or their extension's (or say in "
        "NOT_DEFAULTS why not)"
    )
    assert all(
        name.split(".")[-1]
        in {
            n.rpartition(".")[2] for path in PACKAGE_DIR.rglob("*.py") for n in _named_numbers(path)
        }
        for name in NOT_DEFAULTS
    ), "NOT_DEFAULTS names a constant that is gone"


def test_defaults_name_each_value_once() -> None:
    names = [
        name.rpartition(".")[2]
        for path in sorted(PACKAGE_DIR.rglob("_defaults.py"))
        for name in _named_numbers(path)
    ]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


#: What the extensions keep in their own ``_defaults`` (the core's holds only its own).
EXTENSION_PREFIXES = ("SPARK_", "PCG_", "MICRO_", "CLI_")


def test_the_core_defaults_hold_no_extension_facts() -> None:
    core = ast.parse((PACKAGE_DIR / "_defaults.py").read_text())
    named = [
        target.id
        for node in core.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    ]
    assert [name for name in named if name.startswith(EXTENSION_PREFIXES)] == []


#: A guard, not a target: modules are split by concept, and one that grows past this many
#: formatted lines (``ruff format`` decides the layout) has outgrown its concept.
MAX_MODULE_LINES = 800


def test_no_module_is_longer_than_the_rule() -> None:
    long = {
        str(path.relative_to(PACKAGE_DIR)): count
        for path in sorted(PACKAGE_DIR.rglob("*.py"))
        if (count := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


#: The modules of the core's floors (layers 0-4) that stay at the package's top: the public
#: ones, and the two every layer shares.
CORE_AT_THE_TOP = {"errors", "msg", "_defaults", "_version"}


def _misplaced(layers: dict[str, int]) -> list[str]:
    handler = layers["_core.handler"]
    found = [
        f"{module} (layer {layer}) is in _core, above the handler"
        for module, layer in layers.items()
        if (module == "_core" or module.startswith("_core.")) and layer > handler
    ]
    found += [
        f"{module} (layer {layer}) is a floor of the core outside _core"
        for module, layer in layers.items()
        if layer <= handler
        and module not in CORE_AT_THE_TOP
        and not (module == "_core" or module.startswith("_core."))
    ]
    return sorted(found)


def test_the_tree_is_the_layers() -> None:
    assert _misplaced(LAYERS) == [], (
        "the core's floors (layers 0-4) live in nats_sync/_core/, and nothing else does; "
        "see docs/ARCHITECTURE.md, 'The tree'"
    )


def test_the_tree_check_sees_a_misplaced_module() -> None:
    layers = {
        "_core.handler": 4,
        "_core.proto": 0,
        "_outbox": 2,
        "msg": 0,
        "_core.spare": 6,
        "client": 6,
    }
    assert _misplaced(layers) == [
        "_core.spare (layer 6) is in _core, above the handler",
        "_outbox (layer 2) is a floor of the core outside _core",
    ]

"""The package's import structure, read from its source: no import cycles; each layer of the design
(the design's "Layers") imports only the ones below it; the adapters stay apart (the server knows nothing of
the console, only ``compactlog spark`` runs Spark); and adapters reach under the embedded API (storage,
cleaner, compaction) only for config definitions, apart from a list of today's reaches that only shrinks.

Every ``import`` and ``from ... import`` counts, including those inside functions (a lazy import is an
arrow too: it runs sooner or later); only imports under ``if TYPE_CHECKING:`` are left out, since they
never run. Relative imports are resolved, and ``from pkg import name`` points at ``pkg.name`` when that is
a module of ours, else at ``pkg``. Each rule is also run on a planted violation, so that none of them
can pass by reading nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import compactlog

PACKAGE_DIR = Path(compactlog.__file__).parent
PACKAGE = "compactlog"

# The layers, lowest first: a module imports nothing of a layer above its own. Modules directly under
# compactlog/ (api.py, producer.py, consumer.py, verify.py, advisor.py, ...) are the API layer, apart
# from the ground every layer stands on (errors, clock, lazy, numbers, java_hash) and the entry point
# (__main__, an adapter).
# So is the transaction coordinator's pure package (compactlog.transactions: states, decisions, record
# bytes), which the server's handlers will call as they call the group coordinator.
API_PACKAGES = ("compactlog.transactions",)
GROUND = ("compactlog.errors", "compactlog.clock", "compactlog.lazy", "compactlog.numbers", "compactlog.java_hash")
LAYERS = ("ground", "records", "storage", "cleaner", "compaction", "security", "api", "adapters")
ADAPTERS = ("compactlog.cli", "compactlog.server", "compactlog.spark", "compactlog.console", "compactlog.__main__")
# Adapters stay apart: the console may use the server's public pieces (the authorizer, the coordinator's
# records), the command line may start the broker and the console; nothing else crosses.
ADAPTER_REACHES_FORBIDDEN = {
    "compactlog.server": ("compactlog.console", "compactlog.cli", "compactlog.spark"),
    "compactlog.spark": ("compactlog.cli", "compactlog.server", "compactlog.console"),
    "compactlog.console": ("compactlog.cli", "compactlog.spark"),
    "compactlog.cli": ("compactlog.spark",),
}
SPARK_COMMAND = "compactlog.cli.spark"  # the ``compactlog spark`` commands: the one cli module that runs Spark jobs
# What an adapter may import under the storage, the cleaner and Pulsar-style compaction: the config
# definitions (topic, log, broker and cleaner configs and their machinery). Everything else goes through
# the embedded API. ``errors`` is not under them: every layer may raise and catch those.
CONFIG_DEFINITIONS = ("compactlog.storage.topic_config", "compactlog.storage.log_config",
                      "compactlog.storage.broker_config", "compactlog.storage.cleaner_config",
                      "compactlog.storage.configdef")
BELOW_THE_API = ("compactlog.storage", "compactlog.cleaner", "compactlog.compaction")
# The reaches below the API that adapters have today, each to be replaced by a call of the API (or a
# definition moved to where it belongs) and then struck from this list. The list only shrinks: a reach
# not listed fails, and so does a listed one that is gone.
ADAPTER_REACHES_BELOW_THE_API: Mapping[str, frozenset[str]] = {source: frozenset(targets) for source, targets in {
}.items()}


@dataclass(frozen=True)
class Arrow:
    source: str
    target: str
    line: int

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} (line {self.line})"


def module_name(path: Path, root: Path = PACKAGE_DIR) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(node: ast.AST) -> Iterable[ast.Import | ast.ImportFrom]:
    """Every import statement under ``node``, at any depth, except the body of ``if TYPE_CHECKING:``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:
                yield from _import_nodes(ast.Module(body=[other], type_ignores=[]))
            continue
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        else:
            yield from _import_nodes(child)


def arrows_of(name: str, source: str, is_package: bool, modules: Iterable[str]) -> list[Arrow]:
    """The arrows from module ``name`` (its text ``source``) to modules of the package."""
    known = set(modules)
    package = name if is_package else name.rpartition(".")[0]
    out = []
    for node in _import_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            targets = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in known else origin for a in node.names]
        out += [Arrow(name, t, node.lineno) for t in targets if t == PACKAGE or t.startswith(PACKAGE + ".")]
    return out


def read_package(root: Path = PACKAGE_DIR) -> dict[str, list[Arrow]]:
    """Module name -> its arrows, for every module of the package under ``root``."""
    paths = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    # Compiled modules (a C extension, known here by its stub) are modules too: ``from . import _native``
    # points at them, not at the package.
    compiled = {module_name(p.with_name(p.name.split(".")[0] + ".py"), root) for p in root.rglob("*.pyi")}
    return {name: arrows_of(name, p.read_text(encoding="utf-8"), p.name == "__init__.py", {*paths, *compiled})
            for name, p in paths.items()}


def graph_of(package: Mapping[str, list[Arrow]]) -> dict[str, set[str]]:
    return {name: {a.target for a in arrows if a.target in package} for name, arrows in package.items()}


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One closed path (first module repeated at the end) per strongly connected group of modules that
    import each other, found with Tarjan's algorithm (iteratively: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1 or node in graph[node]:
                        groups.append(sorted(group))
    return [_closed_path(graph, set(g)) for g in groups]


def _closed_path(graph: Mapping[str, set[str]], group: set[str]) -> list[str]:
    """A shortest way from the group's first module back to itself, through the group."""
    first = min(group)
    came_from: dict[str, str] = {}
    frontier = [first]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & group):
                if child == first:  # back home: walk the way here backwards
                    path = [node]
                    while path[-1] != first:
                        path.append(came_from[path[-1]])
                    return [first, *reversed(path[:-1]), first]
                if child not in came_from:
                    came_from[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no closed path in {sorted(group)}")


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def layer_of(name: str) -> str:
    if name in GROUND:
        return "ground"
    if any(within(name, a) for a in ADAPTERS):
        return "adapters"
    for layer in ("records", "storage", "cleaner", "compaction", "security"):
        if within(name, f"{PACKAGE}.{layer}"):
            return layer
    return "api"  # the package itself, the modules directly under it and API_PACKAGES


# the rules: each returns the arrows that break it -----------------------------------------------------

def import_cycles(package: Mapping[str, list[Arrow]]) -> list[str]:
    return [" -> ".join(path) for path in cycles(graph_of(package))]


def upward_arrows(package: Mapping[str, list[Arrow]]) -> list[Arrow]:
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    return [a for arrows in package.values() for a in arrows if rank[layer_of(a.target)] > rank[layer_of(a.source)]]


def adapter_crossings(package: Mapping[str, list[Arrow]]) -> list[Arrow]:
    bad = []
    for arrows in package.values():
        for a in arrows:
            for source, targets in ADAPTER_REACHES_FORBIDDEN.items():
                if within(a.source, source) and any(within(a.target, t) for t in targets):
                    if not (within(a.source, SPARK_COMMAND) and within(a.target, f"{PACKAGE}.spark")):
                        bad.append(a)
    return bad


def server_reaches_console(package: Mapping[str, list[Arrow]]) -> list[Arrow]:
    return [a for arrows in package.values() for a in arrows
            if within(a.source, f"{PACKAGE}.server") and within(a.target, f"{PACKAGE}.console")]


def reaches_below_the_api(package: Mapping[str, list[Arrow]],
                          allowed: Mapping[str, frozenset[str]] = ADAPTER_REACHES_BELOW_THE_API
                          ) -> tuple[list[Arrow], list[str]]:
    """(adapter imports under the storage, cleaner or compaction that are neither config definitions nor
    listed in ``allowed``; listed ones no adapter makes any more)."""
    new, seen = [], set()
    for arrows in package.values():
        for a in arrows:
            if layer_of(a.source) != "adapters" or not any(within(a.target, b) for b in BELOW_THE_API):
                continue
            if a.target in CONFIG_DEFINITIONS:
                continue
            if a.target in allowed.get(a.source, ()):
                seen.add((a.source, a.target))
            else:
                new.append(a)
    gone = [f"{source} -> {target}" for source, targets in sorted(allowed.items()) for target in sorted(targets)
            if (source, target) not in seen]
    return new, gone


# the package as it is ----------------------------------------------------------------------------------

PACKAGE_ARROWS = read_package()


def test_the_package_is_read_whole():
    """The reader finds the modules and arrows we know of (a reader that finds nothing passes every rule)."""
    assert {"compactlog.api", "compactlog.server.broker", "compactlog.console.app", "compactlog.records.batch"} \
        <= set(PACKAGE_ARROWS)
    targets = {a.target for a in PACKAGE_ARROWS["compactlog.server.apis"]}
    assert {"compactlog.server.broker", "compactlog.server.sasl", "compactlog.server.coordinator.handlers"} <= targets
    lazy = {a.target for a in PACKAGE_ARROWS["compactlog.cli.serve"]}  # imports inside the command's function
    assert {"compactlog.server.network", "compactlog.console.app"} <= lazy
    assert {layer_of(name) for name in PACKAGE_ARROWS if any(within(name, p) for p in API_PACKAGES)} == {"api"}
    assert "compactlog.transactions.coordinator" in PACKAGE_ARROWS


def test_no_import_cycles():
    found = import_cycles(PACKAGE_ARROWS)
    assert not found, "modules that import each other (break the cycle by composing from below):\n" + "\n".join(found)


def test_no_layer_imports_one_above_it():
    found = upward_arrows(PACKAGE_ARROWS)
    assert not found, "imports of a higher layer (" + " < ".join(LAYERS) + "):\n" + "\n".join(
        f"{a}  [{layer_of(a.source)} -> {layer_of(a.target)}]" for a in found)


def test_the_server_never_imports_the_console():
    found = server_reaches_console(PACKAGE_ARROWS)
    assert not found, "the server imports the console (serve composes them):\n" + "\n".join(map(str, found))


# The coordinators' objects belong to the broker's event loop: the console reads them only through the
# plain values of server/state_views.py, never by importing their modules.
COORDINATOR_MODULES = (f"{PACKAGE}.server.coordinator", f"{PACKAGE}.server.txn_coordinator", f"{PACKAGE}.transactions")


def test_the_console_reads_the_coordinators_through_state_views():
    found = [a for arrows in PACKAGE_ARROWS.values() for a in arrows
             if within(a.source, f"{PACKAGE}.console") and any(within(a.target, m) for m in COORDINATOR_MODULES)]
    assert not found, "the console imports a coordinator's modules (use server.state_views):\n" + "\n".join(
        map(str, found))


def test_adapters_reach_below_the_api_only_for_config_definitions():
    new, gone = reaches_below_the_api(PACKAGE_ARROWS)
    assert not new, ("adapters import under the storage, cleaner or compaction (call the embedded API instead; "
                     "config definitions and errors are fine):\n" + "\n".join(map(str, new)))
    assert not gone, ("no adapter imports these any more: strike them from ADAPTER_REACHES_BELOW_THE_API:\n"
                      + "\n".join(gone))


# Attributes of the embedded API's internals: an adapter that reads them reaches past the seam as surely
# as one importing the storage (the log manager, its logs, the cleaner's and the compaction's insides).
INTERNAL_ATTRIBUTES = frozenset({"manager", "get_log", "_log", "_cleaner", "_compaction"})


def attribute_reaches(root: Path = PACKAGE_DIR) -> list[str]:
    """``file:line attribute`` for each use of an internal attribute, or of ``CompactLog.log()``, in adapter code."""
    found = []
    for path in sorted(root.rglob("*.py")):
        name = module_name(path, root)
        if layer_of(name) != "adapters":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in INTERNAL_ATTRIBUTES:
                found.append(f"{path.relative_to(root)}:{node.lineno} .{node.attr}")
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "log"
                  and isinstance(node.func.value, ast.Name) and node.func.value.id == "cl"):
                found.append(f"{path.relative_to(root)}:{node.lineno} cl.log()")
    return sorted(found)


def test_adapters_use_no_internals_of_the_api():
    found = attribute_reaches()
    assert not found, ("adapters reach the API's internals (use CompactLog.partition / find_partition and the "
                       "API's methods instead):\n" + "\n".join(found))


def test_an_attribute_reach_is_found(tmp_path):
    root = tmp_path / PACKAGE
    (root / "server").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "server" / "__init__.py").write_text("")
    (root / "server" / "fetch.py").write_text("def f(cl):\n    lg = cl.manager.get_log('t', 0)\n    cl.log('t')\n"
                                              "    return cl.partition('t', 0)\n")
    (root / "api.py").write_text("def f(self):\n    return self.manager\n")  # the API itself may
    assert attribute_reaches(root) == ["server/fetch.py:2 .get_log", "server/fetch.py:2 .manager",
                                       "server/fetch.py:3 cl.log()"]


def test_adapters_stay_apart():
    """In particular the console and the command line run no Spark: only ``compactlog spark`` does."""
    found = adapter_crossings(PACKAGE_ARROWS)
    assert not found, "imports between adapters:\n" + "\n".join(map(str, found))


# each rule catches a planted violation -----------------------------------------------------------------

def _planted(tmp_path: Path, files: Mapping[str, str]) -> dict[str, list[Arrow]]:
    """A package named ``compactlog`` holding only ``files`` (path -> source), read as the real one is."""
    root = tmp_path / PACKAGE
    for rel, text in {"__init__.py": "", **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.parents:
            if parent == root.parent:
                break
            (parent / "__init__.py").touch()
        path.write_text(text)
    return read_package(root)


def test_a_cycle_is_found_and_its_path_named(tmp_path):
    pkg = _planted(tmp_path, {
        "server/broker.py": "def handle():\n    from . import apis\n",  # inside a function: still an arrow
        "server/apis.py": "from .produce import HANDLERS\n",
        "server/produce.py": "from .broker import handle\n",
    })
    assert import_cycles(pkg) == [
        "compactlog.server.apis -> compactlog.server.produce -> compactlog.server.broker -> compactlog.server.apis"]


def test_an_import_under_type_checking_is_no_arrow(tmp_path):
    pkg = _planted(tmp_path, {
        "server/coordinator.py": "from .offsets import Manager\n",
        "server/offsets.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .coordinator import C\n",
    })
    assert import_cycles(pkg) == []


def test_an_upward_import_is_found(tmp_path):
    pkg = _planted(tmp_path, {
        "records/batch.py": "from ..storage import segment\n",
        "storage/segment.py": "import compactlog.cleaner.cleaner\n",
        "cleaner/cleaner.py": "from compactlog import api\n",
        "compaction/service.py": "from ..server.broker import Broker\n",
        "api.py": "",
        "server/broker.py": "from ..storage import segment\n",  # downward: allowed
    })
    assert sorted(f"{a.source} -> {a.target}" for a in upward_arrows(pkg)) == [
        "compactlog.cleaner.cleaner -> compactlog.api",
        "compactlog.compaction.service -> compactlog.server.broker",
        "compactlog.records.batch -> compactlog.storage.segment",
        "compactlog.storage.segment -> compactlog.cleaner.cleaner",
    ]


def test_the_server_reaching_the_console_is_found(tmp_path):
    pkg = _planted(tmp_path, {
        "server/network.py": "async def start():\n    from ..console.app import build\n",
        "console/app.py": "from ..server.security import x\n",  # the console may use the server's pieces
        "server/security.py": "",
    })
    assert [f"{a.source} -> {a.target}" for a in server_reaches_console(pkg)] == [
        "compactlog.server.network -> compactlog.console.app"]


def test_spark_reached_from_the_console_or_the_cli_is_found(tmp_path):
    pkg = _planted(tmp_path, {
        "console/pages/compression.py": "from ...spark.advise import advise_local\n",
        "cli/topics.py": "from ..spark import session\n",
        "cli/spark.py": "from ..spark.advise import advise\n",  # the spark command may
        "spark/advise.py": "",
        "spark/session.py": "",
    })
    assert sorted(f"{a.source} -> {a.target}" for a in adapter_crossings(pkg)) == [
        "compactlog.cli.topics -> compactlog.spark.session",
        "compactlog.console.pages.compression -> compactlog.spark.advise",
    ]


def test_an_adapter_reaching_below_the_api_is_found_and_the_list_only_shrinks(tmp_path):
    pkg = _planted(tmp_path, {
        "cli/topics.py": "from ..storage.segment import Segment\nfrom ..storage.topic_config import TOPIC_CONFIGS\n",
        "server/fetch.py": "def read():\n    from ..cleaner import survival\n",
        "server/broker.py": "from ..storage import files\nfrom ..errors import CompactLogError\n",
        "storage/segment.py": "", "storage/topic_config.py": "", "storage/files.py": "", "cleaner/survival.py": "",
        "errors.py": "",
    })
    allowed = {"compactlog.server.broker": frozenset({"compactlog.storage.files"}),
               "compactlog.server.admin": frozenset({"compactlog.storage.topics"})}
    new, gone = reaches_below_the_api(pkg, allowed)
    assert sorted(f"{a.source} -> {a.target}" for a in new) == [
        "compactlog.cli.topics -> compactlog.storage.segment", "compactlog.server.fetch -> compactlog.cleaner.survival"]
    assert gone == ["compactlog.server.admin -> compactlog.storage.topics"]

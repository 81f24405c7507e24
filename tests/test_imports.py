"""The package's import rules, read statically from the source with `ast`.

- the engine imports nothing of the package but itself and the contract leaf `falai_django.llm`;
  providers never import `falai_django.engine`: both meet in `llm`, which imports nothing else
  of the package;
- the pure layers (engine, llm, providers, stores, testing) never import Django;
- the domains (`handoff/`, `flows/`, `admin/`, `playground/`) build on `host/` and `models/`;
  `host/`, `models/`, `stores/`, `engine/` and `llm/` import no domain in any way;
- no import circle anywhere in the package, counting imports inside functions too;
- no service module imports an entry point (`tasks`, `api`, `admin`, `playground`, `urls`,
  management commands).

Every import statement counts for the layer rules (inside functions and `TYPE_CHECKING` too), and
so does a string that names a package module by its dotted path (`"falai_django.stores.django.
DjangoStore"`, `"pkg.mod:attr"`): a setting's default or a lazy export's table is loaded by
`import_string` or `importlib` when the code runs, which ties the two files as an import inside
a function does. Docstrings, loggers' names and queued tasks' names (loaded by the worker) are
not imports. The circle checks walk the imports that can run: module level and class bodies for
one graph, those plus imports inside functions and dotted paths for the other.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

import falai_django

PACKAGE = "falai_django"
ROOT = Path(falai_django.__file__).resolve().parent

PURE_LAYERS = ("falai_django.engine", "falai_django.llm", "falai_django.providers", "falai_django.stores",
               "falai_django.testing")
# The ORM store is the one pure-layer module allowed to reach Django (inside its methods).
DJANGO_ALLOWED = frozenset({"falai_django.stores.django"})
DJANGO_NAMES = ("django", "rest_framework", "django_q")

# The modules the circle check covers: the whole package.
CYCLE_CHECKED: tuple[str, ...] = (PACKAGE,)

# The Django layer's entry points: they sit on top, and no service module imports them back,
# not even inside a function (where a lazy import would hide a circle).
ENTRY_POINTS = ("falai_django.tasks", "falai_django.api", "falai_django.admin", "falai_django.playground",
                "falai_django.urls", "falai_django.management")

# The domains built on the host; the layers under them import none of them.
HOST = "falai_django.host"
DOMAINS = ("falai_django.handoff", "falai_django.flows", "falai_django.admin", "falai_django.playground",
           "falai_django.replay")
UNDER_THE_DOMAINS = (HOST, "falai_django.models", "falai_django.stores", "falai_django.engine", "falai_django.llm")


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # an absolute module name (a package's own name for its __init__)
    line: int
    at_load: bool  # runs when `source` is imported (not inside a function, not TYPE_CHECKING)
    type_only: bool = False  # inside `if TYPE_CHECKING:`: never runs


def module_sources(root: Path = ROOT, package: str = PACKAGE) -> dict[str, tuple[str, bool]]:
    """module name -> (source text, is a package) for every .py file under `root`."""
    out: dict[str, tuple[str, bool]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        out[".".join([package, *parts])] = (path.read_text(encoding="utf-8"), is_package)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


# Calls whose string arguments are dotted paths this process never loads: a logger's name, and a
# task's name, which the worker that runs the task imports (the queue is the seam between them).
NOT_AN_IMPORT = frozenset({"getLogger", "enqueue", "async_task", "schedule"})


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _module_named(text: str, known: set[str]) -> str | None:
    """The package module a dotted-path string names (`"pkg.mod.Attr"`, `"pkg.mod:attr"`, `"pkg.mod"`),
    or None. The package root alone names nothing: every module is inside it."""
    path = text.partition(":")[0]
    if not path.startswith(PACKAGE + "."):
        return None
    parts = path.split(".")
    for end in range(len(parts), 1, -1):
        if ".".join(parts[:end]) in known:
            return ".".join(parts[:end])
    return None


def imports_of(module: str, source: str, is_package: bool, modules: Iterable[str]) -> list[Import]:
    """Every import statement in `source`, as absolute module names (`from pkg import sub`
    names the submodule `pkg.sub` when there is one), and every string naming a package module
    by its dotted path (a setting's default, a lazy export's table): `import_string` or
    `importlib` loads it when the code runs, so it ties the two files as an import inside a
    function does."""
    known = set(modules)
    out: list[Import] = []

    def visit(nodes: Iterable[ast.AST], at_load: bool, type_only: bool = False) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                out.extend(Import(module, alias.name, node.lineno, at_load, type_only) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(module, is_package, node)
                out.append(Import(module, target, node.lineno, at_load, type_only))
                for alias in node.names:
                    if f"{target}.{alias.name}" in known:
                        out.append(Import(module, f"{target}.{alias.name}", node.lineno, at_load, type_only))
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # a docstring (or a bare string) names a module but never loads it
            elif isinstance(node, ast.Call) and _called_name(node) in NOT_AN_IMPORT:
                visit([node.func], at_load, type_only)  # a logger's name is not a module to load
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                target = _module_named(node.value, known)
                if target is not None:  # a dotted path some code imports when it runs
                    out.append(Import(module, target, node.lineno, False, type_only))
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                visit(ast.iter_child_nodes(node), False, type_only)
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.body, False, True)
                visit(node.orelse, at_load, type_only)
            else:
                visit(ast.iter_child_nodes(node), at_load, type_only)

    visit(ast.parse(source, filename=module).body, True)
    return out


def all_imports(sources: Mapping[str, tuple[str, bool]]) -> list[Import]:
    return [imp for name, (text, is_package) in sources.items() for imp in imports_of(name, text, is_package, sources)]


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def layer_violations(imports: Iterable[Import]) -> list[str]:
    """The layer rules, one line per offending import."""
    problems = []
    for imp in imports:
        src, dst = imp.source, imp.target
        where = f"{src} (line {imp.line}) imports {dst}"
        if _under(src, "falai_django.engine") and _under(dst, "falai_django.providers"):
            problems.append(f"{where}: the engine reaches providers only through falai_django.llm")
        elif (_under(src, "falai_django.engine") and _under(dst, PACKAGE) and dst != PACKAGE
              and not _under(dst, "falai_django.engine") and not _under(dst, "falai_django.llm")):
            problems.append(f"{where}: the engine imports nothing above it (only itself and falai_django.llm)")
        if _under(src, "falai_django.providers") and _under(dst, "falai_django.engine"):
            problems.append(f"{where}: a provider depends only on falai_django.llm (and its SDK)")
        if _under(src, "falai_django.llm") and _under(dst, PACKAGE) and not _under(dst, "falai_django.llm"):
            problems.append(f"{where}: falai_django.llm is a leaf and imports nothing else of the package")
        if (any(_under(src, layer) for layer in PURE_LAYERS) and src not in DJANGO_ALLOWED
                and any(_under(dst, name) for name in DJANGO_NAMES)):
            problems.append(f"{where}: the pure layers never import Django")
    return problems


def load_graph(imports: Iterable[Import], checked: Iterable[str], *, every_import: bool = False,
               ) -> dict[str, set[str]]:
    """module -> modules it imports at load time (or at all, with `every_import`), both inside
    `checked` (a tuple of prefixes)."""
    prefixes = tuple(checked)
    inside = lambda name: any(_under(name, p) for p in prefixes)  # noqa: E731
    graph: dict[str, set[str]] = {}
    for imp in imports:
        if inside(imp.source):
            graph.setdefault(imp.source, set())
            runs = imp.at_load or (every_import and not imp.type_only)
            # a module's own packages have begun loading before it: importing from them adds no edge
            ancestor = imp.source.startswith(imp.target + ".")
            if runs and inside(imp.target) and imp.target != imp.source and not ancestor:
                graph[imp.source].add(imp.target)
    return graph


def domain_violations(imports: Iterable[Import]) -> list[str]:
    """A layer under the domains (`host/`, `models/`, `stores/`, `engine/`, `llm/`) importing a
    domain, at any depth of the file, type-only imports and dotted-path strings included."""
    return [f"{imp.source} (line {imp.line}) imports {imp.target}: {_layer_of(imp.source)}/ imports no domain"
            for imp in imports
            if any(_under(imp.source, layer) for layer in UNDER_THE_DOMAINS)
            and any(_under(imp.target, d) for d in DOMAINS)]


def _layer_of(module: str) -> str:
    return module.split(".")[1]


def entry_point_violations(imports: Iterable[Import]) -> list[str]:
    """A service module (not an entry point) importing an entry point, at any depth of the file."""
    is_entry = lambda name: any(_under(name, e) for e in ENTRY_POINTS)  # noqa: E731
    return [f"{imp.source} (line {imp.line}) imports the entry point {imp.target}"
            for imp in imports
            if _under(imp.source, PACKAGE) and not is_entry(imp.source) and is_entry(imp.target)]


def import_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One cycle path (first module repeated at the end) per strongly connected component
    bigger than one module (Tarjan), in a stable order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def connect(node: str) -> None:  # recursion depth is bounded by the package's module count
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return [_path_within(component, graph) for component in sorted(components, key=min)]


def _path_within(component: set[str], graph: Mapping[str, set[str]]) -> list[str]:
    """A shortest cycle through the component's first module (breadth-first inside it)."""
    start = min(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph.get(node, ())):
                if nxt not in component:
                    continue
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if nxt not in previous:
                    previous[nxt] = node
                    following.append(nxt)
        frontier = following
    return sorted(component)  # unreachable for a real component


# ---------------------------------------------------------------------------------- the rules

@pytest.fixture(scope="module")
def imports() -> list[Import]:
    return all_imports(module_sources())


def test_the_walk_sees_every_layer(imports):
    sources = module_sources()
    for layer in (*PURE_LAYERS, "falai_django.engine.turn", "falai_django.llm.types"):
        assert layer in sources
    assert any(imp.source == "falai_django.engine.turn" and imp.target.startswith("falai_django.llm")
               for imp in imports)


def test_engine_providers_and_llm_keep_their_layers(imports):
    problems = layer_violations(imports)
    assert not problems, "\n".join(problems)


def test_no_import_circle(imports):
    cycles = import_cycles(load_graph(imports, CYCLE_CHECKED))
    assert not cycles, "import circles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_circle_even_through_imports_inside_functions(imports):
    graph = load_graph(imports, CYCLE_CHECKED, every_import=True)
    assert "falai_django.host.turns" in graph and "falai_django.host.writer" in graph["falai_django.host.turns"]
    assert "falai_django.llm.classify" in graph["falai_django.llm.errors"]
    cycles = import_cycles(graph)
    assert not cycles, "import circles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_layer_under_the_domains_imports_one(imports):
    problems = domain_violations(imports)
    assert not problems, "\n".join(problems)
    domains_on_host = {imp.source.split(".")[1] for imp in imports
                       if any(_under(imp.source, d) for d in DOMAINS) and _under(imp.target, HOST)}
    # flows reach the host through conf only; replay only queues its admin runs (host.jobs)
    assert domains_on_host == {"handoff", "admin", "playground", "replay"}
    assert {imp.target for imp in imports if _under(imp.source, "falai_django.replay") and _under(imp.target, HOST)} \
        == {"falai_django.host.jobs"}
    # the flows domain owns the spec check and the cache reset a save needs; the model imports neither
    assert not [imp for imp in imports if _under(imp.source, "falai_django.models")
                and imp.target in ("falai_django.conf", "falai_django.flows.running")]


def test_every_domain_says_what_it_owns_and_may_import():
    sources = module_sources()
    for package in (HOST, *DOMAINS, "falai_django.models"):
        doc = ast.get_docstring(ast.parse(sources[package][0])) or ""
        assert "import" in doc and len(doc) > 200, f"{package} needs a docstring saying what it owns and imports"


def test_the_host_facade_and_the_handoff_name_one_function_each():
    import falai_django.host as host
    from falai_django import handoff
    from falai_django.host import silencing

    assert host.unsilence is handoff.give_back is silencing.give_back
    assert host.silence is handoff.silence is silencing.silence
    assert handoff.take_over is silencing.take_over
    # one name for rebuilding a conversation's wakes: the host's
    assert not hasattr(handoff, "requeue_wakes")
    with pytest.raises(AttributeError):
        host.no_such_function  # noqa: B018


def test_the_package_root_types_every_lazy_export():
    tree = ast.parse(module_sources()[PACKAGE][0])
    typed = {alias.asname or alias.name
             for node in ast.walk(tree) if isinstance(node, ast.If) and _is_type_checking(node.test)
             for inner in node.body if isinstance(inner, ast.ImportFrom) for alias in inner.names}
    assert typed == set(falai_django._EXPORTS) == set(falai_django.__all__)


def test_entry_points_sit_on_top(imports):
    problems = entry_point_violations(imports)
    assert not problems, "\n".join(problems)


def test_a_lower_layer_importing_a_domain_in_any_way_is_caught():
    fake = _fake({"falai_django.host.turns": "def f():\n    from falai_django.handoff import state\n",
                  "falai_django.host": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                       "    from falai_django.handoff.state import silence\n",
                  "falai_django.host.__x": 'LAZY = {"silence": "falai_django.handoff.state:silence"}\n',
                  "falai_django.models.flows": "def clean():\n    from falai_django.flows import running\n",
                  "falai_django.stores.django": "import falai_django.admin\n",
                  "falai_django.handoff.state": "", "falai_django.flows.running": "", "falai_django.admin": "",
                  "falai_django.handoff.desk": "from falai_django.host import turns\n",
                  "falai_django.engine.turn": '"""Unlike falai_django.flows.running, ..."""\n'})
    found = sorted({p.split(" (")[0] for p in domain_violations(fake)})
    assert found == ["falai_django.host", "falai_django.host.__x", "falai_django.host.turns",
                     "falai_django.models.flows", "falai_django.stores.django"]


def test_a_dotted_path_string_is_an_import_that_runs_later():
    fake = _fake({
        "falai_django.conf": '"""Say "falai_django.models" here: a docstring loads nothing."""\n'
                             'DEFAULTS = {"STORE": "falai_django.stores.django.DjangoStore"}\n'
                             'LAZY = {"x": "falai_django.stores.django:DjangoStore"}\n'
                             'import logging\nlogger = logging.getLogger("falai_django.models")\n'
                             'def go():\n    enqueue("falai_django.models.run", 1)\n',
        "falai_django.stores.django": "from falai_django import models\n",
        "falai_django.models": "def clean():\n    from falai_django import conf\n",
    })
    strings = sorted((imp.line, imp.target, imp.at_load) for imp in fake if imp.source == "falai_django.conf")
    assert strings == [(2, "falai_django.stores.django", False), (3, "falai_django.stores.django", False),
                       (4, "logging", True)]
    every = load_graph(fake, (PACKAGE,), every_import=True)
    assert import_cycles(every) == [["falai_django.conf", "falai_django.stores.django", "falai_django.models",
                                     "falai_django.conf"]]
    assert not import_cycles(load_graph(fake, (PACKAGE,)))  # none of the three runs at load


def test_an_engine_module_importing_the_host_is_caught():
    found = layer_violations(_fake({"falai_django.engine.turn": "def f():\n    from falai_django import conf\n",
                                    "falai_django.conf": ""}))
    assert len(found) == 1 and "falai_django.conf: the engine imports nothing above it" in found[0]


def test_a_service_importing_an_entry_point_inside_a_function_is_caught():
    fake = _fake({"falai_django.sending": "def send():\n    from .tasks import enqueue\n",
                  "falai_django.tasks": "from . import sending\n"})
    assert entry_point_violations(fake) == ["falai_django.sending (line 2) imports the entry point falai_django.tasks"]
    graph = load_graph(fake, ["falai_django.sending", "falai_django.tasks"], every_import=True)
    assert import_cycles(graph)
    assert not import_cycles(load_graph(fake, ["falai_django.sending", "falai_django.tasks"]))


# ------------------------------------------------------------- the checker on made-up modules

def _fake(sources: dict[str, str]) -> list[Import]:
    return all_imports({name: (text, name.endswith("__init__")) for name, text in sources.items()})


def test_a_relative_engine_import_of_providers_is_caught():
    found = layer_violations(_fake({
        "falai_django.engine.turn": "def f():\n    from ..providers import base\n",
        "falai_django.providers.base": "",
    }))
    assert len(found) == 2 and "falai_django.engine.turn (line 2) imports falai_django.providers" in found[0]


def test_provider_importing_engine_llm_importing_engine_and_django_are_caught():
    found = layer_violations(_fake({
        "falai_django.providers.x": "from falai_django.engine.errors import ProviderError\n",
        "falai_django.llm.y": "from falai_django.stores import base\n",
        "falai_django.engine.z": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import django.db\n",
    }))
    assert [p.split(":", 1)[1].strip().split()[0] for p in found] == ["a", "falai_django.llm", "the"]


def test_a_circle_is_reported_with_its_path_and_function_imports_do_not_count():
    imports = _fake({
        "falai_django.engine.a": "from . import b\n",
        "falai_django.engine.b": "from .c import thing\n",
        "falai_django.engine.c": "import falai_django.engine.a\n",
        "falai_django.engine.d": "from . import a\n",
        "falai_django.engine.e": "def late():\n    from . import d\n",
        "falai_django.host": "from .engine import a\n",
    })
    graph = load_graph(imports, ("falai_django.engine",))
    assert "falai_django.host" not in graph
    assert import_cycles(graph) == [["falai_django.engine.a", "falai_django.engine.b", "falai_django.engine.c",
                                     "falai_django.engine.a"]]

"""Zero import circles: the import graph of porter/, backends/ and grammars/ has no cycle.

The graph is read from the source files with `ast` (no porter module is imported: a fraction of a
second).  Every import statement is a dependency wherever it sits: at module level, inside a
function, or under `if TYPE_CHECKING:`.  Module names are the installed ones: backends/ is
`porter.backends`, grammars/ is `porter.grammars`, and a package's `__init__.py` is the package's own
module.  `from X import name` depends on `X.name` when that is a module, otherwise on `X`.
`import a.b.c` depends on `a.b.c` (the parent packages it also runs are not counted: they would
join every package with its own submodules).

A cycle is a strongly connected component of more than one module, or a module importing itself.
Cycles still waiting on the restructuring into one folder per target are listed in KNOWN_CYCLE_EDGES,
each by the edge that points the wrong way; that list may only shrink: the test fails on a new cycle
and also when a listed edge is gone or no longer closes a cycle, so the list stays honest.

The same holds between folders (:func:`folder_of`): each module of porter/ is a node of its own, each
folder of porter/ one node, and backends/ is split (its own modules one node,
``porter.backends``, each target folder another).  No folder reaches back into one that imports it,
so the layers can stand one on another; from the bottom: model, errors, files and the other plain
modules; sandbox; grammars; scan; translate; records, redact, pricing; cache; toolcache; backends, root
then targets; results; harness; llm; lift; plan; program; workflows; report; cli.
"""

from __future__ import annotations

import ast
import functools
from collections import deque
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {
    "porter": ROOT / "porter",
    "porter.backends": ROOT / "backends",
    "porter.grammars": ROOT / "grammars",
}

# (importer, imported) -> why it is still there.  Each edge points up the layers (or across targets) and
# closes a cycle; removing it is the job of moving each target into its own folder (issue #12, item 2).
KNOWN_CYCLE_EDGES: dict[tuple[str, str], str] = {}

# Folders whose own modules form one node while each of their subfolders is a node of its own.
SPLIT_FOLDERS = ("porter.backends",)

Edge = tuple[str, str]


def module_files() -> dict[str, Path]:
    """Every module under the three roots, by its import name."""
    modules: dict[str, Path] = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([package, *parts])
            modules[name] = path
    return modules


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """`name` if it is one of ours, else the longest of its prefixes that is; None for other packages."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join([*base, target] if target else base)


@functools.cache
def porter_graph() -> tuple[dict[str, Path], dict[str, dict[str, int]]]:
    """porter's own modules and their graph, read once for every test here."""
    files = module_files()
    return files, import_graph(files)


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement, nested ones included (function and class bodies, if / try / with / loops / match):
    an import is always a statement, so expressions need no walking."""
    for stmt in body:
        yield stmt
        for name in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(stmt, name, []))
        for handler in getattr(stmt, "handlers", []):
            yield from _statements(handler.body)
        for case in getattr(stmt, "cases", []):
            yield from _statements(case.body)


def import_graph(modules: dict[str, Path] | None = None) -> dict[str, dict[str, int]]:
    """module -> {imported module: line of the first import of it}."""
    modules = modules if modules is not None else module_files()
    graph: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        deps: dict[str, int] = {}
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _statements(tree.body):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                source = node.module or ""
                if node.level:
                    source = _resolve_relative(module, path.name == "__init__.py", node.level, node.module)
                submodules = [
                    f"{source}.{alias.name}" for alias in node.names if f"{source}.{alias.name}" in modules
                ]
                targets = submodules
                if len(submodules) < len(node.names):
                    targets = [*submodules, source]
            for target in targets:
                found = _known(target, modules)
                if found is not None:
                    deps.setdefault(found, node.lineno)
        graph[module] = deps
    return graph


def strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's components, iteratively (no recursion limit to worry about)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, {})))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
    return components


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Components of more than one module, and modules importing themselves."""
    found = [c for c in strongly_connected(graph) if len(c) > 1 or c[0] in graph[c[0]]]
    return sorted(found)


def shortest_cycle(graph: dict[str, dict[str, int]], start: str, within: set[str]) -> list[str]:
    """The shortest path start -> ... -> start inside one component."""
    previous: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph[node]):
            if child not in within:
                continue
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [*reversed(path), start]
            if child not in previous:
                previous[child] = node
                queue.append(child)
    return [start]


def describe(graph: dict[str, dict[str, int]], component: list[str], files: dict[str, Path]) -> str:
    """One component: its modules, a concrete cycle through it, and every import edge inside it."""
    members = set(component)
    around = shortest_cycle(graph, component[0], members)
    lines = [f"cycle of {len(component)}: " + " -> ".join(around)]
    for module in component:
        for target, line in sorted(graph[module].items()):
            if target in members:
                path = files[module]
                where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                lines.append(f"    {module} -> {target}  ({where}:{line})")
    return "\n".join(lines)


def cycle_edges(graph: dict[str, dict[str, int]]) -> set[Edge]:
    """Every edge that lies on some cycle: both ends in one cyclic component."""
    edges: set[Edge] = set()
    for component in cycles(graph):
        members = set(component)
        edges |= {(m, t) for m in component for t in graph[m] if t in members}
    return edges


def without(graph: dict[str, dict[str, int]], edges: set[Edge]) -> dict[str, dict[str, int]]:
    return {m: {t: line for t, line in deps.items() if (m, t) not in edges} for m, deps in graph.items()}


def problems(
    graph: dict[str, dict[str, int]], known: set[Edge], files: dict[str, Path] | None = None
) -> list[str]:
    """What is wrong: known edges that are gone or close no cycle any more, and every cycle left once
    the known edges are taken out (each with a path around it and the import lines that make it)."""
    found: list[str] = []
    gone = sorted(edge for edge in known if edge[1] not in graph.get(edge[0], {}))
    if gone:
        found.append(
            f"known cycle edges that are no longer imports, drop them from KNOWN_CYCLE_EDGES: {gone}"
        )
    stale = sorted(known - cycle_edges(graph) - set(gone))
    if stale:
        found.append(
            f"known cycle edges that no longer close a cycle, drop them from KNOWN_CYCLE_EDGES: {stale}"
        )
    remaining = without(graph, known)
    for component in cycles(remaining):
        if files is None:
            found.append("cycle: " + " -> ".join(shortest_cycle(remaining, component[0], set(component))))
        else:
            found.append(describe(remaining, component, files))
    return found


def folder_of(module: str, files: dict[str, Path], split: tuple[str, ...] = SPLIT_FOLDERS) -> str:
    """The node of `module` in the folder graph: the root package, a module beside it (``porter.cache``)
    or the folder below it that holds it (``porter.harness`` for ``porter.harness.spec.file``); in a
    folder of `split`, the target folder that holds it (``porter.backends.cuda``), else the split folder
    itself (``porter.backends`` for ``porter.backends.dialect``)."""
    parts = module.split(".")
    node = ".".join(parts[:2])
    if node in split and len(parts) > 2:
        sub = ".".join(parts[:3])
        if files[sub].name == "__init__.py":
            return sub
    return node


def folder_graph(
    graph: dict[str, dict[str, int]], files: dict[str, Path], split: tuple[str, ...] = SPLIT_FOLDERS
) -> tuple[dict[str, dict[str, int]], dict[Edge, list[str]]]:
    """The module graph collapsed onto :func:`folder_of` (imports inside one node dropped), and for each
    folder edge the imports that make it (``module -> imported  (file:line)``)."""
    folders: dict[str, dict[str, int]] = {}
    lines: dict[Edge, list[str]] = {}
    for module, deps in sorted(graph.items()):
        here = folder_of(module, files, split)
        folders.setdefault(here, {})
        for target, line in sorted(deps.items()):
            there = folder_of(target, files, split)
            if there == here:
                continue
            folders[here].setdefault(there, line)
            path = files[module]
            where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            lines.setdefault((here, there), []).append(f"{module} -> {target}  ({where}:{line})")
    return folders, lines


def folder_problems(
    graph: dict[str, dict[str, int]], files: dict[str, Path], split: tuple[str, ...] = SPLIT_FOLDERS
) -> list[str]:
    """Every cycle between folders: a path around it, then for each folder edge inside it the imports
    that make it."""
    folders, lines = folder_graph(graph, files, split)
    found = []
    for component in cycles(folders):
        members = set(component)
        around = shortest_cycle(folders, component[0], members)
        text = [f"folder cycle of {len(component)}: " + " -> ".join(around)]
        for here in component:
            for there in sorted(folders[here]):
                if there in members:
                    text.append(f"  {here} -> {there}:")
                    text += [f"    {line}" for line in lines[(here, there)]]
        found.append("\n".join(text))
    return found


def _write_package(root: Path, files: dict[str, str]) -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for name, text in files.items():
        path = root / (name.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        modules[name.removesuffix(".__init__")] = path
    return modules


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The reader itself: function-level, class-level, try/except, TYPE_CHECKING, relative and submodule
    imports are all edges; other packages are not."""
    files = _write_package(
        tmp_path,
        {
            "pkg.__init__": "",
            "pkg.a": "def f():\n    from pkg import b\n",
            "pkg.b": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub import c\n",
            "pkg.sub.__init__": "from . import d\n",
            "pkg.sub.c": "from ..a import f\nimport pkg.sub.d\nimport os\n",
            "pkg.sub.d": "from pkg.sub import thing\nfrom .d import x\n",
            "pkg.e": "class C:\n    def m(self):\n        try:\n            pass\n"
            "        except ImportError:\n            import pkg.missing.deep\n",
            "pkg.missing": "",
        },
    )
    graph = import_graph(files)
    assert {m: set(d) for m, d in graph.items()} == {
        "pkg": set(),
        "pkg.a": {"pkg.b"},
        "pkg.b": {"pkg.sub.c"},
        "pkg.sub": {"pkg.sub.d"},
        "pkg.sub.c": {"pkg.a", "pkg.sub.d"},
        "pkg.sub.d": {"pkg.sub", "pkg.sub.d"},
        "pkg.e": {"pkg.missing"},
        "pkg.missing": set(),
    }
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"], ["pkg.sub", "pkg.sub.d"]]
    assert shortest_cycle(graph, "pkg.a", {"pkg.a", "pkg.b", "pkg.sub.c"}) == [
        "pkg.a",
        "pkg.b",
        "pkg.sub.c",
        "pkg.a",
    ]
    report = describe(graph, ["pkg.sub", "pkg.sub.d"], files)
    assert "pkg.sub -> pkg.sub.d -> pkg.sub" in report and "pkg/sub/d.py:1" in report
    assert cycles({"x": {"x": 1}, "y": {"x": 2}}) == [["x"]]  # a self-import alone is a cycle too


def test_the_folder_graph_collapses_each_folder_to_one_node(tmp_path: Path) -> None:
    """Modules beside the root package are nodes of their own, a folder is one node (however deep),
    a split folder's own modules are one node and each of its subfolders another; imports inside a
    node are no edges, and a folder cycle is reported with the import lines that make it."""
    files = _write_package(
        tmp_path,
        {
            "pkg.__init__": "",
            "pkg.low": "",
            "pkg.high": "from pkg.layer import deep\n",
            "pkg.layer.__init__": "from pkg.layer import own\n",
            "pkg.layer.own": "import pkg.low\n",
            "pkg.layer.deep.__init__": "",
            "pkg.layer.deep.leaf": "from pkg.layer.own import x\n",
            "pkg.split.__init__": "",
            "pkg.split.contract": "from pkg import low\n",
            "pkg.split.t1.__init__": "from pkg.split import contract\nfrom pkg.split.t2 import y\n",
            "pkg.split.t2.__init__": "from pkg.split import contract\n",
        },
    )
    nodes = {module: folder_of(module, files, ("pkg.split",)) for module in files}
    assert nodes == {
        "pkg": "pkg",
        "pkg.low": "pkg.low",
        "pkg.high": "pkg.high",
        "pkg.layer": "pkg.layer",
        "pkg.layer.own": "pkg.layer",
        "pkg.layer.deep": "pkg.layer",
        "pkg.layer.deep.leaf": "pkg.layer",
        "pkg.split": "pkg.split",
        "pkg.split.contract": "pkg.split",
        "pkg.split.t1": "pkg.split.t1",
        "pkg.split.t2": "pkg.split.t2",
    }
    graph = import_graph(files)
    folders, lines = folder_graph(graph, files, ("pkg.split",))
    assert {node: set(deps) for node, deps in folders.items()} == {
        "pkg": set(),
        "pkg.low": set(),
        "pkg.high": {"pkg.layer"},
        "pkg.layer": {"pkg.low"},
        "pkg.split": {"pkg.low"},
        "pkg.split.t1": {"pkg.split", "pkg.split.t2"},
        "pkg.split.t2": {"pkg.split"},
    }
    assert lines[("pkg.split.t1", "pkg.split")] == [
        f"pkg.split.t1 -> pkg.split.contract  ({files['pkg.split.t1']}:1)"
    ]
    assert folder_problems(graph, files, ("pkg.split",)) == []
    # the contract reaching into a target closes a cycle between the split folder and that target
    (tmp_path / "pkg" / "split" / "contract.py").write_text("from pkg import low\nimport pkg.split.t2\n")
    (report,) = folder_problems(import_graph(files), files, ("pkg.split",))
    assert report.splitlines()[0] == "folder cycle of 2: pkg.split -> pkg.split.t2 -> pkg.split"
    assert "pkg.split.contract -> pkg.split.t2" in report and "contract.py:2" in report
    assert "pkg.split.t2 -> pkg.split.contract" in report
    # unsplit, the same imports stay inside one node: no cycle
    assert folder_problems(import_graph(files), files, ()) == []


def test_known_cycles_may_only_shrink() -> None:
    graph = {"low": {"high": 3}, "high": {"low": 1}, "other": {"low": 1}}
    assert problems(graph, {("low", "high")}) == []
    assert problems(graph, set()) == ["cycle: high -> low -> high"]
    # the listed edge still imports but closes no cycle any more: the list must be pruned
    assert "no longer close a cycle" in problems({"low": {"high": 3}, "high": {}}, {("low", "high")})[0]
    # the listed edge is gone altogether
    assert "no longer imports" in problems({"low": {}, "high": {"low": 1}}, {("low", "high")})[0]
    # a new cycle beside a known one is reported
    graph["other"]["high"] = 2
    graph["high"]["other"] = 4
    assert problems(graph, {("low", "high")}) == ["cycle: high -> other -> high"]


def test_no_import_cycles() -> None:
    files, graph = porter_graph()
    assert {"porter.backends", "porter.grammars", "porter.cli", "porter.results"} <= set(graph)
    found = problems(graph, set(KNOWN_CYCLE_EDGES), files)
    assert not found, "\n".join(found)


def test_no_import_cycles_between_folders() -> None:
    files, graph = porter_graph()
    folders, _ = folder_graph(graph, files)
    assert {"porter.backends", "porter.backends.cuda", "porter.llm", "porter.cache", "porter.cli"} <= set(
        folders
    )
    found = folder_problems(graph, files)
    assert not found, "\n".join(found)


def test_workflows_and_views_meet_only_in_results() -> None:
    """Views render what workflows return, through porter.results: neither side imports the other, and
    the results import neither (nor the harness, whose figures they define)."""
    _, graph = porter_graph()

    def inside(module: str, package: str) -> bool:
        return module == package or module.startswith(package + ".")

    rules: dict[str, tuple[str, ...]] = {
        "porter.report": ("porter.workflows", "porter.cli"),
        "porter.workflows": ("porter.report", "porter.cli"),
        "porter.results": ("porter.harness", "porter.workflows", "porter.report", "porter.cli"),
        "porter.suite_report": ("porter.harness", "porter.workflows", "porter.report", "porter.cli"),
    }
    wrong = sorted(
        (module, target, line)
        for module, deps in graph.items()
        for package, banned in rules.items()
        if inside(module, package)
        for target, line in deps.items()
        if any(inside(target, b) for b in banned)
    )
    assert not wrong, "imports across the results boundary: " + ", ".join(
        f"{m} -> {t} (line {n})" for m, t, n in wrong
    )

"""The layout of the package (issue 22): the library core imports no command-line or test
tooling, its modules form no import cycle but the one SPEC R15/R16 require, and no
module uses another's private names. The graph is read from the source (every import,
deferred into a function or behind ``TYPE_CHECKING`` included), so a cycle cannot hide.
"""

import ast
import functools
import pathlib
import subprocess
import sys

import agentflow

from helpers_source import nodes

PACKAGE = pathlib.Path(agentflow.__file__).parent
# The one upward import allowed: AgentSession.load / open (SPEC R15, R16) read and
# lock the file through the file store, which itself stores AgentSession objects.
ALLOWED_CYCLE_EDGES = {("agentflow.session", "agentflow.stores.files")}


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def resolve(module: str, path: pathlib.Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[:len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def imports(known: dict) -> list:
    """``(importer, imported module, name or None)`` for every import of a module of
    the package, wherever it stands in the file."""
    edges = []
    for module, path in known.items():
        for node in nodes(path):
            if isinstance(node, ast.Import):
                edges += [(module, a.name, None) for a in node.names
                          if a.name.startswith("agentflow")]
            elif isinstance(node, ast.ImportFrom):
                target = resolve(module, path, node)
                if not target.startswith("agentflow"):
                    continue
                for alias in node.names:
                    child = f"{target}.{alias.name}"
                    if child in known:  # ``from . import gate``: the module itself
                        edges.append((module, child, None))
                    else:
                        edges.append((module, target, alias.name))
    return edges


@functools.cache
def read_package() -> tuple:
    """``(modules(), imports of them)``, read from the source once per test run: the
    tests below only look at them, and parsing every module is most of their time."""
    known = modules()
    return known, tuple(imports(known))


def is_core(module: str) -> bool:
    return not module.startswith(("agentflow.cli", "agentflow.testing", "agentflow.__main__"))


def cycles(graph: dict) -> list:
    """Every strongly connected group of more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def graph_of(edges, known, skip=frozenset()) -> dict:
    graph: dict = {}
    for importer, target, _ in edges:
        if target in known and target != importer and (importer, target) not in skip:
            graph.setdefault(importer, set()).add(target)
    return graph


def test_the_graph_is_read():
    known, edges = read_package()
    assert ("agentflow.function_invoking", "agentflow.gate", None) in edges
    assert ("agentflow.session", "agentflow.stores.files", "read_file") in edges  # deferred
    # the reader sees a cycle when there is one: the allowed edge makes one
    assert any({"agentflow.session", "agentflow.stores.files"} <= set(group)
               for group in cycles(graph_of(edges, known)))


def test_no_import_cycle_but_the_documented_one():
    known, edges = read_package()
    assert cycles(graph_of(edges, known, ALLOWED_CYCLE_EDGES)) == []


def test_the_core_never_imports_the_command_line_or_the_test_tooling():
    known, edges = read_package()
    wrong = sorted({(i, t) for i, t, _ in edges
                    if is_core(i) and not is_core(t)})
    assert wrong == []


def test_no_private_name_is_used_across_modules():
    known, edges = read_package()
    private = sorted({(i, t, n) for i, t, n in edges
                      if n is not None and n.startswith("_") and not n.startswith("__")
                      and t != i})
    assert private == []


def test_the_command_line_imports_no_private_module():
    """``agentflow`` the command uses the library as a caller could: no ``_module``
    (issue 35; its private names are caught above)."""
    known, edges = read_package()
    private = sorted({(i, t) for i, t, _ in edges
                      if i.startswith("agentflow.cli") and t in known
                      and any(part.startswith("_") and not part.startswith("__")
                              for part in t.split("."))})
    assert private == []


def test_the_command_line_reading_imports_only_itself_and_the_errors():
    """What ``agentflow/commandline/__init__.py`` says it may import (issue 35): each
    other and ``agentflow.errors``, so the policy and the built-in tools can both use
    it without a cycle."""
    known, edges = read_package()
    wrong = sorted({(i, t) for i, t, _ in edges
                    if i.startswith("agentflow.commandline.") and t in known
                    and not t.startswith("agentflow.commandline")
                    and t != "agentflow.errors"})
    assert wrong == []


def test_nothing_in_the_core_imports_the_built_in_tools():
    """What ``agentflow/builtin/__init__.py`` says (issue 35): the library core never
    imports ``builtin/`` (the command line does), and ``builtin/`` never imports the
    command line or the test tooling."""
    known, edges = read_package()
    edges = {(i, t) for i, t, _ in edges if t in known}
    assert sorted((i, t) for i, t in edges if t.startswith("agentflow.builtin")
                  and is_core(i) and not i.startswith("agentflow.builtin")) == []
    assert sorted((i, t) for i, t in edges if i.startswith("agentflow.builtin")
                  and not is_core(t)) == []


def test_import_agentflow_loads_nothing_from_cli_or_testing():
    code = ("import sys, agentflow\n"
            "print(sorted(m for m in sys.modules if m.startswith(('agentflow.cli', "
            "'agentflow.testing'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def test_the_reading_path_of_the_readme_lists_real_files_with_their_lengths():
    """README "Reading the code": each core file in order with its length in lines; a
    length may lag a little behind edits (10 %), never more."""
    import re
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Reading the code"):]
    rows = re.findall(r"^\| (\d+) \| `(agentflow/[\w/]+\.py)` \| (\d+) \|", section, re.M)
    assert [int(order) for order, _, _ in rows] == list(range(1, len(rows) + 1))
    assert rows[0][1] == "agentflow/types.py"
    assert {path for _, path, _ in rows} >= {"agentflow/function_invoking.py",
                                             "agentflow/gate.py"}
    for _, path, lines in rows:
        real = len((PACKAGE.parent / path).read_text(encoding="utf-8").splitlines())
        assert abs(real - int(lines)) <= real // 10, (path, lines, real)

"""The package's import arrows point one way: cuda <- kernels <- run <- correctness <- bench <- cli.

The graph is built from the source files themselves (every ``import`` statement, the ones
inside functions included), so a function-local import cannot hide a circle or an upward
lean. Each module belongs to one layer; an edge may point to the same layer or a lower one,
never up, and the module graph has no circle. Only ``__main__`` may import ``cli``.
"""

from __future__ import annotations

import ast
from pathlib import Path


PACKAGE = Path(__file__).resolve().parent.parent / "gemm_driver"

# Lowest first. A module's layer is that of the longest prefix listed here.
LAYERS = (
    ("cuda", ("cuda",)),  # the CUDA layer: knows nothing about GEMM
    ("definitions", ("problem", "precision", "fp8", "corpus")),  # what a GEMM is, the shapes users bring; no GPU
    ("kernels", ("kernels",)),  # the registry, tuned-table lookup, launch plans: pure
    ("run", ("session",)),  # Session: build -> load -> Launch
    ("correctness", ("operands", "verify", "device_check", "device_reference", "device_epilogue", "case", "checking",
                     "strategies")),
    ("use", ("api", "arrays", "call", "fp8_scales", "plans", "host_path", "torch", "inspection", "bench", "profile")),  # gemm() and plans, the tools, the bench
    ("cli", ("arguments", "cli", "__main__", "__init__")),
)
RANK = {name: rank for rank, (name, _) in enumerate(LAYERS)}


def module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package).with_suffix("").parts
    return ".".join(parts)


def layer_of(module: str) -> str:
    head = module.split(".")[0]
    for name, prefixes in LAYERS:
        if head in prefixes or module in prefixes:
            return name
    raise AssertionError(f"gemm_driver.{module} belongs to no layer of tests/test_import_graph.py: place it")


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(p, package): p for p in package.rglob("*.py")}


def _resolve(importer: str, is_package: bool, level: int, target: str | None, known: set[str]) -> str | None:
    """The gemm_driver module an import names ('' is the package's __init__), else None."""
    if level == 0:
        if not target or not (target == "gemm_driver" or target.startswith("gemm_driver.")):
            return None
        dotted = target[len("gemm_driver."):] if target != "gemm_driver" else ""
    else:
        base = importer.split(".") if is_package else importer.split(".")[:-1]
        base = base[: len(base) - (level - 1)] if level > 1 else base
        dotted = ".".join([*base, *(target.split(".") if target else [])])
    dotted = dotted.removesuffix(".__init__")
    if dotted in known:
        return dotted
    if f"{dotted}.__init__" in known or dotted == "":
        return f"{dotted}.__init__" if dotted else "__init__"
    return None


def edges(package: Path = PACKAGE) -> set[tuple[str, str]]:
    """(importer, imported) module pairs of ``package``, from every import statement."""
    files = modules(package)
    known = set(files)
    found = set()
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        owner = name.removesuffix(".__init__") if is_package else name
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            targets: list[str | None] = []
            if isinstance(node, ast.Import):
                targets = [_resolve(owner, False, 0, alias.name, known) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(owner, is_package, node.level, node.module, known)
                for alias in node.names:  # `from . import tuned` names a submodule
                    sub = _resolve(owner, is_package, node.level,
                                   f"{node.module}.{alias.name}" if node.module else alias.name, known)
                    targets.append(sub if sub is not None and sub != base else base)
            for target in targets:
                if target is not None and target != name:
                    found.add((name, target))
    return found


def _is_reexport(importer: str, target: str) -> bool:
    """A package's __init__ importing its own submodules (the registry lists its families)."""
    return importer.endswith("__init__") and target.startswith(importer.removesuffix("__init__"))


def test_every_module_has_a_layer():
    for name in modules():
        layer_of(name)


def test_no_import_points_up():
    upward = sorted(f"gemm_driver.{a} ({layer_of(a)}) imports gemm_driver.{b} ({layer_of(b)})"
                    for a, b in edges() if RANK[layer_of(b)] > RANK[layer_of(a)] and not _is_reexport(a, b))
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_only_main_imports_cli():
    importers = sorted(a for a, b in edges() if b == "cli")
    assert importers == ["__main__"]


def find_circle(pairs: set[tuple[str, str]]) -> list[str] | None:
    """One circle of the module graph (re-exports of a package's own submodules aside), or None."""
    graph: dict[str, set[str]] = {}
    for a, b in pairs:
        if not _is_reexport(a, b):
            graph.setdefault(a, set()).add(b)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if state.get(nxt) is None and (circle := visit(nxt)):
                return circle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if state.get(node) is None and (circle := visit(node)):
            return circle
    return None


def test_no_circle():
    circle = find_circle(edges())
    assert circle is None, "import circle: " + " -> ".join(f"gemm_driver.{m}" for m in circle)


def test_the_graph_sees_local_imports(tmp_path):
    """The checker itself: an import inside a function counts, and a circle through one is found."""
    package = tmp_path / "gemm_driver"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "problem.py").write_text("def f():\n    from .precision import X\n")
    (package / "precision.py").write_text("from . import problem\nX = 1\n")
    found = edges(package)
    assert {("problem", "precision"), ("precision", "problem")} <= found
    assert find_circle(found) in (["precision", "problem", "precision"], ["problem", "precision", "problem"])

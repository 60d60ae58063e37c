"""The modules of python/xccl import each other in one direction only: no two modules (directly
or through others) import each other, counting imports inside functions, which are as much a
dependency as those at the top (a module importing the packages it lives in is not counted:
Python imports those first anyway). Read from the source, so it needs no build."""

import ast
import os

PACKAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "xccl")


def _module_name(path: str) -> str:
    parts = os.path.relpath(path, os.path.dirname(PACKAGE))[: -len(".py")].split(os.sep)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: str, name: str, modules: set) -> set:
    """The modules of the package that the module at path imports."""
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            # `from . import x` imports the module x when there is one, else a name of base.
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        # Python imports a module's packages before the module: not a dependency of its own.
        found.update(t for t in targets if t in modules and not (name + ".").startswith(t + "."))
    return found


def _graph() -> dict:
    paths = {}
    for folder, _, files in os.walk(PACKAGE):
        for file in files:
            if file.endswith(".py"):
                path = os.path.join(folder, file)
                paths[_module_name(path)] = path
    modules = set(paths)
    return {name: _imports(path, name, modules) for name, path in paths.items()}


def _cycle(graph: dict):
    """One import cycle as a list of modules, or None."""
    state = {}

    def visit(name, stack):
        state[name] = "open"
        for other in sorted(graph[name]):
            if state.get(other) == "open":
                return stack[stack.index(other) :] + [other]
            if other not in state:
                found = visit(other, stack + [other])
                if found:
                    return found
        state[name] = "done"
        return None

    for name in sorted(graph):
        if name not in state:
            found = visit(name, [name])
            if found:
                return found
    return None


def test_the_reader_sees_the_bench_modules_imports():
    graph = _graph()
    assert "xccl.bench.rank" in graph["xccl.bench.launch"]
    assert "xccl.bench.netns" in graph["xccl.bench.launch"]  # inside main(): counted


def test_no_two_modules_of_the_package_import_each_other():
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)

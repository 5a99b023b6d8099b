"""The package's module structure: every module imports first, alone, in a fresh interpreter, and
no two modules of the package import each other in a circle (counting imports inside functions,
which only hide a circle)."""

import ast
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor


PYTHON_ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                           "oneflow", "python")
PACKAGE = os.path.join(PYTHON_ROOT, "oneflow")
# mock_torch's torch/, torchvision/ and safetensors/ are top-level packages on a path of their
# own (python3 -m oneflow.mock_torch), not modules of this package.
STUBS = os.path.join(PACKAGE, "mock_torch") + os.sep


def _modules(package_dir=PACKAGE, root=PYTHON_ROOT):
    """{dotted module name: file} of every module of the package."""
    found = {}
    for folder, dirs, files in os.walk(package_dir):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__"
                         and os.path.isfile(os.path.join(folder, d, "__init__.py"))
                         and not os.path.join(folder, d).startswith(STUBS))
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                name = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                found[name[:-len(".__init__")] if name.endswith(".__init__") else name] = path
    return found


def import_graph(modules):
    """{module: the package's modules it imports}, anywhere in its code. `from a.b import c`
    names the module a.b.c when there is one, else a.b; the package's root (`import oneflow as
    flow`, the whole API) is left out: every module can reach it."""
    graph = {}
    for name, path in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(open(path).read(), path)):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in modules:
                for a in node.names:
                    sub = f"{node.module}.{a.name}"
                    deps.add(sub if sub in modules else node.module)
        deps.discard(name)
        deps.discard("oneflow")
        graph[name] = deps
    return graph


def find_circle(graph):
    """One import circle as [a, b, ..., a], or None."""
    state = {}  # 1: on the current path, 2: done

    def visit(node, path):
        state[node] = 1
        path.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep]
            if dep not in state:
                found = visit(dep, path)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [])
            if found:
                return found
    return None


def test_the_package_has_no_import_circle():
    circle = find_circle(import_graph(_modules()))
    assert circle is None, "import circle: " + " -> ".join(circle)


def test_find_circle_reports_a_circle_through_an_import_inside_a_function(tmp_path):
    pkg = tmp_path / "oneflow"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from oneflow import b\n")
    (pkg / "b.py").write_text("import oneflow as flow\n\ndef f():\n    from oneflow.a import g\n")
    (pkg / "c.py").write_text("from oneflow import a\n")
    graph = import_graph(_modules(str(pkg), str(tmp_path)))
    assert graph == {"oneflow": set(), "oneflow.a": {"oneflow.b"}, "oneflow.b": {"oneflow.a"},
                     "oneflow.c": {"oneflow.a"}}
    assert find_circle(graph) == ["oneflow.a", "oneflow.b", "oneflow.a"]
    (pkg / "b.py").write_text("import oneflow as flow\n")
    assert find_circle(import_graph(_modules(str(pkg), str(tmp_path)))) is None


def _import_alone(name):
    r = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                           [PYTHON_ROOT] + [p for p in sys.path if p])))
    tail = (r.stderr.strip().splitlines() or [""])[-1]
    return name, r.returncode, tail


def test_every_module_imports_first_alone_in_a_fresh_interpreter():
    names = sorted(_modules())
    assert "oneflow._api_util" in names and "oneflow.nn.modules.module" in names
    with ThreadPoolExecutor(max_workers=2) as pool:
        failed = [f"{n}: {tail}" for n, rc, tail in pool.map(_import_alone, names) if rc != 0]
    assert failed == []

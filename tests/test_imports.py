"""The import graph, read from the source: no circles in the package or the page, and the drills and site
stay off the compile stage.

Every import counts wherever it is written (top level, inside a function, under `if TYPE_CHECKING:`,
in a lazy module `__getattr__`): an import deferred to break a circle still closes it. `from pkg import
name` is an import of the submodule `pkg.name` where there is one, else of `pkg`. Importing `a.b.c`
also runs the packages `a` and `a.b` first; those implicit imports are not edges, since a package's own
`__init__` always runs before its modules and says nothing about which module needs which. Names
computed at run time (`importlib.import_module`, how `drills.kinds()` finds the kind modules that
register with it) cannot be read from the source and are not edges either.
"""
import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "dumpgym"
STATIC = PACKAGE / "static"


def _module_names(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name, for its `__init__.py`)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = (root.name, *path.relative_to(root).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imported(module: str, path: Path, known: set[str]) -> set[str]:
    """The modules of `known` that `module` (whose source is `path`) imports, anywhere in its source."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: `from . import x`, `from ..y import z`
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names}
    return {name for name in out if name in known and name != module}


def python_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    modules = _module_names(root)
    return {name: _imported(name, path, set(modules)) for name, path in modules.items()}


# Module-level `import ... from`, `export ... from` and bare `import './x.js'` statements start their
# line (they may span several); a dynamic `import('./x.js')` may stand anywhere.
_JS_STATIC = re.compile(r"^(?:(?:import|export)\b[^;'\"]*?\bfrom|import)\s*['\"](\.{1,2}/[^'\"]+)['\"]", re.M)
_JS_DYNAMIC = re.compile(r"\bimport\(\s*['\"](\.{1,2}/[^'\"]+)['\"]\s*\)")


def js_graph(folder: Path = STATIC) -> dict[str, set[str]]:
    """Script (path relative to `folder`) -> the scripts it imports, statically or with `import()`."""
    out = {}
    for path in sorted(folder.glob("*.js")):
        text = path.read_text(encoding="utf-8")
        targets = _JS_STATIC.findall(text) + _JS_DYNAMIC.findall(text)
        out[path.name] = {(path.parent / t).resolve().relative_to(folder.resolve()).as_posix() for t in targets}
    return out


def knots(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected sets of more than one node (and nodes that import themselves): Tarjan's."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def strongconnect(node):  # recursion is fine: the graphs are a few dozen nodes
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                strongconnect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while not component or member != node:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(component)

    for node in sorted(graph):
        if node not in index:
            strongconnect(node)
    return sorted(found, key=min)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle in each knot, its nodes in import order with the first repeated at the end: ["a", "b", "a"]."""
    return [_circle_in(graph, knot) for knot in knots(graph)]


def _circle_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest circle from the component's first node back to itself, inside the component."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt_frontier = []
        for node in frontier:
            for nxt in sorted(graph.get(node, ()) & component):
                if nxt == start:
                    return paths[node] + [start]
                if nxt not in paths:
                    paths[nxt] = paths[node] + [nxt]
                    nxt_frontier.append(nxt)
        frontier = nxt_frontier
    raise AssertionError(f"{sorted(component)} is not strongly connected")


def _report(graph: dict[str, set[str]]) -> str:
    """Each knot's circle, and the knot's other modules where there are more."""
    out = []
    for knot in knots(graph):
        circle = _circle_in(graph, knot)
        rest = sorted(knot - set(circle))
        out.append(" -> ".join(circle) + (f" (and in the same knot: {', '.join(rest)})" if rest else ""))
    return "import circles: " + "; ".join(out)


def test_the_cycle_finder_names_every_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}, "f": {"g"}, "g": {"f"}}
    assert cycles(graph) == [["a", "b", "c", "a"], ["e", "e"], ["f", "g", "f"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert _report({"a": {"b", "c"}, "b": {"a"}, "c": {"a"}}) == "import circles: a -> b -> a (and in the same knot: c)"


def test_the_python_graph_counts_imports_anywhere(tmp_path):
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "sub" / "__init__.py").write_text("from pkg.sub import helper\nVALUE = 1\n")
    (root / "sub" / "helper.py").write_text("def f():\n    from .. import top\n")
    (root / "sub" / "user.py").write_text("from pkg.sub.helper import f\nimport pkg\n")
    (root / "top.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub.user import x\n"
        "def __getattr__(name):\n    import pkg.sub.helper\n")
    assert python_graph(root) == {
        "pkg": set(),
        "pkg.sub": {"pkg.sub.helper"},
        "pkg.sub.helper": {"pkg.top"},
        "pkg.sub.user": {"pkg.sub.helper", "pkg"},
        "pkg.top": {"pkg.sub.user", "pkg.sub.helper"},
    }
    assert cycles(python_graph(root)) == [["pkg.sub.helper", "pkg.top", "pkg.sub.helper"]]


def test_the_js_graph_reads_static_and_dynamic_imports(tmp_path):
    (tmp_path / "vendor").mkdir()
    (tmp_path / "a.js").write_text("import {\n  b,\n  c,\n} from './b.js';\nexport { d } from './d.js';\n"
                                   "const say = 'import nothing from here';\nexport const page = './page.js';\n"
                                   "import './side.js';\n")
    (tmp_path / "b.js").write_text("export const b = 1;\nloading = import('./vendor/v.js');\n"
                                   "  // import { e } from './e.js'; (a comment: not a statement)\n")
    (tmp_path / "d.js").write_text("export async function d() { return import('./a.js'); }\n")
    assert js_graph(tmp_path) == {"a.js": {"b.js", "d.js", "side.js"}, "b.js": {"vendor/v.js"}, "d.js": {"a.js"}}
    assert cycles(js_graph(tmp_path)) == [["a.js", "d.js", "a.js"]]


def test_the_package_has_no_import_circles():
    graph = python_graph()
    assert not knots(graph), _report(graph)


def test_the_page_has_no_import_circles():
    graph = js_graph()
    assert not knots(graph), _report(graph)


# The stages that read the record (the page, the server, the drills) and the stages that make it from a
# program or a dump: no module of the first may reach one of the second, or JAX, by any chain of imports
# (imports inside functions count: a deferred import still runs the compiler's code in the reader's process).
_READERS = ("dumpgym.site", "dumpgym.serve", "dumpgym.drills")
_MAKERS = ("dumpgym.ir", "dumpgym.traced", "dumpgym.compiled", "dumpgym.dumps", "dumpgym.jax_internals")
# jaxlib's bindings and JAX's MLIR module: read by ir/ alone (and by jax_internals.py, the one door to JAX's internals).
_BINDINGS = ("jaxlib.mlir", "jaxlib.xla_client", "jaxlib._jax", "jaxlib._hlo", "jax._src.lib", "jax.interpreters.mlir")


def _under(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _outside_imports(path: Path) -> set[str]:
    """Every absolute import in `path` of a module outside dumpgym, as written (`jaxlib.mlir.ir`, `jax`)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return {name for name in names if not _under(name, ("dumpgym",))}


def reached(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module `start` imports, directly or through others."""
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_the_fence_sees_imports_in_functions_and_chains(tmp_path):
    root = tmp_path / "dumpgym"
    for folder in ("site", "corpus", "ir"):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "site" / "page.py").write_text("def f():\n    from dumpgym.corpus import store\n")
    (root / "corpus" / "store.py").write_text("from dumpgym.ir.hlo import parse\n")
    (root / "ir" / "hlo.py").write_text("def parse():\n    from jaxlib import xla_client\n")
    graph = python_graph(root)
    assert reached(graph, "dumpgym.site.page") == {"dumpgym.corpus.store", "dumpgym.ir.hlo"}
    assert _outside_imports(root / "ir" / "hlo.py") == {"jaxlib", "jaxlib.xla_client"}


def test_the_page_the_server_and_the_drills_reach_nothing_that_makes_records():
    graph = python_graph()
    modules = _module_names()
    offenders = {}
    for module in graph:
        if not _under(module, _READERS):
            continue
        reach = reached(graph, module) | {module}
        makers = sorted(m for m in reach if _under(m, _MAKERS))
        jax = sorted({n for m in reach for n in _outside_imports(modules[m]) if _under(n, ("jax", "jaxlib"))})
        if makers or jax:
            offenders[module] = makers + jax
    assert not offenders, f"the page, the server and the drills must read the record, not make it: {offenders}"


def test_only_ir_and_jax_internals_import_jaxlibs_bindings():
    offenders = {}
    for module, path in _module_names().items():
        if _under(module, ("dumpgym.ir", "dumpgym.jax_internals")):
            continue
        found = sorted(n for n in _outside_imports(path) if _under(n, _BINDINGS))
        if found:
            offenders[module] = found
    assert not offenders, f"only ir/ (and jax_internals.py) may import jaxlib's bindings: {offenders}"


def _folder(module: str) -> str:
    """The stage folder a module is in (`dumpgym.ir.tags` -> `dumpgym.ir`), or the module itself at the top."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or (PACKAGE / parts[-1]).is_dir() else module


def test_the_stage_folders_import_each_other_one_way():
    graph = python_graph()
    folders: dict[str, set[str]] = {}
    for module, targets in graph.items():
        folders.setdefault(_folder(module), set()).update(_folder(t) for t in targets if _folder(t) != _folder(module))
    assert not knots(folders), _report(folders)


def test_the_package_top_holds_at_most_ten_modules():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 10, f"{len(top)} modules at the top of the package, each wants a stage folder: {top}"


def _private_jax(path: Path) -> list[str]:
    """Where `path` imports JAX's private modules (`jax._src`) or reaches an equation's `source_info`."""
    found = []
    for node in sorted(ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))),
                       key=lambda node: getattr(node, "lineno", 0)):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        if any(n == "jax._src" or n.startswith("jax._src.") for n in names):
            found.append(f"line {node.lineno}: imports jax._src")
        elif isinstance(node, ast.Attribute) and node.attr == "source_info":
            found.append(f"line {node.lineno}: .source_info")
    return found


def test_the_private_jax_check_sees_imports_and_source_info(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import jax\nfrom jax import _src\ndef f(eqn):\n    from jax._src import core\n"
                      "    return eqn.source_info.name_stack, jax.jit\n")
    assert _private_jax(module) == ["line 2: imports jax._src", "line 4: imports jax._src", "line 5: .source_info"]


def test_only_jax_internals_reaches_into_jax():
    """The one door: every private access (a `jax._src` module, an equation's source info: its name stack,
    its traceback) is in jax_internals.py, each with its reason, so a JAX upgrade that moves one breaks one file."""
    offenders = {path.relative_to(PACKAGE).as_posix(): found for path in sorted(PACKAGE.rglob("*.py"))
                 if path.name != "jax_internals.py" and (found := _private_jax(path))}
    assert not offenders, f"only jax_internals.py may reach JAX's internals: {offenders}"


def scripts_graph(folder: Path) -> dict[str, set[str]]:
    """Script -> the scripts of the same folder it imports by bare name (benchmarks/ import each other so)."""
    names = {p.stem for p in folder.glob("*.py")}
    out = {}
    for path in sorted(folder.glob("*.py")):
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module)
        out[path.stem] = found & names - {path.stem}
    return out


def test_the_benchmarks_have_no_import_circles():
    graph = scripts_graph(PACKAGE.parents[1] / "benchmarks")
    assert graph and not knots(graph), _report(graph)


def regex_calls(path: Path) -> int:
    """Calls into `re` in one module: `re.compile(...)`, `re.sub(...)`, ..., and of any name imported from it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "re"
                for a in n.names}
    modules = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.Import)
               for a in n.names if a.name == "re"}
    return sum(1 for n in ast.walk(tree) if isinstance(n, ast.Call) and (
        (isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) and n.func.value.id in modules)
        or (isinstance(n.func, ast.Name) and n.func.id in imported)))


def test_regex_calls_counts_every_spelling(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import re\nimport re as r2\nfrom re import sub\nre.compile('a')\nr2.match('a', 'b')\n"
                    "sub('a', 'b', 'c')\nx = re.S\n")
    assert regex_calls(path) == 3


def test_the_drills_read_no_text_with_regular_expressions():
    """The drills read facts from the record: a regular expression there reads what a person typed
    (`answer.py`) or splits the pool's own sentences for packing (`_packed.py`), nothing else, five at most."""
    found = {p.name: n for p in sorted((PACKAGE / "drills").glob("*.py")) if (n := regex_calls(p))}
    assert set(found) <= {"answer.py", "_packed.py"}, found
    assert sum(found.values()) <= 5, found


def test_cost_reads_the_record_not_the_text():
    """cost/ reads what the compile stage recorded (shapes, buffers, custom calls' targets and estimates):
    no regular expression over a listing."""
    found = {p.name: n for p in sorted((PACKAGE / "cost").glob("*.py")) if (n := regex_calls(p))}
    assert not found, found

"""The seams between roles, read from the source: codefu's parts sit in layers and import only down them,
rollout and trainer never import each other (what both need lives in codefu.models), and imports inside
codefu have no cycle, wherever they are written."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "codefu"

#: codefu's parts (its subpackages and top-level modules; "codefu" is the package's own __init__), lowest
#: layer first. A part imports its own modules, the parts of lower layers, and a part of its own layer only
#: where ALLOWED_PEERS says so; an import anywhere in a file counts (in a function, under TYPE_CHECKING).
LAYERS: list[set[str]] = [
    {"lazy"},  # how packages export: imports no part
    {"codefu", "errors", "types", "node_labels", "algo"},  # contracts, names and pure math: import no part
    {"config", "data", "models", "observability"},  # what the roles share: loading, problems, models, metrics
    {"judge", "rollout", "trainer"},  # the roles: a role imports shared parts, never another role
    {"orchestrator", "serve", "launcher"},  # the programs that run roles: train/eval, serve, launch
    {"cli"},  # `codefu <command>`: each command's parser lives beside its package
    {"__main__"},  # `python -m codefu`
]
#: (importer, imported) -> why: imports between two parts of one layer. Add one with its reason, or move
#: what both need a layer down (as codefu.node_labels, which the launcher sets and the judge pool reads).
ALLOWED_PEERS: dict[tuple[str, str], str] = {}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, top_level_only: bool) -> set[str]:
    """codefu modules `path` imports (anywhere in it, or only in statements run at import time)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("codefu")}
        elif (
            isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("codefu")
        ):
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}  # `from codefu.x import module`
    return out


def graph(top_level_only: bool) -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {m: {i for i in imports(p, top_level_only) if i in modules and i != m} for m, p in modules.items()}


def test_rollout_and_trainer_do_not_import_each_other():
    crossing = [
        (m, i)
        for m, deps in graph(top_level_only=False).items()
        for i in deps
        if (m.startswith("codefu.rollout") and i.startswith("codefu.trainer"))
        or (m.startswith("codefu.trainer") and i.startswith("codefu.rollout"))
    ]
    assert crossing == []


def part_of(module: str, name: str | None = None) -> str:
    """The part of codefu a module is in ("codefu.judge.pool" -> "judge"); `from codefu import x` (name x)
    is in part x when x is one."""
    parts = module.split(".")
    if len(parts) > 1:
        return parts[1]
    if name is not None and ((PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").exists()):
        return name
    return "codefu"


def part_imports(path: Path) -> list[tuple[int, str]]:
    """(line, part of codefu) of every codefu import in `path`, wherever it is written."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, part_of(a.name)) for a in node.names if a.name.split(".")[0] == "codefu"]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] == "codefu"
        ):
            out += [(node.lineno, part_of(node.module, a.name)) for a in node.names]
    return out


def layer_violations(imports: list[tuple[str, int, str, str]]) -> list[str]:
    """One line per (file, line, importing part, imported part) that goes up the layers, or sideways to a
    peer not in ALLOWED_PEERS."""
    layer = {part: i for i, parts in enumerate(LAYERS) for part in parts}
    out = []
    for file, line, src, dst in imports:
        if src == dst or layer[dst] < layer[src] or (src, dst) in ALLOWED_PEERS:
            continue
        how = "up, to layer" if layer[dst] > layer[src] else "sideways, to its peer in layer"
        out.append(
            f"{file}:{line}: codefu.{src} (layer {layer[src]}) imports {how} {layer[dst]}: codefu.{dst}"
        )
    return out


def codefu_imports() -> list[tuple[str, int, str, str]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        src = part_of(module_name(path))
        rel = path.relative_to(PACKAGE.parent).as_posix()
        out += [(rel, line, src, dst) for line, dst in part_imports(path)]
    return out


def test_every_part_of_codefu_has_one_layer():
    parts = {part_of(module_name(p)) for p in PACKAGE.rglob("*.py")}
    placed = [part for layer in LAYERS for part in layer]
    assert len(placed) == len(set(placed)), "a part in two layers"
    assert set(placed) == parts, (
        f"not placed: {sorted(parts - set(placed))}; gone: {sorted(set(placed) - parts)}"
    )


def test_imports_go_down_the_layers():
    violations = layer_violations(codefu_imports())
    assert violations == [], "\n".join(
        ["imports against LAYERS (move the shared code down a layer):", *violations]
    )


def test_layer_violations_name_file_and_line():
    found = layer_violations(
        [
            ("codefu/judge/pool.py", 24, "judge", "launcher"),  # up
            ("codefu/judge/pool.py", 25, "judge", "rollout"),  # sideways
            ("codefu/judge/pool.py", 26, "judge", "types"),  # down: fine
            ("codefu/judge/pool.py", 27, "judge", "judge"),  # inside: fine
        ]
    )
    assert found == [
        "codefu/judge/pool.py:24: codefu.judge (layer 3) imports up, to layer 4: codefu.launcher",
        "codefu/judge/pool.py:25: codefu.judge (layer 3) imports sideways, to its peer in layer 3: codefu.rollout",
    ]


def find_cycle(edges: dict[str, set[str]]) -> list[str]:
    """One cycle of `edges` as [a, b, ..., a], or [] (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(m: str, path: list[str]) -> list[str]:
        state[m] = 1
        for i in sorted(edges.get(m, ())):
            if state.get(i) == 1:
                return path[path.index(i) :] + [m, i] if i in path else [m, i]
            if i not in state and (found := visit(i, path + [m])):
                return found
        state[m] = 2
        return []

    for m in sorted(edges):
        if m not in state and (found := visit(m, [])):
            return found
    return []


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_import_cycle_not_even_through_imports_inside_functions():
    """A function-level import that closes a cycle (the judge's sandbox and runner had one) is a seam in
    the wrong place, not a fix: count those too."""
    for top_level_only in (True, False):
        edges = graph(top_level_only)
        # `from codefu.judge import runner` inside codefu.judge is an edge to the runner, not to the package
        edges = {m: {i for i in deps if not m.startswith(i + ".")} for m, deps in edges.items()}
        assert find_cycle(edges) == [], top_level_only


def test_test_files_import_shared_helpers_not_each_other():
    tests = PACKAGE.parent / "tests"
    offenders = []
    for path in tests.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            offenders += [(path.name, n) for n in names if n.split(".")[0].startswith(("test_", "conftest"))]
    assert offenders == []  # shared code lives in tests/helpers

"""The package's layout holds: every import points down the layers the README's module map
lists (lazy imports included), and every module is in one of them."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tfrecorder_lite"


def _layers():
    """The README's module map: a list of layers, each the names of its line (``x.py`` for a
    top-level module, ``pkg`` for a package), top first."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("The packages, one layer each", 1)[1].split("```text\n", 1)[1]
    block = block.split("\n```", 1)[0]
    layers = []
    for line in block.splitlines():
        if line and not line[0].isspace():
            names = line.split("  ", 1)[0].split(", ")
            layers.append([name.rstrip("/").removesuffix(".py") for name in names])
    return layers


def _modules():
    """``{dotted module name: its path}`` of every module of the package."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(module, path, modules):
    """The package's modules that ``module`` imports, anywhere in its code."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            targets.add(target)
            targets.update(f"{target}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
    return {t for t in targets if t in modules and t != module and t != "tfrecorder_lite"}


def _layer_of(module, layer_index):
    first = module.split(".")[1] if "." in module else "__init__"
    return layer_index.get(first)


def test_every_module_is_in_a_layer_of_the_module_map():
    layer_index = {name: i for i, names in enumerate(_layers()) for name in names}
    missing = sorted(m for m in _modules() if _layer_of(m, layer_index) is None)
    assert not missing, f"not in the README's module map: {missing}"


def test_no_import_points_up_the_module_map():
    layer_index = {name: i for i, names in enumerate(_layers()) for name in names}
    modules = _modules()
    upward = []
    for module, path in sorted(modules.items()):
        mine = _layer_of(module, layer_index)
        for target in sorted(_imports(module, path, modules)):
            theirs = _layer_of(target, layer_index)
            if mine is not None and theirs is not None and theirs < mine:
                upward.append(f"{module} -> {target}")
    assert not upward, "imports pointing up the README's module map:\n" + "\n".join(upward)

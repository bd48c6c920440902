"""The package's layout holds: every import points down the layers the README's module map
lists (lazy imports included), every module is in one of them, and a kind's or source
format's name appears only in its own modules and the registries."""

import ast
import pathlib
import re

import pytest

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


# Where each kind's and source format's name may appear in the package's source (its text,
# comments and docstrings included): its own modules and the registries. A kind's modules may
# name the source formats its tables come in, and a source format's modules the kinds of
# their content.
REGISTRIES = ("table/kinds.py", "record/kinds.py", "sources/registry.py",
              "option_declarations.py", "__init__.py")  # (the last: which module holds each door)
KIND_MODULES = {
    "detection": ("table/detection.py", "record/boxes.py", "images/instance_masks.py",
                  "sources/box_rows.py"),
    "segmentation": ("table/segmentation.py", "record/segmentation_kind.py",
                     "images/mask_pixels.py"),
    "classification": ("table/classification.py",),
}
FORMAT_MODULES = {
    "coco": ("sources/coco.py", "read/coco_export.py", "images/coco_rle.py"),
    "voc": ("sources/voc.py",),
    "yolo": ("sources/yolo.py",),
    "vertex": ("sources/vertex.py",),
    "automl": ("sources/automl_csv.py",),
}
_OTHER_FORMATS = ("sources/csv_table.py", "sources/image_folder.py")
# formats that tell themselves from another (a .json file: COCO, or Vertex AI's JSON Lines) or
# read its rows (a Vertex AI CSV's rows are an AutoML CSV's)
TOLD_APART = {"vertex": ("sources/coco.py",), "coco": ("sources/vertex.py",),
              "automl": ("sources/vertex.py",)}
# not moved yet: load(as_supervised="keras") lays out masks its own way in read/
STILL_TO_MOVE = {"segmentation": ("read/keras_layout.py",)}
# names that hold a kind's or format's name without being one of its mentions: the public
# API's and the CLI's (kept as they are) and a third party's (Keras' "segmentation_masks")
FIXED_NAMES = re.compile(r"\b(read_coco|read_vertex|read_voc|read_yolo|to_coco|coco_export|"
                         r"_?export[-_]coco|segmentation_masks)\b")


def _allowed(name):
    """The modules where ``name`` (a kind's or a source format's) may appear."""
    if name in KIND_MODULES:
        own = KIND_MODULES[name] + _OTHER_FORMATS + sum(FORMAT_MODULES.values(), ())
    else:
        own = FORMAT_MODULES[name] + sum(KIND_MODULES.values(), ())
    return {*own, *REGISTRIES, *TOLD_APART.get(name, ()), *STILL_TO_MOVE.get(name, ())}


def _mentions(name):
    """``module:line: text`` of each line of the package that names ``name`` (a word, any
    case, plural too), as ``git grep -i`` shows them."""
    word = re.compile(rf"(?<![a-z]){name}s?(?![a-z])", re.IGNORECASE)
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if word.search(FIXED_NAMES.sub("", line)):
                found.append((module, f"{module}:{number}: {line.strip()}"))
    return found


@pytest.mark.parametrize("name", sorted({**KIND_MODULES, **FORMAT_MODULES}))
def test_a_kind_or_format_is_named_only_in_its_own_modules_and_the_registries(name):
    allowed = _allowed(name)
    outside = [line for module, line in _mentions(name) if module not in allowed]
    assert not outside, (f"{name!r} appears outside its own modules and the registries:\n"
                         + "\n".join(outside))

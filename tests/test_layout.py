"""The layout keeps its doors: code outside a package with a door imports from that door (its
``__init__``), never from the modules behind it, so each package can rearrange its modules
without touching its callers. The layering itself is checked by import-linter (pyproject.toml's
``[tool.importlinter]``, run by scripts/test.sh)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# Packages whose __init__ is the only door for code outside them.
DOORS = (
    "kafkalog.format.columnar",
    "kafkalog.format.validate",
    "kafkalog.log.segment",
    "kafkalog.log.partition",
    "kafkalog.log.producer",
    "kafkalog.log.cleaner",
    "kafkalog.log.datadir",
    "kafkalog.log.verify",
    "kafkalog.dataset",
    "kafkalog.cli.dump",
)
# Packages whose __init__ exports names (kafkalog.log: the names most callers want, beside its
# subpackages' doors).
EXPORTING = (*DOORS, "kafkalog.log")


def _module(path: Path) -> tuple[str, list[str]]:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
        return ".".join(parts), parts
    return ".".join(parts), parts[:-1]


def _imports(path: Path):
    _, package = _module(path)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield node.lineno, target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_code_outside_a_package_imports_only_its_door():
    crossings = []
    for path in sorted(SRC.rglob("*.py")):
        module, _ = _module(path)
        for line, target in _imports(path):
            for door in DOORS:
                if _inside(target, door) and target != door and not _inside(module, door):
                    crossings.append(f"{path.relative_to(SRC)}:{line} imports {target}")
    assert not crossings, "\n".join(crossings)


@pytest.mark.parametrize("door", EXPORTING)
def test_every_name_a_door_exports_resolves(door):
    import importlib

    package = importlib.import_module(door)
    missing = [name for name in package.__all__ if not hasattr(package, name)]
    assert not missing, missing


@pytest.mark.parametrize("door", EXPORTING)
def test_no_exported_name_is_also_a_module_behind_the_door(door):
    """Importing a submodule sets the package attribute of its name, which would replace an
    exported function or class of the same name."""
    import importlib

    package = importlib.import_module(door)
    here = Path(package.__file__).parent
    modules = {p.stem for p in here.glob("*.py")} | {p.name for p in here.iterdir() if p.is_dir()}
    assert not modules & set(package.__all__), modules & set(package.__all__)

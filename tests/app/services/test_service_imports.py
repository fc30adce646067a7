"""app/services imports neither Streamlit nor the figures: the computations run (and are tested) without a
page, and hand arrays and numbers up to whoever draws them (a figure, a component's payload)."""

import ast
from pathlib import Path

import pytest

from tests.helpers.fresh_imports import watched_imports

SERVICES = Path(__file__).resolve().parents[3] / "app" / "services"
MODULES = sorted(SERVICES.glob("*.py"))


def imported_names(path: Path) -> set[str]:
    """Every module a file imports, at any depth (a function-level import counts too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)  # from app import figures
    return names


def banned(name: str) -> bool:
    return any(name == top or name.startswith(f"{top}.") for top in ("streamlit", "app.figures"))


def test_every_concept_has_its_module():
    assert {p.stem for p in MODULES} >= {"prompts", "traces", "texts", "generation", "kv_sharing", "positions",
                                         "heads", "zoo", "byte_cache", "models"}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_a_service_module_imports_neither_streamlit_nor_figures(path):
    names = imported_names(path)
    assert names or path.stem == "__init__"  # the walk finds imports at all
    assert not [n for n in names if banned(n)]


def test_importing_every_service_loads_neither_streamlit_nor_figures_even_indirectly():
    """In a fork that forgot app, txviz and streamlit, every service is imported afresh: no import of
    streamlit is even tried, and no module of app.figures is loaded (tests/helpers/fresh_imports.py; a
    child interpreter cost ~2.7 CPU s)."""
    services = [f"app.services.{p.stem}" for p in MODULES if p.stem != "__init__"]
    done = watched_imports(services, forget={"app", "txviz"}, watched={"streamlit"})
    assert set(services) <= set(done["imported"]) and "txviz.model.transformer" in done["imported"]
    assert done["watched"] == []
    assert [name for name in done["imported"] if banned(name)] == []

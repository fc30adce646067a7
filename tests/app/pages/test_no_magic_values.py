"""Streamlit's "magic" writes the value of any bare expression on its own line of a page script
(calls excepted): ``draw() if x else draw(y)`` put a stray "None" under every KV-cache tab. No page
script (or main.py) may hold such a line."""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[3] / "app"


def test_no_page_script_has_a_bare_expression_that_magic_would_write():
    scripts = [APP / "main.py", *sorted((APP / "app_pages").glob("*/page.py"))]
    assert len(scripts) >= 8
    offenders = []
    for script in scripts:
        tree = ast.parse(script.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Expr) and not isinstance(node.value, (ast.Call, ast.Await, ast.Yield,
                                                                          ast.YieldFrom)):
                is_docstring = isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                if not is_docstring:
                    offenders.append(f"{script.relative_to(APP)}:{node.lineno}: {ast.unparse(node)[:60]}")
    assert not offenders, offenders

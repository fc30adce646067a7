"""The app's favicon is a file the server sends, never a Material icon or an emoji: the browser fetches those
favicons from Google's or a CDN's servers, which fails offline (an error in the console) and reaches the
network from a visitor's browser."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _page_icon() -> ast.expr:
    tree = ast.parse((ROOT / "app" / "main.py").read_text(encoding="utf-8"))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "set_page_config"]
    (call,) = calls
    (icon,) = [k.value for k in call.keywords if k.arg == "page_icon"]
    return icon


def test_the_favicon_is_a_png_in_the_projects_assets():
    icon = _page_icon()
    assert not isinstance(icon, ast.Constant), "a string icon (Material or emoji) is fetched from the internet"
    names = [n.value for n in ast.walk(icon) if isinstance(n, ast.Constant)]
    assert {"assets", "favicon.png"} <= set(names)
    data = (ROOT / "assets" / "favicon.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) < 4096

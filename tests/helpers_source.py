"""The package's modules as syntax trees, read once per test process: test_layout.py,
test_errors.py and test_packaging.py each look at every node of every module, and
parsing them was most of those files' time."""

from __future__ import annotations

import ast
import functools
import pathlib


@functools.cache
def nodes(path: pathlib.Path) -> tuple:
    """Every node of the module at ``path``, in ``ast.walk`` order (a tuple of
    ``ast.AST``; read-only: the tests share them)."""
    text = pathlib.Path(path).read_text(encoding="utf-8")
    return tuple(ast.walk(ast.parse(text, filename=str(path))))

"""The truth of an ``if`` test's source text, decided statically: under the run-time values the
engine layer supplies (:func:`evaluate_condition`: one platform's ``current_platform.is_*()``), or
under the parameter bindings of a decorator followed through its returns (:func:`param_test`).
"""

from __future__ import annotations

import ast
import functools
from typing import Mapping

from auditor.index.tables import COMPARISONS


def param_test(text: str, bind: dict) -> bool | None:
    """The truth of an ``if`` test on a parameter bound in ``bind`` (``"cls"``: a class,
    ``"none"``: None): ``p``, ``not p``, ``p is None``, ``p is not None``; None otherwise."""
    node = _parse_test(text)
    neg = False
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        node, neg = node.operand, not neg
    val = None
    if isinstance(node, ast.Name) and node.id in bind:
        val = bind[node.id] == "cls"
    elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.left, ast.Name) \
            and node.left.id in bind and isinstance(node.comparators[0], ast.Constant) \
            and node.comparators[0].value is None and isinstance(node.ops[0], (ast.Is, ast.IsNot)):
        val = (bind[node.left.id] == "none") == isinstance(node.ops[0], ast.Is)
    return None if val is None else val != neg


def evaluate_condition(text: str, conditions: Mapping[str, object]) -> bool | None:
    """The truth of an ``if`` test (source text) under ``conditions``, or None when it cannot be
    decided.

    ``conditions`` maps expression texts to their run-time values (``"current_platform.is_rocm()"``
    → False, ``"current_platform.device_type"`` → ``"cuda"``); an expression matches a key equal
    to it or ending it after a dot (``vllm.platforms.current_platform.is_rocm()``). ``TYPE_CHECKING``
    is False (it is only true for type checkers). ``not``, ``and``, ``or`` (three-valued), ``==``,
    ``!=``, ``in``, ``not in`` against literals, and literal constants are understood; anything
    else is undecided.
    """
    node = _parse_test(text)
    return None if node is None else _truth(node, conditions)


@functools.lru_cache(maxsize=4096)
def _parse_test(text: str) -> ast.expr | None:
    try:
        return ast.parse(text, mode="eval").body
    except SyntaxError:
        return None


def _lookup(node: ast.expr, conditions: Mapping[str, object]) -> tuple[bool, object]:
    """``(known, value)`` of a name, attribute or argument-less call under ``conditions``."""
    if isinstance(node, ast.Constant):
        return True, node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        vals = [_lookup(e, conditions) for e in node.elts]
        return all(k for k, _ in vals), [v for _, v in vals]
    if isinstance(node, ast.Call) and (node.args or node.keywords):
        return False, None
    text = ast.unparse(node)
    if text in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
        return True, False
    for key, value in conditions.items():
        if text == key or text.endswith("." + key):
            return True, value
    return False, None


def _truth(node: ast.expr, conditions: Mapping[str, object]) -> bool | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        v = _truth(node.operand, conditions)
        return None if v is None else not v
    if isinstance(node, ast.BoolOp):
        vals = [_truth(v, conditions) for v in node.values]
        if isinstance(node.op, ast.And):
            return False if False in vals else (None if None in vals else True)
        return True if True in vals else (None if None in vals else False)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        (lk, lv), (rk, rv) = _lookup(node.left, conditions), _lookup(node.comparators[0], conditions)
        if not (lk and rk):
            return None
        compare = COMPARISONS.get(type(node.ops[0]))
        if compare is None:
            return None
        try:
            return compare(lv, rv)
        except TypeError:
            return None
    known, value = _lookup(node, conditions)
    return bool(value) if known else None

"""The compiled modules' coroutines never await while they handle an exception (in an
``except`` or ``finally`` block, at an ``async with``'s exit, in an ``async for``): compiled
with mypyc, such a coroutine leaves its exception as the thread's handled exception while it
waits, and other coroutines' ``finally`` blocks re-raise it (engine/runtime/compiled.py;
docs/design.md, "Compiled hot path")."""

from __future__ import annotations

import ast
from pathlib import Path

from engine.runtime.compiled import MODULES

ROOT = Path(__file__).resolve().parents[2]

_SUSPENDS = (ast.Await, ast.AsyncFor, ast.AsyncWith)


def awaits_while_handling(source: str) -> list[str]:
    """``line: what`` for each place in ``source`` where a coroutine may wait while it
    handles an exception."""
    found: list[str] = []

    def first_wait(body: list[ast.stmt]) -> int | None:
        for stmt in body:
            for node in ast.walk(stmt):
                if isinstance(node, _SUSPENDS):
                    return node.lineno
        return None

    def visit(node: ast.AST, in_coroutine: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.Lambda)):
            in_coroutine = False
        elif isinstance(node, ast.AsyncFunctionDef):
            in_coroutine = True
        elif in_coroutine and isinstance(node, (ast.Try, ast.TryStar)):
            for handler in node.handlers:
                line = first_wait(handler.body)
                if line is not None:
                    found.append(f"{line}: await in an except block")
            line = first_wait(node.finalbody)
            if line is not None:
                found.append(f"{line}: await in a finally block")
        elif in_coroutine and isinstance(node, ast.AsyncWith):
            found.append(f"{node.lineno}: async with")
        elif in_coroutine and isinstance(node, ast.AsyncFor):
            found.append(f"{node.lineno}: async for")
        for child in ast.iter_child_nodes(node):
            visit(child, in_coroutine)

    visit(ast.parse(source), False)
    return found


def test_the_reader_finds_every_way_to_wait_while_handling() -> None:
    source = '''
async def f(lock, stream):
    try:
        await step()
    except KeyError:
        await recover()
    finally:
        close()
    try:
        pass
    finally:
        if flag:
            await cleanup()
    async with lock:
        pass
    async for item in stream:
        pass
    failure = None
    try:
        await step()
    except Exception as exc:
        failure = exc
    await recover()

def sync():
    try:
        pass
    finally:
        close()
'''
    assert awaits_while_handling(source) == [
        "6: await in an except block", "13: await in a finally block", "14: async with",
        "16: async for",
    ]


def test_no_compiled_coroutine_awaits_while_handling_an_exception() -> None:
    found = {
        name: hits
        for name in MODULES
        if (hits := awaits_while_handling(
            (ROOT / (name.replace(".", "/") + ".py")).read_text(encoding="utf-8")))
    }
    assert found == {}, (
        "compiled coroutines must hold an exception in a variable and await after the "
        "handler, or live in a module that is not compiled", found)

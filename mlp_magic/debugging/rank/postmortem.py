"""Each rank keeps its last failure, so that later cells can look inside the frame that failed.

A ``post_run_cell`` hook keeps the exception of a cell that raised (its traceback holds the
frames, alive: IPython's ``sys.last_value`` holds them too) and forgets it when a later cell
succeeds. Cells that inspect (``%%mpirun --post-mortem``, ``%mpirun --where``) begin with
``INSPECT_TAG`` and change nothing, so a rank can be inspected again and again. A Ctrl-C or
``--timeout`` interrupt is a KeyboardInterrupt raised where the rank was: its frames are kept too.
"""
from __future__ import annotations

import linecache
import reprlib
import sys
from itertools import islice

from mlp_magic.debugging.pure.postmortem import (REPR_LIMIT, FrameSummary, LocalSummary, format_where,
                                                 user_frames)
from mlp_magic.core.source_files import is_user_code
from mlp_magic.errors import MlpMagicError
# The hook that keeps the failure is in bootstrap (every rank installs it): this module, with
# what it imports, loads only where a failure is inspected.
from mlp_magic.engine.bootstrap import GENERATED_TAG, last_failure

_CO_NEWLOCALS = 0x0002   # a function's code (module and class bodies run in a given namespace)
_BYTES_SHOWN = 24
_VARIABLE_OPS = {"LOAD_NAME", "STORE_NAME", "DELETE_NAME",
                 "LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL"}   # not LOAD_ATTR, IMPORT_FROM, ...


class _BoundedRepr(reprlib.Repr):
    """reprlib, bounded for big values too: it sorts every key of a dict or set before showing
    a few, and it writes the whole ``repr`` of bytes or of a dict subclass (defaultdict, Counter)
    before cutting it: time and memory in proportion to the value (a 300 MB shard: 3 s and a
    1.2 GB string). Here only the items shown are read."""

    def repr1(self, x, level):
        if isinstance(x, (bytes, bytearray)) and len(x) > self.maxstring:
            head = repr(bytes(x[:_BYTES_SHOWN]))[:-1] + "...'"   # short: its size must show too
            return (head if type(x) is bytes else f"{type(x).__name__}({head})") + f" ({len(x):,} bytes)"
        if isinstance(x, dict) and type(x) is not dict and len(x) > self.maxdict:
            return f"{type(x).__name__}({self.repr_dict(x, level)})"
        return super().repr1(x, level)

    def repr_dict(self, x, level):
        if not x or level <= 0:
            return "{...}" if x else "{}"
        pairs = [f"{self.repr1(key, level - 1)}: {self.repr1(value, level - 1)}"
                 for key, value in islice(dict.items(x), self.maxdict)]   # no subclass __getitem__
        return "{" + ", ".join(pairs) + (", ..." if len(x) > self.maxdict else "") + "}"

    def repr_set(self, x, level):
        return self._bounded_set(x, level, "{", "}") if x else "set()"

    def repr_frozenset(self, x, level):
        return self._bounded_set(x, level, "frozenset({", "})") if x else "frozenset()"

    def _bounded_set(self, x, level, left: str, right: str) -> str:
        if level <= 0:
            return left + "..." + right
        shown = [self.repr1(item, level - 1) for item in islice(x, self.maxset)]
        return left + ", ".join(shown) + (", ..." if len(x) > self.maxset else "") + right


_REPR = _BoundedRepr()
_REPR.maxstring = _REPR.maxother = REPR_LIMIT * 2
_REPR.maxlong = REPR_LIMIT


def _failure() -> BaseException:
    failure = last_failure()
    if failure is None:
        raise MlpMagicError("this rank has no failure to inspect (its last cell succeeded)")
    return failure


def _is_generated(path: str) -> bool:
    return linecache.getline(path, 1).startswith(GENERATED_TAG)


def _frames(failure: BaseException) -> list:
    """[(frame, is user code)], outermost first, from the failure's traceback."""
    found, tb = [], failure.__traceback__
    while tb is not None:
        path = tb.tb_frame.f_code.co_filename
        # "<string>": code made by exec (a dataclass's __init__, a namedtuple), not the user's
        found.append((tb, path != "<string>" and is_user_code(path)
                      and not _is_generated(path)))
        tb = tb.tb_next
    return found


def _error_line(failure: BaseException) -> str:
    try:
        message = str(failure)
    except Exception as error:   # a broken __str__ must not break every later --where
        message = f"<str() failed: {type(error).__name__}>"
    text = f"{type(failure).__name__}: {message}" if message else type(failure).__name__
    return text if not isinstance(failure, KeyboardInterrupt) else f"{text} (interrupted here)"


def failure_summary():
    """None, or what the kernel needs to check ``--frame``: {"frames": user frames, "error": line}."""
    failure = last_failure()
    if failure is None:
        return None
    return {"frames": sum(user for _, user in _frames(failure)), "error": _error_line(failure)}


# ------------------------------------------------------------------------------ --where
def _type_name(value) -> str:
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _attribute_text(value, name: str) -> str:
    """``value.shape`` / ``value.dtype`` as short text; "" when absent or when asking fails."""
    if isinstance(value, type):
        return ""   # a class's ``shape`` is a descriptor, not a shape
    try:
        found = getattr(value, name, None)
        if found is None or callable(found):
            return ""
        if name == "shape":
            try:
                return str(tuple(int(n) for n in found))
            except (TypeError, ValueError):
                pass
        return str(found)[:40]
    except Exception:  # a user's property may raise anything: it is then left out
        return ""


def _repr(value) -> str:
    try:
        return _REPR.repr(value)
    except Exception as err:  # a user's __repr__ may raise anything
        return f"<repr failed: {type(err).__name__}>"


def _summarise(name: str, value) -> LocalSummary:
    shape = _attribute_text(value, "shape")
    dtype = _attribute_text(value, "dtype") if shape else ""
    return LocalSummary(name, _type_name(value), shape, dtype, _repr(value))


def _local_names(frame) -> list:
    """A function's locals but modules; at a module's top level (a cell, a script), the names
    its code uses, but modules, functions and classes (not the whole namespace)."""
    values, code = frame.f_locals, frame.f_code
    in_function = code.co_flags & _CO_NEWLOCALS
    names = list(values) if in_function else [n for n in _variable_names(code) if n in values]
    hidden = ("module",) if in_function else ("module", "function", "builtin_function_or_method")
    return [n for n in names if not n.startswith("__") and type(values[n]).__name__ not in hidden
            and (in_function or not isinstance(values[n], type))]


def _variable_names(code) -> list:
    """The names a module-level code reads or writes as variables: not ``co_names``, which holds
    the attribute names too (``sys.exit(3)`` would list a namespace's ``exit``)."""
    import dis

    return list(dict.fromkeys(i.argval for i in dis.get_instructions(code) if i.opname in _VARIABLE_OPS))


def _frame_summary(tb, user: bool) -> FrameSummary:
    frame, path = tb.tb_frame, tb.tb_frame.f_code.co_filename
    values = frame.f_locals if user else {}
    local_values = tuple(_summarise(n, values[n]) for n in _local_names(frame)) if user else ()
    return FrameSummary(path, tb.tb_lineno, frame.f_code.co_name,
                        linecache.getline(path, tb.tb_lineno), user, local_values)


def where_text() -> str:
    failure = _failure()
    return format_where(_error_line(failure), [_frame_summary(tb, user) for tb, user in _frames(failure)])


def print_where() -> None:
    sys.stdout.write(where_text())


# ------------------------------------------------------------------------------ --post-mortem
def _pick(frame: int):
    frames = _frames(_failure())
    users = user_frames([FrameSummary("", 0, "", user=user) for _, user in frames])
    if not 0 <= frame < len(users):
        raise MlpMagicError(f"--frame {frame} is out of range: this rank has {len(users)} frames of "
                            "user code")
    return frames[users[frame]][0].tb_frame


def run_in_frame(code: str, frame: int = 0):
    """Run ``code`` with the globals and locals of user frame ``frame`` of the kept failure;
    the value of a last expression is returned (and shown, as a cell's would be). The names
    are a merged copy: comprehensions and lambdas see the locals, and assignments stay here."""
    __tracebackhide__ = True  # noqa: F841 - IPython's traceback leaves this frame out
    import ast

    target = _pick(frame)
    namespace = {**target.f_globals, **target.f_locals}
    filename = f"<post-mortem frame {frame}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    tree = ast.parse(code, filename)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, filename, "exec"), namespace)
    if last is not None:
        return eval(compile(ast.Expression(last.value), filename, "eval"), namespace)
    return None

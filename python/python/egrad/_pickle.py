"""Unpickling egrad's objects: a process-wide cache of what was compiled.

``Program``, ``Function`` and ``Gradient`` pickle as a call of
:func:`_restore` (their ``__reduce__`` in ``python/src/program.rs``) with
plain values: the program's source text (not its path: the process that
unpickles may not have the file), the name diagnostics show, ``prelude``,
``copy`` and the compile options, and for a function or gradient its name,
``wrt`` as given and its options. Unpickling compiles again from those,
once per process: the same state unpickled twice (two tasks of a Dask
worker, say) gives the same object, compiled once.
"""

import threading

from ._egrad import compile as _compile

__all__ = ["pickle_cache_info", "pickle_cache_clear"]

_LOCK = threading.RLock()
# The frozen state of each object unpickled in this process -> the object.
_CACHE = {}
_STATS = {"hits": 0, "misses": 0}


def _freeze(value):
    """A hashable form of a state: dicts and lists become tuples."""
    if isinstance(value, dict):
        return ("dict", tuple((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_freeze(v) for v in value))
    return value


def _program(state):
    source, name, prelude, copy, options = state
    key = _freeze(("program", state, ()))  # as _restore("program", state) keys it
    program = _CACHE.get(key)
    if program is None:
        program = _compile(source, name=name, prelude=prelude, copy=copy, **options)
        _CACHE[key] = program
    return program


def _build(kind, state, rest):
    program = _program(state)
    if kind == "program":
        return program
    if kind == "function":
        name, options, copy = rest
        return program.function(name, copy=copy, **options)
    if kind == "gradient":
        name, wrt, options, copy = rest
        return program.grad(name, wrt=wrt, copy=copy, **options)
    raise ValueError(f"egrad cannot unpickle a {kind!r}: pickled by another version of egrad?")


def _restore(kind, state, *rest):
    """The object ``__reduce__`` described, from this process's cache or
    compiled (and cached) now."""
    key = _freeze((kind, state, rest))
    with _LOCK:
        found = _CACHE.get(key)
        if found is not None:
            _STATS["hits"] += 1
            return found
        made = _build(kind, state, rest)
        _CACHE[key] = made
        _STATS["misses"] += 1
        return made


def pickle_cache_info():
    """What unpickling did in this process: ``{"hits": ..., "misses": ...,
    "size": ...}``. A miss compiled (the program, then the function or
    gradient asked for); a hit returned what an earlier unpickle of the
    same state made. ``size`` counts the cached programs, functions and
    gradients."""
    with _LOCK:
        return {"hits": _STATS["hits"], "misses": _STATS["misses"], "size": len(_CACHE)}


def pickle_cache_clear():
    """Forget what was unpickled (and the counts): the next unpickle
    compiles again. Objects already unpickled stay valid."""
    with _LOCK:
        _CACHE.clear()
        _STATS["hits"] = _STATS["misses"] = 0

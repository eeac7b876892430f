"""egrad: an optimizing derivative compiler, from Python.

Compile a ``.eg`` program (a file or a string), then call its functions
and their gradients on NumPy arrays::

    import egrad, numpy as np
    prog = egrad.compile_file("examples/loss.eg")
    g = prog.grad("loss", wrt="w")           # optimized in an e-graph, JIT-compiled once
    value, dw = g.value_and_grad(w, x, np.float32(0.5))
    print(g.report())

Arguments are read in place (no copy) when they are C-contiguous ndarrays
of the parameter's dtype (float32, float64, int64; a bool parameter reads
int64 0/1 in place and converts a bool array); other inputs are converted
when NumPy casts them with ``casting="same_kind"`` (``copy=False`` refuses
any conversion). Results are NumPy arrays, a scalar a 0-d array. The GIL is
released while egrad compiles and while native code runs. Errors are
:class:`EgradError` subclasses carrying the CLI's message and place.
Programs, functions and gradients pickle (as source text and options;
unpickling compiles once per process). ``egrad.jax`` and ``egrad.torch``
(imported on their own, needing JAX or PyTorch) make a function and its
gradient usable inside ``jax.jit`` / ``torch.autograd``.
See ``python/README.md`` for the whole API.
"""

from . import errors
from ._egrad import Function, Gradient, Program, __version__, compile, compile_file
from ._pickle import pickle_cache_clear, pickle_cache_info
from .errors import (
    EgradError,
    EgradInternalError,
    EgradIOError,
    EgradLimitError,
    EgradRuntimeError,
    EgradSyntaxError,
    EgradTypeError,
    EgradUnsupportedError,
    EgradUsageError,
)

__all__ = [
    "compile",
    "compile_file",
    "Program",
    "Function",
    "Gradient",
    "EgradError",
    "EgradSyntaxError",
    "EgradTypeError",
    "EgradUnsupportedError",
    "EgradLimitError",
    "EgradUsageError",
    "EgradIOError",
    "EgradRuntimeError",
    "EgradInternalError",
    "errors",
    "pickle_cache_info",
    "pickle_cache_clear",
    "__version__",
]

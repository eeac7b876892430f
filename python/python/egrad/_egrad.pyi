"""Type stubs of egrad's native module (``python/src/*.rs``)."""

import os
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

__version__: str

ArrayLike = Any
"""An argument: an ``ndarray`` (read in place when it is C-contiguous, aligned
and of the parameter's dtype), or anything ``numpy.asarray`` takes that casts
to the parameter's dtype with ``casting="same_kind"``; a Python ``int`` for
an ``i64`` scalar parameter."""

Result = Union[np.ndarray, Tuple[np.ndarray, ...]]
"""One result: an array (a scalar is a 0-d array); several: a tuple."""

def compile(
    source: str,
    name: str = "<string>",
    *,
    prelude: bool = True,
    copy: Optional[bool] = None,
    lam: Optional[float] = None,
    dims: Optional[Mapping[str, int]] = None,
    no_optimize: Optional[bool] = None,
    fast_math: Optional[bool] = None,
    node_limit: Optional[int] = None,
    iter_limit: Optional[int] = None,
    time_limit: Optional[float] = None,
    simd: Optional[bool] = None,
    gemm: Optional[bool] = None,
    wide: Optional[bool] = None,
    rules: Optional[Union[str, os.PathLike]] = None,
) -> Program:
    """Parse and check a program given as text (``name`` is what diagnostics
    call it). The options become the program's defaults; raises an
    :class:`egrad.EgradError` subclass on an error in the program."""

def compile_file(
    path: Union[str, os.PathLike],
    *,
    prelude: bool = True,
    copy: Optional[bool] = None,
    lam: Optional[float] = None,
    dims: Optional[Mapping[str, int]] = None,
    no_optimize: Optional[bool] = None,
    fast_math: Optional[bool] = None,
    node_limit: Optional[int] = None,
    iter_limit: Optional[int] = None,
    time_limit: Optional[float] = None,
    simd: Optional[bool] = None,
    gemm: Optional[bool] = None,
    wide: Optional[bool] = None,
    rules: Optional[Union[str, os.PathLike]] = None,
) -> Program:
    """Read, parse and check a ``.eg`` file; diagnostics name it as given."""

class Program:
    """A parsed and type-checked program. Functions and gradients compile on
    first request and are cached by name, ``wrt`` and options."""

    @property
    def name(self) -> str:
        """The name diagnostics show (the path, or ``compile``'s ``name``)."""
    @property
    def functions(self) -> List[str]:
        """The program's functions, in source order."""
    def signature(self, name: str) -> str:
        """``f[N](x: f32[N], y: f32) -> f32``."""
    def function(
        self,
        name: str,
        *,
        copy: Optional[bool] = None,
        lam: Optional[float] = None,
        dims: Optional[Mapping[str, int]] = None,
        no_optimize: Optional[bool] = None,
        fast_math: Optional[bool] = None,
        node_limit: Optional[int] = None,
        iter_limit: Optional[int] = None,
        time_limit: Optional[float] = None,
        simd: Optional[bool] = None,
        gemm: Optional[bool] = None,
        wide: Optional[bool] = None,
        rules: Optional[Union[str, os.PathLike]] = None,
    ) -> Function:
        """Function ``name``, optimized and compiled as ``egrad run`` does."""
    def grad(
        self,
        name: str,
        wrt: Optional[Union[str, Sequence[str]]] = None,
        *,
        copy: Optional[bool] = None,
        lam: Optional[float] = None,
        dims: Optional[Mapping[str, int]] = None,
        no_optimize: Optional[bool] = None,
        fast_math: Optional[bool] = None,
        node_limit: Optional[int] = None,
        iter_limit: Optional[int] = None,
        time_limit: Optional[float] = None,
        simd: Optional[bool] = None,
        gemm: Optional[bool] = None,
        wide: Optional[bool] = None,
        rules: Optional[Union[str, os.PathLike]] = None,
    ) -> Gradient:
        """The gradient of a ``@grad`` function (no ``wrt``), or of a scalar
        function with respect to ``wrt``: one name (``grad`` returns an
        array), a list of names (a tuple), or None (every parameter, a
        tuple)."""
    def explain(
        self,
        name: str,
        wrt: Optional[Union[str, Sequence[str]]] = None,
        lam_before: Optional[float] = None,
        *,
        lam: Optional[float] = None,
        dims: Optional[Mapping[str, int]] = None,
        no_optimize: Optional[bool] = None,
        fast_math: Optional[bool] = None,
        node_limit: Optional[int] = None,
        iter_limit: Optional[int] = None,
        time_limit: Optional[float] = None,
        simd: Optional[bool] = None,
        gemm: Optional[bool] = None,
        wide: Optional[bool] = None,
        rules: Optional[Union[str, os.PathLike]] = None,
    ) -> str:
        """What ``egrad explain`` prints: the compile-cache key, static and
        dynamic arguments, and for a gradient the residuals and choices."""
    def __reduce__(self) -> Tuple[Any, Tuple[Any, ...]]:
        """Pickles as its source text, name, ``prelude``, ``copy`` and options."""

class Function:
    """A compiled function; call it by position or by parameter name."""

    def __call__(self, *args: ArrayLike, **kwargs: ArrayLike) -> Result: ...
    @property
    def name(self) -> str: ...
    @property
    def signature(self) -> str: ...
    @property
    def params(self) -> List[str]: ...
    @property
    def param_types(self) -> List[str]:
        """The parameters' types as the source spells them: ``"f32[N]"``."""
    @property
    def result_types(self) -> List[str]:
        """The results' types as the source spells them."""
    def dump(self, stage: str = "optimized") -> str:
        """``"ir"``, ``"optimized"`` or ``"clif"``."""
    def explain(self) -> str: ...
    def __reduce__(self) -> Tuple[Any, Tuple[Any, ...]]:
        """Pickles as the program's source text, the name and the options."""

class Gradient:
    """A compiled value-and-gradient program."""

    def __call__(self, *args: ArrayLike, **kwargs: ArrayLike) -> Result:
        """The gradients (as :meth:`grad`)."""
    def grad(self, *args: ArrayLike, **kwargs: ArrayLike) -> Result:
        """One array per differentiated parameter: the array itself when
        ``wrt`` was one name, else a tuple in ``wrt`` order."""
    def value_and_grad(self, *args: ArrayLike, **kwargs: ArrayLike) -> Tuple[np.ndarray, Result]:
        """``(value, gradients)``; the value is a 0-d array."""
    @property
    def name(self) -> str: ...
    @property
    def wrt(self) -> List[str]: ...
    @property
    def signature(self) -> str: ...
    @property
    def params(self) -> List[str]: ...
    @property
    def param_types(self) -> List[str]:
        """The parameters' types as the source spells them."""
    def __reduce__(self) -> Tuple[Any, Tuple[Any, ...]]:
        """Pickles as the program's source text, the name, ``wrt`` and the options."""
    def report(self) -> str:
        """``egrad grad --report``'s text."""
    def explain(self) -> str: ...
    def dump(self, stage: str = "extracted") -> str:
        """``"ir"``, ``"ad"``, ``"extracted"`` or ``"clif"``."""

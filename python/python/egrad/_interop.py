"""What egrad.jax and egrad.torch share: which parameters are
differentiable, and arguments bound to parameters by name."""

import numpy as np

FLOATS = {"f32": np.float32, "f64": np.float64}


def _base(param_type):
    """``"f32[N, M]"`` -> ``"f32"``."""
    return param_type.partition("[")[0]


def wrt_list(who, name, params, types, wrt):
    floats = [p for p, t in zip(params, types) if _base(t) in FLOATS]
    if wrt is None:
        return floats
    wrt = [wrt] if isinstance(wrt, str) else list(wrt)
    for p in wrt:
        if p not in params:
            raise ValueError(f"{who}: `{name}` has no parameter `{p}` (parameters: {', '.join(params)})")
        if p not in floats:
            t = types[params.index(p)]
            raise ValueError(f"{who}: parameter `{p}` of `{name}` is {t}: only f32 and f64 parameters are differentiable")
    return wrt


def bind(name, params, args, kwargs):
    """Positional arguments in parameter order, from ``args`` and ``kwargs``."""
    if len(args) > len(params):
        raise TypeError(f"{name}() takes {len(params)} arguments, got {len(args)}")
    bound = list(args) + [None] * (len(params) - len(args))
    given = [True] * len(args) + [False] * (len(params) - len(args))
    for k, v in kwargs.items():
        if k not in params:
            raise TypeError(f"{name}() got an unexpected keyword argument `{k}` (parameters: {', '.join(params)})")
        i = params.index(k)
        if given[i]:
            raise TypeError(f"{name}() got multiple values for argument `{k}`")
        bound[i], given[i] = v, True
    missing = [p for p, g in zip(params, given) if not g]
    if missing:
        raise TypeError(f"{name}() is missing arguments: {', '.join(missing)}")
    return bound

"""egrad functions inside JAX: ``jax.jit``, ``jax.grad``, ``jax.vmap``.

:func:`function` wraps a function of an egrad program with one ``f32`` or
``f64`` scalar result as a JAX function with a ``jax.custom_vjp``: the value
is egrad's compiled function, and its vector-Jacobian product is the
cotangent times egrad's optimized gradient. Both run egrad's native code
through ``jax.pure_callback`` (on the host, with the GIL released), so the
wrapped function works under ``jax.jit``, ``jax.grad``/``jax.value_and_grad``
and ``jax.vmap`` (``vmap_method="sequential"``: one native call per batch
element)::

    import egrad, egrad.jax
    prog = egrad.compile_file("examples/loss.eg")
    loss = egrad.jax.function(prog, "loss")            # wrt: every float parameter
    jax.jit(jax.grad(loss))(w, x, 0.5)

JAX is imported when :func:`function` is called: ``import egrad`` never
needs it. Limits: one scalar result (egrad has no pullback with a
cotangent for array results, so other functions are refused with a
``ValueError``); first-order only (the gradient of the VJP is not
defined: ``jax.hessian`` fails); parameters outside ``wrt`` are treated as
constants (their cotangent is zero, as under ``jax.lax.stop_gradient``).
"""

import numpy as np

__all__ = ["function"]

from ._interop import FLOATS, bind, wrt_list

def function(program, name, wrt=None, **options):
    """The function ``name`` of ``program`` (an :class:`egrad.Program`) as
    a JAX function with egrad's gradient as its VJP.

    ``wrt``: the parameters JAX may differentiate (a name or a list of
    names); None, the default, is every ``f32`` and ``f64`` parameter. The
    others (integers, booleans, and floats left out) get a zero cotangent.
    ``options``: compile options and ``copy``, as for
    :meth:`egrad.Program.function`.

    The result takes JAX arrays (or anything ``jax.numpy.asarray`` takes)
    by position or by parameter name and returns a 0-d JAX array of the
    result's dtype (``float32`` when JAX runs without ``jax_enable_x64``).
    Its attributes ``function``, ``gradient`` (None for an empty ``wrt``)
    and ``wrt`` are the egrad objects it calls.
    """
    import jax
    import jax.numpy as jnp

    f = program.function(name, **options)
    params, types = f.params, f.param_types
    results = f.result_types
    if len(results) != 1 or results[0] not in FLOATS:
        raise ValueError(
            f"egrad.jax: `{name}` returns {', '.join(results) or 'nothing'}: only a function with one f32 or "
            "f64 scalar result can be wrapped (its VJP is the cotangent times egrad's gradient; egrad has "
            "no pullback for array results)"
        )
    wrt = wrt_list("egrad.jax", name, params, types, wrt)
    diff = [params.index(p) for p in wrt]
    g = program.grad(name, wrt=wrt, **options) if wrt else None
    result_dtype = FLOATS[results[0]]

    def value_struct():
        # Without jax_enable_x64 JAX has no float64: the result is float32.
        return jax.ShapeDtypeStruct((), jax.dtypes.canonicalize_dtype(result_dtype))

    def primal(*args):
        out = value_struct()
        return jax.pure_callback(
            lambda *a: np.asarray(f(*a), out.dtype), out, *args, vmap_method="sequential"
        )

    def fwd(*args):
        if g is None:
            return primal(*args), ()
        out = value_struct()
        grads = tuple(jax.ShapeDtypeStruct(jnp.shape(args[i]), args[i].dtype) for i in diff)

        def run(*a):
            value, gs = g.value_and_grad(*a)  # wrt is a list: gs is a tuple
            return np.asarray(value, out.dtype), tuple(np.asarray(x, s.dtype) for x, s in zip(gs, grads))

        value, gs = jax.pure_callback(run, (out, grads), *args, vmap_method="sequential")
        return value, gs

    def bwd(gs, ct):
        cts = [None] * len(params)  # None: a zero cotangent (integers get no float one)
        for i, gi in zip(diff, gs):
            cts[i] = ct.astype(gi.dtype) * gi
        return tuple(cts)

    wrapped = jax.custom_vjp(primal)
    wrapped.defvjp(fwd, bwd)

    def call(*args, **kwargs):
        return wrapped(*(jnp.asarray(a) for a in bind(name, params, args, kwargs)))

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"egrad's {f.signature}, with egrad's gradient with respect to {', '.join(wrt) or 'nothing'} as its VJP."
    call.function, call.gradient, call.wrt = f, g, list(wrt)
    return call

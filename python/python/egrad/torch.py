"""egrad functions inside PyTorch's autograd.

:func:`function` wraps a function of an egrad program with one ``f32`` or
``f64`` scalar result as a callable on tensors whose backward is egrad's
optimized gradient (a ``torch.autograd.Function``)::

    import egrad, egrad.torch
    loss = egrad.torch.function(egrad.compile_file("examples/loss.eg"), "loss")
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    loss(w, torch.tensor([4.0, 5.0, 6.0]), 0.5).backward()   # w.grad: egrad's gradient

egrad runs on the CPU: tensors are read through NumPy (``.detach().cpu()``,
no copy for a contiguous CPU tensor of the parameter's dtype) and the
results come back on the device of the first tensor argument. The forward
pass computes the value and, when some tensor in ``wrt`` requires a
gradient, the gradients too (one native pass); backward multiplies them
by the incoming gradient. First-order only (``once_differentiable``).
PyTorch is imported when :func:`function` is called: ``import egrad``
never needs it. Limits as for :mod:`egrad.jax`: one scalar result;
parameters outside ``wrt`` get no gradient (None).
"""

import numpy as np

from ._interop import FLOATS, bind, wrt_list

__all__ = ["function"]


def _numpy(x):
    import torch

    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x


def function(program, name, wrt=None, **options):
    """The function ``name`` of ``program`` as a callable on tensors (or
    anything egrad takes) with egrad's gradient as its backward.

    ``wrt``: the parameters that may get a gradient (a name or a list);
    None is every ``f32`` and ``f64`` parameter. ``options``: compile
    options and ``copy``, as for :meth:`egrad.Program.function`. Arguments
    by position or by parameter name; the result is a 0-d tensor of the
    result's dtype. Its attributes ``function``, ``gradient`` and ``wrt``
    are the egrad objects it calls.
    """
    import torch
    from torch.autograd.function import once_differentiable

    f = program.function(name, **options)
    params, types, results = f.params, f.param_types, f.result_types
    if len(results) != 1 or results[0] not in FLOATS:
        raise ValueError(
            f"egrad.torch: `{name}` returns {', '.join(results) or 'nothing'}: only a function with one f32 "
            "or f64 scalar result can be wrapped (egrad has no pullback for array results)"
        )
    wrt = wrt_list("egrad.torch", name, params, types, wrt)
    diff = [params.index(p) for p in wrt]
    g = program.grad(name, wrt=wrt, **options) if wrt else None

    class EgradFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            device = tensors[0].device if tensors else torch.device("cpu")
            arrays = [_numpy(a) for a in args]
            ctx.grads = None
            if g is not None and any(ctx.needs_input_grad[i] for i in diff):
                value, grads = g.value_and_grad(*arrays)  # wrt is a list: a tuple
                ctx.grads = [torch.from_numpy(np.ascontiguousarray(x)) for x in grads]
                # The dtype and device each gradient goes back in.
                ctx.like = [(a.dtype, a.device) if isinstance(a, torch.Tensor) else None for a in (args[i] for i in diff)]
            else:
                value = f(*arrays)
            return torch.from_numpy(np.asarray(value)).to(device)

        @staticmethod
        @once_differentiable
        def backward(ctx, grad_output):
            out = [None] * len(params)
            if ctx.grads is None:
                return tuple(out)
            for i, gi, like in zip(diff, ctx.grads, ctx.like):
                if ctx.needs_input_grad[i]:  # then args[i] is a tensor: like is not None
                    gi = gi.to(dtype=like[0], device=like[1])
                    out[i] = grad_output.to(gi.dtype) * gi
            return tuple(out)

    def call(*args, **kwargs):
        return EgradFunction.apply(*bind(name, params, args, kwargs))

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"egrad's {f.signature}, with egrad's gradient with respect to {', '.join(wrt) or 'nothing'} as its backward."
    call.function, call.gradient, call.wrt = f, g, list(wrt)
    return call

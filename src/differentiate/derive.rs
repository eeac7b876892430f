//! The AD stage's answer to the checker's transform requests
//! ([`crate::ir::transform`]): reverse mode for `@grad` (forward mode when
//! reverse mode meets a loop's gradient and every parameter differentiated
//! is a scalar), `@value_and_grad` from the same sweep, forward mode for
//! `@jvp`.

use super::forward::{forward, forward_gradient};
use super::reverse::{prune_dead, reverse};
use super::{AdError, AdLimit};
use crate::ir::transform::{Derived, Request, TransformError, Transforms};
use crate::ir::Function;

/// Automatic differentiation as the checker's [`Transforms`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Ad;

impl Transforms for Ad {
    fn derive(&self, name: &str, request: Request<'_>) -> Result<Derived, TransformError> {
        match request {
            Request::Grad {
                primal,
                wrt,
                value_too,
            } => grad(name, primal, wrt, value_too),
            Request::Jvp { f, pairs } => match forward(f, pairs, name) {
                Ok(ir) => Ok(Derived { ir, reverse: false }),
                Err(e) => Err(failure("forward mode of", name, e)),
            },
        }
    }
}

fn grad(
    name: &str,
    primal: &Function,
    wrt: &[usize],
    value_too: bool,
) -> Result<Derived, TransformError> {
    let rev = match reverse(primal, wrt) {
        Ok(r) => r,
        // Where reverse mode stops (a scan's gradient with respect to its
        // sequence), forward mode gives the gradient for scalar parameters.
        Err(AdError::Unsupported(AdLimit::LoopGradient))
            if !value_too
                && wrt
                    .iter()
                    .all(|&i| primal.ty(primal.params[i].var).is_scalar()) =>
        {
            return match forward_gradient(primal, wrt, name) {
                Ok(ir) => Ok(Derived { ir, reverse: false }),
                // Neither mode goes through: the user asked for reverse
                // mode, whose limit (and its note: forward over reverse
                // goes) is the one to read.
                Err(AdError::Unsupported(AdLimit::ForwardLoopGradient)) => Err(failure(
                    "differentiating",
                    name,
                    AdError::Unsupported(AdLimit::LoopGradient),
                )),
                Err(e) => Err(failure("differentiating", name, e)),
            };
        }
        Err(e) => return Err(failure("differentiating", name, e)),
    };
    if value_too {
        let mut ir = prune_dead(&rev.value_and_grad);
        ir.name = name.to_string();
        return Ok(Derived { ir, reverse: false });
    }
    Ok(Derived {
        ir: rev.gradient(name),
        reverse: true,
    })
}

/// A limit users can meet is theirs to work around; anything else is a bug.
fn failure(what: &str, name: &str, e: AdError) -> TransformError {
    match e {
        AdError::Unsupported(limit) => TransformError::Unsupported {
            why: limit.message().to_string(),
            note: limit.note().to_string(),
        },
        e @ (AdError::Invalid(_) | AdError::Bug(_)) => {
            TransformError::Internal(format!("{what} `{name}`: {e}"))
        }
    }
}

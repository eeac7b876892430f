//! What the checker asks of differentiation.
//!
//! The front end does not differentiate: it records a `@grad`,
//! `@value_and_grad` or `@jvp` attribute as a [`Request`] on the lowered
//! function and hands it to the [`Transforms`] its caller supplies (the AD
//! stage's `differentiate::Ad`, which `Program::parse` passes in). Callers of
//! a transformed function inline the result like any function's IR, so the
//! request is answered as soon as the function is lowered. `lang` therefore
//! never names the stage that consumes it (`ARCHITECTURE.md`, arrows).

use super::Function;

/// A transform attribute, on a function already lowered to IR.
#[derive(Clone, Copy, Debug)]
pub enum Request<'a> {
    /// `@grad(wrt)`: `(params) -> (gradients...)`; with `value_too`
    /// (`@value_and_grad`): `(params) -> (value, gradients...)`.
    Grad {
        /// The body as a function of the parameters, one scalar result.
        primal: &'a Function,
        /// IR indices of the parameters differentiated, in attribute order.
        wrt: &'a [usize],
        /// `@value_and_grad`: the value too.
        value_too: bool,
    },
    /// `@jvp`: `(params) -> (results..., tangents of the results...)`.
    Jvp {
        /// The function, whose trailing parameters are the tangents.
        f: &'a Function,
        /// (differentiated parameter, its tangent parameter), IR indices.
        pairs: &'a [(usize, usize)],
    },
}

/// The answer to a [`Request`].
#[derive(Clone, Debug)]
pub struct Derived {
    /// The derived function, named as asked.
    pub ir: Function,
    /// Whether reverse mode made it from the request's primal (then the
    /// pipeline can differentiate the primal again and optimize primal and
    /// adjoint together); `false` for forward mode and `@value_and_grad`.
    pub reverse: bool,
}

/// Why a request could not be answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransformError {
    /// A documented limit: the function is valid but cannot be
    /// differentiated this way yet. Reported at the function, as the user's
    /// error.
    Unsupported {
        /// What is not supported, one line.
        why: String,
        /// What to do instead.
        note: String,
    },
    /// A bug in egrad.
    Internal(String),
}

/// Answers transform requests: implemented by the AD stage.
pub trait Transforms {
    /// Derive the function `name` that `request` asks for.
    fn derive(&self, name: &str, request: Request<'_>) -> Result<Derived, TransformError>;
}

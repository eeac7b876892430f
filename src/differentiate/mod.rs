//! Automatic differentiation of IR functions.
//!
//! Forward mode ([`forward`](mod@forward)) pushes tangents through the program in order
//! with each op's JVP template; `@jvp` functions use it, and forward over
//! reverse (a `@jvp` of a `@grad` function) gives Hessian-vector products.
//!
//! Reverse mode is a deterministic sweep ([`reverse`](mod@reverse)): the primal is walked
//! once backwards, each op's VJP template (from the op table) is instantiated
//! per active operand, and contributions to a value's cotangent are summed
//! as they arrive. A value used k times is differentiated once, so the
//! gradient costs a constant factor of the primal (the cheap gradient
//! principle). Pure-rewrite reverse mode blows up in the e-graph (see
//! docs/design.md), so the sweep builds the adjoint and the e-graph then
//! simplifies primal and adjoint together.

mod custom;
pub mod derive;
pub mod forward;
pub mod reverse;
mod split;
pub mod template;

pub use derive::Ad;
pub use forward::{forward, forward_gradient, jvp};
pub use reverse::{reverse, Reverse};

use crate::ir::IrError;
use crate::ops::OpTypeError;
use std::fmt;

/// Why AD stopped.
#[derive(Debug)]
pub enum AdError {
    /// A documented limit: valid code that AD does not handle yet. The
    /// user's error to work around, never a bug.
    Unsupported(AdLimit),
    /// AD was given or made invalid IR: a bug in egrad.
    Invalid(IrError),
}

/// The documented limits of AD (`docs/language.md`, "Not yet supported").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdLimit {
    /// Reverse mode through a scan's gradient with respect to its sequence,
    /// or through a `loopvjp` giving a sequence's or a whole tape's
    /// cotangent.
    LoopGradient,
    /// Forward mode through a scan's gradient (`loopvjp`) with respect to
    /// its sequence.
    ForwardScanSequence,
    /// Forward mode through a use of a loop's gradient it cannot push.
    ForwardLoopGradient,
    /// Reverse mode through a native kernel registered without a VJP (or
    /// through a kernel's VJP: a second derivative).
    KernelWithoutVjp,
    /// Forward mode through a native kernel.
    ForwardKernel,
}

impl AdLimit {
    /// What is not supported, one line.
    pub fn message(self) -> &'static str {
        match self {
            AdLimit::LoopGradient => {
                "differentiating this gradient of a `scan` is not supported yet"
            }
            AdLimit::ForwardScanSequence => {
                "forward mode through a scan's gradient with respect to its sequence is not supported yet"
            }
            AdLimit::ForwardLoopGradient => {
                "forward mode through this use of a loop's gradient is not supported yet"
            }
            AdLimit::KernelWithoutVjp => {
                "it calls a native kernel that has no VJP (or a kernel's VJP, which has none)"
            }
            AdLimit::ForwardKernel => "forward mode through a native kernel is not supported",
        }
    }

    /// What the user can do instead.
    pub fn note(self) -> &'static str {
        match self {
            AdLimit::ForwardScanSequence => {
                "forward mode goes through a scan with respect to its sequence, and through its gradient with respect to the initial state and the values the step reads: for the sequence, take the second derivative in reverse mode where it goes, or give the sequence an integer length and a state a loop cannot carry, so that the `scan` is unrolled and differentiated like any expression"
            }
            AdLimit::ForwardLoopGradient => {
                "forward mode goes through a loop's gradient with respect to the initial state and the values the step reads, not yet through a gradient with respect to a sequence or of every state of a `scan`: take that derivative in reverse mode (`@grad`)"
            }
            AdLimit::KernelWithoutVjp => {
                "register the kernel with one VJP function per argument (`Kernel::vjp`); a second derivative through a kernel needs the VJP written in the language (`@custom_vjp`)"
            }
            AdLimit::ForwardKernel => {
                "differentiate it in reverse mode (`@grad`), or write it in the language with `@custom_jvp`"
            }
            AdLimit::LoopGradient => {
                "reverse mode goes through the gradient of a loop or a `scan` with respect to its initial state and the values its step reads, but not yet with respect to the scan's sequence, nor through a gradient with respect to a sequence or through every state of `scan_all`: use `@jvp` of the gradient (forward over reverse), or `@grad` with respect to scalar parameters only (done by forward mode), or give the scan an integer length and a state a loop cannot carry so that it is unrolled"
            }
        }
    }
}

/// A bug: AD was given or made invalid IR.
pub(crate) fn invalid(message: String) -> AdError {
    AdError::Invalid(IrError(message))
}

impl From<IrError> for AdError {
    fn from(e: IrError) -> AdError {
        AdError::Invalid(e)
    }
}

impl From<OpTypeError> for AdError {
    fn from(e: OpTypeError) -> AdError {
        AdError::Invalid(IrError::from(e))
    }
}

impl fmt::Display for AdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdError::Unsupported(limit) => f.write_str(limit.message()),
            AdError::Invalid(e) => write!(f, "{e}"),
        }
    }
}

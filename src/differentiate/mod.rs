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
//! ARCHITECTURE.md), so the sweep builds the adjoint and the e-graph then
//! simplifies primal and adjoint together.

pub mod forward;
pub mod reverse;
pub mod template;

pub use forward::{forward, forward_gradient, jvp};
pub use reverse::{reverse, Reverse};

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

mod captures;
mod custom;
pub mod derive;
pub mod forward;
mod onehot;
pub mod reverse;
mod split;
pub mod template;

pub use derive::Ad;
pub use forward::{forward, forward_gradient, jvp};
pub use reverse::{reverse, Reverse};

use crate::ir::IrError;
use crate::ops::OpTypeError;
use crate::types::Type;
use std::fmt;
use template::TemplateError;

/// Why AD stopped.
#[derive(Debug)]
pub enum AdError {
    /// A documented limit: valid code that AD does not handle yet. The
    /// user's error to work around, never a bug.
    Unsupported(AdLimit),
    /// AD was given or made invalid IR: a bug in egrad.
    Invalid(IrError),
    /// AD broke one of its own invariants: a bug in egrad.
    Bug(AdBug),
}

/// An invariant of AD that did not hold: a bug in egrad.
#[derive(Clone, Debug, PartialEq)]
pub enum AdBug {
    /// A parameter index past the function's parameters.
    NoParameter {
        /// The function.
        function: String,
        /// The index.
        index: usize,
    },
    /// A parameter or its tangent's index past the function's parameters.
    NoTangentParameter {
        /// The function.
        function: String,
        /// The parameter's index.
        param: usize,
        /// The tangent's index.
        tangent: usize,
    },
    /// A tangent parameter of another type than its parameter.
    TangentType {
        /// The function.
        function: String,
        /// The parameter.
        param: String,
    },
    /// Forward mode met a tape that no `looptape` defines.
    NoLoopTape,
    /// Forward mode met a `loopvjp` of something other than a tape.
    NotATape,
    /// Forward mode met a value before its definition.
    ForwardUseBeforeDef,
    /// A gradient by forward mode with respect to a non-scalar parameter.
    ForwardNotScalar {
        /// The function.
        function: String,
        /// The parameter.
        param: String,
        /// Its type.
        ty: Type,
    },
    /// Reverse mode of a function without one scalar result.
    ReverseNotScalar {
        /// The function.
        function: String,
    },
    /// A loop without the VJP AD needs.
    NoLoopVjp {
        /// The function, where known.
        function: Option<String>,
        /// The loop's index.
        l: usize,
    },
    /// Something of a scan asked of a loop that is none (what, printed
    /// before "of a loop that is not a scan").
    NotAScan(&'static str),
    /// A value whose size AD needs has none.
    Unsized(Unsized),
    /// A statement taken for a `custom` one.
    NotCustom {
        /// The op, printed.
        op: String,
    },
    /// A `custom` statement of a rule the function does not have.
    NoRule {
        /// The function.
        function: String,
        /// The rule's index.
        rule: usize,
    },
    /// A rule function that reads a value before defining it.
    RuleUseBeforeDef {
        /// The rule function.
        function: String,
    },
    /// A rule function without results.
    RuleWithoutResults {
        /// The rule function.
        function: String,
    },
    /// A rule with neither a VJP nor a JVP function.
    RuleWithoutFunction {
        /// The rule.
        rule: String,
    },
    /// A VJP rule giving the wrong number of cotangents.
    VjpRuleCount {
        /// The rule.
        rule: String,
        /// Cotangents given.
        got: usize,
        /// Differentiable operands.
        want: usize,
    },
    /// A JVP rule giving more or less than one tangent.
    JvpRuleCount {
        /// The rule.
        rule: String,
        /// Tangents given.
        got: usize,
    },
    /// The guard of a rule's contribution does not instantiate.
    Guard(Box<TemplateError>),
    /// An op's derivative template does not instantiate.
    Template {
        /// `VJP` or `JVP`.
        mode: &'static str,
        /// The op.
        op: &'static str,
        /// Why.
        error: Box<TemplateError>,
    },
}

/// What has no size, for [`AdBug::Unsized`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unsized {
    /// A scan's row.
    Row,
    /// A loop's state.
    State,
    /// A tape.
    Tape,
    /// A loop's state, counted for its tape.
    LoopState,
    /// The rows of a scan's sequence.
    ScanRows,
}

impl fmt::Display for AdBug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdBug::NoParameter { function, index } => {
                write!(f, "`{function}`: no parameter {index}")
            }
            AdBug::NoTangentParameter {
                function,
                param,
                tangent,
            } => write!(f, "`{function}`: no parameter {param} or {tangent}"),
            AdBug::TangentType { function, param } => {
                write!(f, "`{function}`: the tangent of %{param} must have its type")
            }
            AdBug::NoLoopTape => f.write_str("forward mode: a tape without its `looptape`"),
            AdBug::NotATape => {
                f.write_str("forward mode: a `loopvjp` of something other than a tape")
            }
            AdBug::ForwardUseBeforeDef => {
                f.write_str("forward mode: a value is used before it is defined")
            }
            AdBug::ForwardNotScalar {
                function,
                param,
                ty,
            } => write!(
                f,
                "`{function}`: forward mode gives a gradient only for scalar parameters, not %{param}: {ty}"
            ),
            AdBug::ReverseNotScalar { function } => {
                write!(f, "`{function}`: reverse mode needs one scalar result")
            }
            AdBug::NoLoopVjp { function, l } => match function {
                Some(function) => write!(f, "`{function}`: loop {l} has no VJP"),
                None => write!(f, "loop {l} has no VJP"),
            },
            AdBug::NotAScan(what) => write!(f, "{what} of a loop that is not a scan"),
            AdBug::Unsized(what) => f.write_str(match what {
                Unsized::Row => "a row without a size",
                Unsized::State => "a state without a size",
                Unsized::Tape => "a tape without a size",
                Unsized::LoopState => "a loop whose state has no size",
                Unsized::ScanRows => "a scan whose rows have no size",
            }),
            AdBug::NotCustom { op } => write!(f, "`{op}` is not a custom statement"),
            AdBug::NoRule { function, rule } => {
                write!(f, "`{function}`: there is no rule {rule}")
            }
            AdBug::RuleUseBeforeDef { function } => {
                write!(f, "`{function}`: a value used before it is defined")
            }
            AdBug::RuleWithoutResults { function } => {
                write!(f, "`{function}`: a rule without results")
            }
            AdBug::RuleWithoutFunction { rule } => write!(f, "`{rule}`: a rule with no function"),
            AdBug::VjpRuleCount { rule, got, want } => write!(
                f,
                "the VJP rule of `{rule}` gives {got} cotangents for {want} operands"
            ),
            AdBug::JvpRuleCount { rule, got } => write!(
                f,
                "the JVP rule of `{rule}` gives {got} tangents for one result"
            ),
            AdBug::Guard(e) => write!(f, "guarding a rule's contribution: {e}"),
            AdBug::Template { mode, op, error } => write!(f, "{mode} of `{op}`: {error}"),
        }
    }
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
    /// Forward mode through a registered native kernel (the builtin ones
    /// have JVPs).
    ForwardKernel,
    /// Through a math function without a derivative yet (`tetragamma`).
    NoDerivative,
    /// Through a loop whose step reads values of other shapes (its
    /// captures): with respect to a scan's sequence, through every state
    /// of `scan_all` or a gradient's tape, or in reverse mode a capture of
    /// another float type.
    CapturingLoop,
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
                "it calls a native kernel that has no VJP (or a kernel's VJP, which has none: a second derivative through a builtin linear-algebra function too)"
            }
            AdLimit::ForwardKernel => {
                "forward mode through a registered native kernel is not supported"
            }
            AdLimit::NoDerivative => {
                "it differentiates `tetragamma` (a fourth derivative of `lgamma`, a second of `trigamma`), which has no derivative yet"
            }
            AdLimit::CapturingLoop => {
                "this derivative of a loop whose step reads values of other shapes is not supported yet"
            }
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
            AdLimit::NoDerivative => {
                "`lgamma`, `digamma` and `trigamma` have derivatives; take one derivative fewer, or write the function you need with `@custom_vjp`"
            }
            AdLimit::CapturingLoop => {
                "both modes go through such a loop, its every state (`scan_all`) and its gradient, with respect to its initial state, the values its step reads and a scan's sequence (in reverse mode, those of the state's element type)"
            }
            AdLimit::LoopGradient => {
                "reverse mode goes through the gradient of a loop or a `scan` with respect to its initial state and the values its step reads, but not yet with respect to the scan's sequence, nor through a gradient with respect to a sequence or through every state of `scan_all`: use `@jvp` of the gradient (forward over reverse), or `@grad` with respect to scalar parameters only (done by forward mode), or give the scan an integer length and a state a loop cannot carry so that it is unrolled"
            }
        }
    }
}

impl From<AdBug> for AdError {
    fn from(e: AdBug) -> AdError {
        AdError::Bug(e)
    }
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
            AdError::Bug(e) => write!(f, "{e}"),
        }
    }
}

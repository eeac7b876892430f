//! The errors of IR that breaks its own invariants (`Function::validate`
//! and the passes that build IR): bugs in egrad, never the user's.

use crate::ops::OpTypeError;
use crate::types::{Dim, Type};
use std::fmt;

/// An IR function failed its own invariants: a bug in the pass that made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IrError {
    /// A loop's body breaks a rule of bodies (`why`).
    LoopBody {
        /// The function holding the loop.
        function: String,
        /// The body's name.
        body: String,
        /// The rule broken.
        why: &'static str,
    },
    /// A loop counted by something other than a literal or a size parameter.
    LoopCount {
        /// The function holding the loop.
        function: String,
        /// The body's name.
        body: String,
        /// The count.
        count: Dim,
    },
    /// Two variables of one name.
    DuplicateName {
        /// The function.
        function: String,
        /// The name.
        name: String,
    },
    /// A type mentions a size that is not a size parameter.
    UnknownSizeParam {
        /// The function.
        function: String,
        /// The variable whose type it is.
        var: String,
        /// The size.
        param: String,
    },
    /// A parameter that is no variable, or one listed twice.
    BadParameter {
        /// The function.
        function: String,
    },
    /// A statement reads a value before it is defined.
    UseBeforeDef {
        /// The function.
        function: String,
        /// The statement's variable.
        var: String,
    },
    /// A variable defined twice.
    DefinedTwice {
        /// The function.
        function: String,
    },
    /// A statement whose op does not type on its operands.
    StmtType {
        /// The statement.
        at: Box<At>,
        /// Why.
        error: OpTypeError,
    },
    /// A statement whose declared type is not its op's result.
    Declared {
        /// The statement.
        at: Box<At>,
        /// The type declared.
        declared: Type,
        /// The op.
        op: &'static str,
        /// The type the op gives.
        got: Type,
    },
    /// A function returns a value it does not define.
    ReturnsUndefined {
        /// The function.
        function: String,
    },
    /// A `custom` statement of a rule the function does not have.
    NoRule {
        /// The statement.
        at: Box<At>,
        /// The rule's index.
        rule: usize,
    },
    /// A rule function whose types do not fit the statement's operands.
    RuleDoesNotFit {
        /// The statement.
        at: Box<At>,
        /// The rule's name.
        rule: String,
        /// `VJP` or `JVP`.
        which: &'static str,
    },
    /// A loop statement of a loop the function does not have.
    NoLoop {
        /// The statement.
        at: Box<At>,
        /// The loop's index.
        l: usize,
    },
    /// A loop statement whose captures (its operands after the state and
    /// a scan's sequence) are not those its loop's body reads.
    Captures {
        /// The statement.
        at: Box<At>,
        /// The loop's index.
        l: usize,
        /// The body's capture types.
        want: Vec<Type>,
        /// The statement's.
        got: Vec<Type>,
    },
    /// A `loopvjp` of a loop without a VJP.
    NoLoopVjp {
        /// The statement.
        at: Box<At>,
        /// The loop's index.
        l: usize,
    },
    /// A `loopvjp` giving the cotangents of a scan's states and rows, of
    /// the wrong type.
    SeqCotangents {
        /// The statement.
        at: Box<At>,
        /// The loop's index.
        l: usize,
        /// Their type (None: the loop is no scan).
        want: Option<Type>,
        /// The statement's type.
        got: Type,
    },
    /// A scan's op on a loop that reads no sequence, or the other way round.
    ScanMismatch {
        /// The statement.
        at: Box<At>,
        /// The op.
        op: &'static str,
        /// The loop's index.
        l: usize,
        /// Whether the loop reads a sequence.
        reads: bool,
    },
    /// A scan given a sequence of the wrong type.
    Sequence {
        /// The statement.
        at: Box<At>,
        /// The loop's index.
        l: usize,
        /// The sequence's type.
        want: Type,
        /// What it was given.
        got: Option<Type>,
    },
    /// A loop statement whose state is not the loop's.
    State {
        /// The statement.
        at: Box<At>,
        /// The loop's index.
        l: usize,
        /// The loop's state.
        want: Type,
        /// The statement's.
        got: Type,
    },
    /// A tape with the wrong number of rows.
    TapeRows {
        /// The statement.
        at: Box<At>,
        /// The loop's index.
        l: usize,
        /// Every how many steps the tape keeps a state.
        k: u64,
        /// The rows it must have.
        want: Dim,
        /// The tape's type.
        tape: Type,
    },
    /// Inlining a function that reads a value before defining it.
    InlineUseBeforeDef {
        /// The function inlined.
        function: String,
    },
    /// A residual read in place that is no parameter.
    ResidualNotInput {
        /// The residual.
        name: String,
    },
    /// A value-and-gradient program without results.
    ReturnsNothing,
    /// A value the forward program needs, neither computed nor a parameter.
    NeitherComputedNorPassed {
        /// The variable.
        var: String,
    },
    /// A pullback reads a value of the forward sweep that is no residual.
    PullbackReadsNonResidual,
    /// A gradient the pullback does not compute.
    GradientNotComputed,
    /// An op that does not type, outside a statement.
    Op(OpTypeError),
}

/// A statement of a function, for [`IrError`]: `function: %var`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct At {
    /// The function.
    pub function: String,
    /// The statement's variable.
    pub var: String,
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: %{}", self.function, self.var)
    }
}

impl fmt::Display for IrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IrError::LoopBody {
                function,
                body,
                why,
            } => write!(f, "{function}: loop body `{body}`: {why}"),
            IrError::LoopCount {
                function,
                body,
                count,
            } => write!(
                f,
                "{function}: loop body `{body}`: a count must be a literal or a size parameter, not {count}"
            ),
            IrError::DuplicateName { function, name } => {
                write!(f, "{function}: duplicate name %{name}")
            }
            IrError::UnknownSizeParam {
                function,
                var,
                param,
            } => write!(f, "{function}: %{var} uses unknown size parameter {param}"),
            IrError::BadParameter { function } => write!(f, "{function}: bad parameter"),
            IrError::UseBeforeDef { function, var } => {
                write!(f, "{function}: %{var} uses a value before it is defined")
            }
            IrError::DefinedTwice { function } => {
                write!(f, "{function}: a variable is defined twice")
            }
            IrError::StmtType { at, error } => write!(f, "{at}: {error}"),
            IrError::Declared {
                at,
                declared,
                op,
                got,
            } => write!(f, "{at} is declared {declared} but `{op}` gives {got}"),
            IrError::ReturnsUndefined { function } => {
                write!(f, "{function}: returns an undefined value")
            }
            IrError::NoRule { at, rule } => write!(f, "{at}: there is no rule {rule}"),
            IrError::RuleDoesNotFit { at, rule, which } => write!(
                f,
                "{at}: the {which} rule of `{rule}` does not fit its operands"
            ),
            IrError::NoLoop { at, l } => write!(f, "{at}: there is no loop {l}"),
            IrError::NoLoopVjp { at, l } => write!(f, "{at}: loop {l} has no VJP"),
            IrError::Captures { at, l, want, got } => {
                let list = |ts: &[Type]| {
                    let v: Vec<String> = ts.iter().map(ToString::to_string).collect();
                    format!("({})", v.join(", "))
                };
                write!(
                    f,
                    "{at}: loop {l} captures {}, not {}",
                    list(want),
                    list(got)
                )
            }
            IrError::SeqCotangents { at, l, want, got } => write!(
                f,
                "{at}: the cotangents of loop {l}'s states and rows are {}, not {got}",
                want.as_ref().map_or("unknown".to_string(), |t| t.to_string())
            ),
            IrError::ScanMismatch { at, op, l, reads } => write!(
                f,
                "{at}: `{op}` of loop {l}, which {} a sequence",
                if *reads { "reads" } else { "does not read" }
            ),
            IrError::Sequence { at, l, want, got } => write!(
                f,
                "{at}: loop {l} reads a sequence {want}, not {}",
                got.as_ref().map_or("nothing".to_string(), |t| t.to_string())
            ),
            IrError::State { at, l, want, got } => {
                write!(f, "{at}: loop {l} has state {want}, not {got}")
            }
            IrError::TapeRows {
                at,
                l,
                k,
                want,
                tape,
            } => write!(
                f,
                "{at}: a tape of loop {l} keeping every {k}-th state has {want} rows, not {tape}"
            ),
            IrError::InlineUseBeforeDef { function } => {
                write!(f, "inlining `{function}`: use before definition")
            }
            IrError::ResidualNotInput { name } => write!(f, "residual %{name} is not an input"),
            IrError::ReturnsNothing => {
                f.write_str("the value-and-gradient program returns nothing")
            }
            IrError::NeitherComputedNorPassed { var } => {
                write!(f, "%{var} is neither computed nor passed in")
            }
            IrError::PullbackReadsNonResidual => f.write_str("pullback reads a non-residual"),
            IrError::GradientNotComputed => f.write_str("gradient not computed"),
            IrError::Op(e) => write!(f, "{e}"),
        }
    }
}

impl From<OpTypeError> for IrError {
    fn from(e: OpTypeError) -> IrError {
        IrError::Op(e)
    }
}

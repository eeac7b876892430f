//! Why a type rule ([`Op::result_type`](super::Op::result_type)) or a
//! builder helper that takes typed values apart refused its operands.
//!
//! The error keeps the facts (the op, the operand, the types, what was
//! wanted); its [`Display`](fmt::Display) is the one-line message shown to
//! the user (golden tests compare it, so its wording is fixed).

use super::kernels::ShapeError;
use crate::types::Type;
use std::fmt;

/// A type rule failed: the variant says what was expected, the message
/// ([`fmt::Display`]) names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpTypeError {
    /// The op has another number of operands than it takes.
    Arity {
        /// The op's name.
        op: &'static str,
        /// How many operands it takes.
        takes: usize,
        /// How many it has.
        got: usize,
    },
    /// The op's type comes from its annotation, and it has none.
    NoResultType {
        /// The op's name.
        op: &'static str,
    },
    /// One operand does not have the type the op needs (whatever the
    /// others are).
    Operand {
        /// The op's name.
        op: &'static str,
        /// Which operand (from 0).
        index: usize,
        /// Its type.
        got: Type,
        /// What the op needs of it.
        need: OperandNeed,
    },
    /// The operands together do not fit the op (they disagree, or one of
    /// them does not fit the others).
    Operands {
        /// The op's name.
        op: &'static str,
        /// The operands' types, in order.
        got: Vec<Type>,
        /// What the op needs of them.
        need: OperandsNeed,
    },
    /// `matmul` of matrices whose inner axes (the first one's columns, the
    /// second one's rows) differ.
    InnerAxes {
        /// The first operand (`[M, K]`).
        a: Type,
        /// The second operand (`[K, N]`).
        b: Type,
    },
    /// The operands do not fit the result type the op is annotated with.
    OperandsFor {
        /// The op's name.
        op: &'static str,
        /// The annotated result type.
        result: Type,
        /// The operands' types, in order.
        got: Vec<Type>,
        /// What the op needs of them for that result.
        need: ResultNeed,
    },
    /// The annotated result type is not the one the op gives.
    WrongResult {
        /// The op's name.
        op: &'static str,
        /// What the op gives.
        gives: Gives,
        /// The annotated result type.
        got: Type,
    },
    /// A native kernel's shape rule (or egrad's checks around it) refused
    /// the call's operands.
    Kernel {
        /// The kernel's id in the registry.
        id: u32,
        /// Why, as the shape rule says.
        error: ShapeError,
    },
    /// A value does not have the part a builder helper takes from (or
    /// makes of) it: rows, columns, parts of rows, a size.
    Parts {
        /// Which part.
        part: Part,
        /// The value's type.
        of: Type,
    },
    /// The rows of two values, put side by side, are not matrices of known
    /// widths.
    ConcatColumns {
        /// The left value's type.
        a: Type,
        /// The right value's type.
        b: Type,
    },
    /// The cotangent of a loop's sequence, for a loop that is not a scan.
    NotAScan,
    /// Packing rows of no values at all.
    PackNothing,
}

/// What an op needs of one operand ([`OpTypeError::Operand`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperandNeed {
    /// Not a bool (only conversions and moves take bool operands).
    NotBool,
    /// A floating-point dtype (not `i64`).
    Float,
    /// The `i64` dtype.
    I64,
    /// An array, not a scalar (a reduction, a row, a row's tail).
    Array,
    /// A matrix (rank 2).
    Matrix,
    /// An array of rank 1 or more (said so).
    RankOneOrMore,
    /// An array with this axis (`dim k`: rank above `k`).
    Axis(u64),
}

/// What an op needs of its operands together ([`OpTypeError::Operands`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperandsNeed {
    /// Operands of one type.
    OneType,
    /// A mask and two operands, all of one type (`select`).
    MaskAndOneType,
    /// Four `i64` operands of one shape (`threefry`).
    FourI64OneShape,
    /// Matrices `[M, K]` and `[K, N]` (`matmul`).
    Matrices,
    /// Operands of one element type (`matmul`).
    OneElementType,
    /// An array and `i64` indices (`gather`).
    ArrayAndIndices,
    /// A tape of states and the cotangent of one state (or of the tape,
    /// flag 4), with `k > 0` and flags below 8 (`loopvjp`).
    TapeAndCotangent {
        /// The tape's stride `k`.
        k: u32,
        /// The op's flags.
        flags: u32,
    },
}

/// What an op needs of its operands for its annotated result type
/// ([`OpTypeError::OperandsFor`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultNeed {
    /// A scalar of the result's dtype (`bcast`).
    Scalar,
    /// An array of the same rows (`slice`, `pad`): dtype, rank and all
    /// but the leading axis.
    SameRows,
    /// One row of the result (`unindex`, `repeat`).
    Row,
    /// A vector of the result's leading length (`spread`).
    LeadingVector,
    /// An array of as many elements (`reshape`).
    AsManyElements,
    /// `i64` indices and one row of the result per index (`scatter`).
    IndicesAndRows,
}

/// What an op gives, which its annotated result type is not
/// ([`OpTypeError::WrongResult`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gives {
    /// An `i64` vector (`iota`).
    I64Vector,
    /// The type a native kernel's shape rule gives.
    Kernel {
        /// The kernel's id in the registry.
        id: u32,
        /// The rule's type.
        ty: Type,
    },
    /// Rows of the loop's state, keeping every `k`-th (`looptape`; also
    /// refused for `k = 0`).
    StateRows {
        /// The state's type.
        state: Type,
        /// The stride `k`.
        k: u32,
    },
    /// Rows of the state's and the row's cotangents (`loopvjp` with the
    /// sequence's cotangent).
    CotangentRows,
}

/// The part of a value a builder helper takes ([`OpTypeError::Parts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The rows of a tape of a loop's states.
    TapeOfStates,
    /// The size (element count) of each row.
    RowSize,
    /// The parts of each row (a `T[R, K, s...]` with a literal `K`).
    RowParts,
    /// The parts of all rows together (`R·K` of them).
    Parts,
    /// The columns of a matrix.
    Columns,
    /// The two leading axes.
    LeadingAxes,
    /// The rows of the two leading axes together.
    Rows,
    /// The size (element count) of the whole value.
    Size,
    /// The states of a stack of sequences, one after another.
    States,
}

impl OpTypeError {
    /// The kernel's shape error, for kernel `id`.
    pub fn kernel(id: u32, error: ShapeError) -> OpTypeError {
        OpTypeError::Kernel { id, error }
    }

    /// A value without `part`.
    pub fn parts(part: Part, of: &Type) -> OpTypeError {
        OpTypeError::Parts {
            part,
            of: of.clone(),
        }
    }
}

/// `a`, `a and b`, `a, b and c`, ...
fn write_list(f: &mut fmt::Formatter<'_>, tys: &[Type]) -> fmt::Result {
    for (i, t) in tys.iter().enumerate() {
        if i > 0 {
            f.write_str(if i + 1 == tys.len() { " and " } else { ", " })?;
        }
        write!(f, "{t}")?;
    }
    Ok(())
}

impl fmt::Display for OpTypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpTypeError::Arity { op, takes, got } => {
                write!(f, "`{op}` takes {takes} operand(s), got {got}")
            }
            OpTypeError::NoResultType { op } => write!(f, "`{op}` needs a result type"),
            OpTypeError::Operand { op, got, need, .. } => match need {
                OperandNeed::NotBool => write!(f, "`{op}` does not take bool operands, got {got}"),
                OperandNeed::Float => {
                    write!(f, "`{op}` needs floating-point operands, got {got}")
                }
                OperandNeed::I64 => write!(f, "`{op}` needs i64 operands, got {got}"),
                OperandNeed::Array => write!(f, "`{op}` needs an array operand"),
                OperandNeed::Matrix => write!(f, "`{op}` needs a matrix, got {got}"),
                OperandNeed::RankOneOrMore => {
                    write!(f, "`{op}` needs an array (rank 1 or more), got {got}")
                }
                OperandNeed::Axis(k) => {
                    write!(f, "`{op}` needs an array with an axis {k}, got {got}")
                }
            },
            OpTypeError::Operands { op, got, need } => {
                write!(f, "`{op}` needs ")?;
                match need {
                    OperandsNeed::OneType => f.write_str("operands of one type, got ")?,
                    OperandsNeed::MaskAndOneType => {
                        f.write_str("a mask and two operands of one type, got ")?
                    }
                    OperandsNeed::FourI64OneShape => {
                        f.write_str("four i64 operands of one shape, got ")?
                    }
                    OperandsNeed::Matrices => f.write_str("matrices [M, K] and [K, N], got ")?,
                    OperandsNeed::OneElementType => {
                        f.write_str("operands of one element type, got ")?
                    }
                    OperandsNeed::ArrayAndIndices => {
                        f.write_str("an array and i64 indices, got ")?
                    }
                    OperandsNeed::TapeAndCotangent { .. } => f.write_str(
                        "a tape of states, the cotangent of one state (or of the tape, flag 4), k > 0 and flags below 8; got ",
                    )?,
                }
                write_list(f, got)
            }
            OpTypeError::InnerAxes { a, b } => {
                let axis = |t: &Type, i: usize| {
                    t.shape.get(i).map_or_else(|| "?".to_string(), |d| d.to_string())
                };
                write!(
                    f,
                    "`matmul` of {a} and {b}: the inner axes differ: the first operand's axis 1 (its columns) has length {}, the second's axis 0 (its rows) has length {}; they must be equal ([M, K] times [K, N])",
                    axis(a, 1),
                    axis(b, 0)
                )
            }
            OpTypeError::OperandsFor {
                op,
                result: t,
                got,
                need,
            } => {
                write!(f, "`{op}` to {t} needs ")?;
                match need {
                    ResultNeed::Scalar => write!(f, "a {} scalar", t.dtype)?,
                    ResultNeed::SameRows => f.write_str("an array of the same rows")?,
                    ResultNeed::Row => {
                        let row = Type::array(t.dtype, t.shape.get(1..).unwrap_or(&[]).to_vec());
                        write!(f, "a {row} row")?
                    }
                    ResultNeed::LeadingVector => {
                        f.write_str("a vector of its leading length")?
                    }
                    ResultNeed::AsManyElements => {
                        f.write_str("an array of as many elements")?
                    }
                    ResultNeed::IndicesAndRows => {
                        f.write_str("i64 indices and one row of it per index")?
                    }
                }
                f.write_str(", got ")?;
                write_list(f, got)
            }
            OpTypeError::WrongResult { op, gives, got } => match gives {
                Gives::I64Vector => write!(f, "`{op}` gives an i64 vector, not {got}"),
                Gives::Kernel { id, ty } => write!(f, "`{op} {id}` gives {ty}, not {got}"),
                Gives::StateRows { state, .. } => write!(
                    f,
                    "`{op}` of a state {state} gives rows of that state (keeping every k-th, k > 0), not {got}"
                ),
                Gives::CotangentRows => write!(
                    f,
                    "`{op}` with the sequence's cotangent gives rows of the state's and the row's cotangents, not {got}"
                ),
            },
            OpTypeError::Kernel { error, .. } => write!(f, "{error}"),
            OpTypeError::Parts { part, of } => match part {
                Part::TapeOfStates => write!(f, "a tape of states, not {of}"),
                Part::RowSize => write!(f, "the rows of {of} have no size"),
                Part::RowParts => write!(f, "parts of the rows of {of}"),
                Part::Parts => write!(f, "parts of {of}"),
                Part::Columns => write!(f, "columns of {of}"),
                Part::LeadingAxes => write!(f, "the leading axes of {of}"),
                Part::Rows => write!(f, "the rows of {of}"),
                Part::Size => write!(f, "the size of {of}"),
                Part::States => write!(f, "the states of {of}"),
            },
            OpTypeError::ConcatColumns { a, b } => write!(f, "the columns of {a} and {b}"),
            OpTypeError::NotAScan => f.write_str("the sequence of a loop that is not a scan"),
            OpTypeError::PackNothing => f.write_str("packing no values"),
        }
    }
}

impl std::error::Error for OpTypeError {}

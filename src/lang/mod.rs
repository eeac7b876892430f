//! The front end: lexer, parser, name resolution and type checking, and
//! the lowering of checked functions to IR ([`crate::ir`]).

pub mod ast;
pub mod check;
pub mod lexer;
pub mod parser;
pub mod prelude;
pub mod suggest;

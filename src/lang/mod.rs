//! The front end and the IR: lexer, parser, name resolution and type
//! checking, the typed SSA/ANF IR and the reference interpreter.

pub mod ast;
pub mod check;
pub mod interp;
pub mod ir;
pub mod lexer;
pub mod memory;
pub mod parser;
pub mod prelude;
mod rows;
pub mod size;
pub mod transform;
pub mod types;
pub mod value;

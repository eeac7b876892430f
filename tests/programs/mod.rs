//! The generator of random programs, shared by `tests/random_programs.rs`
//! (which documents what it writes, and checks every program's values and
//! derivatives) and the fuzzer, `tests/fuzz.rs`.
//!
//! It has two flavours. `generate(seed)` writes tame programs: well typed,
//! every value bounded and every math function kept in its domain, so that
//! their derivatives can be checked against finite differences; each seed
//! gives the same program it always gave. `generate_wild(seed)` writes the
//! same grammar for the fuzzer, with odd corners on purpose (see
//! `wild.rs`): now and then an expression of the wrong type, a math
//! function outside its domain, a value that grows without bound, an odd
//! literal, or a derivative rule of the wrong type or arity, not linear or
//! missing; and it never runs egrad while it writes (the tame flavour
//! lowers a program to choose loop counts and to leave out derivatives
//! egrad refuses), so that a crash of egrad happens in the fuzzer's child
//! process, where it is caught and minimized.

// Each test crate uses part of it (the fuzzer not the tame counts, the
// random programs not the wild flavour).
#![allow(dead_code)]

#[path = "base.rs"]
mod base;
#[path = "gen_1.rs"]
mod gen_1;
#[path = "gen_2.rs"]
mod gen_2;
#[path = "gen_3.rs"]
mod gen_3;
#[path = "gen_4.rs"]
mod gen_4;
#[path = "gen_5.rs"]
mod gen_5;
#[path = "gen_6.rs"]
mod gen_6;
#[path = "gen_7.rs"]
mod gen_7;
#[path = "generate_1.rs"]
mod generate_1;
#[path = "generate_2.rs"]
mod generate_2;
#[path = "generate_3.rs"]
mod generate_3;
#[path = "generate_4.rs"]
mod generate_4;
#[path = "wild.rs"]
mod wild;

#[allow(unused_imports)]
pub(crate) use {
    base::*, gen_1::*, gen_2::*, gen_3::*, gen_4::*, gen_5::*, gen_6::*, gen_7::*, generate_1::*,
    generate_2::*, generate_3::*, generate_4::*, wild::*,
};

#[allow(unused_imports)]
use crate::common::env_u64;
#[allow(unused_imports)]
use crate::common::rng::Rng;
#[allow(unused_imports)]
use egrad::internals::ir::Function;
#[allow(unused_imports)]
use egrad::internals::lang::check::UNROLL_STMTS;
#[allow(unused_imports)]
use egrad::internals::ops::{Math, Op};
#[allow(unused_imports)]
use egrad::internals::types::Dim;
#[allow(unused_imports)]
use egrad::{ErrorKind, Program};
#[allow(unused_imports)]
use std::collections::HashSet;
#[allow(unused_imports)]
use std::fmt::Write as _;

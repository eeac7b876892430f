//! The work limit: how many element operations one run (of the interpreter
//! or of native code) may take before egrad refuses it, with the count it
//! would take, instead of running for hours or years. The memory limit
//! ([`super::memory`]) bounds what a run allocates; this bounds what it
//! computes where it allocates nothing: a reduction over a `tabulate` of
//! 2^62 elements is fused into one loop, holds no array, and would run
//! for a century.
//!
//! A run's work is counted before it starts, from its sizes: each
//! statement computed in a loop of its own counts one operation per
//! element of its result (per element of its operand for a reduction, per
//! multiply-add for a matrix product), and a loop statement counts its
//! steps times the work of a step (one step for an `iterate_until`, which
//! may stop at its first). It is a lower bound: a transcendental
//! function counts 1, and a value computed inside its consumer's loop
//! counts nothing of its own. So the limit refuses only runs that surely
//! take at least that long.
//!
//! The default, [`DEFAULT_LIMIT`], is 10^13 operations: hours of one core
//! at one operation a nanosecond. It is process-wide, like the memory
//! limit: [`set_limit`] changes it (the CLI's `--work-limit`).

use super::interp::Dims;
use super::{Function, Loop, Stmt};
use crate::ops::{CostBasis, Op};
use crate::types::Dim;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// The default limit: 10^13 element operations.
pub const DEFAULT_LIMIT: u64 = 10_000_000_000_000;

/// The limit in operations; 0 until set.
static LIMIT: AtomicU64 = AtomicU64::new(0);

/// The limit in element operations.
pub fn limit() -> u64 {
    match LIMIT.load(Ordering::Relaxed) {
        0 => DEFAULT_LIMIT,
        n => n,
    }
}

/// Set the limit (element operations, at least 1).
pub fn set_limit(ops: u64) {
    LIMIT.store(ops.max(1), Ordering::Relaxed);
}

/// Refuse `ops` operations beyond the limit: the message names `what`
/// runs, the count and, for the largest part of it, the value it computes
/// (`largest`).
pub fn check(ops: f64, what: &str, largest: Option<&str>) -> Result<(), String> {
    let limit = limit();
    if ops <= limit as f64 {
        return Ok(());
    }
    // A name the program gave (not a number the compiler made).
    let most = largest
        .filter(|v| !v.starts_with(|c: char| c.is_ascii_digit()))
        .map_or(String::new(), |v| format!(", most of them for `{v}`"));
    Err(format!(
        "{what} would take about {} element operations{most}, more than the work limit of {} \
         (--work-limit; default 10^13)",
        describe(ops),
        describe(limit as f64)
    ))
}

/// A count as a person reads it: `4.6e18`, or the digits below a million.
fn describe(n: f64) -> String {
    if n < 1e6 {
        format!("{n:.0}")
    } else {
        format!("{n:.1e}")
    }
}

/// A run's work as a polynomial in its sizes: a sum of terms, each a
/// number of operations per product of sizes. Terms over the same sizes
/// are one term, so a function's work takes as many terms as it has
/// distinct shapes (and loop counts over them), however long it is.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Work {
    /// Sizes (sorted) -> (operations per product of them, a value that
    /// counts toward the term, for the message).
    terms: BTreeMap<Vec<Dim>, (f64, String)>,
}

impl Work {
    /// Count `per` operations for each element of `sizes`.
    fn add(&mut self, mut sizes: Vec<Dim>, per: f64, name: &str) {
        sizes.sort();
        let t = self
            .terms
            .entry(sizes)
            .or_insert_with(|| (0.0, name.to_string()));
        t.0 += per;
    }

    /// Count the steps of loop `l` (its `count`; one for a loop that may
    /// settle sooner, an `iterate_until`, whose count is only a bound)
    /// times the work of a `step`, for the loop statement `name`.
    pub(crate) fn add_steps(&mut self, l: &Loop, step: &Work, name: &str) {
        let count = if l.settles { &Dim::Lit(1) } else { &l.count };
        for (sizes, (per, _)) in &step.terms {
            let mut s = sizes.clone();
            s.push(count.clone());
            self.add(s, *per, name);
        }
        // A step of no counted work still costs its loop's turn.
        self.add(vec![count.clone()], 1.0, name);
    }

    /// Count statement `s` of `f`, computed in a loop of its own (not a
    /// loop statement): one operation per element of its result, of its
    /// operand for a reduction, per multiply-add for a matrix product.
    pub(crate) fn add_stmt(&mut self, f: &Function, s: &Stmt) {
        let shape = |k: usize| s.args.get(k).map(|a| f.ty(*a).shape.clone());
        let sizes = match s.op.cost_basis() {
            CostBasis::ResultElement => None,
            CostBasis::OperandElement => shape(0),
            // `[M, K] x [K, N]`: M·N·K.
            CostBasis::MultiplyAdd => shape(0).zip(shape(1)).map(|(mut a, b)| {
                a.extend(b.get(1).cloned());
                a
            }),
        };
        let sizes = sizes.unwrap_or_else(|| f.ty(s.var).shape.clone());
        self.add(sizes, 1.0, f.var_name(s.var));
    }

    /// The work of interpreting `f`: every live statement in a loop of its
    /// own (the interpreter fuses nothing), every loop its steps.
    pub fn interpreted(f: &Function) -> Work {
        let mut w = Work::default();
        let live = f.live();
        for s in f.stmts.iter().filter(|s| live[s.var.index()]) {
            match s.op.loop_id().and_then(|l| f.loops.get(l)) {
                Some(l) => {
                    let mut step = Work::interpreted(&l.body);
                    if let (Op::LoopVjp(..), Some(vjp)) = (s.op, &l.vjp) {
                        step.merge(&Work::interpreted(vjp));
                    }
                    w.add_steps(l, &step, f.var_name(s.var));
                }
                None => w.add_stmt(f, s),
            }
        }
        w
    }

    /// Add every term of `other`.
    pub(crate) fn merge(&mut self, other: &Work) {
        for (sizes, (per, name)) in &other.terms {
            self.add(sizes.clone(), *per, name);
        }
    }

    /// The operations under `dims` (f64: it saturates to infinity rather
    /// than overflowing), and the value of the largest term.
    pub fn at(&self, dims: &Dims) -> (f64, Option<&str>) {
        let mut total = 0.0;
        let mut largest: Option<(f64, &str)> = None;
        for (sizes, (per, name)) in &self.terms {
            let n = sizes.iter().fold(*per, |n, d| {
                n * d.extent(&|p| dims.get(p).copied()).unwrap_or(0) as f64
            });
            total += n;
            if largest.is_none_or(|(m, _)| n > m) {
                largest = Some((n, name));
            }
        }
        (total, largest.map(|(_, name)| name))
    }

    /// [`check`] this work under `dims`, for running `what()` (made only
    /// when the check fails: this runs before every call).
    pub fn check(&self, dims: &Dims, what: impl FnOnce() -> String) -> Result<(), String> {
        let (ops, largest) = self.at(dims);
        if ops <= limit() as f64 {
            return Ok(());
        }
        check(ops, &what(), largest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(n: u64) -> Dims {
        [("N".to_string(), n)].into_iter().collect()
    }

    #[test]
    fn work_is_one_term_per_shape_and_counts_loop_steps() {
        let text = "fn f[N](%x: f64[N]) -> f64 {\n  %a: f64[N] = sin %x\n  %b: f64[N] = mul %a %x\n  %s: f64 = sum %b\n  ret %s\n}\n";
        let f = crate::ir::parse_functions(text).unwrap().remove(0);
        let w = Work::interpreted(&f);
        // `a` and `b` per element, `sum` per operand element.
        assert_eq!(w.terms.len(), 1);
        assert_eq!(w.at(&dims(1000)).0, 3000.0);
        assert!(w.check(&dims(1000), || "`f`".into()).is_ok());
        let err = w
            .check(&dims(1 << 62), || "running `f`".into())
            .unwrap_err();
        assert!(err.contains("1.4e19 element operations"), "{err}");
        assert!(err.contains("--work-limit"), "{err}");
    }
}

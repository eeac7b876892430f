//! The typed SSA/ANF intermediate representation.
//!
//! A [`Function`] is a straight-line list of statements, each binding one new
//! variable to one op applied to earlier variables. Calls are inlined when the
//! front end lowers to IR, so every function is self-contained.
//!
//! The text form is stable and parses back ([`parse_functions`]):
//!
//! ```text
//! fn loss[N](%w: f32[N], %x: f32[N], %y: f32) -> f32 {
//!   %0: f32[N] = mul %w %x
//!   %pred: f32 = sum %0
//!   %err: f32 = sub %pred %y
//!   %1: f32 = mul %err %err
//!   ret %1
//! }
//! ```
//!
//! The room also holds what runs and prices an IR function without the
//! front end: argument binding and the reference interpreter ([`interp`]),
//! the memory limit ([`memory`]), the one reachability walk and dead-code
//! removal ([`needed`]), sharing common subexpressions
//! ([`share_common`]), the packing of rows (`rows`) and what the checker
//! asks of differentiation ([`transform`]).

mod builder;
mod error;
pub mod interp;
pub mod memory;
pub mod needed;
pub(crate) mod rows;
mod share;
mod text;
pub mod transform;
pub mod work;

pub use builder::{Builder, Origin};
pub use error::{At, IrError};
pub use share::share_common;
pub use text::{parse_functions, IrParseError};

use crate::error::span::Span;
use crate::ops::{Lit, Op};
use crate::types::{DType, Dim, Type};
use indexmap::IndexMap;
use smallvec::SmallVec;
use std::collections::HashSet;

/// A variable of one function (an index into [`Function::vars`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VarId(pub u32);

impl VarId {
    /// The variable's position in [`Function::vars`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A variable's name and type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VarInfo {
    /// Unique within the function; printed as `%name`.
    pub name: String,
    /// Its type.
    pub ty: Type,
}

/// A parameter of a function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// The variable that holds it.
    pub var: VarId,
    /// Where the parameter is declared (for run-time argument errors).
    pub span: Span,
}

/// One statement: `%var: T = op %args...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stmt {
    /// The variable it defines.
    pub var: VarId,
    /// The operation.
    pub op: Op,
    /// The operands, in order.
    pub args: SmallVec<[VarId; 2]>,
}

impl Stmt {
    /// The operands its value is computed from: all of them, but for a
    /// `custom` statement, whose value is its first operand (the others,
    /// the arguments of the call, are there for its derivative rules).
    pub fn value_operands(&self) -> &[VarId] {
        match self.op {
            Op::Custom(..) => &self.args[..1],
            _ => &self.args[..],
        }
    }
}

/// A function in egrad's typed SSA IR: straight-line statements over
/// whole arrays, plus the counted loops its loop statements run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// Its name.
    pub name: String,
    /// The size parameters (`N` in `f[N]`), bound from argument shapes.
    pub size_params: Vec<String>,
    /// The parameters, in call order.
    pub params: Vec<Param>,
    /// Every variable, indexed by `VarId`.
    pub vars: Vec<VarInfo>,
    /// The statements, in order (each defines one variable).
    pub stmts: Vec<Stmt>,
    /// The results, in order.
    pub rets: Vec<VarId>,
    /// The loops its `loop`, `looptape` and `loopvjp` statements run, by
    /// number.
    pub loops: Vec<Loop>,
    /// The derivative rules its `custom` statements use, by number.
    pub rules: Vec<CustomRule>,
}

/// The derivative rules of a function that brings its own
/// (`@custom_vjp`, `@custom_jvp`), at the sizes of one call: what a
/// `custom R n y x1 .. xn` statement is differentiated with. Its
/// differentiable arguments are the floating-point ones among `x1 .. xn`,
/// in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CustomRule {
    /// The function's name, for messages.
    pub name: String,
    /// `(x1 .. xn, cotangent of the result) -> cotangent of each
    /// differentiable argument`.
    pub vjp: Option<Function>,
    /// `(x1 .. xn, tangent of each differentiable argument) -> tangent of
    /// the result` (linear in the tangents).
    pub jvp: Option<Function>,
}

/// A counted loop: `body` applied `count` times to a state. The state is
/// one array (the front end packs a loop's state variables into it, and
/// the values the step reads from outside where they have the state's
/// shape), so a loop has one result, and its derivative one cotangent in
/// and one out. The values the step reads from outside that the state does
/// not carry are its *captures*: loop invariants, operands of the loop
/// statement after the state (and a scan's sequence), read in place by
/// every step, never taped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loop {
    /// The number of steps: a literal, or a size parameter of the function
    /// (a run-time count, given by an `i64` argument).
    pub count: Dim,
    /// `(state) -> next state`, over the enclosing function's size
    /// parameters.
    pub body: Function,
    /// `(state, cotangent of the next state) -> cotangent of the state`:
    /// the body's VJP, made when the loop is differentiated (`loopvjp`
    /// needs it).
    pub vjp: Option<Function>,
    /// The loop of an `iterate_until`: its body leaves a state unchanged
    /// once the stop condition holds, so running may stop at the first
    /// step that changes nothing (bit for bit; exact for any loop that is
    /// not a scan, whose body is deterministic), and its tape is then
    /// filled with that state. Only whether the check is paid for.
    pub settles: bool,
    /// How many captures the body reads: its last parameters, after the
    /// state (and a scan's row). A loop with captures has no `vjp`:
    /// reverse mode walks it back with a loop of its own.
    pub captures: usize,
}

impl Loop {
    /// The state's type.
    pub fn state(&self) -> &Type {
        self.body.ty(self.body.params[0].var)
    }

    /// For a scan loop, the type of the row of the sequence the body reads
    /// (its second parameter): the sequence is `T[count, row...]`.
    pub fn row(&self) -> Option<&Type> {
        if !self.is_scan() {
            return None;
        }
        self.body.params.get(1).map(|p| self.body.ty(p.var))
    }

    /// Whether the body reads a sequence (`scan`, `scantape`, `scanvjp`).
    pub fn is_scan(&self) -> bool {
        self.body.params.len() == 2 + self.captures
    }

    /// The types of the captures (the body's last parameters).
    pub fn capture_types(&self) -> Vec<Type> {
        let first = self.body.params.len().saturating_sub(self.captures);
        self.body.params[first..]
            .iter()
            .map(|p| self.body.ty(p.var).clone())
            .collect()
    }

    /// The type of the sequence a scan loop reads.
    pub fn sequence(&self) -> Option<Type> {
        self.row().map(|r| {
            let mut shape = vec![self.count.clone()];
            shape.extend(r.shape.iter().cloned());
            Type::array(r.dtype, shape)
        })
    }

    /// The result of `loopvjp` with [`crate::ops::VJP_SEQ`] for this loop:
    /// `T[count + 1, wx + ws]`, each row the cotangent of a row of the
    /// sequence (none, `wx = 0`, for a loop that is not a scan) and of a
    /// state, flattened (None for sizes without an expression).
    pub fn seq_cotangent_type(&self) -> Option<Type> {
        let st = self.state();
        let ws = Dim::product(&st.shape)?;
        let w = match self.row() {
            Some(row) => Dim::product(&row.shape)?.plus(&ws)?,
            None => ws,
        };
        Some(Type::array(st.dtype, vec![self.tape_rows(1), w]))
    }

    /// Rows of a `looptape` keeping every `k`-th state: the final state
    /// and `⌈count/k⌉` checkpoints.
    pub fn tape_rows(&self, k: u64) -> Dim {
        let k = k.max(1);
        match &self.count {
            Dim::Lit(n) => Dim::Lit(n.div_ceil(k) + 1),
            Dim::Param(p) | Dim::Sub(p, _) | Dim::Rows(p, _) => Dim::Rows(p.clone(), k),
            // Never a count (`validate`: a literal or a size parameter).
            Dim::Expr(s) => Dim::Rows(
                s.params()
                    .first()
                    .map_or_else(String::new, |p| p.to_string()),
                k,
            ),
        }
    }

    /// The count as a number, when it is a literal.
    pub fn static_count(&self) -> Option<u64> {
        match self.count {
            Dim::Lit(n) => Some(n),
            _ => None,
        }
    }

    fn validate(&self, outer: &Function) -> Result<(), IrError> {
        let b = &self.body;
        let bad = |why: &'static str| {
            Err(IrError::LoopBody {
                function: outer.name.clone(),
                body: b.name.clone(),
                why,
            })
        };
        b.validate()?;
        let c = self.captures;
        if !(1 + c..=2 + c).contains(&b.params.len()) || b.rets.len() != 1 {
            return bad(
                "a body takes one state (and, in a scan, a row of its sequence, then its captures) and returns one",
            );
        }
        if c > 0 && self.vjp.is_some() {
            return bad("a loop with captures has no VJP");
        }
        if b.ty(b.rets[0]) != self.state() {
            return bad("the next state must have the state's type");
        }
        if b.size_params != outer.size_params {
            return bad("a body has its function's size parameters");
        }
        match &self.count {
            Dim::Lit(_) => {}
            Dim::Param(p) if outer.size_params.contains(p) => {}
            other => {
                return Err(IrError::LoopCount {
                    function: outer.name.clone(),
                    body: b.name.clone(),
                    count: other.clone(),
                })
            }
        }
        if let Some(v) = &self.vjp {
            v.validate()?;
            let st = self.state();
            let want: Vec<Type> = match self.row() {
                Some(r) => vec![st.clone(), r.clone(), st.clone()],
                None => vec![st.clone(), st.clone()],
            };
            // A scan's VJP may also give the row's cotangent, packed with
            // the state's (`loopvjp` with `VJP_SEQ`).
            let packed = self
                .seq_cotangent_type()
                .map(|t| Type::array(t.dtype, t.shape[1..].to_vec()));
            let ret_fits = v.rets.len() == 1
                && (v.ty(v.rets[0]) == st || Some(v.ty(v.rets[0])) == packed.as_ref());
            if !ret_fits || v.param_types() != want {
                return bad("its VJP must map (state, [row,] cotangent) to a cotangent (for a scan, or to the row's and the state's cotangents, packed)");
            }
        }
        Ok(())
    }
}

impl Function {
    /// The type of variable `v`.
    pub fn ty(&self, v: VarId) -> &Type {
        &self.vars[v.index()].ty
    }

    /// The name of variable `v` (without the `%`).
    pub fn var_name(&self, v: VarId) -> &str {
        &self.vars[v.index()].name
    }

    /// The parameters' types, in order.
    pub fn param_types(&self) -> Vec<Type> {
        self.params.iter().map(|p| self.ty(p.var).clone()).collect()
    }

    /// The results' types, in order.
    pub fn ret_types(&self) -> Vec<Type> {
        self.rets.iter().map(|r| self.ty(*r).clone()).collect()
    }

    /// The statement defining each variable (None for parameters).
    pub fn definitions(&self) -> Vec<Option<usize>> {
        let mut def = vec![None; self.vars.len()];
        for (i, s) in self.stmts.iter().enumerate() {
            def[s.var.index()] = Some(i);
        }
        def
    }

    /// How many times each variable is used as an operand or returned.
    pub fn use_counts(&self) -> Vec<usize> {
        let mut n = vec![0; self.vars.len()];
        for s in &self.stmts {
            for a in &s.args {
                n[a.index()] += 1;
            }
        }
        for r in &self.rets {
            n[r.index()] += 1;
        }
        n
    }

    /// Which variables a result depends on: the returned ones and the
    /// operands of the statements defining them, transitively. A
    /// statement whose variable is not live is never run, by the
    /// interpreter or by native code, so what it would compute (an index
    /// out of range included) has no effect, as in the optimized program,
    /// which does not hold it. The arguments of a `custom` statement's call
    /// are live only where something else reads them
    /// (`Stmt::value_operands`), as in [`Function::without_customs`],
    /// which native code runs.
    pub fn live(&self) -> Vec<bool> {
        let mut live = vec![false; self.vars.len()];
        for r in &self.rets {
            live[r.index()] = true;
        }
        for s in self.stmts.iter().rev() {
            if live[s.var.index()] {
                for a in s.value_operands() {
                    live[a.index()] = true;
                }
            }
        }
        live
    }

    /// Where statement `s` is, for an [`IrError`].
    fn at(&self, s: &Stmt) -> Box<At> {
        Box::new(At {
            function: self.name.clone(),
            var: self.var_name(s.var).to_string(),
        })
    }

    /// Check SSA form, names, every statement's type rule and every loop.
    pub fn validate(&self) -> Result<(), IrError> {
        for l in &self.loops {
            l.validate(self)?;
        }
        let mut defined = vec![false; self.vars.len()];
        let mut names = HashSet::new();
        for v in &self.vars {
            if !names.insert(v.name.as_str()) {
                return Err(IrError::DuplicateName {
                    function: self.name.clone(),
                    name: v.name.clone(),
                });
            }
            for d in &v.ty.shape {
                for p in d.params() {
                    if !self.size_params.iter().any(|q| q == p) {
                        return Err(IrError::UnknownSizeParam {
                            function: self.name.clone(),
                            var: v.name.clone(),
                            param: p.to_string(),
                        });
                    }
                }
            }
        }
        for p in &self.params {
            if p.var.index() >= self.vars.len() || defined[p.var.index()] {
                return Err(IrError::BadParameter {
                    function: self.name.clone(),
                });
            }
            defined[p.var.index()] = true;
        }
        for s in &self.stmts {
            for a in &s.args {
                if a.index() >= self.vars.len() || !defined[a.index()] {
                    return Err(IrError::UseBeforeDef {
                        function: self.name.clone(),
                        var: self.var_name(s.var).to_string(),
                    });
                }
            }
            if s.var.index() >= self.vars.len() || defined[s.var.index()] {
                return Err(IrError::DefinedTwice {
                    function: self.name.clone(),
                });
            }
            let arg_tys: Vec<&Type> = s.args.iter().map(|a| self.ty(*a)).collect();
            let got =
                s.op.result_type(&arg_tys, Some(self.ty(s.var)))
                    .map_err(|error| IrError::StmtType {
                        at: self.at(s),
                        error,
                    })?;
            if &got != self.ty(s.var) {
                return Err(IrError::Declared {
                    at: self.at(s),
                    declared: self.ty(s.var).clone(),
                    op: s.op.name(),
                    got,
                });
            }
            if let Some(l) = s.op.loop_id() {
                self.validate_loop_stmt(s, l)?;
            }
            if let Op::Custom(r, _) = s.op {
                self.validate_custom_stmt(s, r as usize)?;
            }
            defined[s.var.index()] = true;
        }
        for r in &self.rets {
            if r.index() >= self.vars.len() || !defined[r.index()] {
                return Err(IrError::ReturnsUndefined {
                    function: self.name.clone(),
                });
            }
        }
        Ok(())
    }

    /// A `custom` statement against its rule: the rule functions' parameters
    /// and results are the statement's operands, cotangents and tangents.
    fn validate_custom_stmt(&self, s: &Stmt, r: usize) -> Result<(), IrError> {
        let rule = self.rules.get(r).ok_or_else(|| IrError::NoRule {
            at: self.at(s),
            rule: r,
        })?;
        let xs: Vec<&Type> = s.args[1..].iter().map(|a| self.ty(*a)).collect();
        let active: Vec<&Type> = xs.iter().copied().filter(|t| !t.dtype.is_int()).collect();
        let out = self.ty(s.var);
        let types = |f: &Function, vs: &[VarId]| -> Vec<Type> {
            vs.iter().map(|v| f.ty(*v).clone()).collect()
        };
        let want = |v: &[&Type]| -> Vec<Type> { v.iter().map(|t| (*t).clone()).collect() };
        if let Some(vjp) = &rule.vjp {
            let params: Vec<VarId> = vjp.params.iter().map(|p| p.var).collect();
            let mut expect = want(&xs);
            expect.push(out.clone());
            if types(vjp, &params) != expect || types(vjp, &vjp.rets) != want(&active) {
                return Err(IrError::RuleDoesNotFit {
                    at: self.at(s),
                    rule: rule.name.clone(),
                    which: "VJP",
                });
            }
        }
        if let Some(jvp) = &rule.jvp {
            let params: Vec<VarId> = jvp.params.iter().map(|p| p.var).collect();
            let mut expect = want(&xs);
            expect.extend(want(&active));
            if types(jvp, &params) != expect || types(jvp, &jvp.rets) != vec![out.clone()] {
                return Err(IrError::RuleDoesNotFit {
                    at: self.at(s),
                    rule: rule.name.clone(),
                    which: "JVP",
                });
            }
        }
        Ok(())
    }

    /// How many of the first `n` statements [`Function::without_customs`]
    /// keeps (it drops each `custom` statement): where a statement index
    /// such as a value-and-gradient program's primal length lands there.
    pub fn len_without_customs(&self, n: usize) -> usize {
        self.stmts
            .iter()
            .take(n)
            .filter(|s| !matches!(s.op, Op::Custom(..)))
            .count()
    }

    /// The function with every `custom` statement replaced by its value
    /// (its uses read its first operand; other variables keep their
    /// numbers) and no rules: what is left to compute once it is
    /// differentiated (the e-graph and the backend take it so).
    pub fn without_customs(&self) -> Function {
        let mut f = self.clone();
        let mut alias: Vec<Option<VarId>> = vec![None; f.vars.len()];
        let resolve = |alias: &[Option<VarId>], v: VarId| alias[v.index()].unwrap_or(v);
        let mut stmts = Vec::with_capacity(f.stmts.len());
        for mut s in std::mem::take(&mut f.stmts) {
            for a in s.args.iter_mut() {
                *a = resolve(&alias, *a);
            }
            if let Op::Custom(..) = s.op {
                alias[s.var.index()] = Some(s.args[0]);
                continue;
            }
            stmts.push(s);
        }
        f.stmts = stmts;
        for r in f.rets.iter_mut() {
            *r = resolve(&alias, *r);
        }
        f.rules.clear();
        for l in &mut f.loops {
            if l.body.has_customs() {
                l.body = l.body.without_customs();
            }
            if let Some(v) = &l.vjp {
                if v.has_customs() {
                    l.vjp = Some(v.without_customs());
                }
            }
        }
        f
    }

    /// Drop the rules no `custom` statement uses (copies kept for
    /// statements that moved elsewhere, such as into a loop's body), and
    /// number the others in order of first use.
    pub fn prune_rules(&mut self) {
        let mut new_id: Vec<Option<u32>> = vec![None; self.rules.len()];
        let mut kept = Vec::new();
        for s in &mut self.stmts {
            if let Op::Custom(r, n) = s.op {
                let Some(slot) = new_id.get_mut(r as usize) else {
                    continue;
                };
                let id = *slot.get_or_insert_with(|| {
                    kept.push(r as usize);
                    (kept.len() - 1) as u32
                });
                s.op = Op::Custom(id, n);
            }
        }
        let mut old: Vec<Option<CustomRule>> = std::mem::take(&mut self.rules)
            .into_iter()
            .map(Some)
            .collect();
        self.rules = kept.iter().filter_map(|&r| old[r].take()).collect();
    }

    /// Whether it (or a loop body of it) has `custom` statements.
    pub fn has_customs(&self) -> bool {
        !self.rules.is_empty()
            || self
                .loops
                .iter()
                .any(|l| l.body.has_customs() || l.vjp.as_ref().is_some_and(Function::has_customs))
    }

    /// A loop statement against its loop: the state's type, the tape's
    /// rows, a VJP to run.
    fn validate_loop_stmt(&self, s: &Stmt, l: usize) -> Result<(), IrError> {
        let at = || self.at(s);
        let lp = self
            .loops
            .get(l)
            .ok_or_else(|| IrError::NoLoop { at: at(), l })?;
        let st = lp.state();
        let (state_arg, rows, scan) = match s.op {
            Op::Loop(_, q) => (self.ty(s.args[0]), None, q),
            Op::LoopTape(_, k, q) => (self.ty(s.args[0]), Some((self.ty(s.var), k)), q),
            Op::LoopVjp(_, k, m, q) => {
                if lp.vjp.is_none() {
                    return Err(IrError::NoLoopVjp { at: at(), l });
                }
                if m & crate::ops::VJP_SEQ != 0 {
                    let want = lp.seq_cotangent_type();
                    if want.as_ref() != Some(self.ty(s.var)) {
                        return Err(IrError::SeqCotangents {
                            at: at(),
                            l,
                            want,
                            got: self.ty(s.var).clone(),
                        });
                    }
                }
                // Seeded by the cotangent of the whole tape: of the tape's type.
                let seed = if m & crate::ops::VJP_TAPE != 0 {
                    st
                } else {
                    self.ty(s.args[1])
                };
                (seed, Some((self.ty(s.args[0]), k)), q)
            }
            _ => return Ok(()),
        };
        if scan != lp.is_scan() {
            return Err(IrError::ScanMismatch {
                at: at(),
                op: s.op.name(),
                l,
                reads: lp.is_scan(),
            });
        }
        // The fixed operands (the sequence last among them), then the
        // captures.
        let fixed = s.op.arity().min(s.args.len());
        let got: Vec<Type> = s.args[fixed..]
            .iter()
            .map(|a| self.ty(*a).clone())
            .collect();
        let want = lp.capture_types();
        if got != want {
            return Err(IrError::Captures {
                at: at(),
                l,
                want,
                got,
            });
        }
        if let (true, Some(want)) = (scan, lp.sequence()) {
            let got = s.args[..fixed].last().map(|a| self.ty(*a));
            if got != Some(&want) {
                return Err(IrError::Sequence {
                    at: at(),
                    l,
                    want,
                    got: got.cloned(),
                });
            }
        }
        if state_arg != st {
            return Err(IrError::State {
                at: at(),
                l,
                want: st.clone(),
                got: state_arg.clone(),
            });
        }
        if let Some((tape, k)) = rows {
            let want = lp.tape_rows(u64::from(k));
            if tape.shape.first() != Some(&want) {
                return Err(IrError::TapeRows {
                    at: at(),
                    l,
                    k: u64::from(k),
                    want,
                    tape: tape.clone(),
                });
            }
        }
        Ok(())
    }

    /// The same program in another precision (constants re-rounded). Used to
    /// check f32 programs' derivatives against finite differences in f64.
    pub fn with_dtype(&self, dtype: DType) -> Function {
        let mut f = self.clone();
        // Integers (and bools) stay what they are.
        for v in f.vars.iter_mut().filter(|v| !v.ty.dtype.is_int()) {
            v.ty.dtype = dtype;
        }
        for s in &mut f.stmts {
            if let Op::Const(l) = s.op {
                if !l.dtype.is_int() {
                    s.op = Op::Const(Lit::new(dtype, l.value()));
                }
            }
        }
        for l in &mut f.loops {
            l.body = l.body.with_dtype(dtype);
            l.vjp = l.vjp.as_ref().map(|v| v.with_dtype(dtype));
        }
        for r in &mut f.rules {
            r.vjp = r.vjp.as_ref().map(|v| v.with_dtype(dtype));
            r.jvp = r.jvp.as_ref().map(|v| v.with_dtype(dtype));
        }
        f
    }

    /// Count statements per op name (sorted by name), for reports.
    pub fn op_counts(&self) -> IndexMap<&'static str, usize> {
        let mut m: IndexMap<&'static str, usize> = IndexMap::new();
        for s in &self.stmts {
            *m.entry(s.op.name()).or_default() += 1;
        }
        m.sort_keys();
        m
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const LOSS: &str = "fn loss[N](%w: f32[N], %x: f32[N], %y: f32) -> f32 {
  %0: f32[N] = mul %w %x
  %pred: f32 = sum %0
  %err: f32 = sub %pred %y
  %1: f32 = mul %err %err
  %2: f32 = const 0.1
  %3: f32[N] = bcast %2
  ret %1
}
";

    #[test]
    fn print_parse_print_is_identity() {
        let fs = parse_functions(LOSS).unwrap();
        assert_eq!(fs.len(), 1);
        assert_eq!(fs[0].to_string(), LOSS);
    }

    #[test]
    fn multiple_returns() {
        let t = "fn g(%a: f64, %b: f64) -> (f64, f64) {\n  %0: f64 = add %a %b\n  ret %0, %a\n}\n";
        let fs = parse_functions(t).unwrap();
        assert_eq!(fs[0].to_string(), t);
    }

    pub(crate) const HALVING: &str = "fn h(%x: f64[2]) -> (f64[2], f64[5, 2], f64[2]) {
  loop 0 x7 {
    fn h.body(%s: f64[2]) -> f64[2] {
      %0: f64 = const 0.5
      %1: f64[2] = bcast %0
      %2: f64[2] = mul %s %1
      %3: f64[2] = sin %2
      ret %3
    }
    fn h.vjp(%s: f64[2], %g: f64[2]) -> f64[2] {
      %0: f64 = const 0.5
      %1: f64[2] = bcast %0
      %2: f64[2] = mul %s %1
      %3: f64[2] = cos %2
      %4: f64[2] = mul %g %3
      %5: f64[2] = mul %4 %1
      ret %5
    }
  }
  %y: f64[2] = loop 0 %x
  %t: f64[5, 2] = looptape 0 2 %x
  %g: f64[2] = loopvjp 0 2 1 %t %x
  ret %y, %t, %g
}
";

    #[test]
    fn loops_print_and_parse_back() {
        let fs = parse_functions(HALVING).unwrap();
        assert_eq!(fs[0].loops.len(), 1);
        assert_eq!(fs[0].loops[0].count, Dim::Lit(7));
        assert!(fs[0].loops[0].vjp.is_some());
        assert_eq!(fs[0].to_string(), HALVING);
    }

    const SOFTPLUS: &str = "fn sp[N](%x: f64[N]) -> f64[N] {
  rule 0 sp vjp {
    fn sp_vjp[N](%x: f64[N], %g: f64[N]) -> f64[N] {
      %0: f64[N] = neg %x
      %1: f64[N] = exp %0
      %2: f64 = const 1.0
      %3: f64[N] = bcast %2
      %4: f64[N] = add %3 %1
      %5: f64[N] = div %g %4
      ret %5
    }
  }
  %0: f64[N] = exp %x
  %1: f64[N] = log1p %0
  %sp: f64[N] = custom 0 1 %1 %x
  ret %sp
}
";

    #[test]
    fn rules_print_parse_back_and_strip() {
        let fs = parse_functions(SOFTPLUS).unwrap();
        assert_eq!(fs[0].rules.len(), 1);
        assert!(fs[0].rules[0].vjp.is_some() && fs[0].rules[0].jvp.is_none());
        assert_eq!(fs[0].to_string(), SOFTPLUS);
        let plain = fs[0].without_customs();
        assert!(!plain.has_customs());
        assert!(plain.validate().is_ok());
        assert_eq!(plain.stmts.len(), 2);
        assert_eq!(plain.rets, vec![plain.stmts[1].var]);
        // A rule that does not fit its statement.
        let wrong = SOFTPLUS.replace(
            "%g: f64[N]) -> f64[N] {",
            "%g: f64[N], %h: f64) -> f64[N] {",
        );
        let e = parse_functions(&wrong).unwrap_err();
        assert!(e.message.contains("VJP rule of `sp` does not fit"), "{e}");
        let missing = SOFTPLUS.replace("custom 0 1", "custom 1 1");
        assert!(parse_functions(&missing)
            .unwrap_err()
            .message
            .contains("no rule 1"));
    }

    #[test]
    fn unused_rules_are_pruned_and_the_rest_renumbered() {
        let mut f = parse_functions(SOFTPLUS).unwrap().remove(0);
        let r = f.rules[0].clone();
        f.rules.insert(
            0,
            CustomRule {
                name: "unused".into(),
                ..r
            },
        );
        f.stmts[2].op = Op::Custom(1, 1);
        assert!(f.validate().is_ok());
        f.prune_rules();
        assert_eq!(f.rules.len(), 1);
        assert_eq!(f.to_string(), SOFTPLUS);
    }

    #[test]
    fn loop_statements_are_checked_against_their_loop() {
        let wrong_rows = HALVING.replace("f64[5, 2] = looptape 0 2", "f64[6, 2] = looptape 0 2");
        let e = parse_functions(&wrong_rows).unwrap_err();
        assert!(e.message.contains("has 5 rows"), "{e}");
        let no_loop = HALVING.replace("= loop 0 %x", "= loop 1 %x");
        let e = parse_functions(&no_loop).unwrap_err();
        assert!(e.message.contains("no loop 1"), "{e}");
        let bad_state = HALVING.replace(
            "fn h.body(%s: f64[2]) -> f64[2] {",
            "fn h.body(%s: f64[3]) -> f64[3] {",
        );
        assert!(parse_functions(&bad_state).is_err());
    }

    #[test]
    fn type_errors_are_reported_with_lines() {
        let t = "fn g[N](%a: f64[N], %b: f64) -> f64 {\n  %0: f64 = add %a %b\n  ret %0\n}\n";
        let e = parse_functions(t).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("one type"), "{e}");
    }
}

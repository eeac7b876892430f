//! Forward mode: the tangent of every value, in one pass in program order.

use super::custom;
use super::template::{self, Rule};
use super::{AdBug, AdError, AdLimit, Unsized};
use crate::ir::{Builder, Function, Loop, Param, Stmt, VarId, VarInfo};
use crate::ops::{kernels, Op, VJP_RECOMPUTE};
use crate::types::{Dim, Type};
use std::collections::HashMap;

/// What `forward` builds and looks up in its one pass over `f`.
struct Fwd<'f> {
    f: &'f Function,
    b: Builder,
    /// The copy of each primal variable.
    map: Vec<Option<VarId>>,
    /// Tangents keyed by the primal variable.
    tan: Vec<Option<VarId>>,
    /// The tangent loop of each loop (numbered in `b`), made when needed:
    /// without a VJP (reverse mode gives it its body's VJP if it is
    /// differentiated), and, as the loop of a `loopvjp`'s tangent
    /// (`walk`), a copy whose VJP is the tangent of the loop's VJP (see
    /// `tangent_loop_def`).
    tangent_loops: HashMap<(usize, bool), u32>,
    /// The loop carrying a scan's tangent with its sequence's, by loop.
    seq_tangent_loops: HashMap<u32, u32>,
    /// A tape's tangent: the tape of `[state, tangent]` rows (not the
    /// tape's own type, so it is kept apart from `tan`).
    tape_tan: HashMap<VarId, VarId>,
    /// The statement defining each variable of `f`.
    defs: Vec<Option<usize>>,
}

/// Push the tangents of `f`'s results forward from the tangents of some of
/// its parameters. `tangents` pairs a differentiated parameter with the
/// parameter of `f` that carries its tangent (same type). The result is a
/// function of the same parameters returning the results' tangents (a
/// symbolic zero for a result that does not depend on the differentiated
/// parameters). Each op's JVP template comes from the op table; a value's
/// tangent is the sum of its operands' contributions, so a shared value is
/// differentiated once.
pub fn forward(f: &Function, tangents: &[(usize, usize)], name: &str) -> Result<Function, AdError> {
    f.validate()?;
    for &(p, t) in tangents {
        let (Some(pp), Some(tp)) = (f.params.get(p), f.params.get(t)) else {
            return Err(AdBug::NoTangentParameter {
                function: f.name.clone(),
                param: p,
                tangent: t,
            }
            .into());
        };
        if f.ty(pp.var) != f.ty(tp.var) {
            return Err(AdBug::TangentType {
                function: f.name.clone(),
                param: f.var_name(pp.var).to_string(),
            }
            .into());
        }
    }
    let mut b = Builder::new(name, f.size_params.clone());
    b.copy_loops(f);
    let mut map: Vec<Option<VarId>> = vec![None; f.vars.len()];
    for p in &f.params {
        map[p.var.index()] = Some(b.param(f.var_name(p.var), f.ty(p.var).clone(), p.span));
    }
    let mut fw = Fwd {
        f,
        b,
        map,
        tan: vec![None; f.vars.len()],
        tangent_loops: HashMap::new(),
        seq_tangent_loops: HashMap::new(),
        tape_tan: HashMap::new(),
        defs: Vec::new(),
    };
    for &(p, t) in tangents {
        let tv = fw.m(f.params[t].var)?;
        fw.tan[f.params[p].var.index()] = Some(tv);
    }
    fw.defs = f.definitions();
    for s in &f.stmts {
        fw.stmt(s)?;
    }
    let Fwd { mut b, tan, .. } = fw;
    let mut rets = Vec::new();
    for r in &f.rets {
        let t = match tan[r.index()] {
            Some(t) => t,
            None => b
                .push("", Op::Zero, &[], Some(f.ty(*r)))
                .map_err(AdError::from)?,
        };
        rets.push(t);
    }
    let out = super::reverse::prune_dead(&b.finish(rets));
    out.validate()?;
    Ok(out)
}

impl Fwd<'_> {
    /// The copy of primal variable `v`.
    fn m(&self, v: VarId) -> Result<VarId, AdBug> {
        mapped_or_err(&self.map, v)
    }

    /// The tangent loop of loop `l` (see `tangent_loops`), made when first
    /// needed.
    fn tangent_id(&mut self, l: usize, walk: bool) -> Result<u32, AdError> {
        if let Some(&id) = self.tangent_loops.get(&(l, walk)) {
            return Ok(id);
        }
        let id = self.b.add_loop(tangent_loop_def(self.f, l, walk)?);
        self.tangent_loops.insert((l, walk), id);
        Ok(id)
    }

    /// Copy statement `s` and push its tangent forward.
    fn stmt(&mut self, s: &Stmt) -> Result<(), AdError> {
        let f = self.f;
        let args: Vec<VarId> = s
            .args
            .iter()
            .map(|a| self.m(*a))
            .collect::<Result<_, _>>()?;
        // A loop with captures: one loop over `[state, tangent]` that also
        // captures the captures' tangents (and its tape of every state, a
        // gradient's walk back; not a tape of checkpoints).
        if let Some(l) = s.op.loop_id() {
            if f.loops[l].captures > 0 && s.args.iter().any(|a| self.tan[a.index()].is_some()) {
                if let Op::Loop(..) | Op::LoopTape(_, 1, _) = s.op {
                    return self.capture_tangent_stmt(s, &args, l);
                }
                return Err(AdError::Unsupported(AdLimit::CapturingLoop));
            }
        }
        let seq_tangent = s.op.is_loop()
            && f.loops[s.op.loop_id().unwrap_or(0)].is_scan()
            && s.args.last().is_some_and(|a| self.tan[a.index()].is_some());
        if seq_tangent {
            return self.seq_tangent_stmt(s, &args);
        }
        if let (Op::Loop(l, _), Some(t)) = (s.op, s.args.first().and_then(|a| self.tan[a.index()]))
        {
            let id = self.tangent_id(l as usize, false)?;
            let (y, dy) =
                tangent_loop(&mut self.b, f, l as usize, id, &args, t, f.var_name(s.var))?;
            self.map[s.var.index()] = Some(y);
            self.tan[s.var.index()] = Some(dy);
            return Ok(());
        }
        if self.loop_gradient_stmt(s, &args)? {
            return Ok(());
        }
        let nv = self
            .b
            .push(f.var_name(s.var), s.op, &args, Some(f.ty(s.var)))
            .map_err(AdError::from)?;
        self.map[s.var.index()] = Some(nv);
        if let Op::Kernel(k, n) = s.op {
            if s.args.iter().any(|a| self.tan[a.index()].is_some()) {
                self.tan[s.var.index()] = Some(self.kernel_tangent(s, k, n, &args)?);
            }
            return Ok(());
        }
        // A function with its own rule: the rule's JVP, never through the
        // statements that computed its value (operand 0).
        if let Op::Custom(..) = s.op {
            let ts: Vec<Option<VarId>> = s.args.iter().map(|a| self.tan[a.index()]).collect();
            if ts[1..].iter().any(Option::is_some) {
                self.tan[s.var.index()] = Some(custom::jvp(&mut self.b, f, s, &args, &ts)?);
            }
            return Ok(());
        }
        // Masks and integers carry no derivative.
        if s.op.is_piecewise_constant() || f.ty(s.var).dtype.is_int() {
            return Ok(());
        }
        self.rule_tangent(s, &args, nv)
    }

    /// Loop statement `s` of loop `l`, which has captures (on the copied
    /// operands `args`), with a tangent in its initial state, a capture or
    /// a scan's sequence: the loop over `[state, tangent]`
    /// ([`capture_tangent_loop_def`]), reading rows `[x ; dx]` where the
    /// sequence has a tangent, whose captures are the loop's and the
    /// tangents of those that have one. A `looptape` of every state keeps
    /// both: its rows' two parts.
    fn capture_tangent_stmt(&mut self, s: &Stmt, args: &[VarId], l: usize) -> Result<(), AdError> {
        let f = self.f;
        let lp = &f.loops[l];
        let fixed = s.op.arity();
        let dxs = match lp.is_scan() {
            true => self.tan[s.args[1].index()],
            false => None,
        };
        let with_tangent: Vec<usize> = (0..lp.captures)
            .filter(|&j| self.tan[s.args[fixed + j].index()].is_some())
            .collect();
        let id = self
            .b
            .add_loop(capture_tangent_loop_def(lp, &with_tangent, dxs.is_some())?);
        let e = AdError::from;
        let b = &mut self.b;
        let dx = match self.tan[s.args[0].index()] {
            Some(t) => t,
            None => b.push("", Op::Zero, &[], Some(lp.state())).map_err(e)?,
        };
        let p0 = b.pack_rows(&[args[0], dx], &packed_state(lp)).map_err(e)?;
        let mut ins = vec![p0];
        match dxs {
            // The rows `[x ; dx]`, side by side.
            Some(dxs) => {
                let xs = b.flat_rows(args[1]).map_err(e)?;
                let dxs = b.flat_rows(dxs).map_err(e)?;
                ins.push(b.concat_columns(xs, dxs).map_err(e)?);
                ins.extend_from_slice(&args[2..]);
            }
            None => ins.extend_from_slice(&args[1..]),
        }
        for &j in &with_tangent {
            ins.extend(self.tan[s.args[fixed + j].index()]);
        }
        let (y, dy) = if let Op::LoopTape(..) = s.op {
            // Every state and its tangent: the rows' two parts.
            let packed = packed_state(lp);
            let mut shape = vec![f.ty(s.var).shape[0].clone()];
            shape.extend(packed.shape.iter().cloned());
            let ty = Type::array(packed.dtype, shape);
            let op = Op::LoopTape(id, 1, lp.is_scan());
            let pt = b.push("", op, &ins, Some(&ty)).map_err(e)?;
            (b.row_part(pt, 0).map_err(e)?, b.row_part(pt, 1).map_err(e)?)
        } else {
            let pn = b
                .push("", Op::Loop(id, lp.is_scan()), &ins, None)
                .map_err(e)?;
            let y = b
                .push(f.var_name(s.var), Op::Index(0), &[pn], None)
                .map_err(e)?;
            (y, b.push("", Op::Index(1), &[pn], None).map_err(e)?)
        };
        self.map[s.var.index()] = Some(y);
        self.tan[s.var.index()] = Some(dy);
        Ok(())
    }

    /// A scan `s` (on the copied operands `args`) whose sequence has a
    /// tangent: one loop over `[state, tangent]` reading rows `[x ; dx]`
    /// (`scan`, or the tape of every state `scan_all` reads).
    fn seq_tangent_stmt(&mut self, s: &Stmt, args: &[VarId]) -> Result<(), AdError> {
        let f = self.f;
        let b = &mut self.b;
        let l = match s.op {
            Op::Loop(l, _) | Op::LoopTape(l, 1, _) => l,
            _ => return Err(AdError::Unsupported(AdLimit::ForwardScanSequence)),
        };
        let id = match self.seq_tangent_loops.get(&l) {
            Some(&id) => id,
            None => {
                let id = b.add_loop(seq_tangent_loop_def(f, l as usize)?);
                self.seq_tangent_loops.insert(l, id);
                id
            }
        };
        let lp = &f.loops[l as usize];
        let dx0 = match self.tan[s.args[0].index()] {
            Some(t) => t,
            None => b
                .push("", Op::Zero, &[], Some(lp.state()))
                .map_err(AdError::from)?,
        };
        let dxs = self.tan[s.args[1].index()].expect("checked: the sequence has a tangent");
        let tape = matches!(s.op, Op::LoopTape(..)).then(|| f.ty(s.var).clone());
        let (y, dy) = seq_tangent_loop(b, lp, id, (args[0], dx0), (args[1], dxs), tape)?;
        self.map[s.var.index()] = Some(y);
        self.tan[s.var.index()] = Some(dy);
        Ok(())
    }

    /// Forward mode through a loop's gradient: the tape of states and
    /// tangents of `tape` (a `looptape`'s value), `dx` the tangent of its
    /// initial state (`None`: zero).
    fn packed_tape(&mut self, tape: VarId, dx: Option<VarId>) -> Result<VarId, AdError> {
        let f = self.f;
        let d = self.defs[tape.index()].ok_or(AdBug::NoLoopTape)?;
        let def = &f.stmts[d];
        let Op::LoopTape(l, k, scan) = def.op else {
            return Err(AdBug::NotATape.into());
        };
        let lp = &f.loops[l as usize];
        let packed = packed_state(lp);
        let x = self.m(def.args[0])?;
        let dx = match dx {
            Some(t) => t,
            None => self
                .b
                .push("", Op::Zero, &[], Some(lp.state()))
                .map_err(AdError::from)?,
        };
        let id = self.tangent_id(l as usize, false)?;
        let b = &mut self.b;
        let p0 = b.pack_rows(&[x, dx], &packed).map_err(AdError::from)?;
        let mut shape = vec![lp.tape_rows(u64::from(k))];
        shape.extend(packed.shape.iter().cloned());
        let ty = Type::array(packed.dtype, shape);
        let mut ins = vec![p0];
        if scan {
            ins.push(mapped_or_err(&self.map, def.args[1])?);
        }
        b.push("", Op::LoopTape(id, k, scan), &ins, Some(&ty))
            .map_err(AdError::from)
    }

    /// Forward mode through a tape, a row of a tape's tangent, or a loop's
    /// gradient (`s` on the copied operands `args`): the tape of states
    /// and tangents, the cotangent and its tangent walked back together.
    /// Whether `s` was one of these (copied, its tangent pushed forward).
    fn loop_gradient_stmt(&mut self, s: &Stmt, args: &[VarId]) -> Result<bool, AdError> {
        let f = self.f;
        match s.op {
            Op::LoopTape(_, k, _) if self.tan[s.args[0].index()].is_some() => {
                let nv = self
                    .b
                    .push(f.var_name(s.var), s.op, args, Some(f.ty(s.var)))
                    .map_err(AdError::from)?;
                self.map[s.var.index()] = Some(nv);
                let dx = self.tan[s.args[0].index()];
                let t = self.packed_tape(s.var, dx)?;
                self.tape_tan.insert(s.var, t);
                // Every state, as the program reads it (a `scan` returning
                // each step's state): the tangents are part 1 of each row.
                if k == 1 {
                    self.tan[s.var.index()] = Some(self.b.row_part(t, 1).map_err(AdError::from)?);
                }
                Ok(true)
            }
            Op::Index(k) if self.tape_tan.contains_key(&s.args[0]) => {
                let b = &mut self.b;
                let nv = b
                    .push(f.var_name(s.var), s.op, args, Some(f.ty(s.var)))
                    .map_err(AdError::from)?;
                self.map[s.var.index()] = Some(nv);
                let row = b
                    .push("", Op::Index(k), &[self.tape_tan[&s.args[0]]], None)
                    .map_err(AdError::from)?;
                let dt = b
                    .push("", Op::Index(1), &[row], None)
                    .map_err(AdError::from)?;
                self.tan[s.var.index()] = Some(dt);
                Ok(true)
            }
            Op::LoopVjp(_, _, mode, _)
                if mode & !VJP_RECOMPUTE != 0
                    && s.args.iter().any(|a| self.tan[a.index()].is_some()) =>
            {
                Err(AdError::Unsupported(AdLimit::ForwardLoopGradient))
            }
            Op::LoopVjp(l, k, mode, scan)
                if self.tape_tan.contains_key(&s.args[0])
                    || self.tan[s.args[1].index()].is_some() =>
            {
                self.loop_vjp_tangent(s, args, (l, k, mode, scan))?;
                Ok(true)
            }
            Op::LoopTape(..) | Op::LoopVjp(..)
                if s.args.iter().any(|a| self.tan[a.index()].is_some()) =>
            {
                Err(AdError::Unsupported(AdLimit::ForwardLoopGradient))
            }
            _ => Ok(false),
        }
    }

    /// A loop's gradient `s` (`loopvjp` with fields `op`, on the copied
    /// operands `args`) whose tape or cotangent has a tangent: copied, and
    /// the cotangent and its tangent walked back together over the tape of
    /// states and tangents.
    fn loop_vjp_tangent(
        &mut self,
        s: &Stmt,
        args: &[VarId],
        (l, k, mode, scan): (u32, u32, u32, bool),
    ) -> Result<(), AdError> {
        let f = self.f;
        let nv = self
            .b
            .push(f.var_name(s.var), s.op, args, Some(f.ty(s.var)))
            .map_err(AdError::from)?;
        self.map[s.var.index()] = Some(nv);
        let lp = &f.loops[l as usize];
        if lp.vjp.is_none() {
            return Err(AdBug::NoLoopVjp {
                function: Some(f.name.clone()),
                l: l as usize,
            }
            .into());
        }
        let tape = match self.tape_tan.get(&s.args[0]) {
            Some(&t) => t,
            None => self.packed_tape(s.args[0], None)?,
        };
        let dg = match self.tan[s.args[1].index()] {
            Some(t) => t,
            None => self
                .b
                .push("", Op::Zero, &[], Some(lp.state()))
                .map_err(AdError::from)?,
        };
        let packed = packed_state(lp);
        let q0 = self
            .b
            .pack_rows(&[args[1], dg], &packed)
            .map_err(AdError::from)?;
        let id = self.tangent_id(l as usize, true)?;
        let b = &mut self.b;
        let mut ins = vec![tape, q0];
        if scan {
            ins.push(args[2]);
        }
        let r = b
            .push("", Op::LoopVjp(id, k, mode, scan), &ins, None)
            .map_err(AdError::from)?;
        let dt = b
            .push("", Op::Index(1), &[r], None)
            .map_err(AdError::from)?;
        self.tan[s.var.index()] = Some(dt);
        Ok(())
    }

    /// The tangent of a call of kernel `k` on `n` arguments (copied:
    /// `args`): its JVP kernel on the arguments and their tangents, zeros
    /// for an argument without one. A kernel without a JVP (a user's) is
    /// an error.
    fn kernel_tangent(
        &mut self,
        s: &Stmt,
        k: u32,
        n: u32,
        args: &[VarId],
    ) -> Result<VarId, AdError> {
        let jvp = kernels::kernel_jvp(k).ok_or(AdError::Unsupported(AdLimit::ForwardKernel))?;
        let e = AdError::from;
        let mut ins = args.to_vec();
        for (a, &x) in s.args.iter().zip(args) {
            let t = match self.tan[a.index()] {
                Some(t) => t,
                None => {
                    let ty = self.b.ty(x).clone();
                    let zero = self.b.constant(ty.dtype, 0.0);
                    self.b.broadcast_to(zero, &ty).map_err(e)?
                }
            };
            ins.push(t);
        }
        let ty = self.f.ty(s.var).clone();
        self.b
            .push("", Op::Kernel(jvp, 2 * n), &ins, Some(&ty))
            .map_err(e)
    }

    /// The tangent of `s` (copied as `nv`, on the copied operands `args`)
    /// by its op's JVP rules: the sum of its operands' contributions.
    fn rule_tangent(&mut self, s: &Stmt, args: &[VarId], nv: VarId) -> Result<(), AdError> {
        if !s.op.differentiable() {
            return Err(AdError::Unsupported(AdLimit::NoDerivative));
        }
        let f = self.f;
        let b = &mut self.b;
        let rules = template::parsed(s.op, Rule::Jvp);
        let out_ty = f.ty(s.var).clone();
        let mut total: Option<VarId> = None;
        for (i, a) in s.args.iter().enumerate() {
            let Some(t) = self.tan[a.index()] else {
                continue;
            };
            let tmpl = rules[i].as_ref().map_err(|error| AdBug::Template {
                mode: "JVP",
                op: s.op.name(),
                error: Box::new(error.clone()),
            })?;
            let bind = |v: &str| -> Option<VarId> {
                match v {
                    "t" => Some(t),
                    "out" => Some(nv),
                    "a" => args.first().copied(),
                    "b" => args.get(1).copied(),
                    "c" => args.get(2).copied(),
                    _ => None,
                }
            };
            let contrib =
                tmpl.instantiate(b, &bind, Some(&out_ty))
                    .map_err(|error| AdBug::Template {
                        mode: "JVP",
                        op: s.op.name(),
                        error: Box::new(error),
                    })?;
            total = Some(match total {
                Some(prev) => b
                    .push("", Op::Add, &[prev, contrib], None)
                    .map_err(AdError::from)?,
                None => contrib,
            });
        }
        self.tan[s.var.index()] = total;
        Ok(())
    }
}

/// The copy of primal variable `v` in `map`, or an error if it has none.
fn mapped_or_err(map: &[Option<VarId>], v: VarId) -> Result<VarId, AdBug> {
    map[v.index()].ok_or(AdBug::ForwardUseBeforeDef)
}

/// `[2, state...]`: a loop's state and its tangent as the rows of one array.
fn packed_state(lp: &Loop) -> Type {
    let st = lp.state().clone();
    let mut shape = vec![Dim::Lit(2)];
    shape.extend(st.shape.iter().cloned());
    Type::array(st.dtype, shape)
}

/// The loop over `[state, tangent]` that carries loop `l`'s tangent: its
/// body runs the old body on the state and its JVP on both.
///
/// With `walk` (the loop of a `loopvjp`'s tangent), the new loop's "VJP"
/// is the tangent of loop `l`'s VJP, mapping `([s, ds], [g, dg])` to
/// `[g', dg']`: `loopvjp` of the new loop walks a tape of `[state,
/// tangent]` back, carrying a cotangent and its tangent (forward mode
/// through a loop's gradient). That map is not the VJP of the new body, so
/// it is a loop of its own: the loop whose tape it walks (made without
/// `walk`) has no VJP until reverse mode gives it its body's, for the
/// gradient of its tape (a third derivative through a loop).
fn tangent_loop_def(f: &Function, l: usize, walk: bool) -> Result<Loop, AdError> {
    let lp = &f.loops[l];
    let packed = packed_state(lp);
    let body_jvp = jvp(&lp.body, &[0], &format!("{}.jvp", lp.body.name))?;
    let mut bb = Builder::new(format!("{}.tangent", lp.body.name), f.size_params.clone());
    let p = bb.param("p", packed.clone(), Default::default());
    // A scan's body also reads a row of the sequence (not differentiated).
    let row = lp
        .row()
        .map(|r| bb.param("x", r.clone(), Default::default()));
    let s = bb
        .push("s", Op::Index(0), &[p], None)
        .map_err(AdError::from)?;
    let ds = bb
        .push("ds", Op::Index(1), &[p], None)
        .map_err(AdError::from)?;
    let ins: Vec<VarId> = std::iter::once(s).chain(row).collect();
    let next = bb.inline(&lp.body, &ins)?[0];
    let jvp_ins: Vec<VarId> = ins.iter().copied().chain(std::iter::once(ds)).collect();
    let dnext = bb.inline(&body_jvp, &jvp_ins)?[0];
    let out = bb
        .pack_rows(&[next, dnext], &packed)
        .map_err(AdError::from)?;
    let body = bb.finish(vec![out]);
    let vjp = match &lp.vjp {
        Some(v) if walk => {
            // v: (s, [x,] g) -> g'; its tangent in s and g.
            let last = v.params.len() - 1;
            let dv = jvp(v, &[0, last], &format!("{}.jvp", v.name))?;
            let mut vb = Builder::new(format!("{}.tangent", v.name), f.size_params.clone());
            let p = vb.param("p", packed.clone(), Default::default());
            let row = lp
                .row()
                .map(|r| vb.param("x", r.clone(), Default::default()));
            let q = vb.param("q", packed.clone(), Default::default());
            let mut pick = |v: VarId, i: u64| vb.push("", Op::Index(i), &[v], None);
            let (s, ds) = (pick(p, 0)?, pick(p, 1)?);
            let (g, dg) = (pick(q, 0)?, pick(q, 1)?);
            let ins: Vec<VarId> = std::iter::once(s)
                .chain(row)
                .chain(std::iter::once(g))
                .collect();
            let g2 = vb.inline(v, &ins)?[0];
            let dins: Vec<VarId> = ins.iter().copied().chain([ds, dg]).collect();
            let dg2 = vb.inline(&dv, &dins)?[0];
            let out = vb.pack_rows(&[g2, dg2], &packed).map_err(AdError::from)?;
            Some(vb.finish(vec![out]))
        }
        _ => None,
    };
    // The tangent of a frozen state is frozen too (`select` keeps it).
    Ok(Loop {
        count: lp.count.clone(),
        body,
        vjp,
        settles: lp.settles,
        captures: 0,
    })
}

/// The loop over `[state, tangent]` carrying the tangent of loop `lp`,
/// which has captures: its body runs the old body on the state, the row
/// and the captures, and its JVP in the state, the row (with `seq`: the
/// rows are then `[x ; dx]`, [`row_pair`]) and the captures
/// `with_tangent`, whose tangents are captured after the loop's own.
fn capture_tangent_loop_def(lp: &Loop, with_tangent: &[usize], seq: bool) -> Result<Loop, AdError> {
    let e = AdError::from;
    let body = &lp.body;
    let packed = packed_state(lp);
    let first_cap = 1 + usize::from(lp.is_scan());
    let wrt: Vec<usize> = std::iter::once(0)
        .chain(seq.then_some(1))
        .chain(with_tangent.iter().map(|j| first_cap + j))
        .collect();
    let body_jvp = jvp(body, &wrt, &format!("{}.jvp", body.name))?;
    let mut bb = Builder::new(format!("{}.tangent", body.name), body.size_params.clone());
    let span = Default::default();
    let p = bb.param("p", packed.clone(), span);
    let (row, drow) = match lp.row() {
        Some(r) if seq => {
            let (x, dx) = row_pair(&mut bb, r)?;
            (Some(x), Some(dx))
        }
        Some(r) => (Some(bb.param("x", r.clone(), span)), None),
        None => (None, None),
    };
    let cap_tys = lp.capture_types();
    let caps: Vec<VarId> = cap_tys
        .iter()
        .enumerate()
        .map(|(j, t)| bb.param(&format!("c{j}"), t.clone(), span))
        .collect();
    let dcaps: Vec<VarId> = with_tangent
        .iter()
        .map(|&j| bb.param(&format!("dc{j}"), cap_tys[j].clone(), span))
        .collect();
    let s = bb.push("s", Op::Index(0), &[p], None).map_err(e)?;
    let ds = bb.push("ds", Op::Index(1), &[p], None).map_err(e)?;
    let ins: Vec<VarId> = std::iter::once(s).chain(row).chain(caps).collect();
    let next = bb.inline(body, &ins)?[0];
    let jvp_ins: Vec<VarId> = ins
        .iter()
        .copied()
        .chain(std::iter::once(ds))
        .chain(drow)
        .chain(dcaps)
        .collect();
    let dnext = bb.inline(&body_jvp, &jvp_ins)?[0];
    let out = bb.pack_rows(&[next, dnext], &packed).map_err(e)?;
    Ok(Loop {
        count: lp.count.clone(),
        body: bb.finish(vec![out]),
        vjp: None,
        settles: lp.settles,
        captures: lp.captures + with_tangent.len(),
    })
}

/// The loop over `[state, tangent]` carrying scan loop `l`'s tangent when
/// its sequence has one too: its rows are `[x ; dx]` (flattened, side by
/// side), its body runs the old body on the state and the row and its JVP
/// in both. No VJP: a loop's gradient with respect to a sequence is not
/// pushed forward.
fn seq_tangent_loop_def(f: &Function, l: usize) -> Result<Loop, AdError> {
    let lp = &f.loops[l];
    let packed = packed_state(lp);
    let row_ty = lp.row().ok_or(AdBug::NotAScan("the sequence"))?.clone();
    let body_jvp = jvp(&lp.body, &[0, 1], &format!("{}.jvp", lp.body.name))?;
    let mut bb = Builder::new(format!("{}.tangent", lp.body.name), f.size_params.clone());
    let p = bb.param("p", packed.clone(), Default::default());
    let (x, dx) = row_pair(&mut bb, &row_ty)?;
    let e = AdError::from;
    let s = bb.push("s", Op::Index(0), &[p], None).map_err(e)?;
    let ds = bb.push("ds", Op::Index(1), &[p], None).map_err(e)?;
    let next = bb.inline(&lp.body, &[s, x])?[0];
    let dnext = bb.inline(&body_jvp, &[s, x, ds, dx])?[0];
    let out = bb.pack_rows(&[next, dnext], &packed).map_err(e)?;
    Ok(Loop {
        count: lp.count.clone(),
        body: bb.finish(vec![out]),
        vjp: None,
        settles: false,
        captures: 0,
    })
}

/// A tangent loop's row parameter `[x ; dx]` (a scan's row of type
/// `row_ty` and its tangent, flattened side by side; added to `bb`), taken
/// apart: `(x, dx)`.
fn row_pair(bb: &mut Builder, row_ty: &Type) -> Result<(VarId, VarId), AdError> {
    let e = AdError::from;
    let wx = Dim::product(&row_ty.shape).ok_or(AdBug::Unsized(Unsized::Row))?;
    let both_ty = Type::array(row_ty.dtype, vec![Dim::Lit(2), wx.clone()]);
    let width = wx.times(&Dim::Lit(2)).ok_or(AdBug::Unsized(Unsized::Row))?;
    let row = bb.param(
        "xdx",
        Type::array(row_ty.dtype, vec![width]),
        Default::default(),
    );
    let both = bb
        .push("", Op::Reshape, &[row], Some(&both_ty))
        .map_err(e)?;
    let mut part = |i: u64| -> Result<VarId, AdError> {
        let v = bb.push("", Op::Index(i), &[both], None).map_err(e)?;
        if row_ty.is_scalar() {
            return bb.push("", Op::Index(0), &[v], None).map_err(e);
        }
        if bb.ty(v) == row_ty {
            return Ok(v);
        }
        bb.push("", Op::Reshape, &[v], Some(row_ty)).map_err(e)
    };
    Ok((part(0)?, part(1)?))
}

/// Scan loop `lp` (its tangent loop numbered `id`, see
/// [`seq_tangent_loop_def`]) from `(x, dx)` over `(xs, dxs)`: the result
/// and its tangent, or with the type of a tape keeping every state
/// (`scan_all`'s), that tape and its tangent.
fn seq_tangent_loop(
    b: &mut Builder,
    lp: &Loop,
    id: u32,
    (x, dx): (VarId, VarId),
    (xs, dxs): (VarId, VarId),
    tape: Option<Type>,
) -> Result<(VarId, VarId), AdError> {
    let e = AdError::from;
    let packed = packed_state(lp);
    let p0 = b.pack_rows(&[x, dx], &packed).map_err(e)?;
    let (xs, dxs) = (b.flat_rows(xs).map_err(e)?, b.flat_rows(dxs).map_err(e)?);
    let seq = b.concat_columns(xs, dxs).map_err(e)?;
    let Some(tape) = tape else {
        let pn = b
            .push("", Op::Loop(id, true), &[p0, seq], None)
            .map_err(e)?;
        let y = b.push("", Op::Index(0), &[pn], None).map_err(e)?;
        let dy = b.push("", Op::Index(1), &[pn], None).map_err(e)?;
        return Ok((y, dy));
    };
    // Rows of `[state, tangent]`: part 0 the tape, part 1 its tangent.
    let mut shape = vec![tape.shape[0].clone()];
    shape.extend(packed.shape.iter().cloned());
    let ty = Type::array(packed.dtype, shape);
    let both = b
        .push("", Op::LoopTape(id, 1, true), &[p0, seq], Some(&ty))
        .map_err(e)?;
    let y = b.row_part(both, 0).map_err(e)?;
    let dy = b.row_part(both, 1).map_err(e)?;
    Ok((y, dy))
}

/// A loop and its tangent as one loop over `[state, tangent]` (see
/// [`tangent_loop_def`], numbered `id` in `b`). Returns the result and its
/// tangent.
fn tangent_loop(
    b: &mut Builder,
    f: &Function,
    l: usize,
    id: u32,
    args: &[VarId],
    dx: VarId,
    name: &str,
) -> Result<(VarId, VarId), AdError> {
    let x = args[0];
    let lp = &f.loops[l];
    let packed = packed_state(lp);
    let p0 = b.pack_rows(&[x, dx], &packed).map_err(AdError::from)?;
    let loop_ins: Vec<VarId> = std::iter::once(p0).chain(args.get(1).copied()).collect();
    let pn = b
        .push("", Op::Loop(id, lp.is_scan()), &loop_ins, None)
        .map_err(AdError::from)?;
    let y = b
        .push(name, Op::Index(0), &[pn], None)
        .map_err(AdError::from)?;
    let dy = b
        .push("", Op::Index(1), &[pn], None)
        .map_err(AdError::from)?;
    Ok((y, dy))
}

/// Forward mode of `f` with respect to the parameters at `wrt`: a function
/// of `f`'s parameters followed by one tangent per differentiated
/// parameter (named `d<name>`), returning the results' tangents.
pub fn jvp(f: &Function, wrt: &[usize], name: &str) -> Result<Function, AdError> {
    let mut g = f.clone();
    let mut pairs = Vec::new();
    for &i in wrt {
        let p = f.params.get(i).ok_or_else(|| AdBug::NoParameter {
            function: f.name.clone(),
            index: i,
        })?;
        let mut tname = format!("d{}", f.var_name(p.var));
        while g.vars.iter().any(|v| v.name == tname) {
            tname.push('_');
        }
        let var = VarId(g.vars.len() as u32);
        g.vars.push(VarInfo {
            name: tname,
            ty: f.ty(p.var).clone(),
        });
        g.params.push(Param { var, span: p.span });
        pairs.push((i, g.params.len() - 1));
    }
    forward(&g, &pairs, name)
}

/// The gradient of a scalar function with respect to some of its scalar
/// parameters, by forward mode: one tangent pass per parameter, each with
/// tangent 1. For a few scalar parameters it costs about what reverse mode
/// does, and it goes where reverse mode does not yet: through a loop's
/// gradient (a second derivative through a loop).
pub fn forward_gradient(f: &Function, wrt: &[usize], name: &str) -> Result<Function, AdError> {
    let mut b = Builder::new(name, f.size_params.clone());
    let params: Vec<VarId> = f
        .params
        .iter()
        .map(|p| b.param(f.var_name(p.var), f.ty(p.var).clone(), p.span))
        .collect();
    let mut outs = Vec::new();
    for &i in wrt {
        let p = f.params.get(i).ok_or_else(|| AdBug::NoParameter {
            function: f.name.clone(),
            index: i,
        })?;
        let ty = f.ty(p.var);
        if !ty.is_scalar() {
            return Err(AdBug::ForwardNotScalar {
                function: f.name.clone(),
                param: f.var_name(p.var).to_string(),
                ty: ty.clone(),
            }
            .into());
        }
        let tangent = jvp(f, &[i], &format!("{}.d{}", f.name, f.var_name(p.var)))?;
        let one = b.constant(ty.dtype, 1.0);
        let args: Vec<VarId> = params.iter().copied().chain(std::iter::once(one)).collect();
        outs.push(b.inline(&tangent, &args)?[0]);
    }
    let g = super::reverse::prune_dead(&b.finish(outs));
    g.validate()?;
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::differentiate::template::Template;
    use crate::ir::interp::run;
    use crate::ir::parse_functions;
    use crate::ops::ALL_OPS;
    use crate::types::value::Value;
    use crate::types::DType;

    #[test]
    fn every_jvp_template_parses() {
        for op in ALL_OPS {
            let ts = op.jvp();
            // A function without a derivative yet (`tetragamma`) has none.
            let want = if op.differentiable() { op.arity() } else { 0 };
            assert_eq!(ts.len(), want, "{op:?}");
            for t in ts {
                Template::parse(&t).unwrap_or_else(|e| panic!("{op:?}: {e}"));
            }
        }
    }

    #[test]
    fn directional_derivative_of_the_seed_loss() {
        let f = &parse_functions(
            "fn loss[N](%w: f64[N], %x: f64[N], %y: f64, %dw: f64[N]) -> f64 {
  %0: f64[N] = mul %w %x
  %pred: f64 = sum %0
  %err: f64 = sub %pred %y
  %1: f64 = mul %err %err
  ret %1
}",
        )
        .unwrap()[0];
        let j = forward(f, &[(0, 3)], "jvp").unwrap();
        let w = Value::f64(&[1.0, 2.0, 3.0]);
        let x = Value::f64(&[4.0, 5.0, 6.0]);
        let y = Value::scalar(DType::F64, 0.5);
        let dw = Value::f64(&[1.0, 0.0, -1.0]);
        // Gradient [252, 315, 378] dotted with dw.
        let out = run(&j, &[&w, &x, &y, &dw]).unwrap();
        assert_eq!(out[0].as_scalar(), 252.0 - 378.0);
    }
}

//! The reverse sweep.

use super::custom;
use super::split::split_at;
use super::template::{self, Rule, Template};
use super::{AdBug, AdError, AdLimit, Unsized};
pub use crate::ir::needed::prune_dead;
use crate::ir::{Builder, Function, Loop, Stmt, VarId};
use crate::ops::{kernels, Op, OpTypeError, Part, VJP_SEQ, VJP_TAPE};
use crate::types::{Dim, Type};
use indexmap::IndexMap;
use std::borrow::Cow;

/// The result of differentiating a scalar function in reverse mode.
#[derive(Clone, Debug)]
pub struct Reverse {
    /// `(inputs) -> (value, grad_1, ..., grad_k)`: primal statements, then
    /// the pullback with the output cotangent seeded to 1.
    pub value_and_grad: Function,
    /// Number of leading statements of `value_and_grad` that are the primal.
    pub primal_len: usize,
    /// `(inputs) -> (value, residuals...)`.
    pub forward: Function,
    /// `(residuals..., ct) -> (grad_1, ..., grad_k)`.
    pub pullback: Function,
    /// The primal values the pullback reads, by name (parameters included).
    pub residuals: Vec<String>,
}

impl Reverse {
    /// `(inputs) -> (grad_1, ..., grad_k)` named `name`, dead code removed.
    pub fn gradient(&self, name: &str) -> Function {
        let mut f = self.value_and_grad.clone();
        f.name = name.to_string();
        f.rets.remove(0);
        prune_dead(&f)
    }
}

/// Which variables depend differentiably on the differentiated parameters
/// (a comparison's mask is piecewise constant, and an integer carries no
/// derivative: never active).
fn activity(f: &Function, wrt: &[usize]) -> Vec<bool> {
    let mut active = vec![false; f.vars.len()];
    for &i in wrt {
        active[f.params[i].var.index()] = true;
    }
    for s in &f.stmts {
        if !s.op.is_piecewise_constant()
            && !f.ty(s.var).dtype.is_int()
            && s.args.iter().any(|a| active[a.index()])
        {
            active[s.var.index()] = true;
        }
    }
    active
}

/// Does a VJP template read a primal value (an operand or the result)? Such
/// a contribution can be NaN where the primal is, even if the cotangent is 0.
fn reads_primal(t: &Template) -> bool {
    let mut vs = Vec::new();
    t.vars(&mut vs);
    vs.iter().any(|v| v != "g")
}

/// What `reverse` builds and looks up while it copies the primal and
/// sweeps back over it.
pub(super) struct Rev<'f> {
    pub(super) f: &'f Function,
    /// Which of `f`'s variables are active (see [`activity`]).
    pub(super) active: Vec<bool>,
    pub(super) b: Builder,
    /// The copy of each primal variable.
    pub(super) map: Vec<Option<VarId>>,
    /// An active `loop`'s tape of its states, by the loop's variable.
    tapes: IndexMap<VarId, VarId>,
    /// A loop gradient's every-state cotangents (`loopvjp` with `VJP_SEQ`).
    cotangent_rows: IndexMap<VarId, VarId>,
    /// The loop walking a scan back with its sequence's cotangent, by loop.
    seq_loops: IndexMap<u32, u32>,
    /// Copies of scan loops whose VJP gives `[0 ; g']` rows from the loop's
    /// own VJP (`walk_rows_loop`), by loop.
    walk_rows_loops: IndexMap<u32, u32>,
    /// Cotangents, keyed by the primal variable.
    pub(super) ct: IndexMap<VarId, VarId>,
    /// Values whose cotangent may be an exact zero because it went through
    /// the untaken side of a `select` (a dynamic `if`). Their contributions
    /// that read primal values are guarded (`0` where the cotangent is 0),
    /// so a NaN or infinite partial derivative in the branch not taken
    /// never reaches the gradient.
    masked: Vec<bool>,
}

/// The copy of primal variable `v` in `map`.
pub(super) fn mapped(map: &[Option<VarId>], v: VarId) -> VarId {
    map[v.index()].expect("defined before use")
}

/// Differentiate `f` (one scalar float result) with respect to the
/// parameters at positions `wrt`.
pub fn reverse(f: &Function, wrt: &[usize]) -> Result<Reverse, AdError> {
    f.validate()?;
    if f.rets.len() != 1 || !f.ty(f.rets[0]).is_scalar() {
        return Err(AdBug::ReverseNotScalar {
            function: f.name.clone(),
        }
        .into());
    }
    for &i in wrt {
        if i >= f.params.len() {
            return Err(AdBug::NoParameter {
                function: f.name.clone(),
                index: i,
            }
            .into());
        }
    }
    let active = activity(f, wrt);

    // Copy the primal. An active `loop` keeps a tape of its states for the
    // pullback (every state: `k = 1`; the optimizer offers sparser tapes).
    let mut b = Builder::new(f.name.clone(), f.size_params.clone());
    b.copy_loops(f);
    let mut r = Rev {
        f,
        active,
        b,
        map: vec![None; f.vars.len()],
        tapes: IndexMap::new(),
        cotangent_rows: IndexMap::new(),
        seq_loops: IndexMap::new(),
        walk_rows_loops: IndexMap::new(),
        ct: IndexMap::new(),
        masked: vec![false; f.vars.len()],
    };
    r.copy_primal()?;
    let primal_len = r.b.function().stmts.len();
    let out = mapped(&r.map, f.rets[0]);

    // Seed and sweep. Cotangents are keyed by the primal variable.
    let seed = r.b.constant(f.ty(f.rets[0]).dtype, 1.0);
    if r.active[f.rets[0].index()] {
        r.ct.insert(f.rets[0], seed);
    }
    for s in f.stmts.iter().rev() {
        let Some(&g) = r.ct.get(&s.var) else { continue };
        r.sweep_stmt(s, g)?;
    }
    let Rev { mut b, ct, .. } = r;
    let mut rets = vec![out];
    for &i in wrt {
        let p = &f.params[i];
        let g = match ct.get(&p.var) {
            Some(&g) => g,
            None => b
                .push("", Op::Zero, &[], Some(f.ty(p.var)))
                .map_err(AdError::from)?,
        };
        rets.push(g);
    }
    let vg = b.finish(rets);
    // One-hot cotangents (of `x[k]`) computed at their row only.
    let (mut vg, primal_len) = super::onehot::sparse(vg, primal_len)?;
    // Name the gradients after their parameters.
    for (k, &i) in wrt.iter().enumerate() {
        let r = vg.rets[k + 1];
        let base = format!("{}.ct", f.var_name(f.params[i].var));
        if !vg.vars.iter().any(|v| v.name == base) && vg.params.iter().all(|p| p.var != r) {
            vg.vars[r.index()].name = base;
        }
    }
    vg.validate()?;
    let (forward, pullback, residuals) = split_at(&vg, primal_len)?;
    Ok(Reverse {
        value_and_grad: vg,
        primal_len,
        forward,
        pullback,
        residuals,
    })
}

impl Rev<'_> {
    /// The copy of primal variable `v`.
    fn m(&self, v: VarId) -> VarId {
        mapped(&self.map, v)
    }

    /// Copy the primal's parameters and statements: an active `loop` with
    /// a tape of its states, an active `looptape` with a VJP for its loop,
    /// and an active loop gradient keeping every state's cotangent.
    fn copy_primal(&mut self) -> Result<(), AdError> {
        let f = self.f;
        for p in &f.params {
            let v = self.b.param(f.var_name(p.var), f.ty(p.var).clone(), p.span);
            self.map[p.var.index()] = Some(v);
        }
        for s in &f.stmts {
            let args: Vec<VarId> = s.args.iter().map(|a| self.m(*a)).collect();
            if let Op::Loop(l, _) = s.op {
                if self.active[s.var.index()] {
                    let (t, y) = taped_loop(&mut self.b, f, l as usize, &args, f.var_name(s.var))?;
                    self.tapes.insert(s.var, t);
                    self.map[s.var.index()] = Some(y);
                    continue;
                }
            }
            // A tape the program reads itself (every state of a `scan`): the
            // pullback walks it back seeded by its whole cotangent.
            // (A loop with captures is walked back by a loop of its own.)
            if let (Op::LoopTape(l, k, _), true) = (s.op, self.active[s.var.index()]) {
                match f.loops[l as usize].captures {
                    0 => give_vjp(&mut self.b, f, l as usize)?,
                    _ if k != 1 => return Err(AdError::Unsupported(AdLimit::CapturingLoop)),
                    _ => {}
                }
            }
            // A loop's gradient (reverse over reverse): every state's
            // cotangent is kept, for the second-order walk of the pullback.
            if let (Op::LoopVjp(l, k, m, scan), true) = (s.op, self.active[s.var.index()]) {
                self.copy_loop_gradient(s, &args, (l, k, m, scan))?;
                continue;
            }
            let nv = self
                .b
                .push(f.var_name(s.var), s.op, &args, Some(f.ty(s.var)))
                .map_err(AdError::from)?;
            self.map[s.var.index()] = Some(nv);
        }
        Ok(())
    }

    /// Copy an active loop gradient `s` (`loopvjp` with fields `op`, on the
    /// copied operands `args`): the walk giving every state's cotangent
    /// too, whose rows the second-order walk of the pullback reads.
    fn copy_loop_gradient(
        &mut self,
        s: &Stmt,
        args: &[VarId],
        (l, k, m, scan): (u32, u32, u32, bool),
    ) -> Result<(), AdError> {
        let b = &mut self.b;
        // Not yet: a walk seeded by a tape, one giving a sequence's
        // cotangent, a checkpointed one, or a sequence that is itself
        // differentiated.
        let seq_active = scan && self.active[s.args[2].index()];
        if k != 1 || m & (VJP_SEQ | VJP_TAPE) != 0 || seq_active {
            return Err(AdError::Unsupported(AdLimit::LoopGradient));
        }
        // A scan's walk with every state's cotangent is its copy's,
        // whose rows hold the walk's cotangents, `V(s, x, g)`.
        let lw = if scan {
            match self.walk_rows_loops.get(&l) {
                Some(&lw) => lw,
                None => {
                    let lw = walk_rows_loop(b, l as usize)?;
                    self.walk_rows_loops.insert(l, lw);
                    lw
                }
            }
        } else {
            l
        };
        let lp = &b.function().loops[lw as usize];
        let (st, ty) = (lp.state().clone(), lp.seq_cotangent_type());
        let ty = ty.ok_or(AdBug::Unsized(Unsized::LoopState))?;
        let rows = b
            .push("", Op::LoopVjp(lw, 1, m | VJP_SEQ, scan), args, Some(&ty))
            .map_err(AdError::from)?;
        let ws = Dim::product(&st.shape).ok_or(AdBug::Unsized(Unsized::LoopState))?;
        let e = AdError::from;
        let first = b.push("", Op::Index(0), &[rows], None).map_err(e)?;
        let first = b.trailing(first, ws.clone()).map_err(e)?;
        let r = unflatten(b, first, &st).map_err(e)?;
        // Each state's cotangent: the last `ws` elements of each row.
        let gs = b.trailing_columns(rows, ws).map_err(e)?;
        self.map[s.var.index()] = Some(r);
        self.cotangent_rows.insert(s.var, gs);
        Ok(())
    }

    /// The contributions of statement `s`, whose cotangent is `g`, to its
    /// active operands' cotangents.
    fn sweep_stmt(&mut self, s: &Stmt, g: VarId) -> Result<(), AdError> {
        let f = self.f;
        if let (Op::LoopVjp(l, ..), Some(&rows)) = (s.op, self.cotangent_rows.get(&s.var)) {
            let tape = self.m(s.args[0]);
            let xs = s.args.get(2).map(|a| self.m(*a));
            let (ct_g, ct_tape) = second_order(&mut self.b, f, l as usize, (tape, rows, xs), g)?;
            for (a, contrib) in [(s.args[1], ct_g), (s.args[0], ct_tape)] {
                if self.active[a.index()] {
                    add_cotangent(&mut self.b, &mut self.ct, a, contrib)?;
                }
            }
            return Ok(());
        }
        // A loop: its tape walked back from the result's cotangent; a tape
        // the program reads: walked back from the tape's cotangent.
        match (s.op, self.tapes.get(&s.var)) {
            (Op::Loop(l, _), Some(&tape)) if f.loops[l as usize].captures > 0 => {
                return self.sweep_capture_walk(s, g, l, (tape, false));
            }
            (Op::LoopTape(l, ..), _) if f.loops[l as usize].captures > 0 => {
                return self.sweep_capture_walk(s, g, l, (self.m(s.var), true));
            }
            _ => {}
        }
        let walk = match (s.op, self.tapes.get(&s.var)) {
            (Op::Loop(l, scan), Some(&tape)) => Some((l, 1, scan, tape, 0)),
            (Op::LoopTape(l, k, scan), _) => Some((l, k, scan, self.m(s.var), VJP_TAPE)),
            _ => None,
        };
        if let Some(walk) = walk {
            return self.sweep_loop_walk(s, g, walk);
        }
        match s.op {
            // A native kernel: its VJP kernels, one per argument.
            Op::Kernel(k, n) => self.sweep_kernel(s, g, k, n),
            // A function with its own rule: the rule's VJP, never through
            // the statements that computed its value (operand 0).
            Op::Custom(..) => {
                let args: Vec<VarId> = s.args.iter().map(|a| self.m(*a)).collect();
                for (i, contrib) in custom::vjp(&mut self.b, f, s, &args, g)? {
                    self.add_masked(s, g, s.args[i], contrib)?;
                }
                Ok(())
            }
            _ => self.sweep_rule(s, g),
        }
    }

    /// Add `contrib` to the cotangent of `a`, an operand of `s` (whose
    /// cotangent is `g`), if `a` is active; guarded where `s`'s cotangent
    /// is masked, which masks `a`'s.
    fn add_masked(&mut self, s: &Stmt, g: VarId, a: VarId, contrib: VarId) -> Result<(), AdError> {
        if !self.active[a.index()] {
            return Ok(());
        }
        let contrib = if self.masked[s.var.index()] {
            self.masked[a.index()] = true;
            custom::guarded(&mut self.b, g, contrib)?
        } else {
            contrib
        };
        add_cotangent(&mut self.b, &mut self.ct, a, contrib)
    }

    /// A loop statement `s` walked back (`walk`: its loop, checkpoint
    /// interval, whether it is a scan, its tape and `loopvjp` flags) from
    /// its cotangent `g`: contributions to its initial state and, in a scan
    /// of an active sequence, to the sequence.
    fn sweep_loop_walk(
        &mut self,
        s: &Stmt,
        g: VarId,
        (l, k, scan, tape, flags): (u32, u32, bool, VarId, u32),
    ) -> Result<(), AdError> {
        let b = &mut self.b;
        let mut ins = vec![tape, g];
        let seq = scan && self.active[s.args[1].index()];
        if scan {
            ins.push(mapped(&self.map, s.args[1]));
        }
        let (init_ct, seq_ct) = if seq {
            let ls = seq_loop_of(b, &mut self.seq_loops, l)?;
            let lp = &b.function().loops[ls as usize];
            let ty = lp
                .seq_cotangent_type()
                .ok_or(AdBug::Unsized(Unsized::ScanRows))?;
            let r = b
                .push(
                    "",
                    Op::LoopVjp(ls, k, flags | VJP_SEQ, scan),
                    &ins,
                    Some(&ty),
                )
                .map_err(AdError::from)?;
            let (i, x) = split_seq_cotangent(b, l as usize, r).map_err(AdError::from)?;
            (i, Some(x))
        } else {
            let r = b
                .push("", Op::LoopVjp(l, k, flags, scan), &ins, None)
                .map_err(AdError::from)?;
            (r, None)
        };
        let contribs = std::iter::once((s.args[0], init_ct))
            .chain(seq_ct.map(|x| (s.args[1], x)))
            .filter(|(a, _)| self.active[a.index()]);
        for (a, contrib) in contribs {
            add_cotangent(b, &mut self.ct, a, contrib)?;
        }
        Ok(())
    }

    /// A native kernel `s` (kernel `k` of `n` operands) from its cotangent
    /// `g`: its VJP kernels, one per active argument.
    fn sweep_kernel(&mut self, s: &Stmt, g: VarId, k: u32, n: u32) -> Result<(), AdError> {
        let f = self.f;
        let mut ins: Vec<VarId> = s.args.iter().map(|a| self.m(*a)).collect();
        ins.push(g);
        for (i, a) in s.args.iter().enumerate() {
            if !self.active[a.index()] {
                continue;
            }
            let vjp =
                kernels::kernel_vjp(k, i).ok_or(AdError::Unsupported(AdLimit::KernelWithoutVjp))?;
            let contrib = self
                .b
                .push("", Op::Kernel(vjp, n + 1), &ins, Some(f.ty(*a)))
                .map_err(AdError::from)?;
            self.add_masked(s, g, *a, contrib)?;
        }
        Ok(())
    }

    /// Statement `s` from its cotangent `g` by its op's VJP rules (one
    /// template per operand), guarded where the cotangent is masked.
    fn sweep_rule(&mut self, s: &Stmt, g: VarId) -> Result<(), AdError> {
        if !s.op.differentiable() {
            return Err(AdError::Unsupported(AdLimit::NoDerivative));
        }
        let f = self.f;
        let rules = template::parsed(s.op, Rule::Vjp);
        for (i, a) in s.args.iter().enumerate() {
            if !self.active[a.index()] {
                continue;
            }
            let mut tmpl = Cow::Borrowed(rules[i].as_ref().map_err(|e| AdBug::Template {
                mode: "VJP",
                op: s.op.name(),
                error: Box::new(e.clone()),
            })?);
            // The guard compares the cotangent element by element with the
            // contribution, which is right for element-wise ops and for a
            // scalar cotangent. A `matmul` mixes elements: its contribution
            // is not guarded (a NaN or infinity in the other factor of an
            // untaken branch would reach the gradient).
            let guardable = s.op.is_elementwise() || f.ty(s.var).is_scalar();
            if self.masked[s.var.index()] && reads_primal(&tmpl) && guardable {
                tmpl = Cow::Owned(Template::App(
                    Op::Select,
                    vec![
                        Template::App(Op::Ne, vec![Template::Var("g".into()), Template::Num(0.0)]),
                        tmpl.into_owned(),
                        Template::Num(0.0),
                    ],
                ));
            }
            if s.op == Op::Select || self.masked[s.var.index()] {
                self.masked[a.index()] = true;
            }
            let arg_ty: Type = f.ty(*a).clone();
            let map = &self.map;
            let bind = |name: &str| -> Option<VarId> {
                match name {
                    "g" => Some(g),
                    "out" => Some(mapped(map, s.var)),
                    "a" => s.args.first().map(|x| mapped(map, *x)),
                    "b" => s.args.get(1).map(|x| mapped(map, *x)),
                    "c" => s.args.get(2).map(|x| mapped(map, *x)),
                    _ => None,
                }
            };
            let contrib = tmpl
                .instantiate(&mut self.b, &bind, Some(&arg_ty))
                .map_err(|error| AdBug::Template {
                    mode: "VJP",
                    op: s.op.name(),
                    error: Box::new(error),
                })?;
            add_cotangent(&mut self.b, &mut self.ct, *a, contrib)?;
        }
        Ok(())
    }
}

/// Add `contrib` to the cotangent of `a` (its first contribution is it).
pub(super) fn add_cotangent(
    b: &mut Builder,
    ct: &mut IndexMap<VarId, VarId>,
    a: VarId,
    contrib: VarId,
) -> Result<(), AdError> {
    let total = match ct.get(&a) {
        Some(&prev) => b
            .push("", Op::Add, &[prev, contrib], None)
            .map_err(AdError::from)?,
        None => contrib,
    };
    ct.insert(a, total);
    Ok(())
}

/// The reverse of `loopvjp L 1` (loop `l` of `f`), whose walk back
/// `g_j = V(s_j, g_{j+1})` (`V` the loop's VJP function at state `s_j`,
/// `g_count` the cotangent it was given) gave `rows`, every `g_j`: from
/// the cotangent `h` of its result `g_0`, the cotangents of the given `g`
/// and of the tape. Walking forward, `u_0 = h` and `u_{j+1} = (∂V/∂g)ᵀ
/// u_j`, so `g`'s cotangent is `u_count`; state `j` on the tape gets
/// `(∂V/∂s)ᵀ u_j`. Both are the gradient of `V(s_j, g_{j+1}) · u_j` with
/// respect to `g` and `s` ([`walk_reverse`]).
///
/// Where `V` is the body's true VJP (`Jᵀ g`) the first is `J u` and the
/// second is symmetric in `s`, so forward mode would do; but the VJP of a
/// tangent loop (forward over reverse, `tangent_loop_def`) is the tangent
/// of the primal loop's VJP, which is not the transpose of the tangent
/// body's Jacobian: only the reverse of `V` itself is right for every
/// loop (a third derivative through a loop came out as 0 before).
///
/// That walk is a scan over the rows `[s_j ; g_{j+1}]` (and, for a scan,
/// the row `x_j` its step read: `xs`), a new loop carrying `[u, hvp]`, its
/// states read from its tape.
fn second_order(
    b: &mut Builder,
    f: &Function,
    l: usize,
    (tape, rows, xs): (VarId, VarId, Option<VarId>),
    h: VarId,
) -> Result<(VarId, VarId), AdError> {
    let lp = f.loops[l].clone();
    let vjp = lp.vjp.as_ref().ok_or_else(|| AdBug::NoLoopVjp {
        function: Some(f.name.clone()),
        l,
    })?;
    let st = lp.state().clone();
    let count = lp.count.clone();
    let ws = Dim::product(&st.shape).ok_or(AdBug::Unsized(Unsized::State))?;
    let two_ws = ws
        .times(&Dim::Lit(2))
        .ok_or(AdBug::Unsized(Unsized::State))?;
    let arr = |shape: Vec<Dim>| Type::array(st.dtype, shape);
    let mut packed_shape = vec![Dim::Lit(2)];
    packed_shape.extend(st.shape.iter().cloned());
    let packed = arr(packed_shape);
    // The loop: `([u, hvp], [s ; g]) -> [(∂V/∂g)ᵀ u, (∂V/∂s)ᵀ u]`.
    let back = walk_reverse(vjp)?;
    // A scan's row, flattened after the state's and cotangent's elements.
    let row_ty = lp.row().cloned();
    let wx = match &row_ty {
        Some(r) => Some(Dim::product(&r.shape).ok_or(AdBug::Unsized(Unsized::Row))?),
        None => None,
    };
    let width = match &wx {
        Some(wx) => two_ws.plus(wx).ok_or(AdBug::Unsized(Unsized::Row))?,
        None => two_ws.clone(),
    };
    let mut bb = Builder::new(format!("{}.second", lp.body.name), f.size_params.clone());
    let p = bb.param("p", packed.clone(), Default::default());
    let row = bb.param("sg", arr(vec![width]), Default::default());
    let body = (|| -> Result<Function, AdError> {
        let e = AdError::from;
        let (sg, x) = match (&row_ty, &wx) {
            (Some(rt), Some(wx)) => {
                let sg = bb
                    .push("", Op::Slice(0), &[row], Some(&arr(vec![two_ws.clone()])))
                    .map_err(e)?;
                let x = bb.trailing(row, wx.clone()).map_err(e)?;
                (sg, Some(unflatten(&mut bb, x, rt).map_err(e)?))
            }
            _ => (row, None),
        };
        let pairs = bb
            .push(
                "",
                Op::Reshape,
                &[sg],
                Some(&arr(vec![ws.clone(), Dim::Lit(2)])),
            )
            .map_err(e)?;
        let parts = bb.push("", Op::Transpose, &[pairs], None).map_err(e)?;
        let s0 = bb.push("", Op::Index(0), &[parts], None).map_err(e)?;
        let g0 = bb.push("", Op::Index(1), &[parts], None).map_err(e)?;
        let s = unflatten(&mut bb, s0, &st).map_err(e)?;
        let g = unflatten(&mut bb, g0, &st).map_err(e)?;
        let u = bb.push("", Op::Index(0), &[p], None).map_err(e)?;
        // The body and its VJP read the row after the state.
        let with_row = |a: &[VarId]| -> Vec<VarId> {
            let mut v = vec![a[0]];
            v.extend(x);
            v.extend_from_slice(&a[1..]);
            v
        };
        let cts = bb.inline(&back, &with_row(&[s, g, u]))?;
        let next = bb.pack_rows(&[cts[0], cts[1]], &packed).map_err(e)?;
        Ok(bb.finish(vec![next]))
    })()?;
    let l2 = b.add_loop(Loop {
        count: count.clone(),
        body,
        vjp: None,
        settles: false,
        captures: 0,
    });
    let e = AdError::from;
    // The sequence: row j is `s_j` and `g_{j+1}`, interleaved element by
    // element (`[ws, 2]`, which the body transposes).
    let steps = arr(vec![count.clone(), ws.clone()]);
    let states = b.flat_rows(tape).map_err(e)?;
    let states = b
        .push("", Op::Slice(1), &[states], Some(&steps))
        .map_err(e)?;
    let gs = b.push("", Op::Slice(1), &[rows], Some(&steps)).map_err(e)?;
    let both = b
        .pack_rows(
            &[states, gs],
            &arr(vec![Dim::Lit(2), count.clone(), ws.clone()]),
        )
        .map_err(e)?;
    let cw = count.times(&ws).ok_or(AdBug::Unsized(Unsized::Tape))?;
    let both = b
        .push("", Op::Reshape, &[both], Some(&arr(vec![Dim::Lit(2), cw])))
        .map_err(e)?;
    let both = b.push("", Op::Transpose, &[both], None).map_err(e)?;
    let mut seq = b
        .push(
            "",
            Op::Reshape,
            &[both],
            Some(&arr(vec![count.clone(), two_ws.clone()])),
        )
        .map_err(e)?;
    if let Some(xs) = xs {
        let xs = b.flat_rows(xs).map_err(e)?;
        seq = b.concat_columns(seq, xs).map_err(e)?;
    }
    let zero = b.push("", Op::Zero, &[], Some(&st)).map_err(e)?;
    let init = b.pack_rows(&[h, zero], &packed).map_err(e)?;
    let mut tape_shape = vec![b.function().loops[l2 as usize].tape_rows(1)];
    tape_shape.extend(packed.shape.iter().cloned());
    let walk = b
        .push(
            "",
            Op::LoopTape(l2, 1, true),
            &[init, seq],
            Some(&arr(tape_shape)),
        )
        .map_err(e)?;
    let last = b.push("", Op::Index(0), &[walk], None).map_err(e)?;
    let ct_g = b.push("", Op::Index(0), &[last], None).map_err(e)?;
    let hvps = b.states_after_steps(walk, count, 0, Some(1)).map_err(e)?;
    let tape_ty = b.ty(tape).clone();
    let ct_tape = b.push("", Op::Pad(1), &[hvps], Some(&tape_ty)).map_err(e)?;
    Ok((ct_g, ct_tape))
}

/// The reverse of a loop's VJP function `V(s, [x,] g)`: `(s, [x,] g, u)
/// -> ((∂V/∂g)ᵀ u, (∂V/∂s)ᵀ u)`, the gradient of `Σ V(s, [x,] g) · u`
/// with respect to `g` and `s` (see [`second_order`]).
fn walk_reverse(vjp: &Function) -> Result<Function, AdError> {
    let n = vjp.params.len();
    let mut b = Builder::new(vjp.name.clone(), vjp.size_params.clone());
    let ins: Vec<VarId> = vjp
        .params
        .iter()
        .map(|p| b.param(vjp.var_name(p.var), vjp.ty(p.var).clone(), p.span))
        .collect();
    let out_ty = vjp.ty(vjp.rets[0]).clone();
    let u = b.param("u", out_ty.clone(), Default::default());
    let v = b.inline(vjp, &ins)?[0];
    let mut h = b.push("", Op::Mul, &[v, u], None).map_err(AdError::from)?;
    if !out_ty.is_scalar() {
        h = b.push("", Op::Sum, &[h], None).map_err(AdError::from)?;
    }
    let h = b.finish(vec![h]);
    // The cotangent `g` is V's last parameter, the state its first.
    let r = reverse(&h, &[n - 1, 0])?;
    Ok(r.gradient(&format!("{}.back", vjp.name)))
}

/// A copy of scan loop `l` of `b` for a walk that keeps every state's
/// cotangent (`VJP_SEQ`) and whose rows' sequence part is not read (a
/// loop's gradient differentiated again, [`second_order`]): its VJP is
/// `(s, x, g) -> [0 ; flat(V(s, x, g))]`, `V` the loop's own VJP. Not
/// [`seq_loop`], which differentiates the body again: the walk must apply
/// the loop's VJP, which for a tangent loop's walk is not the VJP of its
/// body (see `forward::tangent_loop_def`).
fn walk_rows_loop(b: &mut Builder, l: usize) -> Result<u32, AdError> {
    let lp = b.function().loops[l].clone();
    let v = lp
        .vjp
        .as_ref()
        .ok_or(AdBug::NoLoopVjp { function: None, l })?;
    let packed = lp
        .seq_cotangent_type()
        .ok_or(AdBug::Unsized(Unsized::ScanRows))?;
    let pw = Type::array(packed.dtype, vec![packed.shape[1].clone()]);
    let mut vb = Builder::new(format!("{}.rows", v.name), v.size_params.clone());
    let ins: Vec<VarId> = v
        .params
        .iter()
        .map(|p| vb.param(v.var_name(p.var), v.ty(p.var).clone(), p.span))
        .collect();
    let gs = vb.inline(v, &ins)?[0];
    let rows = (|| -> Result<VarId, OpTypeError> {
        // `gs` at the end (pads at static offsets only), zeros before it.
        let gs = flatten(&mut vb, gs)?;
        let back = vb.push("", Op::Reverse, &[gs], None)?;
        let back = vb.push("", Op::Pad(0), &[back], Some(&pw))?;
        vb.push("", Op::Reverse, &[back], None)
    })()
    .map_err(AdError::from)?;
    let vjp = vb.finish(vec![rows]);
    Ok(b.add_loop(Loop {
        vjp: Some(vjp),
        settles: false,
        ..lp
    }))
}

/// [`seq_loop`] of scan loop `l`, made once.
fn seq_loop_of(b: &mut Builder, made: &mut IndexMap<u32, u32>, l: u32) -> Result<u32, AdError> {
    if let Some(&ls) = made.get(&l) {
        return Ok(ls);
    }
    let ls = seq_loop(b, l as usize)?;
    made.insert(l, ls);
    Ok(ls)
}

/// Give loop `l` its VJP if it has none yet.
fn give_vjp(b: &mut Builder, f: &Function, l: usize) -> Result<(), AdError> {
    if b.function().loops[l].vjp.is_none() {
        let vjp = body_vjp(&f.loops[l].body)?;
        b.loop_mut(l).vjp = Some(vjp);
    }
    Ok(())
}

/// A copy of scan loop `l` whose VJP also gives the row's cotangent
/// ([`body_vjp_seq`]), for `loopvjp` with [`VJP_SEQ`].
fn seq_loop(b: &mut Builder, l: usize) -> Result<u32, AdError> {
    let lp = b.function().loops[l].clone();
    let vjp = body_vjp_seq(&lp)?;
    Ok(b.add_loop(Loop {
        vjp: Some(vjp),
        settles: false,
        ..lp
    }))
}

/// The cotangents of scan loop `l`'s initial state and of its sequence in
/// the rows `[gx_j ; gs_j]` of `r` (a `loopvjp` with [`VJP_SEQ`]): the
/// state's from row 0, the sequence's from the first `wx` columns of rows
/// `0 .. count`.
fn split_seq_cotangent(b: &mut Builder, l: usize, r: VarId) -> Result<(VarId, VarId), OpTypeError> {
    let lp = &b.function().loops[l];
    let (st, xs) = (lp.state().clone(), lp.sequence());
    let xs = xs.ok_or(OpTypeError::NotAScan)?;
    let row = Type::array(xs.dtype, xs.shape[1..].to_vec());
    let size = |t: &Type| Dim::product(&t.shape).ok_or_else(|| OpTypeError::parts(Part::Size, t));
    let (wx, ws) = (size(&row)?, size(&st)?);
    let first = b.push("", Op::Index(0), &[r], None)?;
    let gs = b.trailing(first, ws)?;
    let init = unflatten(b, gs, &st)?;
    let cols = b.leading_columns(r, wx.clone())?;
    let rows = Type::array(xs.dtype, vec![xs.shape[0].clone(), wx]);
    let gx = b.push("", Op::Slice(0), &[cols], Some(&rows))?;
    let seq = unflatten(b, gx, &xs)?;
    Ok((init, seq))
}

/// The vector (or matrix of flattened rows) `v` in the shape of `ty`.
pub(super) fn unflatten(b: &mut Builder, v: VarId, ty: &Type) -> Result<VarId, OpTypeError> {
    if b.ty(v) == ty {
        return Ok(v);
    }
    if ty.is_scalar() {
        return b.push("", Op::Index(0), &[v], None);
    }
    b.push("", Op::Reshape, &[v], Some(ty))
}

/// The vector `[v]`, flattened (a scalar as one element).
pub(super) fn flatten(b: &mut Builder, v: VarId) -> Result<VarId, OpTypeError> {
    let t = b.ty(v).clone();
    if t.rank() == 1 {
        return Ok(v);
    }
    let w = Dim::product(&t.shape).ok_or_else(|| OpTypeError::parts(Part::Size, &t))?;
    let to = Type::array(t.dtype, vec![w]);
    let op = if t.is_scalar() {
        Op::Bcast
    } else {
        Op::Reshape
    };
    b.push("", op, &[v], Some(&to))
}

/// `looptape L 1` of `x` and its row 0 (the loop's result), giving loop
/// `l` its VJP if it has none yet (a loop with captures is walked back
/// by a loop of its own, [`capture_walk_loop`]).
fn taped_loop(
    b: &mut Builder,
    f: &Function,
    l: usize,
    args: &[VarId],
    name: &str,
) -> Result<(VarId, VarId), AdError> {
    if f.loops[l].captures == 0 {
        give_vjp(b, f, l)?;
    }
    let lp = &b.function().loops[l];
    let scan = lp.is_scan();
    let rows = lp.tape_rows(1);
    let st = lp.state().clone();
    let mut shape = vec![rows];
    shape.extend(st.shape.iter().cloned());
    let tape_ty = Type::array(st.dtype, shape);
    let t = b
        .push(
            &format!("{name}.tape"),
            Op::LoopTape(l as u32, 1, scan),
            args,
            Some(&tape_ty),
        )
        .map_err(AdError::from)?;
    let y = b
        .push(name, Op::Index(0), &[t], None)
        .map_err(AdError::from)?;
    Ok((t, y))
}

/// The VJP of a loop body `s -> s'`: `(s, g) -> gᵀ ∂s'/∂s`, as the
/// gradient of `h(s, g) = Σ s'(s) · g` with respect to `s`. A scan's body
/// `(s, x) -> s'` gives `(s, x, g) -> gᵀ ∂s'/∂s` (the row `x` is not
/// differentiated).
pub fn body_vjp(body: &Function) -> Result<Function, AdError> {
    let mut b = Builder::new(body.name.clone(), body.size_params.clone());
    let st = body.ty(body.params[0].var).clone();
    let mut ins = vec![b.param("s", st.clone(), body.params[0].span)];
    if let Some(p) = body.params.get(1) {
        ins.push(b.param("x", body.ty(p.var).clone(), p.span));
    }
    let g = b.param("g", st.clone(), Default::default());
    let next = b.inline(body, &ins)?[0];
    let mut h = b
        .push("", Op::Mul, &[next, g], None)
        .map_err(AdError::from)?;
    if !st.is_scalar() {
        h = b.push("", Op::Sum, &[h], None).map_err(AdError::from)?;
    }
    let h = b.finish(vec![h]);
    let r = reverse(&h, &[0])?;
    Ok(r.gradient(&format!("{}.vjp", body.name)))
}

/// The VJP of a scan's body `(s, x) -> s'` with respect to the state and
/// the row, packed: `(s, x, g) -> [flat(gᵀ ∂s'/∂x) ; flat(gᵀ ∂s'/∂s)]`,
/// a vector of the row's and the state's elements (the rows of `loopvjp`
/// with [`VJP_SEQ`]).
pub fn body_vjp_seq(lp: &Loop) -> Result<Function, AdError> {
    let body = &lp.body;
    let packed = lp
        .seq_cotangent_type()
        .ok_or(AdBug::Unsized(Unsized::ScanRows))?;
    let pw = Type::array(packed.dtype, vec![packed.shape[1].clone()]);
    let mut b = Builder::new(body.name.clone(), body.size_params.clone());
    let st = body.ty(body.params[0].var).clone();
    let p1 = body
        .params
        .get(1)
        .ok_or(AdBug::NotAScan("the VJP of a scan's row for"))?;
    let ins = [
        b.param("s", st.clone(), body.params[0].span),
        b.param("x", body.ty(p1.var).clone(), p1.span),
    ];
    let g = b.param("g", st.clone(), Default::default());
    let next = b.inline(body, &ins)?[0];
    let mut h = b
        .push("", Op::Mul, &[next, g], None)
        .map_err(AdError::from)?;
    if !st.is_scalar() {
        h = b.push("", Op::Sum, &[h], None).map_err(AdError::from)?;
    }
    let h = b.finish(vec![h]);
    let grads = reverse(&h, &[0, 1])?.gradient(&format!("{}.vjpseq", body.name));
    let mut b = Builder::new(format!("{}.vjpseq", body.name), body.size_params.clone());
    let args: Vec<VarId> = grads
        .params
        .iter()
        .map(|p| b.param(grads.var_name(p.var), grads.ty(p.var).clone(), p.span))
        .collect();
    let rets = b.inline(&grads, &args)?;
    let pack = (|| -> Result<VarId, OpTypeError> {
        let (gs, gx) = (flatten(&mut b, rets[0])?, flatten(&mut b, rets[1])?);
        // `gx` at the start, `gs` at the end (pads at static offsets only).
        let front = b.push("", Op::Pad(0), &[gx], Some(&pw))?;
        let back = b.push("", Op::Reverse, &[gs], None)?;
        let back = b.push("", Op::Pad(0), &[back], Some(&pw))?;
        let back = b.push("", Op::Reverse, &[back], None)?;
        b.push("", Op::Add, &[front, back], None)
    })()
    .map_err(AdError::from)?;
    Ok(b.finish(vec![pack]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::interp::run;
    use crate::ir::parse_functions;
    use crate::types::value::Value;
    use crate::types::DType;

    fn seed_loss() -> Function {
        parse_functions(
            "fn loss[N](%w: f32[N], %x: f32[N], %y: f32) -> f32 {
  %0: f32[N] = mul %w %x
  %pred: f32 = sum %0
  %err: f32 = sub %pred %y
  %1: f32 = mul %err %err
  ret %1
}",
        )
        .unwrap()
        .remove(0)
    }

    #[test]
    fn seed_gradient_is_252_315_378() {
        let r = reverse(&seed_loss(), &[0]).unwrap();
        let g = r.gradient("dloss_dw");
        g.validate().unwrap();
        let w = Value::f32(&[1.0, 2.0, 3.0]);
        let x = Value::f32(&[4.0, 5.0, 6.0]);
        let y = Value::scalar(DType::F32, 0.5);
        let out = run(&g, &[&w, &x, &y]).unwrap();
        assert_eq!(out[0].data, vec![252.0, 315.0, 378.0]);
        // The split pair computes the same thing.
        let fw = run(&r.forward, &[&w, &x, &y]).unwrap();
        let mut pargs: Vec<&Value> = fw[1..].iter().collect();
        let one = Value::scalar(DType::F32, 1.0);
        pargs.push(&one);
        let pb = run(&r.pullback, &pargs).unwrap();
        assert_eq!(pb[0].data, vec![252.0, 315.0, 378.0]);
    }

    #[test]
    fn shared_value_is_differentiated_once() {
        // x_{k+1} = sin(x_k) * x_k, 30 times: the adjoint stays linear.
        let mut text = String::from("fn chain(%x0: f64) -> f64 {\n");
        for k in 0..30 {
            text.push_str(&format!("  %s{k}: f64 = sin %x{k}\n"));
            text.push_str(&format!("  %x{}: f64 = mul %s{k} %x{k}\n", k + 1));
        }
        text.push_str("  ret %x30\n}\n");
        let f = &parse_functions(&text).unwrap()[0];
        let r = reverse(f, &[0]).unwrap();
        let adjoint = r.value_and_grad.stmts.len() - r.primal_len;
        assert!(adjoint <= 6 * 30 + 2, "adjoint has {adjoint} statements");
    }

    #[test]
    fn inactive_parameter_gets_a_symbolic_zero() {
        let f =
            &parse_functions("fn f(%a: f64, %b: f64) -> f64 {\n  %0: f64 = sin %a\n  ret %0\n}")
                .unwrap()[0];
        let r = reverse(f, &[0, 1]).unwrap();
        let g = r.gradient("g");
        assert_eq!(g.stmts.last().unwrap().op, Op::Zero);
    }
}

//! Reverse mode through a loop with captures (values its step reads that
//! the state does not carry): a loop of its own walks the steps back over
//! the tape, reading each state and the captures in place, carrying the
//! state's cotangent and summing each differentiated capture's, all in one
//! flat vector (`Builder::concat_leading`). A matrix read by
//! matrix-vector products (a weight matrix) has a cotangent per step that
//! is a sum of outer products `u vᵀ`: the walk keeps each step's `u` and
//! `v` on its tape instead, and one matrix product after the walk sums
//! them (`Walk::outer`). A scan's sequence has a cotangent per row: the
//! walk keeps each step's on its tape too (`Walk::row`).

use super::reverse::{add_cotangent, flatten, mapped, reverse, unflatten, Rev};
use super::{AdBug, AdError, AdLimit, Unsized};
use crate::ir::rows::total_width;
use crate::ir::{Builder, Function, Loop, Stmt, VarId};
use crate::ops::Op;
use crate::types::{DType, Dim, Type};

impl Rev<'_> {
    /// A loop statement `s` with captures (loop `l`, its tape `tape`) from
    /// its cotangent `g`: walked back by a loop of its own
    /// ([`capture_walk_loop`]) over the steps in reverse, reading each
    /// state from the tape and the captures in place, carrying the state's
    /// cotangent and accumulating each differentiated capture's; then
    /// contributions to the initial state and those captures. With
    /// `seeded`, `s` is the tape the program reads (`scan_all`) and `g`
    /// the whole tape's cotangent: its row 0 seeds the walk and row
    /// `1 + t` joins state `t`'s.
    pub(super) fn sweep_capture_walk(
        &mut self,
        s: &Stmt,
        g: VarId,
        l: u32,
        (tape, seeded): (VarId, bool),
    ) -> Result<(), AdError> {
        let f = self.f;
        let lp = &f.loops[l as usize];
        let scan = lp.is_scan();
        let fixed = s.op.arity();
        let st = lp.state().clone();
        // The sequence's cotangent: each step's row, kept on the walk's tape.
        let seq_wrt = scan && self.active[s.args[1].index()];
        if seq_wrt && lp.row().is_some_and(|r| r.dtype != st.dtype) {
            return Err(AdError::Unsupported(AdLimit::CapturingLoop));
        }
        let cap_tys = lp.capture_types();
        let caps = &s.args[fixed..];
        let mut wrt = Vec::new();
        for (j, c) in caps.iter().enumerate() {
            if self.active[c.index()] {
                if cap_tys[j].dtype != st.dtype {
                    return Err(AdError::Unsupported(AdLimit::CapturingLoop));
                }
                wrt.push(j);
            }
        }
        let e = AdError::from;
        // The tape as it is typed here (a size may be spelled another way
        // than in the loop's body after inlining, `n+1` for `ceil(n/1)+1`).
        let tape_ty = self.b.ty(tape).clone();
        let (walk, lay) = capture_walk_loop(&mut self.b, lp, &wrt, (&tape_ty, seeded), seq_wrt)?;
        let b = &mut self.b;
        // The walk's start: the result's cotangent, and zeros.
        let last = if seeded {
            b.push("", Op::Index(0), &[g], None).map_err(e)?
        } else {
            g
        };
        let n_parts = lay.widths.len();
        let mut parts = Vec::with_capacity(n_parts);
        for w in &lay.widths[..n_parts - 1] {
            let t = Type::array(st.dtype, vec![w.clone()]);
            parts.push(b.push("", Op::Zero, &[], Some(&t)).map_err(e)?);
        }
        parts.push(flat_as(b, last, &lay.widths[n_parts - 1])?);
        let acc0 = b.concat_leading(&parts, &lay.widths)?;
        // The steps in reverse: `count - 1, ..., 0`.
        let steps = Type::array(DType::I64, vec![lp.count.clone()]);
        let iota = b.push("", Op::Iota, &[], Some(&steps)).map_err(e)?;
        let back = b.push("", Op::Reverse, &[iota], None).map_err(e)?;
        let mut ins = vec![acc0, back];
        ins.extend(caps.iter().map(|c| mapped(&self.map, *c)));
        ins.push(tape);
        if scan {
            ins.push(mapped(&self.map, s.args[1]));
        }
        if seeded {
            ins.push(g);
        }
        // With outer products or the sequence's rows, the walk's every
        // state: each step's `u` and `v`, and its row's cotangent, are
        // columns of it.
        let walk_tape = if lay.outer.is_empty() && lay.row.is_none() {
            None
        } else {
            let total = total_width(&lay.widths).ok_or(AdBug::Unsized(Unsized::State))?;
            let ty = Type::array(st.dtype, vec![lp.tape_rows(1), total]);
            let ty = Some(&ty);
            Some(
                b.push("", Op::LoopTape(walk, 1, true), &ins, ty)
                    .map_err(e)?,
            )
        };
        let acc = match walk_tape {
            Some(t) => b.push("", Op::Index(0), &[t], None).map_err(e)?,
            None => b.push("", Op::Loop(walk, true), &ins, None).map_err(e)?,
        };
        let parts = b.split_leading(acc, &lay.widths)?;
        // Each cotangent in its value's own type (see `tape_ty`).
        let own = |a: VarId| f.ty(a).clone();
        let mut contribs = vec![(
            s.args[0],
            unflatten(b, parts[n_parts - 1], &own(s.args[0])).map_err(e)?,
        )];
        if let (Some(r), Some(t)) = (lay.row, walk_tape) {
            // Walk step `j` went back over step `count - 1 - j`.
            let rows = b
                .states_after_steps(t, lp.count.clone(), 0, None)
                .map_err(e)?;
            let rows = b.columns_part(rows, &lay.widths, r).map_err(e)?;
            let rows = b.push("", Op::Reverse, &[rows], None).map_err(e)?;
            let seq = s.args[1];
            let rows = b
                .push("", Op::Reshape, &[rows], Some(&own(seq)))
                .map_err(e)?;
            contribs.push((seq, rows));
        }
        for (k, &j) in wrt.iter().enumerate() {
            let c = match (lay.part[k], walk_tape) {
                (Part::Acc(p), _) => unflatten(b, parts[p], &own(caps[j])).map_err(e)?,
                (Part::Outer(from, to), Some(t)) => {
                    outer_sum(b, t, &lay.widths, &lay.outer[from..to], &own(caps[j]))?
                }
                (Part::Outer(..), None) => return Err(AdBug::Unsized(Unsized::State).into()),
            };
            contribs.push((caps[j], c));
        }
        for (a, contrib) in contribs {
            if self.active[a.index()] {
                add_cotangent(b, &mut self.ct, a, contrib)?;
            }
        }
        Ok(())
    }
}

/// `v` flattened to a vector of length `w`, spelled so (a size may be
/// spelled two ways: `n+1` and a tape's `ceil(n/1)+1`).
fn flat_as(b: &mut Builder, v: VarId, w: &Dim) -> Result<VarId, AdError> {
    let e = AdError::from;
    let flat = flatten(b, v).map_err(e)?;
    let t = Type::array(b.ty(flat).dtype, vec![w.clone()]);
    if b.ty(flat) == &t {
        return Ok(flat);
    }
    b.push("", Op::Reshape, &[flat], Some(&t)).map_err(e)
}

/// What each differentiated capture's cotangent is in a walk's state
/// ([`Walk`]).
#[derive(Clone, Copy, Debug)]
enum Part {
    /// Summed over the steps in this part of the state.
    Acc(usize),
    /// The outer products `Walk::outer[from..to]`.
    Outer(usize, usize),
}

/// The layout of a capturing loop's walk state (a flat vector): the parts'
/// lengths `widths` end to end; the state's cotangent is the last part.
struct Walk {
    widths: Vec<Dim>,
    /// Each differentiated capture's cotangent (in `wrt`'s order).
    part: Vec<Part>,
    /// The parts `(u, v)` holding a step's `u` and `v` of an outer product
    /// `u vᵀ`: the walk keeps every state, and the cotangent is
    /// `Σ_t u_t v_tᵀ = Uᵀ V` over those columns ([`outer_sum`]).
    outer: Vec<(usize, usize)>,
    /// The part holding the cotangent of the row a step of a scan read,
    /// when the sequence is differentiated: the walk keeps every state,
    /// and the sequence's cotangent is that part of each, in reverse.
    row: Option<usize>,
}

/// The outer products `spread(u) * repeat(v)` (each `u vᵀ`, `u` and `v`
/// vectors) whose sum `v` of `f` is, through its `add`s; `None` if it is
/// not such a sum.
fn outer_terms(f: &Function, defs: &[Option<usize>], v: VarId) -> Option<Vec<(VarId, VarId)>> {
    let def = |v: VarId| defs.get(v.index()).copied().flatten().map(|i| &f.stmts[i]);
    let vector = |v: VarId| f.ty(v).rank() == 1;
    let mut terms = Vec::new();
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        let s = def(v)?;
        match (s.op, s.args.as_slice()) {
            (Op::Add, &[a, b]) => stack.extend([b, a]),
            (Op::Mul, &[a, b]) if f.ty(s.var).rank() == 2 => {
                let (da, db) = (def(a)?, def(b)?);
                let (u, w) = match (da.op, db.op) {
                    (Op::Spread, Op::Repeat) => (da.args[0], db.args[0]),
                    (Op::Repeat, Op::Spread) => (db.args[0], da.args[0]),
                    _ => return None,
                };
                if !vector(u) || !vector(w) {
                    return None;
                }
                terms.push((u, w));
            }
            _ => return None,
        }
    }
    Some(terms)
}

/// Columns `widths[j]` of the matrix `t` whose rows are flat walk states
/// (parts of lengths `widths`), transposed: `T[widths[j], rows]`.
fn part_columns(b: &mut Builder, t: VarId, widths: &[Dim], j: usize) -> Result<VarId, AdError> {
    let cols = b.push("", Op::Transpose, &[t], None)?;
    Ok(b.leading_part(cols, widths, j)?)
}

/// `Σ_k U_kᵀ V_k` over the outer products `terms` (parts of the rows of
/// the walk's tape `t`), typed `ty`: a capture's cotangent summed over
/// the steps, one matrix product per term.
fn outer_sum(
    b: &mut Builder,
    t: VarId,
    widths: &[Dim],
    terms: &[(usize, usize)],
    ty: &Type,
) -> Result<VarId, AdError> {
    let e = AdError::from;
    let mut sum: Option<VarId> = None;
    for &(u, v) in terms {
        let ut = part_columns(b, t, widths, u)?;
        let vt = part_columns(b, t, widths, v)?;
        let vs = b.push("", Op::Transpose, &[vt], None).map_err(e)?;
        let p = b.push("", Op::MatMul, &[ut, vs], None).map_err(e)?;
        let p = if b.ty(p) == ty {
            p
        } else {
            b.push("", Op::Reshape, &[p], Some(ty)).map_err(e)?
        };
        sum = Some(match sum {
            Some(s) => b.push("", Op::Add, &[s, p], None).map_err(e)?,
            None => p,
        });
    }
    sum.ok_or_else(|| AdBug::Unsized(Unsized::State).into())
}

/// The variable of `vjp` (built by `reverse` from `h`, whose first
/// statements are `h`'s in order) that holds `h`'s value `v`, if `v` is
/// computed by a statement of `h` and `vjp` starts with them.
fn result_in_vjp(h: &Function, vjp: &Function, v: VarId) -> Option<VarId> {
    let at = h.stmts.iter().position(|s| s.var == v)?;
    let same = h.stmts.len() <= vjp.stmts.len()
        && h.stmts.iter().zip(&vjp.stmts).all(|(a, b)| {
            a.op == b.op && a.args.len() == b.args.len() && h.ty(a.var) == vjp.ty(b.var)
        });
    same.then(|| vjp.stmts[at].var)
}

/// State `t + 1` of a loop from its tape of every state (`looptape L 1`,
/// the final state in row 0 and state `j` in row `1 + j`, `rows` rows):
/// row `(t + 2) % rows`.
fn next_state(b: &mut Builder, (tape, rows): (VarId, VarId), t: VarId) -> Result<VarId, AdError> {
    let e = AdError::from;
    let two = b.constant(DType::I64, 2.0);
    let at = b.push("", Op::Add, &[t, two], None).map_err(e)?;
    let at = b.push("", Op::Rem, &[at, rows], None).map_err(e)?;
    b.push("next", Op::Gather(0), &[tape, at], None).map_err(e)
}

/// The layout of the walk's state ([`Walk`]) for the gradient `vjp` of a
/// loop's step (results: the state's cotangent, then those of the captures
/// `wrt` of types `cap_tys`) and state `st`: the summed cotangents, then
/// the outer products' vectors (which `vjp` then also returns, after its
/// first results, whose number is returned too), then with `row` (a scan
/// differentiated with respect to its sequence, whose row's cotangent is
/// `vjp`'s last first result) that row's, then the state's.
fn walk_layout(
    vjp: &mut Function,
    wrt: &[usize],
    cap_tys: &[Type],
    (st, row): (&Type, Option<&Type>),
) -> Result<(Walk, usize), AdError> {
    let defs = vjp.definitions();
    let terms: Vec<Option<Vec<(VarId, VarId)>>> = (0..wrt.len())
        .map(|k| outer_terms(vjp, &defs, vjp.rets[1 + k]))
        .collect();
    let split = terms.iter().any(Option::is_some)
        && wrt
            .iter()
            .zip(&terms)
            .all(|(&j, t)| cap_tys[j].rank() < 2 || t.is_some());
    let size = |t: &Type| Dim::product(&t.shape).ok_or(AdBug::Unsized(Unsized::State));
    let mut lay = Walk {
        widths: Vec::new(),
        part: Vec::new(),
        outer: Vec::new(),
        row: None,
    };
    let mut extra = Vec::new();
    for (k, &j) in wrt.iter().enumerate() {
        if let (true, Some(_)) = (split, &terms[k]) {
            lay.part.push(Part::Outer(0, 0));
        } else {
            lay.part.push(Part::Acc(lay.widths.len()));
            lay.widths.push(size(&cap_tys[j])?);
        }
    }
    for (k, t) in terms.iter().enumerate() {
        let (Part::Outer(..), Some(t)) = (lay.part[k], t) else {
            continue;
        };
        let from = lay.outer.len();
        for &(u, v) in t {
            let at = lay.widths.len();
            lay.widths.push(size(vjp.ty(u))?);
            lay.widths.push(size(vjp.ty(v))?);
            lay.outer.push((at, at + 1));
            extra.extend([u, v]);
        }
        lay.part[k] = Part::Outer(from, lay.outer.len());
    }
    if let Some(r) = row {
        lay.row = Some(lay.widths.len());
        lay.widths.push(size(r)?);
    }
    lay.widths.push(size(st)?);
    let n_rets = vjp.rets.len();
    vjp.rets.extend(extra);
    Ok((lay, n_rets))
}

/// The loop walking a capturing loop `lp` back: a scan over the steps in
/// reverse (its rows `t`), carrying the differentiated captures' (`wrt`)
/// cotangents and the state's ([`Walk`]) and capturing the loop's
/// captures, its tape and (for a scan) its sequence. Step `t` reads state
/// `t` (the tape's row `t + 1`) and applies the body's VJP with respect to
/// the state and those captures. With `seeded`, it also captures the
/// cotangent of the whole tape, whose row `t + 1` it adds to state `t`'s.
///
/// When every differentiated matrix capture's cotangent per step is a sum
/// of outer products (a matrix read by matrix-vector products), the walk
/// carries each step's `u` and `v` instead of summing them: the caller
/// keeps the walk's every state and multiplies them once ([`outer_sum`]).
/// Any other matrix capture is summed by the walk, and then so are all.
fn capture_walk_loop(
    b: &mut Builder,
    lp: &Loop,
    wrt: &[usize],
    (tape_ty, seeded): (&Type, bool),
    seq_wrt: bool,
) -> Result<(u32, Walk), AdError> {
    let e = AdError::from;
    let body = &lp.body;
    let st = lp.state().clone();
    let scan = lp.is_scan();
    let cap_tys = lp.capture_types();
    let span = Default::default();
    // h(s, [x,] c.., g) = Σ body(s, [x,] c..) · g; its gradient with
    // respect to `s` and the captures in `wrt`.
    let mut hb = Builder::new(body.name.clone(), body.size_params.clone());
    let mut ins = vec![hb.param("s", st.clone(), span)];
    if let Some(r) = lp.row() {
        ins.push(hb.param("x", r.clone(), span));
    }
    for (j, t) in cap_tys.iter().enumerate() {
        ins.push(hb.param(&format!("c{j}"), t.clone(), span));
    }
    let g = hb.param("g", st.clone(), span);
    let next = hb.inline(body, &ins)?[0];
    let mut h = hb.push("", Op::Mul, &[next, g], None).map_err(e)?;
    if !st.is_scalar() {
        h = hb.push("", Op::Sum, &[h], None).map_err(e)?;
    }
    let h = hb.finish(vec![h]);
    let first_cap = 1 + usize::from(scan);
    let wrt_params: Vec<usize> = std::iter::once(0)
        .chain(wrt.iter().map(|j| first_cap + j))
        .chain(seq_wrt.then_some(1))
        .collect();
    // The gradient as `reverse` builds it (not pruned: its first
    // statements are `h`'s, one for one), to find the body's result in it.
    let mut vjp = reverse(&h, &wrt_params)?.value_and_grad;
    vjp.name = format!("{}.vjp", body.name);
    vjp.rets.remove(0);
    let result = result_in_vjp(&h, &vjp, next);
    let row = lp.row().filter(|_| seq_wrt);
    let (lay, n_rets) = walk_layout(&mut vjp, wrt, &cap_tys, (&st, row))?;
    // The walk's body.
    let total = total_width(&lay.widths).ok_or(AdBug::Unsized(Unsized::State))?;
    let mut wb = Builder::new(format!("{}.walk", body.name), body.size_params.clone());
    let acc = wb.param("acc", Type::array(st.dtype, vec![total]), span);
    let t = wb.param("t", Type::scalar(DType::I64), span);
    let caps: Vec<VarId> = cap_tys
        .iter()
        .enumerate()
        .map(|(j, ty)| wb.param(&format!("c{j}"), ty.clone(), span))
        .collect();
    let tape = wb.param("tape", tape_ty.clone(), span);
    let xs = match lp.sequence() {
        Some(seq) if scan => Some(wb.param("xs", seq, span)),
        _ => None,
    };
    let gtape = seeded.then(|| wb.param("gtape", tape_ty.clone(), span));
    let parts = wb.split_leading(acc, &lay.widths)?;
    let last = lay.widths.len() - 1;
    let ct = unflatten(&mut wb, parts[last], &st).map_err(e)?;
    // State `t` is the tape's row `t + 1`, written `(t + 1) % rows` (the
    // same row, `t < count`), which the backend sees lies inside: no check.
    let one = wb.constant(DType::I64, 1.0);
    let row = wb.push("", Op::Add, &[t, one], None).map_err(e)?;
    let rows = wb.push("", Op::Dim(0), &[tape], None).map_err(e)?;
    let row = wb.push("", Op::Rem, &[row, rows], None).map_err(e)?;
    let mut vin = vec![wb.push("s", Op::Gather(0), &[tape, row], None).map_err(e)?];
    if let Some(xs) = xs {
        vin.push(wb.push("x", Op::Gather(0), &[xs, t], None).map_err(e)?);
    }
    vin.extend(caps.iter().copied());
    vin.push(ct);
    // The step's result is the next state, on the tape: read, not
    // recomputed (a derivative that reads its own result, as `tanh`'s,
    // then needs nothing else of the step).
    let mut known = Vec::new();
    if let Some(r) = result {
        let next = next_state(&mut wb, (tape, rows), t)?;
        known.push((r, next));
    }
    let outs = wb.inline_replacing(&vjp, &vin, &known)?;
    let mut ct = outs[0];
    if let Some(gt) = gtape {
        let gs = wb.push("", Op::Gather(0), &[gt, row], None).map_err(e)?;
        ct = wb.push("", Op::Add, &[ct, gs], None).map_err(e)?;
    }
    let mut next = Vec::with_capacity(lay.widths.len());
    for (k, p) in lay.part.iter().enumerate() {
        if let Part::Acc(p) = *p {
            let c = flat_as(&mut wb, outs[1 + k], &lay.widths[p])?;
            next.push(wb.push("", Op::Add, &[parts[p], c], None).map_err(e)?);
        }
    }
    // The outer products' vectors: the parts after the sums; then the
    // row's cotangent.
    for &v in &outs[n_rets..] {
        let w = lay.widths[next.len()].clone();
        next.push(flat_as(&mut wb, v, &w)?);
    }
    if let Some(r) = lay.row {
        next.push(flat_as(&mut wb, outs[1 + wrt.len()], &lay.widths[r])?);
    }
    next.push(flat_as(&mut wb, ct, &lay.widths[last])?);
    let next = wb.concat_leading(&next, &lay.widths)?;
    let walk = wb.finish(vec![next]);
    let id = b.add_loop(Loop {
        count: lp.count.clone(),
        body: walk,
        vjp: None,
        settles: false,
        captures: cap_tys.len() + 1 + usize::from(scan) + usize::from(seeded),
    });
    Ok((id, lay))
}

//! Reverse mode through a loop with captures (values its step reads that
//! the state does not carry): a loop of its own walks the steps back over
//! the tape, reading each state and the captures in place, carrying the
//! state's cotangent and summing each differentiated capture's, all in one
//! flat vector (`pack_walk`).

use super::reverse::{add_cotangent, flatten, mapped, reverse, unflatten, Rev};
use super::{AdBug, AdError, AdLimit, Unsized};
use crate::ir::{Builder, Loop, Stmt, VarId};
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
        if scan && self.active[s.args[1].index()] {
            return Err(AdError::Unsupported(AdLimit::CapturingLoop));
        }
        let st = lp.state().clone();
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
        let widths = capture_widths(&st, &cap_tys, &wrt)?;
        let e = AdError::from;
        // The tape as it is typed here (a size may be spelled another way
        // than in the loop's body after inlining, `n+1` for `ceil(n/1)+1`).
        let tape_ty = self.b.ty(tape).clone();
        let walk = capture_walk_loop(&mut self.b, lp, &wrt, (&widths, &tape_ty, seeded))?;
        let b = &mut self.b;
        // The walk's start: the result's cotangent, and zeros.
        let last = if seeded {
            b.push("", Op::Index(0), &[g], None).map_err(e)?
        } else {
            g
        };
        let mut parts = vec![flat_as(b, last, &widths[0])?];
        for w in &widths[1..] {
            let t = Type::array(st.dtype, vec![w.clone()]);
            parts.push(b.push("", Op::Zero, &[], Some(&t)).map_err(e)?);
        }
        let acc0 = pack_walk(b, &parts, &widths)?;
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
        let acc = b.push("", Op::Loop(walk, true), &ins, None).map_err(e)?;
        let parts = unpack_walk(b, acc, &widths)?;
        // Each cotangent in its value's own type (see `tape_ty`).
        let own = |a: VarId| f.ty(a).clone();
        let mut contribs = vec![(
            s.args[0],
            unflatten(b, parts[0], &own(s.args[0])).map_err(e)?,
        )];
        for (k, &j) in wrt.iter().enumerate() {
            contribs.push((
                caps[j],
                unflatten(b, parts[1 + k], &own(caps[j])).map_err(e)?,
            ));
        }
        for (a, contrib) in contribs {
            if self.active[a.index()] {
                add_cotangent(b, &mut self.ct, a, contrib)?;
            }
        }
        Ok(())
    }
}

/// The elements of a capturing loop's walk state ([`capture_walk_loop`]):
/// the state's, then each differentiated capture's (`wrt`, of `cap_tys`).
fn capture_widths(st: &Type, cap_tys: &[Type], wrt: &[usize]) -> Result<Vec<Dim>, AdError> {
    let size = |t: &Type| Dim::product(&t.shape).ok_or(AdBug::Unsized(Unsized::State));
    let mut widths = vec![size(st)?];
    for &j in wrt {
        widths.push(size(&cap_tys[j])?);
    }
    Ok(widths)
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

/// The sum of `widths`.
fn total_width(widths: &[Dim]) -> Result<Dim, AdError> {
    let mut total = Dim::Lit(0);
    for w in widths {
        total = total.plus(w).ok_or(AdBug::Unsized(Unsized::State))?;
    }
    Ok(total)
}

/// The vectors `parts` (of lengths `widths`) end to end, each padded with
/// zeros to the whole length and added.
fn concat_flat(b: &mut Builder, parts: &[VarId], widths: &[Dim]) -> Result<VarId, AdError> {
    let e = AdError::from;
    let total = total_width(widths)?;
    let dtype = b.ty(parts[0]).dtype;
    let whole = Type::array(dtype, vec![total]);
    let mut sum: Option<VarId> = None;
    for (j, &p) in parts.iter().enumerate() {
        let placed = if j == 0 {
            b.push("", Op::Pad(0), &[p], Some(&whole)).map_err(e)?
        } else {
            // `[p ; zeros]` as long as what remains from here, then put at
            // the end of the whole.
            let rest = Type::array(dtype, vec![total_width(&widths[j..])?]);
            let tail = if rest.shape == b.ty(p).shape {
                p
            } else {
                b.push("", Op::Pad(0), &[p], Some(&rest)).map_err(e)?
            };
            let r = b.push("", Op::Reverse, &[tail], None).map_err(e)?;
            let r = b.push("", Op::Pad(0), &[r], Some(&whole)).map_err(e)?;
            b.push("", Op::Reverse, &[r], None).map_err(e)?
        };
        sum = Some(match sum {
            Some(s) => b.push("", Op::Add, &[s, placed], None).map_err(e)?,
            None => placed,
        });
    }
    sum.ok_or_else(|| AdBug::Unsized(Unsized::State).into())
}

/// The parts of the vector `v` of lengths `widths` ([`concat_flat`]'s
/// inverse).
fn split_flat(b: &mut Builder, v: VarId, widths: &[Dim]) -> Result<Vec<VarId>, AdError> {
    let e = AdError::from;
    let dtype = b.ty(v).dtype;
    let mut parts = Vec::new();
    for (j, w) in widths.iter().enumerate() {
        let from = if j == 0 {
            v
        } else {
            b.trailing(v, total_width(&widths[j..])?).map_err(e)?
        };
        let t = Type::array(dtype, vec![w.clone()]);
        parts.push(if b.ty(from) == &t {
            from
        } else {
            b.push("", Op::Slice(0), &[from], Some(&t)).map_err(e)?
        });
    }
    Ok(parts)
}

/// A capturing loop's walk state from its parts `[state's cotangent,
/// captures' ...]` (of lengths `widths`): the captures' first, so the
/// large ones are read and written from the front (the cheapest index
/// maps), the state's last.
fn pack_walk(b: &mut Builder, parts: &[VarId], widths: &[Dim]) -> Result<VarId, AdError> {
    let mut p = parts.to_vec();
    let mut w = widths.to_vec();
    p.rotate_left(1);
    w.rotate_left(1);
    concat_flat(b, &p, &w)
}

/// The parts of a walk state ([`pack_walk`]'s inverse).
fn unpack_walk(b: &mut Builder, v: VarId, widths: &[Dim]) -> Result<Vec<VarId>, AdError> {
    let mut w = widths.to_vec();
    w.rotate_left(1);
    let mut parts = split_flat(b, v, &w)?;
    parts.rotate_right(1);
    Ok(parts)
}

/// The loop walking a capturing loop `lp` back: a scan over the steps in
/// reverse (its rows `t`), carrying `[state's cotangent ; each
/// differentiated capture's (wrt) accumulated]` (of lengths `widths`) and
/// capturing the loop's captures, its tape and (for a scan) its sequence.
/// Step `t` reads state `t` (the tape's row `t + 1`) and applies the
/// body's VJP with respect to the state and those captures. With
/// `seeded`, it also captures the cotangent of the whole tape, whose row
/// `t + 1` it adds to state `t`'s.
fn capture_walk_loop(
    b: &mut Builder,
    lp: &Loop,
    wrt: &[usize],
    (widths, tape_ty, seeded): (&[Dim], &Type, bool),
) -> Result<u32, AdError> {
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
        .collect();
    let vjp = reverse(&h, &wrt_params)?.gradient(&format!("{}.vjp", body.name));
    // The walk's body.
    let total = total_width(widths)?;
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
    let parts = unpack_walk(&mut wb, acc, widths)?;
    let ct = unflatten(&mut wb, parts[0], &st).map_err(e)?;
    let one = wb.constant(DType::I64, 1.0);
    let row = wb.push("", Op::Add, &[t, one], None).map_err(e)?;
    let mut vin = vec![wb.push("s", Op::Gather(0), &[tape, row], None).map_err(e)?];
    if let Some(xs) = xs {
        vin.push(wb.push("x", Op::Gather(0), &[xs, t], None).map_err(e)?);
    }
    vin.extend(caps.iter().copied());
    vin.push(ct);
    let outs = wb.inline(&vjp, &vin)?;
    let mut ct = outs[0];
    if let Some(gt) = gtape {
        let gs = wb.push("", Op::Gather(0), &[gt, row], None).map_err(e)?;
        ct = wb.push("", Op::Add, &[ct, gs], None).map_err(e)?;
    }
    let mut next = vec![flat_as(&mut wb, ct, &widths[0])?];
    for k in 0..wrt.len() {
        let c = flat_as(&mut wb, outs[1 + k], &widths[1 + k])?;
        next.push(wb.push("", Op::Add, &[parts[1 + k], c], None).map_err(e)?);
    }
    let next = pack_walk(&mut wb, &next, widths)?;
    let walk = wb.finish(vec![next]);
    Ok(b.add_loop(Loop {
        count: lp.count.clone(),
        body: walk,
        vjp: None,
        settles: false,
        captures: cap_tys.len() + 1 + usize::from(scan) + usize::from(seeded),
    }))
}

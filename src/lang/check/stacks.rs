//! Ops that are not element-wise applied to each element of a stack (a
//! value that depends on the index of `tabulate`, see `tabulate.rs`):
//! the row shifts, `reverse`, `transpose`, `matmul`, broadcasts, sums
//! over a leading axis and gathers, so that the body of a called function
//! runs on stacks as on one value. Each is a rearrangement of the stack's
//! elements: one gather (or scatter, for the adjoints `pad` and
//! `unindex`) from the stack with its first two axes merged, at indices
//! `t * K + w` where `w` is the op's own index pattern on one element,
//! computed once (and checked against `K` once), or a reshape around the
//! op itself where rows of the stack are rows of the op.

use super::{FnCx, Val};
use crate::ir::interp::pack_site;
use crate::ir::VarId;
use crate::ops::Op;
use crate::types::{DType, Dim, Type};

impl<'a> FnCx<'a> {
    /// `op(args)` applied to each element of the stacks among `args` (the
    /// others the same for every element); `annot` is one element's
    /// annotation. None where the op has no such form here (the caller
    /// reports it as not supported).
    pub(super) fn push_stacked(
        &mut self,
        hint: &str,
        op: Op,
        args: &[VarId],
        annot: Option<&Type>,
    ) -> Option<Val> {
        let (total, span) = self.batch.clone()?;
        let site = pack_site(span.start, span.end);
        let stacked: Vec<bool> = args.iter().map(|a| self.batched.contains(a)).collect();
        let raw = |cx: &Self, v: VarId| cx.b.ty(v).clone();
        let x = args[0];
        if let (Op::Index(_) | Op::Slice(_) | Op::Pad(_) | Op::Unindex(_) | Op::Reverse, [true]) =
            (op, &stacked[..])
        {
            if let Some(r) = self.along_rows(op, x, annot, hint) {
                return Some(Val::Var(r));
            }
        }
        let r = match (op, &stacked[..]) {
            (Op::Index(n), [true]) => {
                let w = self.b.constant(DType::I64, n as f64);
                self.gather_each(x, w, site, hint)?
            }
            (Op::Slice(off), [true]) => {
                let len = annot?.shape.first()?.clone();
                let w = self.iota_from(&len, off)?;
                self.gather_each(x, w, site, hint)?
            }
            (Op::Reverse, [true]) => {
                let k = raw(self, x).shape.get(1)?.clone();
                let i = self.plain(Op::Iota, &[], Some(&ints(&[k])))?;
                let w = self.plain(Op::Reverse, &[i], None)?;
                self.gather_each(x, w, site, hint)?
            }
            (Op::Transpose, [true]) => self.transpose_each(x, site, hint)?,
            (Op::Repeat, [true]) => {
                // Each element `e` as `[e, e, ...]`: its one row, L times.
                let t = raw(self, x);
                let mut one = vec![total.clone(), Dim::Lit(1)];
                one.extend(t.shape[1..].iter().cloned());
                let x1 = self.plain(Op::Reshape, &[x], Some(&Type::array(t.dtype, one)))?;
                let len = annot?.shape.first()?.clone();
                let Val::Var(w) = self.materialize(0.0, &ints(&[len]), "") else {
                    return None;
                };
                self.gather_each(x1, w, site, hint)?
            }
            (Op::Spread, [true]) => {
                // Element `l` of each vector filling row `l`.
                let a = annot?;
                let i = self.plain(Op::Iota, &[], Some(&ints(a.shape.get(..1)?)))?;
                let w = self.plain(Op::Spread, &[i], Some(&ints(&a.shape)))?;
                self.gather_each(x, w, site, hint)?
            }
            (Op::SumTail | Op::MaxTail | Op::MinTail, [true]) => {
                // Rows of the elements are rows of the stack.
                let t = raw(self, x);
                let rows = total.times(t.shape.get(1)?)?;
                let mut flat = vec![rows.clone()];
                flat.extend(t.shape[2..].iter().cloned());
                let f = self.plain(Op::Reshape, &[x], Some(&Type::array(t.dtype, flat)))?;
                let s = self.plain(op, &[f], None)?;
                let back = Type::array(t.dtype, vec![total.clone(), t.shape[1].clone()]);
                self.named(hint, Op::Reshape, &[s], Some(&back))?
            }
            (Op::SumLead, [true]) => {
                let t = raw(self, x);
                if t.rank() == 2 {
                    self.named(hint, Op::SumTail, &[x], None)?
                } else {
                    self.sum_lead_each(x, &total, site, hint)?
                }
            }
            (Op::Gather(s), [true, false]) => self.gather_each(x, args[1], s, hint)?,
            (Op::Gather(s), [true, true]) => self.gather_each(x, args[1], s, hint)?,
            (Op::Pad(off), [true]) => {
                let len = raw(self, x).shape.get(1)?.clone();
                let w = self.iota_from(&len, off)?;
                self.scatter_each(x, w, annot?, site, hint)?
            }
            (Op::Unindex(n), [true]) => {
                let w = self.b.constant(DType::I64, n as f64);
                self.scatter_each(x, w, annot?, site, hint)?
            }
            (Op::Scatter(s), [_, true]) => self.scatter_each(args[1], x, annot?, s, hint)?,
            (Op::Scatter(s), [true, false]) => {
                // Indices per element, values the same for each (a
                // constant cotangent at a label's row): the values
                // repeated for every element.
                let t = raw(self, args[1]);
                let mut shape = vec![total.clone()];
                shape.extend(t.shape.iter().cloned());
                let lift = if t.is_scalar() { Op::Bcast } else { Op::Repeat };
                let v = self.plain(lift, &[args[1]], Some(&Type::array(t.dtype, shape)))?;
                self.scatter_each(v, x, annot?, s, hint)?
            }
            (Op::MatMul, [true, false]) => {
                // The elements' rows are rows of one matrix.
                let t = raw(self, x);
                let (m, k) = (t.shape.get(1)?.clone(), t.shape.get(2)?.clone());
                let rows = total.times(&m)?;
                let f = self.plain(
                    Op::Reshape,
                    &[x],
                    Some(&Type::array(t.dtype, vec![rows, k])),
                )?;
                let p = self.plain(Op::MatMul, &[f, args[1]], None)?;
                let n = self.b.ty(args[1]).shape.get(1)?.clone();
                let back = Type::array(t.dtype, vec![total.clone(), m, n]);
                self.named(hint, Op::Reshape, &[p], Some(&back))?
            }
            (Op::MatMul, [false, true]) => self.matmul_each_right(x, args[1], &total, hint)?,
            _ => return None,
        };
        Some(Val::Var(r))
    }

    /// `SumLead` of each element of the stack `x` (`T[T, L, r..]`, of rank
    /// above 2): each element `[L, r..]` as `[R, L]` (a transpose of its
    /// rows, one gather at `site`), then the sum of each row.
    fn sum_lead_each(&mut self, x: VarId, total: &Dim, site: u64, hint: &str) -> Option<VarId> {
        let t = self.b.ty(x).clone();
        // Each element `[L, r..]` as `[R, L]` (a transpose of
        // its rows), then the sum of each row.
        let l = t.shape.get(1)?.clone();
        let r = Dim::product(&t.shape[2..])?;
        let lr = l.times(&r)?;
        let f = self.plain(
            Op::Reshape,
            &[x],
            Some(&Type::array(t.dtype, vec![total.clone(), lr.clone()])),
        )?;
        let n = self.plain(Op::Iota, &[], Some(&ints(&[lr])))?;
        let g = self.plain(Op::Reshape, &[n], Some(&ints(&[l.clone(), r.clone()])))?;
        let w = self.plain(Op::Transpose, &[g], None)?;
        let p = self.gather_each(f, w, site, "")?;
        let rows = total.times(&r)?;
        let p = self.plain(
            Op::Reshape,
            &[p],
            Some(&Type::array(t.dtype, vec![rows, l])),
        )?;
        let s = self.plain(Op::SumTail, &[p], None)?;
        let mut back = vec![total.clone()];
        back.extend(t.shape[2..].iter().cloned());
        self.named(hint, Op::Reshape, &[s], Some(&Type::array(t.dtype, back)))
    }

    /// `matmul(x, b)` for the plain matrix `x` and each element of the
    /// stack `b`.
    fn matmul_each_right(&mut self, x: VarId, b: VarId, total: &Dim, hint: &str) -> Option<VarId> {
        // A B_t for each element t: B's stack with its two leading
        // axes swapped (`[K, T, N]`, row gathers) is one matrix
        // `[K, T*N]`, so one product `[M, T*N]`, swapped back.
        let bt = self.b.ty(b).clone();
        let (k, n) = (bt.shape.get(1)?.clone(), bt.shape.get(2)?.clone());
        let m = self.b.ty(x).shape[0].clone();
        let sw = self.b.swap_leading_axes(b).ok()?;
        let tn = total.times(&n)?;
        let wide = self.plain(
            Op::Reshape,
            &[sw],
            Some(&Type::array(bt.dtype, vec![k, tn])),
        )?;
        let p = self.plain(Op::MatMul, &[x, wide], None)?;
        let p = self.plain(
            Op::Reshape,
            &[p],
            Some(&Type::array(bt.dtype, vec![m, total.clone(), n])),
        )?;
        let r = self.b.swap_leading_axes(p).ok()?;
        let out = self.b.ty(r).clone();
        self.named(hint, Op::Reshape, &[r], Some(&out))
    }

    /// Rows `w` of each element of the stack `x` (`T[T, K, r..]`), `w` an
    /// `i64` array of one element's pattern (the same for every element,
    /// or a stack of them) checked against `K` (an error at `site`
    /// otherwise): `T[T, w.., r..]`, one gather.
    pub(super) fn gather_each(
        &mut self,
        x: VarId,
        w: VarId,
        site: u64,
        hint: &str,
    ) -> Option<VarId> {
        let t = self.b.ty(x).clone();
        if t.rank() < 2 {
            return None;
        }
        let at = self.each_at(&t.shape[0], &t.shape[1], w, site)?;
        let all = t.shape[0].times(&t.shape[1])?;
        let mut flat = vec![all];
        flat.extend(t.shape[2..].iter().cloned());
        let f = self.plain(Op::Reshape, &[x], Some(&Type::array(t.dtype, flat)))?;
        let r = self.named(hint, Op::Gather(site), &[f, at], None)?;
        self.note_gather(r);
        Some(r)
    }

    /// Each element of the stack `x` placed at rows `w` of a zero array of
    /// one element's type `to` (`T[K, r..]`): the adjoint of
    /// [`FnCx::gather_each`], one scatter.
    fn scatter_each(
        &mut self,
        x: VarId,
        w: VarId,
        to: &Type,
        site: u64,
        hint: &str,
    ) -> Option<VarId> {
        let (total, _) = self.batch.clone()?;
        let at = self.each_at(&total, to.shape.first()?, w, site)?;
        let all = total.times(&to.shape[0])?;
        let mut flat = vec![all];
        flat.extend(to.shape[1..].iter().cloned());
        let s = self.plain(
            Op::Scatter(site),
            &[at, x],
            Some(&Type::array(to.dtype, flat)),
        )?;
        let mut whole = vec![total];
        whole.extend(to.shape.iter().cloned());
        self.named(hint, Op::Reshape, &[s], Some(&Type::array(to.dtype, whole)))
    }

    /// The rows `t * K + w` of a stack of `total` elements of `K` rows
    /// with its first two axes merged, for each element `t` (`w` checked
    /// against `K`).
    fn each_at(&mut self, total: &Dim, k: &Dim, w: VarId, site: u64) -> Option<VarId> {
        let within = self.plain(Op::Iota, &[], Some(&ints(std::slice::from_ref(k))))?;
        let w_stacked = self.batched.contains(&w);
        let w = self.plain(Op::Gather(site), &[within, w], None)?;
        let starts = self.row_starts(total, k)?;
        let wt = self.b.ty(w).clone();
        if w_stacked {
            if wt.rank() == 1 {
                return self.plain(Op::Add, &[starts, w], None);
            }
            let s = self.plain(Op::Spread, &[starts], Some(&wt))?;
            return self.plain(Op::Add, &[s, w], None);
        }
        if wt.is_scalar() {
            let b = self.plain(Op::Bcast, &[w], Some(&ints(std::slice::from_ref(total))))?;
            return self.plain(Op::Add, &[starts, b], None);
        }
        let mut shape = vec![total.clone()];
        shape.extend(wt.shape.iter().cloned());
        let s = self.plain(Op::Spread, &[starts], Some(&ints(&shape)))?;
        let r = self.plain(Op::Repeat, &[w], Some(&ints(&shape)))?;
        self.plain(Op::Add, &[s, r], None)
    }

    /// A row shift of each element of the stack `x` (`index`, `slice`,
    /// `pad`, `unindex`, or `reverse` of vectors) as the same shift of the
    /// columns of the stack seen as a matrix `[T, K*r]` (`r` the literal
    /// size of an element's row), between two transposes: index maps
    /// that native code reads in place, with no gather or scatter. None
    /// where that does not apply (a row of non-literal size, a reversal
    /// of rows that are not numbers); the caller then gathers.
    pub(super) fn along_rows(
        &mut self,
        op: Op,
        x: VarId,
        annot: Option<&Type>,
        hint: &str,
    ) -> Option<VarId> {
        let t = self.b.ty(x).clone();
        // An element of `k` rows of `rest` (`unindex` takes one row).
        let (total, k, rest) = if matches!(op, Op::Unindex(_)) {
            (t.shape[0].clone(), Dim::Lit(1), t.shape[1..].to_vec())
        } else {
            (
                t.shape[0].clone(),
                t.shape.get(1)?.clone(),
                t.shape[2..].to_vec(),
            )
        };
        let Dim::Lit(r) = Dim::product(&rest)? else {
            return None;
        };
        let cols = k.times(&Dim::Lit(r))?;
        let dt = t.dtype;
        // The element's rows after the op, and the op on the columns.
        let (rows_out, col_op, out_cols) = match op {
            Op::Index(n) => (None, Op::Slice(n * r), Dim::Lit(r)),
            Op::Slice(off) => {
                let l = annot?.shape.first()?.clone();
                let lc = l.times(&Dim::Lit(r))?;
                (Some(l), Op::Slice(off * r), lc)
            }
            Op::Pad(off) => {
                let l = annot?.shape.first()?.clone();
                let lc = l.times(&Dim::Lit(r))?;
                (Some(l), Op::Pad(off * r), lc)
            }
            Op::Unindex(n) => {
                let l = annot?.shape.first()?.clone();
                let lc = l.times(&Dim::Lit(r))?;
                (Some(l), Op::Pad(n * r), lc)
            }
            Op::Reverse if r == 1 => (Some(k.clone()), Op::Reverse, cols.clone()),
            _ => return None,
        };
        let m = if t.rank() == 2 {
            x
        } else {
            self.plain(
                Op::Reshape,
                &[x],
                Some(&Type::array(dt, vec![total.clone(), cols])),
            )?
        };
        let tr = self.plain(Op::Transpose, &[m], None)?;
        let shifted = self.plain(
            col_op,
            &[tr],
            Some(&Type::array(dt, vec![out_cols, total.clone()])),
        )?;
        let back = self.plain(Op::Transpose, &[shifted], None)?;
        let mut shape = vec![total];
        shape.extend(rows_out);
        shape.extend(rest);
        if self.b.ty(back).shape == shape {
            return Some(back);
        }
        self.named(hint, Op::Reshape, &[back], Some(&Type::array(dt, shape)))
    }

    /// Each element of the stack `x` (matrices `[a, b]`) transposed: the
    /// gather of its elements at `i * b + j` for `[j, i]`.
    fn transpose_each(&mut self, x: VarId, site: u64, hint: &str) -> Option<VarId> {
        let t = self.b.ty(x).clone();
        let (a, b) = (t.shape.get(1)?.clone(), t.shape.get(2)?.clone());
        let ab = a.times(&b)?;
        let total = t.shape[0].clone();
        let f = self.plain(
            Op::Reshape,
            &[x],
            Some(&Type::array(t.dtype, vec![total, ab.clone()])),
        )?;
        let n = self.plain(Op::Iota, &[], Some(&ints(&[ab])))?;
        let g = self.plain(Op::Reshape, &[n], Some(&ints(&[a, b])))?;
        let w = self.plain(Op::Transpose, &[g], None)?;
        self.gather_each(f, w, site, hint)
    }

    /// `off, off + 1, ..., off + len - 1`.
    fn iota_from(&mut self, len: &Dim, off: u64) -> Option<VarId> {
        let i = self.plain(Op::Iota, &[], Some(&ints(std::slice::from_ref(len))))?;
        if off == 0 {
            return Some(i);
        }
        let Val::Var(c) = self.materialize(off as f64, &ints(std::slice::from_ref(len)), "") else {
            return None;
        };
        self.plain(Op::Add, &[i, c], None)
    }

    fn plain(&mut self, op: Op, args: &[VarId], annot: Option<&Type>) -> Option<VarId> {
        self.named("", op, args, annot)
    }

    fn named(&mut self, hint: &str, op: Op, args: &[VarId], annot: Option<&Type>) -> Option<VarId> {
        match self.push_plain(hint, op, args, annot) {
            Val::Var(v) => Some(v),
            _ => None,
        }
    }
}

fn ints(shape: &[Dim]) -> Type {
    Type::array(DType::I64, shape.to_vec())
}

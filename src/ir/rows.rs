//! Taking packed rows apart and putting them together, with static
//! offsets only (`slice` and `pad` take a literal offset): the parts of a
//! loop's packed states on its tape, the columns of the rows a `loopvjp`
//! writes (`[gx ; gs]`), side-by-side sequences. Reshapes, transposes,
//! reverses and gathers at indices that provably fit (no checks).

use super::{Builder, VarId};
use crate::ops::{Op, OpTypeError, Part};
use crate::types::{DType, Dim, Type};

impl Builder {
    /// The states after each of the `count` steps of a loop, from its tape
    /// keeping every state (`looptape L 1`: the final state in row 0,
    /// state `j` in row `1 + j`): state `t + 1` is row
    /// `(t + 2) % (count + 1)`, gathered (`site` names the gather; its
    /// indices provably fit, so it has no check). With `part`, only that
    /// part of each state (a tape of `T[K, s...]` states), in one gather.
    pub fn states_after_steps(
        &mut self,
        tape: VarId,
        count: Dim,
        site: u64,
        part: Option<u64>,
    ) -> Result<VarId, OpTypeError> {
        let rows = self
            .ty(tape)
            .shape
            .first()
            .cloned()
            .ok_or_else(|| OpTypeError::parts(Part::TapeOfStates, self.ty(tape)))?;
        let int = |d: Dim| Type::array(DType::I64, vec![d]);
        let iota = self.push("", Op::Iota, &[], Some(&int(count.clone())))?;
        let two = self.constant(DType::I64, 2.0);
        let two = self.broadcast_to(two, &int(count.clone()))?;
        let shifted = self.push("", Op::Add, &[iota, two], None)?;
        let one = self.constant(DType::I64, 1.0);
        let ones = self.push("", Op::Bcast, &[one], Some(&int(rows)))?;
        let n1 = self.push("", Op::Sum, &[ones], None)?;
        let n1 = self.broadcast_to(n1, &int(count))?;
        let idx = self.push("", Op::Rem, &[shifted, n1], None)?;
        match part {
            Some(i) => self.gather_parts(tape, idx, i, site),
            None => self.push("", Op::Gather(site), &[tape, idx], None),
        }
    }

    /// `x` (`T[R, s...]`) with its rows flattened: `T[R, w]`, `w` the
    /// elements of a row (`x` itself when its rows are already vectors).
    pub fn flat_rows(&mut self, x: VarId) -> Result<VarId, OpTypeError> {
        let t = self.ty(x).clone();
        if t.rank() == 2 {
            return Ok(x);
        }
        let w = Dim::product(t.shape.get(1..).unwrap_or(&[]))
            .ok_or_else(|| OpTypeError::parts(Part::RowSize, &t))?;
        let to = Type::array(t.dtype, vec![t.shape[0].clone(), w]);
        self.push("", Op::Reshape, &[x], Some(&to))
    }

    /// Part `i` of each row of `x` (`T[R, K, s...]`, each row `K` parts of
    /// shape `s`): `T[R, s...]`, the `x[r][i]` for every `r`, gathered in
    /// one pass from the `R·K` parts (rows `r·K + i`, which provably fit:
    /// no check).
    pub fn row_part(&mut self, x: VarId, i: u64) -> Result<VarId, OpTypeError> {
        let r = self.ty(x).shape.first().cloned();
        let r = r.ok_or_else(|| OpTypeError::parts(Part::RowParts, self.ty(x)))?;
        let iota = self.push("", Op::Iota, &[], Some(&Type::array(DType::I64, vec![r])))?;
        self.gather_parts(x, iota, i, 0)
    }

    /// Part `i` of rows `rows` (an `i64` vector) of `x` (`T[R, K, s...]`):
    /// `x[rows[j]][i]` for every `j`, one gather from the `R·K` parts.
    fn gather_parts(
        &mut self,
        x: VarId,
        rows: VarId,
        i: u64,
        site: u64,
    ) -> Result<VarId, OpTypeError> {
        let t = self.ty(x).clone();
        if t.rank() < 2 {
            return Err(OpTypeError::parts(Part::RowParts, &t));
        }
        let (r, k) = (t.shape[0].clone(), t.shape[1].clone());
        let Dim::Lit(kn) = k else {
            return Err(OpTypeError::parts(Part::RowParts, &t));
        };
        let rk = r
            .times(&k)
            .ok_or_else(|| OpTypeError::parts(Part::Parts, &t))?;
        let mut shape = vec![rk];
        shape.extend(t.shape[2..].iter().cloned());
        let parts = self.push("", Op::Reshape, &[x], Some(&Type::array(t.dtype, shape)))?;
        let n = self.ty(rows).clone();
        let kc = self.constant(DType::I64, kn as f64);
        let kc = self.broadcast_to(kc, &n)?;
        let at = self.push("", Op::Mul, &[rows, kc], None)?;
        let at = if i == 0 {
            at
        } else {
            let ic = self.constant(DType::I64, i as f64);
            let ic = self.broadcast_to(ic, &n)?;
            self.push("", Op::Add, &[at, ic], None)?
        };
        self.push("", Op::Gather(site), &[parts, at], None)
    }

    /// The first `w` elements of each row of the matrix `x` (`T[R, C]`):
    /// `T[R, w]`.
    pub fn leading_columns(&mut self, x: VarId, w: Dim) -> Result<VarId, OpTypeError> {
        let t = self.ty(x).clone();
        if t.rank() != 2 {
            return Err(OpTypeError::parts(Part::Columns, &t));
        }
        let cols = self.push("", Op::Transpose, &[x], None)?;
        let to = Type::array(t.dtype, vec![w, t.shape[0].clone()]);
        let first = self.push("", Op::Slice(0), &[cols], Some(&to))?;
        self.push("", Op::Transpose, &[first], None)
    }

    /// The last `w` elements of each row of the matrix `x` (`T[R, C]`):
    /// `T[R, w]`.
    pub fn trailing_columns(&mut self, x: VarId, w: Dim) -> Result<VarId, OpTypeError> {
        let t = self.ty(x).clone();
        if t.rank() != 2 {
            return Err(OpTypeError::parts(Part::Columns, &t));
        }
        let cols = self.push("", Op::Transpose, &[x], None)?;
        let back = self.push("", Op::Reverse, &[cols], None)?;
        let to = Type::array(t.dtype, vec![w, t.shape[0].clone()]);
        let last = self.push("", Op::Slice(0), &[back], Some(&to))?;
        let last = self.push("", Op::Reverse, &[last], None)?;
        self.push("", Op::Transpose, &[last], None)
    }

    /// The rows of the matrices `a` (`T[R, p]`) and `b` (`T[R, q]`) side
    /// by side: `T[R, p + q]`.
    pub fn concat_columns(&mut self, a: VarId, b: VarId) -> Result<VarId, OpTypeError> {
        let (ta, tb) = (self.ty(a).clone(), self.ty(b).clone());
        if ta.rank() != 2 || tb.rank() != 2 {
            return Err(OpTypeError::ConcatColumns { a: ta, b: tb });
        }
        let w = ta.shape[1]
            .plus(&tb.shape[1])
            .ok_or_else(|| OpTypeError::ConcatColumns {
                a: ta.clone(),
                b: tb.clone(),
            })?;
        let to = Type::array(ta.dtype, vec![w, ta.shape[0].clone()]);
        let ca = self.push("", Op::Transpose, &[a], None)?;
        let front = self.push("", Op::Pad(0), &[ca], Some(&to))?;
        // `b`'s columns at the end: padded from the back.
        let cb = self.push("", Op::Transpose, &[b], None)?;
        let cb = self.push("", Op::Reverse, &[cb], None)?;
        let back = self.push("", Op::Pad(0), &[cb], Some(&to))?;
        let back = self.push("", Op::Reverse, &[back], None)?;
        let both = self.push("", Op::Add, &[front, back], None)?;
        self.push("", Op::Transpose, &[both], None)
    }

    /// `v` as a row of `row_ty` that a loop carries: itself, a scalar
    /// broadcast, or inside `tabulate` (`row_ty` a stack) a value lifted
    /// to a stack (repeated) or a stack of scalars (`stacked`) spread
    /// along a vector state.
    pub fn carry_row(
        &mut self,
        v: VarId,
        stacked: bool,
        row_ty: &Type,
    ) -> Result<VarId, OpTypeError> {
        let t = self.ty(v).clone();
        if t == *row_ty {
            Ok(v)
        } else if t.is_scalar() {
            self.push("", Op::Bcast, &[v], Some(row_ty))
        } else if stacked {
            self.push("", Op::Spread, &[v], Some(row_ty))
        } else {
            self.push("", Op::Repeat, &[v], Some(row_ty))
        }
    }

    /// The value of type `t` (of one element of a stack when `stacked`)
    /// a loop carries as `row` (of `leaf_ty`, or a stack of them): the
    /// row itself, or for a scalar carried as a broadcast row its first
    /// element (of each stacked row).
    pub fn uncarry_row(
        &mut self,
        row: VarId,
        t: &Type,
        leaf_ty: &Type,
        stacked: bool,
    ) -> Result<VarId, OpTypeError> {
        if t == leaf_ty {
            return Ok(row);
        }
        if !stacked {
            return self.push("", Op::Index(0), &[row], None);
        }
        let len = self.ty(row).shape[0].clone();
        let first = self.leading_columns(row, Dim::Lit(1))?;
        let mut shape = vec![len];
        shape.extend(t.shape.iter().cloned());
        self.push(
            "",
            Op::Reshape,
            &[first],
            Some(&Type::array(t.dtype, shape)),
        )
    }

    /// `x` (`T[A, B, s...]`) with its two leading axes swapped:
    /// `T[B, A, s...]`, element `[b, a]` being `x[a, b]`. A matrix is
    /// transposed; otherwise the `A·B` rows `T[s...]` are gathered in the
    /// new order (row `a·B + b` at `[b, a]`, indices that provably fit: no
    /// check). How a stack of sequences (one per index of `tabulate`)
    /// becomes a sequence of stacks, and back.
    pub fn swap_leading_axes(&mut self, x: VarId) -> Result<VarId, OpTypeError> {
        let t = self.ty(x).clone();
        if t.rank() < 2 {
            return Err(OpTypeError::parts(Part::LeadingAxes, &t));
        }
        if t.rank() == 2 {
            return self.push("", Op::Transpose, &[x], None);
        }
        let (a, b) = (t.shape[0].clone(), t.shape[1].clone());
        let ab = a
            .times(&b)
            .ok_or_else(|| OpTypeError::parts(Part::Rows, &t))?;
        let mut flat = vec![ab];
        flat.extend(t.shape[2..].iter().cloned());
        let rows = self.push("", Op::Reshape, &[x], Some(&Type::array(t.dtype, flat)))?;
        let int = |s: Vec<Dim>| Type::array(DType::I64, s);
        // `a·B` for each `a`, repeated as every row of an `i64[B, A]`.
        let ia = self.push("", Op::Iota, &[], Some(&int(vec![a.clone()])))?;
        let one = self.constant(DType::I64, 1.0);
        let ones = self.push("", Op::Bcast, &[one], Some(&int(vec![b.clone()])))?;
        let nb = self.push("", Op::Sum, &[ones], None)?;
        let nb = self.broadcast_to(nb, &int(vec![a.clone()]))?;
        let starts = self.push("", Op::Mul, &[ia, nb], None)?;
        let starts = self.push(
            "",
            Op::Repeat,
            &[starts],
            Some(&int(vec![b.clone(), a.clone()])),
        )?;
        // `b` at `[b, a]`: the rows of an `i64[A, B]` of `0 .. B`, transposed.
        let ib = self.push("", Op::Iota, &[], Some(&int(vec![b.clone()])))?;
        let ib = self.push("", Op::Repeat, &[ib], Some(&int(vec![a, b])))?;
        let ib = self.push("", Op::Transpose, &[ib], None)?;
        let idx = self.push("", Op::Add, &[starts, ib], None)?;
        // One index per row, the rows gathered then shaped `[B, A, s...]`.
        let n = self.ty(rows).shape[0].clone();
        let idx = self.push("", Op::Reshape, &[idx], Some(&int(vec![n])))?;
        let out = self.push("", Op::Gather(0), &[rows, idx], None)?;
        let mut shape = vec![t.shape[1].clone(), t.shape[0].clone()];
        shape.extend(t.shape[2..].iter().cloned());
        self.push("", Op::Reshape, &[out], Some(&Type::array(t.dtype, shape)))
    }

    /// The last `w` elements of the vector `x`.
    pub fn trailing(&mut self, x: VarId, w: Dim) -> Result<VarId, OpTypeError> {
        let t = self.ty(x).clone();
        let back = self.push("", Op::Reverse, &[x], None)?;
        let to = Type::array(t.dtype, vec![w]);
        let first = self.push("", Op::Slice(0), &[back], Some(&to))?;
        self.push("", Op::Reverse, &[first], None)
    }
}

/// The sum of `widths` (None if a size cannot be written).
pub fn total_width(widths: &[Dim]) -> Option<Dim> {
    widths.iter().try_fold(Dim::Lit(0), |t, w| t.plus(w))
}

impl Builder {
    /// The arrays `parts` (`T[w_j, r...]`, the same `r...`, `w_j` spelled
    /// as `widths[j]`) end to end along their leading axis:
    /// `T[Σ w_j, r...]`, each padded with zeros to the whole and added
    /// (a `-0.0` comes back `+0.0`, as for a sum of cotangents): a walk's
    /// state. [`Self::concat_exact`] keeps every bit.
    pub fn concat_leading(
        &mut self,
        parts: &[VarId],
        widths: &[Dim],
    ) -> Result<VarId, OpTypeError> {
        self.concat_parts(parts, widths, false)
    }

    /// [`Self::concat_leading`] keeping every bit of the parts (each
    /// placed among `-0.0`s, [`Self::place`]): a loop's state of several
    /// shapes, flat (`r` empty), or its stacks side by side (transposed).
    pub fn concat_exact(&mut self, parts: &[VarId], widths: &[Dim]) -> Result<VarId, OpTypeError> {
        self.concat_parts(parts, widths, true)
    }

    /// `op` (a `pad` or an `unindex`: `x` placed among zeros of type `to`)
    /// with the zeros `-0.0` for a float `x` (`neg (op (neg x))`), so that
    /// a sum of such placements is every part bit for bit: `y + -0.0` is
    /// `y` for every float `y`, `-0.0` included, where `y + +0.0` makes a
    /// `-0.0` a `+0.0`.
    pub fn place(&mut self, op: Op, x: VarId, to: &Type) -> Result<VarId, OpTypeError> {
        if self.ty(x).dtype.is_int() {
            return self.push("", op, &[x], Some(to));
        }
        let n = self.push("", Op::Neg, &[x], None)?;
        let placed = self.push("", op, &[n], Some(to))?;
        self.push("", Op::Neg, &[placed], None)
    }

    fn concat_parts(
        &mut self,
        parts: &[VarId],
        widths: &[Dim],
        exact: bool,
    ) -> Result<VarId, OpTypeError> {
        let first = parts.first().ok_or(OpTypeError::PackNothing)?;
        let t0 = self.ty(*first).clone();
        let sized = |ws: &[Dim]| {
            let mut shape =
                vec![total_width(ws).ok_or_else(|| OpTypeError::parts(Part::Size, &t0))?];
            shape.extend(t0.shape.get(1..).unwrap_or(&[]).iter().cloned());
            Ok::<Type, OpTypeError>(Type::array(t0.dtype, shape))
        };
        let whole = sized(widths)?;
        let exact = exact && !t0.dtype.is_int();
        let mut sum: Option<VarId> = None;
        for (j, &p) in parts.iter().enumerate() {
            // Negated and negated back around the placing (see `place`).
            let p = if exact {
                self.push("", Op::Neg, &[p], None)?
            } else {
                p
            };
            let placed = if j == 0 {
                self.push("", Op::Pad(0), &[p], Some(&whole))?
            } else {
                // `[p ; zeros]` as long as what remains from here, then
                // put at the end of the whole.
                let rest = sized(&widths[j..])?;
                let tail = if rest == *self.ty(p) {
                    p
                } else {
                    self.push("", Op::Pad(0), &[p], Some(&rest))?
                };
                let r = self.push("", Op::Reverse, &[tail], None)?;
                let r = self.push("", Op::Pad(0), &[r], Some(&whole))?;
                self.push("", Op::Reverse, &[r], None)?
            };
            let placed = if exact {
                self.push("", Op::Neg, &[placed], None)?
            } else {
                placed
            };
            sum = Some(match sum {
                Some(s) => self.push("", Op::Add, &[s, placed], None)?,
                None => placed,
            });
        }
        sum.ok_or(OpTypeError::PackNothing)
    }

    /// Part `j` of `v` (`T[Σ w, r...]`, parts of lengths `widths` along
    /// its leading axis, [`Self::concat_leading`]'s): `T[widths[j], r...]`.
    pub fn leading_part(
        &mut self,
        v: VarId,
        widths: &[Dim],
        j: usize,
    ) -> Result<VarId, OpTypeError> {
        let t = self.ty(v).clone();
        let with_len = |d: Dim| {
            let mut shape = vec![d];
            shape.extend(t.shape.get(1..).unwrap_or(&[]).iter().cloned());
            Type::array(t.dtype, shape)
        };
        let from = if j == 0 {
            v
        } else {
            let rest =
                total_width(&widths[j..]).ok_or_else(|| OpTypeError::parts(Part::Size, &t))?;
            let rest = with_len(rest);
            if rest == t {
                v
            } else {
                let back = self.push("", Op::Reverse, &[v], None)?;
                let back = self.push("", Op::Slice(0), &[back], Some(&rest))?;
                self.push("", Op::Reverse, &[back], None)?
            }
        };
        let to = with_len(widths[j].clone());
        if self.ty(from) == &to {
            return Ok(from);
        }
        self.push("", Op::Slice(0), &[from], Some(&to))
    }

    /// Every part of `v` ([`Self::leading_part`]), in order.
    pub fn split_leading(&mut self, v: VarId, widths: &[Dim]) -> Result<Vec<VarId>, OpTypeError> {
        (0..widths.len())
            .map(|j| self.leading_part(v, widths, j))
            .collect()
    }
}

impl Builder {
    /// Columns `widths[j]` of the matrix `x` (`T[R, Σ w]`, each row parts
    /// of lengths `widths`): `T[R, widths[j]]`.
    pub fn columns_part(
        &mut self,
        x: VarId,
        widths: &[Dim],
        j: usize,
    ) -> Result<VarId, OpTypeError> {
        let cols = self.push("", Op::Transpose, &[x], None)?;
        let part = self.leading_part(cols, widths, j)?;
        self.push("", Op::Transpose, &[part], None)
    }

    /// The values `parts` (of shapes of `widths[j]` elements; with
    /// `batched`, stacks `T[L, ...]`) as one flat vector `T[Σ w]` of
    /// element type `dtype` (a stack of them, `T[L, Σ w]`): a loop's state
    /// whose parts have different shapes or element types (an `i64` part of
    /// a float state as its exact words, [`int_words`]).
    /// [`Self::unpack_flat`] takes it apart.
    pub fn pack_flat(
        &mut self,
        parts: &[VarId],
        widths: &[Dim],
        batched: bool,
        dtype: DType,
    ) -> Result<VarId, OpTypeError> {
        let mut flat = Vec::with_capacity(parts.len());
        let mut flat_widths = Vec::with_capacity(parts.len());
        for (&p, w) in parts.iter().zip(widths) {
            let words = match int_words(self.ty(p).dtype, dtype) {
                Some(_) => self.int_to_words(p, dtype)?,
                None => vec![p],
            };
            for p in words {
                let t = self.ty(p).clone();
                let mut shape = Vec::new();
                if batched {
                    shape.push(
                        t.shape
                            .first()
                            .cloned()
                            .ok_or_else(|| OpTypeError::parts(Part::Rows, &t))?,
                    );
                }
                shape.push(w.clone());
                let to = Type::array(t.dtype, shape);
                let v = if t == to {
                    p
                } else if t.is_scalar() {
                    self.push("", Op::Bcast, &[p], Some(&to))?
                } else {
                    self.push("", Op::Reshape, &[p], Some(&to))?
                };
                flat.push(if batched {
                    self.push("", Op::Transpose, &[v], None)?
                } else {
                    v
                });
                flat_widths.push(w.clone());
            }
        }
        let whole = self.concat_exact(&flat, &flat_widths)?;
        if batched {
            self.push("", Op::Transpose, &[whole], None)
        } else {
            Ok(whole)
        }
    }

    /// The parts of `v` ([`Self::pack_flat`]'s), each of its type `tys[j]`
    /// (with `rows`, `v` is a matrix whose rows are flat states, a stack
    /// of them: each part is then a stack of its type).
    pub fn unpack_flat(
        &mut self,
        v: VarId,
        tys: &[Type],
        widths: &[Dim],
        rows: bool,
    ) -> Result<Vec<VarId>, OpTypeError> {
        let dtype = self.ty(v).dtype;
        let lead: Vec<Dim> = if rows {
            self.ty(v).shape.first().cloned().into_iter().collect()
        } else {
            Vec::new()
        };
        let flat_widths = word_widths(tys, widths, dtype);
        let mut out = Vec::with_capacity(tys.len());
        let mut j = 0;
        for t in tys {
            let mut shape = lead.clone();
            shape.extend(t.shape.iter().cloned());
            let n = int_words(t.dtype, dtype).map_or(1, |(n, _)| n as usize);
            let mut words = Vec::with_capacity(n);
            for _ in 0..n {
                let part = if rows {
                    self.columns_part(v, &flat_widths, j)?
                } else {
                    self.leading_part(v, &flat_widths, j)?
                };
                j += 1;
                let to = Type::array(dtype, shape.clone());
                words.push(if self.ty(part) == &to {
                    part
                } else if to.is_scalar() {
                    self.push("", Op::Index(0), &[part], None)?
                } else {
                    self.push("", Op::Reshape, &[part], Some(&to))?
                });
            }
            out.push(match words[..] {
                [w] => w,
                _ => self.words_to_int(&words, dtype)?,
            });
        }
        Ok(out)
    }

    /// The `i64` array `x` as the words of a flat state of float type
    /// `dtype` ([`int_words`]), least significant first: each of `x`'s
    /// shape, every element an integer the float holds exactly (the last
    /// signed, the others in `0 .. 2^bits`).
    fn int_to_words(&mut self, x: VarId, dtype: DType) -> Result<Vec<VarId>, OpTypeError> {
        let t = self.ty(x).clone();
        let (n, bits) = int_words(t.dtype, dtype).ok_or(OpTypeError::PackNothing)?;
        let base = self.constant(DType::I64, (1u64 << bits) as f64);
        let base = self.broadcast_to(base, &t)?;
        let mut rest = x;
        let mut words = Vec::with_capacity(n as usize);
        for _ in 1..n {
            let w = self.push("", Op::Rem, &[rest, base], None)?;
            let high = self.push("", Op::Sub, &[rest, w], None)?;
            rest = self.push("", Op::Div, &[high, base], None)?;
            words.push(self.push("", Op::Convert(dtype), &[w], None)?);
        }
        words.push(self.push("", Op::Convert(dtype), &[rest], None)?);
        Ok(words)
    }

    /// The `i64` array whose words ([`Self::int_to_words`]) are `words`.
    fn words_to_int(&mut self, words: &[VarId], dtype: DType) -> Result<VarId, OpTypeError> {
        let (_, bits) = int_words(DType::I64, dtype).ok_or(OpTypeError::PackNothing)?;
        let (last, low) = words.split_last().ok_or(OpTypeError::PackNothing)?;
        let mut x = self.push("", Op::Convert(DType::I64), &[*last], None)?;
        let base = self.constant(DType::I64, (1u64 << bits) as f64);
        let t = self.ty(x).clone();
        let base = self.broadcast_to(base, &t)?;
        for &w in low.iter().rev() {
            let w = self.push("", Op::Convert(DType::I64), &[w], None)?;
            let high = self.push("", Op::Mul, &[x, base], None)?;
            x = self.push("", Op::Add, &[high, w], None)?;
        }
        Ok(x)
    }
}

/// How a flat state of float type `flat` carries an element of type
/// `leaf` when it is an `i64`: as that many words of that many bits
/// (`f64`: two of 32 bits, `f32`: three of 22, the last one signed), each
/// an integer the float holds exactly, so every `i64` comes back bit for
/// bit. None: one element carries one (the same type).
pub fn int_words(leaf: DType, flat: DType) -> Option<(u32, u32)> {
    match (leaf, flat) {
        (DType::I64, DType::F64) => Some((2, 32)),
        (DType::I64, DType::F32) => Some((3, 22)),
        _ => None,
    }
}

/// The lengths of the parts of a flat state of element type `flat` whose
/// leaves have types `tys` and lengths `widths`: an `i64` leaf of a float
/// state is its words one after another ([`int_words`]).
pub fn word_widths(tys: &[Type], widths: &[Dim], flat: DType) -> Vec<Dim> {
    let mut out = Vec::with_capacity(widths.len());
    for (t, w) in tys.iter().zip(widths) {
        let n = int_words(t.dtype, flat).map_or(1, |(n, _)| n);
        out.extend(std::iter::repeat_n(w.clone(), n as usize));
    }
    out
}

//! A vector that is a sum of windows of other vectors (`concat`, and the
//! walk state of a loop with captures: parts `pad`ded, `reverse`d and
//! added) stored window by window, not testing each element against every
//! window.

use super::vector::Source;
use super::{cl_type, Read, Translator};
use crate::error::Error;
use crate::ir::VarId;
use crate::ops::Op;
use crate::types::DType;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{self, types, InstBuilder};

/// The most terms a stored sum of windows has.
const MAX_CONCAT_TERMS: usize = 64;
/// The most `pad`s and `reverse`s over one term's part.
const MAX_CONCAT_CHAIN: usize = 16;

/// A term's `pad`s and `reverse`s, from the top.
type Chain = Vec<usize>;

impl Translator<'_, '_> {
    /// A vector that is a sum of windows of other vectors (a `concat`: the
    /// parts `pad`ded, some `reverse`d, and added) stored without testing
    /// each element against every window: when the windows lie one after
    /// another (checked at run time), each window's elements are read from
    /// its part and the gaps are zeros; otherwise the general loop.
    /// Whether it was such a sum (the code emitted, both ways).
    pub(super) fn translate_concat(
        &mut self,
        src: Source,
        dtype: DType,
        base: ir::Value,
        len: ir::Value,
    ) -> Result<bool, Error> {
        let root = match src {
            Source::Tree(v) => v,
            Source::Elem(v) if self.read(v)? == Read::Inline => v,
            Source::Elem(_) => return Ok(false),
        };

        if self.f.ty(root).rank() != 1 || self.row.is_some() {
            return Ok(false);
        }
        let Some(terms) = self.concat_terms(root)? else {
            return Ok(false);
        };
        let mut windows = Vec::with_capacity(terms.len());
        for (chain, x) in terms {
            windows.push((self.concat_window(&chain, len)?, x));
        }
        // One after another: each window ends where or before the next
        // starts.
        let mut apart = self.b.ins().iconst(types::I8, 1);
        for w in windows.windows(2) {
            let ((_, end, _, _), _) = w[0];
            let ((start, _, _, _), _) = w[1];
            let ok = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, end, start);
            apart = self.b.ins().band(apart, ok);
        }
        let size = i64::from(cl_type(dtype).bytes());
        self.translate_if(
            apart,
            types::I64,
            &mut |t| {
                let mut at = t.b.ins().iconst(types::I64, 0);
                for &((start, end, down, shift), x) in &windows {
                    t.translate_zero_span(dtype, base, (at, start), size)?;
                    t.translate_range(start, end, 1, &mut |t, i| {
                        // Element `i` of the window is element
                        // `shift ± i` of its part.
                        let j = if down {
                            t.b.ins().isub(shift, i)
                        } else {
                            t.b.ins().iadd(shift, i)
                        };
                        let y = t.translate_elem(x, j)?;
                        // The sum's value: `y` plus the other terms' zeros
                        // (so `-0.0` is `+0.0`, as the interpreter adds).
                        let y = if !dtype.is_int() {
                            let zero = t.translate_const(dtype, 0.0);
                            t.b.ins().fadd(y, zero)
                        } else {
                            y
                        };
                        t.translate_store(dtype, base, i, y);
                        Ok(())
                    })?;
                    at = end;
                }
                t.translate_zero_span(dtype, base, (at, len), size)?;
                Ok(t.b.ins().iconst(types::I64, 0))
            },
            &mut |t| {
                t.translate_map_general(src, dtype, base, len)?;
                Ok(t.b.ins().iconst(types::I64, 0))
            },
        )?;
        Ok(true)
    }

    /// Zeros at elements `from .. to` of `base` (none when `to <= from`).
    fn translate_zero_span(
        &mut self,
        dtype: DType,
        base: ir::Value,
        (from, to): (ir::Value, ir::Value),
        size: i64,
    ) -> Result<(), Error> {
        let n = self.b.ins().isub(to, from);
        let zero = self.b.ins().iconst(types::I64, 0);
        let n = self.b.ins().smax(n, zero);
        let off = self.b.ins().imul_imm_s(from, size);
        let at = self.b.ins().iadd(base, off);
        self.translate_fill_zero(dtype, at, n)
    }

    /// The terms of the sum `root` (its inlined `add`s), each a chain of
    /// inlined `pad`s and `reverse`s (at least one `pad`; the statements
    /// from the top) over a part read at an index: `None` unless every
    /// term is, and there are two to [`MAX_CONCAT_TERMS`].
    fn concat_terms(&self, root: VarId) -> Result<Option<Vec<(Chain, VarId)>>, Error> {
        // The statement computing `v` here: the root's own (the value being
        // stored), or an inlined one's.
        let def = |t: &Self, v: VarId| -> Result<Option<usize>, Error> {
            Ok(match t.read(v)? {
                _ if v == root => t.defs.get(v.index()).copied().flatten(),
                Read::Inline => t.defs.get(v.index()).copied().flatten(),
                _ => None,
            })
        };
        let mut terms = Vec::new();
        let mut stack = vec![root];
        while let Some(v) = stack.pop() {
            if terms.len() > MAX_CONCAT_TERMS {
                return Ok(None);
            }
            let Some(s) = def(self, v)? else {
                return Ok(None);
            };
            let st = &self.f.stmts[s];
            if st.op == Op::Add && self.f.ty(st.args[0]) == self.f.ty(st.args[1]) {
                stack.extend([st.args[1], st.args[0]]);
                continue;
            }
            // The chain down to the part.
            let mut chain = Chain::new();
            let mut at = v;
            let mut pads = 0;
            while let Some(s) = def(self, at)? {
                let st = &self.f.stmts[s];
                match st.op {
                    Op::Pad(_) => pads += 1,
                    Op::Reverse => {}
                    _ => break,
                }
                if chain.len() == MAX_CONCAT_CHAIN || self.f.ty(st.args[0]).rank() != 1 {
                    return Ok(None);
                }
                chain.push(s);
                at = st.args[0];
            }
            if pads == 0 {
                return Ok(None);
            }
            terms.push((chain, at));
        }
        Ok((terms.len() >= 2).then_some(terms))
    }

    /// The window of a term (`chain` from the top over its part) in a
    /// result of `len` elements: `(start, end, down, shift)`, element `i`
    /// in `start .. end` being the part's element `shift - i` (`down`) or
    /// `shift + i`.
    fn concat_window(
        &mut self,
        chain: &[usize],
        len: ir::Value,
    ) -> Result<(ir::Value, ir::Value, bool, ir::Value), Error> {
        // Index `down ? shift - i : shift + i` of the value at this link.
        let mut down = false;
        let mut shift = self.b.ins().iconst(types::I64, 0);
        let mut lo = self.b.ins().iconst(types::I64, 0);
        let mut hi = len;
        let mut n = len;
        for &s in chain {
            let st = &self.f.stmts[s];
            let Op::Pad(c) = st.op else {
                // `reverse` of `n` elements: index `n - 1 - j`.
                let last = self.b.ins().iadd_imm_s(n, -1);
                shift = self.b.ins().isub(last, shift);
                down = !down;
                continue;
            };
            // `pad c`: index j is the operand's `j - c`, inside when
            // `c <= j < c + m`.
            let c = i64::try_from(c).map_err(|_| Error::internal("backend: a pad overflows"))?;
            let m = self.translate_len(self.f.ty(st.args[0]).clone())?;
            shift = self.b.ins().iadd_imm_s(shift, -c);
            // Inside when `0 <= index < m`, in terms of `i`.
            let (from, to) = if down {
                // shift - i in 0 .. m  <=>  i in shift - m + 1 ..= shift
                let from = self.b.ins().isub(shift, m);
                (
                    self.b.ins().iadd_imm_s(from, 1),
                    self.b.ins().iadd_imm_s(shift, 1),
                )
            } else {
                // shift + i in 0 .. m  <=>  i in -shift .. m - shift
                let zero = self.b.ins().iconst(types::I64, 0);
                (self.b.ins().isub(zero, shift), self.b.ins().isub(m, shift))
            };
            lo = self.b.ins().smax(lo, from);
            hi = self.b.ins().smin(hi, to);
            n = m;
        }
        let hi = self.b.ins().smax(hi, lo);
        Ok((lo, hi, down, shift))
    }
}

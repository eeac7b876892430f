//! SIMD lowering of element-wise loops, reductions and the column loops of
//! `sumlead` and `matmul`.
//!
//! Cranelift neither vectorises nor reassociates, and its x86-64 backend
//! has 128-bit vectors only, so a vector holds two `f64` or four `f32`
//! lanes ([`lanes`]). Element `i .. i + W` of an inlined element tree is
//! computed as one vector: buffer reads are vector loads, scalars and
//! broadcasts are splats, arithmetic is the vector instruction, row shifts
//! are their operand's vector at the offset (a `pad` when all lanes are
//! inside it, zeros when none is), a `repeat` that does not wrap is a load
//! and a `spread` within one row a splat; what has no vector form (libm
//! calls, `transpose`, `reverse`) is computed lane by lane with the scalar
//! lowering and put together. A loop over a tree with pads runs in
//! segments between their edges (each pad's at its offset below the row
//! shifts above it, [`Translator::shift`]): vectors where a whole one fits
//! in a segment, so no vector straddles an edge, and the scalar code for
//! the elements left; the tree's vector code is then one copy. Every
//! lane computes exactly what the scalar code computes for that element,
//! so element-wise results are bit-for-bit the scalar path's; the `n mod W`
//! elements left over run the scalar code.
//!
//! Reductions use egrad's fixed order ([`crate::ops::fold_row`]): eight
//! interleaved partial results, kept as four `f64x2` or two `f32x4`
//! accumulators with SIMD on and as eight scalars with it off, combined the
//! same way, then the tail left to right. So SIMD and scalar code and the
//! interpreter agree bit for bit. `sumlead` and `matmul` vectorise across
//! output columns: each column's sum still runs over its rows (or over `k`)
//! in order, one product rounded at a time.

use super::elem::Calls;
use super::{access, cl_type, Access, Read, Translator};
use crate::error::Error;
use crate::ir::VarId;
use crate::ops::{Native, Op, FOLD_LANES};
use crate::types::size::Size;
use crate::types::{DType, Type};
use crate::vmath::VFn;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{self, types, InstBuilder, MemFlagsData, StackSlotData, StackSlotKind};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

/// The vector type of a dtype: 128 bits.
pub(super) fn vec_type(d: DType) -> ir::Type {
    match d {
        DType::F32 => types::F32X4,
        DType::F64 => types::F64X2,
        // Never used: integer trees run in scalar code (`Translator::vectorizable`).
        DType::I64 | DType::Bool => types::I64X2,
    }
}

/// Lanes per vector of a dtype.
pub(super) fn lanes(d: DType) -> i64 {
    match d {
        DType::F32 => 4,
        DType::F64 | DType::I64 | DType::Bool => 2,
    }
}

/// Vector accesses: not trapping, not assumed 16-byte aligned.
fn vflags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

/// Accumulators in a blocked column loop (`sumlead`, `matmul`): columns
/// `j .. j + COLUMN_VECTORS * W` are summed at once, so each row's (or
/// `k`'s) loads and splats serve that many vectors.
const COLUMN_VECTORS: usize = 4;

/// The terms of one row `l` of a column loop at each column start, as
/// vectors or single elements: see [`Translator::translate_columns`].
type ColumnTerm<'t, 'a, 'b> = dyn FnMut(
        &mut Translator<'a, 'b>,
        ir::Value,
        &[ir::Value],
        bool,
        &[ir::Value],
    ) -> Result<Vec<ir::Value>, Error>
    + 't;

/// An array of at most this many elements (a literal length) is written
/// element by element at known indices, without a loop: loop bodies of
/// small states, tuples packed as rows.
const UNROLL_ELEMS: u64 = 16;

/// The most (value, shift) pairs [`Translator::pad_edges`] walks: a pad
/// it does not reach keeps its lane-by-lane code.
const EDGE_WALK: usize = 512;

/// The most distinct pad edges a loop's segments end at.
const MAX_EDGES: usize = 24;

/// The most distinct pad ranges for which a loop over a tree has a second
/// copy of its vector code, for the segments inside all of them.
const INTERIOR_PADS: usize = 4;

/// What [`Translator::pad_edges`] finds: every distinct edge, the distinct
/// ranges (`first .. end`) of the pads (none when more than
/// [`INTERIOR_PADS`], or when two are provably disjoint), and the pads
/// with their shifts.
type PadEdges = (
    Vec<ir::Value>,
    Vec<(ir::Value, ir::Value)>,
    Rc<HashSet<(usize, Size)>>,
);

/// The element source of a mapping loop.
#[derive(Clone, Copy)]
pub(super) enum Source {
    /// A statement's own element tree (the loop that materialises it).
    Tree(VarId),
    /// A value as its consumers read it.
    Elem(VarId),
}

impl<'a, 'b> Translator<'a, 'b> {
    fn vsplat(&mut self, dtype: DType, x: ir::Value) -> ir::Value {
        self.b.ins().splat(vec_type(dtype), x)
    }

    fn vconst(&mut self, dtype: DType, x: f64) -> ir::Value {
        let s = self.translate_const(dtype, x);
        self.vsplat(dtype, s)
    }

    fn vload(&mut self, dtype: DType, base: ir::Value, i: ir::Value) -> ir::Value {
        let addr = self.translate_addr(dtype, base, i);
        self.b.ins().load(vec_type(dtype), vflags(), addr, 0)
    }

    fn vstore(&mut self, dtype: DType, base: ir::Value, i: ir::Value, x: ir::Value) {
        let addr = self.translate_addr(dtype, base, i);
        self.b.ins().store(vflags(), x, addr, 0);
    }

    /// A vector from its lanes, computed one by one with the scalar
    /// lowering: `lane(i + l)` for each lane `l`.
    fn per_lane(
        &mut self,
        dtype: DType,
        i: ir::Value,
        lane: &mut dyn FnMut(&mut Self, ir::Value) -> Result<ir::Value, Error>,
    ) -> Result<ir::Value, Error> {
        let x0 = lane(self, i)?;
        let mut v = self.vsplat(dtype, x0);
        for l in 1..lanes(dtype) {
            let il = self.b.ins().iadd_imm_s(i, l);
            let x = lane(self, il)?;
            v = self.b.ins().insertlane(v, x, l as u8);
        }
        Ok(v)
    }

    /// Each lane of `xs` through a scalar function (a libm call).
    fn map_lanes(
        &mut self,
        dtype: DType,
        xs: &[ir::Value],
        f: &mut dyn FnMut(&mut Self, &[ir::Value]) -> ir::Value,
    ) -> ir::Value {
        let mut out = None;
        for l in 0..lanes(dtype) as u8 {
            let args: Vec<ir::Value> = xs.iter().map(|&x| self.b.ins().extractlane(x, l)).collect();
            let y = f(self, &args);
            out = Some(match out {
                None => self.vsplat(dtype, y),
                Some(v) => self.b.ins().insertlane(v, y, l),
            });
        }
        out.unwrap_or_else(|| self.vconst(dtype, 0.0))
    }

    /// Elements `i .. i + W` of `v` as its consumers read them.
    pub(super) fn translate_elem_vec(
        &mut self,
        v: VarId,
        i: ir::Value,
    ) -> Result<ir::Value, Error> {
        match self.read(v)? {
            Read::Inline => self.translate_tree_vec(v, i),
            _ => self.translate_leaf_vec(v, i),
        }
    }

    /// Elements `i .. i + W` of a value that is not inlined.
    fn translate_leaf_vec(&mut self, v: VarId, i: ir::Value) -> Result<ir::Value, Error> {
        let dtype = self.f.ty(v).dtype;
        match self.read(v)? {
            Read::Buf(k) => {
                let base = self.buf(k)?;
                Ok(self.vload(dtype, base, i))
            }
            Read::Inline | Read::Dead => Err(Error::internal(format!(
                "backend: %{} read as a leaf but it is not computed",
                self.f.var_name(v)
            ))),
            // A scalar or a splat: the same element in every lane.
            Read::Scalar | Read::Splat(_) => {
                let x = self.translate_leaf(v, i)?;
                Ok(self.vsplat(dtype, x))
            }
        }
    }

    /// Elements `i .. i + W` of statement `root` computed in place, like
    /// [`Translator::translate_tree`].
    fn translate_tree_vec(&mut self, root: VarId, i: ir::Value) -> Result<ir::Value, Error> {
        let mut local: HashMap<VarId, ir::Value> = HashMap::new();
        for s in self.tree_nodes(root)? {
            let stmt = self.f.stmts[s].clone();
            let dtype = self.f.ty(stmt.var).dtype;
            let x = if access(stmt.op) == Access::IndexMap {
                self.translate_index_map_vec(s, i)?
            } else {
                let mut args = Vec::with_capacity(stmt.args.len());
                for &a in &stmt.args {
                    args.push(match local.get(&a) {
                        Some(&x) => x,
                        None => self.translate_leaf_vec(a, i)?,
                    });
                }
                self.translate_vop(stmt.op, dtype, &args)?
            };
            local.insert(stmt.var, x);
        }
        local
            .get(&root)
            .copied()
            .ok_or_else(|| Error::internal("backend: element tree lost its root"))
    }

    /// An index map's elements `i .. i + W`: a row offset (`slice`,
    /// `index`) is its operand's vector at the offset (`reshape`: at the
    /// same index), `pad` and `unindex`
    /// too when every lane is inside the operand; `repeat` is one when the
    /// lanes do not wrap around the repeated row, `spread` a splat when
    /// they fall in one row; anything else is gathered lane by lane.
    fn translate_index_map_vec(&mut self, s: usize, i: ir::Value) -> Result<ir::Value, Error> {
        let stmt = &self.f.stmts[s];
        let dtype = self.f.ty(stmt.var).dtype;
        let vt = vec_type(dtype);
        let w = lanes(dtype);
        let gather =
            &mut |t: &mut Self| t.per_lane(dtype, i, &mut |t, il| t.translate_index_map(s, il));
        let Some(&a) = stmt.args.first() else {
            return gather(self);
        };
        match stmt.op {
            Op::Slice(c) | Op::Index(c) => {
                let j = self.row_offset(a, c, i)?;
                let row = self.shifted_row(s);
                let shift = self.operand_shift(s, self.shift.as_ref());
                self.within_shift(row, shift, &mut |t| t.translate_elem_vec(a, j))
            }
            Op::Reshape => {
                let shift = self.shift.clone();
                self.within_shift(None, shift, &mut |t| t.translate_elem_vec(a, i))
            }
            Op::Pad(_) | Op::Unindex(_) => {
                let row = self.shifted_row(s);
                // Element i reads i - start when that is inside the operand
                // (n elements); a vector when all its lanes are inside.
                let (start, n) = self.pad_range(s)?;
                let j = self.b.ins().isub(i, start);
                // A pad whose edges the loop's segments know: its lanes
                // are all inside it or all outside (zeros).
                let known =
                    (self.shift.as_ref()).is_some_and(|d| self.edges.contains(&(s, d.clone())));
                let shift = self.operand_shift(s, self.shift.as_ref());
                if known && self.edges_inside {
                    return self.within_shift(row, shift, &mut |t| t.translate_elem_vec(a, j));
                }
                let first_in = self.b.ins().icmp(IntCC::UnsignedLessThan, j, n);
                let room = self.b.ins().isub(n, j);
                let all_in = self
                    .b
                    .ins()
                    .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, room, w);
                let inside = self.b.ins().band(first_in, all_in);
                let zeros = &mut |t: &mut Self| Ok(t.vconst(dtype, 0.0));
                self.translate_if(
                    inside,
                    vt,
                    &mut |t| {
                        t.within_shift(row.clone(), shift.clone(), &mut |t| {
                            t.translate_elem_vec(a, j)
                        })
                    },
                    if known { zeros } else { gather },
                )
            }
            // Inside a row reduction the lanes lie in one row: a load, or
            // the row's element.
            Op::Repeat | Op::Spread if self.row.is_some() => match self.row_read(s, i) {
                Some(j) if stmt.op == Op::Repeat => self.translate_leaf_vec(a, j),
                Some(r) => {
                    let x = self.translate_leaf(a, r)?;
                    Ok(self.vsplat(dtype, x))
                }
                None => self.within_row(None, &mut |t| t.translate_index_map_vec(s, i)),
            },
            Op::Repeat => {
                // Element i reads i mod row.
                let row = self.translate_len(self.f.ty(a).clone())?;
                let (_, j) = self.div_index(i, row)?;
                let end = self.b.ins().iadd_imm_s(j, w);
                let fits = self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, end, row);
                self.translate_if(fits, vt, &mut |t| t.translate_leaf_vec(a, j), gather)
            }
            Op::Spread => {
                // Element i reads i / row.
                let out = self.f.ty(stmt.var);
                let row = Type::array(dtype, out.shape.get(1..).unwrap_or(&[]).to_vec());
                let row = self.translate_len(row)?;
                let (r, _) = self.div_index(i, row)?;
                let last = self.b.ins().iadd_imm_s(i, w - 1);
                let (r_last, _) = self.div_index(last, row)?;
                let one = self.b.ins().icmp(IntCC::Equal, r, r_last);
                self.translate_if(
                    one,
                    vt,
                    &mut |t| {
                        let x = t.translate_leaf(a, r)?;
                        Ok(t.vsplat(dtype, x))
                    },
                    gather,
                )
            }
            _ => gather(self),
        }
    }

    /// The op on vector operands: the vector instruction where there is
    /// one (the scalar lowering's own, which Cranelift also has for
    /// vectors), else lane by lane (libm calls); constants are splats and
    /// comparisons give 1.0 or +0.0 per lane.
    pub(super) fn translate_vop(
        &mut self,
        op: Op,
        dtype: DType,
        args: &[ir::Value],
    ) -> Result<ir::Value, Error> {
        let arg = |k: usize| {
            args.get(k).copied().ok_or_else(|| {
                Error::internal(format!("backend: `{}` is missing operand {k}", op.name()))
            })
        };
        let mask = |t: &mut Self, cc: FloatCC, a: ir::Value, b: ir::Value| {
            let m = t.b.ins().fcmp(cc, a, b);
            t.b.ins().bitcast(vec_type(dtype), MemFlagsData::new(), m)
        };
        let cmp = |t: &mut Self, cc: FloatCC| -> Result<ir::Value, Error> {
            let m = mask(t, cc, arg(0)?, arg(1)?);
            let one = t.vconst(dtype, 1.0);
            Ok(t.b.ins().band(m, one))
        };
        let vmath = |t: &mut Self, f: VFn| t.translate_vmath(f, dtype, vec_type(dtype), arg(0)?);
        Ok(match op {
            Op::Const(l) => self.vconst(l.dtype, l.value()),
            Op::Zero => self.vconst(dtype, 0.0),
            Op::Lt => cmp(self, FloatCC::LessThan)?,
            Op::Le => cmp(self, FloatCC::LessThanOrEqual)?,
            Op::Gt => cmp(self, FloatCC::GreaterThan)?,
            Op::Ge => cmp(self, FloatCC::GreaterThanOrEqual)?,
            Op::Eq => cmp(self, FloatCC::Equal)?,
            Op::Ne => cmp(self, FloatCC::NotEqual)?,
            Op::Select => {
                let zero = self.vconst(dtype, 0.0);
                let m = mask(self, FloatCC::NotEqual, arg(0)?, zero);
                self.b.ins().bitselect(m, arg(1)?, arg(2)?)
            }
            // egrad's vector kernels, all lanes at once.
            Op::Math(m) => match m.native() {
                // egrad's vector kernels, all lanes at once.
                Native::Kernel(f) => vmath(self, f)?,
                // The scalar lowering's instruction, which Cranelift also
                // has for vectors.
                Native::Inst(_) => self.translate_op(op, dtype, args)?,
                Native::CLib { .. } => self.translate_lanes(op, dtype, args)?,
            },
            Op::Pow => self.translate_lanes(op, dtype, args)?,
            // Arithmetic (and the ops the scalar lowering refuses, refused
            // the same way).
            _ => self.translate_op(op, dtype, args)?,
        })
    }

    /// The op lane by lane: a C library call per lane.
    fn translate_lanes(
        &mut self,
        op: Op,
        dtype: DType,
        args: &[ir::Value],
    ) -> Result<ir::Value, Error> {
        let mut failed = None;
        let v = self.map_lanes(dtype, args, &mut |t, xs| {
            t.translate_op(op, dtype, xs).unwrap_or_else(|e| {
                failed = Some(e);
                xs[0]
            })
        });
        match failed {
            Some(e) => Err(e),
            None => Ok(v),
        }
    }

    /// Write the `len` elements of `src` to `base`: a sum of windows
    /// window by window ([`Self::translate_concat`]), else
    /// [`Self::translate_map_general`].
    pub(super) fn translate_map(
        &mut self,
        src: Source,
        dtype: DType,
        base: ir::Value,
        len: ir::Value,
    ) -> Result<(), Error> {
        let (Source::Tree(v) | Source::Elem(v)) = src;
        let few = self
            .f
            .ty(v)
            .literal_len()
            .is_some_and(|n| n <= UNROLL_ELEMS);
        if !few && self.translate_concat(src, dtype, base, len)? {
            return Ok(());
        }
        self.translate_map_general(src, dtype, base, len)
    }

    /// [`Self::translate_map`] of any element tree: a few elements one
    /// after another, else loops over its rows or its elements, vectors
    /// while a whole vector fits, then the scalar code.
    pub(super) fn translate_map_general(
        &mut self,
        src: Source,
        dtype: DType,
        base: ir::Value,
        len: ir::Value,
    ) -> Result<(), Error> {
        let (Source::Tree(v) | Source::Elem(v)) = src;
        let elem = |t: &mut Self, i: ir::Value| match src {
            Source::Tree(v) => t.translate_tree(v, i),
            Source::Elem(v) => t.translate_elem(v, i),
        };
        if let Some(n) = self.f.ty(v).literal_len().filter(|&n| n <= UNROLL_ELEMS) {
            // A few elements: one after another, at known indices.
            for i in 0..n {
                let i = self.b.ins().iconst(types::I64, i as i64);
                let x = elem(self, i)?;
                self.translate_store(dtype, base, i, x);
            }
            return Ok(());
        }
        let ty = self.f.ty(v).clone();
        let tree = match src {
            Source::Tree(v) => Some(v),
            Source::Elem(v) if self.read(v)? == Read::Inline => Some(v),
            Source::Elem(_) => None,
        };
        let rows = match tree {
            Some(root) => self.row.is_none() && self.rows_help(root, &ty)?,
            None => false,
        };
        if rows {
            // A loop nest: each row with its context, so `repeat`,
            // `spread` and `transpose` read without dividing the index
            // (and `repeat` a vector at a time).
            let rows = self.translate_len(Type::array(dtype, vec![ty.shape[0].clone()]))?;
            let cols = self.translate_len(Type::array(dtype, ty.shape[1..].to_vec()))?;
            return self.translate_loop(rows, &mut |t, r| {
                let start = t.b.ins().imul(r, cols);
                let end = t.b.ins().iadd(start, cols);
                let row = t.row_ctx(start, r, &ty);
                t.within_row(row, &mut |t| {
                    t.translate_map_span(src, dtype, base, start, end)
                })
            });
        }
        let zero = self.b.ins().iconst(types::I64, 0);
        let mut rest = zero;
        if self.simd {
            let w = lanes(dtype);
            let vector = &mut |t: &mut Self, i: ir::Value, inside: bool| {
                t.edges_inside = inside;
                let x = match src {
                    Source::Tree(v) => t.translate_tree_vec(v, i),
                    Source::Elem(v) => t.translate_elem_vec(v, i),
                };
                t.edges_inside = false;
                t.vstore(dtype, base, i, x?);
                Ok(())
            };
            if let Some((bounds, ranges, edges)) = self.pad_edges(src)? {
                // Segments between the pads' edges: in each, vectors while
                // a whole one fits (every pad holds all of a vector's lanes
                // or none of them: nothing computed lane by lane), then the
                // scalar code up to the next edge. A segment inside every
                // pad (when a few pads may all hold one) runs a copy of the
                // tree with no test at all.
                let outer = std::mem::replace(&mut self.edges, edges);
                let done = self.within_shift(None, Some(Size::constant(0)), &mut |t| {
                    let scalar = &mut |t: &mut Self, i: ir::Value| {
                        let x = elem(t, i)?;
                        t.translate_store(dtype, base, i, x);
                        Ok(())
                    };
                    t.translate_segments((&bounds, &ranges), len, w, vector, scalar)
                });
                self.edges = outer;
                return done;
            }
            let main = self.b.ins().band_imm_s(len, -w);
            self.translate_range(zero, main, w, &mut |t, i| vector(t, i, false))?;
            rest = main;
        }
        let simd = self.simd;
        self.translate_cold(simd, |t| {
            t.translate_range(rest, len, 1, &mut |t, i| {
                let x = elem(t, i)?;
                t.translate_store(dtype, base, i, x);
                Ok(())
            })
        })
    }

    /// Elements `from .. to` of `src` to `base` (within one row context):
    /// vectors while a whole vector fits, then the scalar code.
    fn translate_map_span(
        &mut self,
        src: Source,
        dtype: DType,
        base: ir::Value,
        from: ir::Value,
        to: ir::Value,
    ) -> Result<(), Error> {
        let mut rest = from;
        if self.simd {
            let w = lanes(dtype);
            let len = self.b.ins().isub(to, from);
            let main = self.b.ins().band_imm_s(len, -w);
            let main = self.b.ins().iadd(from, main);
            self.translate_range(from, main, w, &mut |t, i| {
                let x = match src {
                    Source::Tree(v) => t.translate_tree_vec(v, i)?,
                    Source::Elem(v) => t.translate_elem_vec(v, i)?,
                };
                t.vstore(dtype, base, i, x);
                Ok(())
            })?;
            rest = main;
        }
        let simd = self.simd;
        self.translate_cold(simd, |t| {
            t.translate_range(rest, to, 1, &mut |t, i| {
                let x = match src {
                    Source::Tree(v) => t.translate_tree(v, i)?,
                    Source::Elem(v) => t.translate_elem(v, i)?,
                };
                t.translate_store(dtype, base, i, x);
                Ok(())
            })
        })
    }

    /// For a tree with `pad`s (or `unindex`es): the pads reached from
    /// the root through element-wise ops and row shifts, each with its
    /// shift (see [`Translator::shift`]), and their edges: the indices of
    /// the tree where each starts and ends. `None` without such pads.
    fn pad_edges(&mut self, src: Source) -> Result<Option<PadEdges>, Error> {
        let root = match src {
            Source::Tree(v) => v,
            Source::Elem(v) if self.read(v)? == Read::Inline => v,
            Source::Elem(_) => return Ok(None),
        };
        let def = |t: &Self, v: VarId| {
            t.defs
                .get(v.index())
                .copied()
                .flatten()
                .ok_or_else(|| Error::internal("backend: inlined value has no statement"))
        };
        // Each (value, shift) once: a DAG, not its paths.
        let mut seen = HashSet::from([(root, Size::constant(0))]);
        let mut stack = vec![(root, Size::constant(0))];
        let mut pads = HashSet::new();
        while let Some((v, d)) = stack.pop() {
            let s = def(self, v)?;
            let stmt = &self.f.stmts[s];
            let next: Vec<(VarId, Size)> = match access(stmt.op) {
                Access::Elementwise => stmt.args.iter().map(|&a| (a, d.clone())).collect(),
                Access::IndexMap => {
                    let next = self.operand_shift(s, Some(&d));
                    if matches!(stmt.op, Op::Pad(_) | Op::Unindex(_)) {
                        pads.insert((s, d));
                    }
                    match (stmt.args.first(), next) {
                        (Some(&a), Some(d)) => vec![(a, d)],
                        _ => vec![],
                    }
                }
                Access::Reduce | Access::Nest => vec![],
            };
            for (a, d) in next {
                if seen.len() < EDGE_WALK
                    && self.read(a)? == Read::Inline
                    && seen.insert((a, d.clone()))
                {
                    stack.push((a, d));
                }
            }
        }
        if pads.is_empty() {
            return Ok(None);
        }
        // Pad s at shift d holds element i of the tree when
        // start <= i + d < start + n. Pads share most edges (a concat's
        // parts, the same shift repeated): each distinct edge is one test
        // per segment, and there are at most `MAX_EDGES`; a pad beyond them
        // keeps its lane-by-lane code.
        let mut sorted: Vec<_> = pads.into_iter().collect();
        sorted.sort_unstable();
        let mut edges: std::collections::BTreeMap<Size, ir::Value> = Default::default();
        let mut known = HashSet::new();
        let mut ranges = Vec::new();
        let (mut sizes, mut disjoint) = (Vec::new(), false);
        for (s, d) in sorted {
            let Some((first, end)) = self.pad_edge_sizes(s, &d) else {
                continue;
            };
            let new =
                usize::from(!edges.contains_key(&first)) + usize::from(!edges.contains_key(&end));
            if edges.len() + new > MAX_EDGES {
                continue;
            }
            // Two pads that provably hold no element in common (a concat's
            // parts) never both hold a segment.
            let apart = |(f, e): &(Size, Size)| {
                let gap = |a: &Size, b: &Size| {
                    a.sub(b)
                        .and_then(|g| g.as_constant())
                        .is_some_and(|g| g <= 0)
                };
                gap(e, &first) || gap(&end, f)
            };
            disjoint |= sizes.iter().any(apart);
            sizes.push((first.clone(), end.clone()));
            let mut range = [first, end].into_iter().map(|e| match edges.get(&e) {
                Some(&v) => Ok(v),
                None => {
                    let v = self.translate_size(&e)?;
                    edges.insert(e, v);
                    Ok::<_, Error>(v)
                }
            });
            let (Some(first), Some(end)) = (range.next(), range.next()) else {
                continue;
            };
            let range = (first?, end?);
            if !ranges.contains(&range) {
                ranges.push(range);
            }
            known.insert((s, d));
        }
        if known.is_empty() {
            return Ok(None);
        }
        if disjoint || ranges.len() > INTERIOR_PADS {
            ranges.clear();
        }
        let bounds = edges.into_values().collect();
        Ok(Some((bounds, ranges, Rc::new(known))))
    }

    /// Where pad (or `unindex`) statement `s` at shift `d` starts and ends,
    /// as indices of the tree: its first element less `d`, plus its
    /// operand's length.
    fn pad_edge_sizes(&self, s: usize, d: &Size) -> Option<(Size, Size)> {
        let stmt = &self.f.stmts[s];
        let (Op::Pad(c) | Op::Unindex(c)) = stmt.op else {
            return None;
        };
        let row = Size::product(self.f.ty(stmt.var).shape.get(1..)?)?;
        let n = Size::product(&self.f.ty(*stmt.args.first()?).shape)?;
        let first = row.scale(i64::try_from(c).ok()?)?.sub(d)?;
        let end = first.add(&n)?;
        Some((first, end))
    }

    /// The reduction (identity `init`, step `step`) of elements
    /// `start .. start + len` of `a`, in egrad's fixed order
    /// ([`crate::ops::fold_row`]).
    pub(super) fn translate_fold(
        &mut self,
        a: VarId,
        start: ir::Value,
        len: ir::Value,
        dtype: DType,
        (init, step): (f64, Op),
    ) -> Result<ir::Value, Error> {
        let blocks = FOLD_LANES as i64;
        let (width, ty) = if self.simd {
            (lanes(dtype), vec_type(dtype))
        } else {
            (1, cl_type(dtype))
        };
        let n_acc = FOLD_LANES / width as usize;
        let accs: Vec<_> = (0..n_acc).map(|_| self.b.declare_var(ty)).collect();
        let first = if self.simd {
            self.vconst(dtype, init)
        } else {
            self.translate_const(dtype, init)
        };
        for &acc in &accs {
            self.b.def_var(acc, first);
        }
        let zero = self.b.ins().iconst(types::I64, 0);
        let main = self.b.ins().band_imm_s(len, -blocks);
        let simd = self.simd;
        // Elements that call a function are computed by a loop over the
        // block of eight (a vector at a time for kernels, an element at a
        // time for the C library) into a stack slot, then added from there
        // in the same order: one copy of the element's code and its calls
        // instead of one per accumulator. Calls clobber every vector register,
        // and many call sites with values live across them cost the
        // register allocator far more than their size (an unrolled
        // 300-step program of pow folds took 17 s to compile).
        let calls = self.element_calls(a)?;
        // The C library is called a lane at a time: stage scalars.
        let (stage_width, stage_simd) = match calls {
            Calls::Libm => (1, false),
            _ => (width, simd),
        };
        let staged = if calls != Calls::None {
            let size = dtype.bytes() as u32;
            Some(self.b.create_sized_stack_slot(StackSlotData::new(
                StackSlotKind::ExplicitSlot,
                FOLD_LANES as u32 * size,
                4,
            )))
        } else {
            None
        };
        self.translate_range(zero, main, blocks, &mut |t, i| {
            let at = t.b.ins().iadd(start, i);
            let base = staged.map(|slot| t.b.ins().stack_addr(types::I64, slot, 0));
            if let Some(base) = base {
                let zero = t.b.ins().iconst(types::I64, 0);
                let lanes = t.b.ins().iconst(types::I64, blocks);
                t.translate_range(zero, lanes, stage_width, &mut |t, j| {
                    let ij = t.b.ins().iadd(at, j);
                    let x = if stage_simd {
                        t.translate_elem_vec(a, ij)?
                    } else {
                        t.translate_elem(a, ij)?
                    };
                    let addr = t.translate_addr(dtype, base, j);
                    t.b.ins().store(MemFlagsData::trusted(), x, addr, 0);
                    Ok(())
                })?;
            }
            for (k, &acc) in accs.iter().enumerate() {
                let x = match base {
                    Some(base) => {
                        let off = k as i32 * width as i32 * dtype.bytes() as i32;
                        t.b.ins().load(ty, MemFlagsData::trusted(), base, off)
                    }
                    None => {
                        let ik = t.b.ins().iadd_imm_s(at, k as i64 * width);
                        if simd {
                            t.translate_elem_vec(a, ik)?
                        } else {
                            t.translate_elem(a, ik)?
                        }
                    }
                };
                let sofar = t.b.use_var(acc);
                let next = t.translate_op(step, dtype, &[sofar, x])?;
                t.b.def_var(acc, next);
            }
            Ok(())
        })?;
        // The eight partials, in order, then q, r and their sum.
        let mut p = Vec::with_capacity(FOLD_LANES);
        for &acc in &accs {
            let x = self.b.use_var(acc);
            if simd {
                for l in 0..width as u8 {
                    p.push(self.b.ins().extractlane(x, l));
                }
            } else {
                p.push(x);
            }
        }
        let combine = |t: &mut Self, xs: &[ir::Value]| -> Result<Vec<ir::Value>, Error> {
            let half = xs.len() / 2;
            (0..half)
                .map(|j| t.translate_op(step, dtype, &[xs[j], xs[j + half]]))
                .collect()
        };
        let q = combine(self, &p)?;
        let r = combine(self, &q)?;
        let s = combine(self, &r)?;
        let total = self.b.declare_var(cl_type(dtype));
        self.b.def_var(total, s[0]);
        // Fewer than eight elements left: rare work.
        self.translate_cold(true, |t| {
            t.translate_range(main, len, 1, &mut |t, i| {
                let at = t.b.ins().iadd(start, i);
                let x = t.translate_elem(a, at)?;
                let sofar = t.b.use_var(total);
                let next = t.translate_op(step, dtype, &[sofar, x])?;
                t.b.def_var(total, next);
                Ok(())
            })
        })?;
        Ok(self.b.use_var(total))
    }

    /// Columns `0 .. n` of a row-major result row starting at element
    /// `out_row` of `base`, each the fold over `l in 0 .. k` of
    /// `term(l, j)` from `init` with `step`, in that order for every
    /// column. With SIMD, `COLUMN_VECTORS` vectors of columns at a time,
    /// then single vectors, then one column at a time: `term(l, js, vec)`
    /// gives the terms of row `l` at each column start in `js`, vectors of
    /// columns `j .. j + W` when `vec`, single elements otherwise.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn translate_columns(
        &mut self,
        dtype: DType,
        base: ir::Value,
        out_row: ir::Value,
        n: ir::Value,
        k: ir::Value,
        init: f64,
        step: &mut ColumnTerm<'_, 'a, 'b>,
    ) -> Result<(), Error> {
        let zero = self.b.ins().iconst(types::I64, 0);
        let mut rest = zero;
        if self.simd {
            let w = lanes(dtype);
            let wide = w * COLUMN_VECTORS as i64;
            let blocks = self.b.ins().band_imm_s(n, -wide);
            let singles = self.b.ins().band_imm_s(n, -w);
            for (from, to, count) in [(zero, blocks, COLUMN_VECTORS), (blocks, singles, 1)] {
                self.translate_range(from, to, w * count as i64, &mut |t, j| {
                    let accs: Vec<_> = (0..count)
                        .map(|_| t.b.declare_var(vec_type(dtype)))
                        .collect();
                    let first = t.vconst(dtype, init);
                    for &acc in &accs {
                        t.b.def_var(acc, first);
                    }
                    let zero = t.b.ins().iconst(types::I64, 0);
                    let js: Vec<_> = (0..count)
                        .map(|u| t.b.ins().iadd_imm_s(j, u as i64 * w))
                        .collect();
                    t.translate_range(zero, k, 1, &mut |t, l| {
                        let sofar: Vec<_> = accs.iter().map(|&acc| t.b.use_var(acc)).collect();
                        let next = step(t, l, &js, true, &sofar)?;
                        for (&acc, &x) in accs.iter().zip(&next) {
                            t.b.def_var(acc, x);
                        }
                        Ok(())
                    })?;
                    for (&acc, &ju) in accs.iter().zip(&js) {
                        let o = t.b.ins().iadd(out_row, ju);
                        let total = t.b.use_var(acc);
                        t.vstore(dtype, base, o, total);
                    }
                    Ok(())
                })?;
            }
            rest = singles;
        }
        self.translate_range(rest, n, 1, &mut |t, j| {
            let acc = t.b.declare_var(cl_type(dtype));
            let first = t.translate_const(dtype, init);
            t.b.def_var(acc, first);
            let zero = t.b.ins().iconst(types::I64, 0);
            t.translate_range(zero, k, 1, &mut |t, l| {
                let sofar = t.b.use_var(acc);
                let next = *step(t, l, &[j], false, &[sofar])?
                    .first()
                    .ok_or_else(|| Error::internal("backend: a column without its step"))?;
                t.b.def_var(acc, next);
                Ok(())
            })?;
            let o = t.b.ins().iadd(out_row, j);
            let total = t.b.use_var(acc);
            t.translate_store(dtype, base, o, total);
            Ok(())
        })
    }

    /// Element `(r, c .. c + W)` of the matrix `v` (`rows × cols`), read
    /// as [`Translator::translate_matrix_elem`] reads one element: from
    /// `src` at the swapped index when `v` is `transpose src` inlined (a
    /// column of `src`, gathered lane by lane).
    pub(super) fn translate_matrix_vec(
        &mut self,
        v: VarId,
        src: Option<VarId>,
        (r, c): (ir::Value, ir::Value),
        (rows, cols): (ir::Value, ir::Value),
    ) -> Result<ir::Value, Error> {
        match src {
            None => {
                let at = self.b.ins().imul(r, cols);
                let at = self.b.ins().iadd(at, c);
                self.translate_elem_vec(v, at)
            }
            Some(_) => {
                let dtype = self.f.ty(v).dtype;
                self.per_lane(dtype, c, &mut |t, cl| {
                    t.translate_matrix_elem(v, src, (r, cl), (rows, cols))
                })
            }
        }
    }
}

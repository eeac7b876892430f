//! The reference evaluator ([`Op::eval`]) and egrad's fixed reduction order
//! ([`fold_row`]).

use super::real::{mask, maximum, minimum, Real};
use super::Op;
use crate::types::value::Value;
use crate::types::DType;

/// An element function on f64-held operands, computed in a dtype's precision.
type ElemFn = fn(&[f64], DType) -> f64;

/// Apply an element-wise function in the dtype's own precision.
fn map_elems(dtype: DType, args: &[&Value], f: ElemFn) -> Value {
    let n = args.iter().map(|a| a.len()).max().unwrap_or(0);
    let shape = args
        .iter()
        .find(|a| a.len() == n)
        .map(|a| a.shape.clone())
        .unwrap_or_default();
    let mut buf = vec![0.0; args.len()];
    let mut data = Vec::with_capacity(n);
    for i in 0..n {
        for (k, a) in args.iter().enumerate() {
            buf[k] = if a.len() == 1 { a.data[0] } else { a.data[i] };
        }
        data.push(f(&buf, dtype));
    }
    Value { dtype, shape, data }
}

/// Word `w` of the Threefry block of the operands `k0 k1 c0 c1` (each
/// operand's low 32 bits), as an integer.
fn threefry_word(xs: &[f64], w: usize) -> f64 {
    use super::threefry::{threefry2x32, word};
    let x = |k: usize| word(xs.get(k).copied().unwrap_or(0.0));
    f64::from(threefry2x32([x(0), x(1)], [x(2), x(3)])[w])
}

/// Run a generic element function at the right precision.
macro_rules! elem {
    (|$($x:ident),*| $body:expr) => {
        |xs: &[f64], dtype: DType| -> f64 {
            fn go<T: Real>(xs: &[f64]) -> T {
                let mut it = xs.iter().map(|v| T::from_f64(*v));
                $(let $x: T = it.next().unwrap_or(T::from_f64(f64::NAN));)*
                $body
            }
            match dtype {
                DType::F32 => go::<f32>(xs).to_f64(),
                DType::F64 => go::<f64>(xs).to_f64(),
                DType::I64 | DType::Bool => go::<i64>(xs).to_f64(),
            }
        }
    };
}

/// How many interleaved partial results a reduction over a row keeps
/// (`sum`, `maxall`, `minall`, and each row of `sumtail`, `maxtail`,
/// `mintail`): see [`fold_row`].
pub const FOLD_LANES: usize = 8;

/// A reduction of one row in egrad's fixed order, shared by the reference
/// evaluator, constant folding and native code (which runs it as four
/// `f64x2` or two `f32x4` accumulators), so all three agree bit for bit.
///
/// Element `i` of the first `8 * floor(n / 8)` goes into partial `i mod 8`,
/// left to right from the identity; the partials combine as
/// `q_j = p_j ⊕ p_{j+4}`, `r_j = q_j ⊕ q_{j+2}`, `r_0 ⊕ r_1`; the
/// remaining `n mod 8` elements are then added left to right. A row of
/// fewer than 8 elements is therefore folded plainly left to right.
pub fn fold_row(xs: &[f64], init: f64, step: &dyn Fn(f64, f64) -> f64) -> f64 {
    let main = xs.len() - xs.len() % FOLD_LANES;
    let mut p = [init; FOLD_LANES];
    for chunk in xs[..main].chunks_exact(FOLD_LANES) {
        for (acc, &x) in p.iter_mut().zip(chunk) {
            *acc = step(*acc, x);
        }
    }
    let q: [f64; 4] = std::array::from_fn(|j| step(p[j], p[j + 4]));
    let r: [f64; 2] = std::array::from_fn(|j| step(q[j], q[j + 2]));
    let mut acc = step(r[0], r[1]);
    for &x in &xs[main..] {
        acc = step(acc, x);
    }
    acc
}

/// `x` converted to `d` (see [`Op::Convert`]).
fn convert(x: f64, d: DType) -> f64 {
    match d {
        DType::I64 => x as i64 as f64,
        // Non-zero is true (NaN included, as NumPy's `bool`).
        DType::Bool => f64::from(u8::from(x != 0.0)),
        DType::F32 | DType::F64 => d.round(x),
    }
}

/// An array of `out_shape` with every element `x` (rounded to `dtype`).
fn filled(dtype: DType, out_shape: &[usize], x: f64) -> Value {
    Value {
        dtype,
        shape: out_shape.to_vec(),
        data: vec![dtype.round(x); out_shape.iter().product()],
    }
}

/// The first element of row `k` of an array of `rows` rows of `row`
/// elements, if `k` is a row.
pub(crate) fn row_start(k: f64, rows: usize, row: usize) -> Option<usize> {
    (k >= 0.0 && k < rows as f64).then(|| k as usize * row)
}

impl Op {
    /// `fold_row` with this reduction's step, in the dtype's precision.
    fn fold_row(&self, xs: &[f64], dtype: DType) -> f64 {
        let (init, step) = self.fold();
        fold_row(xs, init, &|a, b| step(&[a, b], dtype))
    }

    /// A reduction's identity and its step as an element function.
    fn fold(&self) -> (f64, ElemFn) {
        let (init, step) = self.reduction().unwrap_or((0.0, Op::Add));
        let f: ElemFn = match step {
            Op::Max => elem!(|a, b| maximum(a, b)),
            Op::Min => elem!(|a, b| minimum(a, b)),
            _ => elem!(|a, b| a.add(b)),
        };
        (init, f)
    }
    /// The reference evaluator. `out_shape` is the concrete result shape
    /// (needed by [`Op::Zero`] and [`Op::Bcast`]); `dtype` the result dtype.
    pub fn eval(&self, args: &[&Value], dtype: DType, out_shape: &[usize]) -> Value {
        let fill = |x: f64| filled(dtype, out_shape, x);
        match self {
            Op::Const(l) => Value::scalar(l.dtype, l.value()),
            Op::Zero => fill(0.0),
            Op::Iota => Value {
                dtype,
                shape: out_shape.to_vec(),
                data: (0..out_shape.iter().product())
                    .map(|i: usize| i as f64)
                    .collect(),
            },
            Op::Dim(k) => Value::scalar(
                DType::I64,
                args[0].shape.get(*k as usize).copied().unwrap_or(0) as f64,
            ),
            // Their meaning is a loop body of the enclosing function: the
            // interpreter runs them (`ir::interp`), and constant folding
            // skips them (`Op::is_loop`).
            Op::Loop(..) | Op::LoopTape(..) | Op::LoopVjp(..) => {
                unreachable!("`{self}` is evaluated with its loop body, not by Op::eval")
            }
            // Its value is its first operand's; the rest is for AD.
            Op::Custom(..) => args[0].clone(),
            Op::Kernel(k, _) => self.eval_kernel(args, dtype, out_shape, *k),
            Op::Add => map_elems(dtype, args, elem!(|a, b| a.add(b))),
            Op::Sub => map_elems(dtype, args, elem!(|a, b| a.sub(b))),
            Op::Mul => map_elems(dtype, args, elem!(|a, b| a.mul(b))),
            Op::Div => map_elems(dtype, args, elem!(|a, b| a.div(b))),
            Op::Neg => map_elems(dtype, args, elem!(|a| a.neg())),
            Op::Math(m) => {
                let a = args[0];
                Value {
                    dtype,
                    shape: a.shape.clone(),
                    data: a.data.iter().map(|&x| m.apply(x, dtype)).collect(),
                }
            }
            Op::Pow => map_elems(dtype, args, elem!(|a, b| a.powf(b))),
            Op::Max => map_elems(dtype, args, elem!(|a, b| maximum(a, b))),
            Op::Min => map_elems(dtype, args, elem!(|a, b| minimum(a, b))),
            Op::Lt => map_elems(dtype, args, elem!(|a, b| mask(a.lt(b)))),
            Op::Le => map_elems(dtype, args, elem!(|a, b| mask(a.le(b)))),
            Op::Gt => map_elems(dtype, args, elem!(|a, b| mask(b.lt(a)))),
            Op::Ge => map_elems(dtype, args, elem!(|a, b| mask(b.le(a)))),
            Op::Eq => map_elems(dtype, args, elem!(|a, b| mask(a.eq(b)))),
            Op::Ne => map_elems(dtype, args, elem!(|a, b| mask(!a.eq(b)))),
            Op::Select => map_elems(
                dtype,
                args,
                elem!(|c, a, b| if c.eq(T::from_f64(0.0)) { b } else { a }),
            ),
            Op::Sum | Op::MaxAll | Op::MinAll => {
                // egrad's fixed order, in the dtype's precision (the JIT's).
                Value::scalar(dtype, self.fold_row(&args[0].data, dtype))
            }
            Op::Bcast => fill(args[0].as_scalar()),
            Op::Slice(c) => self.eval_slice(args, dtype, out_shape, *c),
            Op::Pad(c) | Op::Unindex(c) => self.eval_pad(args, dtype, out_shape, *c),
            Op::Index(k) => self.eval_index(args, dtype, *k),
            Op::Rem => map_elems(dtype, args, elem!(|a, b| a.rem(b))),
            Op::Threefry0 => map_elems(dtype, args, |xs, _| threefry_word(xs, 0)),
            Op::Threefry1 => map_elems(dtype, args, |xs, _| threefry_word(xs, 1)),
            Op::Convert(d) => {
                let a = args[0];
                let data = a.data.iter().map(|&x| convert(x, *d)).collect();
                Value {
                    dtype: *d,
                    shape: a.shape.clone(),
                    data,
                }
            }
            Op::Gather(_) => self.eval_gather(args, dtype),
            Op::Scatter(_) => self.eval_scatter(args, dtype, out_shape),
            Op::Repeat => self.eval_repeat(args, dtype, out_shape),
            Op::Spread => self.eval_spread(args, dtype, out_shape),
            Op::SumLead => self.eval_sumlead(args, dtype),
            Op::SumTail | Op::MaxTail | Op::MinTail => self.eval_sumtail(args, dtype),
            Op::MatMul => {
                // out[i, j]: a chain of fused multiply-adds over k from +0
                // (`crate::gemm`, the kernel native code calls too).
                let (a, b) = (args[0], args[1]);
                let (m, kk, n) = (a.shape[0], a.shape[1], b.shape[1]);
                Value {
                    dtype,
                    shape: vec![m, n],
                    data: crate::gemm::matmul(dtype == DType::F32, &a.data, &b.data, m, kk, n),
                }
            }
            Op::Reshape => Value {
                dtype,
                shape: out_shape.to_vec(),
                data: args[0].data.clone(),
            },
            Op::Transpose => self.eval_transpose(args, dtype),
            Op::Reverse => self.eval_reverse(args, dtype),
        }
    }
}

impl Op {
    /// A native kernel on the arguments' elements.
    fn eval_kernel(&self, args: &[&Value], dtype: DType, out_shape: &[usize], k: u32) -> Value {
        let ins: Vec<&[f64]> = args.iter().map(|a| &a.data[..]).collect();
        let mut out = vec![0.0; out_shape.iter().product()];
        super::kernels::call_kernel(k, &ins, &mut out);
        Value {
            dtype,
            shape: out_shape.to_vec(),
            data: out,
        }
    }

    /// Rows `c ..` of the leading axis (NaN past the end).
    fn eval_slice(&self, args: &[&Value], dtype: DType, out_shape: &[usize], c: u64) -> Value {
        let a = args[0];
        let row: usize = a.shape[1..].iter().product();
        let n: usize = out_shape.iter().product();
        let start = c as usize * row;
        let data = a.data.get(start..start + n).map(<[f64]>::to_vec);
        Value {
            dtype,
            shape: out_shape.to_vec(),
            data: data.unwrap_or_else(|| vec![f64::NAN; n]),
        }
    }

    /// The operand at rows `c ..` of zeros.
    fn eval_pad(&self, args: &[&Value], dtype: DType, out_shape: &[usize], c: u64) -> Value {
        let a = args[0];
        let mut out = filled(dtype, out_shape, 0.0);
        let row: usize = out_shape[1..].iter().product();
        let start = c as usize * row;
        if let Some(dst) = out.data.get_mut(start..start + a.data.len()) {
            dst.copy_from_slice(&a.data);
        }
        out
    }

    /// Row `k` (NaN past the end).
    fn eval_index(&self, args: &[&Value], dtype: DType, k: u64) -> Value {
        let a = args[0];
        let row: usize = a.shape[1..].iter().product();
        let start = k as usize * row;
        Value {
            dtype,
            shape: a.shape[1..].to_vec(),
            data: a
                .data
                .get(start..start + row)
                .map(<[f64]>::to_vec)
                .unwrap_or_else(|| vec![f64::NAN; row]),
        }
    }

    /// Rows at indices; an index out of range reads NaN here (the interpreter reports it before evaluating, `ir::interp`).
    fn eval_gather(&self, args: &[&Value], dtype: DType) -> Value {
        // An index out of range reads NaN here; the interpreter
        // reports it before evaluating (`ir::interp`).
        let (x, idx) = (args[0], args[1]);
        let row: usize = x.shape[1..].iter().product();
        let mut data = Vec::with_capacity(idx.len() * row);
        for &k in &idx.data {
            match row_start(k, x.shape[0], row) {
                Some(start) => data.extend_from_slice(&x.data[start..start + row]),
                None => data.extend(std::iter::repeat_n(f64::NAN, row)),
            }
        }
        let mut shape = idx.shape.clone();
        shape.extend_from_slice(&x.shape[1..]);
        Value { dtype, shape, data }
    }

    /// Rows added at indices, in index order (native code's); an index out of range is skipped here and reported by the interpreter.
    fn eval_scatter(&self, args: &[&Value], dtype: DType, out_shape: &[usize]) -> Value {
        // Rows added in index order (native code's order); an index
        // out of range is skipped here and reported by the
        // interpreter.
        let (idx, vals) = (args[0], args[1]);
        let mut out = filled(dtype, out_shape, 0.0);
        let row: usize = out_shape[1..].iter().product();
        let add: ElemFn = elem!(|a, b| a.add(b));
        for (j, &k) in idx.data.iter().enumerate() {
            if let Some(start) = row_start(k, out_shape[0], row) {
                for r in 0..row {
                    let y = &mut out.data[start + r];
                    *y = add(&[*y, vals.data[j * row + r]], dtype);
                }
            }
        }
        out
    }

    /// The operand as every row.
    fn eval_repeat(&self, args: &[&Value], dtype: DType, out_shape: &[usize]) -> Value {
        let a = args[0];
        let n: usize = out_shape.iter().product();
        let data = (0..n).map(|i| a.data[i % a.data.len().max(1)]).collect();
        Value {
            dtype,
            shape: out_shape.to_vec(),
            data,
        }
    }

    /// Row `i` filled with element `i`.
    fn eval_spread(&self, args: &[&Value], dtype: DType, out_shape: &[usize]) -> Value {
        let a = args[0];
        let n: usize = out_shape.iter().product();
        let row: usize = out_shape[1..].iter().product();
        let data = (0..n).map(|i| a.data[i / row.max(1)]).collect();
        Value {
            dtype,
            shape: out_shape.to_vec(),
            data,
        }
    }

    /// Column sums, row by row from the identity (the JIT's order).
    fn eval_sumlead(&self, args: &[&Value], dtype: DType) -> Value {
        // Row by row, top to bottom, from the identity (the JIT's order).
        let a = args[0];
        let row: usize = a.shape[1..].iter().product();
        let (init, step) = self.fold();
        let mut data = vec![init; row];
        for (i, x) in a.data.iter().enumerate() {
            let j = i % row.max(1);
            data[j] = step(&[data[j], *x], dtype);
        }
        Value {
            dtype,
            shape: a.shape[1..].to_vec(),
            data,
        }
    }

    /// Each row folded in egrad's fixed order (the JIT's).
    fn eval_sumtail(&self, args: &[&Value], dtype: DType) -> Value {
        // Each row in egrad's fixed order (the JIT's).
        let a = args[0];
        let row: usize = a.shape[1..].iter().product();
        let data = (0..a.shape[0])
            .map(|r| self.fold_row(&a.data[r * row..(r + 1) * row], dtype))
            .collect();
        Value {
            dtype,
            shape: vec![a.shape[0]],
            data,
        }
    }

    /// A matrix transposed.
    fn eval_transpose(&self, args: &[&Value], dtype: DType) -> Value {
        let a = args[0];
        let (m, n) = (a.shape[0], a.shape[1]);
        let mut data = Vec::with_capacity(m * n);
        for j in 0..n {
            for i in 0..m {
                data.push(a.data[i * n + j]);
            }
        }
        Value {
            dtype,
            shape: vec![n, m],
            data,
        }
    }

    /// Row `r` of the result is row `L-1-r` of the operand.
    fn eval_reverse(&self, args: &[&Value], dtype: DType) -> Value {
        // Row r of the result is row L-1-r of the operand.
        let a = args[0];
        let row: usize = a.shape.get(1..).unwrap_or(&[]).iter().product();
        let data = if row == 0 {
            Vec::new()
        } else {
            a.data.chunks(row).rev().flatten().copied().collect()
        };
        Value {
            dtype,
            shape: a.shape.clone(),
            data,
        }
    }
}

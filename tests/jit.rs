//! The native backend against the reference interpreter: results must be
//! bit-for-bit identical.

use egrad::internals::backend::{clif_text, compile, BackendOptions, CompiledFunction};
use egrad::internals::ir::interp;
use egrad::internals::ir::{parse_functions, Function};
use egrad::internals::types::value::Value;
use egrad::internals::types::{DType, Dim};
use proptest::prelude::*;

const OPTS: BackendOptions = BackendOptions {
    verify: true,
    simd: true,
    gemm: false,
    wide: true,
};

const SEED_GRAD: &str = "fn dloss_dw[N](%w: f32[N], %x: f32[N], %y: f32) -> f32[N] {
  %0: f32[N] = mul %w %x
  %pred: f32 = sum %0
  %err: f32 = sub %pred %y
  %1: f32 = add %err %err
  %2: f32[N] = bcast %1
  %w.ct: f32[N] = mul %2 %x
  ret %w.ct
}";

/// Test functions, written for a dtype `T` (substituted with f32 and f64).
const CASES: &[&str] = &[
    // every unary op on arrays
    "fn unary[N](%a: T[N]) -> (T[N], T[N], T[N], T[N], T[N], T[N], T[N]) {
  %0: T[N] = neg %a
  %1: T[N] = sin %a
  %2: T[N] = cos %a
  %3: T[N] = exp %a
  %4: T[N] = log %a
  %5: T[N] = sqrt %a
  %6: T[N] = tanh %a
  ret %0, %1, %2, %3, %4, %5, %6
}",
    // every binary op on arrays
    "fn binary[N](%a: T[N], %b: T[N]) -> (T[N], T[N], T[N], T[N]) {
  %0: T[N] = add %a %b
  %1: T[N] = sub %a %b
  %2: T[N] = mul %a %b
  %3: T[N] = div %a %b
  ret %0, %1, %2, %3
}",
    // every op on scalars, constants, zero, bcast to a scalar
    "fn scalars(%a: T, %b: T) -> (T, T, T, T, T, T, T, T, T, T, T, T, T, T, T) {
  %0: T = add %a %b
  %1: T = sub %a %b
  %2: T = mul %a %b
  %3: T = div %a %b
  %4: T = neg %a
  %5: T = sin %a
  %6: T = cos %a
  %7: T = exp %a
  %8: T = log %a
  %9: T = sqrt %a
  %10: T = tanh %a
  %11: T = const 0.1
  %12: T = zero
  %13: T = bcast %b
  %14: T = mul %11 %a
  ret %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14
}",
    // a fused chain: sum(sin(a*b)+c), one loop
    "fn chain[N](%a: T[N], %b: T[N], %c: T[N]) -> T {
  %0: T[N] = mul %a %b
  %1: T[N] = sin %0
  %2: T[N] = add %1 %c
  %3: T = sum %2
  ret %3
}",
    // every op fused into one sum
    "fn all_fused[N](%a: T[N], %b: T[N]) -> T {
  %0: T[N] = mul %a %b
  %1: T[N] = sin %0
  %2: T[N] = cos %1
  %3: T[N] = exp %2
  %4: T[N] = log %3
  %5: T[N] = sqrt %4
  %6: T[N] = tanh %5
  %7: T[N] = neg %6
  %8: T[N] = div %7 %b
  %9: T[N] = sub %8 %a
  %10: T = sum %9
  ret %10
}",
    // a value used twice (materialised to scratch), then fused uses of it
    "fn twice[N](%a: T[N], %b: T[N]) -> (T, T[N]) {
  %0: T[N] = mul %a %b
  %1: T[N] = sin %0
  %2: T[N] = add %0 %1
  %3: T = sum %2
  %4: T[N] = exp %2
  %5: T[N] = add %4 %2
  ret %3, %5
}",
    // broadcasting scalars and constants, a bcast used twice
    "fn bcast[N](%a: T[N], %s: T) -> (T[N], T) {
  %k: T = const 2.5
  %0: T = mul %s %k
  %1: T[N] = bcast %0
  %2: T[N] = mul %a %1
  %3: T[N] = add %2 %1
  %4: T = sum %1
  ret %3, %4
}",
    // returning a parameter, the same value twice, a bcast twice, a scalar twice
    "fn returns[N](%a: T[N], %s: T) -> (T[N], T[N], T[N], T, T, T[N], T[N], T) {
  %0: T[N] = neg %a
  %1: T[N] = bcast %s
  %2: T = exp %s
  ret %a, %0, %0, %2, %2, %1, %1, %s
}",
    // symbolic zeros: array and scalar, returned and used
    "fn zeros[N](%a: T[N]) -> (T[N], T[N], T) {
  %z: T[N] = zero
  %0: T[N] = add %a %z
  %1: T[N] = sin %0
  %s: T = zero
  %2: T = sum %z
  %3: T = add %2 %s
  ret %z, %1, %3
}",
    // 2-D arrays
    "fn two_d[N, M](%x: T[N, M], %y: T[N, M], %s: T) -> (T[N, M], T) {
  %0: T[N, M] = mul %x %y
  %1: T[N, M] = sin %x
  %2: T[N, M] = add %0 %1
  %3: T = sum %2
  %4: T[N, M] = bcast %s
  %5: T[N, M] = mul %2 %4
  ret %5, %3
}",
    // reductions of elements that call functions (the C library's pow
    // and tan, and the vector math kernels once the four inline copies
    // are used), some read through a pad's bounds checks: the backend
    // computes a block's elements into a stack slot, then adds them
    "fn fold_calls[N](%a: T[N], %b: T[N], %s: T) -> (T, T, T, T, T, T, T, T, T) {
  %sb: T[N] = bcast %s
  %0: T[N] = pow %a %sb
  %1: T = sum %0
  %2: T[2*N] = pad 0 %0
  %3: T[2*N] = pad 0 %b
  %4: T[2*N] = reverse %3
  %5: T[2*N] = add %2 %4
  %6: T = sum %5
  %7: T[N] = tan %b
  %8: T[N] = mul %7 %a
  %9: T = maxall %8
  %10: T[N] = exp %a
  %11: T = sum %10
  %12: T[N] = tanh %b
  %13: T = sum %12
  %14: T[N] = sin %a
  %15: T = minall %14
  %16: T[N] = cos %b
  %17: T = sum %16
  %18: T[N] = expm1 %a
  %19: T[2*N] = pad 0 %18
  %20: T = sum %19
  %21: T[N] = log1p %12
  %22: T[N] = tanh %21
  %23: T = sum %22
  ret %1, %6, %9, %11, %13, %15, %17, %20, %23
}",
    // the other element-wise ops, comparisons, select and the extremum reductions
    "fn more[N](%a: T[N], %b: T[N]) -> (T[N], T[N], T[N], T[N], T[N], T[N], T[N], T, T) {
  %0: T[N] = tan %a
  %1: T[N] = abs %a
  %2: T[N] = log1p %b
  %3: T[N] = expm1 %a
  %4: T[N] = pow %a %b
  %5: T[N] = max %a %b
  %6: T[N] = min %a %b
  %c0: T[N] = lt %a %b
  %c1: T[N] = le %a %b
  %c2: T[N] = gt %a %b
  %c3: T[N] = ge %a %b
  %c4: T[N] = eq %a %a
  %c5: T[N] = ne %a %b
  %7: T[N] = select %c0 %0 %1
  %8: T[N] = select %c1 %2 %3
  %9: T[N] = select %c2 %4 %5
  %10: T[N] = select %c3 %6 %c4
  %11: T[N] = select %c5 %7 %8
  %12: T[N] = add %9 %10
  %13: T = maxall %11
  %14: T = minall %12
  ret %0, %4, %5, %6, %11, %12, %c4, %13, %14
}",
    // data movement, loop nests and matrices (N-1 needs N >= 1: n = 0 is
    // rejected before running, which `check` skips)
    "fn shapes[N, M](%x: T[N, M], %y: T[M, N], %v: T[M]) -> (T[N, M], T[M], T[N], T[N, N], T[M, N], T[N, M], T, T[N], T[M]) {
  %0: T[N-1, M] = slice 1 %x
  %1: T[N, M] = pad 0 %0
  %2: T[M] = index 0 %x
  %3: T[N, M] = unindex 0 %v
  %4: T[N, M] = repeat %v
  %5: T[M] = sumlead %x
  %6: T[N] = sumtail %x
  %mx: T[N] = maxtail %x
  %mn: T[M] = mintail %y
  %7: T[N, M] = spread %6
  %8: T[N, N] = matmul %x %y
  %9: T[M, N] = transpose %x
  %10: T[N, M] = add %1 %3
  %11: T[N, M] = mul %10 %4
  %12: T[N, M] = sub %11 %7
  %13: T[M] = add %2 %5
  %14: T = sum %12
  ret %12, %13, %6, %8, %9, %4, %14, %mx, %mn
}",
    // reverse: of a vector and of matrix rows (M = 0 included), inlined
    // into consumers, of a computed value, twice, returned
    "fn reversed[N, M](%a: T[N], %x: T[N, M]) -> (T[N], T[N, M], T, T[N, M], T[N]) {
  %0: T[N] = reverse %a
  %1: T[N, M] = reverse %x
  %2: T[N] = sin %0
  %3: T = sum %2
  %4: T[N, M] = reverse %1
  %5: T[N, M] = mul %4 %x
  %6: T[N, M] = add %1 %5
  %7: T[N] = exp %a
  %8: T[N] = reverse %7
  %9: T[N] = sub %8 %a
  ret %0, %6, %3, %1, %9
}",
    // row and column reductions over broadcasts (inside them `repeat` and
    // `spread` read without a division) and over a row shift of another
    // shape (which must not use the reduction's row)
    "fn rows[N, M](%x: T[N, M], %v: T[M], %u: T[N], %z: T[N, M]) -> (T[N], T[M], T[N], T[M], T[N]) {
  %0: T[N, M] = repeat %v
  %1: T[N, M] = mul %x %0
  %2: T[N] = sumtail %1
  %3: T[N, M] = spread %u
  %4: T[N, M] = mul %3 %x
  %5: T[M] = sumlead %4
  %6: T[N-1, M] = slice 1 %z
  %7: T[N, M] = pad 0 %6
  %8: T[N, M] = add %7 %0
  %9: T[N] = maxtail %8
  %10: T[N, M] = exp %3
  %11: T[N, M] = sub %10 %0
  %12: T[M] = sumlead %11
  %13: T[N, M] = pad 1 %6
  %14: T[N, M] = mul %13 %3
  %15: T[N] = sumtail %14
  ret %2, %5, %9, %12, %15
}",
    // row and column sums of products read in place: with the matrix
    // kernels on, egrad's row-dot and column-sum kernels (`crate::gemv`)
    // for every operand form (a matrix, a row shift of one, a repeated
    // row, a spread column, the same operand twice)
    "fn gemv[N, M](%x: T[N, M], %y: T[N, M], %v: T[M], %u: T[N]) -> (T[N], T[M], T[N-1], T[M], T[N], T[M]) {
  %0: T[N, M] = mul %x %y
  %1: T[N] = sumtail %0
  %2: T[N, M] = mul %y %x
  %3: T[M] = sumlead %2
  %4: T[N-1, M] = slice 1 %x
  %5: T[N-1, M] = repeat %v
  %6: T[N-1, M] = mul %4 %5
  %7: T[N-1] = sumtail %6
  %8: T[N, M] = spread %u
  %9: T[N, M] = spread %u
  %10: T[N, M] = mul %8 %9
  %11: T[M] = sumlead %10
  %12: T[N, M] = repeat %v
  %13: T[N, M] = spread %u
  %14: T[N, M] = mul %12 %13
  %15: T[N] = sumtail %14
  %16: T[N, M] = repeat %v
  %17: T[N, M] = mul %16 %16
  %18: T[M] = sumlead %17
  ret %1, %3, %7, %11, %15, %18
}",
    // materialised broadcasts, outer products and transposes, written as
    // loop nests with a row context (no division per element), also under
    // row shifts that keep the rows' shape (the context moves with them)
    // and one that does not (`index` of a 3-D value)
    "fn nests[N, M](%x: T[N, M], %v: T[M], %u: T[N], %s: T[M, N], %w: T[N, N, M]) -> (T[N, M], T[N, M], T[N, M], T[N, M], T[N, M], T[N-1, M], T[N, M]) {
  %0: T[N, M] = repeat %v
  %1: T[N, M] = spread %u
  %2: T[N, M] = mul %1 %0
  %3: T[N, M] = transpose %s
  %4: T[N, M] = mul %3 %x
  %5: T[N, M] = add %4 %0
  %6: T[N-1, M] = slice 1 %x
  %7: T[N-1, M] = repeat %v
  %8: T[N-1, M] = mul %6 %7
  %9: T[N, M] = pad 1 %8
  %10: T[N, M] = add %9 %1
  %11: T[N, M] = sin %2
  %12: T[N, M] = pad 0 %11
  %13: T[N, M] = sub %12 %3
  %14: T[N, M] = index 0 %w
  %15: T[N, M] = add %14 %1
  %16: T[M, N] = mul %s %s
  %17: T[N, M] = transpose %16
  %18: T[N-1, M] = slice 1 %17
  %19: T[N, M] = spread %u
  %20: T[N-1, M] = slice 1 %19
  %21: T[N-1, M] = add %18 %20
  %29: T[N-1, M] = slice 1 %x
  %30: T[M, N-1] = transpose %29
  %22: T[M, N-1] = mul %30 %30
  %23: T[N-1, M] = transpose %22
  %24: T[N-1] = slice 1 %u
  %25: T[N-1, M] = spread %24
  %26: T[N-1, M] = mul %23 %25
  %27: T[N, M] = pad 1 %26
  %28: T[N, M] = add %27 %x
  ret %2, %5, %10, %13, %15, %21, %28
}",
    // literal dims mixed with parameters, and dead code
    "fn lits[N](%a: T[3], %b: T[N, 2]) -> (T[3], T) {
  %0: T[3] = exp %a
  %1: T = sum %0
  %2: T[N, 2] = tanh %b
  %3: T = sum %2
  %4: T[N, 2] = cos %b
  %5: T = sum %4
  %6: T = add %1 %3
  ret %0, %6
}",
];

fn cases(dtype: DType) -> Vec<Function> {
    CASES
        .iter()
        .map(|c| {
            let text = c.replace(" T", &format!(" {}", dtype.name()));
            let text = text.replace("(T", &format!("({}", dtype.name()));
            let mut fs = parse_functions(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            fs.remove(0)
        })
        .collect()
}

/// Deterministic pseudo-random numbers in [-2, 2).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 2.0
    }
}

fn args_for(f: &Function, n: usize, m: usize, rng: &mut Lcg) -> Vec<Value> {
    f.params
        .iter()
        .map(|p| {
            let ty = f.ty(p.var);
            let shape: Vec<usize> = ty
                .shape
                .iter()
                .map(|d| match d {
                    Dim::Lit(k) => *k as usize,
                    Dim::Param(p) if p == "N" => n,
                    Dim::Param(_) => m,
                    Dim::Sub(..) | Dim::Rows(..) | Dim::Expr(..) => {
                        panic!("{}: parameters have plain sizes", f.name)
                    }
                })
                .collect();
            let len = shape.iter().product();
            let data = (0..len).map(|_| rng.next()).collect();
            Value::array(ty.dtype, shape, data)
        })
        .collect()
}

/// Bit-for-bit equality (`to_bits` of each element, dtype and shape). The
/// one exception is which NaN comes out when several NaNs meet: IEEE 754
/// leaves it open, and both rustc and Cranelift may commute `add`/`mul`
/// operands (x86 returns the first operand's NaN), so two NaNs of any sign
/// and payload count as equal (as in `Value::bits_eq`).
fn assert_bits_eq(f: &Function, got: &[Value], want: &[Value], what: &str) {
    assert_eq!(got.len(), want.len(), "{}: {what}: result count", f.name);
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.dtype, w.dtype, "{}: {what}: result {k} dtype", f.name);
        assert_eq!(g.shape, w.shape, "{}: {what}: result {k} shape", f.name);
        for (i, (a, b)) in g.data.iter().zip(&w.data).enumerate() {
            if a.is_nan() && b.is_nan() {
                continue;
            }
            assert_eq!(
                a.to_bits(),
                b.to_bits(),
                "{}: {what}: result {k} element {i}: jit {a:?} interp {b:?}",
                f.name
            );
        }
    }
}

fn check(cf: &CompiledFunction, args: &[Value], what: &str) {
    let refs: Vec<&Value> = args.iter().collect();
    match interp::run(cf.function(), &refs) {
        Ok(want) => {
            let got = cf.call(&refs).unwrap();
            assert_bits_eq(cf.function(), &got, &want, what);
        }
        // Sizes that make a computed size negative (`N-1` at N = 0) are
        // refused by both, before anything runs.
        Err(e) => assert!(cf.call(&refs).is_err(), "{what}: {e}"),
    }
}

#[test]
fn seed_gradient() {
    let f = &parse_functions(SEED_GRAD).unwrap()[0];
    let cf = compile(f, &OPTS).unwrap();
    let w = Value::f32(&[1.0, 2.0, 3.0]);
    let x = Value::f32(&[4.0, 5.0, 6.0]);
    let y = Value::scalar(DType::F32, 0.5);
    let out = cf.call(&[&w, &x, &y]).unwrap();
    assert_eq!(out, vec![Value::f32(&[252.0, 315.0, 378.0])]);
    check(&cf, &[w, x, y], "seed");
}

#[test]
fn table_matches_interpreter_bit_for_bit() {
    let mut rng = Lcg(42);
    for dtype in [DType::F32, DType::F64] {
        for f in cases(dtype) {
            let cf = compile(&f, &OPTS).unwrap_or_else(|e| panic!("{}: {e}", f.name));
            // Lengths around the vector width (2 or 4), the reduction's
            // blocks of 8 and the column loops' 8 or 16 columns.
            for n in [0, 1, 7, 9, 17, 1000] {
                for m in [0, 1, 3, 10, 19] {
                    let args = args_for(&f, n, m, &mut rng);
                    check(&cf, &args, &format!("{dtype} N={n} M={m}"));
                }
            }
        }
    }
}

/// With the matrix kernels on (`matmul` through `crate::gemm`, row and
/// column sums of products through `crate::gemv`), still the interpreter's
/// bits.
#[test]
fn kernels_match_interpreter_bit_for_bit() {
    let kernels = BackendOptions { gemm: true, ..OPTS };
    let mut rng = Lcg(7);
    for dtype in [DType::F32, DType::F64] {
        for f in cases(dtype) {
            let cf = compile(&f, &kernels).unwrap_or_else(|e| panic!("{}: {e}", f.name));
            for n in [0, 1, 7, 9, 17, 100] {
                for m in [0, 1, 3, 10, 19, 40] {
                    let args = args_for(&f, n, m, &mut rng);
                    check(&cf, &args, &format!("{dtype} N={n} M={m} kernels"));
                }
            }
        }
    }
}

/// SIMD and scalar code keep the same order of operations (reductions in
/// egrad's fixed order in both), so they agree bit for bit; so do the
/// math functions' block kernels and their inline SIMD code.
#[test]
fn simd_and_scalar_code_agree_bit_for_bit() {
    let scalar = BackendOptions {
        simd: false,
        wide: false,
        ..OPTS
    };
    let mut rng = Lcg(5);
    for dtype in [DType::F32, DType::F64] {
        for f in cases(dtype) {
            let vector = compile(&f, &OPTS).unwrap();
            let plain = compile(&f, &scalar).unwrap();
            // SIMD with the math kernels inline rather than blocked.
            let inline = compile(
                &f,
                &BackendOptions {
                    wide: false,
                    ..OPTS
                },
            )
            .unwrap();
            for n in [1, 2, 5, 8, 13, 33] {
                for m in [1, 4, 9, 17] {
                    let args = args_for(&f, n, m, &mut rng);
                    let refs: Vec<&Value> = args.iter().collect();
                    let a = vector.call(&refs).unwrap();
                    let b = plain.call(&refs).unwrap();
                    assert_bits_eq(&f, &a, &b, &format!("{dtype} N={n} M={m} simd vs scalar"));
                    let c = inline.call(&refs).unwrap();
                    assert_bits_eq(
                        &f,
                        &a,
                        &c,
                        &format!("{dtype} N={n} M={m} blocked vs inline"),
                    );
                    check(&plain, &args, &format!("{dtype} N={n} M={m} scalar"));
                }
            }
        }
    }
}

#[test]
fn special_values_match() {
    // NaN, infinities, signed zeros, subnormals, huge and tiny numbers.
    let specials = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e-40,
        1e30,
        -1e30,
        88.7,
        -103.0,
        710.0,
        1e-310,
    ];
    for dtype in [DType::F32, DType::F64] {
        for f in cases(dtype) {
            let cf = compile(&f, &OPTS).unwrap();
            let mut rng = Lcg(7);
            let mut args = args_for(&f, specials.len(), 1, &mut rng);
            for (k, a) in args.iter_mut().enumerate() {
                let n = a.data.len();
                for (i, x) in a.data.iter_mut().enumerate() {
                    *x = dtype.round(specials[(i + 3 * k) % specials.len()]);
                }
                let _ = n;
            }
            check(&cf, &args, &format!("{dtype} specials"));
        }
    }
}

#[test]
fn deep_chain_is_fused_without_recursion() {
    let mut text = String::from("fn deep[N](%a: f64[N]) -> f64 {\n  %v0: f64[N] = sin %a\n");
    let depth = 3000;
    for k in 1..depth {
        let op = ["sin", "tanh", "neg"][k % 3];
        text += &format!("  %v{k}: f64[N] = {op} %v{}\n", k - 1);
    }
    text += &format!("  %s: f64 = sum %v{}\n  ret %s\n}}\n", depth - 1);
    let f = &parse_functions(&text).unwrap()[0];
    let cf = compile(
        f,
        &BackendOptions {
            verify: false,
            ..BackendOptions::default()
        },
    )
    .unwrap();
    let mut rng = Lcg(3);
    check(&cf, &args_for(f, 17, 0, &mut rng), "deep");
    // One pass only: the reduction's blocks of eight, then its tail.
    assert_eq!(loops_in(&clif_text(f).unwrap()), 2);
}

/// Loops in CLIF text: its back edges (a branch to a block that comes
/// earlier in the layout). Forward branches (a vector math kernel's rare
/// fallback, an `if`) are not loops.
fn loops_in(clif: &str) -> usize {
    let block_no = |s: &str| -> Option<usize> {
        let rest = s.strip_prefix("block")?;
        let end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        rest[..end].parse().ok()
    };
    let mut current = 0;
    let mut back = 0;
    for line in clif.lines() {
        let t = line.trim_start();
        if !line.starts_with(' ') {
            if let Some(b) = block_no(t) {
                current = b;
                continue;
            }
        }
        if t.starts_with("jump ") || t.starts_with("brif ") {
            back += t
                .split([' ', ','])
                .filter_map(block_no)
                .filter(|&b| b <= current)
                .count();
        }
    }
    back
}

/// Passes over the data: each is two loops, the SIMD (or blocked) one
/// and its scalar tail.
fn passes(f: &Function) -> usize {
    let loops = loops_in(&clif_text(f).unwrap());
    assert_eq!(loops % 2, 0, "{}: {loops} loops", f.name);
    loops / 2
}

#[test]
fn fusion_shapes_the_loops() {
    let loops = |text: &str| passes(&parse_functions(text).unwrap()[0]);
    // sum loop over w*x (inlined), then the returned w.ct (bcast inlined).
    assert_eq!(loops(SEED_GRAD), 2);
    let fs = cases(DType::F32);
    let by_name = |n: &str| fs.iter().find(|f| f.name == n).unwrap();
    let count = passes;
    assert_eq!(count(by_name("chain")), 1);
    assert_eq!(count(by_name("all_fused")), 1);
    // %0 (one multiply) is recomputed in both its consumers; %2 (used
    // twice, its element tree holds a `sin`) is materialised; the sum loop;
    // %5 returned.
    assert_eq!(count(by_name("twice")), 3);
    // %3 returned, sum of the bcast.
    assert_eq!(count(by_name("bcast")), 2);
}

#[test]
fn clif_text_is_deterministic() {
    for dtype in [DType::F32, DType::F64] {
        for f in cases(dtype) {
            let a = clif_text(&f).unwrap();
            let b = clif_text(&f).unwrap();
            assert_eq!(a, b);
            assert!(a.starts_with("function "), "{a}");
        }
    }
    let f = &cases(DType::F32)[0];
    let text = clif_text(f).unwrap();
    assert!(text.contains("sqrt"), "{text}");
    assert!(text.contains("call fn"), "{text}");
}

#[test]
fn bad_arguments_are_rejected_before_running() {
    let f = &parse_functions(SEED_GRAD).unwrap()[0];
    let cf = compile(f, &OPTS).unwrap();
    let w = Value::f32(&[1.0, 2.0, 3.0]);
    let x2 = Value::f32(&[4.0, 5.0]);
    let y = Value::scalar(DType::F32, 0.5);
    let e = cf.call(&[&w, &x2, &y]).unwrap_err();
    assert_eq!(e.param, Some(1));
    let e = cf.call(&[&w, &w]).unwrap_err();
    assert_eq!(e.param, None);
    let wd = Value::f64(&[1.0, 2.0, 3.0]);
    let e = cf.call(&[&wd, &w, &y]).unwrap_err();
    assert_eq!(e.param, Some(0));
    let e = cf.call(&[&w, &w, &w]).unwrap_err();
    assert_eq!(e.param, Some(2));
    // Literal dims are checked too.
    let f =
        &parse_functions("fn g(%a: f64[3]) -> f64 {\n  %0: f64 = sum %a\n  ret %0\n}").unwrap()[0];
    let cf = compile(f, &OPTS).unwrap();
    assert!(cf.call(&[&Value::f64(&[1.0; 1000])]).is_err());
    assert_eq!(
        cf.call(&[&Value::f64(&[1.0, 2.0, 3.0])]).unwrap(),
        vec![Value::scalar(DType::F64, 6.0)]
    );
}

#[test]
fn compile_and_drop_many_times() {
    let f = &parse_functions(SEED_GRAD).unwrap()[0];
    let w = Value::f32(&[1.0, 2.0, 3.0]);
    let x = Value::f32(&[4.0, 5.0, 6.0]);
    let y = Value::scalar(DType::F32, 0.5);
    for _ in 0..200 {
        let cf = compile(f, &BackendOptions::default()).unwrap();
        let out = cf.call(&[&w, &x, &y]).unwrap();
        assert_eq!(out[0].data, vec![252.0, 315.0, 378.0]);
    }
}

#[test]
fn no_arguments_and_no_size_params() {
    let f = &parse_functions(
        "fn k() -> (f32, f64[2]) {\n  %0: f32 = const 1.5\n  %1: f64 = const -0.0\n  %2: f64[2] = bcast %1\n  ret %0, %2\n}",
    )
    .unwrap()[0];
    let cf = compile(f, &OPTS).unwrap();
    check(&cf, &[], "constants");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn seed_gradient_random(
        data in prop::collection::vec((-1e3f32..1e3, -1e3f32..1e3), 0..64),
        y in -1e3f32..1e3,
    ) {
        let f = &parse_functions(SEED_GRAD).unwrap()[0];
        let cf = compile(f, &OPTS).unwrap();
        let w: Vec<f32> = data.iter().map(|p| p.0).collect();
        let x: Vec<f32> = data.iter().map(|p| p.1).collect();
        check(&cf, &[Value::f32(&w), Value::f32(&x), Value::scalar(DType::F32, y as f64)], "random");
    }

    #[test]
    fn chain_random(
        data in prop::collection::vec((any::<f64>(), any::<f64>(), -10.0f64..10.0), 0..40),
        f32s in any::<bool>(),
    ) {
        let dtype = if f32s { DType::F32 } else { DType::F64 };
        let fs = cases(dtype);
        for name in ["chain", "twice", "all_fused"] {
            let f = fs.iter().find(|f| f.name == name).unwrap();
            let cf = compile(f, &OPTS).unwrap();
            let col = |k: usize| -> Value {
                let xs: Vec<f64> = data.iter().map(|t| [t.0, t.1, t.2][k]).collect();
                Value::array(dtype, vec![xs.len()], xs)
            };
            let args: Vec<Value> = (0..f.params.len()).map(col).collect();
            check(&cf, &args, "random");
        }
    }
}

#[test]
fn one_nan_propagates_bit_exactly() {
    // With only one NaN operand the result's NaN bits are determined: compare
    // them strictly (negative and positive NaNs, and NaNs made by the ops).
    for dtype in [DType::F32, DType::F64] {
        let fs = cases(dtype);
        for name in ["binary", "unary", "chain"] {
            let f = fs.iter().find(|f| f.name == name).unwrap();
            let cf = compile(f, &OPTS).unwrap();
            let a = [f64::NAN, -f64::NAN, 1.0, -1.0, 0.0, f64::INFINITY];
            let b = [2.0, 3.0, 0.0, -0.0, 0.0, f64::INFINITY];
            let args: Vec<Value> = [&a[..], &b[..], &b[..]][..f.params.len()]
                .iter()
                .map(|xs| Value::array(dtype, vec![xs.len()], xs.to_vec()))
                .collect();
            let refs: Vec<&Value> = args.iter().collect();
            let want = interp::run(f, &refs).unwrap();
            let got = cf.call(&refs).unwrap();
            for (g, w) in got.iter().zip(&want) {
                let gb: Vec<u64> = g.data.iter().map(|x| x.to_bits()).collect();
                let wb: Vec<u64> = w.data.iter().map(|x| x.to_bits()).collect();
                assert_eq!(gb, wb, "{name} {dtype}");
            }
        }
    }
}

/// The CLIF of the seed gradient, against `tests/golden/dloss_dw.clif`
/// (System V x86-64 only: the text names the calling convention). Set
/// `UPDATE_GOLDEN=1` to rewrite the file after an intended change.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[test]
fn seed_gradient_clif_golden() {
    let f = &parse_functions(SEED_GRAD).unwrap()[0];
    let text = clif_text(f).unwrap();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/dloss_dw.clif");
    if std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1") {
        std::fs::write(path, &text).unwrap();
    }
    let want = std::fs::read_to_string(path).unwrap();
    assert_eq!(
        text, want,
        "CLIF changed; rerun with UPDATE_GOLDEN=1 if intended"
    );
}

//! A seeded fuzzer of run-time indices: nothing outside an array is ever
//! read or written, and native code fails exactly where the interpreter
//! does.
//!
//! The functions of `SRC` (gathers `x[idx]` of vectors, of matrix rows and
//! of columns; index maps composed in native code, a gathered matrix
//! transposed and gathered again; scalar run-time indices in every position of `A[a, b]`, in
//! `A[k]` and `A[k][j]`; `tabulate` over index arrays; `scatter_add` of
//! elements and of rows, with a scalar; index arithmetic; several index
//! sites in one function; `i64` values gathered; and `@grad` functions
//! through all of these) and two IR-level functions (`gather` and
//! `scatter` with an index array and with a scalar index) are called with
//! random sizes (`N`, `M` and the length `L` of the index arrays; `N`
//! and `L` possibly 0) and random indices: in range, -1, the length, the length
//! plus 1, ±2^40, `i64::MIN` and `i64::MAX`, and index arrays all in
//! range but for one element (the first, the middle or the last) or
//! mixed.
//!
//! The interpreter is the reference. For each call, native code (SIMD on
//! and off, of the IR as the checker made it and as the e-graph optimized
//! it) must give the interpreter's bits where it returns `Ok`, and the
//! same error (message with the index and the length, and site) where it
//! returns `Err`; the optimized IR must succeed or fail as the unoptimized
//! one does, with the same error (or, with several indices out of range,
//! another index error: which one is reported depends on the order the
//! program evaluates them in). Each native call is made twice: through
//! `CompiledFunction::call` and through `call_into` on borrowed arguments
//! and output buffers that are slices of larger buffers with sentinel
//! values (NaN boxes, and an out-of-range `i64`) on both sides: a read
//! outside an argument would bring a sentinel into a result (or an index
//! out of range), which is checked, and a write outside an output would
//! change a sentinel, which is checked too.
//!
//! Rows may be empty (`M` = 0): an index out of range is an error though
//! no element of its row is read (`fn srow[N, M](A: f64[N, M], k: i64) ->
//! f64[M] = A[k] * 2.0` at `A: f64[1, 0]`, `k = 1`), in native code as in
//! the interpreter: a `gather` checks all its indices where it stands.
//!
//! Indices whose arithmetic leaves ±2^53 are not drawn for the functions
//! that compute indices (`x[idx - 1]`): the interpreter holds integers
//! as `f64` and rounds them there, so its error would name another index
//! than native code's (`x[idx - 1]` at `idx = [i64::MAX]`: index
//! 9223372036854775807 against 9223372036854775806); an open bug.
//! (Scalar `i64` arguments are counts to egrad: negative or huge ones are
//! refused before running, by both.)
//!
//! Environment: `EGRAD_FUZZ_CASES` (the number of calls of each function
//! variant; 800 by default), `EGRAD_FUZZ_SECONDS` (instead, run for this
//! long), `EGRAD_FUZZ_SEED` (the base seed).

use egrad::internals::backend::{compile, BackendOptions, CompiledFunction, NativeArg, NativeOut};
use egrad::internals::ir::interp::{run, ArgError};
use egrad::internals::ir::{parse_functions, Function};
use egrad::internals::ops::Op;
use egrad::internals::pipeline::{optimize_ir, Options};
use egrad::internals::types::value::Value;
use egrad::internals::types::{DType, Dim};
use std::time::{Duration, Instant};

mod common;

use common::env_u64;
use common::rng::Rng;

/// The functions under test. Parameters are named for what they hold:
/// `k` and `idx` index along `N`, `j` and `jdx` along `M`; `x`, `A`, `w`,
/// `W` are floats, `c` integers.
const SRC: &str = "fn gv[N, L](x: f64[N], idx: i64[L]) -> f64[L] = x[idx]
fn gm[N, M, L](A: f64[N, M], idx: i64[L]) -> f64[L, M] = A[idx]
fn gc[N, M, L](A: f64[N, M], jdx: i64[L]) -> f64[N, L] = transpose(transpose(A)[jdx])
fn tg[N, M, L](A: f64[N, M], idx: i64[L]) -> f64[M, L] = transpose(A[idx]) * 2.0
fn tgt[N, M, L](A: f64[N, M], idx: i64[L], jdx: i64[L]) -> f64[L, L] = transpose(A[idx])[jdx] + 1.0
fn gi[N, L](c: i64[N], idx: i64[L]) -> i64[L] = c[idx] * 2
fn sv[N](x: f64[N], k: i64) -> f64 = x[k]
fn sab[N, M](A: f64[N, M], k: i64, j: i64) -> f64 = A[k, j]
fn sa0[N, M](A: f64[N, M], k: i64) -> f64 = A[k, 0]
fn s0b[N, M](A: f64[N, M], j: i64) -> f64 = A[0, j]
fn srow[N, M](A: f64[N, M], k: i64) -> f64[M] = A[k] * 2.0
fn skj[N, M](A: f64[N, M], k: i64, j: i64) -> f64 = A[k][j] + A[j, k]
fn sfirst[N, M, L](A: f64[N, M], idx: i64[L], j: i64) -> f64 = A[idx[0], j]
fn tv[N, L](x: f64[N], idx: i64[L]) -> f64[L] = tabulate[L](i => x[idx[i]] * 2.0)
fn tm[N, M, L](A: f64[N, M], idx: i64[L]) -> f64[L, M] = tabulate[L](i => A[idx[i]] + 1.0)
fn tw[N, L](x: f64[N], idx: i64[L], w: f64[L]) -> f64[L] = tabulate[L](i => x[idx[i]] * w[i] + f64(idx[i]))
fn cv[N, L](x: f64[N], idx: i64[L], w: f64[L]) -> f64[N] = scatter_add(x, idx, w)
fn cm[N, M, L](A: f64[N, M], idx: i64[L], W: f64[L, M]) -> f64[N, M] = scatter_add(A, idx, W)
fn c1[N, L](x: f64[N], idx: i64[L]) -> f64[N] = scatter_add(x, idx, 1.0)
fn two[N, M, L](x: f64[N], A: f64[N, M], idx: i64[L], k: i64, j: i64) -> f64 = +/x[idx] + A[k, j] * x[k]
fn ar[N](x: f64[N], k: i64) -> f64 = x[k + 1] - x[k - 1]
fn ai[N, L](x: f64[N], idx: i64[L]) -> f64[L] = x[idx * 2 - 1] + x[(idx + 1) / 2]
fn am[N, L](x: f64[N], idx: i64[L]) -> f64[L] = x[idx - 1]
fn lv[N, L](x: f64[N], idx: i64[L]) -> f64 = +/sin(x[idx])
@grad(x)
fn dlv[N, L](x: f64[N], idx: i64[L]) -> f64[N] = lv(x, idx)
fn lm[N, M, L](A: f64[N, M], idx: i64[L], k: i64, j: i64) -> f64 = +/(A[idx] .* A[idx]) + A[k, j] * +/A[k]
@grad(A)
fn dlm[N, M, L](A: f64[N, M], idx: i64[L], k: i64, j: i64) -> f64[N, M] = lm(A, idx, k, j)
fn ls[N, L](x: f64[N], idx: i64[L], w: f64[L]) -> f64 = +/sin(scatter_add(x, idx, w .* w))
@grad(x, w)
fn dls[N, L](x: f64[N], idx: i64[L], w: f64[L]) -> (f64[N], f64[L]) = ls(x, idx, w)
fn lt[N, L](x: f64[N], idx: i64[L]) -> f64 = +/tabulate[L](i => x[idx[i]] * x[idx[i]])
@grad(x)
fn dlt[N, L](x: f64[N], idx: i64[L]) -> f64[N] = lt(x, idx)
fn lk[N](x: f64[N], k: i64) -> f64 = x[k] * x[k] + sin(x[k])
@grad(x)
fn dlk[N](x: f64[N], k: i64) -> f64[N] = lk(x, k)
";

/// The functions of `SRC` that compute indices (see the module doc).
const ARITH: [&str; 3] = ["ar", "ai", "am"];

/// IR-level functions: a gather and a scatter with an index array, and a
/// gather with a scalar index.
const IR: &str =
    "fn irg[N, L](%x: f64[N, 3], %idx: i64[L], %w: f64[L, 3]) -> (f64[L, 3], f64[N, 3], f64) {
  %r: f64[L, 3] = gather 4294967301 %x %idx
  %s: f64[N, 3] = scatter 8589934600 %idx %w
  %e: f64[L, 3] = mul %r %w
  %t: f64 = sum %e
  ret %r, %s, %t
}
fn irk[N](%x: f64[N, 3], %k: i64) -> f64[3] {
  %r: f64[3] = gather 12884901900 %x %k
  ret %r
}";

/// A NaN box next to every argument and output of `call_into`.
const SENTINEL: u64 = 0x7FF4_DEAD_BEEF_5AFE;
/// An `i64` next to index arrays: out of range of every array.
const SENTINEL_I64: i64 = 0x5AFE_5AFE_5AFE_5AFE;
/// Sentinels on each side.
const PAD: usize = 4;

/// What an index parameter of this name indexes (`N` or `M`), if it is one.
fn indexes(name: &str) -> Option<&'static str> {
    match name {
        "k" | "idx" => Some("N"),
        "j" | "jdx" => Some("M"),
        _ => None,
    }
}

/// An index for an array of length `len`: in range (when there is one),
/// just outside, far outside, or the extremes (not beyond ±2^52 when
/// `arith`).
fn draw(rng: &mut Rng, len: u64, arith: bool) -> i64 {
    let len = len as i64;
    if len > 0 && rng.chance(0.45) {
        return rng.below(len as usize) as i64;
    }
    let far = if arith { 1i64 << 52 } else { i64::MAX };
    match rng.below(7) {
        0 => -1,
        1 => len,
        2 => len + 1,
        3 => 1 << 40,
        4 => -(1 << 40),
        5 => -far,
        _ => {
            if arith {
                far
            } else if rng.chance(0.5) {
                i64::MIN
            } else {
                i64::MAX
            }
        }
    }
}

/// An index array of `n` indices for length `len`: all in range, all in
/// range but one (the first, the middle or the last), or each drawn.
fn draw_array(rng: &mut Rng, n: u64, len: u64, arith: bool) -> Vec<i64> {
    let in_range = |rng: &mut Rng| rng.below(len as usize) as i64;
    match (len > 0, rng.below(3)) {
        (true, 0) => (0..n).map(|_| in_range(rng)).collect(),
        (true, 1) if n > 0 => {
            let mut v: Vec<i64> = (0..n).map(|_| in_range(rng)).collect();
            let at = match rng.below(3) {
                0 => 0,
                1 => n / 2,
                _ => n - 1,
            } as usize;
            let mut bad = draw(rng, len, arith);
            while (0..len as i64).contains(&bad) {
                bad = draw(rng, len, arith);
            }
            v[at] = bad;
            v
        }
        _ => (0..n).map(|_| draw(rng, len, arith)).collect(),
    }
}

/// Random arguments for `f` at sizes `N`, `M`, `L`.
fn arguments(f: &Function, sizes: [(&str, u64); 3], arith: bool, rng: &mut Rng) -> Vec<Value> {
    let size = |name: &str| sizes.iter().find(|s| s.0 == name).map(|s| s.1);
    f.params
        .iter()
        .map(|p| {
            let t = f.ty(p.var);
            let shape: Vec<usize> = t
                .shape
                .iter()
                .map(|d: &Dim| d.extent(&size).expect("a size") as usize)
                .collect();
            let len: usize = shape.iter().product();
            let data: Vec<f64> = match indexes(f.var_name(p.var)) {
                Some(along) => {
                    let of = size(along).unwrap();
                    let v = if shape.is_empty() {
                        vec![draw(rng, of, arith)]
                    } else {
                        draw_array(rng, len as u64, of, arith)
                    };
                    v.into_iter().map(|k| k as f64).collect()
                }
                None if t.dtype == DType::I64 => {
                    (0..len).map(|_| rng.below(7) as f64 - 3.0).collect()
                }
                None => (0..len)
                    .map(|_| (rng.below(1 << 20) as f64 / (1 << 19) as f64) - 1.0)
                    .collect(),
            };
            Value::array(t.dtype, shape, data)
        })
        .collect()
}

/// Bitwise equality of results.
fn same_bits(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.bits_eq(y))
}

/// `native` through `call_into`, on arguments and outputs that are slices
/// of larger buffers with sentinels around them; panics if a sentinel
/// shows up in a result or one next to an output changed.
fn call_guarded(
    native: &CompiledFunction,
    f: &Function,
    args: &[Value],
    what: &str,
) -> Result<Vec<Value>, ArgError> {
    let sentinel = f64::from_bits(SENTINEL);
    // The argument buffers, each with sentinels on both sides.
    let floats: Vec<Vec<f64>> = args
        .iter()
        .map(|a| {
            let mut v = vec![sentinel; PAD];
            v.extend(&a.data);
            v.extend(vec![sentinel; PAD]);
            v
        })
        .collect();
    let ints: Vec<Vec<i64>> = args
        .iter()
        .map(|a| {
            let mut v = vec![SENTINEL_I64; PAD];
            v.extend(a.data.iter().map(|&x| x as i64));
            v.extend(vec![SENTINEL_I64; PAD]);
            v
        })
        .collect();
    let nargs: Vec<NativeArg> = args
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let n = a.len();
            match (a.dtype, a.is_scalar()) {
                (DType::I64, true) => NativeArg::i64(a.data[0] as i64),
                (DType::I64, false) => NativeArg::i64s(&ints[i][PAD..PAD + n], &a.shape),
                _ => NativeArg::f64(&floats[i][PAD..PAD + n], &a.shape),
            }
        })
        .collect();
    let shapes = native.output_shapes(&nargs)?;
    let dtypes: Vec<DType> = f.rets.iter().map(|r| f.ty(*r).dtype).collect();
    let lens: Vec<usize> = shapes.iter().map(|s| s.iter().product()).collect();
    let mut fout: Vec<Vec<f64>> = lens.iter().map(|n| vec![sentinel; n + 2 * PAD]).collect();
    let mut iout: Vec<Vec<i64>> = lens
        .iter()
        .map(|n| vec![SENTINEL_I64; n + 2 * PAD])
        .collect();
    let mut ws = native.workspace();
    let r = {
        let mut outs: Vec<NativeOut> = fout
            .iter_mut()
            .zip(iout.iter_mut())
            .zip(&dtypes)
            .zip(&lens)
            .map(|(((fo, io), d), &n)| match d {
                DType::I64 => NativeOut::I64(&mut io[PAD..PAD + n]),
                _ => NativeOut::F64(&mut fo[PAD..PAD + n]),
            })
            .collect();
        native.call_into(&nargs, &mut outs, &mut ws)
    };
    for k in 0..lens.len() {
        let n = lens[k];
        for at in (0..PAD).chain(PAD + n..n + 2 * PAD) {
            assert_eq!(
                fout[k][at].to_bits(),
                SENTINEL,
                "{what}: wrote outside output {k}"
            );
            assert_eq!(
                iout[k][at], SENTINEL_I64,
                "{what}: wrote outside output {k}"
            );
        }
    }
    r?;
    let out: Vec<Value> = (0..lens.len())
        .map(|k| {
            let n = lens[k];
            let data: Vec<f64> = match dtypes[k] {
                DType::I64 => iout[k][PAD..PAD + n].iter().map(|&x| x as f64).collect(),
                _ => fout[k][PAD..PAD + n].to_vec(),
            };
            assert!(
                data.iter().all(|x| x.to_bits() != SENTINEL),
                "{what}: a sentinel from outside an argument in output {k}: {data:?}"
            );
            if dtypes[k] == DType::I64 {
                assert!(
                    data.iter().all(|&x| x as i64 != SENTINEL_I64),
                    "{what}: an i64 from outside an argument in output {k}"
                );
            }
            Value {
                dtype: dtypes[k],
                shape: shapes[k].clone(),
                data,
            }
        })
        .collect();
    Ok(out)
}

/// One function under test: its IR as the checker made it and optimized,
/// each compiled with SIMD on and off.
struct Subject {
    name: String,
    arith: bool,
    /// It has index checks at several sites.
    sites: usize,
    ir: Function,
    opt: Function,
    natives: Vec<(&'static str, Function, CompiledFunction)>,
}

fn subject(name: &str, ir: Function) -> Subject {
    let opt = optimize_ir(&ir, &Options::default())
        .unwrap_or_else(|e| panic!("{name}: optimize: {e}"))
        .after;
    let mut natives = Vec::new();
    for (which, f) in [("unoptimized", &ir), ("optimized", &opt)] {
        for simd in [true, false] {
            let opts = BackendOptions {
                verify: true,
                simd,
                gemm: false,
                wide: simd,
            };
            let c = compile(f, &opts).unwrap_or_else(|e| panic!("{name} ({which}): {e}\n{f}"));
            let label = match (which, simd) {
                ("unoptimized", true) => "unoptimized, SIMD",
                ("unoptimized", false) => "unoptimized, no SIMD",
                (_, true) => "optimized, SIMD",
                _ => "optimized, no SIMD",
            };
            natives.push((label, f.clone(), c));
        }
    }
    let mut sites: Vec<u64> = ir
        .stmts
        .iter()
        .filter_map(|st| match st.op {
            Op::Gather(s) | Op::Scatter(s) => Some(s),
            _ => None,
        })
        .collect();
    sites.sort_unstable();
    sites.dedup();
    Subject {
        name: name.to_string(),
        arith: ARITH.contains(&name),
        sites: sites.len(),
        ir,
        opt,
        natives,
    }
}

#[derive(Default)]
struct Counts {
    calls: usize,
    native_calls: usize,
    ok: usize,
    errors: usize,
    index_errors: usize,
    /// Native calls that reported another index out of range than the
    /// interpreter (functions with several sites).
    other_site: usize,
}

/// One call of `s` at random sizes and indices, checked.
fn case(s: &Subject, rng: &mut Rng, counts: &mut Counts) {
    // Rows may be empty (`M` = 0, or `N` = 0 where columns are gathered):
    // no element is read, yet an index out of range is an error.
    let sizes = [
        ("N", rng.below(7) as u64),
        ("M", rng.below(5) as u64),
        ("L", rng.below(7) as u64),
    ];
    let args = arguments(&s.ir, sizes, s.arith, rng);
    let refs: Vec<&Value> = args.iter().collect();
    let what = |v: &str| format!("{} ({v}) at {sizes:?} with {:?}", s.name, show(&args));
    let want = run(&s.ir, &refs);
    let want_opt = run(&s.opt, &refs);
    // The optimized program fails where the original does, alike (with
    // several indices out of range, the one reported depends on the order
    // the program evaluates them in, which optimizing may change).
    let index_error = |e: &ArgError| e.site.is_some() && e.message.contains("out of range");
    match (&want, &want_opt) {
        (Ok(_), Ok(_)) => {}
        (Err(a), Err(b)) if index_error(a) && index_error(b) => {}
        (Err(a), Err(b)) => assert_eq!(a, b, "{}", what("optimized interpreted")),
        _ => panic!(
            "{}: {want:?} but optimized {want_opt:?}",
            what("interpreter")
        ),
    }
    counts.calls += 1;
    match &want {
        Ok(_) => counts.ok += 1,
        Err(e) => {
            counts.errors += 1;
            if index_error(e) {
                counts.index_errors += 1;
            }
        }
    }
    for (label, f, native) in &s.natives {
        let reference = if label.starts_with("unopt") {
            &want
        } else {
            &want_opt
        };
        for (how, got) in [
            ("call", native.call(&refs)),
            ("call_into", call_guarded(native, f, &args, &what(label))),
        ] {
            counts.native_calls += 1;
            match (&got, reference) {
                (Ok(g), Ok(w)) => assert!(
                    same_bits(g, w),
                    "{}: native {g:?}, interpreter {w:?}",
                    what(&format!("{label}, {how}"))
                ),
                // With indices out of range at several sites, native code
                // may report another one than the interpreter (it checks
                // in the order of its loop nests): one out of range,
                // drawn for the call.
                (Err(g), Err(w)) if g != w && s.sites > 1 && index_error(g) && index_error(w) => {
                    let (k, len) = index_and_length(&g.message);
                    assert!(
                        !(0..len).contains(&k)
                            && (s.arith
                                || args.iter().any(|a| a.dtype == DType::I64
                                    && a.data.iter().any(|&x| x as i64 == k))),
                        "{}: native {g:?}, interpreter {w:?}",
                        what(&format!("{label}, {how}"))
                    );
                    counts.other_site += 1;
                }
                (Err(g), Err(w)) => assert_eq!(g, w, "{}", what(&format!("{label}, {how}"))),
                _ => panic!(
                    "{}: native {got:?}, interpreter {reference:?}",
                    what(&format!("{label}, {how}"))
                ),
            }
        }
    }
}

/// The index and the length an index error names.
fn index_and_length(message: &str) -> (i64, i64) {
    let words: Vec<&str> = message.split_whitespace().collect();
    let num = |w: Option<&&str>| w.and_then(|w| w.parse::<i64>().ok());
    match (num(words.get(1)), num(words.last())) {
        (Some(k), Some(n)) => (k, n),
        _ => panic!("not an index error: {message}"),
    }
}

fn show(args: &[Value]) -> Vec<String> {
    args.iter()
        .map(|a| match a.dtype {
            DType::I64 => format!("{:?}", a.data.iter().map(|&x| x as i64).collect::<Vec<_>>()),
            _ => format!("{:?} {:?}", a.shape, a.data),
        })
        .collect()
}

#[test]
fn random_indices_never_read_outside_an_array() {
    let start = Instant::now();
    let p = common::prog(SRC);
    let mut subjects: Vec<Subject> = p
        .function_names()
        .into_iter()
        .map(|name| subject(name, p.ir(name).unwrap().clone()))
        .collect();
    for f in parse_functions(IR).unwrap() {
        f.validate().unwrap();
        subjects.push(subject(&f.name.clone(), f));
    }
    let compiled = start.elapsed();
    let seed = env_u64("EGRAD_FUZZ_SEED").unwrap_or(0x1_4DE5_F022);
    let budget = env_u64("EGRAD_FUZZ_SECONDS").map(Duration::from_secs);
    let cases = env_u64("EGRAD_FUZZ_CASES").unwrap_or(800) as usize;
    let mut rng = Rng(seed);
    let mut counts = Counts::default();
    let mut round = 0;
    loop {
        let done = match budget {
            Some(b) => start.elapsed() >= b,
            None => round >= cases,
        };
        if done {
            break;
        }
        for s in &subjects {
            case(s, &mut rng, &mut counts);
        }
        round += 1;
    }
    println!(
        "index fuzz: {} functions (compiled 4 ways in {compiled:.1?}), {} calls in {:.1?}: {} in range (native gave the interpreter's bits), {} errors matched ({} indices out of range, the others argument errors before running); {} native calls (call and call_into with sentinels), {} of which reported another index out of range than the interpreter (several sites)",
        subjects.len(),
        counts.calls,
        start.elapsed(),
        counts.ok,
        counts.errors,
        counts.index_errors,
        counts.native_calls,
        counts.other_site,
    );
    // Both outcomes are exercised, for every kind of call.
    assert!(counts.ok * 5 >= counts.calls, "too few calls in range");
    assert!(
        counts.index_errors * 5 >= counts.calls,
        "too few indices out of range"
    );
}

/// Checks are left out only where the indices provably lie inside the
/// rows (the check hoisted out of the loop altogether): the states
/// `scan_all` gathers from its tape and `x[(i + 2) % 4]` over four rows
/// need none; the same index over `N` rows, or data indices, keep theirs
/// and still catch what is outside.
#[test]
fn checks_are_left_out_only_where_indices_provably_fit() {
    let src = "fn cums[T](xs: f64[T]) -> f64[T] = scan_all(xs, 0.0, (s, x) => s + x)
fn rot(x: f64[4]) -> f64[4] = tabulate[4](i => x[(i + 2) % 4])
fn rotn[N](x: f64[N]) -> f64[N] = tabulate[N](i => x[(i + 2) % 4])
fn pick[N](x: f64[N], ix: i64[3]) -> f64[3] = x[ix]";
    let p = egrad::Program::parse(src).unwrap_or_else(|e| panic!("{e}"));
    // A failed check records its site in the first status slot, 24 bytes
    // before `dims`.
    let checks = |name: &str| {
        let text = egrad::internals::backend::clif_text(p.ir(name).unwrap()).unwrap();
        text.lines()
            .filter(|l| l.contains("store") && l.trim_end().ends_with("-24"))
            .count()
    };
    assert_eq!(checks("cums"), 0);
    assert_eq!(checks("rot"), 0);
    assert!(checks("rotn") > 0);
    assert!(checks("pick") > 0);
    let f = p.ir("rot").unwrap();
    let x = Value::f64(&[1.0, 2.0, 3.0, 4.0]);
    let native = compile(f, &BackendOptions::default()).unwrap();
    assert_eq!(
        native.call(&[&x]).unwrap()[0].data,
        vec![3.0, 4.0, 1.0, 2.0]
    );
    let f = p.ir("rotn").unwrap();
    let short = Value::f64(&[1.0, 2.0, 3.0]);
    let native = compile(f, &BackendOptions::default()).unwrap();
    assert!(native.call(&[&short]).is_err());
    assert!(run(f, &[&short]).is_err());
}

/// A long chain of index maps that compose (`transpose` of `gather` of
/// `transpose` ...), with elementwise ops between some of them: native
/// code computes in place at most a few levels and gives the rest
/// buffers (the lowering recurses once per level), and gives the
/// interpreter's bits, with the SIMD path and without; an index out of
/// range anywhere in the chain is the interpreter's error.
#[test]
fn a_long_chain_of_composed_index_maps_equals_the_interpreter() {
    let mut body = String::from("A");
    for k in 0..60 {
        body = match k % 3 {
            0 => format!("transpose({body})[idx]"),
            1 => format!("transpose({body}[idx])"),
            _ => format!("(transpose({body}) * 0.5)[idx]"),
        };
    }
    let src = format!("fn chain[N](A: f64[N, N], idx: i64[N]) -> f64[N, N] = {body}\n");
    let p = common::prog(&src);
    let n = 7;
    let a = common::arr(&[n, n], 3);
    let idx = |v: Vec<i64>| {
        Value::array(
            DType::I64,
            vec![n],
            v.into_iter().map(|k| k as f64).collect(),
        )
    };
    let ok = common::run_both(&p, "chain", &[a.clone(), idx(vec![3, 0, 6, 6, 1, 2, 5])]);
    assert!(ok.is_ok(), "{ok:?}");
    let bad = common::run_both(&p, "chain", &[a, idx(vec![3, 0, 6, 7, 1, 2, 5])]);
    assert!(bad.is_err(), "index 7 of 7 rows is out of range: {bad:?}");
}

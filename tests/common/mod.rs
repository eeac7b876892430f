//! Helpers shared by integration tests.

pub mod child;
pub mod rng;

use std::path::PathBuf;

/// An integer environment variable, decimal or `0x` hexadecimal (the
/// knobs of the random tests: seeds, counts, seconds).
#[allow(dead_code)]
pub fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|s| {
        let s = s.trim();
        s.strip_prefix("0x")
            .map(|h| u64::from_str_radix(h, 16).ok())
            .unwrap_or_else(|| s.parse().ok())
    })
}

/// Run the `egrad` binary of this build: its exit code, stdout and stderr.
#[allow(dead_code)]
pub fn egrad(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_egrad"))
        .args(args)
        .output()
        .expect("run egrad");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every `examples/*.eg`, sorted.
pub fn example_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir("examples")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "eg"))
        .collect();
    files.sort();
    files
}

/// Every `examples/*.eg` and `examples/suite/*.eg`, sorted.
#[allow(dead_code)]
pub fn all_example_files() -> Vec<PathBuf> {
    let mut files = example_files();
    let mut suite: Vec<PathBuf> = std::fs::read_dir("examples/suite")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "eg"))
        .collect();
    suite.sort();
    files.extend(suite);
    files
}

/// Deterministic arguments for `f`, every size parameter `n`; parameter `k`
/// gets a different smooth sequence in (-0.9, 0.9); a run-time `i64` (a
/// loop count) is `n`, an `i64` array holds codes from -1 to 3, a `bool`
/// array alternates.
#[allow(dead_code)]
pub fn sample_args(
    f: &egrad::internals::ir::Function,
    n: usize,
) -> Vec<egrad::internals::types::value::Value> {
    f.params
        .iter()
        .enumerate()
        .map(|(k, prm)| {
            let t = f.ty(prm.var);
            if t.dtype == egrad::internals::types::DType::I64 && t.rank() == 0 {
                return egrad::internals::types::value::Value::scalar(t.dtype, n as f64);
            }
            // Sizes such as `N+1` or `2*N` at `N` = n.
            let shape: Vec<usize> = t
                .shape
                .iter()
                .map(|d| d.extent(&|_| Some(n as u64)).expect("a parameter's size") as usize)
                .collect();
            let len: usize = shape.iter().product();
            let data = (0..len)
                .map(|i| match t.dtype {
                    egrad::internals::types::DType::I64 => ((i * 7 + k * 13) % 5) as f64 - 1.0,
                    egrad::internals::types::DType::Bool => ((i + k) % 2) as f64,
                    _ => ((i * 7 + k * 13) as f64 * 0.37).sin() * 0.9,
                })
                .collect();
            egrad::internals::types::value::Value::array(t.dtype, shape, data)
        })
        .collect()
}

/// Compare `text` with the golden file at `path`, or (when `bless`, i.e.
/// `UPDATE_GOLDEN=1`) write it there. A difference or a missing file is
/// pushed to `failures`.
#[allow(dead_code)]
pub fn check_golden(path: &std::path::Path, text: &str, bless: bool, failures: &mut Vec<String>) {
    if bless {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, text).unwrap();
        return;
    }
    match std::fs::read_to_string(path) {
        Ok(want) if want == text => {}
        Ok(want) => failures.push(format!(
            "{} differs from the golden file.\n--- want\n{want}\n--- got\n{text}",
            path.display()
        )),
        Err(_) => failures.push(format!(
            "{} is missing (run with UPDATE_GOLDEN=1)",
            path.display()
        )),
    }
}

/// Run `f` with the interpreter (panics on an argument error).
#[allow(dead_code)]
pub fn eval(
    f: &egrad::internals::ir::Function,
    args: &[egrad::internals::types::value::Value],
) -> Vec<egrad::internals::types::value::Value> {
    let refs: Vec<&egrad::internals::types::value::Value> = args.iter().collect();
    egrad::internals::ir::interp::run(f, &refs).unwrap_or_else(|e| panic!("{}: {e}", f.name))
}

/// `got` is `want` within `1e-6 (1 + |want|)` element by element.
#[allow(dead_code)]
pub fn assert_close(
    got: &egrad::internals::types::value::Value,
    want: &egrad::internals::types::value::Value,
    what: &str,
) {
    assert_eq!(got.shape, want.shape, "{what}");
    for (k, (a, b)) in got.data.iter().zip(&want.data).enumerate() {
        assert!(
            (a - b).abs() <= 1e-6 * (1.0 + b.abs()),
            "{what}: element {k}: {a} vs {b}\n{got:?}\n{want:?}"
        );
    }
}

/// Native code of `f` gives the interpreter's bits; arguments the
/// interpreter refuses, native code refuses too, before it runs.
#[allow(dead_code)]
pub fn assert_jit_equals_interpreter(
    f: &egrad::internals::ir::Function,
    args: &[egrad::internals::types::value::Value],
    what: &str,
) {
    use egrad::internals::backend::{compile, BackendOptions};
    let refs: Vec<&egrad::internals::types::value::Value> = args.iter().collect();
    let native = compile(f, &BackendOptions::verified()).unwrap_or_else(|e| panic!("{what}: {e}"));
    match egrad::internals::ir::interp::run(f, &refs) {
        Ok(want) => {
            let got = native.call(&refs).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(got.len(), want.len(), "{what}");
            for (g, w) in got.iter().zip(&want) {
                assert!(g.bits_eq(w), "{what}: JIT {g:?} vs interpreter {w:?}");
            }
        }
        Err(e) => assert!(native.call(&refs).is_err(), "{what}: {e}"),
    }
}

/// The gradient function `grad` of `p` (differentiating the first `nwrt`
/// parameters of the scalar `loss`) at `args`: as the checker made it and
/// optimized at λ = 0 and 1e6, against central differences of `loss`; the
/// optimized value is `loss`'s and native code gives the interpreter's
/// bits.
#[allow(dead_code)]
pub fn check_gradient(
    p: &egrad::Program,
    grad: &str,
    loss: &str,
    nwrt: usize,
    args: &[egrad::internals::types::value::Value],
    what: &str,
) {
    use egrad::internals::pipeline::{optimize_gradient, Options};
    let primal = p.ir(loss).unwrap();
    let wrt: Vec<usize> = (0..nwrt).collect();
    let want = finite_differences(primal, args, &wrt);
    // The checker's gradient function, as callers inline it.
    let got = eval(p.ir(grad).unwrap(), args);
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_close(g, w, &format!("{what} gradient {k} (AD)"));
    }
    // The optimized value and gradient, interpreted and native.
    for lambda in [0.0, 1e6] {
        let g = optimize_gradient(p, &Options::default().function(grad).lambda(lambda))
            .unwrap_or_else(|e| panic!("{grad}: {e}"));
        let vg = g.value_and_grad_ir();
        let refs: Vec<&egrad::internals::types::value::Value> = args.iter().collect();
        let interp = egrad::internals::ir::interp::run(vg, &refs).unwrap();
        assert_eq!(interp.len(), nwrt + 1, "{vg}");
        let value = eval(primal, args)[0].as_scalar();
        let v = interp[0].as_scalar();
        assert!(
            (v - value).abs() <= 1e-12 * (1.0 + value.abs()),
            "{what}: {v} vs {value}"
        );
        for (k, (g, w)) in interp[1..].iter().zip(&want).enumerate() {
            assert_close(g, w, &format!("{what} λ={lambda} gradient {k} (optimized)"));
        }
        let native = g.compile().unwrap().native().call(&refs).unwrap();
        for (a, b) in native.iter().zip(&interp) {
            assert!(a.bits_eq(b), "{what} λ={lambda}: JIT {a:?} vs {b:?}");
        }
    }
}

/// The `@jvp` function `jvp` of `p` (tangents of the first `nwrt`
/// parameters of the scalar `loss`, passed last) at `args` in a fixed
/// direction, against a central difference of `loss` along it; optimized,
/// native code gives the interpreter's bits and the same number.
#[allow(dead_code)]
pub fn check_jvp(
    p: &egrad::Program,
    jvp: &str,
    loss: &str,
    nwrt: usize,
    args: &[egrad::internals::types::value::Value],
    what: &str,
) {
    use egrad::internals::pipeline::{optimize_ir, Options};
    use egrad::internals::types::value::Value;
    let primal = p.ir(loss).unwrap();
    let j = p.ir(jvp).unwrap();
    // Tangent directions of the differentiated parameters.
    let dirs: Vec<Value> = args[..nwrt]
        .iter()
        .map(|a| Value {
            data: a.data.iter().map(|x| (3.0 * x + 1.0).cos()).collect(),
            ..a.clone()
        })
        .collect();
    let h = 1e-6;
    let moved = |s: f64| -> f64 {
        let mut a = args.to_vec();
        for (x, d) in a.iter_mut().zip(&dirs) {
            for (xi, di) in x.data.iter_mut().zip(&d.data) {
                *xi += s * h * di;
            }
        }
        eval(primal, &a)[0].as_scalar()
    };
    let want = (moved(1.0) - moved(-1.0)) / (2.0 * h);
    let mut jargs = args.to_vec();
    jargs.extend(dirs.iter().cloned());
    let got = eval(j, &jargs)[0].as_scalar();
    assert!(
        (got - want).abs() <= 1e-6 * (1.0 + want.abs()),
        "{what}: {got} vs finite differences {want}"
    );
    // Optimized and native: the same number.
    let opt = optimize_ir(j, &Options::default()).unwrap().after;
    assert_jit_equals_interpreter(&opt, &jargs, what);
    let o = eval(&opt, &jargs)[0].as_scalar();
    assert!(
        (o - got).abs() <= 1e-12 * (1.0 + got.abs()),
        "{what}: {o} vs {got}"
    );
}

/// A loss `f` of `p` with its gradient `df`, its `@jvp` `f_jvp`, a scalar
/// of its gradient `g` and that one's gradient `dg` (`[f, df, f_jvp, g,
/// dg]`), all with respect to the first `nwrt` parameters, at `args`: JIT
/// equals the interpreter, both modes and the second order against
/// central differences.
#[allow(dead_code)]
pub fn check_both_modes_and_second_order(
    p: &egrad::Program,
    [f, df, f_jvp, g, dg]: [&str; 5],
    nwrt: usize,
    args: &[egrad::Value],
    what: &str,
) {
    run_both(p, f, args).unwrap();
    check_gradient(p, df, f, nwrt, args, what);
    check_jvp(p, f_jvp, f, nwrt, args, what);
    run_both(p, g, args).unwrap();
    check_gradient(p, dg, g, nwrt, args, &format!("second order {what}"));
}

/// The loop statements of `f`'s IR, and each one's state type.
#[allow(dead_code)]
pub fn loop_states(f: &egrad::Function) -> Vec<String> {
    f.stmts
        .iter()
        .filter_map(|s| s.op.loop_id())
        .map(|l| f.loops[l].state().to_string())
        .collect()
}

/// Parse and check `src` (named `<input>`); panics with the diagnostics.
#[allow(dead_code)]
pub fn prog(src: &str) -> egrad::Program {
    egrad::Program::parse(src).unwrap_or_else(|e| panic!("{e}"))
}

/// The rendered error of a program that must be rejected.
#[allow(dead_code)]
pub fn err(src: &str) -> String {
    match egrad::Program::parse(src) {
        Ok(_) => panic!("should be rejected:\n{src}"),
        Err(e) => e.to_string(),
    }
}

/// Central differences of a scalar function (run by the interpreter), per
/// element of each parameter in `wrt`.
#[allow(dead_code)]
pub fn finite_differences(
    f: &egrad::Function,
    args: &[egrad::Value],
    wrt: &[usize],
) -> Vec<egrad::Value> {
    let eval = |a: &[egrad::Value]| {
        let refs: Vec<&egrad::Value> = a.iter().collect();
        egrad::internals::ir::interp::run(f, &refs).unwrap()[0].as_scalar()
    };
    let mut out = Vec::new();
    for &i in wrt {
        let mut g = args[i].clone();
        for k in 0..args[i].len() {
            let x = args[i].data[k];
            let h = 1e-6 * x.abs().max(1.0);
            let mut plus = args.to_vec();
            plus[i].data[k] = x + h;
            let mut minus = args.to_vec();
            minus[i].data[k] = x - h;
            g.data[k] = (eval(&plus) - eval(&minus)) / (2.0 * h);
        }
        out.push(g);
    }
    out
}

/// Run `f` through the interpreter and the JIT (SIMD on and off): the
/// results, or the rendered errors, must agree.
#[allow(dead_code)]
pub fn run_both(
    p: &egrad::Program,
    f: &str,
    args: &[egrad::Value],
) -> Result<Vec<egrad::Value>, String> {
    use egrad::internals::backend::{compile, BackendOptions};
    use egrad::internals::call::arg_error;
    use egrad::internals::ir::interp::run;
    let ir = p.ir(f).unwrap_or_else(|e| panic!("{e}"));
    let refs: Vec<&egrad::Value> = args.iter().collect();
    let render = |e| arg_error(ir, p.file(), e).to_string();
    let want = run(ir, &refs).map_err(render);
    // SIMD with the block kernels of the math functions, and scalar code
    // with the kernels inline.
    for simd in [true, false] {
        let opts = BackendOptions {
            verify: true,
            simd,
            gemm: false,
            wide: simd,
        };
        let got = compile(ir, &opts).unwrap().call(&refs).map_err(render);
        match (&got, &want) {
            (Ok(g), Ok(w)) => {
                for (a, b) in g.iter().zip(w) {
                    assert!(a.bits_eq(b), "{f}: jit {a:?} vs interpreter {b:?}");
                }
            }
            _ => assert_eq!(got, want, "{f}"),
        }
    }
    want
}

/// A deterministic `f64` array of `shape` with values in [-1, 1) (a seed
/// gives the same values in every test).
#[allow(dead_code)]
pub fn arr(shape: &[usize], seed: u64) -> egrad::Value {
    use egrad::internals::types::DType;
    let n: usize = shape.iter().product();
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let data = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect();
    egrad::Value::array(DType::F64, shape.to_vec(), data)
}

/// Row `i` of `x` (an array of rank 1 or more): its element `i` along the
/// first axis.
#[allow(dead_code)]
pub fn row(x: &egrad::Value, i: usize) -> egrad::Value {
    let w: usize = x.shape[1..].iter().product();
    egrad::Value::array(
        x.dtype,
        x.shape[1..].to_vec(),
        x.data[i * w..(i + 1) * w].to_vec(),
    )
}

/// An `i64` scalar argument (a run-time count).
#[allow(dead_code)]
pub fn int(k: i64) -> egrad::Value {
    egrad::Value::scalar(egrad::internals::types::DType::I64, k as f64)
}

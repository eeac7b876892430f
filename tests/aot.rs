//! Ahead-of-time export: `egrad build` writes an object file and a C header;
//! a C program linked against it with `cc ... -lm` computes what the JIT
//! computes, bit for bit (the same lowering, the same libm).

use egrad::internals::backend::{self, BackendOptions};
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;
use egrad::{optimize_gradient, Arg, Options, Program};
use std::path::{Path, PathBuf};
use std::process::Command;

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("egrad-aot-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn egrad(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_egrad"))
        .args(args)
        .output()
        .expect("run egrad")
}

/// `egrad build`, then compile `main_c` against the object and run it;
/// its stdout parsed as numbers, one per line.
fn build_and_run(tag: &str, file: &str, function: &str, main_c: &str) -> Vec<f64> {
    build_and_link(tag, file, function, &[], main_c)
}

/// [`build_and_run`] with more arguments to `egrad build`; an object that
/// calls egrad's runtime library links the `libegrad_runtime.a` written
/// beside it.
fn build_and_link(tag: &str, file: &str, function: &str, extra: &[&str], main_c: &str) -> Vec<f64> {
    let dir = temp_dir(tag);
    let obj = dir.join("out.o");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let mut args = vec![
        "build",
        src.to_str().unwrap(),
        "--fn",
        function,
        "-o",
        obj.to_str().unwrap(),
    ];
    args.extend(extra);
    let out = egrad(&args);
    assert!(
        out.status.success(),
        "egrad build failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.join("out.h").exists(), "no header next to the object");
    std::fs::write(dir.join("main.c"), main_c).unwrap();
    let exe = dir.join("main");
    let runtime = dir.join("libegrad_runtime.a").exists();
    let libs: &[&str] = match runtime {
        true => &["libegrad_runtime.a", "-lm", "-lpthread", "-ldl"],
        false => &["-lm"],
    };
    let cc = Command::new("cc")
        .current_dir(&dir)
        .args(["-std=c99", "-Wall", "-Werror", "-O1", "main.c", "out.o"])
        .args(libs)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run cc (a C compiler is needed for this test)");
    assert!(
        cc.status.success(),
        "cc failed:\n{}\nheader:\n{}",
        String::from_utf8_lossy(&cc.stderr),
        std::fs::read_to_string(dir.join("out.h")).unwrap_or_default()
    );
    let run = Command::new(&exe).output().expect("run the C program");
    assert!(
        run.status.success(),
        "the C program failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let text = String::from_utf8(run.stdout).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    text.lines()
        .map(|l| {
            l.trim()
                .parse::<f64>()
                .unwrap_or_else(|_| panic!("not a number: {l:?}"))
        })
        .collect()
}

fn assert_bits(what: &str, c: &[f64], jit: &[f64]) {
    assert_eq!(c.len(), jit.len(), "{what}: {c:?} vs {jit:?}");
    for (i, (a, b)) in c.iter().zip(jit).enumerate() {
        assert_eq!(
            a.to_bits(),
            b.to_bits(),
            "{what}[{i}]: C gives {a:e}, the JIT {b:e}"
        );
    }
}

/// The JIT's value and gradients, and (with `ct`) the JIT's forward value
/// and pullback at `ct` of the split program, through the library (the
/// options `egrad build` uses by default).
fn jit(file: &str, function: &str, args: &[Value], ct: Option<f64>) -> (Vec<f64>, Vec<f64>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let program = Program::from_file(&path).unwrap();
    let g = optimize_gradient(&program, &Options::default().function(function)).unwrap();
    let compiled = g.compile().unwrap();
    let wrapped: Vec<Arg<'_>> = args.iter().map(|v| Arg::Value(v.clone())).collect();
    let (value, grads) = compiled.value_and_grad(&wrapped).unwrap();
    let mut vg = vec![value.data[0]];
    for gr in &grads {
        vg.extend(&gr.data);
    }
    let Some(ct) = ct else {
        return (vg, Vec::new());
    };
    // Forward then pullback at `ct`, split along the residual plan.
    let sp = egrad::internals::aot::split(&g).unwrap();
    let opts = BackendOptions::default();
    let fwd = backend::compile(&sp.forward, &opts).unwrap();
    let refs: Vec<&Value> = args.iter().collect();
    let fout = fwd.call(&refs).unwrap();
    let mut pargs: Vec<Value> = sp.inputs.iter().map(|&i| args[i].clone()).collect();
    pargs.extend(fout[1..].iter().cloned());
    pargs.push(Value::scalar(value.dtype, ct));
    let pb = backend::compile(&sp.pullback, &opts).unwrap();
    let prefs: Vec<&Value> = pargs.iter().collect();
    let pout = pb.call(&prefs).unwrap();
    let mut fp = vec![fout[0].data[0]];
    for gr in &pout {
        fp.extend(&gr.data);
    }
    (vg, fp)
}

const ROSENBROCK_MAIN: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include "out.h"

int main(void) {
    enum { N = 5 };
    const double x[N] = {-1.2, 1.0, 0.5, -0.3, 2.0};
    double value, grad[N];
    void *scratch = malloc(rosenbrock_grad_value_and_grad_scratch_bytes(N) + 1);
    if (rosenbrock_grad_value_and_grad(N, x, &value, grad, scratch) != 0) return 1;
    printf("%.17g\n", value);
    for (int i = 0; i < N; i++) printf("%.17g\n", grad[i]);
    free(scratch);

    /* forward, then the pullback at ct = 1 and ct = 0.5 */
    void *res = malloc(rosenbrock_grad_residual_bytes(N) + 1);
    void *fs = malloc(rosenbrock_grad_forward_scratch_bytes(N) + 1);
    void *ps = malloc(rosenbrock_grad_pullback_scratch_bytes(N) + 1);
    double v2, g2[N];
    if (rosenbrock_grad_forward(N, x, &v2, res, fs) != 0) return 1;
    printf("%.17g\n", v2);
    if (rosenbrock_grad_pullback(N, x, res, 1.0, g2, ps) != 0) return 1;
    for (int i = 0; i < N; i++) printf("%.17g\n", g2[i]);
    printf("%.17g\n", v2);
    if (rosenbrock_grad_pullback(N, x, res, 0.5, g2, ps) != 0) return 1;
    for (int i = 0; i < N; i++) printf("%.17g\n", g2[i]);
    /* sizes out of range: nothing runs */
    if (rosenbrock_grad_value_and_grad(0, x, &value, grad, scratch) != -1) return 2;
    free(res); free(fs); free(ps);
    return 0;
}
"#;

#[test]
fn rosenbrock_links_and_matches_the_jit() {
    let c = build_and_run(
        "rosenbrock",
        "examples/suite/rosenbrock.eg",
        "rosenbrock_grad",
        ROSENBROCK_MAIN,
    );
    let x = Value::f64(&[-1.2, 1.0, 0.5, -0.3, 2.0]);
    let file = "examples/suite/rosenbrock.eg";
    // (The split pullback is not run through the library here: its stored
    // residual is an `f64[N-1]` parameter, which argument binding refuses.)
    let (vg, _) = jit(file, "rosenbrock_grad", std::slice::from_ref(&x), None);
    assert_eq!(c.len(), 3 * 6);
    assert_bits("value_and_grad", &c[0..6], &vg);
    // Forward then pullback at ct = 1: the same value and gradients.
    assert_bits("forward + pullback(1)", &c[6..12], &vg);
    // The pullback at 0.5 scales the gradients (exactly: a power of two).
    let half: Vec<f64> = std::iter::once(vg[0])
        .chain(vg[1..].iter().map(|g| 0.5 * g))
        .collect();
    assert_bits("forward + pullback(0.5)", &c[12..18], &half);
}

const EULER_MAIN: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include "out.h"

int main(void) {
    double k = 0.7, c = 0.3;
    double value, gk, gc;
    void *scratch = malloc(euler_ode_grad_value_and_grad_scratch_bytes() + 1);
    if (euler_ode_grad_value_and_grad(k, c, &value, &gk, &gc, scratch) != 0) return 1;
    printf("%.17g\n%.17g\n%.17g\n", value, gk, gc);
    void *res = malloc(euler_ode_grad_residual_bytes() + 1);
    void *fs = malloc(euler_ode_grad_forward_scratch_bytes() + 1);
    void *ps = malloc(euler_ode_grad_pullback_scratch_bytes() + 1);
    double v2, gk2, gc2;
    if (euler_ode_grad_forward(k, c, &v2, res, fs) != 0) return 1;
    if (euler_ode_grad_pullback(c, res, 1.0, &gk2, &gc2, ps) != 0) return 1;
    printf("%.17g\n%.17g\n%.17g\n", v2, gk2, gc2);
    free(scratch); free(res); free(fs); free(ps);
    return 0;
}
"#;

#[test]
fn euler_ode_with_a_loop_links_and_matches_the_jit() {
    let file = "examples/suite/euler_ode.eg";
    let args = [
        Value::scalar(DType::F64, 0.7),
        Value::scalar(DType::F64, 0.3),
    ];
    let (vg, fp) = jit(file, "euler_ode_grad", &args, Some(1.0));
    // The pullback reads `c` in place, not `k` (what the C call assumes).
    let c = build_and_run("euler", file, "euler_ode_grad", EULER_MAIN);
    assert_eq!(c.len(), 6);
    assert_bits("value_and_grad", &c[0..3], &vg);
    assert_bits("forward + pullback(1)", &c[3..6], &fp);
    assert_bits(
        "forward + pullback(1) against value_and_grad",
        &c[3..6],
        &vg,
    );
}

const DECAY_MAIN: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include "out.h"

int main(void) {
    enum { N = 3 };
    const double x[N] = {0.3, -0.2, 0.5};
    double a = 0.7, value, gx[N], ga;
    /* One object serves every count: the count is the size argument `n`. */
    const int64_t counts[3] = {0, 7, 250};
    for (int c = 0; c < 3; c++) {
        int64_t n = counts[c];
        void *scratch = malloc(ddecay_value_and_grad_scratch_bytes(N, n) + 1);
        if (ddecay_value_and_grad(N, n, x, a, &value, gx, &ga, scratch) != 0) return 1;
        printf("%.17g\n", value);
        for (int i = 0; i < N; i++) printf("%.17g\n", gx[i]);
        printf("%.17g\n", ga);
        free(scratch);
    }
    return 0;
}
"#;

/// A run-time loop count (`n: i64`): the header takes it once, as the size
/// `n`, and the same object gives the JIT's numbers at every count.
#[test]
fn a_run_time_count_links_and_matches_the_jit() {
    let file = "examples/decay.eg";
    let c = build_and_run("decay", file, "ddecay", DECAY_MAIN);
    assert_eq!(c.len(), 15);
    for (k, n) in [0u64, 7, 250].into_iter().enumerate() {
        let args = [
            Value::scalar(DType::I64, n as f64),
            Value::f64(&[0.3, -0.2, 0.5]),
            Value::scalar(DType::F64, 0.7),
        ];
        let (vg, _) = jit(file, "ddecay", &args, None);
        assert_bits(
            &format!("value_and_grad at n = {n}"),
            &c[5 * k..5 * k + 5],
            &vg,
        );
    }
}

const RNN_MAIN: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include "out.h"

int main(void) {
    enum { H = 3 };
    const double W[H * H] = {0.5, -0.3, 0.2, 0.1, 0.4, -0.6, -0.2, 0.3, 0.7};
    const double h0[H] = {0.3, -0.2, 0.5};
    double value, gW[H * H], gh[H];
    const int64_t counts[3] = {0, 5, 40};
    for (int c = 0; c < 3; c++) {
        int64_t n = counts[c];
        void *scratch = malloc(drnn_value_and_grad_scratch_bytes(H, n) + 1);
        if (drnn_value_and_grad(H, n, W, h0, &value, gW, gh, scratch) != 0) return 1;
        printf("%.17g\n", value);
        for (int i = 0; i < H * H; i++) printf("%.17g\n", gW[i]);
        for (int i = 0; i < H; i++) printf("%.17g\n", gh[i]);
        free(scratch);
    }
    return 0;
}
"#;

/// A loop whose step reads a weight matrix (a capture) over a run-time
/// count: its gradient walks the steps back reading the tape at indices
/// that provably fit, so the object needs no range checks, and gives the
/// JIT's numbers at every count.
#[test]
fn a_capturing_loop_s_gradient_links_and_matches_the_jit() {
    let file = "examples/recurrent.eg";
    let c = build_and_run("rnn", file, "drnn", RNN_MAIN);
    assert_eq!(c.len(), 39);
    let w = Value::array(
        DType::F64,
        vec![3, 3],
        vec![0.5, -0.3, 0.2, 0.1, 0.4, -0.6, -0.2, 0.3, 0.7],
    );
    for (k, n) in [0u64, 5, 40].into_iter().enumerate() {
        let args = [
            Value::scalar(DType::I64, n as f64),
            w.clone(),
            Value::f64(&[0.3, -0.2, 0.5]),
        ];
        let (vg, _) = jit(file, "drnn", &args, None);
        assert_bits(&format!("drnn at n = {n}"), &c[13 * k..13 * k + 13], &vg);
    }
}

const RANDOM_MAIN: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include "out.h"

int main(void) {
    enum { N = 3 };
    const double mu[N] = {0.5, -1.0, 2.0}, log_s[N] = {-0.3, 0.1, 0.0}, y[N] = {1.0, 0.0, -1.0};
    double value, gmu[N], gs[N];
    /* The noise is drawn from the key of `seed` inside the object: the
       same numbers as the JIT's and the interpreter's. */
    const int64_t seeds[2] = {3, 1000003};
    for (int k = 0; k < 2; k++) {
        void *scratch = malloc(dloss_value_and_grad_scratch_bytes(N, seeds[k]) + 1);
        if (dloss_value_and_grad(N, seeds[k], mu, log_s, y, &value, gmu, gs, scratch) != 0) return 1;
        printf("%.17g\n", value);
        for (int i = 0; i < N; i++) printf("%.17g\n", gmu[i]);
        for (int i = 0; i < N; i++) printf("%.17g\n", gs[i]);
        free(scratch);
    }
    return 0;
}
"#;

/// Random numbers drawn inside an object file (`examples/random.eg`: a
/// stochastic loss at the key of a seed): the JIT's numbers, bit for bit.
#[test]
fn random_numbers_link_and_match_the_jit() {
    let file = "examples/random.eg";
    let c = build_and_run("random", file, "dloss", RANDOM_MAIN);
    assert_eq!(c.len(), 14);
    for (k, seed) in [3u64, 1000003].into_iter().enumerate() {
        let args = [
            Value::f64(&[0.5, -1.0, 2.0]),
            Value::f64(&[-0.3, 0.1, 0.0]),
            Value::f64(&[1.0, 0.0, -1.0]),
            Value::scalar(DType::I64, seed as f64),
        ];
        let (vg, _) = jit(file, "dloss", &args, None);
        assert_bits(&format!("dloss at seed {seed}"), &c[7 * k..7 * k + 7], &vg);
    }
}

#[test]
fn build_errors_are_clear() {
    let dir = temp_dir("errors");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/suite/rosenbrock.eg");
    let src = src.to_str().unwrap();
    let obj = dir.join("out.o");
    let obj = obj.to_str().unwrap();
    // Exit 2 for usage errors (no such function or parameter, a flag that
    // does not apply), 1 for a file that cannot be written.
    let fails = |args: &[&str], needle: &str| {
        let out = egrad(args);
        let err = String::from_utf8_lossy(&out.stderr);
        let want = if needle.starts_with('/') { 1 } else { 2 };
        assert_eq!(out.status.code(), Some(want), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    };
    fails(&["build", src, "--fn", "nope", "-o", obj], "nope");
    fails(
        &[
            "build",
            src,
            "--fn",
            "rosenbrock",
            "-o",
            "/nonexistent/dir/out.o",
        ],
        "/nonexistent/dir/out.o",
    );
    fails(
        &[
            "build",
            src,
            "--fn",
            "rosenbrock_grad",
            "--wrt",
            "x",
            "-o",
            obj,
        ],
        "@grad",
    );
    fails(
        &["build", src, "--fn", "rosenbrock", "--wrt", "y", "-o", obj],
        "no parameter `y`",
    );
    // A plain function: one entry, `rosenbrock`.
    let out = egrad(&["build", src, "--fn", "rosenbrock", "-o", obj]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let h = std::fs::read_to_string(dir.join("out.h")).unwrap();
    assert!(
        h.contains(
            "static inline int rosenbrock(int64_t N, const double *x, double *out0, void *scratch)"
        ),
        "{h}"
    );
    assert!(h.contains("void rosenbrock_raw(void *const *bufs, const int64_t *dims);"));
    let _ = std::fs::remove_dir_all(&dir);
}

const SIZES_MAIN: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include "out.h"

int main(void) {
    /* Sizes N, H, W, O: x0 is an f64[1], x an f64[N], img an f64[H, W],
       Wt an f64[O, H*W], y an f64[O], xy an f64[2*N]. */
    enum { N = 3, H = 2, W = 3, O = 2 };
    double x0[1] = {0.25}, x[N], img[H * W], Wt[O * H * W], y[O], xy[2 * N];
    for (int i = 0; i < N; i++) x[i] = 0.1 * i - 0.2;
    for (int i = 0; i < H * W; i++) img[i] = 0.3 - 0.07 * i;
    for (int i = 0; i < O * H * W; i++) Wt[i] = 0.05 * (i % 5) - 0.1;
    for (int i = 0; i < O; i++) y[i] = 0.5 * i;
    for (int i = 0; i < 2 * N; i++) xy[i] = 0.2 * i + 0.1;
    double value, g0[1], gx[N], gWt[O * H * W], gxy[2 * N];
    void *scratch = malloc(dloss_value_and_grad_scratch_bytes(N, H, W, O) + 1);
    if (dloss_value_and_grad(N, H, W, O, x0, x, img, Wt, y, xy, &value, g0, gx, gWt, gxy, scratch) != 0) return 1;
    printf("%.17g\n%.17g\n", value, g0[0]);
    for (int i = 0; i < N; i++) printf("%.17g\n", gx[i]);
    for (int i = 0; i < O * H * W; i++) printf("%.17g\n", gWt[i]);
    for (int i = 0; i < 2 * N; i++) printf("%.17g\n", gxy[i]);
    /* A size that makes a computed length negative is refused. */
    if (dloss_check_sizes(-1, H, W, O) == 0) return 2;
    free(scratch);
    return 0;
}
"#;

/// Size expressions in the signature (`f64[O, H*W]`, `f64[2*N]`) and in
/// the program (`N+1`, `reshape`, `flatten`): the header computes every
/// length from the sizes, and the object gives the JIT's bits.
#[test]
fn size_expressions_link_and_match_the_jit() {
    let file = "examples/sizes.eg";
    let c = build_and_run("sizes", file, "dloss", SIZES_MAIN);
    let (n, h, w, o) = (3usize, 2usize, 3usize, 2usize);
    let f = |len: usize, g: &dyn Fn(usize) -> f64| (0..len).map(g).collect::<Vec<f64>>();
    let args = [
        Value::f64(&[0.25]),
        Value::f64(&f(n, &|i| 0.1 * i as f64 - 0.2)),
        Value::array(DType::F64, vec![h, w], f(h * w, &|i| 0.3 - 0.07 * i as f64)),
        Value::array(
            DType::F64,
            vec![o, h * w],
            f(o * h * w, &|i| 0.05 * (i % 5) as f64 - 0.1),
        ),
        Value::f64(&f(o, &|i| 0.5 * i as f64)),
        Value::f64(&f(2 * n, &|i| 0.2 * i as f64 + 0.1)),
    ];
    let (vg, _) = jit(file, "dloss", &args, None);
    assert_bits("value_and_grad", &c, &vg);
}

/// Sizes too large for this machine: the header's byte counts saturate at
/// `SIZE_MAX` (which `malloc` refuses) instead of wrapping to a small
/// number that would let the native code write past the buffer.
const HUGE_MAIN: &str = r#"
#include <stdio.h>
#include <stdint.h>
#include "out.h"
int main(void) {
    int64_t big = INT64_C(1) << 62;
    /* f64[O, H*W] at O = H = W = 2^62: the product overflows every type. */
    size_t r = dloss_residual_bytes(big, big, big, big);
    size_t s = dloss_value_and_grad_scratch_bytes(3, big, big, 2);
    size_t f = dloss_forward_scratch_bytes(big, 1, 1, 1);
    /* Small sizes are exact. */
    size_t small = dloss_residual_bytes(3, 2, 3, 2);
    printf("%d\n%d\n%d\n%d\n", r == SIZE_MAX, s == SIZE_MAX, f == SIZE_MAX || f == 0,
           small > 0 && small < 4096);
    printf("%d\n", dloss_check_sizes(3, 2, 3, 2) == 0 && dloss_check_sizes(-1, 2, 3, 2) != 0);
    return 0;
}
"#;

#[test]
fn huge_sizes_saturate_in_the_header_instead_of_wrapping() {
    let c = build_and_run("huge", "examples/sizes.eg", "dloss", HUGE_MAIN);
    assert_eq!(c, vec![1.0; 5]);
}

/// The header of a gradient is linear in its size: each residual's offset
/// is one step from the one before, not the whole sum spelled out (which
/// made 8.3 MB of header for a chain of 250 `let`s and 32.5 MB for 500).
/// Doubling the chain at most a little more than doubles the header, and
/// `cc` compiles the longer one.
#[test]
fn the_header_grows_linearly_with_the_gradient() {
    let dir = temp_dir("linear-header");
    let mut bytes = Vec::new();
    for k in [100usize, 200] {
        let mut src = String::from("fn f[N](x: f64[N]) -> f64 {\n  let y0 = sin(x)\n");
        for i in 1..k {
            src.push_str(&format!("  let y{i} = sin(y{}) * x\n", i - 1));
        }
        src.push_str(&format!("  +/(y{})\n}}\n", k - 1));
        let file = dir.join(format!("chain{k}.eg"));
        std::fs::write(&file, src).unwrap();
        let (obj, header) = (
            dir.join(format!("chain{k}.o")),
            dir.join(format!("chain{k}.h")),
        );
        let out = egrad(&[
            "build",
            file.to_str().unwrap(),
            "--fn",
            "f",
            "--grad",
            "--no-optimize",
            "--lambda",
            "0",
            "-q",
            "-o",
            obj.to_str().unwrap(),
            "--header",
            header.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&header).unwrap();
        // Every stored residual has its offset function.
        assert!(text.matches("f_residual_offset_").count() >= k, "{k}");
        bytes.push(text.len());
    }
    let ratio = bytes[1] as f64 / bytes[0] as f64;
    assert!(
        ratio < 2.3,
        "header bytes {bytes:?}: doubling the program multiplied them by {ratio:.2}"
    );
    let main_c = dir.join("main.c");
    std::fs::write(
        &main_c,
        "#include \"chain200.h\"\nint main(void) { return f_residual_bytes(10) > 0 ? 0 : 1; }\n",
    )
    .unwrap();
    let status = Command::new("cc")
        .args(["-c", "-o"])
        .arg(dir.join("main.o"))
        .arg(&main_c)
        .arg("-I")
        .arg(&dir)
        .status()
        .expect("run cc");
    assert!(status.success());
}

const LINALG_MAIN: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include "out.h"

int main(void) {
    enum { N = 4, K = 3 };
    double a[N * N], b[N * K], m[N * N];
    for (int i = 0; i < N * N; i++) m[i] = 0.25 * ((i * 7) % 5) - 0.4;
    /* a = m m^T + N I: symmetric positive definite */
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            double s = i == j ? N : 0.0;
            for (int k = 0; k < N; k++) s += m[i * N + k] * m[j * N + k];
            a[i * N + j] = s;
        }
    for (int i = 0; i < N * K; i++) b[i] = 0.5 - 0.125 * i;
    double value, ga[N * N], gb[N * K];
    void *scratch = malloc(loss_grad_value_and_grad_scratch_bytes(N, K) + 1);
    if (loss_grad_value_and_grad(N, K, a, b, &value, ga, gb, scratch) != 0) return 1;
    printf("%.17g\n", value);
    for (int i = 0; i < N * N; i++) printf("%.17g\n", ga[i]);
    for (int i = 0; i < N * K; i++) printf("%.17g\n", gb[i]);
    for (int i = 0; i < N * N; i++) printf("%.17g\n", a[i]);
    for (int i = 0; i < N * K; i++) printf("%.17g\n", b[i]);
    free(scratch);
    return 0;
}
"#;

/// `cholesky`, `logdet` and `matmul` in an object file: `egrad build`
/// writes the runtime library beside it, the C program links it, and the
/// value and gradients are the JIT's, bit for bit.
#[test]
fn linear_algebra_links_with_the_runtime_library_and_matches_the_jit() {
    let file = "tests/data/aot/linalg.eg";
    let c = build_and_link("linalg", file, "loss_grad", &[], LINALG_MAIN);
    let (n, k) = (4, 3);
    assert_eq!(c.len(), 1 + n * n + n * k + n * n + n * k);
    // The inputs the C program made, exactly.
    let inputs = &c[1 + n * n + n * k..];
    let a = Value::array(DType::F64, vec![n, n], inputs[..n * n].to_vec());
    let b = Value::array(DType::F64, vec![n, k], inputs[n * n..].to_vec());
    let (vg, _) = jit(file, "loss_grad", &[a, b], None);
    assert!(vg.iter().all(|x| x.is_finite()), "{vg:?}");
    assert_bits("value_and_grad", &c[..1 + n * n + n * k], &vg);
}

/// `--runtime` puts a plain `matmul` through the runtime library's kernel
/// (the JIT's), with the same bits as the loop nest an object runs alone;
/// without `--runtime` the object needs the C library only.
#[test]
fn runtime_flag_calls_the_matrix_kernel() {
    let main_c = r#"
#include <stdio.h>
#include <stdlib.h>
#include "out.h"
int main(void) {
    enum { M = 3, K = 5, N = 2 };
    double a[M * K], b[K * N], c[M * N];
    for (int i = 0; i < M * K; i++) a[i] = 0.1 * i - 0.7;
    for (int i = 0; i < K * N; i++) b[i] = 1.0 / (i + 1);
    void *scratch = malloc(mm_scratch_bytes(M, K, N) + 1);
    if (mm(M, K, N, a, b, c, scratch) != 0) return 1;
    for (int i = 0; i < M * N; i++) printf("%.17g\n", c[i]);
    free(scratch);
    return 0;
}
"#;
    let dir = temp_dir("mm-src");
    let src = dir.join("mm.eg");
    std::fs::write(
        &src,
        "fn mm[M, K, N](a: f64[M, K], b: f64[K, N]) -> f64[M, N] = matmul(a, b)\n",
    )
    .unwrap();
    let src = src.to_str().unwrap();
    let kernel = build_and_link("mm-rt", src, "mm", &["--runtime"], main_c);
    let nest = build_and_link("mm-nest", src, "mm", &[], main_c);
    assert_bits("kernel vs loop nest", &kernel, &nest);
    let a: Vec<f64> = (0..15).map(|i| 0.1 * i as f64 - 0.7).collect();
    let b: Vec<f64> = (0..10).map(|i| 1.0 / (i + 1) as f64).collect();
    let program = Program::parse(&std::fs::read_to_string(src).unwrap()).unwrap();
    let f = program.ir("mm").unwrap();
    let jit = backend::compile(f, &BackendOptions::default()).unwrap();
    let out = jit
        .call(&[
            &Value::array(DType::F64, vec![3, 5], a),
            &Value::array(DType::F64, vec![5, 2], b),
        ])
        .unwrap();
    assert_bits("C vs JIT", &kernel, &out[0].data);
    // What each object calls, as `--json` reports it.
    let obj = dir.join("mm.o");
    let calls = |extra: &[&str]| {
        let mut args = vec!["build", src, "--fn", "mm", "--json", "-o"];
        args.push(obj.to_str().unwrap());
        args.extend(extra);
        let out = egrad(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (j["runtime_calls"].clone(), j["runtime_library"].clone())
    };
    let (none, no_lib) = calls(&[]);
    assert_eq!(none, serde_json::json!([]));
    assert!(no_lib.is_null());
    let (gemm, lib) = calls(&["--runtime"]);
    assert_eq!(gemm, serde_json::json!(["egrad_dgemm"]));
    assert!(Path::new(lib.as_str().unwrap()).is_file());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `data` number is passed by value (it may be negative) and an `i64`
/// array by pointer; a count is the size argument. The C program gets the
/// JIT's bits.
#[test]
fn data_numbers_and_integer_arrays_link_and_match_the_jit() {
    let dir = temp_dir("data-src");
    let src = dir.join("pick.eg");
    let text = "fn pick[N](x: f64[N], k: i64[N], data s: i64) -> f64 = +/(x .* f64(k)) * f64(s) + f64(s * N)\n";
    std::fs::write(&src, text).unwrap();
    let main_c = r#"
#include <stdio.h>
#include <stdlib.h>
#include "out.h"
int main(void) {
    double x[3] = {0.5, -1.25, 2.0}, out;
    int64_t k[3] = {1, 2, 3};
    void *scratch = malloc(pick_scratch_bytes(3) + 1);
    if (pick(3, x, k, -2, &out, scratch) != 0) return 1;
    printf("%.17g\n", out);
    free(scratch);
    return 0;
}
"#;
    let c = build_and_link("data", src.to_str().unwrap(), "pick", &[], main_c);
    let program = Program::parse(text).unwrap();
    let jit = backend::compile(program.ir("pick").unwrap(), &BackendOptions::default()).unwrap();
    let i64s = Value::array(DType::I64, vec![3], vec![1.0, 2.0, 3.0]);
    let out = jit
        .call(&[
            &Value::f64(&[0.5, -1.25, 2.0]),
            &i64s,
            &Value::scalar(DType::I64, -2.0),
        ])
        .unwrap();
    assert_bits("C vs JIT", &c, &out[0].data);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The runtime library is found before anything is written: a missing
/// one (`EGRAD_RUNTIME_LIB` naming no file) is a usage error that writes
/// no object, and the one it names is copied beside the object.
#[test]
fn the_runtime_library_is_found_before_anything_is_written() {
    let dir = temp_dir("rt-lookup");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/aot/linalg.eg");
    let obj = dir.join("w.o");
    let build = |lib: &Path| {
        Command::new(env!("CARGO_BIN_EXE_egrad"))
            .args(["build", src.to_str().unwrap(), "--fn", "whitened", "-o"])
            .arg(&obj)
            .env("EGRAD_RUNTIME_LIB", lib)
            .output()
            .expect("run egrad")
    };
    let out = build(&dir.join("missing.a"));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("EGRAD_RUNTIME_LIB names") && e.contains("not a file"),
        "{e}"
    );
    assert!(!obj.exists() && !dir.join("w.h").exists());
    // Any file it names is what is copied (the linking is tested above).
    let fake = dir.join("fake.a");
    std::fs::write(&fake, b"!<arch>\n").unwrap();
    let out = build(&fake);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read(dir.join("libegrad_runtime.a")).unwrap(),
        b"!<arch>\n"
    );
    assert!(obj.exists() && dir.join("w.h").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

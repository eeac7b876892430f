//! The `egrad` binary end to end: outputs, dumps, and errors that name the
//! place with a caret and exit non-zero.

mod common;
use common::egrad;

#[test]
fn seed_gradient_through_the_jit() {
    let (code, out, err) = egrad(&[
        "run",
        "examples/loss.eg",
        "--fn",
        "dloss_dw",
        "--arg",
        "w=[1,2,3]",
        "--arg",
        "x=[4,5,6]",
        "--arg",
        "y=0.5",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "[252, 315, 378]\n");
}

#[test]
fn interpreter_agrees() {
    let (code, out, err) = egrad(&[
        "run",
        "examples/loss.eg",
        "--fn",
        "dloss_dw",
        "--arg",
        "w=[1,2,3]",
        "--arg",
        "x=[4,5,6]",
        "--arg",
        "y=0.5",
        "--interp",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "[252, 315, 378]\n");
}

#[test]
fn random_inputs_are_reproducible() {
    let args = [
        "run",
        "examples/loss.eg",
        "--fn",
        "loss",
        "--random",
        "--dim",
        "N=1000",
        "--seed",
        "3",
    ];
    let (code, a, err) = egrad(&args);
    assert_eq!(code, 0, "{err}");
    let (_, b, _) = egrad(&args);
    assert_eq!(a, b);
    let (code, _, err) = egrad(&["run", "examples/loss.eg", "--fn", "loss", "--random"]);
    assert_eq!(code, 2, "a usage error");
    assert!(err.contains("--dim N=SIZE"), "{err}");
}

/// Parameters typed with size expressions (`f64[O, H*W]`, `f64[2*N]`):
/// random inputs take their lengths from `--dim`, the cost model prices
/// them there, and a wrong length is refused naming the parameter.
#[test]
fn size_expressions_in_parameters() {
    let (code, out, err) = egrad(&[
        "run",
        "examples/sizes.eg",
        "--fn",
        "norms",
        "--arg",
        "xy=[3,4,6,8]",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "[5, 10]\n");
    let mut args = vec!["run", "examples/sizes.eg", "--fn", "dloss", "--random"];
    args.extend([
        "--dim", "N=5", "--dim", "H=2", "--dim", "W=3", "--dim", "O=4",
    ]);
    let (code, out, err) = egrad(&args);
    assert_eq!(code, 0, "{err}");
    // The gradients, of lengths 1, N, O*H*W (a matrix, a row per line)
    // and 2*N, each labelled with its parameter.
    let parts: Vec<(&str, usize)> = out
        .split("grad_")
        .skip(1)
        .map(|p| {
            let (name, value) = p.split_once(": ").unwrap();
            (name, value.split(',').count())
        })
        .collect();
    assert_eq!(
        parts,
        [("x0", 1), ("x", 5), ("Wt", 24), ("xy", 10)],
        "{out}"
    );
    let (code, _, err) = egrad(&["run", "examples/sizes.eg", "--fn", "norms", "--random"]);
    assert_eq!(code, 2, "a usage error");
    assert!(err.contains("--dim N=SIZE"), "{err}");
    let (code, _, err) = egrad(&[
        "run",
        "examples/sizes.eg",
        "--fn",
        "norms",
        "--arg",
        "xy=[3,4,6]",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("argument `xy` has length 3, but its type f64[2*N] needs a length 2*N for a whole number `N`"),
        "{err}"
    );
}

#[test]
fn extracted_gradient_has_no_zero_and_no_duplicates() {
    let (code, out, err) = egrad(&[
        "grad",
        "examples/loss.eg",
        "--fn",
        "dloss_dw",
        "--dump",
        "extracted",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("zero"), "{out}");
    // No two statements compute the same op on the same operands.
    let mut seen = std::collections::HashSet::new();
    for line in out.lines().filter(|l| l.contains(" = ")) {
        let rhs = line.split(" = ").nth(1).unwrap().to_string();
        assert!(
            seen.insert(rhs.clone()),
            "duplicated subexpression `{rhs}` in\n{out}"
        );
    }
    // The scalar cotangent is multiplied into x exactly once, no `mul` by one.
    assert!(!out.contains("const 1\n"), "{out}");
}

#[test]
fn report_shows_op_counts_before_and_after() {
    let (code, out, err) = egrad(&["grad", "examples/loss.eg", "--fn", "dloss_dw", "--report"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("ops before:"), "{out}");
    assert!(out.contains("ops after:"), "{out}");
    assert!(out.contains("stop: saturated"), "{out}");
    assert!(out.contains("residuals:"), "{out}");
}

#[test]
fn every_stage_dumps() {
    for stage in ["ast", "ir", "ad", "extracted", "clif"] {
        let (code, out, err) = egrad(&[
            "grad",
            "examples/loss.eg",
            "--fn",
            "dloss_dw",
            "--dump",
            stage,
        ]);
        assert_eq!(code, 0, "{stage}: {err}");
        assert!(!out.trim().is_empty(), "{stage}");
    }
}

#[test]
fn wrong_length_is_caught_before_native_code_runs() {
    let (code, out, err) = egrad(&[
        "run",
        "examples/loss.eg",
        "--fn",
        "dloss_dw",
        "--arg",
        "w=[1,2,3]",
        "--arg",
        "x=[4,5]",
        "--arg",
        "y=0.5",
    ]);
    assert_eq!(code, 1);
    assert!(out.is_empty());
    assert!(err.contains("examples/loss.eg:9:"), "{err}");
    assert!(err.contains("^"), "{err}");
    assert!(
        err.contains("arguments `w` and `x` disagree on `N`: `w` gives 3 (its length), `x` gives 2 (its length)"),
        "{err}"
    );
}

#[test]
fn source_errors_name_the_place() {
    let dir = std::env::temp_dir().join(format!("egrad-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = [
        ("syntax", "fn f(x: f32) -> f32 {\n  x +\n}\n", ":3:1"),
        ("unknown", "fn f(x: f32) -> f32 {\n  x * q\n}\n", ":2:7"),
        (
            "shape",
            "fn f[N, M](w: f32[N], x: f32[M]) -> f32 {\n  +/(w .* x)\n}\n",
            ":2:",
        ),
        (
            "args",
            "fn g(a: f32) -> f32 { a }\nfn f(x: f32) -> f32 {\n  g(x, x)\n}\n",
            ":3:3",
        ),
        (
            "gradname",
            "fn g(a: f32) -> f32 { a * a }\n@grad(z)\nfn dg(a: f32) -> f32 = g(a)\n",
            ":2:7",
        ),
    ];
    for (name, src, loc) in cases {
        let path = dir.join(format!("{name}.eg"));
        std::fs::write(&path, src).unwrap();
        let (code, _, err) = egrad(&["check", path.to_str().unwrap()]);
        assert_eq!(code, 1, "{name}: {err}");
        assert!(err.contains(loc), "{name}: expected {loc} in\n{err}");
        assert!(err.contains("^"), "{name}: no caret in\n{err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
}

#[test]
fn check_names_the_first_functions_and_counts_the_rest() {
    let dir = std::env::temp_dir().join(format!("egrad-cli-names-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("many.eg");
    let src: String = (0..25)
        .map(|k| format!("fn f{k}(x: f64) -> f64 = x * {k}\n"))
        .collect();
    std::fs::write(&path, src).unwrap();
    let (code, out, err) = egrad(&["check", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("ok: 25 function(s): f0, f1,"), "{out}");
    assert!(out.contains("f19, and 5 more"), "{out}");
    assert!(!out.contains("f20"), "{out}");
    let (_, json, _) = egrad(&["check", path.to_str().unwrap(), "--json"]);
    assert!(json.contains("\"f24\""), "{json}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn explore_shows_the_tradeoff_as_a_table_json_and_svg() {
    let dir = std::env::temp_dir().join(format!("egrad-explore-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("plot.svg");
    let (code, out, err) = egrad(&[
        "explore",
        "examples/smooth.eg",
        "--fn",
        "dpenalty",
        "--dim",
        "N=256",
        "--lambdas",
        "0,0.25,1000000",
        "--time-ms",
        "20",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("residual bytes") && out.contains("buffer bytes"),
        "{out}"
    );
    assert!(out.contains("on the Pareto front"), "{out}");
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(
        plot.starts_with("<svg") && plot.contains("residual bytes"),
        "{plot}"
    );
    let (code, json, err) = egrad(&[
        "explore",
        "examples/smooth.eg",
        "--fn",
        "dpenalty",
        "--lambdas",
        "0,1e6",
        "--no-run",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    // λ = 0 stores every residual, a huge λ none; not timed with --no-run.
    assert!(points[0]["residual_bytes"].as_f64().unwrap() > 0.0);
    assert_eq!(points[1]["residual_bytes"].as_f64().unwrap(), 0.0);
    assert!(points[1]["time_us"].is_null() && points[1]["buffer_bytes"].is_null());
    assert!(points.iter().all(|p| p["pareto"] == true));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn explore_rejects_a_negative_lambda() {
    let (code, _, err) = egrad(&[
        "explore",
        "examples/smooth.eg",
        "--fn",
        "dpenalty",
        "--lambdas",
        "0,-1",
        "--no-run",
    ]);
    assert_eq!(code, 2, "a usage error");
    assert!(err.contains("not -1") && err.contains("--lambdas"), "{err}");
}

#[test]
fn bench_times_optimized_against_unoptimized() {
    let (code, out, err) = egrad(&[
        "bench",
        "examples/suite/rosenbrock.eg",
        "--fn",
        "rosenbrock_grad",
        "--dim",
        "N=1000",
        "--time-ms",
        "20",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("speedup") && out.contains("largest relative difference 0.0e0"),
        "{out}"
    );
}

#[test]
fn explore_says_when_the_e_graph_stopped_at_a_limit() {
    let (code, json, err) = egrad(&[
        "explore",
        "examples/suite/euler_ode.eg",
        "--fn",
        "euler_ode_grad",
        "--lambdas",
        "0",
        "--no-run",
        "--json",
        "--node-limit",
        "100",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let limits = v["limits"].as_array().unwrap();
    assert!(
        limits
            .iter()
            .any(|l| l.as_str().unwrap().contains("compiled unoptimized")),
        "{json}"
    );
}

/// Issue 4, acceptance 1: `explore` on euler_ode shows the way from storing
/// every state of its 1000-step loop to checkpointing, as distinct Pareto
/// points, one of them storing at most 10% of what storing everything
/// stores. (`tests/loops.rs` checks that every λ gives the same gradient.)
#[test]
fn explore_shows_euler_ode_checkpointing_on_the_pareto_front() {
    let (code, json, err) = egrad(&[
        "explore",
        "examples/suite/euler_ode.eg",
        "--fn",
        "euler_ode_grad",
        "--lambdas",
        "0,3,3.5,6,16,1e6",
        "--no-run",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let points = v["points"].as_array().unwrap();
    let bytes = |p: &serde_json::Value| p["residual_bytes"].as_f64().unwrap();
    let store_all = bytes(&points[0]);
    let front: Vec<f64> = points
        .iter()
        .filter(|p| p["pareto"].as_bool() == Some(true) && p["same_as"].is_null())
        .map(bytes)
        .collect();
    let mut distinct = front.clone();
    distinct.dedup();
    assert!(distinct.len() >= 4, "{json}");
    assert!(
        front.iter().any(|b| *b <= 0.1 * store_all),
        "no point stores at most 10% of {store_all} bytes: {json}"
    );
}

/// `--no-simd` and `--no-gemm` give the same bits (and the interpreter's);
/// the backend options are part of the cache key (`explain` shows them),
/// and `build` compiles `matmul` as a loop nest either way.
#[test]
fn backend_flags_reach_the_backend() {
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "examples/suite/mlp2.eg",
            "--fn",
            "mlp2_grad",
            "--suite",
            "mlp2",
        ];
        args.extend_from_slice(extra);
        let (code, out, err) = egrad(&args);
        assert_eq!(code, 0, "{err}");
        out
    };
    let simd = run(&[]);
    assert_eq!(run(&["--no-simd"]), simd);
    assert_eq!(
        run(&["--interp"]),
        simd,
        "native code is the interpreter's, bit for bit"
    );
    assert_eq!(
        run(&["--no-gemm"]),
        simd,
        "the loop nest is the kernel, bit for bit"
    );
    assert_eq!(run(&["--no-gemm", "--no-simd"]), simd);
    let (code, out, err) = egrad(&[
        "explain",
        "examples/suite/mlp2.eg",
        "--fn",
        "mlp2_grad",
        "--no-gemm",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("backend: simd=true gemm=false wide=true"),
        "{out}"
    );
    let o = std::env::temp_dir().join(format!("egrad-gemm-{}.o", std::process::id()));
    let (code, _, err) = egrad(&[
        "build",
        "examples/suite/mlp2.eg",
        "--fn",
        "mlp2_grad",
        "-o",
        o.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let _ = std::fs::remove_file(&o);
    let _ = std::fs::remove_file(o.with_extension("h"));
}

#[test]
fn a_huge_or_negative_time_limit_is_a_usage_error() {
    // 1e300 is finite but no duration: this panicked (exit 101).
    for limit in ["1e300", "-1", "NaN", "inf"] {
        let (code, _, err) = egrad(&[
            "grad",
            "examples/loss.eg",
            "--fn",
            "dloss_dw",
            &format!("--time-limit={limit}"),
        ]);
        assert_eq!(code, 2, "--time-limit {limit}: {err}");
        assert!(
            err.contains("invalid value")
                && err.contains("--time-limit")
                && err.contains("must be a non-negative number of seconds"),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    let (code, _, err) = egrad(&[
        "grad",
        "examples/loss.eg",
        "--fn",
        "dloss_dw",
        "--time-limit",
        "0.5",
    ]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn sizes_too_large_for_this_machine_are_refused_before_allocating() {
    // 2^62 elements: "capacity overflow" (exit 101) before; 10^10 f64s
    // (80 GB): the allocator aborted (exit 134).
    for (n, needs) in [
        ("4611686018427387904", "more than 2^64 bytes"),
        ("10000000000", "needs 80000000000 bytes (74.5 GiB)"),
    ] {
        for cmd in ["run", "fdcheck", "bench", "explore"] {
            let fname = if cmd == "fdcheck" { "loss" } else { "dloss_dw" };
            let mut args = vec!["examples/loss.eg", "--fn", fname];
            if cmd == "run" {
                args.push("--random");
            }
            let dim = format!("N={n}");
            args.extend(["--dim", &dim]);
            let mut all = vec![cmd];
            all.extend(args);
            let (code, _, err) = egrad(&all);
            assert_eq!(code, 1, "{cmd} --dim {dim}: {err}");
            assert!(err.contains(needs), "{cmd} --dim {dim}: {err}");
            assert!(err.contains("memory limit"), "{err}");
            assert!(!err.contains("panicked"), "{err}");
        }
    }
}

#[test]
fn the_memory_limit_flag_refuses_runs_that_need_more() {
    // The interpreter, native code, and the CLI's own buffers.
    for extra in [&[][..], &["--interp"][..]] {
        let mut args = vec![
            "run",
            "examples/loss.eg",
            "--fn",
            "dloss_dw",
            "--random",
            "--dim",
            "N=1000",
            "--memory-limit",
            "10K",
        ];
        args.extend(extra);
        let (code, _, err) = egrad(&args);
        assert_eq!(code, 1, "{extra:?}: {err}");
        assert!(
            err.contains("more than the memory limit of 10240 bytes"),
            "{err}"
        );
    }
    let (code, out, err) = egrad(&[
        "run",
        "examples/loss.eg",
        "--fn",
        "dloss_dw",
        "--random",
        "--dim",
        "N=1000",
        "--memory-limit",
        "1M",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("f32[1000]"), "{out}");
    for bad in ["0", "12Q", "-5", "99999999999T"] {
        let (code, _, err) = egrad(&[
            "run",
            "examples/loss.eg",
            "--fn",
            "dloss_dw",
            "--random",
            &format!("--memory-limit={bad}"),
        ]);
        assert_eq!(code, 2, "--memory-limit {bad}: {err}");
    }
}

#[test]
fn run_time_counts_that_egrad_cannot_hold_exactly_are_refused_clearly() {
    let dir = std::env::temp_dir().join(format!("egrad-cli-count-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("count.eg");
    std::fs::write(
        &file,
        "fn g(n: i64, x: f64) -> f64 = iterate(n, x, s => s * 0.5)\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    // 2^53 + 1 became 2^53 silently; 1e20 was "must be a non-negative
    // integer, got 9223372036854776000"; 2.5 ran 2 steps.
    for (n, code, says) in [
        (
            "9007199254740993",
            2,
            "larger in magnitude than 2^53 = 9007199254740992",
        ),
        ("100000000000000000000", 2, "larger in magnitude than 2^53"),
        ("2.5", 2, "`2.5` is not an integer"),
        ("1e300", 2, "`1e300` is not an integer"),
        ("-3", 1, "is a count and must not be negative, got -3"),
    ] {
        let (got, _, err) = egrad(&[
            "run",
            file,
            "--fn",
            "g",
            "--arg",
            &format!("n={n}"),
            "--arg",
            "x=1",
        ]);
        assert_eq!(got, code, "n={n}: {err}");
        assert!(err.contains(says), "n={n}: {err}");
    }
    let (code, out, err) = egrad(&["run", file, "--fn", "g", "--arg", "n=3", "--arg", "x=1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "0.125\n");
    let (code, _, err) = egrad(&["run", file, "--fn", "g", "--arg", "n=3", "--arg", "x=1e400"]);
    assert_eq!(code, 2);
    assert!(err.contains("`1e400` is too large for a float"), "{err}");
}

#[test]
fn nonsense_flag_values_are_usage_errors_before_any_work() {
    for flag in [
        "--lambda=-1",
        "--lambda=nan",
        "--lambda=inf",
        "--node-limit=0",
        "--iter-limit=x",
        "--dim=N",
        "--dim=N=-3",
        "--dim=a-b=3",
        "--memory-limit=0",
    ] {
        let (code, out, err) = egrad(&["grad", "examples/loss.eg", "--fn", "dloss_dw", flag]);
        assert_eq!(code, 2, "{flag}: {err}");
        assert!(err.contains("invalid value"), "{flag}: {err}");
        assert!(out.is_empty(), "{flag}: {out}");
    }
    for args in [
        &[
            "explore",
            "examples/loss.eg",
            "--fn",
            "dloss_dw",
            "--lambdas",
            "0,-1",
        ][..],
        &[
            "explore",
            "examples/loss.eg",
            "--fn",
            "dloss_dw",
            "--time-ms",
            "0",
        ][..],
        &["fdcheck", "examples/loss.eg", "--fn", "loss", "--tol=-1"][..],
        &[
            "fdcheck",
            "examples/loss.eg",
            "--fn",
            "loss",
            "--max-elements",
            "0",
        ][..],
        &[
            "explain",
            "examples/loss.eg",
            "--fn",
            "dloss_dw",
            "--lambda-before=-2",
        ][..],
    ] {
        let (code, _, err) = egrad(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("invalid value"), "{args:?}: {err}");
    }
}

/// `bench` times one λ: `explore`'s `--plot` and `--lambdas` are errors
/// there (they were accepted and ignored), and still `explore`'s.
#[test]
fn bench_refuses_explore_s_options() {
    let file = "examples/suite/rosenbrock.eg";
    for extra in [["--plot", "x.svg"], ["--lambdas", "0,1"]] {
        let mut args = vec!["bench", file, "--fn", "rosenbrock_grad", "--no-run"];
        args.extend(extra);
        let (code, _, err) = egrad(&args);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains(&format!("unexpected argument '{}'", extra[0])),
            "{err}"
        );
    }
    let (code, out, err) = egrad(&[
        "explore",
        file,
        "--fn",
        "rosenbrock_grad",
        "--no-run",
        "--lambdas",
        "0,1",
        "--dim",
        "N=50",
    ]);
    assert_eq!(code, 0, "{out}{err}");
}

/// `--plot` and `--html` without timing: the same bytes each run; the
/// bytes axis (544 to 31,984 bytes, more than a decade) logarithmic with
/// ticks at decades; the legend; every λ in the page's table.
#[test]
fn explore_plots_are_deterministic_with_log_axes_and_a_legend() {
    let dir = std::env::temp_dir().join(format!("egrad-explore-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = |k: usize| {
        let (svg, html) = (dir.join(format!("{k}.svg")), dir.join(format!("{k}.html")));
        let (code, _, err) = egrad(&[
            "explore",
            "examples/suite/euler_ode.eg",
            "--fn",
            "euler_ode_grad",
            "--lambdas",
            "0,3,6,16,1e6",
            "--no-run",
            "--plot",
            svg.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{err}");
        (
            std::fs::read_to_string(svg).unwrap(),
            std::fs::read_to_string(html).unwrap(),
        )
    };
    let (svg, html) = run(0);
    assert_eq!(run(1), (svg.clone(), html.clone()), "not deterministic");
    assert!(
        svg.contains("residual bytes stored (B, log scale)"),
        "{svg}"
    );
    assert!(svg.contains("model cost (flops"), "{svg}");
    for tick in ["\n100\n", "\n1k\n", "\n10k\n"] {
        assert!(svg.contains(tick), "no tick {tick:?}: {svg}");
    }
    assert!(svg.contains("Pareto front") && svg.contains("\ndominated\n"));
    assert!(
        svg.contains("\nλ=6, 16\n"),
        "one point for λ = 6 and 16: {svg}"
    );
    assert_eq!(html.matches("<tr data-mark=").count(), 5);
    assert_eq!(html.matches("class=\"hit\"").count(), 4);
    assert!(html.contains("<svg id=\"plot\" ") && !html.contains("src="));
    std::fs::remove_dir_all(&dir).ok();
}

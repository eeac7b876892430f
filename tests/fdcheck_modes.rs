//! `egrad fdcheck` in forward mode: a `@jvp` function's compiled tangents
//! against central differences of its function along the tangent arguments.

mod common;

use common::egrad;

const FILE: &str = "tests/data/fdcheck/jvp.eg";

#[test]
fn jvp_functions_pass_in_forward_mode() {
    for f in ["slope", "hvp", "dtwo", "dwide"] {
        let (code, out, err) = egrad(&["fdcheck", FILE, "--fn", f]);
        assert_eq!(code, 0, "{f}: {out}{err}");
        assert!(
            out.contains(&format!("ok: the tangents of `{f}`")),
            "{f}: {out}"
        );
    }
    // Both results of `dtwo` are checked.
    let (_, out, _) = egrad(&["fdcheck", FILE, "--fn", "dtwo"]);
    assert!(out.contains("tangent of result 1"), "{out}");
}

#[test]
fn a_wrong_tangent_is_a_mismatch() {
    let (code, out, err) = egrad(&["fdcheck", FILE, "--fn", "dsquare"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("MISMATCH"), "{out}");
    // The gradient of the function with the rule is wrong the same way.
    let (code, out, _) = egrad(&["fdcheck", FILE, "--fn", "square"]);
    assert_eq!(code, 1, "{out}");
}

#[test]
fn forward_mode_json_names_its_mode_and_wrt_is_refused() {
    let (code, out, err) = egrad(&["fdcheck", FILE, "--fn", "slope", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["mode"], "forward");
    assert_eq!(v["parameters"][0]["name"], "result 0");
    let (_, out, _) = egrad(&["fdcheck", FILE, "--fn", "force", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["mode"], "reverse");
    let (code, _, err) = egrad(&["fdcheck", FILE, "--fn", "slope", "--wrt", "x"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("@jvp function"), "{err}");
}

/// `erf` and `erfc` (`tests/data/fdcheck/special.eg`): reverse mode (the
/// gradient of `special`, and the `@grad` function), forward mode (the
/// `@jvp` functions, f32 too) and forward over reverse.
#[test]
fn erf_and_erfc_pass_in_reverse_and_forward_mode() {
    let file = "tests/data/fdcheck/special.eg";
    for f in ["special", "dspecial", "tspecial", "tspecial32", "hspecial"] {
        let (code, out, err) = egrad(&["fdcheck", file, "--fn", f]);
        assert_eq!(code, 0, "{f}: {out}{err}");
        assert!(out.contains("ok:"), "{f}: {out}");
    }
    // The compiled function computes what the interpreter does, bit for bit.
    let mut outs = Vec::new();
    for interp in [false, true] {
        let mut args = vec![
            "run",
            file,
            "--fn",
            "special32",
            "--arg",
            "x=[-3,-0.5,0,0.25,2,9]",
        ];
        if interp {
            args.push("--interp");
        }
        let (code, out, err) = egrad(&args);
        assert_eq!(code, 0, "{err}");
        outs.push(out);
    }
    assert_eq!(outs[0], outs[1]);
    assert!(outs[0].contains("0.23755333"), "{}", outs[0]);
}

/// The numerics builtins (linear algebra, special functions, log-space
/// builtins, conversions) pass `egrad fdcheck` in both modes at random
/// inputs.
#[test]
fn numerics_builtins_pass_in_both_modes() {
    let file = "tests/data/fdcheck/numerics.eg";
    for (f, n, mode) in [
        ("dl", "N=4", "gradient"),
        ("l_along", "N=4", "tangents"),
        ("dsp", "N=6", "gradient"),
        ("sp_along", "N=6", "tangents"),
    ] {
        let (code, out, err) = egrad(&["fdcheck", file, "--fn", f, "--random", "--dim", n]);
        assert_eq!(code, 0, "{f}: {out}{err}");
        assert!(
            out.contains(&format!("ok: the {mode} of `{f}`")),
            "{f}: {out}"
        );
    }
}

//! NumPy files in and out of the `egrad` binary: `--arg name=@file.npy`,
//! `--args @file.npz`, `--out` (`.npy`, `.npz`, a directory), checked
//! against the reference interpreter; and each malformed file refused with
//! a message naming the file and the parameter.
//!
//! The fixtures under `tests/data/npy/` were written by NumPy with
//! `tests/data/npy/make.py`.

use egrad::internals::ir::interp;
use egrad::internals::npy::{read_npz, Array};
use egrad::internals::types::value::Value;
use egrad::Program;
use std::path::{Path, PathBuf};

const D: &str = "tests/data/npy";

mod common;
use common::egrad;

fn fixture(name: &str) -> String {
    format!("{D}/{name}")
}

/// A fresh directory for one test's outputs.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("egrad-npy-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The interpreter's results of `function` in `file` on these values.
fn interpret(file: &str, function: &str, args: &[Value]) -> Vec<Value> {
    let p = Program::from_file(file).unwrap();
    let refs: Vec<&Value> = args.iter().collect();
    interp::run(p.ir(function).unwrap(), &refs).unwrap()
}

fn load(path: &Path) -> Value {
    Array::open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .to_value()
}

/// The mixed.eg arguments, as `--arg` flags and as values.
fn mixed_args() -> (Vec<String>, Vec<Value>) {
    let names = ["W", "v", "idx", "mask", "scale"];
    let flags = names
        .iter()
        .flat_map(|n| {
            [
                "--arg".to_string(),
                format!("{n}=@{}", fixture(&format!("{n}.npy"))),
            ]
        })
        .collect();
    let values = names
        .iter()
        .map(|n| load(Path::new(&fixture(&format!("{n}.npy")))))
        .collect();
    (flags, values)
}

fn run_with(base: &[&str], extra: &[String]) -> (i32, String, String) {
    let mut args: Vec<&str> = base.to_vec();
    args.extend(extra.iter().map(String::as_str));
    egrad(&args)
}

#[test]
fn the_fixtures_read_as_numpy_wrote_them() {
    let w = Array::open(Path::new(&fixture("W.npy"))).unwrap();
    assert_eq!(w.shape, vec![5, 3]);
    // f64 in C order, 64-byte aligned header: borrowed from the map.
    assert!(w.is_mapped());
    let idx = Array::open(Path::new(&fixture("idx.npy"))).unwrap();
    assert!(idx.is_mapped());
    assert_eq!(idx.to_value().data, vec![4.0, 0.0, 2.0, 2.0]);
    let mask = Array::open(Path::new(&fixture("mask.npy"))).unwrap();
    assert_eq!(mask.to_value().data, vec![1.0, 0.0, 1.0, 1.0, 0.0]);
    let scale = load(Path::new(&fixture("scale.npy")));
    assert!(scale.shape.is_empty());
    assert_eq!(scale.data, vec![0.75]);
    let z = read_npz(Path::new(&fixture("loss_compressed.npz"))).unwrap();
    let names: Vec<&str> = z.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["w", "x", "y"]);
    assert_eq!(z[0].1.to_value().data, vec![0.5, -1.0, 2.0, 0.25]);
    assert_eq!(z[2].1.to_value().data, vec![-1.5]);
}

#[test]
fn run_reads_npy_arguments_and_writes_npz_results_the_interpreter_gives() {
    let dir = scratch("run");
    let (flags, values) = mixed_args();
    let file = fixture("mixed.eg");
    let out = dir.join("parts.npz");
    let (code, stdout, err) = run_with(
        &[
            "run",
            &file,
            "--fn",
            "parts",
            "--out",
            out.to_str().unwrap(),
        ],
        &flags,
    );
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("wrote "), "{stdout}");
    let want = interpret(&file, "parts", &values);
    let got = read_npz(&out).unwrap();
    let names: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["result0", "result1", "result2"]);
    for ((_, g), w) in got.iter().zip(&want) {
        let g = g.to_value();
        assert_eq!(g.dtype, w.dtype);
        assert_eq!(g.shape, w.shape);
        assert!(g.bits_eq(w), "{g:?} vs {w:?}");
    }
    // The interpreter path reads the same files and prints the same.
    let (code, interp_out, err) = run_with(&["run", &file, "--fn", "parts", "--interp"], &flags);
    assert_eq!(code, 0, "{err}");
    assert_eq!(stdout.lines().next(), interp_out.lines().next());
}

#[test]
fn grad_writes_the_value_and_gradients_to_npy_files() {
    let dir = scratch("grad");
    let (flags, values) = mixed_args();
    let file = fixture("mixed.eg");
    let out = dir.join("g");
    let (code, stdout, err) = run_with(
        &[
            "grad",
            &file,
            "--fn",
            "dmixed",
            "--out",
            out.to_str().unwrap(),
        ],
        &flags,
    );
    assert_eq!(code, 0, "{err}");
    assert!(stdout.starts_with("value: "), "{stdout}");
    // The @grad function run by the interpreter: the gradients.
    let want = interpret(&file, "dmixed", &values);
    let value = interpret(&file, "mixed", &values);
    let v = load(&out.join("value.npy"));
    assert!(
        (v.as_scalar() - value[0].as_scalar()).abs() <= 1e-12 * (1.0 + value[0].as_scalar().abs()),
        "{v:?} vs {value:?}"
    );
    for (name, w) in ["grad_W", "grad_v"].iter().zip(&want) {
        let g = load(&out.join(format!("{name}.npy")));
        assert_eq!(g.shape, w.shape, "{name}");
        for (a, b) in g.data.iter().zip(&w.data) {
            assert!(
                (a - b).abs() <= 1e-12 * (1.0 + b.abs()),
                "{name}: {a} vs {b}"
            );
        }
    }
    // One .npy for several results is refused, naming them.
    let one = dir.join("one.npy");
    let (code, _, err) = run_with(
        &[
            "grad",
            &file,
            "--fn",
            "dmixed",
            "--out",
            one.to_str().unwrap(),
        ],
        &flags,
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("value, grad_W, grad_v") && err.contains("FILE.npz"),
        "{err}"
    );
    // A path there that is no folder is not taken for one ("File exists").
    for there in ["/dev/null", file.as_str()] {
        let (code, _, err) = run_with(&["grad", &file, "--fn", "dmixed", "--out", there], &flags);
        assert_eq!(code, 2, "{there}: {err}");
        assert!(
            err.contains("neither a .npy or .npz file nor a folder"),
            "{there}: {err}"
        );
    }
}

#[test]
fn npz_archives_bind_arguments_by_name_and_arg_overrides() {
    let dir = scratch("npz");
    for archive in ["loss.npz", "loss_compressed.npz"] {
        let npz = format!("@{}", fixture(archive));
        let out = dir.join(format!("{archive}.npy"));
        let (code, _, err) = egrad(&[
            "run",
            "examples/loss.eg",
            "--fn",
            "dloss_dw",
            "--args",
            &npz,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{archive}: {err}");
        let members = read_npz(Path::new(&fixture(archive))).unwrap();
        let values: Vec<Value> = members.iter().map(|(_, a)| a.to_value()).collect();
        let want = interpret("examples/loss.eg", "dloss_dw", &values);
        let got = load(&out);
        assert!(got.bits_eq(&want[0]), "{archive}: {got:?} vs {want:?}");
    }
    // --arg wins over the archive.
    let (code, out, err) = egrad(&[
        "run",
        "examples/loss.eg",
        "--fn",
        "dloss_dw",
        "--args",
        &format!("@{}", fixture("loss.npz")),
        "--arg",
        "y=0",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "[256, 320, 384]\n");
    // The same with files per argument.
    let (code, out, err) = egrad(&[
        "run",
        "examples/loss.eg",
        "--fn",
        "dloss_dw",
        "--arg",
        &format!("w=@{}", fixture("w.npy")),
        "--arg",
        &format!("x=@{}", fixture("x.npy")),
        "--arg",
        "y=0.5",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "[252, 315, 378]\n");
}

#[test]
fn large_results_print_a_summary_and_full_prints_every_element() {
    let (code, out, err) = egrad(&[
        "run",
        "examples/loss.eg",
        "--fn",
        "dloss_dw",
        "--random",
        "--dim",
        "N=100",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("f32[100] min "), "{out}");
    assert!(out.contains(" max ") && out.contains(" mean ") && out.contains(", ..., "));
    let (code, full, err) = egrad(&[
        "run",
        "examples/loss.eg",
        "--fn",
        "dloss_dw",
        "--random",
        "--dim",
        "N=100",
        "--print",
        "full",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(full.trim().split(", ").count(), 100, "{full}");
    // Every element of every result, one result per line.
    let (code, m, err) = egrad(&[
        "run",
        &fixture("mixed.eg"),
        "--fn",
        "parts",
        "--arg",
        &format!("W=@{}", fixture("W.npy")),
        "--arg",
        &format!("v=@{}", fixture("v.npy")),
        "--arg",
        "idx=[0]",
        "--arg",
        "mask=[true, false, true, true, false]",
        "--arg",
        "scale=2",
        "--print",
        "full",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(m.starts_with("result0: [") && m.lines().count() == 3, "{m}");
}

/// Each malformed file: the exit code and the parts of the message.
#[test]
fn bad_files_are_refused_naming_the_file_and_the_parameter() {
    let file = fixture("mixed.eg");
    let (mut flags, _) = mixed_args();
    let cases: [(&str, &str, i32, &[&str]); 9] = [
        (
            "W",
            "fortran.npy",
            1,
            &["fortran.npy", "Fortran", "ascontiguousarray", "`W`"],
        ),
        (
            "W",
            "int32.npy",
            1,
            &["int32.npy", "int32", "astype", "`W`"],
        ),
        (
            "W",
            "bigendian.npy",
            1,
            &["bigendian.npy", "big endian", "`W`"],
        ),
        (
            "W",
            "rank1.npy",
            2,
            &["rank1.npy", "rank 1", "`W`", "rank 2"],
        ),
        (
            "W",
            "truncated.npy",
            1,
            &["truncated.npy", "truncated", "`W`"],
        ),
        (
            "W",
            "corrupt_header.npy",
            1,
            &["corrupt_header.npy", "corrupt", "`W`"],
        ),
        (
            "W",
            "not_npy.npy",
            1,
            &["not_npy.npy", "not a .npy file", "`W`"],
        ),
        (
            "v",
            "v4.npy",
            1,
            &["v4.npy", "`v` gives 4 (its length)", "`N`"],
        ),
        ("v", "missing.npy", 1, &["missing.npy", "`v`"]),
    ];
    for (param, bad, want_code, parts) in cases {
        let at = flags
            .iter()
            .position(|f| f.starts_with(&format!("{param}=@")))
            .unwrap();
        let saved = std::mem::replace(&mut flags[at], format!("{param}=@{}", fixture(bad)));
        let (code, out, err) = run_with(&["run", &file, "--fn", "parts"], &flags);
        flags[at] = saved;
        assert_eq!(code, want_code, "{bad}: {err}");
        assert!(out.is_empty(), "{bad}: {out}");
        for p in parts {
            assert!(err.contains(p), "{bad}: `{p}` not in\n{err}");
        }
        assert!(!err.contains("panicked"), "{bad}: {err}");
    }
    // A dtype that is NumPy's but not the parameter's.
    let (code, _, err) = egrad(&[
        "run",
        "examples/loss.eg",
        "--fn",
        "dloss_dw",
        "--arg",
        &format!("w=@{}", fixture("v.npy")),
        "--arg",
        "x=[1,2,3]",
        "--arg",
        "y=0",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("v.npy holds float64") && err.contains("`w`") && err.contains("np.float32"),
        "{err}"
    );
    // An archive given to --arg, and a file that is not an archive.
    let (code, _, err) = egrad(&[
        "run",
        "examples/loss.eg",
        "--fn",
        "dloss_dw",
        "--arg",
        &format!("w=@{}", fixture("loss.npz")),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("--args"), "{err}");
    let (code, _, err) = egrad(&[
        "run",
        "examples/loss.eg",
        "--fn",
        "dloss_dw",
        "--args",
        &format!("@{}", fixture("W.npy")),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("W.npy") && err.contains("not a .npz"), "{err}");
    // An archive member that names no parameter.
    let (code, _, err) = egrad(&[
        "run",
        &fixture("mixed.eg"),
        "--fn",
        "dmixed",
        "--args",
        &format!("@{}", fixture("extra_member.npz")),
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("`bogus`") && err.contains("parameters: W, v, idx, mask, scale"),
        "{err}"
    );
}

//! Every function of every example, optimized and compiled, gives the same
//! bits as the reference interpreter on the same optimized program, and the
//! optimized program agrees with the unoptimized one.

mod common;

use egrad::backend::{self, BackendOptions};
use egrad::lang::interp::run;
use egrad::lang::types::Dim;
use egrad::lang::value::Value;
use egrad::pipeline::{optimize_ir, Options};
use egrad::Program;

#[test]
fn jit_equals_interpreter_on_every_example() {
    let files = common::example_files();
    let mut checked = 0;
    for path in files {
        let p = Program::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
        for name in p.function_names() {
            let f = p.ir(name).unwrap();
            let opt = optimize_ir(f, &Options::default()).unwrap().after;
            let native = backend::compile(&opt, &BackendOptions { verify: true }).unwrap();
            for n in [1usize, 5, 64] {
                let args: Vec<Value> = f
                    .params
                    .iter()
                    .enumerate()
                    .map(|(k, prm)| {
                        let t = f.ty(prm.var);
                        let shape: Vec<usize> = t
                            .shape
                            .iter()
                            .map(|d| match d {
                                Dim::Lit(m) => *m as usize,
                                Dim::Param(_) => n,
                                Dim::Sub(..) => panic!("parameters have plain sizes"),
                            })
                            .collect();
                        let len: usize = shape.iter().product();
                        let data = (0..len)
                            .map(|i| ((i * 7 + k * 13) as f64 * 0.37).sin() * 0.9)
                            .collect();
                        Value::array(t.dtype, shape, data)
                    })
                    .collect();
                let refs: Vec<&Value> = args.iter().collect();
                let jit = native.call(&refs).unwrap();
                let interp = run(&opt, &refs).unwrap();
                for (a, b) in jit.iter().zip(&interp) {
                    assert!(
                        a.bits_eq(b),
                        "{}: {name} n={n}: {a:?} vs {b:?}",
                        path.display()
                    );
                }
                let unopt = run(f, &refs).unwrap();
                for (a, b) in interp.iter().zip(&unopt) {
                    for (x, y) in a.data.iter().zip(&b.data) {
                        assert!(
                            (x - y).abs() <= 1e-5 * (1.0 + y.abs()),
                            "{}: {name}: optimized {x} vs unoptimized {y}",
                            path.display()
                        );
                    }
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 30, "{checked}");
}

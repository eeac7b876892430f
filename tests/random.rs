//! Random numbers from explicit keys: `threefry` against Random123's
//! known answers, the documented stream of `random_key`, `split`,
//! `uniform[...]` and `normal[...]` recomputed from the reference block
//! (`egrad::internals::ops::threefry`) and pinned to numbers that must not
//! change, the same numbers from the interpreter and the JIT (also inside
//! `tabulate` and loops), sample statistics, a stochastic loss's gradient
//! against finite differences, and the errors.

mod common;

use common::{check_gradient, check_jvp, err, prog, run_both};
use egrad::internals::ops::threefry::{threefry2x32, KNOWN_ANSWERS as KAT};
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;

fn ints(xs: &[i64]) -> Value {
    Value::array(
        DType::I64,
        vec![xs.len()],
        xs.iter().map(|&x| x as f64).collect(),
    )
}

fn int(x: i64) -> Value {
    Value::scalar(DType::I64, x as f64)
}

/// A known answer: key, counter, block.
type Kat = ([u32; 2], [u32; 2], [u32; 2]);

#[test]
fn threefry_gives_the_known_answers_at_run_time_and_at_compile_time() {
    let p = prog(
        "fn block(k0: i64, k1: i64, c0: i64, c1: i64) -> (i64, i64) = threefry(k0, k1, c0, c1)
fn blocks[N](k0: i64[N], k1: i64[N], c0: i64[N], c1: i64[N]) -> (i64[N], i64[N]) = threefry(k0, k1, c0, c1)
fn folded() -> (i64, i64) = threefry(320440878, 57701188, 608135816, 2242054355)",
    );
    for (key, counter, want) in KAT {
        let w = |x: u32| i64::from(x);
        let got = run_both(
            &p,
            "block",
            &[
                int(w(key[0])),
                int(w(key[1])),
                int(w(counter[0])),
                int(w(counter[1])),
            ],
        )
        .unwrap();
        assert_eq!(got[0].as_scalar(), f64::from(want[0]));
        assert_eq!(got[1].as_scalar(), f64::from(want[1]));
    }
    let col =
        |f: &dyn Fn(&Kat) -> u32| ints(&KAT.iter().map(|c| i64::from(f(c))).collect::<Vec<_>>());
    let got = run_both(
        &p,
        "blocks",
        &[
            col(&|c| c.0[0]),
            col(&|c| c.0[1]),
            col(&|c| c.1[0]),
            col(&|c| c.1[1]),
        ],
    )
    .unwrap();
    assert_eq!(got[0], col(&|c| c.2[0]));
    assert_eq!(got[1], col(&|c| c.2[1]));
    let got = run_both(&p, "folded", &[]).unwrap();
    assert_eq!(got[0].as_scalar(), f64::from(0xC492_3A9Cu32));
    assert_eq!(got[1].as_scalar(), f64::from(0x483D_F7A0u32));
    // Only the low 32 bits of each word count.
    let got = run_both(
        &p,
        "block",
        &[int(1 << 32), int(-1 + (1 << 33)), int(0), int(0)],
    )
    .unwrap();
    let want = threefry2x32([0, u32::MAX], [0, 0]);
    assert_eq!(got[0].as_scalar(), f64::from(want[0]));
    assert_eq!(got[1].as_scalar(), f64::from(want[1]));
}

/// The stream as docs/language.md defines it, from the reference block.
fn key_of(seed: i64) -> [u32; 2] {
    [(seed >> 32) as u32, seed as u32]
}

fn split_of(key: [u32; 2]) -> ([u32; 2], [u32; 2]) {
    (threefry2x32(key, [0, 0]), threefry2x32(key, [0, 1]))
}

fn uniform_of(key: [u32; 2], n: u64) -> (Vec<f64>, [u32; 2]) {
    let (k, next) = split_of(key);
    let u = (0..n)
        .map(|i| {
            let [w0, w1] = threefry2x32(k, [(i >> 32) as u32, i as u32]);
            (f64::from(w0) * 2f64.powi(21) + f64::from(w1 >> 11)) * 2f64.powi(-53)
        })
        .collect();
    (u, next)
}

fn words(key: [u32; 2]) -> Value {
    ints(&[i64::from(key[0]), i64::from(key[1])])
}

#[test]
fn the_stream_is_the_documented_one() {
    let p = prog(
        "fn key(seed: i64) -> i64[2] = random_key(seed)
fn halves(k: i64[2]) -> (i64[2], i64[2]) = split(k)
fn u[N](k: i64[2], like: f64[N]) -> (f64[N], i64[2]) = uniform[N](k)
fn z(k: i64[2]) -> (f64[3], i64[2]) = normal[3](k)",
    );
    for seed in [0i64, 1, 42, 1 << 40, (1 << 53) - 1] {
        let got = run_both(&p, "key", &[int(seed)]).unwrap();
        assert_eq!(got[0], words(key_of(seed)), "seed {seed}");
    }
    let key = key_of(1234);
    let got = run_both(&p, "halves", &[words(key)]).unwrap();
    let (a, b) = split_of(key);
    assert_eq!((got[0].clone(), got[1].clone()), (words(a), words(b)));
    for n in [0usize, 1, 7, 100] {
        let got = run_both(&p, "u", &[words(key), Value::f64(&vec![0.0; n])]).unwrap();
        let (want, next) = uniform_of(key, n as u64);
        assert_eq!(got[0].data, want, "uniform[{n}]");
        assert_eq!(got[1], words(next));
    }
    // Box and Muller's cos branch from the same two words.
    let got = run_both(&p, "z", &[words(key)]).unwrap();
    let (k, _) = split_of(key);
    for (i, z) in got[0].data.iter().enumerate() {
        let [w0, w1] = threefry2x32(k, [0, i as u32]);
        let u1 = (f64::from(w0) + 1.0) * 2f64.powi(-32);
        let u2 = f64::from(w1) * 2f64.powi(-32);
        let want = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        assert!(
            (z - want).abs() <= 1e-14,
            "normal[3] element {i}: {z} vs {want}"
        );
    }
}

/// These numbers are the stream: a change that moves them breaks every
/// user's saved results, so it is never made silently.
#[test]
fn the_stream_is_pinned() {
    let p = prog(
        "fn pin() -> (f64[3], f64[2], i64[2], i64[2], i64[2]) {
  let k = random_key(0)
  let (u, k1) = uniform[3](k)
  let (z, k2) = normal[2](k1)
  let (a, b) = split(random_key(1))
  (u, z, k2, a, b)
}",
    );
    let got = run_both(&p, "pin", &[]).unwrap();
    assert_eq!(
        got[0].data,
        vec![0.9699479979898888, 0.3151818598836357, 0.6610963904705249]
    );
    assert_eq!(got[1].data, vec![1.1068756684720122, 1.2659285989466063]);
    assert_eq!(got[2], ints(&[3968330031, 3923691647]));
    assert_eq!(got[3], ints(&[507451445, 1853169794]));
    assert_eq!(got[4], ints(&[1948878966, 4237131848]));
}

#[test]
fn keys_inside_tabulate_and_loops_give_the_same_numbers_everywhere() {
    let p = prog(
        "fn rows[M, N](x: f64[M, N]) -> f64[M, N] = tabulate[M](i => {
  let (u, k) = uniform[N](random_key(i))
  x[i] + u
})
fn walk[N](n: i64, x: f64[N]) -> f64[N] = iterate(n, x, s => {
  let (z, k) = normal[N](random_key(7))
  s + z * 0.1
})
fn chain(n: i64) -> i64[2] = iterate(n, random_key(3), k => {
  let (a, b) = split(k)
  b
})
fn mat(seed: i64) -> (f64[2, 3], f64[6]) {
  let k = random_key(seed)
  let (m, k1) = uniform[2, 3](k)
  let (v, k2) = uniform[6](k)
  (m, v)
}",
    );
    let x = Value::array(DType::F64, vec![3, 4], vec![0.0; 12]);
    let got = run_both(&p, "rows", &[x]).unwrap();
    for i in 0..3 {
        let (u, _) = uniform_of(key_of(i as i64), 4);
        assert_eq!(got[0].data[4 * i..4 * i + 4], u[..], "row {i}");
    }
    run_both(&p, "walk", &[int(5), Value::f64(&[1.0, 2.0])]).unwrap();
    let got = run_both(&p, "chain", &[int(3)]).unwrap();
    let mut k = key_of(3);
    for _ in 0..3 {
        k = split_of(k).1;
    }
    assert_eq!(got[0], words(k));
    // A shape's elements in row-major order: the same numbers as a vector.
    let got = run_both(&p, "mat", &[int(9)]).unwrap();
    assert_eq!(got[0].shape, vec![2, 3]);
    assert_eq!(got[0].data, got[1].data);
}

#[test]
fn samples_look_uniform_and_normal() {
    let p = prog(
        "fn u(seed: i64) -> f64[200000] {
  let (u, k) = uniform[200000](random_key(seed))
  u
}
fn z(seed: i64) -> f64[200000] {
  let (z, k) = normal[200000](random_key(seed))
  z
}",
    );
    let u = &run_both(&p, "u", &[int(5)]).unwrap()[0].data;
    let z = &run_both(&p, "z", &[int(5)]).unwrap()[0].data;
    let n = u.len() as f64;
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / n;
    let var = |xs: &[f64], m: f64| xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n;
    assert!(u.iter().all(|&x| (0.0..1.0).contains(&x)));
    let (mu, mz) = (mean(u), mean(z));
    // Four standard errors.
    assert!(
        (mu - 0.5).abs() < 4.0 * (1.0 / 12.0 / n).sqrt(),
        "uniform mean {mu}"
    );
    assert!((var(u, mu) - 1.0 / 12.0).abs() < 0.002, "uniform variance");
    assert!(mz.abs() < 4.0 / n.sqrt(), "normal mean {mz}");
    assert!((var(z, mz) - 1.0).abs() < 0.02, "normal variance");
    assert!(z.iter().all(|x| x.is_finite()));
    // Each tenth of [0, 1) holds about a tenth of the numbers.
    for d in 0..10 {
        let c = u.iter().filter(|&&x| (x * 10.0) as usize == d).count() as f64;
        assert!((c / n - 0.1).abs() < 0.004, "decile {d}: {c}");
    }
    // Keys split from one another give other numbers.
    let other = &run_both(&p, "u", &[int(6)]).unwrap()[0].data;
    assert!(u.iter().zip(other).filter(|(a, b)| a == b).count() < 3);
}

#[test]
fn a_stochastic_loss_has_the_gradient_of_its_fixed_noise() {
    let src = std::fs::read_to_string("examples/random.eg").unwrap();
    let p = prog(&src);
    let args = [
        Value::f64(&[0.5, -1.0, 2.0]),
        Value::f64(&[-0.3, 0.1, 0.0]),
        Value::f64(&[1.0, 0.0, -1.0]),
        int(3),
    ];
    check_gradient(&p, "dloss", "loss", 2, &args, "random.eg dloss");
    // Forward mode: the noise has no tangent either.
    let src = format!(
        "{src}\n@jvp(mu, log_s)\nfn jloss[N](mu: f64[N], log_s: f64[N], y: f64[N], seed: i64, dmu: f64[N], dlog_s: f64[N]) -> f64 = loss(mu, log_s, y, seed)"
    );
    check_jvp(&prog(&src), "jloss", "loss", 2, &args, "random.eg jloss");
    let draw = run_both(&p, "draw", &[int(7)]).unwrap();
    assert_eq!(draw[1].shape, vec![2, 3]);
}

#[test]
fn mistakes_are_clear() {
    for (src, want) in [
        (
            "fn f(k: i64[2]) -> f64[3] = uniform(k)",
            "`uniform` needs the shape in brackets",
        ),
        (
            "fn f(k: f64[2]) -> (f64[3], i64[2]) = uniform[3](k)",
            "`uniform` needs a key (an i64[2]), but this has type f64[2]",
        ),
        (
            "fn f(k: i64[3]) -> (i64[2], i64[2]) = split(k)",
            "`split` needs a key (an i64[2]), but this has type i64[3]",
        ),
        (
            "fn f(s: f64) -> i64[2] = random_key(s)",
            "the seed of `random_key` is an i64 number",
        ),
        (
            "fn f(x: f64) -> (i64, i64) = threefry(x, 0, 0, 0)",
            "the words of `threefry` are i64 values",
        ),
        (
            "fn f(a: i64[2], b: i64[3]) -> (i64[2], i64[2]) = threefry(a, b, 0, 0)",
            "`threefry` needs words of one shape",
        ),
        ("fn f(k: i64[2]) -> (i64, i64) = threefry(k)", "`threefry`"),
        ("fn split(x: f64) -> f64 = x", "split"),
    ] {
        let e = err(src);
        assert!(e.contains(want), "{src}: {e}");
    }
}

//! The benchmark suite (`bench-suite.md`): its bit-exact input generator and
//! a table of the benchmarks' inputs.
//!
//! Every input is computed from `splitmix64`, so no data files are needed and
//! any implementation can rebuild the same bits. `tests/suite.rs` checks
//! egrad's losses and gradients on these inputs against the JAX reference
//! (`tests/data/bench-reference.json`); `egrad run FILE --fn F --suite NAME`
//! runs a function on them.

use crate::types::value::Value;
use crate::types::DType;

/// splitmix64: every operation wraps mod 2^64.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
    z ^ (z >> 31)
}

/// `U(s, i)`: element `i` (row-major flat index) of array seed `s`, uniform
/// in [0, 1) and exact (53 random bits times 2^-53).
pub fn u(s: u64, i: u64) -> f64 {
    (splitmix64((s << 32).wrapping_add(i)) >> 11) as f64 * (1.0 / 9007199254740992.0)
}

/// `V(s, i) = 2 U(s, i) - 1`, uniform in [-1, 1), exact.
pub fn v(s: u64, i: u64) -> f64 {
    2.0 * u(s, i) - 1.0
}

/// How the elements of one input are made (`i` is the row-major flat index;
/// every formula is evaluated in f64, each operation rounded once, in the
/// order written).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Gen {
    /// `V(seed, i)`.
    V {
        /// The stream.
        seed: u64,
    },
    /// `scale * V(seed, i)`.
    ScaledV {
        /// The factor.
        scale: f64,
        /// The stream.
        seed: u64,
    },
    /// `offset + scale * V(seed, i)`.
    OffsetScaledV {
        /// Added after scaling.
        offset: f64,
        /// The factor.
        scale: f64,
        /// The stream.
        seed: u64,
    },
    /// `+1` if `U(seed, i) < 0.5`, else `-1`.
    Sign {
        /// The stream.
        seed: u64,
    },
    /// The same number everywhere (the scalars of the suite).
    Const(f64),
}

impl Gen {
    /// Element `i`, in f64.
    pub fn elem(self, i: u64) -> f64 {
        match self {
            Gen::V { seed } => v(seed, i),
            Gen::ScaledV { scale, seed } => scale * v(seed, i),
            Gen::OffsetScaledV {
                offset,
                scale,
                seed,
            } => offset + scale * v(seed, i),
            Gen::Sign { seed } => {
                if u(seed, i) < 0.5 {
                    1.0
                } else {
                    -1.0
                }
            }
            Gen::Const(x) => x,
        }
    }
}

/// One runtime parameter of a benchmark function.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Input {
    /// The name in `bench-suite.md` (the `.eg` function may name it
    /// differently; inputs are matched by position).
    pub name: &'static str,
    /// Row-major shape; empty for a scalar.
    pub shape: &'static [usize],
    /// How its elements are made.
    pub gen: Gen,
}

impl Input {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The input as a value of `dtype` (generated in f64, then rounded once
    /// to `dtype`).
    pub fn value(&self, dtype: DType) -> Value {
        let data = (0..self.len() as u64).map(|i| self.gen.elem(i)).collect();
        Value::array(dtype, self.shape.to_vec(), data)
    }

    /// `name: f64[16, 4]` (or `name: f64` for a scalar).
    pub fn describe(&self, dtype: DType) -> String {
        if self.shape.is_empty() {
            format!("{}: {dtype}", self.name)
        } else {
            let dims: Vec<String> = self.shape.iter().map(usize::to_string).collect();
            format!("{}: {dtype}[{}]", self.name, dims.join(", "))
        }
    }
}

/// One benchmark of the suite: where its program is and what it is fed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Benchmark {
    /// The key in `bench-reference.json`.
    pub key: &'static str,
    /// The example program, relative to the repository root.
    pub example: &'static str,
    /// The loss function in `example`.
    pub loss_fn: &'static str,
    /// The `@grad` function in `example`: gradients with respect to `wrt`,
    /// in that order.
    pub grad_fn: &'static str,
    /// The differentiated inputs, as the reference lists them.
    pub wrt: &'static [&'static str],
    /// Runtime inputs in the functions' parameter order (static values such
    /// as loop counts are written in the program, not passed).
    pub inputs: &'static [Input],
}

impl Benchmark {
    /// Every input as a value of `dtype`, in parameter order.
    pub fn values(&self, dtype: DType) -> Vec<Value> {
        self.inputs.iter().map(|i| i.value(dtype)).collect()
    }

    /// `(w: f64[16], x: f64[16], y: f64)`.
    pub fn signature(&self, dtype: DType) -> String {
        let ps: Vec<String> = self.inputs.iter().map(|i| i.describe(dtype)).collect();
        format!("({})", ps.join(", "))
    }
}

const fn inp(name: &'static str, shape: &'static [usize], gen: Gen) -> Input {
    Input { name, shape, gen }
}

const LINREG_16: &[Input] = &[
    inp("w", &[16], Gen::V { seed: 1 }),
    inp("x", &[16], Gen::V { seed: 2 }),
    inp("y", &[], Gen::Const(0.5)),
];

const LINREG_1M: &[Input] = &[
    inp("w", &[1_000_000], Gen::V { seed: 1 }),
    inp("x", &[1_000_000], Gen::V { seed: 2 }),
    inp("y", &[], Gen::Const(0.5)),
];

const LOGISTIC: &[Input] = &[
    inp(
        "w",
        &[64],
        Gen::ScaledV {
            scale: 0.1,
            seed: 5,
        },
    ),
    inp("X", &[4096, 64], Gen::V { seed: 3 }),
    inp("y", &[4096], Gen::Sign { seed: 4 }),
];

const ROSENBROCK: &[Input] = &[inp("x", &[100_000], Gen::V { seed: 6 })];

const MLP2: &[Input] = &[
    inp(
        "W1",
        &[128, 256],
        Gen::ScaledV {
            scale: 0.1,
            seed: 11,
        },
    ),
    inp(
        "b1",
        &[256],
        Gen::ScaledV {
            scale: 0.1,
            seed: 12,
        },
    ),
    inp(
        "W2",
        &[256, 10],
        Gen::ScaledV {
            scale: 0.1,
            seed: 13,
        },
    ),
    inp(
        "b2",
        &[10],
        Gen::ScaledV {
            scale: 0.1,
            seed: 14,
        },
    ),
    inp("X", &[64, 128], Gen::V { seed: 10 }),
    inp("Y", &[64, 10], Gen::V { seed: 15 }),
];

const POWER_STATIC: &[Input] = &[inp(
    "x",
    &[1_000_000],
    Gen::OffsetScaledV {
        offset: 1.0,
        scale: 0.1,
        seed: 16,
    },
)];

const EULER_ODE: &[Input] = &[
    inp("k", &[], Gen::Const(9.81)),
    inp("c", &[], Gen::Const(0.5)),
];

/// Every benchmark of `bench-suite.md`, in the order it lists them.
pub const BENCHMARKS: &[Benchmark] = &[
    Benchmark {
        key: "linreg_16",
        example: "examples/suite/linreg.eg",
        loss_fn: "linreg",
        grad_fn: "linreg_grad",
        wrt: &["w"],
        inputs: LINREG_16,
    },
    Benchmark {
        key: "linreg_1M",
        example: "examples/suite/linreg.eg",
        loss_fn: "linreg",
        grad_fn: "linreg_grad",
        wrt: &["w"],
        inputs: LINREG_1M,
    },
    Benchmark {
        key: "logistic",
        example: "examples/suite/logistic.eg",
        loss_fn: "logistic",
        grad_fn: "logistic_grad",
        wrt: &["w"],
        inputs: LOGISTIC,
    },
    Benchmark {
        key: "rosenbrock",
        example: "examples/suite/rosenbrock.eg",
        loss_fn: "rosenbrock",
        grad_fn: "rosenbrock_grad",
        wrt: &["x"],
        inputs: ROSENBROCK,
    },
    Benchmark {
        key: "mlp2",
        example: "examples/suite/mlp2.eg",
        loss_fn: "mlp2",
        grad_fn: "mlp2_grad",
        wrt: &["W1", "b1", "W2", "b2"],
        inputs: MLP2,
    },
    Benchmark {
        key: "power_static",
        example: "examples/suite/power_static.eg",
        loss_fn: "power_static",
        grad_fn: "power_static_grad",
        wrt: &["x"],
        inputs: POWER_STATIC,
    },
    Benchmark {
        key: "euler_ode",
        example: "examples/suite/euler_ode.eg",
        loss_fn: "euler_ode",
        grad_fn: "euler_ode_grad",
        wrt: &["k", "c"],
        inputs: EULER_ODE,
    },
];

/// The benchmark with this key.
pub fn benchmark(key: &str) -> Option<&'static Benchmark> {
    BENCHMARKS.iter().find(|b| b.key == key)
}

/// Every key, in table order.
pub fn keys() -> Vec<&'static str> {
    BENCHMARKS.iter().map(|b| b.key).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `bench-reference.json["_input_check"]` and the values quoted in
    /// `bench-suite.md`, compared bit for bit.
    #[test]
    fn generator_matches_the_suite_check_values() {
        let check: [(u64, u64, f64); 7] = [
            (1, 0, 0.532603514678172),
            (1, 1, -0.7479379591580257),
            (2, 0, 0.81013045575637),
            (7, 0, 0.4754112364090186),
            (7, 1, -0.7949626165686565),
            (16, 0, -0.6638020071394843),
            (16, 1, -0.07536627970720944),
        ];
        for (s, i, want) in check {
            assert_eq!(v(s, i).to_bits(), want.to_bits(), "V({s},{i})");
        }
        // The hexadecimal form quoted in the suite: 0x1.10b1686a8e080p-1.
        assert_eq!(v(1, 0), f64::from_bits(0x3FE10B1686A8E080));
        assert_eq!(2.0 * u(1, 0) - 1.0, v(1, 0));
    }

    /// Every entry of `_input_check` in `tests/data/bench-reference.json`
    /// (keys `V(s,i)`), bit for bit.
    #[test]
    fn generator_matches_the_reference_file() {
        let text = include_str!("../tests/data/bench-reference.json");
        let json: serde_json::Value = serde_json::from_str(text).unwrap();
        let check = json["_input_check"].as_object().unwrap();
        assert!(check.len() >= 6);
        for (k, want) in check {
            let args = k
                .strip_prefix("V(")
                .and_then(|r| r.strip_suffix(')'))
                .unwrap_or_else(|| panic!("unexpected check key {k}"));
            let (s, i) = args.split_once(',').unwrap();
            let (s, i): (u64, u64) = (s.trim().parse().unwrap(), i.trim().parse().unwrap());
            let want = want.as_f64().unwrap();
            assert_eq!(v(s, i).to_bits(), want.to_bits(), "{k}");
        }
        // The table has one row per benchmark of the reference, with its wrt.
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .filter(|k| !k.starts_with('_'))
            .collect();
        assert_eq!(keys.len(), BENCHMARKS.len());
        for k in keys {
            let b = benchmark(k).unwrap_or_else(|| panic!("no table row for {k}"));
            let wrt: Vec<&str> = json[k]["wrt"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w.as_str().unwrap())
                .collect();
            assert_eq!(wrt, b.wrt, "{k}");
            for w in b.wrt {
                let input = b.inputs.iter().find(|i| i.name == *w).unwrap();
                let shape: Vec<usize> = json[k]["grad"][*w]["shape"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d.as_u64().unwrap() as usize)
                    .collect();
                assert_eq!(shape, input.shape, "{k}: {w}");
            }
        }
    }

    #[test]
    fn seeds_and_indices_do_not_collide_or_overflow() {
        // (s << 32) + i wraps rather than panicking in debug builds.
        let _ = u(u64::MAX, u64::MAX);
        assert_ne!(v(1, 1 << 32), v(1, 0));
        for i in 0..1000 {
            let x = u(3, i);
            assert!((0.0..1.0).contains(&x));
        }
    }

    #[test]
    fn inputs_follow_the_suite() {
        let lin = benchmark("linreg_16").unwrap();
        let vals = lin.values(DType::F64);
        assert_eq!(vals.len(), 3);
        assert_eq!(vals[0].shape, vec![16]);
        assert_eq!(vals[0].data[1], -0.7479379591580257);
        assert_eq!(vals[1].data[0], 0.81013045575637);
        assert!(vals[2].is_scalar());
        assert_eq!(vals[2].as_scalar(), 0.5);
        assert_eq!(
            lin.signature(DType::F64),
            "(w: f64[16], x: f64[16], y: f64)"
        );

        let p = benchmark("power_static").unwrap().values(DType::F64);
        assert_eq!(p[0].data[0], 1.0 + 0.1 * -0.6638020071394843);
        assert_eq!(p[0].len(), 1_000_000);

        let lg = benchmark("logistic").unwrap().values(DType::F64);
        assert_eq!(lg[0].data[0], 0.1 * v(5, 0));
        assert_eq!(lg[1].shape, vec![4096, 64]);
        assert!(lg[2].data.iter().all(|&y| y == 1.0 || y == -1.0));
        assert!(lg[2].data.contains(&1.0));
        assert!(lg[2].data.contains(&-1.0));

        let e = benchmark("euler_ode").unwrap().values(DType::F32);
        assert_eq!(e[0].dtype, DType::F32);
        assert_eq!(e[0].as_scalar(), 9.81f32 as f64);
        assert_eq!(e[1].as_scalar(), 0.5);

        let m = benchmark("mlp2").unwrap().values(DType::F32);
        assert_eq!(m[0].data[0], (0.1 * v(11, 0)) as f32 as f64);
        assert_eq!(m[5].shape, vec![64, 10]);
    }

    #[test]
    fn the_table_covers_the_reference_keys() {
        assert_eq!(
            keys(),
            [
                "linreg_16",
                "linreg_1M",
                "logistic",
                "rosenbrock",
                "mlp2",
                "power_static",
                "euler_ode"
            ]
        );
        for b in BENCHMARKS {
            assert!(b.example.starts_with("examples/suite/") && b.example.ends_with(".eg"));
            assert_eq!(b.grad_fn, format!("{}_grad", b.loss_fn));
            for w in b.wrt {
                assert!(b.inputs.iter().any(|i| i.name == *w), "{}: {w}", b.key);
            }
        }
    }
}

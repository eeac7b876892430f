//! The GradBench modules egrad ships: for each, its program (under
//! `gradbench/` in the repository, compiled into the binary) and, per
//! function, how an eval's JSON `input` becomes egrad arguments and how the
//! results become the JSON `output`.
//!
//! The adapters only move data between layouts (JSON arrays to `f64` and
//! `i64` arrays and back, a flat matrix to rows, the sparse structure of
//! `ba`'s Jacobian around the values the program gives), build the problem
//! that the eval defines by formula (the grid of `llsq`, `ba`'s replicated
//! cameras and points and its observation indices), and assemble Jacobians
//! column by column from several forward-mode runs of one compiled
//! function (`ht`); every number of an output, and every derivative, comes
//! from egrad's own compilation of the module's program, and index data
//! (`ba`'s observations, `ht`'s bone parents, triangles and
//! correspondences) is passed as `i64` arrays and gathered with in the
//! program.

use crate::types::value::Value;
use crate::types::DType;
use serde_json::{Number, Value as Json};

/// How an evaluate calls into the module's program.
#[derive(Debug)]
pub struct Call {
    /// The egrad function to run.
    pub function: String,
    /// Source appended to the module's program for this call: a wrapper
    /// that fixes static values (compiled once per value).
    pub wrapper: Option<String>,
    pub args: Vec<Value>,
}

/// An eval's JSON input to a call of the module's program.
pub type CallFn = fn(&Json) -> Result<Call, String>;

/// The JSON output from the results (and the input, for sizes).
pub type OutputFn = fn(&Json, Vec<Value>) -> Result<Json, String>;

/// One function of a module, as GradBench names it.
pub struct Function {
    pub name: &'static str,
    pub call: CallFn,
    pub output: OutputFn,
}

pub enum Kind {
    /// Shipped: the program's source and the functions.
    Shipped {
        source: &'static str,
        functions: &'static [Function],
    },
    /// Not shipped: what the language lacks to express it.
    Missing(&'static str),
}

pub struct Module {
    pub name: &'static str,
    pub kind: Kind,
}

impl Module {
    /// The program's source, or the reason the module is not shipped.
    pub fn source(&self) -> Result<&'static str, String> {
        match &self.kind {
            Kind::Shipped { source, .. } => Ok(source),
            Kind::Missing(why) => Err(format!(
                "egrad does not implement the `{}` module yet: {why}",
                self.name
            )),
        }
    }

    pub fn function(&self, name: &str) -> Result<&'static Function, String> {
        self.source()?;
        let Kind::Shipped { functions, .. } = &self.kind else {
            return Err(format!("`{}` is not shipped", self.name));
        };
        functions.iter().find(|f| f.name == name).ok_or_else(|| {
            let known: Vec<&str> = functions.iter().map(|f| f.name).collect();
            format!(
                "module `{}` has no function `{name}` (it has {})",
                self.name,
                known.join(", ")
            )
        })
    }
}

/// Every module GradBench defines, shipped or not.
pub static MODULES: &[Module] = &[
    Module {
        name: "llsq",
        kind: Kind::Shipped {
            source: include_str!("../../gradbench/llsq.eg"),
            functions: &[
                Function {
                    name: "primal",
                    call: llsq_call::<false>,
                    output: scalar_output,
                },
                Function {
                    name: "gradient",
                    call: llsq_call::<true>,
                    output: vector_output,
                },
            ],
        },
    },
    Module {
        name: "lse",
        kind: Kind::Shipped {
            source: include_str!("../../gradbench/lse.eg"),
            functions: &[
                Function {
                    name: "primal",
                    call: lse_call::<false>,
                    output: scalar_output,
                },
                Function {
                    name: "gradient",
                    call: lse_call::<true>,
                    output: vector_output,
                },
            ],
        },
    },
    Module {
        name: "kmeans",
        kind: Kind::Shipped {
            source: include_str!("../../gradbench/kmeans.eg"),
            functions: &[
                Function {
                    name: "cost",
                    call: kmeans_call::<false>,
                    output: scalar_output,
                },
                Function {
                    name: "dir",
                    call: kmeans_call::<true>,
                    output: matrix_output,
                },
            ],
        },
    },
    Module {
        name: "det",
        kind: Kind::Shipped {
            source: include_str!("../../gradbench/det.eg"),
            functions: &[
                Function {
                    name: "primal",
                    call: det_call::<false>,
                    output: scalar_output,
                },
                Function {
                    name: "gradient",
                    call: det_call::<true>,
                    output: vector_output,
                },
            ],
        },
    },
    Module {
        name: "ode",
        kind: Kind::Shipped {
            source: include_str!("../../gradbench/ode.eg"),
            functions: &[
                Function {
                    name: "primal",
                    call: ode_call::<false>,
                    output: vector_output,
                },
                Function {
                    name: "gradient",
                    call: ode_call::<true>,
                    output: vector_output,
                },
            ],
        },
    },
    Module {
        name: "gmm",
        kind: Kind::Shipped {
            source: include_str!("../../gradbench/gmm.eg"),
            functions: &[
                Function {
                    name: "objective",
                    call: gmm_call::<false>,
                    output: scalar_output,
                },
                Function {
                    name: "jacobian",
                    call: gmm_call::<true>,
                    output: gmm_jacobian,
                },
            ],
        },
    },
    Module {
        name: "lstm",
        kind: Kind::Shipped {
            source: include_str!("../../gradbench/lstm.eg"),
            functions: &[
                Function {
                    name: "objective",
                    call: lstm_call::<false>,
                    output: scalar_output,
                },
                Function {
                    name: "jacobian",
                    call: lstm_call::<true>,
                    output: flat_output,
                },
            ],
        },
    },
    Module {
        name: "ht",
        kind: Kind::Shipped {
            source: include_str!("../../gradbench/ht.eg"),
            functions: &[
                Function {
                    name: "objective",
                    call: ht_call::<false>,
                    output: flat_output,
                },
                Function {
                    name: "jacobian",
                    call: ht_call::<true>,
                    output: ht_jacobian,
                },
            ],
        },
    },
    Module {
        name: "ba",
        kind: Kind::Shipped {
            source: include_str!("../../gradbench/ba.eg"),
            functions: &[
                Function {
                    name: "objective",
                    call: ba_call::<false>,
                    output: ba_objective,
                },
                Function {
                    name: "jacobian",
                    call: ba_call::<true>,
                    output: ba_jacobian,
                },
            ],
        },
    },
    Module {
        name: "particle",
        kind: Kind::Shipped {
            source: include_str!("../../gradbench/particle.eg"),
            functions: NESTED_PARTICLE,
        },
    },
    Module {
        name: "saddle",
        kind: Kind::Shipped {
            source: include_str!("../../gradbench/saddle.eg"),
            functions: NESTED_SADDLE,
        },
    },
];

/// `particle` and `saddle`: the same four functions, the modes of the
/// outer and the inner derivative ([`NESTED_MODES`]), each a function of
/// the program of that name.
const fn nested(calls: [CallFn; 4], output: OutputFn) -> [Function; 4] {
    let [a, b, c, d] = calls;
    let [ma, mb, mc, md] = NESTED_MODES;
    [
        Function {
            name: ma,
            call: a,
            output,
        },
        Function {
            name: mb,
            call: b,
            output,
        },
        Function {
            name: mc,
            call: c,
            output,
        },
        Function {
            name: md,
            call: d,
            output,
        },
    ]
}

const NESTED_PARTICLE: &[Function] = &nested(
    [
        particle_call::<0>,
        particle_call::<1>,
        particle_call::<2>,
        particle_call::<3>,
    ],
    scalar_output,
);

const NESTED_SADDLE: &[Function] = &nested(
    [
        saddle_call::<0>,
        saddle_call::<1>,
        saddle_call::<2>,
        saddle_call::<3>,
    ],
    flat_output,
);

/// The module `name` (shipped or not), or an error naming the known ones.
pub fn find(name: &str) -> Result<&'static Module, String> {
    MODULES.iter().find(|m| m.name == name).ok_or_else(|| {
        let known: Vec<&str> = MODULES.iter().map(|m| m.name).collect();
        format!(
            "egrad does not know the module `{name}` (GradBench modules it knows: {})",
            known.join(", ")
        )
    })
}

// ---------------------------------------------------------------- inputs

fn field<'a>(input: &'a Json, name: &str) -> Result<&'a Json, String> {
    input
        .get(name)
        .ok_or_else(|| format!("the input has no field `{name}`"))
}

fn number(v: &Json, what: &str) -> Result<f64, String> {
    v.as_f64()
        .ok_or_else(|| format!("`{what}` must be numbers, found {}", short(v)))
}

fn short(v: &Json) -> String {
    let s = v.to_string();
    if s.len() > 40 {
        format!("{}...", &s[..s.floor_char_boundary(40)])
    } else {
        s
    }
}

/// A field that is an array of numbers.
fn vector(input: &Json, name: &str) -> Result<Vec<f64>, String> {
    let v = field(input, name)?;
    let xs = v
        .as_array()
        .ok_or_else(|| format!("`{name}` must be an array of numbers"))?;
    xs.iter().map(|x| number(x, name)).collect()
}

/// A field that is an array of rows of equal length: (rows, columns, data).
fn matrix(input: &Json, name: &str) -> Result<(usize, usize, Vec<f64>), String> {
    let v = field(input, name)?;
    let rows = v
        .as_array()
        .ok_or_else(|| format!("`{name}` must be an array of rows"))?;
    let mut data = Vec::new();
    let mut cols = None;
    for (i, r) in rows.iter().enumerate() {
        let r = r
            .as_array()
            .ok_or_else(|| format!("row {i} of `{name}` is not an array"))?;
        if *cols.get_or_insert(r.len()) != r.len() {
            return Err(format!(
                "the rows of `{name}` differ in length ({} and {})",
                cols.unwrap_or(0),
                r.len()
            ));
        }
        for x in r {
            data.push(number(x, name)?);
        }
    }
    Ok((rows.len(), cols.unwrap_or(0), data))
}

/// A field that is a non-negative integer.
fn count(input: &Json, name: &str) -> Result<u64, String> {
    let v = field(input, name)?;
    v.as_u64()
        .or_else(|| {
            v.as_f64()
                .filter(|x| x.fract() == 0.0 && *x >= 0.0 && *x < 2f64.powi(53))
                .map(|x| x as u64)
        })
        .ok_or_else(|| {
            format!(
                "`{name}` must be a non-negative integer, found {}",
                short(v)
            )
        })
}

/// Refuse an input whose arrays, made from its sizes rather than read from
/// the message, would need more memory than the limit
/// ([`crate::ir::memory`]): `elements` numbers (None: more than a `u64`
/// counts), checked before any is made.
fn fits_memory(elements: Option<u64>, what: &str) -> Result<(), String> {
    crate::ir::memory::check(elements.and_then(|e| e.checked_mul(8)), what)
}

fn f64s(shape: Vec<usize>, data: Vec<f64>) -> Value {
    Value::array(DType::F64, shape, data)
}

/// Integers (indices) read as numbers: an argument checks that each is a
/// whole number, and the program checks its indices against the arrays.
fn i64s(shape: Vec<usize>, data: Vec<f64>) -> Value {
    Value::array(DType::I64, shape, data)
}

fn call(function: &str, args: Vec<Value>) -> Call {
    Call {
        function: function.to_string(),
        wrapper: None,
        args,
    }
}

/// A call of `name`, a wrapper function (its source `wrapper`) that fixes
/// a module function's static values.
fn wrapped(name: String, wrapper: String, args: Vec<Value>) -> Call {
    Call {
        function: name,
        wrapper: Some(wrapper),
        args,
    }
}

// --------------------------------------------------------------- outputs

fn json_number(x: f64) -> Result<Json, String> {
    Number::from_f64(x)
        .map(Json::Number)
        .ok_or_else(|| format!("the result has a non-finite number ({x})"))
}

fn single(mut outs: Vec<Value>) -> Result<Value, String> {
    if outs.len() != 1 {
        return Err(format!(
            "expected one result, the program gave {}",
            outs.len()
        ));
    }
    Ok(outs.remove(0))
}

fn scalar_output(_: &Json, outs: Vec<Value>) -> Result<Json, String> {
    let v = single(outs)?;
    if !v.is_scalar() {
        return Err(format!("expected a scalar result, got shape {:?}", v.shape));
    }
    json_number(v.as_scalar())
}

/// Every element, flat (row-major).
fn vector_output(_: &Json, outs: Vec<Value>) -> Result<Json, String> {
    let v = single(outs)?;
    v.data.iter().map(|&x| json_number(x)).collect()
}

/// Every element of every result, flat, one after the other.
fn flat_output(_: &Json, outs: Vec<Value>) -> Result<Json, String> {
    outs.iter()
        .flat_map(|v| v.data.iter())
        .map(|&x| json_number(x))
        .collect()
}

/// A matrix as an array of rows.
fn matrix_output(_: &Json, outs: Vec<Value>) -> Result<Json, String> {
    rows(&single(outs)?)
}

/// A matrix as an array of rows.
fn rows(v: &Value) -> Result<Json, String> {
    let [_, cols] = v.shape[..] else {
        return Err(format!("expected a matrix result, got shape {:?}", v.shape));
    };
    if cols == 0 {
        return Ok(Json::Array(vec![Json::Array(vec![]); v.shape[0]]));
    }
    v.data
        .chunks(cols)
        .map(|row| {
            row.iter()
                .map(|&x| json_number(x))
                .collect::<Result<Json, String>>()
        })
        .collect()
}

// ---------------------------------------------------------------- llsq

/// `{x: m-vector, n}`: x and the grid t_i = -1 + 2i/(n-1) (a problem
/// constant the eval defines by formula), with the static `m` fixed by a
/// wrapper.
fn llsq_call<const GRAD: bool>(input: &Json) -> Result<Call, String> {
    let x = vector(input, "x")?;
    let n = count(input, "n")?;
    if n < 2 {
        return Err(format!(
            "`n` must be at least 2 (the grid has step 2/(n-1)), found {n}"
        ));
    }
    // The grid, and the result's row per point for the gradient.
    fits_memory(n.checked_mul(2), &format!("the grid of n = {n} points"))?;
    let n = usize::try_from(n).map_err(|_| "`n` is too large".to_string())?;
    let t: Vec<f64> = (0..n)
        .map(|i| -1.0 + 2.0 * i as f64 / (n - 1) as f64)
        .collect();
    let m = x.len();
    if m == 0 || m > 2048 {
        return Err(format!(
            "`x` must have 1 to 2048 coefficients (llsq.eg's static split), found {m}"
        ));
    }
    let f = if GRAD { "gradient" } else { "primal" };
    let name = format!("gradbench_{f}_m{m}");
    let ret = if GRAD { "f64[M]" } else { "f64" };
    let wrapper = format!("fn {name}[N, M](x: f64[M], t: f64[N]) -> {ret} = {f}({m}, x, t)");
    Ok(wrapped(name, wrapper, vec![Value::f64(&x), Value::f64(&t)]))
}

// ----------------------------------------------------------------- lse

fn lse_call<const GRAD: bool>(input: &Json) -> Result<Call, String> {
    let x = vector(input, "x")?;
    Ok(call(
        if GRAD { "gradient" } else { "primal" },
        vec![Value::f64(&x)],
    ))
}

// -------------------------------------------------------------- kmeans

fn kmeans_call<const DIR: bool>(input: &Json) -> Result<Call, String> {
    let (n, d, points) = matrix(input, "points")?;
    let (k, dc, centroids) = matrix(input, "centroids")?;
    if k > 0 && n > 0 && d != dc {
        return Err(format!(
            "points have {d} coordinates but centroids have {dc}"
        ));
    }
    Ok(call(
        if DIR { "dir" } else { "cost" },
        vec![f64s(vec![n, d], points), f64s(vec![k, dc], centroids)],
    ))
}

// ----------------------------------------------------------------- det

/// The largest matrix `gradbench/det.eg` has a function for.
const DET_MAX: u64 = 12;

fn det_call<const GRAD: bool>(input: &Json) -> Result<Call, String> {
    let a = vector(input, "A")?;
    let ell = count(input, "ell")?;
    if !(1..=DET_MAX).contains(&ell) {
        return Err(format!(
            "`ell` must be between 1 and {DET_MAX} (det.eg defines those sizes), found {ell}"
        ));
    }
    let l = ell as usize;
    if a.len() != l * l {
        return Err(format!(
            "`A` has {} numbers, but ell = {ell} needs {}",
            a.len(),
            l * l
        ));
    }
    let f = format!("{}_{ell}", if GRAD { "gradient" } else { "primal" });
    Ok(call(&f, vec![f64s(vec![l, l], a)]))
}

// ----------------------------------------------------------------- ode

/// `{x: n-vector, s}`: x, with the static step count `s` fixed by a wrapper.
fn ode_call<const GRAD: bool>(input: &Json) -> Result<Call, String> {
    let x = vector(input, "x")?;
    let s = count(input, "s")?;
    if s == 0 {
        return Err("`s` must be at least 1 (the step is 2/s)".to_string());
    }
    let f = if GRAD { "gradient" } else { "primal" };
    let name = format!("gradbench_{f}_s{s}");
    let wrapper = format!("fn {name}[N](x: f64[N]) -> f64[N] = {f}({s}, x)");
    Ok(wrapped(name, wrapper, vec![Value::f64(&x)]))
}

// ----------------------------------------------------------------- gmm

/// `{d, k, n, x, m, gamma, alpha, mu, q, l}`: the arrays, with the static
/// `d` and `m` fixed by a wrapper.
fn gmm_call<const JAC: bool>(input: &Json) -> Result<Call, String> {
    let d = count(input, "d")?;
    let k = count(input, "k")?;
    let n = count(input, "n")?;
    let m = count(input, "m")?;
    if d == 0 || d > 128 {
        return Err(format!(
            "`d` must be between 1 and 128 (gmm.eg's static ranges), found {d}"
        ));
    }
    let gamma = number(field(input, "gamma")?, "gamma")?;
    let alpha = vector(input, "alpha")?;
    let (xn, xd, x) = matrix(input, "x")?;
    let (muk, mud, mu) = matrix(input, "mu")?;
    let (qk, qd, q) = matrix(input, "q")?;
    let (lk, _, l) = matrix(input, "l")?;
    let (d, k, n) = (d as usize, k as usize, n as usize);
    let lw = d * (d - 1) / 2;
    let shapes = [
        ("x", (xn, xd), (n, d)),
        ("mu", (muk, mud), (k, d)),
        ("q", (qk, qd), (k, d)),
        ("l", (lk, l.len().checked_div(lk).unwrap_or(0)), (k, lw)),
        ("alpha", (alpha.len(), 1), (k, 1)),
    ];
    for (name, got, want) in shapes {
        if got != want {
            return Err(format!(
                "`{name}` has shape {}x{}, but d = {d}, k = {k}, n = {n} need {}x{}",
                got.0, got.1, want.0, want.1
            ));
        }
    }
    let f = if JAC { "jacobian" } else { "objective" };
    let name = format!("gradbench_{f}_d{d}_m{m}");
    let ret = if JAC {
        "(f64[K], f64[K, D], f64[K, D], f64[K, L])"
    } else {
        "f64"
    };
    let wrapper = format!(
        "fn {name}[N, D, K, L](x: f64[N, D], gamma: f64, alpha: f64[K], mu: f64[K, D], q: f64[K, D], l: f64[K, L]) -> {ret} = {f}({d}, {m}, x, gamma, alpha, mu, q, l)"
    );
    let args = vec![
        f64s(vec![n, d], x),
        Value::scalar(DType::F64, gamma),
        Value::f64(&alpha),
        f64s(vec![k, d], mu),
        f64s(vec![k, d], q),
        f64s(vec![k, lw], l),
    ];
    Ok(wrapped(name, wrapper, args))
}

/// The gradient with respect to each independent variable, by name.
fn gmm_jacobian(_: &Json, outs: Vec<Value>) -> Result<Json, String> {
    let [alpha, mu, q, l] = &outs[..] else {
        return Err(format!(
            "expected four results, the program gave {}",
            outs.len()
        ));
    };
    let alpha: Json = alpha
        .data
        .iter()
        .map(|&x| json_number(x))
        .collect::<Result<_, _>>()?;
    Ok(serde_json::json!({ "alpha": alpha, "mu": rows(mu)?, "q": rows(q)?, "l": rows(l)? }))
}

// ---------------------------------------------------------------- lstm

/// `{main_params: 2l x 4b, extra_params: 3 x b, state: 2l x b, sequence:
/// c x b}`: `main_params` goes as `f64[8l, b]` (the same numbers, each row
/// split in four), for `objective` or `jacobian` (one function for any
/// number of layers l).
fn lstm_call<const JAC: bool>(input: &Json) -> Result<Call, String> {
    let (mr, mc, main) = matrix(input, "main_params")?;
    let (er, ec, extra) = matrix(input, "extra_params")?;
    let (sr, sc, state) = matrix(input, "state")?;
    let (c, b, seq) = matrix(input, "sequence")?;
    let l = mr / 2;
    if mr % 2 != 0 || l == 0 {
        return Err(format!(
            "`main_params` must have 2l rows for l >= 1 layers, found {mr}"
        ));
    }
    if mc != 4 * b || er != 3 || ec != b || sr != 2 * l || sc != b || c == 0 {
        return Err(format!(
            "with b = {b} bits and l = {l} layers the shapes must be main_params {}x{}, extra_params 3x{b}, state {}x{b} and a non-empty sequence; found {mr}x{mc}, {er}x{ec}, {sr}x{sc} and {c} rows",
            2 * l,
            4 * b,
            2 * l
        ));
    }
    Ok(call(
        if JAC { "jacobian" } else { "objective" },
        vec![
            f64s(vec![8 * l, b], main),
            f64s(vec![3, b], extra),
            f64s(vec![2 * l, b], state),
            f64s(vec![c, b], seq),
        ],
    ))
}

// ------------------------------------------------------------------ ht

/// A field that is an array of `n` x `n` matrices, flat.
fn matrices(input: &Json, name: &str, n: usize) -> Result<(usize, Vec<f64>), String> {
    let v = field(input, name)?;
    let ms = v
        .as_array()
        .ok_or_else(|| format!("`{name}` must be an array of matrices"))?;
    let mut data = Vec::with_capacity(ms.len() * n * n);
    for (k, m) in ms.iter().enumerate() {
        let (r, c, d) = matrix(&serde_json::json!({ "m": m }), "m")
            .map_err(|e| format!("matrix {k} of `{name}`: {e}"))?;
        if (r, c) != (n, n) {
            return Err(format!("matrix {k} of `{name}` is {r}x{c}, not {n}x{n}"));
        }
        data.extend(d);
    }
    Ok((ms.len(), data))
}

/// `{theta, data: {model, correspondences, points}, us}`: the model's
/// arrays, its bone parents, triangles and the correspondences as `i64`
/// arrays (the program gathers with them), for `objective_<variant>` or
/// the Jacobian's columns from `tangent_<variant>`: `simple` when `us` is
/// empty, else `complicated`.
fn ht_call<const JAC: bool>(input: &Json) -> Result<Call, String> {
    let theta = vector(input, "theta")?;
    if theta.len() != 26 {
        return Err(format!(
            "`theta` must have 26 numbers, found {}",
            theta.len()
        ));
    }
    let data = field(input, "data")?;
    let model = field(data, "model")?;
    let parents = vector(model, "parents")?;
    let (nrel, rel) = matrices(model, "base_relatives", 4)?;
    let (ninv, inv) = matrices(model, "inverse_base_absolutes", 4)?;
    let (v, pw, pos) = matrix(model, "base_positions")?;
    let (wv, wb, wts) = matrix(model, "weights")?;
    if parents.len() != 22 || nrel != 22 || ninv != 22 || pw != 4 || wv != v || wb != 22 {
        return Err(format!(
            "ht.eg poses ADBench's hand of 22 bones: the model needs 22 parents, base relatives and inverse base absolutes, V x 4 base positions and V x 22 weights; found {}, {nrel}, {ninv}, {v}x{pw} and {wv}x{wb}",
            parents.len()
        ));
    }
    let mirror = match field(model, "is_mirrored")? {
        Json::Bool(true) => -1.0,
        Json::Bool(false) => 1.0,
        other => {
            return Err(format!(
                "`is_mirrored` must be a boolean, found {}",
                short(other)
            ))
        }
    };
    let (c, pc, points) = matrix(data, "points")?;
    if pc != 3 && c > 0 {
        return Err(format!("`points` must be c x 3, found {c}x{pc}"));
    }
    let corr = vector(data, "correspondences")?;
    if corr.len() != c {
        return Err(format!("{c} points but {} correspondences", corr.len()));
    }
    let (uc, uw, us) = matrix(input, "us")?;
    let mut args = vec![Value::f64(&theta)];
    let variant = if uc > 0 {
        if uc != c || uw != 2 {
            return Err(format!(
                "with {c} points, `us` must be {c}x2, found {uc}x{uw}"
            ));
        }
        args.push(f64s(vec![c, 2], us));
        "complicated"
    } else {
        "simple"
    };
    args.extend([
        f64s(vec![22, 4, 4], rel),
        f64s(vec![22, 4, 4], inv),
        f64s(vec![v, 4], pos),
        f64s(vec![v, 22], wts),
        Value::scalar(DType::F64, mirror),
        i64s(vec![22], parents),
        f64s(vec![c, 3], points),
    ]);
    if uc > 0 {
        let (nt, tw, tris) = matrix(model, "triangles")?;
        if tw != 3 {
            return Err(format!("`triangles` must be T x 3, found {nt}x{tw}"));
        }
        args.push(i64s(vec![nt, 3], tris));
    }
    args.push(i64s(vec![c], corr));
    if !JAC {
        return Ok(call(&format!("objective_{variant}"), args));
    }
    // The whole Jacobian in one run: forward mode at every column's
    // direction at once (`jacobian_<variant>` in ht.eg).
    Ok(call(&format!("jacobian_{variant}"), args))
}

/// The 3c x (26 or 28) Jacobian, rows of residuals, from its columns
/// (`jacobian_<variant>` gives column k as its row k, of 3c numbers).
fn ht_jacobian(_: &Json, outs: Vec<Value>) -> Result<Json, String> {
    let [jac] = &outs[..] else {
        return Err(format!("expected the Jacobian, got {} outputs", outs.len()));
    };
    let cols = jac.shape.first().copied().unwrap_or(0);
    let rows = jac.data.len().checked_div(cols).unwrap_or(0);
    (0..rows)
        .map(|r| {
            (0..cols)
                .map(|k| json_number(jac.data[k * rows + r]))
                .collect::<Result<Json, String>>()
        })
        .collect()
}

// ------------------------------------------------------------------ ba

/// The sizes `(n, m, p)` of a `ba` input.
fn ba_sizes(input: &Json) -> Result<(usize, usize, usize), String> {
    let size = |name| -> Result<usize, String> {
        let k = count(input, name)?;
        usize::try_from(k).map_err(|_| format!("`{name}` is too large"))
    };
    let (n, m, p) = (size("n")?, size("m")?, size("p")?);
    if n == 0 || m == 0 || p == 0 {
        return Err(format!(
            "`n`, `m` and `p` must be positive, found {n}, {m}, {p}"
        ));
    }
    // The cameras, points and observations made from one of each (11, 3
    // and 6 numbers), and as many again for the results.
    let numbers = [(n, 11), (m, 3), (p, 6)]
        .iter()
        .try_fold(0u64, |acc, &(k, w)| {
            (k as u64).checked_mul(w).and_then(|x| acc.checked_add(x))
        })
        .and_then(|x| x.checked_mul(2));
    fits_memory(numbers, &format!("a problem of n = {n}, m = {m}, p = {p}"))?;
    Ok((n, m, p))
}

/// Observation i's camera and point: GradBench replicates one camera and
/// one point, and observation i sees camera i mod n and point i mod m.
fn ba_observation(i: usize, n: usize, m: usize) -> (usize, usize) {
    (i % n, i % m)
}

/// The whole problem, as the eval's C++ code builds it: n cameras and m
/// points (copies of the input's), p weights and features, and the camera
/// and point of each observation as index arrays.
fn ba_call<const JAC: bool>(input: &Json) -> Result<Call, String> {
    let (n, m, p) = ba_sizes(input)?;
    let cam = vector(input, "cam")?;
    let x = vector(input, "x")?;
    let feat = vector(input, "feat")?;
    let w = number(field(input, "w")?, "w")?;
    if cam.len() != 11 || x.len() != 3 || feat.len() != 2 {
        return Err(format!(
            "`cam`, `x` and `feat` must have 11, 3 and 2 numbers, found {}, {} and {}",
            cam.len(),
            x.len(),
            feat.len()
        ));
    }
    let (cam_of, pt_of): (Vec<f64>, Vec<f64>) = (0..p)
        .map(|i| {
            let (c, x) = ba_observation(i, n, m);
            (c as f64, x as f64)
        })
        .unzip();
    Ok(call(
        if JAC { "jacobian" } else { "objective" },
        vec![
            f64s(vec![n, 11], cam.repeat(n)),
            f64s(vec![m, 3], x.repeat(m)),
            f64s(vec![p], vec![w; p]),
            f64s(vec![p, 2], feat.repeat(p)),
            i64s(vec![p], cam_of),
            i64s(vec![p], pt_of),
        ],
    ))
}

/// One representative residual pair and weight error, with the count.
fn ba_objective(input: &Json, outs: Vec<Value>) -> Result<Json, String> {
    let (_, _, p) = ba_sizes(input)?;
    let [ex, ey, we] = &outs[..] else {
        return Err(format!(
            "expected three results, the program gave {}",
            outs.len()
        ));
    };
    let first = |v: &Value| json_number(v.data.first().copied().unwrap_or(f64::NAN));
    Ok(serde_json::json!({
        "reproj_error": {"elements": [first(ex)?, first(ey)?], "repeated": p},
        "w_err": {"element": first(we)?, "repeated": p},
    }))
}

/// The (3p) x (11n + 3m + p) Jacobian in compressed sparse rows: the
/// program gives the values in order; rows 2i and 2i+1 are observation
/// i's reprojection error (its camera's 11 columns, its point's 3, its
/// weight), rows 2p + i its weight error. GradBench asks for the first 30
/// and the last entry of each array.
fn ba_jacobian(input: &Json, outs: Vec<Value>) -> Result<Json, String> {
    let (n, m, p) = ba_sizes(input)?;
    let vals = single(outs)?;
    if vals.data.len() != 31 * p {
        return Err(format!(
            "the Jacobian has {} values, expected {}",
            vals.data.len(),
            31 * p
        ));
    }
    let mut rows = vec![0usize];
    let mut cols = Vec::with_capacity(31 * p);
    for i in 0..p {
        let (c, x) = ba_observation(i, n, m);
        for _ in 0..2 {
            cols.extend((0..11).map(|k| 11 * c + k));
            cols.extend((0..3).map(|k| 11 * n + 3 * x + k));
            cols.push(11 * n + 3 * m + i);
            rows.push(cols.len());
        }
    }
    for i in 0..p {
        cols.push(11 * n + 3 * m + i);
        rows.push(cols.len());
    }
    fn ends<T: Copy>(xs: &[T]) -> Vec<T> {
        let mut v: Vec<T> = xs.iter().take(30).copied().collect();
        v.extend(xs.last().copied());
        v
    }
    let vals: Vec<Json> = ends(&vals.data)
        .into_iter()
        .map(json_number)
        .collect::<Result<_, _>>()?;
    Ok(serde_json::json!({ "rows": ends(&rows), "cols": ends(&cols), "vals": vals }))
}

// ------------------------------------------------------ particle, saddle

/// Reverse or forward mode for the outer, then the inner derivative.
const NESTED_MODES: [&str; 4] = ["rr", "rf", "fr", "ff"];

/// `{w}`: the starting control value, for function `NESTED_MODES[M]`.
fn particle_call<const M: usize>(input: &Json) -> Result<Call, String> {
    let w = number(field(input, "w")?, "w")?;
    Ok(call(NESTED_MODES[M], vec![Value::scalar(DType::F64, w)]))
}

/// `{start: [s1, s2]}`: where both descents start, for function
/// `NESTED_MODES[M]`.
fn saddle_call<const M: usize>(input: &Json) -> Result<Call, String> {
    let start = vector(input, "start")?;
    let [s1, s2] = start[..] else {
        return Err(format!(
            "`start` must have 2 numbers, found {}",
            start.len()
        ));
    };
    Ok(call(
        NESTED_MODES[M],
        vec![Value::scalar(DType::F64, s1), Value::scalar(DType::F64, s2)],
    ))
}

#[cfg(test)]
#[path = "modules_test.rs"]
mod tests;

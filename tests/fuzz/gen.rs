//! A grammar-aware generator of programs: functions over sizes `N` and
//! `M` with scalars, vectors `T[N]`, `T[M]`, matrices `T[N, M]` (`T`
//! being `f64` or `f32`), `i64` and `static` parameters; blocks of
//! `let`s, the operators, the built-in functions and the prelude's
//! (`dot`, `mean`, `norm`, `logsumexp`, `softmax`, `outer`, ...), `if` on
//! scalar and element-wise conditions (`&&`, `||`, `!`), `tabulate`
//! (nested too, reading elements and rows), `iterate` and
//! `iterate_until` (short ones, unrolled, and long ones, kept as loops),
//! `scan` and `scan_all` over vectors and matrices, indexing with
//! literal and run-time indices (in range or not), `reverse`, `concat`,
//! `flatten`, `scatter_add`, `argmax`, `matmul`, `transpose`, `i64`/`f64`
//! conversions, `match` (on `i64` parameters, the static `c`, integers
//! from floats, element-wise too, conditions and static bools; patterns
//! `0`, `1 | 2`, `-1`, `true`, `false`, `_`, now and then not covering
//! every value or repeated), numbers drawn from keys (`normal[...]` and
//! `uniform[...]` of a `random_key(seed)` of a literal, an `i64`
//! parameter or an integer from a float, `split`, the next key drawn
//! from), calls of earlier functions, functions with their own
//! derivative rules (`@custom_vjp`, `@custom_jvp` or both, the rules
//! random expressions of the parameters linear in the cotangent or the
//! tangents; now and then, on purpose, a rule of the wrong type or
//! arity, one that is not linear, one calling its own primitive, a
//! missing rule, a static parameter, a call inside `tabulate`), and
//! derivative functions (`@grad`, `@value_and_grad`, `@jvp`) of the
//! scalar ones. (Not native kernels: cases run in child processes,
//! which would have to register them too.)
//!
//! Unlike `tests/random_programs.rs`, whose programs are always well typed
//! and kept numerically tame so that their derivatives can be checked
//! against finite differences, these aim at odd corners: values may
//! overflow or be NaN, indices may be out of range, and now and then (0.3%
//! of the expressions) an expression of the wrong shape is written on
//! purpose. About two thirds of them check, so the back stages see many.

use crate::common::rng::Rng;

#[path = "rules.rs"]
mod rules;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Shape {
    Scalar,
    /// `T[N]`
    VecN,
    /// `T[M]`
    VecM,
    /// `T[N, M]`
    Matrix,
}

use Shape::*;

const SHAPES: [Shape; 4] = [Scalar, VecN, VecM, Matrix];

struct Gen<'a> {
    rng: &'a mut Rng,
    /// Variables in scope: name (or an expression read like one) and shape.
    vars: Vec<(String, Shape)>,
    /// Earlier plain functions of scalar result: name, parameter shapes
    /// (`i64` parameters as `None`), and whether it is a function with
    /// its own derivative rules or calls one.
    funcs: Vec<(String, Vec<Option<Shape>>, bool)>,
    /// How many `tabulate` bodies are being generated: a function with
    /// rules is not called there but now and then on purpose (egrad
    /// refuses one on values of the index).
    in_tab: usize,
    /// A function with rules (or one calling one) was called.
    called_prim: bool,
    depth: usize,
    fresh: usize,
    /// The element type of this function's floats.
    float: &'static str,
    /// This function's `i64` parameters (counts).
    ints: Vec<String>,
    /// This function has `static c: i64`.
    statik: bool,
}

const UNARY: &[&str] = &[
    "sin", "cos", "exp", "log", "sqrt", "tanh", "tan", "abs", "log1p", "expm1", "-",
];
const BINARY: &[&str] = &["+", "-", "*", "/", ".*", "./"];
const COMPARE: &[&str] = &["<", "<=", ">", ">=", "==", "!="];
const LITERALS: &[&str] = &[
    "0", "1", "2", "0.5", "-1", "1e-3", "3.25", "1e300", "0.0", "2.5e-8", "7",
];

impl Gen<'_> {
    fn name(&mut self, stem: &str) -> String {
        self.fresh += 1;
        format!("{stem}{}", self.fresh)
    }

    fn var(&mut self, shape: Shape) -> Option<String> {
        let c: Vec<&String> = self
            .vars
            .iter()
            .filter(|(_, s)| *s == shape)
            .map(|(n, _)| n)
            .collect();
        if c.is_empty() {
            None
        } else {
            Some(c[self.rng.below(c.len())].clone())
        }
    }

    /// `T(e)` for this function's float type `T`.
    fn to_float(&self, e: &str) -> String {
        format!("{}({e})", self.float)
    }

    /// An expression of `shape` (rarely, on purpose, of another).
    fn expr(&mut self, shape: Shape) -> String {
        if self.rng.chance(0.003) {
            let other = self.rng.pick(&SHAPES);
            return self.leaf(other);
        }
        if self.depth > 4 || self.rng.chance(0.3) {
            return self.leaf(shape);
        }
        self.depth += 1;
        let e = match shape {
            Scalar => self.scalar(),
            VecN | VecM => self.vector(shape),
            Matrix => self.matrix(),
        };
        self.depth -= 1;
        e
    }

    fn leaf(&mut self, shape: Shape) -> String {
        if let Some(v) = self.var(shape) {
            if self.rng.chance(0.9) {
                return v;
            }
        }
        match shape {
            Scalar => self.rng.pick(LITERALS).to_string(),
            VecN | VecM => {
                let n = if shape == VecN { "N" } else { "M" };
                let i = self.name("i");
                let c = self.rng.pick(LITERALS);
                let fi = self.to_float(&i);
                format!("tabulate[{n}]({i} => {fi} * {c})")
            }
            Matrix => {
                let (a, b) = (self.leaf(VecN), self.leaf(VecM));
                format!("outer({a}, {b})")
            }
        }
    }

    /// Forms of any shape: unary, binary, `if`, `let` block, `iterate`,
    /// `match`, numbers drawn from a key.
    fn common(&mut self, shape: Shape) -> Option<String> {
        Some(match self.rng.below(12) {
            0 | 1 => {
                let f = self.rng.pick(UNARY);
                let a = self.expr(shape);
                if f == "-" {
                    format!("-({a})")
                } else {
                    format!("{f}({a})")
                }
            }
            2 | 3 => {
                let op = self.rng.pick(BINARY);
                let other = if self.rng.chance(0.3) { Scalar } else { shape };
                let (a, b) = (self.expr(shape), self.expr(other));
                if self.rng.chance(0.5) {
                    format!("({a} {op} {b})")
                } else {
                    format!("({b} {op} {a})")
                }
            }
            4 => {
                let f = self.rng.pick(&["max", "min", "pow"]);
                let (a, b) = (self.expr(shape), self.expr(Scalar));
                format!("{f}({a}, {b})")
            }
            5 => {
                let c = self.cond(shape);
                let (a, b) = (self.expr(shape), self.expr(shape));
                format!("if {c} {{ {a} }} else {{ {b} }}")
            }
            6 => {
                let n = self.name("t");
                let s = if self.rng.chance(0.5) {
                    shape
                } else {
                    self.rng.pick(&SHAPES)
                };
                let v = self.expr(s);
                self.vars.push((n.clone(), s));
                let body = self.expr(shape);
                self.vars.pop();
                format!("{{ let {n} = {v}\n  {body} }}")
            }
            7 | 8 => {
                // Long loops (kept as loops, not unrolled) mostly not
                // nested in another.
                let count = if self.depth <= 1 || self.rng.chance(0.1) {
                    self.rng.pick(&["0", "1", "3", "40", "300", "2500"])
                } else {
                    self.rng.pick(&["0", "1", "2", "5"])
                };
                let q = self.name("q");
                let init = self.expr(shape);
                self.vars.push((q.clone(), shape));
                let step = self.expr(shape);
                let done = self.cond(Scalar);
                self.vars.pop();
                let relax = self.rng.pick(&["0.5", "0.01", "1"]);
                let step = format!("{q} + {relax} * (tanh({step}) - {q})");
                if self.rng.chance(0.3) {
                    format!("iterate_until({count}, {init}, {q} => {done}, {q} => {step})")
                } else {
                    format!("iterate({count}, {init}, {q} => {step})")
                }
            }
            // (Half as often as the others.)
            10 if self.rng.chance(0.5) => self.match_expr(shape),
            11 if self.rng.chance(0.5) => self.random(shape),
            _ => return None,
        })
    }

    /// `match` on an integer (an `i64` parameter, the static `c`, an
    /// integer from a float, element by element for an array) or a bool (a
    /// condition, a static one), its arms of `shape` or scalars, separated
    /// by commas or line breaks; one in 50 does not cover every value or
    /// repeats a pattern, on purpose.
    fn match_expr(&mut self, shape: Shape) -> String {
        let odd = self.rng.chance(0.02);
        let (scrutinee, is_bool) = match self.rng.below(6) {
            0 if !self.ints.is_empty() => (self.rng.pick(&self.ints), false),
            1 if self.statik => ("c".to_string(), false),
            2 => {
                let s = if self.rng.chance(0.5) { shape } else { Scalar };
                (format!("i64({} * 3.0)", self.expr(s)), false)
            }
            3 => (self.cond(shape), true),
            4 => {
                let b = if self.statik && self.rng.chance(0.3) {
                    "c > 1"
                } else {
                    self.rng.pick(&["true", "false", "1 < 2"])
                };
                (b.to_string(), true)
            }
            _ => (format!("i64({} * 3.0)", self.leaf(Scalar)), false),
        };
        let arm = |g: &mut Self| {
            let s = if g.rng.chance(0.2) { Scalar } else { shape };
            g.expr(s)
        };
        let mut arms: Vec<(String, String)> = Vec::new();
        if is_bool {
            let first = self.rng.pick(&["true", "false"]);
            arms.push((first.to_string(), arm(self)));
            let second = match (odd, first) {
                (true, _) => first,
                (_, "true") => self.rng.pick(&["false", "_"]),
                _ => self.rng.pick(&["true", "_"]),
            };
            arms.push((second.to_string(), arm(self)));
        } else {
            let mut vals = vec![-1, 0, 1, 2, 3, 7];
            self.rng.shuffle(&mut vals);
            let mut left = &vals[..];
            for _ in 0..self.rng.range(1, 4) {
                let k = self.rng.range(1, 3).min(left.len());
                let pats: Vec<String> = left[..k].iter().map(|v| v.to_string()).collect();
                left = &left[k..];
                arms.push((pats.join(" | "), arm(self)));
            }
            if odd && self.rng.chance(0.5) {
                // A pattern twice.
                let p = arms[0].0.clone();
                arms.push((p, arm(self)));
            }
            if !odd || self.rng.chance(0.5) {
                arms.push(("_".to_string(), arm(self)));
            }
        }
        let arms: Vec<String> = arms.iter().map(|(p, e)| format!("{p} => {e}")).collect();
        if self.rng.chance(0.5) {
            format!("(match {scrutinee} {{ {} }})", arms.join(", "))
        } else {
            format!("(match {scrutinee} {{\n    {}\n  }})", arms.join("\n    "))
        }
    }

    /// Numbers drawn from a key, in a block: `{ let (z, k) =
    /// normal[N](random_key(3)) ... e + z }` (`uniform[...]` too; `[2]`,
    /// its element 0 read, for a scalar), the seed a literal, an `i64`
    /// parameter or an integer from a float, sometimes a key `split` first
    /// or a second draw from the next key. In an `f32` function the `f64`s
    /// go through an integer: `f32(i64(z * 2^20)) * 2^-20` (egrad does not
    /// convert `f64` to `f32`).
    fn random(&mut self, shape: Shape) -> String {
        let seed = match self.rng.below(4) {
            0 if !self.ints.is_empty() => self.rng.pick(&self.ints),
            1 => format!("i64(abs({}) * 1000.0)", self.leaf(Scalar)),
            _ => self
                .rng
                .pick(&["0", "3", "42", "4294967301", "-7"])
                .to_string(),
        };
        let mut key = format!("random_key({seed})");
        let mut lets = String::new();
        if self.rng.chance(0.3) {
            let (a, b) = (self.name("k"), self.name("k"));
            lets.push_str(&format!("let ({a}, {b}) = split({key})\n  "));
            key = if self.rng.chance(0.5) { a } else { b };
        }
        let dims = match shape {
            Scalar => "2",
            VecN => "N",
            VecM => "M",
            Matrix => "N, M",
        };
        let mut pushed = 0;
        for _ in 0..self.rng.range(1, 3) {
            let (z, k) = (self.name("z"), self.name("k"));
            let dist = self.rng.pick(&["normal", "uniform"]);
            lets.push_str(&format!("let ({z}, {k}) = {dist}[{dims}]({key})\n  "));
            key = k;
            let z = if shape == Scalar {
                format!("{z}[0]")
            } else {
                z
            };
            let z = if self.float == "f32" {
                let i = format!("i64({z} * 1048576.0)");
                format!("({} * 0.00000095367431640625)", self.to_float(&i))
            } else {
                z
            };
            self.vars.push((z, shape));
            pushed += 1;
        }
        let z = self.vars[self.vars.len() - 1].0.clone();
        let e = self.expr(shape);
        self.vars.truncate(self.vars.len() - pushed);
        let body = match self.rng.below(3) {
            0 => format!("({e} + {z})"),
            1 => format!("({e} * {z})"),
            _ => format!("(if {z} < 0.3 {{ 0 }} else {{ {e} }})"),
        };
        format!("{{ {lets}{body} }}")
    }

    /// A condition for branches of `shape`: a scalar one, or one of that
    /// shape.
    fn cond(&mut self, shape: Shape) -> String {
        let s = if self.rng.chance(0.7) { Scalar } else { shape };
        let (a, b) = (self.expr(s), self.expr(Scalar));
        let c = format!("{a} {} {b}", self.rng.pick(COMPARE));
        match self.rng.below(6) {
            0 => format!("!({c})"),
            1 => format!("{c} && {} > 0", self.leaf(s)),
            2 => format!("{c} || {} < 1", self.leaf(s)),
            _ => c,
        }
    }

    fn scalar(&mut self) -> String {
        if let Some(e) = self.common(Scalar) {
            return e;
        }
        let v = if self.rng.chance(0.7) { VecN } else { VecM };
        match self.rng.below(15) {
            0 => format!("+/{}", self.expr(v)),
            1 => format!("max/{}", self.expr(v)),
            2 => format!("min/{}", self.expr(v)),
            3 => {
                let e = self.expr(v);
                format!("({e})[{}]", self.rng.pick(&["0", "0", "1", "2", "99"]))
            }
            4 => {
                let f = self.rng.pick(&["dot", "mean", "norm", "logsumexp"]);
                if f == "dot" {
                    let (a, b) = (self.expr(v), self.expr(v));
                    format!("dot({a}, {b})")
                } else {
                    format!("{f}({})", self.expr(v))
                }
            }
            5 => format!("+/flatten({})", self.expr(Matrix)),
            6 | 7 => {
                let all = self.rng.chance(0.4);
                let q = self.name("q");
                let e = self.name("e");
                let xs = self.expr(v);
                let init = self.expr(Scalar);
                self.vars.push((q.clone(), Scalar));
                self.vars.push((e.clone(), Scalar));
                let step = self.expr(Scalar);
                self.vars.truncate(self.vars.len() - 2);
                let f = if all { "+/scan_all" } else { "scan" };
                format!("{f}({xs}, {init}, ({q}, {e}) => {q} * 0.5 + tanh({step}))")
            }
            8 | 9 if !self.funcs.is_empty() => {
                let (f, params, prim) = self.funcs[self.rng.below(self.funcs.len())].clone();
                if prim && self.in_tab > 0 && !self.rng.chance(0.1) {
                    return self.leaf(Scalar);
                }
                self.called_prim |= prim;
                let args: Vec<String> = params
                    .iter()
                    .map(|s| match s {
                        Some(s) => self.expr(*s),
                        None => self.rng.pick(&["0", "1", "3"]).to_string(),
                    })
                    .collect();
                format!("{f}({})", args.join(", "))
            }
            10 => {
                let e = self.expr(v);
                self.to_float(&format!("argmax({e})"))
            }
            11 => {
                let k = self.leaf(Scalar);
                let i = format!("i64({k} * 3.0) % 4");
                self.to_float(&i)
            }
            12 => {
                let a = self.expr(Matrix);
                format!("({a})[{}, {}]", self.rng.below(2), self.rng.below(3))
            }
            13 => {
                let a = self.expr(v);
                let k = self.leaf(Scalar);
                format!("({a})[i64(abs({k}) * 7.0) % 3]")
            }
            _ => format!("+/concat({}, {})", self.expr(v), self.expr(VecN)),
        }
    }

    fn vector(&mut self, shape: Shape) -> String {
        if let Some(e) = self.common(shape) {
            return e;
        }
        let (len, other) = if shape == VecN {
            ("N", VecM)
        } else {
            ("M", VecN)
        };
        match self.rng.below(13) {
            0..=2 => {
                let i = self.name("i");
                let fi = self.to_float(&i);
                let mut pushed = vec![(fi, Scalar)];
                if let Some(v) = self.var(shape) {
                    pushed.push((format!("{v}[{i}]"), Scalar));
                }
                if shape == VecN {
                    if let Some(a) = self.var(Matrix) {
                        pushed.push((format!("{a}[{i}]"), VecM));
                        pushed.push((format!("{a}[{i}, 0]"), Scalar));
                    }
                }
                let n = pushed.len();
                self.vars.extend(pushed);
                self.in_tab += 1;
                let body = self.expr(Scalar);
                self.in_tab -= 1;
                self.vars.truncate(self.vars.len() - n);
                format!("tabulate[{len}]({i} => {body})")
            }
            3 => format!("reverse({})", self.expr(shape)),
            4 => {
                let f = self
                    .rng
                    .pick(&["softmax", "log_softmax", "sigmoid", "softplus"]);
                format!("{f}({})", self.expr(shape))
            }
            5 | 6 => {
                let a = self.expr(Matrix);
                let x = self.expr(other);
                if shape == VecN {
                    format!("matmul({a}, {x})")
                } else {
                    format!("matmul(transpose({a}), {x})")
                }
            }
            7 => {
                let q = self.name("q");
                let e = self.name("e");
                let init = self.expr(shape);
                let xs = if shape == VecM {
                    self.expr(Matrix)
                } else {
                    format!("transpose({})", self.expr(Matrix))
                };
                self.vars.push((q.clone(), shape));
                self.vars.push((e.clone(), shape));
                let step = self.expr(shape);
                self.vars.truncate(self.vars.len() - 2);
                format!("scan({xs}, {init}, ({q}, {e}) => {q} * 0.5 + tanh({step}))")
            }
            8 => {
                let x = self.expr(shape);
                let ix = self.leaf(shape);
                let rows = self.expr(shape);
                format!("scatter_add({x}, i64(abs({ix}) * 5.0) % 2, {rows})")
            }
            9 => {
                let a = self.expr(Matrix);
                if shape == VecM {
                    format!("({a})[{}]", self.rng.pick(&["0", "1", "5"]))
                } else {
                    format!("transpose({a})[{}]", self.rng.pick(&["0", "1", "5"]))
                }
            }
            10 => {
                let x = self.expr(shape);
                let k = self.leaf(Scalar);
                format!("({x})[i64(abs(tanh({k})) * 2.0)] + 0 * {x}")
            }
            _ => self.leaf(shape),
        }
    }

    fn matrix(&mut self) -> String {
        if let Some(e) = self.common(Matrix) {
            return e;
        }
        match self.rng.below(7) {
            0 => format!("transpose(transpose({}))", self.expr(Matrix)),
            1 => {
                let (a, b) = (self.expr(Matrix), self.expr(Matrix));
                format!("matmul({a}, matmul(transpose({b}), {a}))")
            }
            2 | 3 => {
                let (i, j) = (self.name("i"), self.name("j"));
                let a = self.var(Matrix);
                let mut pushed = vec![(self.to_float(&format!("{i} + 2 * {j}")), Scalar)];
                if let Some(a) = a {
                    pushed.push((format!("{a}[{i}, {j}]"), Scalar));
                    pushed.push((format!("{a}[{i}]"), VecM));
                }
                if let Some(x) = self.var(VecN) {
                    pushed.push((format!("{x}[{i}]"), Scalar));
                }
                let n = pushed.len();
                self.vars.extend(pushed);
                self.in_tab += 1;
                let body = self.expr(Scalar);
                self.in_tab -= 1;
                self.vars.truncate(self.vars.len() - n);
                format!("tabulate[N]({i} => tabulate[M]({j} => {body}))")
            }
            4 => {
                let (x, y) = (self.expr(VecN), self.expr(VecM));
                format!("outer({x}, {y})")
            }
            5 => format!("reverse({})", self.expr(Matrix)),
            _ => self.leaf(Matrix),
        }
    }

    /// One function; returns its name, text and (for a plain function of
    /// scalar result) its parameter shapes.
    fn function(&mut self, index: usize) -> (String, String, Vec<Option<Shape>>) {
        let name = format!("f{index}");
        self.float = if self.rng.chance(0.8) { "f64" } else { "f32" };
        let fl = self.float;
        let mut params: Vec<(String, Option<Shape>, String)> = Vec::new();
        for k in 0..self.rng.range(1, 5) {
            let (shape, ty) = match self.rng.below(10) {
                0..=2 => (Some(VecN), format!("{fl}[N]")),
                3 => (Some(VecM), format!("{fl}[M]")),
                4 | 5 => (Some(Matrix), format!("{fl}[N, M]")),
                6 => (None, "i64".to_string()),
                _ => (Some(Scalar), fl.to_string()),
            };
            let pname = match shape {
                Some(Matrix) => format!("A{k}"),
                None => format!("k{k}"),
                _ => format!("x{k}"),
            };
            params.push((pname, shape, ty));
        }
        // Both sizes appear in a parameter's type, so they can be inferred.
        let has = |s: Shape| params.iter().any(|p| p.1 == Some(s));
        if !(has(Matrix) || has(VecN) && has(VecM)) {
            params.push(("A9".into(), Some(Matrix), format!("{fl}[N, M]")));
        }
        let statik = self.rng.chance(0.1);
        self.statik = statik;
        self.ints = params
            .iter()
            .filter(|p| p.1.is_none())
            .map(|p| p.0.clone())
            .collect();
        self.vars = params
            .iter()
            .map(|(n, s, _)| match s {
                Some(s) => (n.clone(), *s),
                None => (self.to_float(n), Scalar),
            })
            .collect();
        if statik {
            let c = self.to_float("c");
            self.vars.push((c, Scalar));
        }
        let mut ptext: Vec<String> = params.iter().map(|(n, _, t)| format!("{n}: {t}")).collect();
        if statik {
            ptext.insert(0, "static c: i64".into());
        }
        let ret = [Scalar, Scalar, Scalar, VecN, Matrix][self.rng.below(5)];
        let rty = match ret {
            Scalar => fl.to_string(),
            VecN => format!("{fl}[N]"),
            VecM => format!("{fl}[M]"),
            Matrix => format!("{fl}[N, M]"),
        };
        let body = if self.rng.chance(0.5) {
            let mut lets = String::new();
            for _ in 0..self.rng.range(1, 4) {
                let s = self.rng.pick(&SHAPES);
                let e = self.expr(s);
                let n = self.name("v");
                lets.push_str(&format!("  let {n} = {e}\n"));
                self.vars.push((n, s));
            }
            format!(" {{\n{lets}  {}\n}}", self.expr(ret))
        } else {
            format!(" = {}", self.expr(ret))
        };
        let text = format!("fn {name}[N, M]({}) -> {rty}{body}\n", ptext.join(", "));
        let shapes = params.iter().map(|p| p.1).collect();
        (
            name,
            text,
            if ret == Scalar && !statik {
                shapes
            } else {
                Vec::new()
            },
        )
    }
}

/// A program of one to four functions, and derivative functions of some.
pub fn program(rng: &mut Rng) -> String {
    let mut g = Gen {
        rng,
        vars: Vec::new(),
        funcs: Vec::new(),
        in_tab: 0,
        called_prim: false,
        depth: 0,
        fresh: 0,
        float: "f64",
        ints: Vec::new(),
        statik: false,
    };
    let mut out = String::new();
    for k in 0..g.rng.range(1, 4) {
        // Now and then a function with its own derivative rules.
        g.called_prim = false;
        let (name, text, shapes) = if g.rng.chance(0.25) {
            g.primitive(k)
        } else {
            g.function(k)
        };
        let prim = g.called_prim || name.starts_with('p');
        out.push_str(&text);
        if !shapes.is_empty() {
            // `fn NAME[SIZES](PARAMS) -> ...`: the derivative function has
            // the same sizes and parameters.
            // (After the attributes of a function with rules.)
            let header = text
                .lines()
                .find(|l| l.starts_with(&format!("fn {name}")))
                .unwrap_or("")
                .split(" -> ")
                .next()
                .unwrap_or("");
            let (head, params) = header.split_once('(').unwrap_or((header, ""));
            let params = params.trim_end_matches(')');
            let sizes = head
                .split_once('[')
                .map_or(String::new(), |x| format!("[{}", x.1));
            let typed: Vec<(&str, &str)> = split_top(params)
                .into_iter()
                .filter_map(|p| p.split_once(": "))
                .collect();
            let args: Vec<&str> = typed.iter().map(|p| p.0).collect();
            let mut wrt: Vec<(&str, &str)> = typed
                .iter()
                .filter(|p| !p.1.starts_with("i64"))
                .take(g.rng.range(1, 3))
                .cloned()
                .collect();
            if wrt.is_empty() || g.rng.chance(0.05) {
                // On purpose: an integer, or a name that is not a parameter.
                wrt.push(("k0", "i64"));
            }
            let fl = if text.contains("f32") { "f32" } else { "f64" };
            let attr = g.rng.pick(&["@grad", "@grad", "@value_and_grad", "@jvp"]);
            let tys: Vec<&str> = wrt.iter().map(|w| w.1).collect();
            let tuple = |v: Vec<&str>| {
                if v.len() == 1 {
                    v[0].to_string()
                } else {
                    format!("({})", v.join(", "))
                }
            };
            let rty = match attr {
                "@value_and_grad" => tuple([vec![fl], tys.clone()].concat()),
                "@jvp" => fl.to_string(),
                _ => tuple(tys.clone()),
            };
            let extra: String = if attr == "@jvp" {
                wrt.iter().map(|(n, t)| format!(", d{n}: {t}")).collect()
            } else {
                String::new()
            };
            let names: Vec<&str> = wrt.iter().map(|w| w.0).collect();
            out.push_str(&format!(
                "\n{attr}({})\nfn d{name}{sizes}({params}{extra}) -> {rty} = {name}({})\n",
                names.join(", "),
                args.join(", ")
            ));
            g.funcs.push((name, shapes, prim));
        }
        out.push('\n');
    }
    out
}

/// `s` cut at the commas outside brackets.
fn split_top(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut from) = (Vec::new(), 0i32, 0);
    for (k, c) in s.char_indices() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[from..k].trim());
                from = k + 1;
            }
            _ => {}
        }
    }
    out.push(s[from..].trim());
    out
}

//! `egrad fdcheck`: a compiled gradient against central finite differences
//! of its function, run by the reference interpreter; for a `@jvp` function,
//! the compiled tangents against central differences along the tangent
//! arguments (forward mode).

use super::{inputs, load, options, primal_of, with_wrt, FdcheckArgs, Output};
use egrad::error::{Error, Result};
use egrad::interp;
use egrad::DType;
use egrad::Value;
use egrad::{optimize_gradient, optimize_ir, Function, JvpSpec, Program};
use serde_json::json;

/// The size that random inputs give a size parameter no `--dim` names:
/// small, since every element checked costs two runs of the function.
const FDCHECK_DIM: u64 = 5;

/// The finite-difference step, relative to max(1, |x|): about the cube root
/// of the element type's machine epsilon, where truncation and rounding
/// errors of a central difference balance.
fn step(d: DType) -> f64 {
    match d {
        DType::F32 => 5e-3,
        _ => 1e-6,
    }
}

/// The default tolerance on |gradient - difference| / max(1, |difference|).
fn default_tol(d: DType) -> f64 {
    match d {
        DType::F32 => 2e-2,
        _ => 1e-5,
    }
}

/// The precision `f`'s differences are taken in: that of `d` (a
/// parameter's or a result's), unless `f` computes in `f32` anywhere (an
/// `f64` parameter narrowed with `f32(...)`): then `f32`'s step and
/// tolerance, since its values move in `f32`'s steps.
fn working(f: &Function, d: DType) -> DType {
    if f.vars.iter().any(|v| v.ty.dtype == DType::F32) {
        DType::F32
    } else {
        d
    }
}

/// `count` element indices out of `len`, evenly spaced (all when `len <=
/// count`).
fn sample(len: usize, count: usize) -> Vec<usize> {
    if len <= count {
        return (0..len).collect();
    }
    let mut out: Vec<usize> = (0..count).map(|k| k * len / count).collect();
    out.dedup();
    out
}

/// Row-major index `k` of `shape` as coordinates.
fn coords(mut k: usize, shape: &[usize]) -> Vec<usize> {
    let mut c = vec![0; shape.len()];
    for (slot, &n) in c.iter_mut().zip(shape).rev() {
        if n > 0 {
            *slot = k % n;
            k /= n;
        }
    }
    c
}

/// `|got - diff| / max(1, |diff|)`: 0 when both are NaN, infinite when
/// only one is.
fn rel_error(got: f64, diff: f64) -> f64 {
    if got.is_nan() && diff.is_nan() {
        return 0.0;
    }
    let e = (got - diff).abs() / diff.abs().max(1.0);
    if e.is_nan() {
        f64::INFINITY
    } else {
        e
    }
}

/// One array's derivative, as computed, against central differences, at
/// the elements checked.
struct Compared<'s> {
    tol: f64,
    checked: usize,
    shape: &'s [usize],
    /// The worst element: (error, index, computed, difference).
    worst: Option<(f64, usize, f64, f64)>,
    ok: bool,
}

impl<'s> Compared<'s> {
    fn new(tol: f64, checked: usize, shape: &'s [usize]) -> Self {
        Compared {
            tol,
            checked,
            shape,
            worst: None,
            ok: true,
        }
    }

    /// Element `k`: `got` computed, `diff` the central difference.
    fn add(&mut self, k: usize, got: f64, diff: f64) {
        let err = rel_error(got, diff);
        self.ok &= err <= self.tol;
        if self.worst.is_none_or(|(e, ..)| err > e) {
            self.worst = Some((err, k, got, diff));
        }
    }

    /// The text report's line for `label`, the computed value called `what`.
    fn line(&self, label: &str, what: &str) -> String {
        let verdict = if self.ok { "ok" } else { "MISMATCH" };
        let elements: usize = self.shape.iter().product();
        match self.worst {
            Some((err, k, got, diff)) => format!(
                "{label}: {} of {elements} element(s), largest error {err:.1e} at {:?} ({what} {got}, finite difference {diff}): {verdict}\n",
                self.checked,
                coords(k, self.shape),
            ),
            None => format!("{label}: no elements: {verdict}\n"),
        }
    }

    /// The JSON entry (`docs/json.md`, fdcheck) named `name`.
    fn json(&self, name: &str) -> serde_json::Value {
        let w = self.worst;
        json!({
            "name": name,
            "checked": self.checked,
            "elements": self.shape.iter().product::<usize>(),
            "tolerance": self.tol,
            "max_error": w.map(|(e, ..)| inputs::json_number(e)),
            "worst_index": w.map(|(_, k, ..)| coords(k, self.shape)),
            "gradient": w.map(|(_, _, g, _)| inputs::json_number(g)),
            "finite_difference": w.map(|(.., d)| inputs::json_number(d)),
            "ok": self.ok,
        })
    }
}

pub fn fdcheck(a: &FdcheckArgs) -> Result<Output> {
    let program = load(&a.file, a.opt.no_prelude)?;
    if let Some(spec) = program.jvp_spec(&a.function) {
        return fdcheck_jvp(a, &program, spec);
    }
    let mut opts = with_wrt(
        &program,
        &a.function,
        &a.wrt,
        false,
        options(&a.opt)?.function(a.function.clone()),
    )?;
    let primal = primal_of(&program, &a.function)?;
    let mut dims = opts.dims.clone();
    for p in &primal.size_params {
        dims.entry(p.clone()).or_insert(FDCHECK_DIM);
    }
    let random = a.inputs.suite.is_none();
    let args = inputs::build_inputs(&primal, &a.inputs, random, &dims)?;
    let vals = inputs::values(&args)?;
    let refs: Vec<&Value> = vals.iter().collect();
    let sizes =
        interp::bind_args(&primal, &refs).map_err(|e| e.into_error(&primal, program.file()))?;
    for (k, n) in sizes {
        opts.dims.entry(k).or_insert(n);
    }
    let g = optimize_gradient(&program, &opts)?;
    let compiled = g.compile()?;
    let results = inputs::call_native(compiled.native(), &args)
        .map_err(|e| e.into_error(g.value_and_grad_ir(), program.file()))?;
    let value = results[0].as_scalar();
    let eval = |vals: &[Value]| -> Result<f64> {
        let refs: Vec<&Value> = vals.iter().collect();
        let out = interp::run(&primal, &refs).map_err(|e| e.into_error(&primal, program.file()))?;
        Ok(out[0].as_scalar())
    };
    // The arguments, one element moved at a time (and put back).
    let mut moved = vals.clone();
    let mut all_ok = true;
    let mut text = String::new();
    let mut params = Vec::new();
    let mut tol_used = Vec::new();
    for (w, grad) in g.wrt.iter().zip(&results[1..]) {
        let i = primal
            .params
            .iter()
            .position(|p| primal.var_name(p.var) == w.as_str())
            .ok_or_else(|| Error::internal(format!("fdcheck: no parameter `{w}`")))?;
        let dtype = vals[i].dtype;
        if dtype.is_int() {
            // An `i64` or a `bool` (`--wrt` may name one: its gradient is
            // zero) has no finite difference: moved, it is another count
            // or not a whole number at all. Only floats are perturbed.
            text.push_str(&format!(
                "{w}: {dtype}, not checked: only float parameters have finite differences\n"
            ));
            continue;
        }
        let prec = working(&primal, dtype);
        let tol = a.tol.unwrap_or_else(|| default_tol(prec));
        tol_used.push(tol);
        let picked = sample(vals[i].len(), a.max_elements);
        let mut c = Compared::new(tol, picked.len(), &vals[i].shape);
        for &k in &picked {
            let x = vals[i].data[k];
            let h = step(prec) * x.abs().max(1.0);
            let (up, down) = (dtype.round(x + h), dtype.round(x - h));
            moved[i].data[k] = up;
            let fu = eval(&moved)?;
            moved[i].data[k] = down;
            let fd = eval(&moved)?;
            moved[i].data[k] = x;
            c.add(k, grad.data[k], (fu - fd) / (up - down));
        }
        all_ok &= c.ok;
        text.push_str(&c.line(w, "gradient"));
        params.push(c.json(w));
    }
    text.push_str(&if all_ok {
        format!(
            "ok: the gradient of `{}` matches central differences at value {value}\n",
            primal.name
        )
    } else {
        format!(
            "mismatch: the gradient of `{}` differs from central differences beyond the tolerance (--tol)\n",
            primal.name
        )
    });
    let mut out = Output::new(
        text,
        json!({
            "command": "fdcheck",
            "mode": "reverse",
            "function": a.function,
            "value": inputs::json_number(value),
            "parameters": params,
            "ok": all_ok,
        }),
    );
    out.code = if all_ok { 0 } else { 1 };
    Ok(out)
}

/// `egrad fdcheck` of a `@jvp` function (forward mode): each result's
/// tangent, as the compiled function computes it, against the central
/// difference `(f(x + h·t) - f(x - h·t)) / 2h` of the function it pushes
/// forward, run by the interpreter, where `t` is the tangent arguments.
fn fdcheck_jvp(a: &FdcheckArgs, program: &Program, spec: &JvpSpec) -> Result<Output> {
    if !a.wrt.is_empty() {
        return Err(Error::Usage(format!(
            "`{}` is a @jvp function: its attribute says what to differentiate; drop --wrt",
            a.function
        )));
    }
    let jf = program.ir(&a.function)?.clone();
    let f = &spec.f;
    let mut opts = options(&a.opt)?.function(a.function.clone());
    let mut dims = opts.dims.clone();
    for p in &jf.size_params {
        dims.entry(p.clone()).or_insert(FDCHECK_DIM);
    }
    let random = a.inputs.suite.is_none();
    let args = inputs::build_inputs(&jf, &a.inputs, random, &dims)?;
    let vals = inputs::values(&args)?;
    let refs: Vec<&Value> = vals.iter().collect();
    let sizes = interp::bind_args(&jf, &refs).map_err(|e| e.into_error(&jf, program.file()))?;
    for (k, n) in sizes {
        opts.dims.entry(k).or_insert(n);
    }
    let opt = optimize_ir(&jf, &opts)?;
    let native = egrad::compile(&opt.after, &opts.backend)?;
    let tangents = inputs::call_native(&native, &args)
        .map_err(|e| e.into_error(&opt.after, program.file()))?;
    let eval = |vals: &[Value]| -> Result<Vec<Value>> {
        let refs: Vec<&Value> = vals.iter().collect();
        interp::run(f, &refs).map_err(|e| e.into_error(f, program.file()))
    };
    // One step for every differentiated parameter, relative to the largest
    // of their elements (the direction is the tangents as given).
    let dtype = spec
        .pairs
        .first()
        .map_or(DType::F64, |&(p, _)| working(f, vals[p].dtype));
    let scale = spec
        .pairs
        .iter()
        .flat_map(|&(p, _)| vals[p].data.iter())
        .fold(1.0f64, |m, x| m.max(x.abs()));
    let h = step(dtype) * scale;
    let along = |sign: f64| {
        let mut moved = vals.clone();
        for &(p, t) in &spec.pairs {
            let d = moved[p].dtype;
            for (x, dx) in moved[p].data.iter_mut().zip(&vals[t].data) {
                *x = d.round(*x + sign * h * dx);
            }
        }
        moved
    };
    let (up, down) = (eval(&along(1.0))?, eval(&along(-1.0))?);
    let value = eval(&vals)?
        .first()
        .and_then(|v| v.data.first().copied())
        .unwrap_or(f64::NAN);
    let mut all_ok = true;
    let mut text = String::new();
    let mut outputs = Vec::new();
    for (r, got) in tangents.iter().enumerate() {
        let (fu, fd) = match (up.get(r), down.get(r)) {
            (Some(u), Some(d)) => (u, d),
            _ => {
                return Err(Error::internal(format!(
                    "fdcheck: `{}` has {} results, its function {}",
                    a.function,
                    tangents.len(),
                    up.len()
                )))
            }
        };
        let tol = a.tol.unwrap_or_else(|| default_tol(working(f, got.dtype)));
        let picked = sample(got.len(), a.max_elements);
        let mut c = Compared::new(tol, picked.len(), &got.shape);
        for &k in &picked {
            c.add(k, got.data[k], (fu.data[k] - fd.data[k]) / (2.0 * h));
        }
        all_ok &= c.ok;
        let name = format!("result {r}");
        text.push_str(&c.line(&format!("tangent of {name}"), "tangent"));
        outputs.push(c.json(&name));
    }
    text.push_str(&if all_ok {
        format!(
            "ok: the tangents of `{}` match central differences along the tangent arguments\n",
            a.function
        )
    } else {
        format!(
            "mismatch: the tangents of `{}` differ from central differences beyond the tolerance (--tol)\n",
            a.function
        )
    });
    let mut out = Output::new(
        text,
        json!({
            "command": "fdcheck",
            "mode": "forward",
            "function": a.function,
            "value": inputs::json_number(value),
            "parameters": outputs,
            "ok": all_ok,
        }),
    );
    out.code = if all_ok { 0 } else { 1 };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_spread_and_coords_row_major() {
        assert_eq!(sample(3, 10), vec![0, 1, 2]);
        assert_eq!(sample(10, 4), vec![0, 2, 5, 7]);
        assert_eq!(coords(5, &[2, 3]), vec![1, 2]);
        assert_eq!(coords(0, &[]), Vec::<usize>::new());
    }
}

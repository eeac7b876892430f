//! `egrad fdcheck`: a compiled gradient against central finite differences
//! of its function, run by the reference interpreter.

use super::{inputs, load, options, primal_of, with_wrt, FdcheckArgs, Output};
use egrad::error::{Error, Result};
use egrad::interp;
use egrad::optimize_gradient;
use egrad::DType;
use egrad::Value;
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

pub fn fdcheck(a: &FdcheckArgs) -> Result<Output> {
    let program = load(&a.file, a.opt.no_prelude)?;
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
    let vals = inputs::values(&args);
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
        let tol = a.tol.unwrap_or_else(|| default_tol(dtype));
        tol_used.push(tol);
        let picked = sample(vals[i].len(), a.max_elements);
        // The worst element: (error, index, gradient, difference).
        let mut worst: Option<(f64, usize, f64, f64)> = None;
        let mut ok = true;
        for &k in &picked {
            let x = vals[i].data[k];
            let h = step(dtype) * x.abs().max(1.0);
            let (up, down) = (dtype.round(x + h), dtype.round(x - h));
            moved[i].data[k] = up;
            let fu = eval(&moved)?;
            moved[i].data[k] = down;
            let fd = eval(&moved)?;
            moved[i].data[k] = x;
            let diff = (fu - fd) / (up - down);
            let got = grad.data[k];
            let err = if got.is_nan() && diff.is_nan() {
                0.0
            } else {
                let e = (got - diff).abs() / diff.abs().max(1.0);
                if e.is_nan() {
                    f64::INFINITY
                } else {
                    e
                }
            };
            if err > tol {
                ok = false;
            }
            if worst.is_none_or(|(e, ..)| err > e) {
                worst = Some((err, k, got, diff));
            }
        }
        all_ok &= ok;
        let shape = &vals[i].shape;
        let verdict = if ok { "ok" } else { "MISMATCH" };
        match worst {
            Some((err, k, got, diff)) => text.push_str(&format!(
                "{w}: {} of {} element(s), largest error {err:.1e} at {:?} (gradient {got}, finite difference {diff}): {verdict}\n",
                picked.len(),
                vals[i].len(),
                coords(k, shape),
            )),
            None => text.push_str(&format!("{w}: no elements: {verdict}\n")),
        }
        params.push(json!({
            "name": w,
            "checked": picked.len(),
            "elements": vals[i].len(),
            "tolerance": tol,
            "max_error": worst.map(|(e, ..)| inputs::json_number(e)),
            "worst_index": worst.map(|(_, k, ..)| coords(k, shape)),
            "gradient": worst.map(|(_, _, g, _)| inputs::json_number(g)),
            "finite_difference": worst.map(|(.., d)| inputs::json_number(d)),
            "ok": ok,
        }));
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
            "function": a.function,
            "value": inputs::json_number(value),
            "parameters": params,
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

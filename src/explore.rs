//! The memory-versus-recompute tradeoff of one gradient (`egrad explore`).
//!
//! For each λ (flops per residual byte) the gradient is optimized under
//! `flops + λ · residual bytes`; each distinct program is compiled and timed
//! on the same inputs. A point is on the **Pareto front** when no other
//! point stores no more bytes and runs no slower, one of them strictly.
//! Without inputs, the model's flops stand in for the run time.

use crate::call::arg_error;
use crate::error::{Error, Result};
use crate::extract::ResidualChoice;
use crate::pipeline::{optimize_gradient, GradProgram, Options, Progress, ProgressEvent};
use crate::program::Program;
use crate::types::value::Value;
use std::fmt::{self, Write};
use std::time::{Duration, Instant};

/// The λ values explored when none are given.
/// The λ values `explore` tries when none are given.
pub const DEFAULT_LAMBDAS: &[f64] = &[0.0, 0.05, 0.25, 1.0, 4.0, 16.0, 1e6];

/// One λ and the program it chose.
#[derive(Clone, Debug)]
pub struct Point {
    /// λ, flops per stored residual byte.
    pub lambda: f64,
    /// Arithmetic of the chosen program under the model.
    pub flops: f64,
    /// Bytes the forward pass stores for the pullback.
    pub residual_bytes: f64,
    /// Residuals stored by the forward pass.
    pub stored: usize,
    /// Residuals the pullback recomputes.
    pub recomputed: usize,
    /// The residual plan: each primal value the pullback reads, stored or
    /// recomputed, with the model's figures behind the choice.
    pub choices: Vec<ResidualChoice>,
    /// Best measured time of one call (None when not timed).
    pub time: Option<Duration>,
    /// Bytes of intermediate arrays the compiled program allocates on the
    /// inputs (residuals kept alive and unfused values; None when not run).
    pub buffer_bytes: Option<usize>,
    /// The earlier point whose program is identical (then this one was not
    /// compiled again and shares its time).
    pub same_as: Option<usize>,
    /// Whether no other point is both faster (or cheaper) and smaller.
    pub pareto: bool,
    /// Value and gradients on the inputs (empty when not run).
    pub outputs: Vec<Value>,
}

/// What `explore` found: one point per λ.
#[derive(Clone, Debug)]
pub struct Exploration {
    /// The gradient explored.
    pub function: String,
    /// The sizes the model priced at.
    pub dims: Vec<(String, u64)>,
    /// One point per λ, in the order given.
    pub points: Vec<Point>,
    /// Saturation stop reasons that were limits, once each (for instance a
    /// program too large for the e-graph, compiled unoptimized).
    pub limits: Vec<String>,
}

/// How long to time each program: repeat calls until `budget` has passed
/// (at least `min_calls`), keep the fastest.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Keep calling until this much time has passed.
    pub budget: Duration,
    /// Call at least this many times.
    pub min_calls: usize,
}

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            budget: Duration::from_millis(300),
            min_calls: 3,
        }
    }
}

/// One program timed on given inputs.
#[derive(Clone, Debug)]
pub struct Timed {
    /// The fastest call.
    pub time: Duration,
    /// Its results on the inputs.
    pub outputs: Vec<Value>,
    /// Bytes of intermediate arrays its native code uses on these inputs.
    pub scratch_bytes: usize,
}

/// Compile each program's value-and-gradient code and time it on `inputs`:
/// the native code runs on buffers bound once (argument conversion and
/// allocation are not timed). The programs' samples alternate (a, b, c, a,
/// b, c, ...), so a machine that slows down or speeds up during the run
/// affects them alike and their ratios stay comparable.
/// Each sample is a batch of calls lasting about 100 µs, so the clock's
/// resolution does not matter for fast programs; the fastest sample counts.
/// `progress` is told as each program is compiled and while they are
/// timed (between samples, never inside one).
pub fn time_interleaved(
    gs: &[&GradProgram],
    inputs: &[Value],
    timing: Timing,
    progress: &Progress,
) -> Result<Vec<Timed>> {
    let count = gs.len();
    let compiled: Vec<_> = gs
        .iter()
        .enumerate()
        .map(|(i, g)| {
            progress.tell(|| ProgressEvent::Compiling {
                index: i + 1,
                count,
            });
            g.compile()
        })
        .collect::<Result<_>>()?;
    let refs: Vec<&Value> = inputs.iter().collect();
    let mut prepared = Vec::with_capacity(gs.len());
    for (g, c) in gs.iter().zip(&compiled) {
        let native = c.native();
        prepared.push(
            native
                .prepare(&refs)
                .map_err(|e| arg_error(native.function(), &g.file, e))?,
        );
    }
    let mut batches = Vec::with_capacity(gs.len());
    for (p, g) in prepared.iter_mut().zip(gs) {
        let file = &g.file;
        let mut batch: u32 = 1;
        loop {
            let t = Instant::now();
            for _ in 0..batch {
                p.run().map_err(|e| arg_error(p.function(), file, e))?;
            }
            if t.elapsed() >= Duration::from_micros(100) || batch >= 1 << 20 {
                break;
            }
            batch *= 4;
        }
        batches.push(batch);
    }
    let mut best = vec![Duration::MAX; gs.len()];
    let budget = timing.budget * gs.len() as u32;
    let timing_event = |elapsed, samples| ProgressEvent::Timing {
        programs: count,
        elapsed,
        budget: timing_total(elapsed, samples, timing.min_calls, budget),
    };
    progress.tell(|| timing_event(Duration::ZERO, 0));
    let start = Instant::now();
    let mut told = start;
    let mut samples = 0;
    while samples < timing.min_calls || start.elapsed() < budget {
        if progress.is_some() && told.elapsed() >= Duration::from_millis(100) {
            told = Instant::now();
            let elapsed = start.elapsed();
            progress.tell(|| timing_event(elapsed, samples));
        }
        for (((p, &batch), b), g) in prepared.iter_mut().zip(&batches).zip(&mut best).zip(gs) {
            let file = &g.file;
            let t = Instant::now();
            for _ in 0..batch {
                p.run().map_err(|e| arg_error(p.function(), file, e))?;
            }
            *b = (*b).min(t.elapsed() / batch);
        }
        samples += 1;
    }
    Ok(best
        .into_iter()
        .zip(prepared)
        .map(|(time, p)| Timed {
            time,
            scratch_bytes: p.scratch_bytes(),
            outputs: p.into_outputs(),
        })
        .collect())
}

/// About how long the timing loop runs in all, told `elapsed` into it after
/// `samples` samples: it stops at the end of the first sample that finds
/// at least `min_calls` samples done and `budget` passed, so the total is
/// the budget only while a sample is short; slow programs (or many
/// `min_calls`) run past it. Never less than `elapsed` nor `budget`, so
/// "elapsed of total" never runs past its own total.
pub(crate) fn timing_total(
    elapsed: Duration,
    samples: usize,
    min_calls: usize,
    budget: Duration,
) -> Duration {
    if samples == 0 {
        return budget.max(elapsed);
    }
    // In nanoseconds, exactly (a mean sample's length, rounded up).
    let per = elapsed.as_nanos().div_ceil(samples as u128).max(1);
    let for_budget = budget.saturating_sub(elapsed).as_nanos().div_ceil(per);
    let left = (min_calls.saturating_sub(samples) as u128).max(for_budget);
    let end =
        u64::try_from(elapsed.as_nanos() + per * left).map_or(Duration::MAX, Duration::from_nanos);
    end.max(elapsed).max(budget)
}

/// Optimize `options.function`'s gradient at every λ of `lambdas`; with
/// `inputs`, compile, run and time each distinct program.
pub fn explore(
    program: &Program,
    options: &Options,
    lambdas: &[f64],
    inputs: Option<&[Value]>,
    timing: Timing,
) -> Result<Exploration> {
    if lambdas.is_empty() {
        return Err(Error::Usage("explore: no λ values given".into()));
    }
    for &l in lambdas {
        crate::extract::cost::check_lambda(l).map_err(|e| Error::Usage(format!("explore: {e}")))?;
    }
    let mut points: Vec<Point> = Vec::new();
    let mut texts: Vec<String> = Vec::new();
    let mut distinct: Vec<(usize, GradProgram)> = Vec::new();
    let mut limits: Vec<String> = Vec::new();
    for (i, &lambda) in lambdas.iter().enumerate() {
        options.progress.tell(|| ProgressEvent::Optimizing {
            index: i + 1,
            count: lambdas.len(),
            lambda,
        });
        let g = optimize_gradient(program, &options.clone().lambda(lambda))?;
        let o = &g.optimized;
        if let Some(s) = o.saturation.as_ref().filter(|s| s.hit_limit) {
            if !limits.contains(&s.stop_reason) {
                limits.push(s.stop_reason.clone());
            }
        }
        let flops = crate::pipeline::program_cost(&o.after, &options.cost_model()).flops();
        let text = o.after.to_string();
        let same_as = texts.iter().position(|t| *t == text);
        texts.push(text);
        points.push(Point {
            lambda,
            flops,
            residual_bytes: o.bytes_after,
            stored: o.residual_choices.iter().filter(|c| c.stored).count(),
            recomputed: o.residual_choices.iter().filter(|c| !c.stored).count(),
            choices: o.residual_choices.clone(),
            time: None,
            buffer_bytes: None,
            same_as,
            pareto: false,
            outputs: Vec::new(),
        });
        if same_as.is_none() {
            distinct.push((points.len() - 1, g));
        }
    }
    if let Some(vals) = inputs {
        // Time every distinct program in one interleaved run.
        let gs: Vec<&GradProgram> = distinct.iter().map(|(_, g)| g).collect();
        let timed = time_interleaved(&gs, vals, timing, &options.progress)?;
        for ((k, _), t) in distinct.iter().zip(timed) {
            points[*k].time = Some(t.time);
            points[*k].buffer_bytes = Some(t.scratch_bytes);
            points[*k].outputs = t.outputs;
        }
        for k in 0..points.len() {
            if let Some(s) = points[k].same_as {
                points[k].time = points[s].time;
                points[k].buffer_bytes = points[s].buffer_bytes;
                points[k].outputs = points[s].outputs.clone();
            }
        }
    }
    mark_pareto(&mut points);
    // The first λ's program is always distinct.
    let first = &distinct[0].1;
    let (function, dims) = (first.name.clone(), first.sizes());
    Ok(Exploration {
        function,
        dims,
        points,
        limits,
    })
}

/// The run time a point is judged by: measured, else the model's flops.
fn speed_key(p: &Point) -> f64 {
    match p.time {
        Some(t) => t.as_secs_f64(),
        None => p.flops,
    }
}

/// Mark the points no other distinct point dominates (fewer or equal bytes
/// and time, one strictly). Repeats of an earlier program are not marked.
fn mark_pareto(points: &mut [Point]) {
    let n = points.len();
    for i in 0..n {
        if points[i].same_as.is_some() {
            continue;
        }
        let (bi, ti) = (points[i].residual_bytes, speed_key(&points[i]));
        let dominated = (0..n).any(|j| {
            let (bj, tj) = (points[j].residual_bytes, speed_key(&points[j]));
            j != i && points[j].same_as.is_none() && bj <= bi && tj <= ti && (bj < bi || tj < ti)
        });
        points[i].pareto = !dominated;
    }
}

fn time_text(t: Option<Duration>) -> String {
    match t {
        Some(t) if t < Duration::from_micros(10) => format!("{:.3}", t.as_secs_f64() * 1e6),
        Some(t) => format!("{:.1}", t.as_secs_f64() * 1e6),
        None => "-".into(),
    }
}

impl fmt::Display for Exploration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sizes: Vec<String> = self.dims.iter().map(|(k, v)| format!("{k}={v}")).collect();
        writeln!(
            f,
            "store or recompute for `{}`{}: cost = flops + λ · residual bytes",
            self.function,
            if sizes.is_empty() {
                String::new()
            } else {
                format!(" at {}", sizes.join(", "))
            }
        )?;
        writeln!(
            f,
            "{:>10} {:>14} {:>16} {:>7} {:>11} {:>14} {:>11}  pareto",
            "λ", "flops", "residual bytes", "stored", "recomputed", "buffer bytes", "time (µs)"
        )?;
        for p in &self.points {
            let mark = match p.same_as {
                Some(k) => format!("  (same program as λ = {})", self.points[k].lambda),
                None if p.pareto => "  *".into(),
                None => String::new(),
            };
            writeln!(
                f,
                "{:>10} {:>14} {:>16} {:>7} {:>11} {:>14} {:>11}{mark}",
                p.lambda,
                p.flops,
                p.residual_bytes,
                p.stored,
                p.recomputed,
                p.buffer_bytes
                    .map(|b| b.to_string())
                    .unwrap_or_else(|| "-".into()),
                time_text(p.time)
            )?;
        }
        let front = self.points.iter().filter(|p| p.pareto).count();
        let distinct = self.points.iter().filter(|p| p.same_as.is_none()).count();
        writeln!(
            f,
            "{distinct} distinct programs, {front} on the Pareto front (*: no other stores fewer bytes and runs faster)"
        )?;
        for l in &self.limits {
            writeln!(f, "e-graph stopped at a limit: {l}")?;
        }
        Ok(())
    }
}

fn json_num(x: f64) -> String {
    if x.is_finite() {
        format!("{x}")
    } else {
        "null".into()
    }
}

impl Exploration {
    /// The table as JSON (one object per λ).
    pub fn to_json(&self) -> String {
        let mut s = String::new();
        let _ = write!(s, "{{\"function\":\"{}\",\"dims\":{{", self.function);
        for (i, (k, v)) in self.dims.iter().enumerate() {
            let _ = write!(s, "{}\"{k}\":{v}", if i > 0 { "," } else { "" });
        }
        s.push_str("},\"points\":[");
        for (i, p) in self.points.iter().enumerate() {
            let _ = write!(
                s,
                "{}{{\"lambda\":{},\"flops\":{},\"residual_bytes\":{},\"stored\":{},\"recomputed\":{},\"time_us\":{},\"buffer_bytes\":{},\"same_as\":{},\"pareto\":{}}}",
                if i > 0 { "," } else { "" },
                json_num(p.lambda),
                json_num(p.flops),
                json_num(p.residual_bytes),
                p.stored,
                p.recomputed,
                p.time
                    .map(|t| json_num(t.as_secs_f64() * 1e6))
                    .unwrap_or_else(|| "null".into()),
                p.buffer_bytes
                    .map(|b| b.to_string())
                    .unwrap_or_else(|| "null".into()),
                p.same_as.map(|k| k.to_string()).unwrap_or_else(|| "null".into()),
                p.pareto
            );
        }
        s.push_str("],\"limits\":[");
        for (i, l) in self.limits.iter().enumerate() {
            let text = l.replace('\\', "\\\\").replace('"', "\\\"");
            let _ = write!(s, "{}\"{text}\"", if i > 0 { "," } else { "" });
        }
        s.push_str("]}\n");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(bytes: f64, flops: f64) -> Point {
        Point {
            lambda: 0.0,
            flops,
            residual_bytes: bytes,
            stored: 0,
            recomputed: 0,
            choices: Vec::new(),
            time: None,
            buffer_bytes: None,
            same_as: None,
            pareto: false,
            outputs: Vec::new(),
        }
    }

    #[test]
    fn pareto_front_keeps_undominated_points() {
        let mut ps = vec![
            point(100.0, 10.0),
            point(50.0, 20.0),
            point(60.0, 25.0), // dominated by (50, 20)
            point(0.0, 40.0),
        ];
        mark_pareto(&mut ps);
        let marks: Vec<bool> = ps.iter().map(|p| p.pareto).collect();
        assert_eq!(marks, [true, true, false, true]);
    }

    #[test]
    fn the_timing_total_is_never_passed() {
        let ms = Duration::from_millis;
        // Before a sample, and while samples are short: the budget.
        assert_eq!(timing_total(ms(0), 0, 3, ms(300)), ms(300));
        assert_eq!(timing_total(ms(100), 10, 3, ms(300)), ms(300));
        // Samples of 200 ms and 5 to take: 1 s, not the 300 ms budget.
        assert_eq!(timing_total(ms(200), 1, 5, ms(300)), ms(1000));
        // Past the budget with the last sample under way.
        assert_eq!(timing_total(ms(450), 3, 3, ms(300)), ms(450));
        for (e, s) in [(0, 0), (50, 1), (299, 7), (301, 2), (5000, 4)] {
            let t = timing_total(ms(e), s, 4, ms(300));
            assert!(t >= ms(e) && t >= ms(300), "{e} ms, {s} samples: {t:?}");
        }
    }

    #[test]
    fn explores_a_gradient_without_timing() {
        let p = Program::parse(
            "fn f[N](x: f64[N]) -> f64 = +/(sin(x) .* exp(x))\n\
             @grad(x)\nfn df[N](x: f64[N]) -> f64[N] = f(x)\n",
        )
        .unwrap();
        let e = explore(
            &p,
            &Options::default().function("df"),
            &[0.0, 1e6],
            None,
            Timing::default(),
        )
        .unwrap();
        assert_eq!(e.points.len(), 2);
        assert!(e.points[0].residual_bytes > 0.0);
        assert_eq!(e.points[1].residual_bytes, 0.0);
        assert!(e.points[1].flops > e.points[0].flops);
        assert!(e.points.iter().all(|p| p.pareto));
        assert!(e.points[0].choices.iter().any(|c| c.stored));
        assert!(e.points[1].choices.iter().all(|c| !c.stored));
        assert!(e.to_json().contains("\"pareto\":true"));
    }
}

//! `egrad gradbench`: egrad as a [GradBench](https://github.com/gradbench/gradbench)
//! tool.
//!
//! An eval sends one JSON message per line on stdin; the tool answers each
//! with one JSON line on stdout (`../shared/gradbench/README.md` describes
//! the protocol):
//!
//! - `start` → `{"id", "tool": "egrad"}`;
//! - `define` → success when egrad ships the module ([`modules`]); for a
//!   module the language cannot express yet, `success: false` with the
//!   missing feature named in `error`;
//! - `evaluate` → the module's function run on the input, through egrad's
//!   own pipeline (parse, AD, e-graph, Cranelift): `min_runs` and
//!   `min_seconds` are honored up to [`MAX_RUNS`] runs, with one `evaluate`
//!   timing per run (the
//!   native call only: no JSON, no argument conversion), a `prepare`
//!   timing (binding the arguments and allocating the outputs and
//!   scratch) and a `compile` timing when the call compiled;
//! - anything else (`analysis`, future kinds) → `{"id"}`.
//!
//! A malformed line gets an error response and the tool keeps serving; a
//! failed evaluate is `success: false` with the reason. Compiled code is
//! kept in a [`CompileCache`] keyed by the function's IR, its static
//! values and the options, never by array sizes: repeated evaluates of one
//! module, function and static values compile once.

pub mod modules;

use crate::cache::CompileCache;
use crate::call::arg_error;
use crate::pipeline::Options;
use crate::program::Program;
use crate::types::value::Value;
use modules::{Call, Module};
use serde_json::{json, Map, Value as Json};
use std::collections::HashMap;
use std::io::{self, BufRead, Write};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The tool's state across messages: parsed programs and compiled code.
#[derive(Default)]
pub struct Tool {
    cache: CompileCache,
    /// Parsed programs by source text (a module's file, plus the wrapper
    /// that fixes a call's static values).
    programs: HashMap<String, Rc<Program>>,
    options: Options,
}

/// One timing entry of a response.
fn timing(name: &str, d: Duration) -> Json {
    json!({ "name": name, "nanoseconds": u64::try_from(d.as_nanos()).unwrap_or(u64::MAX) })
}

fn error_response(id: Json, error: impl Into<String>) -> Json {
    json!({ "id": id, "success": false, "error": error.into() })
}

impl Tool {
    pub fn new() -> Tool {
        Tool::default()
    }

    /// Compiles so far (cache misses) and calls served from the cache.
    pub fn compiles(&self) -> (usize, usize) {
        (self.cache.misses(), self.cache.hits())
    }

    /// The response to one line of input. Never panics on bad input: an
    /// unreadable line or message gets an error response.
    pub fn respond(&mut self, line: &str) -> Json {
        let msg: Json = match serde_json::from_str(line) {
            Ok(m) => m,
            Err(e) => return error_response(Json::Null, format!("malformed message: {e}")),
        };
        let Some(obj) = msg.as_object() else {
            return error_response(Json::Null, "malformed message: not a JSON object");
        };
        let id = obj.get("id").cloned().unwrap_or(Json::Null);
        match obj.get("kind").and_then(Json::as_str) {
            Some("start") => json!({ "id": id, "tool": "egrad" }),
            Some("define") => self.define(id, obj),
            Some("evaluate") => {
                // A bug must not take the tool down with it: report it and
                // keep serving (the panic message also goes to stderr).
                let run =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.evaluate(obj)));
                match run {
                    Ok(Ok((output, timings))) => {
                        json!({ "id": id, "success": true, "output": output, "timings": timings })
                    }
                    Ok(Err(e)) => error_response(id, e),
                    Err(p) => {
                        let what = p
                            .downcast_ref::<&str>()
                            .map(|s| s.to_string())
                            .or_else(|| p.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "a panic".to_string());
                        error_response(
                            id,
                            format!("internal error in egrad (please report): {what}"),
                        )
                    }
                }
            }
            _ => json!({ "id": id }),
        }
    }

    fn define(&mut self, id: Json, obj: &Map<String, Json>) -> Json {
        let name = match obj.get("module").and_then(Json::as_str) {
            Some(n) => n,
            None => return error_response(id, "`define` needs a string `module`"),
        };
        let start = Instant::now();
        match self.module_program(name, None) {
            Ok(_) => {
                json!({ "id": id, "success": true, "timings": [timing("parse", start.elapsed())] })
            }
            Err(e) => error_response(id, e),
        }
    }

    /// The shipped module `name` and its program (with `wrapper` appended).
    fn module_program(
        &mut self,
        name: &str,
        wrapper: Option<&str>,
    ) -> Result<(&'static Module, Rc<Program>), String> {
        let module = modules::find(name)?;
        let source = module.source()?;
        let text = match wrapper {
            Some(w) => format!("{source}\n{w}\n"),
            None => source.to_string(),
        };
        if let Some(p) = self.programs.get(&text) {
            return Ok((module, p.clone()));
        }
        let file = format!("gradbench/{name}.eg");
        let program = Program::parse_named(&file, &text)
            .map_err(|e| format!("egrad could not compile its `{name}` program: {e}"))?;
        let program = Rc::new(program);
        self.programs.insert(text, program.clone());
        Ok((module, program))
    }

    fn evaluate(&mut self, obj: &Map<String, Json>) -> Result<(Json, Vec<Json>), String> {
        let module = obj
            .get("module")
            .and_then(Json::as_str)
            .ok_or("`evaluate` needs a string `module`")?;
        let function = obj
            .get("function")
            .and_then(Json::as_str)
            .ok_or("`evaluate` needs a string `function`")?;
        let input = obj.get("input").ok_or("`evaluate` needs an `input`")?;
        let (min_runs, min_seconds) = repetitions(input)?;
        let spec = modules::find(module)?.function(function)?;
        let Call {
            function: entry,
            wrapper,
            args,
        } = (spec.call)(input)?;
        let (_, program) = self.module_program(module, wrapper.as_deref())?;

        let mut timings = Vec::new();
        let misses = self.cache.misses();
        let start = Instant::now();
        let compiled = self
            .cache
            .function(&program, &entry, &self.options)
            .map_err(|e| format!("compiling `{entry}`: {e}"))?;
        if self.cache.misses() > misses {
            timings.push(timing("compile", start.elapsed()));
        }
        let refs: Vec<&Value> = args.iter().collect();
        // Binding the arguments and allocating the outputs and scratch (its
        // pages touched) is timed apart, as GradBench's own tools time
        // their preparation apart from `evaluate`.
        let start = Instant::now();
        let mut prepared = compiled
            .prepare(&refs)
            .map_err(|e| arg_error(compiled.function(), program.file(), e).to_string())?;
        timings.push(timing("prepare", start.elapsed()));
        let mut total = Duration::ZERO;
        let mut runs = 0;
        while runs < min_runs.max(1) || (total.as_secs_f64() < min_seconds && runs < MAX_RUNS) {
            let t = Instant::now();
            prepared
                .run()
                .map_err(|e| arg_error(compiled.function(), program.file(), e).to_string())?;
            let d = t.elapsed();
            total += d;
            runs += 1;
            timings.push(timing("evaluate", d));
        }
        let outputs = prepared.into_outputs();
        let output = (spec.output)(input, outputs)?;
        Ok((output, timings))
    }
}

/// The most runs one evaluate times: each is a timing in the response
/// (a few dozen bytes of it), so a `min_runs` or `min_seconds` without
/// bound would grow the response until memory ran out. `min_runs` above it
/// is refused; `min_seconds` stops there.
pub const MAX_RUNS: u64 = 1_000_000;

/// `min_runs` and `min_seconds` of an input (defaults 1 and 0).
fn repetitions(input: &Json) -> Result<(u64, f64), String> {
    let runs = match input.get("min_runs") {
        None | Some(Json::Null) => 1,
        Some(v) => v.as_u64().filter(|&r| r <= MAX_RUNS).ok_or(format!(
            "`min_runs` must be an integer from 0 to {MAX_RUNS}"
        ))?,
    };
    let seconds = match input.get("min_seconds") {
        None | Some(Json::Null) => 0.0,
        Some(v) => v
            .as_f64()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .ok_or("`min_seconds` must be a non-negative number")?,
    };
    Ok((runs, seconds))
}

/// Serve the protocol: one response line per non-empty input line, until
/// the input ends. Lines that are not UTF-8 are read lossily (and then
/// answered as malformed).
pub fn serve(mut input: impl BufRead, mut output: impl Write) -> io::Result<()> {
    let mut tool = Tool::new();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if input
            .read_until(b'\n', &mut buf)
            .map_err(|e| said("read standard input", e))?
            == 0
        {
            return Ok(());
        }
        let line = String::from_utf8_lossy(&buf);
        if line.trim().is_empty() {
            continue;
        }
        let response = tool.respond(&line);
        serde_json::to_writer(&mut output, &response)
            .map_err(io::Error::from)
            .and_then(|()| output.write_all(b"\n"))
            .and_then(|()| output.flush())
            .map_err(|e| said("write standard output", e))?;
    }
}

/// `e`, of the same kind, saying what failed, the streams named as the
/// protocol names them (it runs over a tool's standard input and output):
/// "cannot write standard output: No space left on device (os error 28)",
/// as every other command says it.
fn said(what: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("cannot {what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(tool: &mut Tool, msg: &str) -> Json {
        tool.respond(msg)
    }

    #[test]
    fn start_define_and_unknown_kinds() {
        let mut t = Tool::new();
        assert_eq!(
            ask(&mut t, r#"{"id": 0, "kind": "start", "eval": "lse"}"#),
            json!({"id": 0, "tool": "egrad"})
        );
        let r = ask(&mut t, r#"{"id": 1, "kind": "define", "module": "lse"}"#);
        assert_eq!(r["success"], json!(true), "{r}");
        assert_eq!(
            ask(
                &mut t,
                r#"{"id": 7, "kind": "analysis", "of": 2, "valid": true}"#
            ),
            json!({"id": 7})
        );
        let r = ask(&mut t, r#"{"id": 2, "kind": "define", "module": "nope"}"#);
        assert_eq!(r["success"], json!(false));
        assert!(r["error"].as_str().unwrap().contains("nope"), "{r}");
    }

    #[test]
    fn malformed_lines_get_errors_and_the_tool_keeps_serving() {
        let mut t = Tool::new();
        for bad in ["{", "[1, 2]", "42", r#"{"id": 3, "kind": "evaluate"}"#] {
            let r = ask(&mut t, bad);
            assert_eq!(r["success"], json!(false), "{bad}: {r}");
            assert!(r["error"].is_string(), "{bad}: {r}");
        }
        let r = ask(
            &mut t,
            r#"{"id": 4, "kind": "evaluate", "module": "lse", "function": "primal", "input": {"x": "no"}}"#,
        );
        assert_eq!(r["id"], json!(4));
        assert_eq!(r["success"], json!(false), "{r}");
        let r = ask(
            &mut t,
            r#"{"id": 5, "kind": "evaluate", "module": "lse", "function": "primal", "input": {"x": [0.0, 0.0]}}"#,
        );
        assert_eq!(r["success"], json!(true), "{r}");
        let y = r["output"].as_f64().unwrap();
        assert!((y - 2f64.ln()).abs() < 1e-15, "{y}");
    }

    #[test]
    fn repeats_until_min_runs_and_min_seconds_and_compiles_once() {
        let mut t = Tool::new();
        let msg = |runs: u64, secs: f64| {
            format!(
                r#"{{"id": 1, "kind": "evaluate", "module": "lse", "function": "gradient", "input": {{"x": [1.0, 2.0, 3.0], "min_runs": {runs}, "min_seconds": {secs}}}}}"#
            )
        };
        let r = ask(&mut t, &msg(5, 0.0));
        let timings = r["timings"].as_array().unwrap();
        let evals = timings.iter().filter(|t| t["name"] == "evaluate").count();
        assert_eq!(evals, 5, "{r}");
        assert_eq!(timings.iter().filter(|t| t["name"] == "compile").count(), 1);
        let r = ask(&mut t, &msg(1, 0.02));
        let timings = r["timings"].as_array().unwrap();
        let total: u64 = timings
            .iter()
            .map(|t| t["nanoseconds"].as_u64().unwrap())
            .sum();
        assert!(total >= 20_000_000, "{r}");
        assert!(
            timings.iter().all(|t| t["name"] != "compile"),
            "no recompile: {r}"
        );
        assert_eq!(timings.iter().filter(|t| t["name"] == "prepare").count(), 1);
        // Another size: the same compiled code.
        let r = ask(
            &mut t,
            r#"{"id": 2, "kind": "evaluate", "module": "lse", "function": "gradient", "input": {"x": [1.0, 2.0]}}"#,
        );
        assert_eq!(r["output"].as_array().unwrap().len(), 2);
        assert_eq!(t.compiles().0, 1);
    }

    #[test]
    fn extreme_sizes_and_run_counts_are_errors_not_aborts() {
        let mut t = Tool::new();
        let ask_input = |t: &mut Tool, module: &str, function: &str, input: &str| {
            let line = format!(
                r#"{{"id": 1, "kind": "evaluate", "module": "{module}", "function": "{function}", "input": {input}}}"#
            );
            ask(t, &line)
        };
        // A run count past `MAX_RUNS`: the timings grew without bound.
        let r = ask_input(
            &mut t,
            "lse",
            "primal",
            r#"{"x": [1.0], "min_runs": 18446744073709551615}"#,
        );
        assert_eq!(r["success"], json!(false), "{r}");
        assert!(r["error"].as_str().unwrap().contains("`min_runs`"), "{r}");
        // Sizes whose arrays egrad makes itself (were allocated, and
        // aborted): refused with the bytes they need.
        let cam = "[0,0,0,0,0,0,1,0,0,0,0]";
        let ba = format!(
            r#"{{"n": 1000000000000000, "m": 1, "p": 1, "cam": {cam}, "x": [0,0,1], "w": 1, "feat": [0,0]}}"#
        );
        let llsq = r#"{"x": [1.0], "n": 1000000000000000000}"#;
        for (module, function, input) in
            [("ba", "objective", ba.as_str()), ("llsq", "primal", llsq)]
        {
            let r = ask_input(&mut t, module, function, input);
            assert_eq!(r["success"], json!(false), "{module}: {r}");
            let e = r["error"].as_str().unwrap();
            assert!(
                e.contains("needs") && e.contains("memory limit"),
                "{module}: {e}"
            );
        }
        let r = ask_input(&mut t, "lse", "primal", r#"{"x": [1.0], "min_runs": 3}"#);
        assert_eq!(r["success"], json!(true), "{r}");
    }

    #[test]
    fn serve_answers_every_line_in_order() {
        let input = b"{\"id\": 0, \"kind\": \"start\"}\n\nnot json\n\xff\xfe\n{\"id\": 9, \"kind\": \"define\", \"module\": \"lse\"}\n";
        let mut out = Vec::new();
        serve(&input[..], &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<Json> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert_eq!(lines[0]["tool"], json!("egrad"));
        assert_eq!(lines[1]["success"], json!(false));
        assert_eq!(lines[2]["success"], json!(false));
        assert_eq!(lines[3]["id"], json!(9));
    }
}

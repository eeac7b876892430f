//! `egrad gradbench` against recorded GradBench sessions.
//!
//! The recordings under `tests/data/gradbench/` are copies (or the first
//! lines) of `../shared/gradbench/*.jsonl`: the messages a GradBench eval
//! sent and the reference tool's responses. Each test starts the real
//! binary, speaks the protocol over pipes as `replay.py` does (ids
//! renumbered, an `analysis` after every successful evaluate) and compares
//! every output with the reference: by GradBench's own rule
//! (`|a - e| / max(1, |a| + |e|) <= 1e-4`, same JSON structure), or, where
//! GradBench's check is weak (lse gradients, ode), by a strict relative
//! rule `|a - e| <= atol + rtol |e|`.

use serde_json::{json, Value as Json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

#[derive(Clone, Copy, Debug)]
enum Rule {
    GradBench,
    Strict { rtol: f64, atol: f64 },
}

/// Mismatches between `expected` and `actual` under `rule`, as paths.
fn compare(expected: &Json, actual: &Json, rule: Rule, path: &str, bad: &mut Vec<String>) {
    match (expected, actual) {
        (Json::Number(e), Json::Number(a)) => {
            let (e, a) = (e.as_f64().unwrap(), a.as_f64().unwrap());
            let d = (a - e).abs();
            let off = match rule {
                Rule::GradBench => d / 1f64.max(a.abs() + e.abs()) > 1e-4,
                Rule::Strict { rtol, atol } => d > atol + rtol * e.abs(),
            };
            if off || !a.is_finite() {
                bad.push(format!("{path}: expected {e:e}, got {a:e}"));
            }
        }
        (Json::Array(e), Json::Array(a)) => {
            if e.len() != a.len() {
                bad.push(format!("{path}: length {} vs {}", e.len(), a.len()));
                return;
            }
            for (i, (x, y)) in e.iter().zip(a).enumerate() {
                compare(x, y, rule, &format!("{path}[{i}]"), bad);
            }
        }
        (Json::Object(e), Json::Object(a)) => {
            for k in e.keys().chain(a.keys()) {
                match (e.get(k), a.get(k)) {
                    (Some(x), Some(y)) => compare(x, y, rule, &format!("{path}.{k}"), bad),
                    _ => bad.push(format!("{path}.{k}: only on one side")),
                }
            }
        }
        _ if expected == actual => {}
        _ => bad.push(format!("{path}: expected {expected}, got {actual}")),
    }
}

struct Tool {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Tool {
    fn start() -> Tool {
        let mut child = Command::new(env!("CARGO_BIN_EXE_egrad"))
            .arg("gradbench")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start egrad gradbench");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Tool {
            child,
            stdin,
            stdout,
        }
    }

    fn send_line(&mut self, line: &str) -> Json {
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
        let mut out = String::new();
        self.stdout.read_line(&mut out).unwrap();
        assert!(
            !out.is_empty(),
            "the tool closed its output after {line:.200}"
        );
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("invalid JSON from the tool: {e}: {out:.200}"))
    }

    fn ask(&mut self, msg: &Json) -> Json {
        self.send_line(&msg.to_string())
    }

    fn finish(mut self) {
        drop(self.stdin);
        let status = self.child.wait().unwrap();
        assert!(status.success(), "egrad gradbench exited with {status}");
    }
}

/// Replay a recording; returns (evaluates passed, their descriptions).
fn replay(file: &str, rule: Rule) -> usize {
    let path = format!("{}/tests/data/gradbench/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut tool = Tool::start();
    let mut next_id = 0;
    let mut passed = 0;
    let mut failures = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let entry: Json = serde_json::from_str(line).unwrap();
        let mut msg = entry["message"].clone();
        let reference = &entry["response"];
        msg["id"] = json!(next_id);
        next_id += 1;
        let r = tool.ask(&msg);
        assert_eq!(r["id"], msg["id"], "{file}: response id");
        match msg["kind"].as_str().unwrap() {
            "start" => assert_eq!(r["tool"], json!("egrad")),
            "define" => assert_eq!(r["success"], json!(true), "{file}: define: {r}"),
            "evaluate" => {
                let what = format!(
                    "{}::{} {}",
                    msg["module"].as_str().unwrap(),
                    msg["function"].as_str().unwrap(),
                    msg["description"].as_str().unwrap_or("")
                );
                if r["success"] != json!(true) {
                    failures.push(format!("{what}: {}", r["error"]));
                    continue;
                }
                let evals = r["timings"]
                    .as_array()
                    .map(|t| t.iter().filter(|t| t["name"] == "evaluate").count())
                    .unwrap_or(0);
                assert!(evals >= 1, "{what}: no evaluate timing: {r}");
                let mut bad = Vec::new();
                compare(&reference["output"], &r["output"], rule, "$", &mut bad);
                if bad.is_empty() {
                    passed += 1;
                } else {
                    failures.push(format!(
                        "{what}: {} mismatches, first {}",
                        bad.len(),
                        bad[0]
                    ));
                }
                let analysis = json!({"id": next_id, "kind": "analysis", "of": msg["id"], "valid": bad.is_empty()});
                next_id += 1;
                assert_eq!(tool.ask(&analysis), json!({"id": analysis["id"]}));
            }
            other => panic!("{file}: unexpected kind {other}"),
        }
    }
    tool.finish();
    assert!(
        failures.is_empty(),
        "{file}: {passed} passed, failed:\n{}",
        failures.join("\n")
    );
    eprintln!("{file}: {passed} passed, 0 failed");
    passed
}

const STRICT: Rule = Rule::Strict {
    rtol: 1e-9,
    atol: 1e-300,
};

#[test]
fn llsq_replays() {
    assert_eq!(replay("llsq.jsonl", Rule::GradBench), 22);
}

#[test]
fn lse_small_replays_strictly() {
    assert_eq!(replay("lse-small.jsonl", STRICT), 6);
}

#[test]
fn det_replays() {
    assert_eq!(replay("det.jsonl", Rule::GradBench), 14);
}

#[test]
fn kmeans_smallest_input_replays() {
    assert_eq!(replay("kmeans-small.jsonl", Rule::GradBench), 2);
}

/// The RK4 program's true derivative (the jax reference in float64), held
/// to a strict relative rule: GradBench's own ode check is weak.
#[test]
fn ode_small_rk4_replays_strictly() {
    assert_eq!(replay("ode-small-rk4.jsonl", STRICT), 30);
}

/// d = 2 and d = 10 (45 packed entries below the diagonal of each Q).
#[test]
fn gmm_small_inputs_replay() {
    assert_eq!(replay("gmm-small.jsonl", Rule::GradBench), 4);
}

/// Two layers, 1024 characters: a `scan` over the sequence.
#[test]
fn lstm_smallest_input_replays() {
    assert_eq!(replay("lstm-small.jsonl", Rule::GradBench), 2);
}

/// The hand model, simple (vertices) and complicated (points on
/// triangles, with the u columns of the Jacobian).
#[test]
fn ht_smallest_inputs_replay() {
    assert_eq!(replay("ht-simple-small.jsonl", Rule::GradBench), 2);
    assert_eq!(replay("ht-small.jsonl", Rule::GradBench), 2);
}

#[test]
fn ba_smallest_input_replays() {
    assert_eq!(replay("ba-small.jsonl", Rule::GradBench), 2);
}

/// The checks above can fail: a 1% error, a zeroed gradient or a wrong
/// shape is caught by the same comparison.
/// Nested derivatives through descents that stop on run-time tests: the
/// four mode pairs give the eval's constants within 1e-9.
#[test]
fn particle_and_saddle_replay_strictly() {
    assert_eq!(replay("particle.jsonl", STRICT), 4);
    assert_eq!(replay("saddle.jsonl", STRICT), 4);
}

#[test]
fn the_comparison_catches_wrong_outputs() {
    let reference = json!([0.5, -2.0, 1e-3]);
    let mut bad = Vec::new();
    compare(
        &reference,
        &json!([0.505, -2.02, 1.01e-3]),
        Rule::GradBench,
        "$",
        &mut bad,
    );
    assert_eq!(bad.len(), 2, "{bad:?}"); // the 1e-3 entry is under the absolute floor
    bad.clear();
    compare(
        &reference,
        &json!([0.5, -2.0, 1.00001e-3]),
        STRICT,
        "$",
        &mut bad,
    );
    assert_eq!(bad.len(), 1, "{bad:?}");
    bad.clear();
    compare(
        &reference,
        &json!([0.5, -2.0]),
        Rule::GradBench,
        "$",
        &mut bad,
    );
    assert_eq!(bad.len(), 1);
    bad.clear();
    compare(&json!(1.0), &json!([1.0]), Rule::GradBench, "$", &mut bad);
    assert_eq!(bad.len(), 1);
}

/// Bad input never kills the tool: each line gets an error response and
/// the next message is served.
#[test]
fn bad_messages_get_errors_and_the_tool_keeps_serving() {
    let mut tool = Tool::start();
    let r = tool.send_line("this is not json");
    assert_eq!(r["success"], json!(false), "{r}");
    let r = tool.ask(&json!({"id": 1, "kind": "define", "module": "no-such-eval"}));
    assert_eq!(r["success"], json!(false));
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("does not know the module"),
        "{r}"
    );
    let r = tool.ask(&json!({"id": 2, "kind": "evaluate", "module": "det", "function": "primal", "input": {"A": [1.0, 2.0, 3.0], "ell": 2}}));
    assert_eq!(r["success"], json!(false));
    assert!(r["error"].as_str().unwrap().contains("needs 4"), "{r}");
    let r = tool.ask(&json!({"id": 3, "kind": "evaluate", "module": "det", "function": "gradient", "input": {"A": [1.0, 2.0, 3.0, 4.0], "ell": 2, "min_runs": 3}}));
    assert_eq!(r["success"], json!(true), "{r}");
    assert_eq!(r["output"], json!([4.0, -3.0, -2.0, 1.0]));
    let r = tool.ask(&json!({"id": 4, "kind": "future-kind"}));
    assert_eq!(r, json!({"id": 4}));
    tool.finish();
}

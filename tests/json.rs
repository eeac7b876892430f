//! `--json` on every command that prints results: the output parses and
//! matches the schema that `docs/json.md` documents (read from that file,
//! so the documentation and the output cannot drift apart).

use serde_json::Value as Json;
use std::collections::BTreeMap;

mod common;
use common::egrad;

/// The schemas of docs/json.md by title.
fn schemas() -> BTreeMap<String, Json> {
    let doc = std::fs::read_to_string("docs/json.md").unwrap();
    let mut out = BTreeMap::new();
    let mut rest = doc.as_str();
    while let Some(i) = rest.find("```json-schema\n") {
        let body = &rest[i + "```json-schema\n".len()..];
        let end = body.find("```").expect("closed fence");
        let schema: Json = serde_json::from_str(&body[..end])
            .unwrap_or_else(|e| panic!("a schema in docs/json.md does not parse: {e}"));
        let title = schema["title"].as_str().expect("a title").to_string();
        out.insert(title, schema);
        rest = &body[end..];
    }
    out
}

/// Check `v` against `schema` (the subset of JSON Schema docs/json.md
/// uses); `root` holds the schema's own definitions, `shared` the
/// document's. Returns the first violation, with its path.
fn check(v: &Json, schema: &Json, root: &Json, shared: &Json, path: &str) -> Result<(), String> {
    if let Some(r) = schema.get("$ref").and_then(Json::as_str) {
        let name = r.strip_prefix("#/definitions/").expect("a local $ref");
        let target = root
            .get("definitions")
            .and_then(|d| d.get(name))
            .or_else(|| shared["definitions"].get(name))
            .unwrap_or_else(|| panic!("no definition `{name}`"));
        return check(v, target, root, shared, path);
    }
    if let Some(allowed) = schema.get("enum").and_then(Json::as_array) {
        if !allowed.contains(v) {
            return Err(format!("{path}: {v} is not one of {allowed:?}"));
        }
    }
    if let Some(t) = schema.get("type") {
        let types: Vec<&str> = match t {
            Json::String(s) => vec![s.as_str()],
            Json::Array(a) => a.iter().filter_map(Json::as_str).collect(),
            _ => panic!("bad type in schema at {path}"),
        };
        let is = |t: &str| match t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "number" => v.is_number(),
            "integer" => v.is_i64() || v.is_u64(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            _ => panic!("unknown type {t}"),
        };
        if !types.iter().any(|t| is(t)) {
            return Err(format!("{path}: {v} is not of type {types:?}"));
        }
    }
    if let Some(obj) = v.as_object() {
        let props = schema.get("properties").and_then(Json::as_object);
        if let Some(req) = schema.get("required").and_then(Json::as_array) {
            for k in req.iter().filter_map(Json::as_str) {
                if !obj.contains_key(k) {
                    return Err(format!("{path}: required key `{k}` is missing"));
                }
            }
        }
        for (k, x) in obj {
            let sub = format!("{path}.{k}");
            match (
                props.and_then(|p| p.get(k)),
                schema.get("additionalProperties"),
            ) {
                (Some(s), _) => check(x, s, root, shared, &sub)?,
                (None, Some(Json::Bool(false))) => {
                    return Err(format!("{path}: key `{k}` is not in the documented schema"))
                }
                (None, Some(s)) if s.is_object() => check(x, s, root, shared, &sub)?,
                (None, _) => {}
            }
        }
    }
    if let (Some(items), Some(a)) = (schema.get("items"), v.as_array()) {
        for (i, x) in a.iter().enumerate() {
            check(x, items, root, shared, &format!("{path}[{i}]"))?;
        }
    }
    Ok(())
}

/// Run `args` with `--json`, expecting `code`; the parsed output, checked
/// against the schema `title`.
fn json_of(title: &str, args: &[&str], code: i32) -> Json {
    let s = schemas();
    let mut all: Vec<&str> = args.to_vec();
    all.push("--json");
    let (got, out, err) = egrad(&all);
    assert_eq!(got, code, "{args:?}: {err}");
    let v: Json = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("{args:?}: output is not JSON ({e}):\n{out}"));
    let schema = s
        .get(title)
        .unwrap_or_else(|| panic!("no schema `{title}`"));
    check(&v, schema, schema, &s["definitions"], "$")
        .unwrap_or_else(|e| panic!("{args:?}: {e}\n{out}"));
    v
}

#[test]
fn the_document_has_a_schema_for_every_command_that_prints_results() {
    let s = schemas();
    for c in [
        "check",
        "run",
        "fdcheck",
        "grad",
        "explore",
        "bench",
        "build",
        "explain",
        "error",
        "definitions",
    ] {
        assert!(s.contains_key(c), "docs/json.md has no schema `{c}`");
    }
}

#[test]
fn the_validator_catches_what_the_schemas_forbid() {
    let s = schemas();
    let run = &s["run"];
    let shared = &s["definitions"];
    let good = serde_json::json!({
        "command": "run", "function": "f", "backend": "native", "written": [],
        "results": [{"name": "result", "dtype": "f64", "shape": [], "data": [1.0],
                     "summary": {"min": 1.0, "max": 1.0, "mean": 1.0, "not_finite": 0}}],
    });
    assert!(check(&good, run, run, shared, "$").is_ok());
    let mut extra = good.clone();
    extra["surprise"] = serde_json::json!(1);
    assert!(check(&extra, run, run, shared, "$").is_err());
    let mut missing = good.clone();
    missing.as_object_mut().unwrap().remove("backend");
    assert!(check(&missing, run, run, shared, "$").is_err());
    let mut wrong = good.clone();
    wrong["results"][0]["dtype"] = serde_json::json!("f16");
    assert!(check(&wrong, run, run, shared, "$").is_err());
    let mut not_int = good;
    not_int["results"][0]["shape"] = serde_json::json!([1.5]);
    assert!(check(&not_int, run, run, shared, "$").is_err());
}

#[test]
fn check_run_and_grad() {
    let v = json_of("check", &["check", "examples/loss.eg"], 0);
    assert_eq!(v["functions"], serde_json::json!(["loss", "dloss_dw"]));
    let loss = [
        "examples/loss.eg",
        "--fn",
        "dloss_dw",
        "--arg",
        "w=[1,2,3]",
        "--arg",
        "x=[4,5,6]",
        "--arg",
        "y=0.5",
    ];
    let mut run = vec!["run"];
    run.extend(loss);
    let v = json_of("run", &run, 0);
    assert_eq!(
        v["results"][0]["data"],
        serde_json::json!([252.0, 315.0, 378.0])
    );
    assert_eq!(v["results"][0]["shape"], serde_json::json!([3]));
    run.push("--interp");
    assert_eq!(json_of("run", &run, 0)["backend"], "interpreter");
    // Every dtype and a tuple.
    let v = json_of(
        "run",
        &[
            "run",
            "tests/data/npy/mixed.eg",
            "--fn",
            "parts",
            "--arg",
            "W=@tests/data/npy/W.npy",
            "--arg",
            "v=[1, 0, -1]",
            "--arg",
            "idx=[1]",
            "--arg",
            "mask=[true, true, false, false, true]",
            "--arg",
            "scale=1",
        ],
        0,
    );
    let names: Vec<&str> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["dtype"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["f64", "bool", "i64"]);
    assert_eq!(v["results"][2]["data"], serde_json::json!([3]));
    // The report only, then with the value and gradient and a dump.
    let v = json_of("grad", &["grad", "examples/loss.eg", "--fn", "dloss_dw"], 0);
    assert_eq!(v["wrt"], serde_json::json!(["w"]));
    assert!(v["report"]["egraph"]["nodes"].as_u64().unwrap() > 0);
    let mut grad = vec!["grad"];
    grad.extend(loss);
    grad.extend(["--dump", "extracted"]);
    let v = json_of("grad", &grad, 0);
    assert_eq!(v["results"][0]["name"], "value");
    assert_eq!(v["results"][1]["name"], "grad_w");
    assert_eq!(
        v["results"][1]["data"],
        serde_json::json!([252.0, 315.0, 378.0])
    );
    assert!(v["dumps"]["extracted"].as_str().unwrap().contains("fn "));
}

#[test]
fn fdcheck_explore_bench_build_and_explain() {
    let v = json_of(
        "fdcheck",
        &[
            "fdcheck",
            "examples/loss.eg",
            "--fn",
            "loss",
            "--wrt",
            "w",
            "--random",
        ],
        0,
    );
    assert_eq!(v["ok"], true);
    assert_eq!(v["parameters"][0]["name"], "w");
    assert_eq!(v["parameters"][0]["checked"], 5);
    // A tolerance no gradient meets: exit 1, ok false, same schema.
    let v = json_of(
        "fdcheck",
        &[
            "fdcheck",
            "examples/loss.eg",
            "--fn",
            "dloss_dw",
            "--random",
            "--tol",
            "0",
        ],
        1,
    );
    assert_eq!(v["ok"], false);
    let v = json_of(
        "explore",
        &[
            "explore",
            "examples/loss.eg",
            "--fn",
            "dloss_dw",
            "--lambdas",
            "0,1e6",
            "--time-ms",
            "5",
        ],
        0,
    );
    assert_eq!(v["points"].as_array().unwrap().len(), 2);
    let v = json_of(
        "explore",
        &[
            "explore",
            "examples/loss.eg",
            "--fn",
            "dloss_dw",
            "--no-run",
        ],
        0,
    );
    assert!(v["points"][0]["time_us"].is_null());
    let v = json_of(
        "bench",
        &[
            "bench",
            "examples/loss.eg",
            "--fn",
            "dloss_dw",
            "--time-ms",
            "5",
        ],
        0,
    );
    assert!(v["optimized"]["time_s"].as_f64().unwrap() > 0.0);
    let dir = std::env::temp_dir().join(format!("egrad-json-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let obj = dir.join("loss.o");
    let v = json_of(
        "build",
        &[
            "build",
            "examples/loss.eg",
            "--fn",
            "dloss_dw",
            "-o",
            obj.to_str().unwrap(),
        ],
        0,
    );
    assert_eq!(
        v["object_bytes"].as_u64().unwrap(),
        std::fs::metadata(&obj).unwrap().len()
    );
    assert!(v["symbols"].as_array().unwrap().len() >= 3);
    let v = json_of(
        "explain",
        &[
            "explain",
            "examples/loss.eg",
            "--fn",
            "dloss_dw",
            "--lambda-before",
            "1e6",
        ],
        0,
    );
    assert_eq!(v["gradient"], true);
    assert!(v["key"].as_object().unwrap().len() > 5);
    assert!(!v["changed_against_lambda_before"]
        .as_array()
        .unwrap()
        .is_empty());
}

#[test]
fn errors_are_json_too() {
    let dir = std::env::temp_dir().join(format!("egrad-json-err-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.eg");
    std::fs::write(&bad, "fn f(x: f64) -> f64 = x +\n").unwrap();
    let v = json_of("error", &["check", bad.to_str().unwrap()], 1);
    assert_eq!(v["command"], "check");
    assert_eq!(v["error"]["kind"], "syntax");
    assert!(v["error"]["location"].as_str().unwrap().contains("bad.eg:"));
    let v = json_of(
        "error",
        &["run", "examples/loss.eg", "--fn", "nope", "--random"],
        2,
    );
    assert_eq!(v["error"]["kind"], "usage");
    assert!(v["error"]["location"].is_null());
    let v = json_of(
        "error",
        &[
            "grad",
            "examples/loss.eg",
            "--fn",
            "dloss_dw",
            "--arg",
            "w=@tests/data/npy/int32.npy",
        ],
        1,
    );
    assert!(v["error"]["message"].as_str().unwrap().contains("int32"));
}

//! The JSON a command prints for an error with `--json` (docs/json.md).

use egrad::error::Error;
use serde_json::json;

/// `{"command", "error": {"kind", "exit_code", "message", "location"}}`:
/// the message is the text printed on stderr; the location is
/// `file:line:col` of the first diagnostic, when there is one.
pub fn error(command: &str, e: &Error) -> String {
    let j = json!({
        "command": command,
        "error": {
            "kind": e.kind().name(),
            "exit_code": e.exit_code(),
            "message": e.to_string(),
            "location": e.location(),
        },
    });
    serde_json::to_string_pretty(&j).expect("JSON values always serialize")
}

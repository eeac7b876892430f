//! Every `eg` code block of docs/language.md type-checks; every `eg-fail`
//! block is rejected with a diagnostic.

use egrad::Program;

#[test]
fn language_doc_examples() {
    let doc = std::fs::read_to_string("docs/language.md").unwrap();
    let mut blocks = Vec::new();
    let mut cur: Option<(String, String)> = None;
    for line in doc.lines() {
        match (&mut cur, line.strip_prefix("```")) {
            (None, Some(tag)) if tag.starts_with("eg") => {
                cur = Some((tag.to_string(), String::new()))
            }
            (Some(_), Some("")) => blocks.push(cur.take().unwrap()),
            (Some((_, body)), _) => {
                body.push_str(line);
                body.push('\n');
            }
            _ => {}
        }
    }
    assert!(blocks.len() >= 10, "found {} blocks", blocks.len());
    for (tag, body) in blocks {
        let r = Program::parse_named("docs/language.md", &body);
        match tag.as_str() {
            "eg" => assert!(
                r.is_ok(),
                "example should check:\n{body}\n{}",
                r.err().unwrap()
            ),
            "eg-fail" => {
                let e = r
                    .err()
                    .unwrap_or_else(|| panic!("example should fail:\n{body}"));
                assert!(e.to_string().contains('^'), "{e}");
            }
            other => panic!("unknown block tag {other}"),
        }
    }
}

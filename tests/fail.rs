//! The failure corpus: every `tests/fail/*.eg` must be rejected, and its
//! rendered diagnostic must equal `tests/fail/<name>.stderr`. Set
//! `UPDATE_GOLDEN=1` to rewrite the expectations (then read them).

use egrad::Program;

#[test]
fn failure_corpus() {
    let bless = std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1");
    let mut files: Vec<_> = std::fs::read_dir("tests/fail")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "eg"))
        .collect();
    files.sort();
    assert!(files.len() >= 12);
    let mut failures = Vec::new();
    for path in files {
        let name = format!("tests/fail/{}", path.file_name().unwrap().to_string_lossy());
        let src = std::fs::read_to_string(&path).unwrap();
        let got = match Program::parse_named(&name, &src) {
            Ok(_) => {
                failures.push(format!("{name}: accepted, but it is in the failure corpus"));
                continue;
            }
            Err(e) => e.to_string(),
        };
        assert!(
            got.contains(&format!("--> {name}:")) && got.contains('^'),
            "{name}: {got}"
        );
        let expect = path.with_extension("stderr");
        if bless {
            std::fs::write(&expect, &got).unwrap();
            continue;
        }
        match std::fs::read_to_string(&expect) {
            Ok(want) if want == got => {}
            Ok(want) => failures.push(format!("{name}:\n--- want\n{want}--- got\n{got}")),
            Err(_) => failures.push(format!("{} is missing (UPDATE_GOLDEN=1)", expect.display())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

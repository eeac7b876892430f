//! docs/quickstart.md, run verbatim, as the page promises: its `sh` and
//! `console` blocks in order in one empty folder, with this build's
//! `egrad` first on PATH, each `console` command's output checked against
//! the lines shown. Its `sh setup` blocks are the steps that gave this
//! test its `egrad` (the build) and CI its Python package (`pip install
//! ./python`): checked to be only those, not run. Its Python blocks run in
//! `python/tests/test_docs.py`, its Rust block as a doc test, its `eg`
//! blocks in `tests/docs.rs`. The commands need `python3` with NumPy
//! (`.ci/run` puts its virtual environment first on PATH).

#[path = "common/doc_blocks.rs"]
mod doc_blocks;

use doc_blocks::Shell;

#[test]
fn quickstart_commands_run_verbatim() {
    let shell = Shell::new("quickstart");
    shell.need_numpy();
    let ran = shell.run_doc("docs/quickstart.md");
    assert!(ran >= 5, "ran {ran} blocks");
    for written in ["mse.eg", "data.npz", "grads.npz", "mse.svg", "mse.html"] {
        assert!(
            shell.dir.join(written).exists(),
            "the quick start wrote no {written}"
        );
    }
}

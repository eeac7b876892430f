//! `egrad build`: an object file and a C header of a function (the
//! library's `egrad::build`), and the runtime library copied beside an
//! object that calls it.

use super::*;

pub(super) fn build(a: &BuildArgs) -> Result<Output> {
    let program = load(&a.file, a.opt.no_prelude)?;
    let opts = with_wrt(&program, &a.function, &a.wrt, a.grad, options(&a.opt)?)?;
    let header = match &a.header {
        Some(h) => h.clone(),
        None => a.output.with_extension("h"),
    };
    if header == a.output {
        return Err(Error::Usage(format!(
            "the header and the object would both be written to {}: give --header",
            header.display()
        )));
    }
    let built = egrad::build(
        &program,
        &egrad::BuildOptions {
            function: a.function.clone(),
            gradient: a.grad || !a.wrt.is_empty(),
            options: opts,
            source: a.file.display().to_string(),
            runtime: a.runtime,
        },
    )?;
    // The runtime library, found before anything is written.
    let runtime = match built.runtime_calls.is_empty() {
        true => None,
        false => Some((runtime_library()?, a.output.with_file_name(RUNTIME_LIBRARY))),
    };
    std::fs::write(&a.output, &built.object)
        .map_err(|e| Error::io("write", a.output.display(), e))?;
    std::fs::write(&header, &built.header).map_err(|e| Error::io("write", header.display(), e))?;
    let mut also = String::new();
    if let Some((from, to)) = &runtime {
        // (Never onto itself: a copy truncates its destination first.)
        let same = std::fs::canonicalize(from).ok() == std::fs::canonicalize(to).ok();
        if !same {
            std::fs::copy(from, to).map_err(|e| Error::io("write", to.display(), e))?;
        }
        also = format!(
            "; the object calls egrad's runtime library ({}): wrote {}, link it after the object (cc main.c {} {} -lm -lpthread -ldl)",
            built.runtime_calls.join(", "),
            to.display(),
            a.output.display(),
            to.display()
        );
    }
    Ok(Output::new(
        format!(
            "wrote {} ({} bytes; {}) and {}{also}\n",
            a.output.display(),
            built.object.len(),
            built.symbols.join(", "),
            header.display()
        ),
        json!({
            "command": "build",
            "function": a.function,
            "object": a.output.display().to_string(),
            "object_bytes": built.object.len(),
            "header": header.display().to_string(),
            "symbols": built.symbols,
            "runtime_library": runtime.as_ref().map(|(_, to)| to.display().to_string()),
            "runtime_calls": built.runtime_calls,
        }),
    ))
}

/// The runtime library's file name (the `egrad_runtime` example, a static
/// library).
const RUNTIME_LIBRARY: &str = "libegrad_runtime.a";

/// Where this egrad's runtime library is: `EGRAD_RUNTIME_LIB`, else beside
/// the executable or in its `examples/` folder (where `cargo build
/// --release --example egrad_runtime` puts it, beside `target/release/egrad`).
fn runtime_library() -> Result<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("EGRAD_RUNTIME_LIB") {
        let p = std::path::PathBuf::from(p);
        return match p.is_file() {
            true => Ok(p),
            false => Err(Error::Usage(format!(
                "EGRAD_RUNTIME_LIB names {}, which is not a file",
                p.display()
            ))),
        };
    }
    let exe = std::env::current_exe().map_err(|e| Error::io("find", "egrad's executable", e))?;
    let dir = exe.parent().unwrap_or(std::path::Path::new("."));
    [dir.join(RUNTIME_LIBRARY), dir.join("examples").join(RUNTIME_LIBRARY)]
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| {
            Error::Usage(format!(
                "the object calls egrad's runtime library, and {RUNTIME_LIBRARY} is neither beside {} nor in its examples/ folder: build it with `cargo build --release --example egrad_runtime`, or name it with EGRAD_RUNTIME_LIB",
                exe.display()
            ))
        })
}

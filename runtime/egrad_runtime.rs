//! egrad's runtime library, built as a static library
//! (`libegrad_runtime.a`): a C program links it beside an `egrad build`
//! object that calls the matrix product, the builtin linear-algebra kernels,
//! the whole-array math kernels or egrad's own math functions. The exports
//! themselves are the egrad library's `runtime` module (its `runtime`
//! feature); this crate only links them, and with them the code they call
//! (faer's factorizations among it), into one archive.
//!
//! Link it after the object, with the system libraries Rust's standard
//! library needs: `cc main.c model.o libegrad_runtime.a -lm -lpthread -ldl`.

extern crate egrad;

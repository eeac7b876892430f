//! The `egrad` binary: the command line over the library.

mod cli;

use clap::Parser;

/// mimalloc: see `Cargo.toml`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let code = match cli::Cli::try_parse() {
        Ok(cli) => cli::main_with(cli),
        Err(e) => cli::parse_error(&e),
    };
    std::process::exit(code);
}

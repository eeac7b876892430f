//! The `egrad` binary: the command line over the library.

mod cli;

use clap::Parser;

fn main() {
    let cli = cli::Cli::parse();
    std::process::exit(cli::main_with(cli));
}

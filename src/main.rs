use clap::Parser;

fn main() {
    let cli = egrad::cli::Cli::parse();
    std::process::exit(egrad::cli::main_with(cli));
}

use clap::Parser;

fn main() {
    let _cli = cptriage::cli::Cli::parse();
}

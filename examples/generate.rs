//! Write distlock's shell completions and man pages from its command-line definition:
//!
//! ```text
//! cargo run --example generate -- [completions|man] [--out DIR]
//! ```
//!
//! into `DIR/completions` and `DIR/man` (DIR: the current directory). For packagers, and after a
//! change to the command line (the committed copies are tested against this). Not part of the
//! shipped binary: see `src/commands/generate.rs`.

use std::path::PathBuf;
use std::process::ExitCode;

use distlock::cli::Generated;
use distlock::commands::generate::write_all;

fn main() -> ExitCode {
    let mut what = None;
    let mut out = PathBuf::from(".");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "completions" => what = Some(Generated::Completions),
            "man" => what = Some(Generated::Man),
            "--out" => match args.next() {
                Some(dir) => out = PathBuf::from(dir),
                None => return usage("--out needs a directory"),
            },
            other => return usage(&format!("unexpected argument '{other}'")),
        }
    }
    match write_all(what, &out) {
        Ok(written) => {
            for path in written {
                eprintln!("generate: wrote {}", path.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("generate: cannot write into {}: {e}", out.display());
            ExitCode::FAILURE
        }
    }
}

fn usage(problem: &str) -> ExitCode {
    eprintln!(
        "generate: {problem}; usage: cargo run --example generate -- [completions|man] [--out DIR]"
    );
    ExitCode::from(64)
}

//! The `cptriage` binary: parse arguments, run, print errors once, exit with
//! the documented code. A closed stdout pipe (`cptriage … | head`) is success.

use std::io::{self, Write};

fn main() {
    let cli = match cptriage::cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let mut err = io::stderr();
    let result = cptriage::run(cli, &mut out, &mut err);
    let flushed = out.flush();
    let code = match result {
        Ok(code) => code.code(),
        Err(cptriage::error::CliError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            // Last line of defence: no key or token-looking text in the message.
            let _ = writeln!(
                err,
                "cptriage: error: {}",
                cptriage::secret::scrub(&e.to_string())
            );
            e.exit_code().code()
        }
    };
    match flushed {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe && code == 0 => {
            let _ = writeln!(err, "cptriage: error: cannot write output: {e}");
            std::process::exit(3);
        }
        _ => std::process::exit(code),
    }
}

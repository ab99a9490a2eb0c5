//! The shell completions in `completions/` and the man page in `man/` are
//! generated from the clap definition. This test fails when they are stale;
//! `CPTRIAGE_BLESS=1 cargo test --test completions` rewrites them.

use std::path::Path;

use clap_complete::Shell;

fn check(path: &Path, fresh: &[u8], stale: &mut Vec<String>) {
    if std::env::var_os("CPTRIAGE_BLESS").is_some() {
        std::fs::write(path, fresh).expect("write generated file");
        return;
    }
    match std::fs::read(path) {
        Ok(old) if old == fresh => {}
        _ => stale.push(path.display().to_string()),
    }
}

#[test]
fn completions_and_man_page_are_up_to_date() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut stale = Vec::new();
    for (shell, file) in [
        (Shell::Bash, "cptriage.bash"),
        (Shell::Zsh, "_cptriage"),
        (Shell::Fish, "cptriage.fish"),
        (Shell::PowerShell, "_cptriage.ps1"),
        (Shell::Elvish, "cptriage.elv"),
    ] {
        let mut buf = Vec::new();
        clap_complete::generate(shell, &mut cptriage::cli::command(), "cptriage", &mut buf);
        assert!(buf.len() > 200, "{shell} completion is suspiciously short");
        check(&root.join("completions").join(file), &buf, &mut stale);
    }
    let mut man = Vec::new();
    clap_mangen::Man::new(cptriage::cli::command())
        .render(&mut man)
        .expect("render man page");
    check(&root.join("man/cptriage.1"), &man, &mut stale);
    assert!(
        stale.is_empty(),
        "generated files are stale: {stale:?}\nregenerate with: CPTRIAGE_BLESS=1 cargo test --test completions"
    );
}

#[test]
fn completions_know_every_subcommand() {
    let mut buf = Vec::new();
    clap_complete::generate(Shell::Bash, &mut cptriage::cli::command(), "cptriage", &mut buf);
    let text = String::from_utf8_lossy(&buf);
    for sub in cptriage::cli::command().get_subcommands() {
        assert!(
            text.contains(sub.get_name()),
            "bash completion lacks `{}`",
            sub.get_name()
        );
    }
}

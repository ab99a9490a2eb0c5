//! The shell completions in `completions/` and the man page in `man/` are
//! generated from the clap definition. This test fails when they are stale;
//! `CPTRIAGE_BLESS=1 cargo test --test it completions::` rewrites them.

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
    // One man page per command and subcommand, as `clap_mangen::generate_to`
    // writes them: the top page's SEE ALSO names `cptriage-diagnose(1)` & co.
    let mut cmd = cptriage::cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut pages = Vec::new();
    man_pages(&cmd, &mut pages);
    let mut names = Vec::new();
    for (name, page) in &pages {
        check(&root.join("man").join(name), page, &mut stale);
        names.push(name.clone());
    }
    assert!(names.contains(&"cptriage-diagnose.1".to_string()), "{names:?}");
    assert!(
        names.contains(&"cptriage-rules-export.1".to_string()),
        "{names:?}"
    );
    // No page of a command that no longer exists.
    for entry in std::fs::read_dir(root.join("man")).expect("man/") {
        let name = entry
            .expect("man/ entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if !names.contains(&name) {
            if std::env::var_os("CPTRIAGE_BLESS").is_some() {
                std::fs::remove_file(root.join("man").join(&name)).expect("remove stale page");
            } else {
                stale.push(format!("man/{name} (no such command)"));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "generated files are stale: {stale:?}\nregenerate with: CPTRIAGE_BLESS=1 cargo test --test it completions::"
    );
}

fn man_pages(cmd: &clap::Command, out: &mut Vec<(String, Vec<u8>)>) {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        man_pages(sub, out);
    }
    let man = clap_mangen::Man::new(cmd.clone());
    let mut buf = Vec::new();
    man.render(&mut buf).expect("render man page");
    out.push((man.get_filename(), buf));
}

#[test]
fn every_help_has_examples() {
    let mut cmd = cptriage::cli::command();
    cmd.build();
    let mut missing = Vec::new();
    fn walk(cmd: &mut clap::Command, path: String, missing: &mut Vec<String>) {
        let help = cmd.render_long_help().to_string();
        if !help.contains("Examples:") {
            missing.push(path.clone());
        }
        let names: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_string()).collect();
        for n in names {
            if n == "help" {
                continue;
            }
            let sub = cmd.find_subcommand_mut(&n).expect("subcommand");
            walk(sub, format!("{path} {n}"), missing);
        }
    }
    walk(&mut cmd, "cptriage".into(), &mut missing);
    assert!(missing.is_empty(), "--help without examples: {missing:?}");
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

//! The stages of cptriage follow the data flow, and each imports only the
//! stages below it:
//!
//! foundations (timefmt, limits, secret, exit) < store < eval < source <
//! rules < report < cmd/cli/error (and the lab-side scenario, fuzzing, bins).
//!
//! This test reads every `crate::<module>` path of each stage's files and fails
//! when one names a later stage. `KNOWN` lists the back edges not yet removed
//! (docs/architecture.md says how they go away); it may only shrink: an entry
//! that no longer occurs fails too, so the list stays true.

use std::collections::BTreeSet;
use std::path::Path;

/// Stage rank of a top-level module of the crate.
fn rank(module: &str) -> Option<usize> {
    Some(match module {
        "timefmt" | "limits" | "secret" | "exit" => 0,
        "store" => 1,
        "eval" => 2,
        "source" => 3,
        "rules" => 4,
        "report" => 5,
        "cmd" | "cli" | "error" | "scenario" | "fuzzing" | "lib" | "main" | "bin" => 6,
        _ => return None,
    })
}

/// Back edges still present: (file, imported module).
const KNOWN: &[(&str, &str)] = &[];

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn each_stage_imports_only_the_stages_below_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    files(&root.join("src"), &mut all);
    assert!(all.len() > 50, "found only {} source files", all.len());
    let mut found: BTreeSet<(String, String)> = BTreeSet::new();
    let mut unknown_modules = Vec::new();
    for path in &all {
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let stage = rel
            .trim_start_matches("src/")
            .split(['/', '.'])
            .next()
            .unwrap()
            .to_string();
        let Some(own) = rank(&stage) else {
            unknown_modules.push(rel.clone());
            continue;
        };
        let text = std::fs::read_to_string(path).unwrap();
        // Test modules may reach anywhere.
        let text = text.split("#[cfg(test)]").next().unwrap();
        for (i, _) in text.match_indices("crate::") {
            let rest = &text[i + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let Some(r) = rank(&name) else { continue };
            if r > own {
                found.insert((rel.clone(), name));
            }
        }
    }
    assert!(
        unknown_modules.is_empty(),
        "files of no stage: {unknown_modules:?}"
    );
    let known: BTreeSet<(String, String)> = KNOWN
        .iter()
        .map(|(f, m)| (f.to_string(), m.to_string()))
        .collect();
    let new: Vec<_> = found.difference(&known).collect();
    assert!(new.is_empty(), "a stage imports a later stage: {new:?}");
    let gone: Vec<_> = known.difference(&found).collect();
    assert!(
        gone.is_empty(),
        "back edges listed in KNOWN no longer occur, remove them: {gone:?}"
    );
}

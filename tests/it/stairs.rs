//! The stages of cptriage follow the data flow, and each imports only the
//! stages below it, in the order of `src/lib.rs`'s map:
//!
//! foundations (timefmt, limits, secret, exit) < store < eval < source <
//! rules < report < cli < error < plan < pipeline < cmd (and lib, main, the
//! lab-side scenario, fuzzing, bins).
//!
//! This test reads every `crate::<module>` path of each stage's files and fails
//! when one names a later stage. `KNOWN` lists the back edges not yet removed
//! (docs/architecture.md says how they go away); it may only shrink: an entry
//! that no longer occurs fails too, so the list stays true. A second test
//! fails when the handlers of `cmd/` import each other in a cycle: what they
//! share lives in the pipeline (or in `cmd/mod.rs`).

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
        "cli" => 6,
        "error" => 7,
        "plan" => 8,
        "pipeline" => 9,
        "cmd" | "scenario" | "fuzzing" | "lib" | "main" | "bin" => 10,
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

/// The handlers of `src/cmd/` (one file each, `mod.rs` aside) that a
/// handler's text names: `crate::cmd::X`, `super::X`, and the names inside
/// `crate::cmd::{…}` / `super::{…}` lists.
fn handler_imports(text: &str, handlers: &BTreeSet<String>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for prefix in ["crate::cmd::", "super::"] {
        for (i, _) in text.match_indices(prefix) {
            let rest = &text[i + prefix.len()..];
            let names: Vec<String> = if let Some(list) = rest.strip_prefix('{') {
                list.split('}')
                    .next()
                    .unwrap_or("")
                    .split(',')
                    .map(|n| n.trim().split("::").next().unwrap_or("").to_string())
                    .collect()
            } else {
                vec![rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect()]
            };
            found.extend(names.into_iter().filter(|n| handlers.contains(n)));
        }
    }
    found
}

/// Handler → handlers it imports, from the files of `src/cmd/`.
fn handler_graph(dir: &Path) -> std::collections::BTreeMap<String, BTreeSet<String>> {
    let mut texts = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let Some(stem) = p.file_stem().map(|s| s.to_string_lossy().to_string()) else {
            continue;
        };
        if p.extension().is_some_and(|x| x == "rs") && stem != "mod" {
            let text = std::fs::read_to_string(&p).unwrap();
            let text = text.split("#[cfg(test)]").next().unwrap().to_string();
            texts.insert(stem, text);
        }
    }
    let handlers: BTreeSet<String> = texts.keys().cloned().collect();
    texts
        .iter()
        .map(|(h, text)| {
            let mut to = handler_imports(text, &handlers);
            to.remove(h);
            (h.clone(), to)
        })
        .collect()
}

/// A cycle of the graph, if any (depth-first, each path without repeats).
fn find_cycle(graph: &std::collections::BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn walk(
        node: &str,
        graph: &std::collections::BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(k) = path.iter().position(|n| n == node) {
            let mut cycle = path[k..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = walk(next, graph, path) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    graph.keys().find_map(|start| walk(start, graph, &mut Vec::new()))
}

#[test]
fn handlers_do_not_import_each_other_in_a_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let graph = handler_graph(&root.join("src/cmd"));
    assert!(
        graph.contains_key("diagnose") && graph.contains_key("watch"),
        "{graph:?}"
    );
    assert_eq!(
        find_cycle(&graph),
        None,
        "handlers import each other in a cycle: {graph:?}"
    );
}

/// The cycle check itself: it finds a cycle through a `{…}` list and
/// through `super::`, and none in a chain.
#[test]
fn the_cycle_check_sees_lists_and_super() {
    let handlers: BTreeSet<String> = ["diagnose", "watch", "query"].map(String::from).into();
    let text = "use crate::cmd::{watch::run, query};\nlet x = super::diagnose::f();";
    assert_eq!(
        handler_imports(text, &handlers),
        ["diagnose", "query", "watch"].map(String::from).into()
    );
    let mut g = std::collections::BTreeMap::new();
    g.insert("diagnose".to_string(), BTreeSet::from(["watch".to_string()]));
    g.insert("watch".to_string(), BTreeSet::new());
    assert_eq!(find_cycle(&g), None);
    g.insert("watch".to_string(), BTreeSet::from(["diagnose".to_string()]));
    assert_eq!(
        find_cycle(&g),
        Some(["diagnose", "watch", "diagnose"].map(String::from).to_vec())
    );
}

/// `src/lib.rs`'s map names the modules in the order of [`rank`]: each
/// module of a stage is named, and none before a stage below it.
#[test]
fn the_map_of_lib_rs_names_the_stages_in_order() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let map: String = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    // The backquoted names of the map, in order, that are modules of a stage.
    let named: Vec<&str> = map
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|n| rank(n).is_some())
        .collect();
    let declared: Vec<String> = lib
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("pub mod ")
                .or_else(|| l.trim().strip_prefix("mod "))
        })
        .map(|m| m.trim_end_matches(';').to_string())
        .collect();
    for m in &declared {
        assert!(
            named.contains(&m.as_str()),
            "lib.rs's map does not name `{m}`: {named:?}"
        );
    }
    for pair in named.windows(2) {
        assert!(
            rank(pair[0]) <= rank(pair[1]),
            "lib.rs's map names `{}` before `{}`, a stage below it",
            pair[0],
            pair[1]
        );
    }
}

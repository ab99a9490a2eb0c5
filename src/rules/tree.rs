//! `cptriage tree` logic: the exclusion tree as indented text or as a mermaid
//! flowchart.

use std::fmt::Write;

use super::load::{Child, RuleSet, HEALTHY};

fn leaf_label(rules: &RuleSet, l: usize) -> String {
    let leaf = &rules.leaves[l];
    let axis = super::report::axis_id(&leaf.axis, leaf.sub_axis.as_deref());
    let fb = if leaf.fallback { ", fallback" } else { "" };
    format!("{axis} ({}{fb}): {}", leaf.severity, leaf.title)
}

/// The tree as indented text: each node's question and condition, its `yes`
/// and `no` children, leaves with axis, severity and title.
pub fn render_text(rules: &RuleSet) -> String {
    let mut out = String::new();
    if let Some(d) = &rules.description {
        let _ = writeln!(out, "{}", d.trim());
        out.push('\n');
    }
    let root = &rules.nodes[rules.root];
    let gate = if root.def.gate { " [gate]" } else { "" };
    let _ = writeln!(out, "{}{gate}: {}", root.def.id, root.def.question);
    let _ = writeln!(out, "  when {}", root.def.when);
    let mut visiting = vec![false; rules.nodes.len()];
    visiting[rules.root] = true;
    text_children(rules, rules.root, "", &mut out, &mut visiting);
    if !rules.advisories.is_empty() {
        out.push('\n');
        let _ = writeln!(out, "advisories (stated beside the verdict, not failing axes):");
        for a in &rules.advisories {
            let _ = writeln!(out, "  [{}] {}", a.id, a.title);
            let _ = writeln!(out, "     when {}", a.when);
            if let Some(u) = &a.unless {
                let _ = writeln!(out, "     unless {u}");
            }
            if !a.not_applicable.is_empty() {
                let _ = writeln!(out, "     not applicable then: {}", a.not_applicable.join(", "));
            }
            let _ = writeln!(out, "     advice: {}", a.advice.trim());
            let _ = writeln!(out, "     falsifier: {}", a.falsifier.trim());
        }
    }
    out
}

fn text_children(rules: &RuleSet, n: usize, prefix: &str, out: &mut String, visiting: &mut Vec<bool>) {
    let node = &rules.nodes[n];
    let kids = [("yes", node.yes), ("no", node.no)];
    for (i, (label, child)) in kids.iter().enumerate() {
        let last = i == kids.len() - 1;
        let branch = if last { "└─" } else { "├─" };
        let cont = if last { "   " } else { "│  " };
        match *child {
            Child::Healthy => {
                let _ = writeln!(out, "{prefix}{branch} {label} → {HEALTHY}");
            }
            Child::Leaf(l) => {
                let _ = writeln!(
                    out,
                    "{prefix}{branch} {label} → [{}] {}",
                    rules.leaves[l].id,
                    leaf_label(rules, l)
                );
            }
            Child::Node(m) => {
                let c = &rules.nodes[m];
                let gate = if c.def.gate { " [gate]" } else { "" };
                let _ = writeln!(
                    out,
                    "{prefix}{branch} {label} → {}{gate}: {}",
                    c.def.id, c.def.question
                );
                let _ = writeln!(out, "{prefix}{cont}   when {}", c.def.when);
                if let Some(w) = &c.def.sustain {
                    let _ = writeln!(out, "{prefix}{cont}   then held while {w}");
                }
                if visiting[m] {
                    continue;
                }
                visiting[m] = true;
                text_children(rules, m, &format!("{prefix}{cont}"), out, visiting);
                visiting[m] = false;
            }
        }
    }
}

fn esc(s: &str) -> String {
    s.replace('"', "#quot;")
}

fn mid(prefix: &str, id: &str) -> String {
    let clean: String = id
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("{prefix}_{clean}")
}

/// The tree as a mermaid flowchart (`flowchart TD`): questions as diamonds,
/// leaves as boxes labelled with axis and severity, edges labelled yes/no.
pub fn render_mermaid(rules: &RuleSet) -> String {
    let mut out = String::from("flowchart TD\n");
    for n in &rules.nodes {
        let _ = writeln!(out, "    {}{{\"{}\"}}", mid("n", &n.def.id), esc(&n.def.question));
    }
    for (l, leaf) in rules.leaves.iter().enumerate() {
        let _ = writeln!(
            out,
            "    {}[\"{}\"]",
            mid("l", &leaf.id),
            esc(&leaf_label(rules, l))
        );
    }
    let _ = writeln!(out, "    {}([\"{HEALTHY}\"])", mid("h", HEALTHY));
    for n in &rules.nodes {
        for (label, child) in [("yes", n.yes), ("no", n.no)] {
            let target = match child {
                Child::Node(m) => mid("n", &rules.nodes[m].def.id),
                Child::Leaf(l) => mid("l", &rules.leaves[l].id),
                Child::Healthy => mid("h", HEALTHY),
            };
            let _ = writeln!(out, "    {} -->|{label}| {target}", mid("n", &n.def.id));
        }
    }
    out
}

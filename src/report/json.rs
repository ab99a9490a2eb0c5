//! The JSON verdict for scripts: a documented, versioned contract
//! (`docs/json.md`, JSON Schema `docs/verdict-v1.schema.json`).
//!
//! Serialization-only types: the [`Report`] model can change without breaking
//! scripts; this file is the contract. Times are RFC 3339 UTC strings, durations
//! seconds, values numbers (`"NaN"`, `"+Inf"`, `"-Inf"` as strings), axis ids
//! `auth`, `admission`, `apf`, `etcd`, `watch-cache`, `storage`, `joint`, … with
//! etcd sub-axes `raft`, `disk`, `quota`, `compaction`, ….

use std::io::Write;

use serde::Serialize;
use serde_json::Value as J;

use crate::rules::report::{self as model, Report};
use crate::store::Millis;
use crate::timefmt::format_time;

/// The schema identifier written in every verdict.
pub const SCHEMA: &str = "cptriage/verdict/v1";

fn t(ms: Millis) -> String {
    format_time(ms)
}

fn ot(ms: Option<Millis>) -> Option<String> {
    ms.map(t)
}

fn num(v: Option<f64>) -> J {
    match v {
        None => J::Null,
        Some(x) if x.is_nan() => J::String("NaN".into()),
        Some(x) if x == f64::INFINITY => J::String("+Inf".into()),
        Some(x) if x == f64::NEG_INFINITY => J::String("-Inf".into()),
        Some(x) => serde_json::Number::from_f64(x).map(J::Number).unwrap_or(J::Null),
    }
}

fn secs(ms: Millis) -> J {
    num(Some(ms as f64 / 1000.0))
}

fn to_json<T: Serialize>(v: &T) -> J {
    serde_json::to_value(v).unwrap_or(J::Null)
}

#[derive(Serialize)]
struct Verdict<'a> {
    schema: &'static str,
    status: model::Status,
    summary: &'a str,
    root_cause: Option<J>,
    #[serde(skip_serializing_if = "Option::is_none")]
    undecided: Option<J>,
    #[serde(skip_serializing_if = "Option::is_none")]
    recovery_unconfirmed: Option<J>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    not_excluded: Vec<J>,
    earlier: Vec<J>,
    scope: J,
    downstream: Vec<J>,
    ties: Vec<J>,
    assumptions: &'a [String],
    symptom: Option<J>,
    axes: Vec<J>,
    path: Vec<J>,
    walk_end: &'a str,
    gaps: Vec<J>,
    window: J,
    sources: Vec<J>,
    warnings: &'a [String],
    falsifier: Option<&'a str>,
    falsification: Option<J>,
    runbook: &'a [String],
    rules: J,
    #[serde(skip_serializing_if = "Option::is_none")]
    audit: Option<J>,
    #[serde(skip_serializing_if = "Option::is_none")]
    logs: Option<J>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    corroboration: Vec<J>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    advisories: Vec<J>,
    #[serde(skip_serializing_if = "Option::is_none")]
    recorded_signals: Option<J>,
}

/// The audit-log summary (`--audit`): counts, bad lines, the layer split of
/// slow requests (with each layer's share of their total time), the slowest
/// requests and the most denied clients.
fn audit_json(a: &crate::source::audit::AuditSummary) -> J {
    let total = a
        .layers
        .iter()
        .find(|(l, _)| l == "total")
        .map(|(_, s)| *s)
        .unwrap_or(0.0);
    serde_json::json!({
        "files": a.files,
        "lines": a.lines,
        "events": a.events,
        "other_stages": a.other_stages,
        "outside_window": a.outside_window,
        "bad_lines": a.bad_lines,
        "bad_examples": a.bad_examples.iter().map(|b| serde_json::json!({"at": b.at, "message": b.message})).collect::<Vec<_>>(),
        "slow_requests": a.slow_requests,
        "slow_annotated": a.slow_annotated,
        "first": ot(a.first),
        "last": ot(a.last),
        "layers": a.layers.iter().map(|(l, s)| serde_json::json!({
            "layer": l, "seconds": num(Some(*s)),
            "share": num((total > 0.0).then(|| s / total)),
        })).collect::<Vec<_>>(),
        "slowest": a.slowest.iter().map(|r| serde_json::json!({
            "time": t(r.time), "audit_id": r.audit_id, "verb": r.verb, "resource": r.resource,
            "object": r.object, "user": r.user, "user_agent": r.user_agent, "code": r.code,
            "total_seconds": num(Some(r.total_seconds)),
            "layers": r.layers.iter().map(|(l, s)| serde_json::json!({"layer": l, "seconds": num(Some(*s))})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "denied": a.denied.iter().map(|d| serde_json::json!({
            "code": d.code, "user": d.user, "user_agent": d.user_agent, "count": d.count,
        })).collect::<Vec<_>>(),
        "folded": a.folded,
        "gaps": a.gaps,
        "notes": a.notes,
    })
}

fn log_line(l: &crate::source::logs::LogLine) -> J {
    serde_json::json!({
        "time": t(l.time), "member": l.member, "class": l.class,
        "took_seconds": num(l.took), "text": l.text, "at": l.at,
    })
}

/// The logs summary (`--logs`): files read and skipped, members, counts per
/// member and class (with each class's first and most telling line), bad
/// lines, the most frequent unrecognised warnings, and the lines shown for
/// the root cause.
fn logs_json(a: &crate::source::logs::LogsSummary) -> J {
    serde_json::json!({
        "files": a.files.iter().map(|f| serde_json::json!({
            "path": f.path, "member": f.member,
            "component": f.component.map(|c| c.as_str()),
            "layout": f.layout, "formats": f.formats, "lines": f.lines, "recognised": f.recognised,
            "first": ot(f.first), "last": ot(f.last),
        })).collect::<Vec<_>>(),
        "skipped": a.skipped.iter().map(|s| serde_json::json!({"path": s.path, "why": s.why})).collect::<Vec<_>>(),
        "other_files": a.other_files,
        "members": a.members.iter().map(|m| serde_json::json!({
            "name": m.name, "component": m.component.as_str(), "id": m.id,
        })).collect::<Vec<_>>(),
        "lines": a.lines,
        "recognised": a.recognised,
        "unknown": a.unknown,
        "untimed": a.untimed,
        "untimed_example": a.untimed_example,
        "outside_window": a.outside_window,
        "bad_lines": a.bad_lines,
        "bad_examples": a.bad_examples.iter().map(|b| serde_json::json!({"at": b.at, "message": b.message})).collect::<Vec<_>>(),
        "unknown_warnings": a.unknown_warnings.iter().map(|(m, n)| serde_json::json!({"template": m, "count": n})).collect::<Vec<_>>(),
        "classes": a.classes.iter().map(|c| serde_json::json!({
            "instance": c.instance, "reporter": c.reporter, "component": c.component.as_str(),
            "class": c.class, "count": c.count, "took_seconds": num(Some(c.took_seconds)),
            "first": log_line(&c.first), "telling": log_line(&c.telling),
        })).collect::<Vec<_>>(),
        "first": ot(a.first),
        "last": ot(a.last),
        "evidence": a.evidence.iter().map(log_line).collect::<Vec<_>>(),
        "gaps": a.gaps,
        "notes": a.notes,
    })
}

fn instance_values(v: &[model::InstanceValue]) -> J {
    J::Array(
        v.iter()
            .map(|i| {
                serde_json::json!({
                    "instance": i.instance,
                    "value": num(i.value),
                    "baseline": num(i.baseline),
                    "lit": i.lit,
                })
            })
            .collect(),
    )
}

fn evidence(e: &model::Evidence) -> J {
    serde_json::json!({
        "signal": e.signal,
        "description": e.description,
        "role": e.role,
        "unit": to_json(&e.unit),
        "availability": to_json(&e.availability),
        "alternative": e.alternative,
        "expression": e.expression,
        "threshold": e.threshold_text,
        "value": num(e.value),
        "value_at": ot(e.value_at),
        "baseline": num(e.baseline),
        "lit": e.lit,
        "instances": instance_values(&e.instances),
        "series": e.series.iter().map(|v| num(*v)).collect::<Vec<_>>(),
        "localisation": e.localisation,
        "note": e.note,
        "since_start": e.since_start,
        "deciding": !e.context,
        "contributors": e.contributors.iter().map(|c| serde_json::json!({
            "labels": c.labels,
            "unit": to_json(&c.unit),
            "value": num(c.value),
            "share": num(c.share),
            "baseline": num(c.baseline),
        })).collect::<Vec<_>>(),
        "contributors_note": e.contributors_note,
    })
}

fn measure(m: &model::Measure) -> J {
    serde_json::json!({
        "axis": m.axis,
        "signal": m.signal,
        "description": m.description,
        "unit": to_json(&m.unit),
        "value": num(m.value),
        "baseline": num(m.baseline),
        "threshold": m.threshold_text,
        "instance": m.instance,
        "at": ot(m.at),
    })
}

fn falsification(f: &model::Falsification) -> J {
    serde_json::json!({
        "statement": f.statement,
        "adr": f.adr,
        "deciding": f.deciding.iter().map(measure).collect::<Vec<_>>(),
        "cleared": f.cleared.iter().map(measure).collect::<Vec<_>>(),
    })
}

fn episode(e: &model::Episode) -> J {
    serde_json::json!({
        "leaf": e.leaf, "axis": e.axis, "sub_axis": e.sub_axis,
        "onset": t(e.onset), "recovered": ot(e.recovered),
    })
}

/// A root cause (or the failing axis of an undecided verdict).
fn root_cause_json(rc: &model::RootCause) -> J {
    serde_json::json!({
        "leaf": rc.leaf,
        "axis": rc.axis,
        "sub_axis": rc.sub_axis,
        "severity": rc.severity.to_string(),
        "title": rc.title,
        "onset": ot(rc.onset),
        "recovered": ot(rc.recovered),
        "instances": rc.instances,
        "affected": rc.affected,
        "unreachable": rc.unreachable.iter().map(|u| serde_json::json!({
            "target": u.target, "from": t(u.from), "until": ot(u.until),
        })).collect::<Vec<_>>(),
        "localisation": rc.localisation,
    })
}

/// Builds the verdict document.
pub fn document(r: &Report) -> J {
    let v = &r.verdict;
    let doc = Verdict {
        schema: SCHEMA,
        status: r.status,
        summary: &v.summary,
        root_cause: v.root_cause.as_ref().map(root_cause_json),
        undecided: v.undecided.as_ref().map(undecided_json),
        recovery_unconfirmed: v.recovery_unconfirmed.as_ref().map(|u| {
            serde_json::json!({
                "leaves": u.leaves, "since": t(u.since),
                "unread": u.unread.iter().map(|s| serde_json::json!({
                    "signal": s.signal, "description": s.description, "reason": s.reason,
                })).collect::<Vec<_>>(),
                "text": u.text,
            })
        }),
        not_excluded: v
            .not_excluded
            .iter()
            .map(|n| {
                serde_json::json!({
                    "leaf": n.leaf, "axis": n.axis,
                    "unread": n.unread.iter().map(|s| serde_json::json!({
                        "signal": s.signal, "description": s.description, "reason": s.reason,
                    })).collect::<Vec<_>>(),
                    "text": n.text,
                })
            })
            .collect(),
        earlier: v.earlier.iter().map(episode).collect(),
        scope: serde_json::json!({
            "observed": r.scope.observed,
            "judged": r.scope.judged,
            "not_observed": r.scope.not_observed,
        }),
        downstream: v.downstream.iter().map(downstream_json).collect(),
        ties: v.ties.iter().map(tie_json).collect(),
        assumptions: &v.assumptions,
        symptom: r.symptom.as_ref().map(|s| {
            serde_json::json!({
                "node": s.node, "question": s.question, "state": to_json(&s.state),
                "onset": ot(s.onset), "timeline": to_json(&s.timeline),
            })
        }),
        axes: r.axes.iter().map(axis_json).collect(),
        path: r.path.iter().map(step_json).collect(),
        walk_end: &r.walk_end,
        gaps: r
            .gaps
            .iter()
            .map(
                |g| serde_json::json!({"kind": to_json(&g.kind), "subject": g.subject, "message": g.message}),
            )
            .collect(),
        window: window_json(&r.window),
        sources: r.sources.iter().map(source_json).collect(),
        warnings: &r.warnings,
        falsifier: r.falsifier.as_deref(),
        falsification: r.falsification.as_ref().map(falsification),
        runbook: &r.runbook,
        rules: serde_json::json!({
            "origin": r.rules.origin, "signals": r.rules.signals,
            "nodes": r.rules.nodes, "leaves": r.rules.leaves,
        }),
        audit: r.audit.as_ref().map(audit_json),
        logs: r.logs.as_ref().map(logs_json),
        advisories: r.advisories.iter().map(advisory_json).collect(),
        recorded_signals: r.recorded.as_ref().map(|p| {
            serde_json::json!({
                "window": crate::timefmt::format_duration(p.window),
                "recorded": p.recorded, "raw": p.raw,
            })
        }),
        corroboration: v.corroboration.iter().map(corroboration_json).collect(),
    };
    to_json(&doc)
}

fn undecided_json(u: &model::Undecided) -> J {
    serde_json::json!({
        "failing": root_cause_json(&u.failing),
        "unread": u.unread.iter().map(|c| serde_json::json!({
            "cause": c.cause, "title": c.title, "signals": c.signals,
            "reasons": c.reasons, "remedy": c.remedy,
        })).collect::<Vec<_>>(),
        "text": u.text,
    })
}

fn downstream_json(d: &model::Downstream) -> J {
    serde_json::json!({
        "leaf": d.leaf, "axis": d.axis, "sub_axis": d.sub_axis,
        "onset": t(d.onset), "lag_seconds": secs(d.lag_ms), "note": d.note,
    })
}

fn tie_json(d: &model::Tie) -> J {
    serde_json::json!({
        "leaf": d.leaf, "axis": d.axis, "sub_axis": d.sub_axis,
        "onset": t(d.onset), "note": d.note,
    })
}

fn axis_json(a: &model::AxisReport) -> J {
    serde_json::json!({
        "leaf": a.leaf,
        "axis": a.axis,
        "sub_axis": a.sub_axis,
        "severity": a.severity.to_string(),
        "title": a.title,
        "state": to_json(&a.state),
        "lit": a.state == model::AxisState::Lit,
        "lit_at_end": a.lit_at_end,
        "onset": ot(a.onset),
        "recovered": ot(a.recovered),
        "episodes": a.episodes.iter().map(episode).collect::<Vec<_>>(),
        "instances": a.instances,
        "localisation": a.localisation,
        "pending": a.pending,
        "timeline": to_json(&a.timeline),
        "evidence": a.evidence.iter().map(evidence).collect::<Vec<_>>(),
        "note": a.note,
    })
}

/// One question of the walk with the signals it read.
fn step_json(p: &model::PathStep) -> J {
    serde_json::json!({
        "node": p.node,
        "question": p.question,
        "condition": p.condition,
        "answer": to_json(&p.answer),
        "next": p.next,
        "note": p.note,
        "signals": p.signals.iter().map(|s| serde_json::json!({
            "signal": s.signal,
            "unit": to_json(&s.unit),
            "availability": to_json(&s.availability),
            "value": num(s.value),
            "baseline": num(s.baseline),
            "threshold": s.threshold_text,
            "lit": s.lit,
            "instances": instance_values(&s.instances),
        })).collect::<Vec<_>>(),
    })
}

fn window_json(w: &model::WindowInfo) -> J {
    serde_json::json!({
        "from": t(w.from),
        "to": t(w.to),
        "at": t(w.at),
        "step_seconds": secs(w.step),
        "steps": w.steps.len(),
        "range_seconds": secs(w.range),
        "debounce": w.debounce,
        "baseline": {
            "kind": to_json(&w.baseline.kind),
            "from": ot(w.baseline.from),
            "to": ot(w.baseline.to),
            "description": w.baseline.description,
        },
    })
}

fn source_json(s: &model::SourceInfo) -> J {
    serde_json::json!({
        "target": s.target,
        "role": s.role,
        "role_reason": s.role_reason,
        "version": s.version,
        "time_source": s.time_source,
        "snapshots": s.snapshots,
        "first": ot(s.first),
        "last": ot(s.last),
        "restarts": s.restarts.iter().map(|x| t(*x)).collect::<Vec<_>>(),
        "missing": s.missing.iter().map(|[a, b]| [t(*a), t(*b)]).collect::<Vec<_>>(),
        "failed_scrapes": s.failed_scrapes,
        "last_attempt": ot(s.last_attempt),
        "warmup": s.warmup.iter().map(|[a, b]| [t(*a), t(*b)]).collect::<Vec<_>>(),
    })
}

fn advisory_json(a: &model::AdvisoryReport) -> J {
    serde_json::json!({
        "id": a.id, "title": a.title, "since": t(a.since), "holds_at_end": a.holds_at_end,
        "advice": a.advice, "falsifier": a.falsifier,
        "evidence": a.evidence.iter().map(|e| serde_json::json!({
            "signal": e.signal, "description": e.description, "value": num(e.value),
            "value_text": e.value_text, "threshold": e.threshold,
        })).collect::<Vec<_>>(),
        "not_applicable": a.not_applicable, "reason": a.reason,
    })
}

fn corroboration_json(c: &model::Corroboration) -> J {
    serde_json::json!({
        "kind": c.kind.as_str(), "axis": c.axis, "signal": c.signal,
        "other_axis": c.other_axis, "from": ot(c.from), "value": num(c.value),
        "text": c.text,
    })
}

/// Writes the verdict as pretty JSON.
pub fn render(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    let s = serde_json::to_string_pretty(&document(r)).map_err(std::io::Error::other)?;
    writeln!(out, "{s}")
}

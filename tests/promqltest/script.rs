//! A reader and runner for Prometheus's PromQL test-script format
//! (`promql/promqltest/testdata/*.test`): `load`, `clear`, `eval instant`,
//! `eval range`, `expect …` lines and the expanding series notation.

use std::collections::BTreeMap;

use cptriage::eval::{self, EvalError, EvalOptions, Value};
use cptriage::source::notation;
use cptriage::store::{Labels, Millis, Series, Store};
use promql_parser::parser::Expr;

/// Prometheus's test tolerance (`defaultEpsilon`).
const EPSILON: f64 = 0.000001;

pub(crate) use cptriage::source::notation::Point;

/// Parses a Prometheus duration (`1m30s`, `10s53ms`, `0`), in milliseconds.
pub(crate) fn parse_duration(s: &str) -> Result<Millis, String> {
    let s = s.trim();
    if s == "0" {
        return Ok(0);
    }
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let mut total: i64 = 0;
    let mut rest = body;
    if rest.is_empty() {
        return Err(format!("empty duration `{s}`"));
    }
    while !rest.is_empty() {
        let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return Err(format!("bad duration `{s}`"));
        }
        let n: i64 = rest[..digits]
            .parse()
            .map_err(|_| format!("bad duration `{s}`"))?;
        rest = &rest[digits..];
        let unit_len = rest.chars().take_while(|c| c.is_ascii_alphabetic()).count();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let mult = match unit {
            "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 7 * 86_400_000,
            "y" => 365 * 86_400_000,
            "" => 1000,
            _ => return Err(format!("bad duration unit in `{s}`")),
        };
        total += n * mult;
    }
    Ok(if neg { -total } else { total })
}

fn parse_value(tok: &str) -> Result<f64, String> {
    notation::parse_value(tok).map_err(|e| e.to_string())
}

/// Expands series values (`1 2 _ stale 0+10x3`) with cptriage's reader.
pub(crate) fn expand_values(s: &str) -> Result<Vec<Point>, String> {
    notation::expand_values(s).map_err(|e| e.to_string())
}

/// Splits `name{a="b"} values` into the label set and the values text.
pub(crate) fn parse_series_line(line: &str) -> Result<(Labels, String), String> {
    notation::parse_series_line(line).map_err(|e| e.to_string())
}

/// What an eval case expects.
#[derive(Debug, Default)]
pub(crate) struct Expect {
    pub fail: bool,
    pub fail_msg: Option<String>,
    pub fail_regex: Option<String>,
    pub ordered: bool,
    pub string: Option<String>,
    pub range_vector: Option<(Millis, Millis, Millis)>,
    pub scalar: Option<f64>,
    pub series: Vec<(Labels, Vec<Point>)>,
    pub has_native_histogram: bool,
}

#[derive(Debug)]
pub(crate) enum Query {
    Instant(Millis),
    Range {
        start: Millis,
        end: Millis,
        step: Millis,
    },
}

#[derive(Debug)]
pub(crate) struct Case {
    pub file: String,
    pub line: usize,
    pub query: Query,
    pub expr: String,
    pub expect: Expect,
}

pub(crate) enum Outcome {
    Pass,
    Fail(String),
    Skip(String),
}

/// Test-environment state: the store plus the names of native-histogram series.
#[derive(Default)]
pub(crate) struct Env {
    pub store: Store,
    /// Label sets of series holding native-histogram samples (from `{{...}}`
    /// values or the `_with_nhcb` conversion), which the store cannot hold.
    pub histogram_series: Vec<Labels>,
}

fn unquote(s: &str) -> String {
    let s = s.trim();
    if s.len() >= 2 && ((s.starts_with('"') && s.ends_with('"')) || (s.starts_with('`') && s.ends_with('`')))
    {
        let inner = &s[1..s.len() - 1];
        if s.starts_with('"') {
            return inner.replace("\\\"", "\"").replace("\\\\", "\\");
        }
        return inner.to_string();
    }
    s.to_string()
}

/// Runs one file, returning an outcome per eval case.
pub(crate) fn run_file(name: &str, text: &str) -> Vec<(Case, Outcome)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut env = Env::default();
    let mut out = Vec::new();
    let mut i = 0;
    let is_command = |l: &str| {
        let t = l.trim_start();
        l == t && (t.starts_with("load") || t.starts_with("clear") || t.starts_with("eval"))
    };
    while i < lines.len() {
        let line = lines[i];
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            i += 1;
            continue;
        }
        if t == "clear" {
            env = Env::default();
            i += 1;
            continue;
        }
        if t.starts_with("load") {
            let mut parts = t.split_whitespace();
            let cmd = parts.next().unwrap_or("");
            let nhcb = cmd.ends_with("_with_nhcb");
            let interval = parts.next().map(parse_duration).transpose();
            i += 1;
            let start = i;
            while i < lines.len() && !lines[i].trim().is_empty() && !is_command(lines[i]) {
                i += 1;
            }
            let Ok(Some(interval)) = interval else {
                panic!("{name}:{start}: bad load interval");
            };
            for l in &lines[start..i] {
                let lt = l.trim();
                if lt.starts_with('#') {
                    continue;
                }
                load_series(&mut env, lt, interval, nhcb)
                    .unwrap_or_else(|e| panic!("{name}:{}: {e}", start + 1));
            }
            env.store.finish();
            continue;
        }
        if t.starts_with("eval") {
            let case_line = i + 1;
            let (query, expr, mut expect) =
                parse_eval_header(t).unwrap_or_else(|e| panic!("{name}:{case_line}: {e}"));
            i += 1;
            while i < lines.len() && !lines[i].trim().is_empty() && !is_command(lines[i]) {
                let l = lines[i].trim();
                i += 1;
                if l.starts_with('#') {
                    continue;
                }
                parse_expect_line(l, &mut expect).unwrap_or_else(|e| panic!("{name}:{i}: {e}"));
            }
            let case = Case {
                file: name.to_string(),
                line: case_line,
                query,
                expr,
                expect,
            };
            let outcome = run_case(&env, &case);
            out.push((case, outcome));
            continue;
        }
        panic!("{name}:{}: unknown command `{t}`", i + 1);
    }
    out
}

fn load_series(env: &mut Env, line: &str, interval: Millis, nhcb: bool) -> Result<(), String> {
    let (labels, rest) = parse_series_line(line)?;
    if nhcb {
        if let Some(n) = labels.metric_name() {
            for suffix in ["_bucket", "_count", "_sum"] {
                if let Some(base) = n.strip_suffix(suffix) {
                    let mut h = labels.drop_names(&["le"]);
                    h.set("__name__", base);
                    env.histogram_series.push(h);
                }
            }
        }
    }
    if rest.contains("{{") {
        env.histogram_series.push(labels);
        return Ok(());
    }
    let pairs: Vec<(String, String)> = labels
        .iter()
        .map(|l| (l.name.to_string(), l.value.to_string()))
        .collect();
    let labels = env.store.labels(pairs);
    for (k, p) in expand_values(&rest)?.into_iter().enumerate() {
        if let Point::Value(v) = p {
            env.store.push(&labels, k as i64 * interval, v);
        }
    }
    Ok(())
}

fn parse_eval_header(t: &str) -> Result<(Query, String, Expect), String> {
    let mut expect = Expect::default();
    let (cmd, rest) = t.split_once(char::is_whitespace).ok_or("bad eval")?;
    match cmd {
        "eval" => {}
        "eval_fail" => expect.fail = true,
        "eval_ordered" => expect.ordered = true,
        "eval_warn" | "eval_info" => {}
        other => return Err(format!("unknown command `{other}`")),
    }
    let rest = rest.trim_start();
    if let Some(r) = rest.strip_prefix("instant at ") {
        let (at, expr) = r
            .trim_start()
            .split_once(char::is_whitespace)
            .ok_or("bad eval instant")?;
        Ok((
            Query::Instant(parse_duration(at)?),
            expr.trim().to_string(),
            expect,
        ))
    } else if let Some(r) = rest.strip_prefix("range from ") {
        let toks: Vec<&str> = r.splitn(6, char::is_whitespace).collect();
        if toks.len() < 6 || toks[1] != "to" || toks[3] != "step" {
            return Err(format!("bad eval range `{t}`"));
        }
        Ok((
            Query::Range {
                start: parse_duration(toks[0])?,
                end: parse_duration(toks[2])?,
                step: parse_duration(toks[4])?,
            },
            toks[5].trim().to_string(),
            expect,
        ))
    } else {
        Err(format!("bad eval `{t}`"))
    }
}

fn parse_expect_line(l: &str, e: &mut Expect) -> Result<(), String> {
    if let Some(r) = l.strip_prefix("expect ") {
        let r = r.trim();
        let (kind, tail) = r.split_once(char::is_whitespace).unwrap_or((r, ""));
        let tail = tail.trim();
        match kind {
            "fail" => {
                e.fail = true;
                if let Some(m) = tail.strip_prefix("msg:") {
                    e.fail_msg = Some(unquote(m));
                } else if let Some(m) = tail.strip_prefix("regex:") {
                    e.fail_regex = Some(unquote(m));
                }
            }
            "ordered" => e.ordered = true,
            "string" => e.string = Some(unquote(tail)),
            "range" => {
                // `expect range vector from A to B step C`
                let toks: Vec<&str> = tail.split_whitespace().collect();
                if toks.len() == 7
                    && toks[0] == "vector"
                    && toks[1] == "from"
                    && toks[3] == "to"
                    && toks[5] == "step"
                {
                    e.range_vector = Some((
                        parse_duration(toks[2])?,
                        parse_duration(toks[4])?,
                        parse_duration(toks[6])?,
                    ));
                } else {
                    return Err(format!("bad `expect range` line `{l}`"));
                }
            }
            // Annotations are not modelled: they neither pass nor fail a case.
            "warn" | "info" | "no_warn" | "no_info" => {}
            other => return Err(format!("unknown expectation `{other}`")),
        }
        return Ok(());
    }
    if l.contains("{{") {
        e.has_native_histogram = true;
        return Ok(());
    }
    if let Ok(v) = parse_value(l) {
        e.scalar = Some(v);
        return Ok(());
    }
    let (labels, rest) = parse_series_line(l)?;
    e.series.push((labels, expand_values(&rest)?));
    Ok(())
}

/// Whether any selector of `e` selects one of `hs`.
fn reads_histogram_series(e: &Expr, hs: &[Labels]) -> bool {
    if hs.is_empty() {
        return false;
    }
    let sel = |vs: &promql_parser::parser::VectorSelector| {
        hs.iter().any(|l| {
            let get = |n: &str| l.get(n).unwrap_or("").to_string();
            vs.name
                .as_ref()
                .is_none_or(|n| l.metric_name() == Some(n.as_str()))
                && vs.matchers.matchers.iter().all(|m| m.is_match(&get(&m.name)))
                && (vs.matchers.or_matchers.is_empty()
                    || vs
                        .matchers
                        .or_matchers
                        .iter()
                        .any(|g| g.iter().all(|m| m.is_match(&get(&m.name)))))
        })
    };
    match e {
        Expr::VectorSelector(vs) => sel(vs),
        Expr::MatrixSelector(ms) => sel(&ms.vs),
        Expr::Paren(p) => reads_histogram_series(&p.expr, hs),
        Expr::Unary(u) => reads_histogram_series(&u.expr, hs),
        Expr::Subquery(s) => reads_histogram_series(&s.expr, hs),
        Expr::Aggregate(a) => {
            a.param.as_ref().is_some_and(|p| reads_histogram_series(p, hs))
                || reads_histogram_series(&a.expr, hs)
        }
        Expr::Binary(b) => reads_histogram_series(&b.lhs, hs) || reads_histogram_series(&b.rhs, hs),
        Expr::Call(c) => c.args.args.iter().any(|a| reads_histogram_series(a, hs)),
        _ => false,
    }
}

fn float_eq(exp: f64, got: f64) -> bool {
    eval::almost_equal(exp, got, EPSILON)
}

fn run_case(env: &Env, case: &Case) -> Outcome {
    if case.expect.has_native_histogram {
        return Outcome::Skip("native histograms ({{...}}) in the expected result".into());
    }
    if case.expr.contains("\\x") {
        return Outcome::Skip(
            "Go byte escape (`\\xNN`) makes invalid UTF-8, which Rust strings cannot hold".into(),
        );
    }
    let parsed = match promql_parser::parser::parse(&case.expr) {
        Ok(e) => e,
        Err(e) => {
            if case.expect.fail && case.expect.fail_msg.is_none() && case.expect.fail_regex.is_none() {
                return Outcome::Pass;
            }
            return Outcome::Skip(format!("promql-parser rejects the query ({})", first_words(&e)));
        }
    };
    if let Err(EvalError::Unsupported(what)) = eval::check_supported(&parsed) {
        return Outcome::Skip(format!("unsupported: {what}"));
    }
    if reads_histogram_series(&parsed, &env.histogram_series) {
        return Outcome::Skip(
            "reads series with native-histogram samples (`{{...}}` or `_with_nhcb`)".into(),
        );
    }
    let opts = EvalOptions::default();
    let result = match case.query {
        Query::Instant(t) => eval::instant(&env.store, &parsed, t, &opts),
        Query::Range { start, end, step } => {
            eval::range(&env.store, &parsed, start, end, step, &opts).map(Value::Matrix)
        }
    };
    let e = &case.expect;
    if e.fail {
        return match result {
            Ok(v) => Outcome::Fail(format!("expected an error, got {}", show_value(&v))),
            Err(err) => {
                let msg = match &err {
                    EvalError::Runtime(m) => m.clone(),
                    other => other.to_string(),
                };
                if let Some(want) = &e.fail_msg {
                    if &msg != want {
                        return Outcome::Fail(format!("expected error `{want}`, got `{msg}`"));
                    }
                }
                if let Some(re) = &e.fail_regex {
                    let ok = regex::Regex::new(re).map(|r| r.is_match(&msg)).unwrap_or(false);
                    if !ok {
                        return Outcome::Fail(format!("expected error matching `{re}`, got `{msg}`"));
                    }
                }
                Outcome::Pass
            }
        };
    }
    let v = match result {
        Ok(v) => v,
        Err(err) => return Outcome::Fail(format!("unexpected error: {err}")),
    };
    match (&case.query, v) {
        (_, Value::String(s)) => match &e.string {
            Some(want) if *want == s => Outcome::Pass,
            want => Outcome::Fail(format!("expected string {want:?}, got {s:?}")),
        },
        (_, Value::Scalar(got)) => match e.scalar {
            Some(want) if float_eq(want, got) => Outcome::Pass,
            want => Outcome::Fail(format!("expected scalar {want:?}, got {got}")),
        },
        (Query::Instant(t), Value::Vector(vec)) => match compare_vector(e, &vec) {
            Outcome::Pass => range_consistency(env, &parsed, &case.expr, *t, &vec),
            other => other,
        },
        (Query::Instant(_), Value::Matrix(m)) => match e.range_vector {
            Some((from, to, step)) => compare_matrix(e, &m, from, to, step),
            None => Outcome::Fail("got a range vector without `expect range vector`".into()),
        },
        (Query::Range { start, end, step }, Value::Matrix(m)) => {
            if let Some(s) = e.scalar {
                // A scalar range result is one series with empty labels.
                let exp = Expect {
                    series: vec![(Labels::new(), vec![Point::Value(s)])],
                    ..Default::default()
                };
                return compare_matrix(&exp, &m, *start, *end, *step);
            }
            compare_matrix(e, &m, *start, *end, *step)
        }
        (_, other) => Outcome::Fail(format!("unexpected result {}", show_value(&other))),
    }
}

/// The same expression as a range query ending at `t` (five 1-minute steps)
/// must give the instant result at its last step: this checks the sliding
/// windows of range evaluation against single-step evaluation.
fn range_consistency(env: &Env, e: &Expr, text: &str, t: Millis, want: &[eval::VectorSample]) -> Outcome {
    // `start()`/`end()` mean different times in the two query kinds.
    if text.contains("start()") || text.contains("end()") {
        return Outcome::Pass;
    }
    let step = 60_000;
    let got = match eval::range(&env.store, e, t - 4 * step, t, step, &EvalOptions::default()) {
        Ok(m) => m,
        Err(err) => {
            return Outcome::Fail(format!(
                "range form failed where the instant query did not: {err}"
            ))
        }
    };
    let at_t: Vec<(&Labels, f64)> = got
        .iter()
        .filter_map(|s| s.samples.last().filter(|p| p.t == t).map(|p| (&s.labels, p.v)))
        .collect();
    let same = at_t.len() == want.len()
        && want
            .iter()
            .all(|w| at_t.iter().any(|(l, v)| **l == w.labels && float_eq(w.v, *v)));
    if same {
        Outcome::Pass
    } else {
        Outcome::Fail(format!(
            "range form disagrees with the instant result at its last step: {}",
            show_value(&Value::Matrix(got))
        ))
    }
}

fn first_words(s: &str) -> String {
    s.split_whitespace().take(6).collect::<Vec<_>>().join(" ")
}

fn show_value(v: &Value) -> String {
    match v {
        Value::Scalar(f) => format!("scalar {f}"),
        Value::String(s) => format!("string {s:?}"),
        Value::Vector(v) => v
            .iter()
            .map(|s| format!("{} {}", s.labels, s.v))
            .collect::<Vec<_>>()
            .join("; "),
        Value::Matrix(m) => m
            .iter()
            .map(|s| {
                let pts: Vec<String> = s.samples.iter().map(|p| format!("{}@{}", p.v, p.t)).collect();
                format!("{} [{}]", s.labels, pts.join(" "))
            })
            .collect::<Vec<_>>()
            .join("; "),
    }
}

fn compare_vector(e: &Expect, got: &[eval::VectorSample]) -> Outcome {
    if e.scalar.is_some() {
        return Outcome::Fail(format!(
            "expected a scalar, got vector {}",
            show_value(&Value::Vector(got.to_vec()))
        ));
    }
    let exp: Vec<(&Labels, f64)> = e
        .series
        .iter()
        .filter_map(|(l, pts)| match pts.as_slice() {
            [Point::Value(v)] => Some((l, *v)),
            _ => None,
        })
        .collect();
    if exp.len() != e.series.len() {
        return Outcome::Fail("expected series must have exactly one value in an instant query".into());
    }
    let detail = || {
        format!(
            "expected [{}], got [{}]",
            exp.iter()
                .map(|(l, v)| format!("{l} {v}"))
                .collect::<Vec<_>>()
                .join("; "),
            show_value(&Value::Vector(got.to_vec()))
        )
    };
    if exp.len() != got.len() {
        return Outcome::Fail(format!("series count differs: {}", detail()));
    }
    for (pos, g) in got.iter().enumerate() {
        let Some(idx) = exp.iter().position(|(l, _)| **l == g.labels) else {
            return Outcome::Fail(format!("unexpected series {}: {}", g.labels, detail()));
        };
        if e.ordered && idx != pos {
            return Outcome::Fail(format!("order differs: {}", detail()));
        }
        if !float_eq(exp[idx].1, g.v) {
            return Outcome::Fail(format!("value differs for {}: {}", g.labels, detail()));
        }
    }
    Outcome::Pass
}

fn compare_matrix(e: &Expect, got: &[Series], start: Millis, end: Millis, step: Millis) -> Outcome {
    let mut exp: BTreeMap<&Labels, Vec<(Millis, f64)>> = BTreeMap::new();
    for (l, pts) in &e.series {
        let v: Vec<(Millis, f64)> = pts
            .iter()
            .enumerate()
            .filter_map(|(k, p)| match p {
                Point::Value(v) => Some((start + k as i64 * step, *v)),
                Point::Blank => None,
            })
            .filter(|(t, _)| *t <= end)
            .collect();
        exp.insert(l, v);
    }
    let detail = || {
        format!(
            "expected [{}], got [{}]",
            exp.iter()
                .map(|(l, v)| format!(
                    "{l} {}",
                    v.iter()
                        .map(|(t, v)| format!("{v}@{t}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                ))
                .collect::<Vec<_>>()
                .join("; "),
            show_value(&Value::Matrix(got.to_vec()))
        )
    };
    if exp.len() != got.len() {
        return Outcome::Fail(format!("series count differs: {}", detail()));
    }
    for s in got {
        let Some(want) = exp.get(&s.labels) else {
            return Outcome::Fail(format!("unexpected series {}: {}", s.labels, detail()));
        };
        if want.len() != s.samples.len()
            || want
                .iter()
                .zip(&s.samples)
                .any(|((t, v), p)| *t != p.t || !float_eq(*v, p.v))
        {
            return Outcome::Fail(format!("points differ for {}: {}", s.labels, detail()));
        }
    }
    Outcome::Pass
}

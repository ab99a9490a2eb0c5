//! Prometheus's expanding series notation, as promtool unit tests and the
//! PromQL test scripts write input series: `metric{a="b"} 0+10x5 _ stale 3x2`.
//! `cptriage rules test` reads its `input_series` with it.

use promql_parser::label::MatchOp;
use promql_parser::parser::Expr;

use crate::store::{stale_nan, Labels};

/// One point of a series in expanding notation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Point {
    /// `_`: no sample at this step.
    Blank,
    /// A value (`stale` is the staleness-marker NaN).
    Value(f64),
}

/// Why a series line or its values could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NotationError {
    #[error("bad value `{0}` (expected a number, `Inf`, `NaN`, `stale` or `_`)")]
    Value(String),
    #[error("bad repeat count in `{0}` (expected `axN`, `a+bxN` or `_xN`)")]
    Repeat(String),
    #[error("unclosed `{{` in series `{0}`")]
    Unclosed(String),
    #[error("bad series `{series}`: {message}")]
    Series { series: String, message: String },
    #[error("series `{0}` expands to more than {MAX_POINTS} points")]
    TooLong(String),
}

/// The most points one expanded series may hold (a guard against `0+1x1000000000`).
pub const MAX_POINTS: usize = 1_000_000;

/// Reads one value token: a float, `Inf`/`-Inf`, `NaN` or `stale`.
pub fn parse_value(tok: &str) -> Result<f64, NotationError> {
    match tok {
        "stale" => Ok(stale_nan()),
        "Inf" | "+Inf" | "inf" | "+inf" => Ok(f64::INFINITY),
        "-Inf" | "-inf" => Ok(f64::NEG_INFINITY),
        "NaN" | "nan" => Ok(f64::NAN),
        _ => tok
            .parse::<f64>()
            .map_err(|_| NotationError::Value(tok.to_string())),
    }
}

/// Expands series values: `1 2 _ stale 0+10x3 5-1x2 1x3 _x2`. `a+bxN` gives
/// N+1 points (a, a+b, …, a+N·b), as in promtool.
pub fn expand_values(s: &str) -> Result<Vec<Point>, NotationError> {
    let mut out = Vec::new();
    for tok in s.split_whitespace() {
        if tok == "_" {
            out.push(Point::Blank);
            continue;
        }
        if let Some(n) = tok.strip_prefix("_x") {
            let n: usize = n.parse().map_err(|_| NotationError::Repeat(tok.to_string()))?;
            if out.len() + n > MAX_POINTS {
                return Err(NotationError::TooLong(s.chars().take(60).collect()));
            }
            out.extend(std::iter::repeat_n(Point::Blank, n));
            continue;
        }
        // `a`, `axN`, `a+bxN`, `a-bxN`.
        let (base, times) = match tok.rfind('x') {
            Some(i) if i + 1 < tok.len() && tok[i + 1..].chars().all(|c| c.is_ascii_digit()) => (
                &tok[..i],
                Some(
                    tok[i + 1..]
                        .parse::<usize>()
                        .map_err(|_| NotationError::Repeat(tok.to_string()))?,
                ),
            ),
            _ => (tok, None),
        };
        let Some(times) = times else {
            out.push(Point::Value(parse_value(tok)?));
            continue;
        };
        if out.len().saturating_add(times).saturating_add(1) > MAX_POINTS {
            return Err(NotationError::TooLong(s.chars().take(60).collect()));
        }
        // Split `a+b` / `a-b` at a sign that is not leading and not an exponent sign.
        let bytes = base.as_bytes();
        let mut split = None;
        for i in 1..bytes.len() {
            if (bytes[i] == b'+' || bytes[i] == b'-') && !matches!(bytes[i - 1], b'e' | b'E') {
                split = Some(i);
            }
        }
        let (a, b) = match split {
            Some(i) => (parse_value(&base[..i])?, parse_value(&base[i..])?),
            None => (parse_value(base)?, 0.0),
        };
        // Accumulated, not multiplied, exactly as Prometheus's series parser does.
        let mut v = a;
        for _ in 0..=times {
            out.push(Point::Value(v));
            v += b;
        }
    }
    Ok(out)
}

/// Splits `name{a="b"} values` into the label set and the values text.
pub fn parse_series_line(line: &str) -> Result<(Labels, String), NotationError> {
    let line = line.trim();
    let end = if let Some(open) = line
        .find('{')
        .filter(|&i| !line[..i].contains(char::is_whitespace))
    {
        let mut in_str = false;
        let mut esc = false;
        let mut close = None;
        for (i, c) in line[open..].char_indices() {
            if esc {
                esc = false;
                continue;
            }
            match c {
                '\\' if in_str => esc = true,
                '"' => in_str = !in_str,
                '}' if !in_str => {
                    close = Some(open + i + 1);
                    break;
                }
                _ => {}
            }
        }
        close.ok_or_else(|| NotationError::Unclosed(line.chars().take(80).collect()))?
    } else {
        line.find(char::is_whitespace).unwrap_or(line.len())
    };
    let labels = parse_series(&line[..end])?;
    Ok((labels, line[end..].to_string()))
}

/// Reads a series written as a selector with `=` matchers only:
/// `name{a="b"}`, `{__name__="name"}` or `{}`.
pub fn parse_series(sel: &str) -> Result<Labels, NotationError> {
    let bad = |message: String| NotationError::Series {
        series: sel.chars().take(80).collect(),
        message,
    };
    let compact: String = sel.chars().filter(|c| !c.is_whitespace()).collect();
    if compact == "{}" {
        return Ok(Labels::new());
    }
    let e = crate::limits::parse_promql(sel).map_err(bad)?;
    let Expr::VectorSelector(vs) = e else {
        return Err(bad("expected `name{label=\"value\", ...}`".into()));
    };
    if vs.offset.is_some() || vs.at.is_some() {
        return Err(bad("`offset` and `@` are not allowed in a series".into()));
    }
    let mut pairs: Vec<(String, String)> = Vec::new();
    if let Some(n) = vs.name {
        pairs.push(("__name__".into(), n));
    }
    for m in vs.matchers.matchers {
        if !matches!(m.op, MatchOp::Equal) {
            return Err(bad(format!("label `{}`: only `=` is allowed", m.name)));
        }
        pairs.push((m.name, m.value));
    }
    Ok(Labels::from_pairs(pairs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::is_stale;

    fn vals(s: &str) -> Vec<Option<f64>> {
        expand_values(s)
            .unwrap()
            .into_iter()
            .map(|p| match p {
                Point::Blank => None,
                Point::Value(v) => Some(v),
            })
            .collect()
    }

    #[test]
    fn expands_promtool_forms() {
        assert_eq!(vals("0+10x3"), [Some(0.0), Some(10.0), Some(20.0), Some(30.0)]);
        assert_eq!(
            vals("5-1x2 _ 7"),
            [Some(5.0), Some(4.0), Some(3.0), None, Some(7.0)]
        );
        assert_eq!(vals("1x2 _x2"), [Some(1.0), Some(1.0), Some(1.0), None, None]);
        assert_eq!(vals("1e3+1e-1x1"), [Some(1000.0), Some(1000.1)]);
        assert_eq!(vals("-2+2x1"), [Some(-2.0), Some(0.0)]);
        let s = expand_values("stale").unwrap();
        assert!(matches!(s[0], Point::Value(v) if is_stale(v)));
    }

    #[test]
    fn rejects_bad_tokens_and_huge_runs() {
        assert_eq!(
            expand_values("1 zz").unwrap_err(),
            NotationError::Value("zz".into())
        );
        assert!(matches!(expand_values("_xq"), Err(NotationError::Repeat(_))));
        assert!(matches!(
            expand_values("0+1x100000000000"),
            Err(NotationError::TooLong(_))
        ));
    }

    #[test]
    fn series_lines() {
        let (l, rest) = parse_series_line(r#"up{job="a}b", i="1"} 1 2"#).unwrap();
        assert_eq!(l.get("job"), Some("a}b"));
        assert_eq!(l.metric_name(), Some("up"));
        assert_eq!(rest.trim(), "1 2");
        assert!(matches!(
            parse_series_line("up{a=\"b\" 1"),
            Err(NotationError::Unclosed(_))
        ));
        assert!(matches!(
            parse_series(r#"up{a=~"b"}"#),
            Err(NotationError::Series { .. })
        ));
    }
}

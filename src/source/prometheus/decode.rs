//! Streaming decoding of Prometheus API answers: the JSON is read as it
//! arrives and each sample is pushed into its series as soon as it is read,
//! so memory is a small multiple of the samples kept (16 bytes each, plus
//! the labels), never of the bytes received, and no JSON tree is built.
//!
//! The envelope's keys may come in any order (`data` before `status`); a
//! `result` is recognised by its shape (series objects, or a `[time, "value"]`
//! pair) and checked against `resultType` at the end.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::eval::{Value, VectorSample};
use crate::store::{Labels, Millis, Sample, Series};

/// Warnings of one answer that are kept; the rest are counted.
const MAX_WARNINGS: usize = 20;
/// Characters kept of one warning or error text.
const MAX_TEXT: usize = 500;

/// The API's envelope, with `data` decoded by a seed.
#[derive(Debug, Default)]
pub struct Envelope<T> {
    pub status: Option<String>,
    pub data: Option<T>,
    pub error_type: Option<String>,
    pub error: Option<String>,
    pub warnings: Vec<String>,
}

/// Decodes the envelope, `data` with `seed`.
pub struct EnvelopeSeed<S>(pub S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for EnvelopeSeed<S> {
    type Value = Envelope<S::Value>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(EnvelopeVisitor(Some(self.0)))
    }
}

struct EnvelopeVisitor<S>(Option<S>);

impl<'de, S: DeserializeSeed<'de>> Visitor<'de> for EnvelopeVisitor<S> {
    type Value = Envelope<S::Value>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the API's JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut m: A) -> Result<Self::Value, A::Error> {
        let mut env = Envelope {
            status: None,
            data: None,
            error_type: None,
            error: None,
            warnings: Vec::new(),
        };
        let mut more_warnings = 0usize;
        while let Some(k) = m.next_key::<KeyName>()? {
            match k.0.as_str() {
                "status" => env.status = Some(m.next_value_seed(ShortText)?),
                "errorType" => env.error_type = m.next_value_seed(OptionalText)?,
                "error" => env.error = m.next_value_seed(OptionalText)?,
                "warnings" | "infos" => {
                    let (kept, more) =
                        m.next_value_seed(Texts(MAX_WARNINGS - env.warnings.len().min(MAX_WARNINGS)))?;
                    env.warnings.extend(kept);
                    more_warnings += more;
                }
                "data" => match self.0.take() {
                    Some(seed) => env.data = Some(m.next_value_seed(seed)?),
                    None => return Err(de::Error::custom("`data` appears twice")),
                },
                _ => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        if more_warnings > 0 {
            env.warnings
                .push(format!("… and {more_warnings} more warnings from the API"));
        }
        Ok(env)
    }
}

/// A key (keys are short; a long one is cut).
struct KeyName(String);

impl<'de> de::Deserialize<'de> for KeyName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        ShortText.deserialize(d).map(KeyName)
    }
}

/// A string, cut to [`MAX_TEXT`] characters.
struct ShortText;

impl<'de> DeserializeSeed<'de> for ShortText {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_str(ShortTextVisitor)
    }
}

struct ShortTextVisitor;

impl Visitor<'_> for ShortTextVisitor {
    type Value = String;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<String, E> {
        Ok(cut(s))
    }
}

fn cut(s: &str) -> String {
    let mut out: String = s.chars().take(MAX_TEXT).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// A string or null, cut.
struct OptionalText;

impl<'de> DeserializeSeed<'de> for OptionalText {
    type Value = Option<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_option(OptionalTextVisitor)
    }
}

struct OptionalTextVisitor;

impl<'de> Visitor<'de> for OptionalTextVisitor {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string or null")
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        ShortText.deserialize(d).map(Some)
    }
}

/// A list of strings: the first `n` kept (cut), the others counted.
struct Texts(usize);

impl<'de> DeserializeSeed<'de> for Texts {
    type Value = (Vec<String>, usize);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(TextsVisitor(self.0))
    }
}

struct TextsVisitor(usize);

impl<'de> Visitor<'de> for TextsVisitor {
    type Value = (Vec<String>, usize);
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of strings")
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok((Vec::new(), 0))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok((Vec::new(), 0))
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Self::Value, A::Error> {
        let (mut kept, mut more) = (Vec::new(), 0);
        loop {
            if kept.len() < self.0 {
                match s.next_element_seed(ShortText)? {
                    Some(t) => kept.push(t),
                    None => break,
                }
            } else {
                match s.next_element::<IgnoredAny>()? {
                    Some(_) => more += 1,
                    None => break,
                }
            }
        }
        Ok((kept, more))
    }
}

/// A query's `data`: `resultType` and `result`.
pub struct QueryDataSeed;

/// What a query's `data` held, before its type is checked.
#[derive(Debug, Default)]
pub struct QueryData {
    pub result_type: Option<String>,
    pub result: Option<Decoded>,
    /// Series that held native histogram samples (not read).
    pub histograms: usize,
}

/// A `result` as read.
#[derive(Debug)]
pub enum Decoded {
    /// A list of series objects (a matrix or a vector; an empty list is both).
    Series(Vec<DecodedSeries>),
    /// A `[time, "value"]` pair (a scalar or a string).
    Pair(f64, String),
}

/// One series object: its labels and its points (`values`), or its one
/// point (`value`).
#[derive(Debug)]
pub struct DecodedSeries {
    pub labels: Labels,
    pub samples: Vec<Sample>,
    /// It had `value` (a vector element) rather than `values`.
    pub instant: bool,
}

impl<'de> DeserializeSeed<'de> for QueryDataSeed {
    type Value = QueryData;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<QueryData, D::Error> {
        d.deserialize_map(QueryDataVisitor)
    }
}

struct QueryDataVisitor;

impl<'de> Visitor<'de> for QueryDataVisitor {
    type Value = QueryData;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object with `resultType` and `result`")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<QueryData, A::Error> {
        let mut q = QueryData::default();
        while let Some(k) = m.next_key::<KeyName>()? {
            match k.0.as_str() {
                "resultType" => q.result_type = Some(m.next_value_seed(ShortText)?),
                "result" => {
                    let (r, h) = m.next_value_seed(ResultSeed)?;
                    q.result = Some(r);
                    q.histograms += h;
                }
                _ => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(q)
    }
}

struct ResultSeed;

impl<'de> DeserializeSeed<'de> for ResultSeed {
    type Value = (Decoded, usize);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(ResultVisitor)
    }
}

struct ResultVisitor;

/// One element of a `result` list: a series, or a part of a scalar pair.
enum Element {
    Series(DecodedSeries, bool),
    Number(f64),
    Text(String),
}

impl<'de> Visitor<'de> for ResultVisitor {
    type Value = (Decoded, usize);
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of series or a [time, value] pair")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Self::Value, A::Error> {
        let mut series = Vec::new();
        let mut histograms = 0;
        let mut pair: (Option<f64>, Option<String>) = (None, None);
        while let Some(e) = s.next_element_seed(ElementSeed)? {
            match e {
                Element::Series(x, h) => {
                    histograms += usize::from(h);
                    series.push(x);
                }
                Element::Number(t) if pair.0.is_none() && series.is_empty() => pair.0 = Some(t),
                Element::Text(v) if pair.0.is_some() && pair.1.is_none() => pair.1 = Some(v),
                _ => return Err(de::Error::custom("a result mixes series and values")),
            }
        }
        match pair {
            (None, None) => Ok((Decoded::Series(series), histograms)),
            (Some(t), Some(v)) => Ok((Decoded::Pair(t, v), 0)),
            _ => Err(de::Error::custom("a scalar result is not a [time, value] pair")),
        }
    }
}

struct ElementSeed;

impl<'de> DeserializeSeed<'de> for ElementSeed {
    type Value = Element;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Element, D::Error> {
        d.deserialize_any(ElementVisitor)
    }
}

struct ElementVisitor;

impl<'de> Visitor<'de> for ElementVisitor {
    type Value = Element;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a series object, a time or a value")
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Element, E> {
        Ok(Element::Number(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Element, E> {
        Ok(Element::Number(v as f64))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Element, E> {
        Ok(Element::Number(v as f64))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Element, E> {
        Ok(Element::Text(v.to_string()))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Element, A::Error> {
        let mut labels = Labels::new();
        let mut samples = Vec::new();
        let mut instant = false;
        let mut histogram = false;
        while let Some(k) = m.next_key::<KeyName>()? {
            match k.0.as_str() {
                "metric" => labels = m.next_value_seed(LabelsSeed)?,
                "values" => m.next_value_seed(PointsSeed(&mut samples))?,
                "value" => {
                    instant = true;
                    samples.push(m.next_value_seed(PointSeed)?);
                }
                "histograms" | "histogram" => {
                    histogram = true;
                    m.next_value::<IgnoredAny>()?;
                }
                _ => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        samples.shrink_to_fit();
        Ok(Element::Series(
            DecodedSeries {
                labels,
                samples,
                instant,
            },
            histogram,
        ))
    }
}

struct LabelsSeed;

impl<'de> DeserializeSeed<'de> for LabelsSeed {
    type Value = Labels;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Labels, D::Error> {
        d.deserialize_map(LabelsVisitor)
    }
}

struct LabelsVisitor;

impl<'de> Visitor<'de> for LabelsVisitor {
    type Value = Labels;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object of label names and values")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Labels, A::Error> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        while let Some((k, v)) = m.next_entry::<String, String>()? {
            pairs.push((k, v));
        }
        Ok(Labels::from_pairs(pairs))
    }
}

/// Appends `[[t, "v"], …]` to a series' samples as they are read.
struct PointsSeed<'a>(&'a mut Vec<Sample>);

impl<'de> DeserializeSeed<'de> for PointsSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for PointsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of [time, value] pairs")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
        while let Some(p) = s.next_element_seed(PointSeed)? {
            self.0.push(p);
        }
        Ok(())
    }
}

/// One `[t, "v"]` pair.
struct PointSeed;

impl<'de> DeserializeSeed<'de> for PointSeed {
    type Value = Sample;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Sample, D::Error> {
        d.deserialize_seq(PointVisitor)
    }
}

struct PointVisitor;

impl<'de> Visitor<'de> for PointVisitor {
    type Value = Sample;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a [time, \"value\"] pair")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Sample, A::Error> {
        let t: f64 = s
            .next_element()?
            .ok_or_else(|| de::Error::custom("a point without its time"))?;
        let v = s
            .next_element_seed(ValueSeed)?
            .ok_or_else(|| de::Error::custom("a point without its value"))?;
        if s.next_element::<IgnoredAny>()?.is_some() {
            return Err(de::Error::custom("a point with more than a time and a value"));
        }
        Ok(Sample { t: to_millis(t), v })
    }
}

/// A sample value as the API writes it (`"1.5"`, `"NaN"`, `"+Inf"`), read
/// without allocating.
struct ValueSeed;

impl<'de> DeserializeSeed<'de> for ValueSeed {
    type Value = f64;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<f64, D::Error> {
        d.deserialize_str(ValueVisitor)
    }
}

struct ValueVisitor;

impl Visitor<'_> for ValueVisitor {
    type Value = f64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a sample value as a string")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<f64, E> {
        parse_value(s).ok_or_else(|| E::custom("a sample value is not a number"))
    }
}

/// Seconds (with fractions) to milliseconds.
pub fn to_millis(t: f64) -> Millis {
    (t * 1000.0).round() as Millis
}

/// A sample value as the API writes it.
pub fn parse_value(s: &str) -> Option<f64> {
    match s {
        "NaN" => Some(f64::NAN),
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => s.parse().ok(),
    }
}

/// The decoded data as a [`Value`] of its declared `resultType`.
pub fn into_value(q: QueryData, warnings: &mut Vec<String>) -> Result<Value, String> {
    let rt = q.result_type.ok_or("the data has no `resultType`")?;
    let r = q.result.ok_or("the data has no `result`")?;
    if q.histograms > 0 {
        warnings.push(format!(
            "{} series held native histogram samples, which cptriage does not read",
            q.histograms
        ));
    }
    match (rt.as_str(), r) {
        ("matrix", Decoded::Series(s)) => Ok(Value::Matrix(
            s.into_iter()
                .map(|x| Series {
                    labels: x.labels,
                    samples: x.samples,
                })
                .collect(),
        )),
        ("vector", Decoded::Series(s)) => Ok(Value::Vector(
            s.into_iter()
                .filter_map(|x| {
                    x.samples.first().map(|p| VectorSample {
                        labels: x.labels.clone(),
                        v: p.v,
                    })
                })
                .collect(),
        )),
        ("scalar", Decoded::Pair(_, v)) => parse_value(&v)
            .map(Value::Scalar)
            .ok_or_else(|| "the scalar value is not a number".to_string()),
        ("string", Decoded::Pair(_, v)) => Ok(Value::String(v)),
        ("matrix" | "vector" | "scalar" | "string", _) => {
            Err(format!("the result does not have the shape of a {rt}"))
        }
        (other, _) => Err(format!(
            "unknown result type {}",
            if crate::secret::is_plain_identifier(other) {
                format!("`{other}`")
            } else {
                "(not shown)".into()
            }
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(json: &str) -> Result<(Envelope<QueryData>, Vec<String>), String> {
        let mut d = serde_json::Deserializer::from_reader(json.as_bytes());
        let env = EnvelopeSeed(QueryDataSeed)
            .deserialize(&mut d)
            .map_err(|e| e.to_string())?;
        d.end().map_err(|e| e.to_string())?;
        Ok((env, Vec::new()))
    }

    #[test]
    fn a_matrix_in_any_key_order() {
        let (env, _) = decode(
            r#"{"data":{"result":[{"values":[[1.5,"1"],[3,"NaN"]],"metric":{"b":"2","a":"1"}}],"resultType":"matrix"},"warnings":["w"],"status":"success"}"#,
        )
        .unwrap();
        assert_eq!(env.status.as_deref(), Some("success"));
        assert_eq!(env.warnings, vec!["w".to_string()]);
        let mut w = Vec::new();
        let Value::Matrix(m) = into_value(env.data.unwrap(), &mut w).unwrap() else {
            panic!("not a matrix")
        };
        assert_eq!(m[0].labels.get("a"), Some("1"));
        assert_eq!(m[0].samples[0], Sample { t: 1500, v: 1.0 });
        assert!(m[0].samples[1].v.is_nan());
    }

    #[test]
    fn vectors_scalars_strings_and_histograms() {
        let mut w = Vec::new();
        let (env, _) = decode(r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"+Inf"]},{"metric":{"x":"y"},"histogram":[1,{}]}]}}"#).unwrap();
        let Value::Vector(v) = into_value(env.data.unwrap(), &mut w).unwrap() else {
            panic!()
        };
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].v, f64::INFINITY);
        assert_eq!(w.len(), 1, "{w:?}");
        let (env, _) =
            decode(r#"{"status":"success","data":{"resultType":"scalar","result":[2,"0.5"]}}"#).unwrap();
        assert_eq!(into_value(env.data.unwrap(), &mut w), Ok(Value::Scalar(0.5)));
        let (env, _) =
            decode(r#"{"status":"success","data":{"resultType":"string","result":[2,"hi"]}}"#).unwrap();
        assert_eq!(
            into_value(env.data.unwrap(), &mut w),
            Ok(Value::String("hi".into()))
        );
        let (env, _) =
            decode(r#"{"status":"success","data":{"resultType":"matrix","result":[2,"hi"]}}"#).unwrap();
        assert!(into_value(env.data.unwrap(), &mut w).is_err());
    }

    #[test]
    fn bad_values_are_errors_without_the_value() {
        let e = decode(r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"s3cr3t-value"]]}]}}"#).unwrap_err();
        assert!(e.contains("not a number") && !e.contains("s3cr3t"), "{e}");
    }

    #[test]
    fn warnings_are_bounded() {
        let many: Vec<String> = (0..100).map(|i| format!("\"{}{i}\"", "x".repeat(1000))).collect();
        let (env, _) = decode(&format!(
            r#"{{"status":"success","warnings":[{}],"data":{{"resultType":"vector","result":[]}}}}"#,
            many.join(",")
        ))
        .unwrap();
        assert_eq!(env.warnings.len(), MAX_WARNINGS + 1);
        assert!(env.warnings[0].chars().count() <= MAX_TEXT + 1);
        assert!(env.warnings[MAX_WARNINGS].contains("80 more"));
    }
}

//! Label sets: sorted `(name, value)` pairs with shared (interned) strings.
//!
//! Every series in the store and every element of an evaluation result carries a
//! [`Labels`]. The metric name is the `__name__` label, as in Prometheus.

use std::fmt;
use std::sync::Arc;

/// The label holding the metric name.
pub const METRIC_NAME: &str = "__name__";

/// A shared, immutable string one pointer wide (an `Arc<str>` is two), so a
/// label costs 16 bytes: the store holds millions of them for a large cluster.
/// Compares, orders and hashes as the text it holds.
#[derive(Clone, Default, Eq)]
pub struct Str(Arc<Box<str>>);

impl std::hash::Hash for Str {
    /// As the text (so that `Borrow<str>` lookups work).
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (**self.0).hash(h);
    }
}

impl PartialEq for Str {
    fn eq(&self, other: &Str) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || **self.0 == **other.0
    }
}

impl PartialOrd for Str {
    fn partial_cmp(&self, other: &Str) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Str {
    /// Interned strings are usually the same allocation: compared without
    /// reading them.
    fn cmp(&self, other: &Str) -> std::cmp::Ordering {
        if Arc::ptr_eq(&self.0, &other.0) {
            std::cmp::Ordering::Equal
        } else {
            (**self.0).cmp(&**other.0)
        }
    }
}

impl Str {
    /// Whether both are the same shared string (not merely equal text).
    pub fn ptr_eq(a: &Str, b: &Str) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

impl std::ops::Deref for Str {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for Str {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Str {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Str {
    fn from(s: &str) -> Str {
        Str(Arc::new(Box::from(s)))
    }
}

impl fmt::Display for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

impl fmt::Debug for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// One label: a name and a value, both shared strings.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Label {
    pub name: Str,
    pub value: Str,
}

/// A label set, kept sorted by label name with unique names and no empty values
/// (Prometheus treats an empty label value as an absent label).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Labels(Vec<Label>);

impl Labels {
    /// An empty label set.
    pub fn new() -> Self {
        Labels(Vec::new())
    }

    /// Builds a label set from pairs in any order. Later duplicates win; empty
    /// values are dropped.
    pub fn from_pairs<N: AsRef<str>, V: AsRef<str>>(pairs: impl IntoIterator<Item = (N, V)>) -> Self {
        let mut l = Labels::new();
        for (n, v) in pairs {
            l.set(n.as_ref(), v.as_ref());
        }
        l
    }

    /// Builds a label set from already-shared strings (used by the store's interner).
    pub fn from_shared(mut labels: Vec<Label>) -> Self {
        labels.retain(|l| !l.value.is_empty());
        labels.sort_by(|a, b| a.name.cmp(&b.name));
        labels.dedup_by(|later, earlier| {
            if later.name == earlier.name {
                earlier.value = later.value.clone();
                true
            } else {
                false
            }
        });
        Labels(labels)
    }

    /// The value of label `name`, if present.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .binary_search_by(|l| (*l.name).cmp(name))
            .ok()
            .map(|i| &*self.0[i].value)
    }

    /// The metric name (`__name__`), if present.
    pub fn metric_name(&self) -> Option<&str> {
        self.get(METRIC_NAME)
    }

    /// Sets (or, with an empty value, removes) a label.
    pub fn set(&mut self, name: &str, value: &str) {
        match self.0.binary_search_by(|l| (*l.name).cmp(name)) {
            Ok(i) => {
                if value.is_empty() {
                    self.0.remove(i);
                } else if &*self.0[i].value != value {
                    self.0[i].value = Str::from(value);
                }
            }
            Err(i) => {
                if !value.is_empty() {
                    self.0.insert(
                        i,
                        Label {
                            name: Str::from(name),
                            value: Str::from(value),
                        },
                    );
                }
            }
        }
    }

    /// Sets a label from shared strings without copying them.
    pub fn set_shared(&mut self, name: Str, value: Str) {
        match self.0.binary_search_by(|l| l.name.cmp(&name)) {
            Ok(i) => {
                if value.is_empty() {
                    self.0.remove(i);
                } else {
                    self.0[i].value = value;
                }
            }
            Err(i) => {
                if !value.is_empty() {
                    self.0.insert(i, Label { name, value });
                }
            }
        }
    }

    /// Removes a label if present.
    pub fn remove(&mut self, name: &str) {
        if let Ok(i) = self.0.binary_search_by(|l| (*l.name).cmp(name)) {
            self.0.remove(i);
        }
    }

    /// A copy without the metric name.
    pub fn without_name(&self) -> Labels {
        let mut l = self.clone();
        l.remove(METRIC_NAME);
        l
    }

    /// Only the labels whose names are in `names`.
    pub fn keep_only(&self, names: &[impl AsRef<str>]) -> Labels {
        Labels(
            self.0
                .iter()
                .filter(|l| names.iter().any(|n| n.as_ref() == &*l.name))
                .cloned()
                .collect(),
        )
    }

    /// All labels except those whose names are in `names`.
    pub fn drop_names(&self, names: &[impl AsRef<str>]) -> Labels {
        Labels(
            self.0
                .iter()
                .filter(|l| !names.iter().any(|n| n.as_ref() == &*l.name))
                .cloned()
                .collect(),
        )
    }

    /// Iterates over the labels in name order.
    pub fn iter(&self) -> impl Iterator<Item = &Label> {
        self.0.iter()
    }

    /// Number of labels.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Labels {
    /// Prometheus notation: `name{a="b", c="d"}`; `{}` for an empty set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.metric_name();
        if let Some(n) = name {
            f.write_str(n)?;
        }
        let rest: Vec<&Label> = self.0.iter().filter(|l| &*l.name != METRIC_NAME).collect();
        if rest.is_empty() && name.is_some() {
            return Ok(());
        }
        f.write_str("{")?;
        for (i, l) in rest.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{}=\"", l.name)?;
            for c in l.value.chars() {
                match c {
                    '\\' => f.write_str("\\\\")?,
                    '"' => f.write_str("\\\"")?,
                    '\n' => f.write_str("\\n")?,
                    c => write!(f, "{c}")?,
                }
            }
            f.write_str("\"")?;
        }
        f.write_str("}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_unique_and_empty_values_dropped() {
        let l = Labels::from_pairs([("b", "2"), ("a", "1"), ("b", "3"), ("c", "")]);
        let names: Vec<&str> = l.iter().map(|l| &*l.name).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(l.get("b"), Some("3"));
        assert_eq!(l.get("c"), None);
    }

    #[test]
    fn display_is_prometheus_notation() {
        let l = Labels::from_pairs([("__name__", "up"), ("job", "a\"b"), ("i", "x\\y")]);
        assert_eq!(l.to_string(), r#"up{i="x\\y", job="a\"b"}"#);
        assert_eq!(Labels::from_pairs([("__name__", "up")]).to_string(), "up");
        assert_eq!(Labels::new().to_string(), "{}");
    }
}

//! Reading the YAML documents users give cptriage (capture manifests,
//! kubeconfigs, rule files, rule unit tests): one place that bounds their
//! nesting before parsing ([`crate::limits::yaml_nesting`]), locates every
//! error at a line and column, and keeps scalar content out of the message
//! ([`crate::secret::serde_message`]): a private key given as a kubeconfig is
//! reported as "a string (not shown)", never quoted.

use serde::de::DeserializeOwned;

/// A YAML document that could not be read as the expected type.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
#[error("{line}:{column}: {message}")]
pub struct YamlError {
    /// 1-based.
    pub line: usize,
    pub column: usize,
    /// What is wrong, without the location and without scalar content.
    pub message: String,
}

/// Parses `text` as one YAML document of type `T`.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    crate::limits::yaml_nesting(text).map_err(|e| YamlError {
        line: e.line,
        column: e.column,
        message: e.reason(),
    })?;
    serde_yaml::from_str(text).map_err(|e| {
        let (line, column) = error_location(text, &e);
        let mut message = crate::secret::serde_message(&strip_location(&e.to_string()));
        if text.contains("-----BEGIN ") {
            message.push_str(" (the file holds a PEM block: a key or certificate, not YAML of this kind)");
        }
        YamlError {
            line,
            column,
            message,
        }
    })
}

/// The line and column of a serde_yaml error. Errors without a location (a
/// second YAML document) point at the line that starts the second document, or
/// at 1:1.
fn error_location(text: &str, e: &serde_yaml::Error) -> (usize, usize) {
    if let Some(l) = e.location() {
        return (l.line(), l.column());
    }
    let mut content = false;
    for (i, line) in text.lines().enumerate() {
        if content && (line.starts_with("---") || line.starts_with("...")) {
            return (i + 1, 1);
        }
        let t = line.trim_start();
        content |= !t.is_empty() && !t.starts_with('#') && !t.starts_with('%');
    }
    (1, 1)
}

/// serde_yaml appends " at line L column C"; cptriage prints the location first.
fn strip_location(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) if msg[i..].contains(" column ") => msg[..i].to_string(),
        _ => msg.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Doc {
        name: String,
        #[serde(default)]
        count: u32,
    }

    #[test]
    fn a_key_file_is_not_quoted() {
        let key = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n";
        let e = from_str::<Doc>(key).unwrap_err();
        assert!(!e.message.contains("MIGH") && !e.message.contains("BEGIN"), "{e}");
        assert!(e.message.contains("a string (not shown)"), "{e}");
        assert!(e.message.contains("PEM block"), "{e}");
        let e = from_str::<Doc>("name: a\ncount: secret-value-1\n").unwrap_err();
        assert!(!e.message.contains("secret-value-1"), "{e}");
        assert_eq!(e.line, 2, "{e}");
    }

    #[test]
    fn deep_documents_are_refused_before_parsing() {
        let text = format!("name: {}{}\n", "{a: ".repeat(100_000), "}".repeat(100_000));
        let start = std::time::Instant::now();
        let e = from_str::<Doc>(&text).unwrap_err();
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
        assert!(e.message.contains("nested more than"), "{e}");
        assert_eq!(e.line, 1);
    }

    #[test]
    fn a_second_document_is_located() {
        let e = from_str::<Doc>("name: a\n---\nname: b\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 1), "{e}");
    }
}

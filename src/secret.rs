//! Keeping credentials out of what cptriage prints and writes.
//!
//! Files given by mistake (a private key as `--kubeconfig`, a token file as
//! `--rules`) and servers that reflect request headers put secrets within reach
//! of error messages. Three layers keep them out:
//!
//! - **Structure.** Parse errors never quote scalar content:
//!   [`serde_message`] rewrites serde's `invalid type: string "…"` (and the
//!   numbers, booleans and characters it quotes) to name only the kind of
//!   value, and keeps a quoted key or variant only when it is a short plain
//!   identifier.
//! - **Known values.** [`KnownSecrets`] holds the credentials cptriage sends
//!   (bearer tokens, passwords, their `Authorization` header forms) and
//!   replaces them wherever a response or message repeats them.
//! - **Shape.** [`scrub`] replaces PEM blocks, JWTs and long high-entropy
//!   words, for text shown from files (rule file lines) and from servers.

use std::borrow::Cow;
use std::fmt;

/// A credential (token or private key): never printed, not even by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    pub fn new(bytes: impl Into<Vec<u8>>) -> Secret {
        Secret(bytes.into())
    }
    /// The secret bytes (only for putting them on the wire).
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// What replaces a secret.
pub const REDACTED: &str = "<redacted>";

/// Whether `word` looks like a credential: a PEM marker, a JWT, or a long
/// random-looking token (mixed case with digits, or long hexadecimal).
pub fn looks_secret(word: &str) -> bool {
    if word.contains("-----BEGIN") || word.contains("-----END") || word.contains("PRIVATE KEY") {
        return true;
    }
    token_runs(word).any(|(s, e)| run_is_secret(&word[s..e]))
}

/// Runs of base64/base64url/hex characters (the alphabet of keys and tokens).
fn token_runs(text: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let b = text.as_bytes();
    let is_tok = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=' | b'_' | b'-');
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < b.len() && !is_tok(b[i]) {
            i += 1;
        }
        if i >= b.len() {
            return None;
        }
        let s = i;
        while i < b.len() && is_tok(b[i]) {
            i += 1;
        }
        Some((s, i))
    })
}

fn run_is_secret(run: &str) -> bool {
    // JWT segments are joined by dots, which end a run: the header alone is
    // recognisable (`eyJ` is `{"` in base64).
    if run.starts_with("eyJ") && run.len() >= 16 {
        return true;
    }
    // A path is split on `/`: only a long segment can be a token.
    run.split('/').any(|seg| {
        let n = seg.len();
        let count = |f: fn(&u8) -> bool| seg.as_bytes().iter().filter(|c| f(c)).count();
        let (upper, lower, digit) = (
            count(u8::is_ascii_uppercase),
            count(u8::is_ascii_lowercase),
            count(u8::is_ascii_digit),
        );
        let hex = seg.bytes().all(|c| c.is_ascii_hexdigit());
        (n >= 20 && upper >= 3 && lower >= 3 && digit >= 2)
            || (n >= 32 && hex && digit >= 6 && upper + lower >= 6)
    })
}

/// `text` with PEM blocks and credential-looking words replaced by
/// [`REDACTED`]. Text without any is returned as is.
pub fn scrub(text: &str) -> Cow<'_, str> {
    if !text.contains("-----") && !token_runs(text).any(|(s, e)| run_is_secret(&text[s..e])) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    // PEM blocks first (their base64 lines can be short).
    while let Some(start) = rest.find("-----BEGIN") {
        out.push_str(&scrub_words(&rest[..start]));
        out.push_str(REDACTED);
        rest = &rest[start..];
        match rest.find("-----END") {
            Some(end) => {
                let after = &rest[end + 8..];
                let close = after.find("-----").map(|i| i + 5).unwrap_or(after.len());
                rest = &after[close..];
            }
            None => rest = "",
        }
    }
    out.push_str(&scrub_words(rest));
    Cow::Owned(out)
}

fn scrub_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (s, e) in token_runs(text) {
        if run_is_secret(&text[s..e]) {
            out.push_str(&text[last..s]);
            out.push_str(REDACTED);
            last = e;
        }
    }
    out.push_str(&text[last..]);
    out.replace("-----END", REDACTED)
}

/// A serde (YAML or JSON) error message without the scalar content it
/// quotes: `invalid type: string "…", expected struct X` becomes
/// `invalid type: a string (not shown), expected struct X`; a quoted key or
/// variant (`` unknown field `x` ``) is kept only when it is a short plain
/// identifier that does not look like a credential.
pub fn serde_message(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let b = msg.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let rest = &msg[i..];
        if let Some(after) = rest.strip_prefix("string \"") {
            // serde writes the string with `{:?}`: find the closing quote.
            let mut j = 0;
            let ab = after.as_bytes();
            while j < ab.len() && ab[j] != b'"' {
                j += if ab[j] == b'\\' { 2 } else { 1 };
            }
            out.push_str("a string (not shown)");
            i += "string \"".len() + (j + 1).min(ab.len());
            continue;
        }
        let quoted_kind = ["integer `", "floating point `", "boolean `", "character `"]
            .into_iter()
            .find(|p| rest.starts_with(p));
        if let Some(p) = quoted_kind {
            let end = rest[p.len()..]
                .find('`')
                .map(|e| p.len() + e + 1)
                .unwrap_or(rest.len());
            out.push_str(&format!("{} (not shown)", p.trim_end_matches(" `")));
            i += end;
            continue;
        }
        if b[i] == b'`' {
            if let Some(e) = rest[1..].find('`') {
                let inner = &rest[1..1 + e];
                if is_plain_identifier(inner) {
                    out.push('`');
                    out.push_str(inner);
                    out.push('`');
                } else {
                    out.push_str("(a value not shown)");
                }
                i += e + 2;
                continue;
            }
        }
        let c = rest.chars().next().unwrap_or(' ');
        out.push(c);
        i += c.len_utf8();
    }
    scrub(&out).into_owned()
}

/// A short name made of letters, digits, `_`, `-`, `.`, `/` and `:` that does
/// not look like a credential (field names, enum variants, roles).
pub fn is_plain_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | ':' | '$'))
        && !looks_secret(s)
}

/// The credentials cptriage sends, to be replaced wherever a server (or a
/// message) repeats them. Values shorter than 4 bytes are not matched.
#[derive(Clone, Default)]
pub struct KnownSecrets(Vec<Vec<u8>>);

impl std::fmt::Debug for KnownSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KnownSecrets({} values)", self.0.len())
    }
}

impl KnownSecrets {
    pub fn new() -> KnownSecrets {
        KnownSecrets(Vec::new())
    }

    /// Adds a secret value (and nothing when it is too short to match safely).
    pub fn add(&mut self, value: &[u8]) {
        let v = value.trim_ascii();
        if v.len() >= 4 && !self.0.iter().any(|x| x == v) {
            self.0.push(v.to_vec());
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Replaces every known secret in `bytes`; returns whether any was found.
    pub fn scrub_bytes(&self, bytes: &mut Vec<u8>) -> bool {
        let mut found = false;
        for s in &self.0 {
            if memchr::memmem::find(bytes, s).is_none() {
                continue;
            }
            found = true;
            let finder = memchr::memmem::Finder::new(s);
            let mut out = Vec::with_capacity(bytes.len());
            let mut last = 0;
            for at in finder.find_iter(bytes) {
                if at < last {
                    continue;
                }
                out.extend_from_slice(&bytes[last..at]);
                out.extend_from_slice(REDACTED.as_bytes());
                last = at + s.len();
            }
            out.extend_from_slice(&bytes[last..]);
            *bytes = out;
        }
        found
    }

    /// `text` with every known secret replaced (and nothing else), when it
    /// held one: for data (label values), where the shape rules of [`scrub`]
    /// would also hit container ids and hashes.
    pub fn replace_known(&self, text: &str) -> Option<String> {
        let mut b = text.as_bytes().to_vec();
        self.scrub_bytes(&mut b)
            .then(|| String::from_utf8_lossy(&b).into_owned())
    }

    /// `text` with every known secret replaced, then [`scrub`]bed.
    pub fn scrub_str(&self, text: &str) -> String {
        let mut b = text.as_bytes().to_vec();
        self.scrub_bytes(&mut b);
        scrub(&String::from_utf8_lossy(&b)).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_look_secret_and_names_do_not() {
        for s in [
            "-----BEGIN PRIVATE KEY-----",
            "eyJhbGciOiJSUzI1NiIsImtpZCI6IiJ9",
            "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg",
            "cAnArY7Qx2Vb9Lm4Zt8Rk3Wp",
            "3f9a7c1e5b2d4f6a8c0e1b3d5f7a9c2e",
        ] {
            assert!(looks_secret(s), "{s}");
        }
        for s in [
            "apiserver_request_duration_seconds_bucket",
            "/tmp/.tmpX4f9aB/kubeconfig.yaml",
            "/home/User1/Projects/Cluster2024/kube/config",
            "etcd-0",
            "k8s.io",
            "2026-01-01T00:00:00Z",
            "v1.30.1",
        ] {
            assert!(!looks_secret(s), "{s}");
        }
    }

    #[test]
    fn scrub_replaces_pem_blocks_and_tokens() {
        let t = "key: -----BEGIN EC PRIVATE KEY-----\nMHcCAQEEI\n-----END EC PRIVATE KEY----- and token cAnArY7Qx2Vb9Lm4Zt8Rk3Wp end";
        assert_eq!(scrub(t), "key: <redacted> and token <redacted> end");
        assert!(matches!(scrub("plain text"), Cow::Borrowed(_)));
    }

    #[test]
    fn serde_messages_lose_their_scalars() {
        assert_eq!(
            serde_message(
                r#"invalid type: string "-----BEGIN PRIVATE KEY----- MIG\"x", expected struct RawConfig"#
            ),
            "invalid type: a string (not shown), expected struct RawConfig"
        );
        assert_eq!(
            serde_message("invalid type: integer `12345678`, expected a string"),
            "invalid type: integer (not shown), expected a string"
        );
        assert_eq!(
            serde_message("unknown field `retention`, expected one of `format`, `targets`"),
            "unknown field `retention`, expected one of `format`, `targets`"
        );
        assert_eq!(
            serde_message("unknown variant `cAnArY7Qx2Vb9Lm4Zt8Rk3Wp`, expected `above`"),
            "unknown variant (a value not shown), expected `above`"
        );
        assert_eq!(
            serde_message("unknown role `a b`"),
            "unknown role (a value not shown)"
        );
    }

    #[test]
    fn known_secrets_are_replaced() {
        let mut k = KnownSecrets::new();
        k.add(b"hunter2-secret\n");
        k.add(b"ab");
        let mut b = b"Authorization: Bearer hunter2-secret; again hunter2-secret".to_vec();
        assert!(k.scrub_bytes(&mut b));
        assert_eq!(b, b"Authorization: Bearer <redacted>; again <redacted>");
        assert_eq!(k.scrub_str("ab ab"), "ab ab");
    }
}

//! Bearer tokens that stay valid through a long recording, as kubectl keeps
//! them: an exec credential plugin is run again when its token expires
//! (`expirationTimestamp`) or the apiserver answers 401; a token file (also
//! the in-cluster service account's, which the kubelet rotates) is read again
//! every minute and after a 401. All apiserver targets share one source, so a
//! refresh happens once for all of them.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::secret::Secret;

/// A new token and its expiry, or why none could be had (the error of the
/// plugin run or the file read).
pub type RefreshResult = Result<(Secret, Option<SystemTime>), Box<dyn std::error::Error + Send + Sync>>;

/// How to get a fresh token.
#[derive(Clone)]
pub struct TokenRefresh {
    /// `exec plugin` or `token file` (for messages).
    pub kind: &'static str,
    /// Re-read on this period even without an expiry (token files).
    pub period: Option<Duration>,
    fetch: Arc<dyn Fn() -> RefreshResult + Send + Sync>,
}

impl TokenRefresh {
    pub fn new(
        kind: &'static str,
        period: Option<Duration>,
        fetch: impl Fn() -> RefreshResult + Send + Sync + 'static,
    ) -> TokenRefresh {
        TokenRefresh {
            kind,
            period,
            fetch: Arc::new(fetch),
        }
    }
}

impl fmt::Debug for TokenRefresh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TokenRefresh({})", self.kind)
    }
}

/// A token is renewed this long before it expires.
pub const EXPIRY_MARGIN: Duration = Duration::from_secs(5);

/// The period token files are read again (client-go's is one minute).
pub const FILE_PERIOD: Duration = Duration::from_secs(60);

struct State {
    token: Secret,
    expiry: Option<SystemTime>,
    fetched: Instant,
    refreshes: usize,
    last_error: Option<String>,
}

/// A bearer token shared by the targets of one identity.
#[derive(Clone)]
pub struct TokenSource {
    state: Arc<Mutex<State>>,
    refresh: Option<TokenRefresh>,
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TokenSource(<redacted>, refresh: {:?})", self.refresh)
    }
}

impl TokenSource {
    pub fn new(token: Secret, expiry: Option<SystemTime>, refresh: Option<TokenRefresh>) -> TokenSource {
        TokenSource {
            state: Arc::new(Mutex::new(State {
                token,
                expiry,
                fetched: Instant::now(),
                refreshes: 0,
                last_error: None,
            })),
            refresh,
        }
    }

    /// A token that never changes.
    pub fn fixed(token: Secret) -> TokenSource {
        TokenSource::new(token, None, None)
    }

    fn due(&self, s: &State) -> bool {
        let Some(r) = &self.refresh else { return false };
        s.expiry.is_some_and(|e| SystemTime::now() + EXPIRY_MARGIN >= e)
            || r.period.is_some_and(|p| s.fetched.elapsed() >= p)
    }

    fn renew(&self, s: &mut State) {
        let Some(r) = &self.refresh else { return };
        match (r.fetch)() {
            Ok((t, e)) => {
                s.token = t;
                s.expiry = e;
                s.last_error = None;
                s.refreshes += 1;
            }
            // The old token is kept: it may still be accepted.
            Err(m) => s.last_error = Some(format!("renewing the token ({}) failed: {m}", r.kind)),
        }
        s.fetched = Instant::now();
    }

    /// The token to send now, renewed first when it is about to expire.
    pub fn current(&self) -> Secret {
        let mut s = match self.state.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        if self.due(&s) {
            self.renew(&mut s);
        }
        s.token.clone()
    }

    /// After a 401 with `used`: a different token to retry with, if one can
    /// be had (another target may already have renewed it).
    pub fn after_unauthorized(&self, used: &Secret) -> Option<Secret> {
        self.refresh.as_ref()?;
        let mut s = match self.state.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        if s.token != *used {
            return Some(s.token.clone());
        }
        self.renew(&mut s);
        (s.token != *used).then(|| s.token.clone())
    }

    /// How many times the token was renewed.
    pub fn refreshes(&self) -> usize {
        self.state.lock().map(|s| s.refreshes).unwrap_or(0)
    }

    /// The last renewal failure, if the last attempt failed.
    pub fn last_error(&self) -> Option<String> {
        self.state.lock().ok().and_then(|s| s.last_error.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn counting(expires_in: Option<Duration>) -> (TokenSource, Arc<AtomicUsize>) {
        let n = Arc::new(AtomicUsize::new(1));
        let n2 = n.clone();
        let r = TokenRefresh::new("exec plugin", None, move || {
            let i = n2.fetch_add(1, Ordering::SeqCst) + 1;
            Ok((
                Secret::new(format!("tok-{i}")),
                expires_in.map(|d| SystemTime::now() + d),
            ))
        });
        let first_expiry = expires_in.map(|d| SystemTime::now() + d);
        (TokenSource::new(Secret::new("tok-1"), first_expiry, Some(r)), n)
    }

    #[test]
    fn a_token_about_to_expire_is_renewed_before_use() {
        let (ts, _) = counting(Some(Duration::from_secs(1)));
        // Within the margin: renewed at once, and again (each new one expires soon too).
        assert_eq!(ts.current().expose(), b"tok-2");
        assert_eq!(ts.current().expose(), b"tok-3");
        let (ts, n) = counting(Some(Duration::from_secs(3600)));
        assert_eq!(ts.current().expose(), b"tok-1");
        assert_eq!(ts.current().expose(), b"tok-1");
        assert_eq!(n.load(Ordering::SeqCst), 1);
        assert_eq!(ts.refreshes(), 0);
    }

    #[test]
    fn unauthorized_renews_once_and_shares_the_result() {
        let (ts, n) = counting(None);
        let used = ts.current();
        let other = ts.clone();
        assert_eq!(ts.after_unauthorized(&used).unwrap().expose(), b"tok-2");
        // A second target that also used tok-1 gets tok-2 without another run.
        assert_eq!(other.after_unauthorized(&used).unwrap().expose(), b"tok-2");
        assert_eq!(n.load(Ordering::SeqCst), 2);
        assert!(TokenSource::fixed(Secret::new("x"))
            .after_unauthorized(&Secret::new("x"))
            .is_none());
    }

    #[test]
    fn a_failed_renewal_keeps_the_old_token_and_says_why() {
        let r = TokenRefresh::new("token file", Some(Duration::ZERO), || Err("gone".into()));
        let ts = TokenSource::new(Secret::new("old"), None, Some(r));
        assert_eq!(ts.current().expose(), b"old");
        assert_eq!(
            ts.last_error().as_deref(),
            Some("renewing the token (token file) failed: gone")
        );
        assert!(!format!("{ts:?}").contains("old"));
    }
}

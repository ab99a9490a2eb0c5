//! The proxy environment as kubectl reads it (Go's `http.ProxyFromEnvironment`):
//! `HTTPS_PROXY`/`https_proxy` for `https` URLs, `HTTP_PROXY`/`http_proxy` for
//! `http`, `NO_PROXY`/`no_proxy` exceptions; `localhost` and loopback
//! addresses never go through a proxy. Used for the apiserver when its
//! kubeconfig cluster has no `proxy-url`.

use std::net::IpAddr;

/// The proxy variables of an environment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProxyEnv {
    pub https_proxy: Option<String>,
    pub http_proxy: Option<String>,
    pub no_proxy: Option<String>,
}

fn var(upper: &str, lower: &str) -> Option<String> {
    [upper, lower]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
}

impl ProxyEnv {
    /// The variables of this process (upper case first, as Go reads them).
    pub fn from_process() -> ProxyEnv {
        ProxyEnv {
            https_proxy: var("HTTPS_PROXY", "https_proxy"),
            http_proxy: var("HTTP_PROXY", "http_proxy"),
            no_proxy: var("NO_PROXY", "no_proxy"),
        }
    }

    /// The proxy to use for `url`, with the variable it came from; `None`
    /// when the URL goes direct.
    pub fn proxy_for(&self, url: &str) -> Option<(String, &'static str)> {
        let u = reqwest::Url::parse(url).ok()?;
        let (proxy, name) = match u.scheme() {
            "https" => (self.https_proxy.as_deref()?, "HTTPS_PROXY"),
            "http" => (self.http_proxy.as_deref()?, "HTTP_PROXY"),
            _ => return None,
        };
        let host = u
            .host_str()?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        let port = u.port_or_known_default().unwrap_or(0);
        if !use_proxy(&host, port, self.no_proxy.as_deref().unwrap_or("")) {
            return None;
        }
        // Go accepts a bare `host:port` and means http://host:port.
        let proxy = if proxy.contains("://") {
            proxy.to_string()
        } else {
            format!("http://{proxy}")
        };
        Some((proxy, name))
    }
}

/// Go's `useProxy`: false for localhost, loopback addresses and `NO_PROXY` matches.
fn use_proxy(host: &str, port: u16, no_proxy: &str) -> bool {
    if host == "localhost" {
        return false;
    }
    let ip = host.parse::<IpAddr>().ok();
    if ip.is_some_and(|i| i.is_loopback()) {
        return false;
    }
    for entry in no_proxy.split(',').map(|e| e.trim().to_ascii_lowercase()) {
        if entry.is_empty() {
            continue;
        }
        if entry == "*" {
            return false;
        }
        if let Some((net, bits)) = entry.split_once('/') {
            if let (Some(ip), Ok(net), Ok(bits)) = (ip, net.parse::<IpAddr>(), bits.parse::<u32>()) {
                if in_cidr(ip, net, bits) {
                    return false;
                }
            }
            continue;
        }
        // An entry may carry a port: it then matches that port only.
        let (name, eport) = split_host_port(&entry);
        if eport.is_some_and(|p| p != port) {
            continue;
        }
        if let (Some(ip), Ok(eip)) = (ip, name.parse::<IpAddr>()) {
            if ip == eip {
                return false;
            }
            continue;
        }
        // `.example.com` matches subdomains; `example.com` also the name itself.
        let suffix = name.trim_start_matches("*.");
        if let Some(dotted) = suffix.strip_prefix('.') {
            if host.ends_with(&format!(".{dotted}")) {
                return false;
            }
        } else if host == suffix || host.ends_with(&format!(".{suffix}")) {
            return false;
        }
    }
    true
}

/// `host:port`, `[v6]:port`, `[v6]`, a bare IPv6 address or a name.
fn split_host_port(entry: &str) -> (String, Option<u16>) {
    if let Some(rest) = entry.strip_prefix('[') {
        if let Some((h, tail)) = rest.split_once(']') {
            let port = tail.strip_prefix(':').and_then(|p| p.parse().ok());
            return (h.to_string(), port);
        }
    }
    if entry.matches(':').count() == 1 {
        if let Some((h, p)) = entry.rsplit_once(':') {
            if let Ok(p) = p.parse() {
                return (h.to_string(), Some(p));
            }
        }
    }
    (entry.to_string(), None)
}

fn in_cidr(ip: IpAddr, net: IpAddr, bits: u32) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) if bits <= 32 => {
            let mask = if bits == 0 { 0 } else { u32::MAX << (32 - bits) };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) if bits <= 128 => {
            let mask = if bits == 0 { 0 } else { u128::MAX << (128 - bits) };
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(no_proxy: &str) -> ProxyEnv {
        ProxyEnv {
            https_proxy: Some("proxy.corp:3128".into()),
            http_proxy: Some("http://plain.corp:8080".into()),
            no_proxy: Some(no_proxy.into()),
        }
    }

    fn via(e: &ProxyEnv, url: &str) -> Option<String> {
        e.proxy_for(url).map(|(p, _)| p)
    }

    #[test]
    fn scheme_picks_the_variable_and_a_bare_proxy_means_http() {
        let e = env("");
        assert_eq!(
            e.proxy_for("https://api.prod.example:6443"),
            Some(("http://proxy.corp:3128".into(), "HTTPS_PROXY"))
        );
        assert_eq!(
            e.proxy_for("http://10.0.0.5:2381/metrics"),
            Some(("http://plain.corp:8080".into(), "HTTP_PROXY"))
        );
        assert_eq!(ProxyEnv::default().proxy_for("https://api.example:6443"), None);
    }

    #[test]
    fn loopback_and_localhost_never_use_a_proxy() {
        let e = env("");
        for u in [
            "https://localhost:6443",
            "https://127.0.0.1:6443",
            "https://127.1.2.3:6443",
            "https://[::1]:6443",
        ] {
            assert_eq!(via(&e, u), None, "{u}");
        }
    }

    #[test]
    fn no_proxy_entries_match_like_go() {
        let e = env("example.com, .internal, 10.0.0.0/8, 192.168.1.7, api.other:6443, [fd00::1]");
        assert_eq!(via(&e, "https://example.com:6443"), None);
        assert_eq!(via(&e, "https://api.example.com:6443"), None);
        assert!(via(&e, "https://notexample.com:6443").is_some());
        assert_eq!(via(&e, "https://k8s.internal:6443"), None);
        assert!(via(&e, "https://internal:6443").is_some());
        assert_eq!(via(&e, "https://10.1.2.3:6443"), None);
        assert!(via(&e, "https://11.1.2.3:6443").is_some());
        assert_eq!(via(&e, "https://192.168.1.7:6443"), None);
        assert!(via(&e, "https://192.168.1.8:6443").is_some());
        assert_eq!(via(&e, "https://api.other:6443"), None);
        assert!(via(&e, "https://api.other:443").is_some());
        assert_eq!(via(&e, "https://[fd00::1]:6443"), None);
        assert_eq!(via(&env("*"), "https://anything.example:6443"), None);
    }
}

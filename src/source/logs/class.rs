//! Message classes: what a recognised etcd or kube-apiserver log message
//! says, with the duration it carries (`took`) and the peer it names. The
//! texts are etcd's own (3.3–3.6: `wal/wal.go`, `etcdserver/raft.go`,
//! `etcdserver/util.go`, `etcdserver/v3_server.go`, `rafthttp/*.go`,
//! `etcdserver/apply.go`, `mvcc/kvstore_compaction.go`,
//! `v3rpc/maintenance.go`, `raft/raft.go`, `raft/node.go`, in both the
//! zap and the capnslog spelling) and kube-apiserver's (the etcd client
//! errors it logs, `utiltrace` traces, the timeout filter). A class only
//! counts; the rules decide what the counts mean.

use super::line::{field, go_duration, Format, Parsed};

/// A recognised message class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    // etcd, about the member itself.
    /// A WAL fdatasync over 1 s (`slow fdatasync`; capnslog `sync duration of`).
    SlowFdatasync,
    /// The leader sent a heartbeat later than twice the heartbeat interval.
    HeartbeatLate,
    /// A request took longer than 100 ms to apply (`apply request took too long`).
    SlowApply,
    /// A linearizable read waited for its ReadIndex (`waiting for ReadIndex
    /// response took too long`, `timed out waiting for read index response`).
    SlowReadIndex,
    /// The member starts an election (`is starting a new election at term`).
    Election,
    /// The member became leader.
    BecameLeader,
    /// The NOSPACE alarm was raised (`alarm raised` with `alarm: NOSPACE`).
    Nospace,
    /// The NOSPACE alarm was disarmed.
    NospaceDisarmed,
    /// A request answered `database space exceeded`.
    NospaceError,
    CorruptAlarm,
    /// Defragmentation started or finished (with its duration when finished).
    Defrag,
    /// A compaction finished (with its duration).
    Compaction,
    /// The etcd process started.
    Start,
    /// Clock difference with a peer over 1 s.
    ClockDrift,
    // etcd, about a peer (counted under the peer it names).
    /// `lost TCP streaming connection with remote peer`.
    PeerLost,
    /// `prober detected unhealthy status` (with the round-trip time).
    PeerUnhealthy,
    /// `peer became inactive (message send to peer failed)`, `failed to reach the peer URL`.
    PeerInactive,
    /// `dropped internal Raft message since sending buffer is full`.
    PeerDropped,
    /// `lost leader <id>`: the member's leader is gone (counted under that leader).
    LeaderLost,
    /// A peer message logged in the first minute after the member started,
    /// while its peers may not be up yet (counted under the member itself).
    PeerAtStart,
    /// The process was asked to stop (`received signal; shutting down`).
    Stop,
    /// A peer message about a member that had announced its own stop (a
    /// planned restart or shutdown), or logged by a member while it stops.
    PeerAtStop,
    /// Not a message: one per time bucket in which a member whose peers
    /// logged losing it as their leader had logged nothing since (a member
    /// stopped, hung or killed; not one that announced its stop). Derived
    /// once every log is read.
    SilentAfterLost,
    // kube-apiserver.
    /// `etcdserver: request timed out`, `context deadline exceeded` on etcd calls.
    ApiserverEtcdTimeout,
    /// `etcdserver: leader changed`, `etcdserver: no leader`.
    ApiserverEtcdLeader,
    /// `code = Unavailable` / connection refused to etcd.
    ApiserverEtcdUnavailable,
    /// `database space exceeded` answered to the apiserver.
    ApiserverEtcdNospace,
    /// A `utiltrace` trace of a slow request (`Trace[…] … (total time: …)`).
    ApiserverSlowTrace,
    /// `Timeout or abort while handling` (the request timeout filter).
    ApiserverTimeout,
}

impl Class {
    pub const ALL: [Class; 29] = [
        Class::SlowFdatasync,
        Class::HeartbeatLate,
        Class::SlowApply,
        Class::SlowReadIndex,
        Class::Election,
        Class::BecameLeader,
        Class::Nospace,
        Class::NospaceDisarmed,
        Class::NospaceError,
        Class::CorruptAlarm,
        Class::Defrag,
        Class::Compaction,
        Class::Start,
        Class::ClockDrift,
        Class::PeerLost,
        Class::PeerUnhealthy,
        Class::PeerInactive,
        Class::PeerDropped,
        Class::LeaderLost,
        Class::PeerAtStart,
        Class::Stop,
        Class::PeerAtStop,
        Class::SilentAfterLost,
        Class::ApiserverEtcdTimeout,
        Class::ApiserverEtcdLeader,
        Class::ApiserverEtcdUnavailable,
        Class::ApiserverEtcdNospace,
        Class::ApiserverSlowTrace,
        Class::ApiserverTimeout,
    ];

    /// The `class` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::SlowFdatasync => "slow_fdatasync",
            Class::HeartbeatLate => "heartbeat_late",
            Class::SlowApply => "slow_apply",
            Class::SlowReadIndex => "slow_read_index",
            Class::Election => "election",
            Class::BecameLeader => "became_leader",
            Class::Nospace => "nospace",
            Class::NospaceDisarmed => "nospace_disarmed",
            Class::NospaceError => "nospace_error",
            Class::CorruptAlarm => "corrupt_alarm",
            Class::Defrag => "defrag",
            Class::Compaction => "compaction",
            Class::Start => "start",
            Class::ClockDrift => "clock_drift",
            Class::PeerLost => "peer_lost",
            Class::PeerUnhealthy => "peer_unhealthy",
            Class::PeerInactive => "peer_inactive",
            Class::PeerDropped => "peer_dropped",
            Class::LeaderLost => "leader_lost",
            Class::PeerAtStart => "peer_at_start",
            Class::Stop => "stop",
            Class::PeerAtStop => "peer_at_stop",
            Class::SilentAfterLost => "silent_after_lost",
            Class::ApiserverEtcdTimeout => "etcd_timeout",
            Class::ApiserverEtcdLeader => "etcd_leader_changed",
            Class::ApiserverEtcdUnavailable => "etcd_unavailable",
            Class::ApiserverEtcdNospace => "etcd_nospace",
            Class::ApiserverSlowTrace => "slow_trace",
            Class::ApiserverTimeout => "request_timeout",
        }
    }

    /// Whether the class is about the peer the line names, not the member
    /// that logs it.
    pub fn about_peer(self) -> bool {
        matches!(
            self,
            Class::PeerLost
                | Class::PeerUnhealthy
                | Class::PeerInactive
                | Class::PeerDropped
                | Class::LeaderLost
        )
    }

    /// The classes of one component (every one of them gets a series per
    /// member, zero when the log is quiet).
    pub fn of(component: Component) -> impl Iterator<Item = Class> {
        Class::ALL.into_iter().filter(move |c| c.component() == component)
    }

    pub fn component(self) -> Component {
        match self {
            Class::ApiserverEtcdTimeout
            | Class::ApiserverEtcdLeader
            | Class::ApiserverEtcdUnavailable
            | Class::ApiserverEtcdNospace
            | Class::ApiserverSlowTrace
            | Class::ApiserverTimeout => Component::Apiserver,
            _ => Component::Etcd,
        }
    }
}

/// Which control-plane component a log belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Component {
    Etcd,
    Apiserver,
}

impl Component {
    pub fn as_str(self) -> &'static str {
        match self {
            Component::Etcd => "etcd",
            Component::Apiserver => "kube-apiserver",
        }
    }
}

/// A recognised message: its class, the duration it carries and the peer
/// (a member ID in hex) it names.
#[derive(Clone, Debug, PartialEq)]
pub struct Recognised {
    pub class: Class,
    pub took: Option<f64>,
    pub peer: Option<String>,
}

fn rec(class: Class) -> Option<Recognised> {
    Some(Recognised {
        class,
        took: None,
        peer: None,
    })
}

/// The first hex word of `s` (a raft member ID).
fn hex_word(s: &str) -> Option<&str> {
    let w = s.split([' ', ',', ')', '(', ']', '[']).find(|w| !w.is_empty())?;
    (w.len() >= 4 && w.len() <= 16 && w.bytes().all(|c| c.is_ascii_hexdigit())).then_some(w)
}

/// The text between `after` and the next `until` in `s`.
fn between<'a>(s: &'a str, after: &str, until: &str) -> Option<&'a str> {
    let i = s.find(after)? + after.len();
    let rest = &s[i..];
    Some(rest.find(until).map_or(rest, |j| &rest[..j]))
}

fn zap_duration(p: &Parsed<'_>, key: &str) -> Option<f64> {
    p.json.and_then(|j| field(j, key)).and_then(|v| go_duration(&v))
}

fn zap_peer(p: &Parsed<'_>, keys: &[&str]) -> Option<String> {
    let j = p.json?;
    keys.iter().find_map(|k| field(j, k).map(|v| v.into_owned()))
}

/// The class of an etcd message (zap, capnslog or raft text), if recognised.
pub fn etcd(p: &Parsed<'_>) -> Option<Recognised> {
    let m: &str = &p.msg;
    match p.format {
        Format::Zap => etcd_zap(p, m).or_else(|| raft(m)),
        Format::Capnslog => etcd_capnslog(m).or_else(|| raft(m)),
        Format::RaftText => raft(m),
        // `kubectl logs` without timestamps of a zap or capnslog log is
        // read by those formats; plain text is matched by its words only.
        _ => etcd_capnslog(m).or_else(|| raft(m)),
    }
}

fn etcd_zap(p: &Parsed<'_>, m: &str) -> Option<Recognised> {
    let r = |class, took| {
        Some(Recognised {
            class,
            took,
            peer: None,
        })
    };
    let peer = |class| {
        Some(Recognised {
            class,
            took: None,
            peer: zap_peer(p, &["remote-peer-id", "peer-id", "remote-member-id"]),
        })
    };
    match m {
        "slow fdatasync" => r(Class::SlowFdatasync, zap_duration(p, "took")),
        "leader failed to send out heartbeat on time; took too long, leader is overloaded likely from slow disk" => {
            r(Class::HeartbeatLate, zap_duration(p, "exceeded-duration"))
        }
        "apply request took too long" => r(Class::SlowApply, zap_duration(p, "took")),
        "waiting for ReadIndex response took too long, retrying"
        | "timed out waiting for read index response (local node might have slow network)" => {
            r(Class::SlowReadIndex, None)
        }
        "lost TCP streaming connection with remote peer" => peer(Class::PeerLost),
        "prober detected unhealthy status" => Some(Recognised {
            class: Class::PeerUnhealthy,
            took: zap_duration(p, "rtt"),
            peer: zap_peer(p, &["remote-peer-id"]),
        }),
        "peer became inactive (message send to peer failed)" | "failed to reach the peer URL" => {
            peer(Class::PeerInactive)
        }
        "prober found high clock drift" => r(Class::ClockDrift, zap_duration(p, "clock-drift")),
        "alarm raised" => match p.json.and_then(|j| field(j, "alarm")).as_deref() {
            Some("NOSPACE") => r(Class::Nospace, None),
            Some("CORRUPT") => r(Class::CorruptAlarm, None),
            _ => None,
        },
        "alarm disarmed" => match p.json.and_then(|j| field(j, "alarm")).as_deref() {
            Some("NOSPACE") => r(Class::NospaceDisarmed, None),
            _ => None,
        },
        "failed to get version" => peer(Class::PeerInactive),
        "starting defragment" | "finished defragment" | "defragmenting" => r(Class::Defrag, None),
        "finished defragmenting directory" => r(Class::Defrag, zap_duration(p, "took")),
        "finished scheduled compaction" => r(Class::Compaction, zap_duration(p, "took")),
        "starting an etcd server" => r(Class::Start, None),
        "received signal; shutting down" => r(Class::Stop, None),
        _ if m.starts_with("dropped internal Raft message since sending buffer is full") => {
            peer(Class::PeerDropped)
        }
        _ if m.contains("database space exceeded") => r(Class::NospaceError, None),
        _ => None,
    }
}

fn etcd_capnslog(m: &str) -> Option<Recognised> {
    let b = m.as_bytes();
    match b.first()? {
        b's' if m.starts_with("sync duration of ") => Some(Recognised {
            class: Class::SlowFdatasync,
            took: between(m, "sync duration of ", ",").and_then(go_duration),
            peer: None,
        }),
        b'f' if m.starts_with("failed to send out heartbeat on time") => Some(Recognised {
            class: Class::HeartbeatLate,
            // `(exceeded the 100ms timeout for 213.4ms, to 8e9e…)`
            took: between(m, "timeout for ", ",").and_then(go_duration),
            peer: None,
        }),
        b'f' if m.starts_with("finished scheduled compaction") => Some(Recognised {
            class: Class::Compaction,
            took: between(m, "(took ", ")").and_then(go_duration),
            peer: None,
        }),
        b'f' if m.starts_with("finished defragmenting the storage backend") => rec(Class::Defrag),
        b'w' if m.starts_with("waiting for ReadIndex response took too long") => rec(Class::SlowReadIndex),
        b't' if m.starts_with("timed out waiting for read index response") => rec(Class::SlowReadIndex),
        b't' if m.starts_with("the clock difference against peer") => rec(Class::ClockDrift),
        b'l' if m.starts_with("lost the TCP streaming connection with peer ") => Some(Recognised {
            class: Class::PeerLost,
            took: None,
            peer: hex_word(&m["lost the TCP streaming connection with peer ".len()..]).map(str::to_string),
        }),
        b'h' if m.starts_with("health check for peer ") => Some(Recognised {
            class: Class::PeerUnhealthy,
            took: None,
            peer: hex_word(&m["health check for peer ".len()..]).map(str::to_string),
        }),
        b'p' if m.starts_with("peer ") && m.contains(" became inactive") => Some(Recognised {
            class: Class::PeerInactive,
            took: None,
            peer: hex_word(&m[5..]).map(str::to_string),
        }),
        // `failed to reach the peerURL(http://…) of member <id> (…)`,
        // `cannot get the version of member <id> (…)`.
        b'f' | b'c'
            if m.starts_with("failed to reach the peerURL")
                || m.starts_with("cannot get the version of member ") =>
        {
            Some(Recognised {
                class: Class::PeerInactive,
                took: None,
                peer: m
                    .find("of member ")
                    .and_then(|i| hex_word(&m[i + 9..]))
                    .map(str::to_string),
            })
        }
        b'd' if m.starts_with("dropped internal raft message to ") => Some(Recognised {
            class: Class::PeerDropped,
            took: None,
            peer: hex_word(&m["dropped internal raft message to ".len()..]).map(str::to_string),
        }),
        b'a' if m.starts_with("alarm NOSPACE raised") => rec(Class::Nospace),
        b'a' if m.starts_with("alarm CORRUPT raised") => rec(Class::CorruptAlarm),
        b'a' if m.starts_with("alarm disarmed") && m.contains("Alarm:NOSPACE") => rec(Class::NospaceDisarmed),
        b's' if m.starts_with("starting to defragment the storage backend") => rec(Class::Defrag),
        b'e' if m.starts_with("etcd Version: ") => rec(Class::Start),
        b'r' if m.starts_with("received ") && m.contains(" signal, shutting down") => rec(Class::Stop),
        _ if memchr::memmem::find(b, b") to execute").is_some() && m.contains("took too long (") => {
            Some(Recognised {
                class: Class::SlowApply,
                took: m
                    .rfind("took too long (")
                    .and_then(|i| between(&m[i..], "took too long (", ")"))
                    .and_then(go_duration),
                peer: None,
            })
        }
        _ if m.contains("database space exceeded") => rec(Class::NospaceError),
        _ => None,
    }
}

/// The raft library's messages (both encodings carry the same text).
fn raft(m: &str) -> Option<Recognised> {
    let body = m.strip_prefix("raft.node: ").unwrap_or(m);
    let first = hex_word(body)?;
    let rest = &body[first.len()..];
    if rest.starts_with(" is starting a new election at term ") {
        rec(Class::Election)
    } else if rest.starts_with(" became leader at term ") {
        rec(Class::BecameLeader)
    } else {
        rest.strip_prefix(" lost leader ").map(|r| Recognised {
            class: Class::LeaderLost,
            took: None,
            peer: hex_word(r).map(str::to_string),
        })
    }
}

/// The member ID a raft message is logged by (`<id> became follower …`):
/// the first word of a raft message is the logging member's own ID.
pub fn raft_self_id(m: &str) -> Option<&str> {
    let body = m.strip_prefix("raft.node: ").unwrap_or(m);
    let id = hex_word(body)?;
    let rest = &body[id.len()..];
    (rest.starts_with(" became ")
        || rest.starts_with(" is starting a new election")
        || rest.starts_with(" elected leader ")
        || rest.starts_with(" lost leader ")
        || rest.starts_with(" changed leader "))
    .then_some(id)
}

/// The class of a kube-apiserver message, if recognised.
pub fn apiserver(p: &Parsed<'_>) -> Option<Recognised> {
    let m: &str = &p.msg;
    let b = m.as_bytes();
    let has = |s: &str| memchr::memmem::find(b, s.as_bytes()).is_some();
    if m.starts_with("Trace[") {
        // `Trace[123]: "Get" url:/api/v1/… (06-Dec-2026 04:01:50.000) (total time: 1234ms):`
        let took = between(m, "(total time: ", ")").and_then(go_duration);
        return took.map(|t| Recognised {
            class: Class::ApiserverSlowTrace,
            took: Some(t),
            peer: None,
        });
    }
    if has("database space exceeded") {
        return rec(Class::ApiserverEtcdNospace);
    }
    if has("etcdserver: request timed out") {
        return rec(Class::ApiserverEtcdTimeout);
    }
    if has("etcdserver: leader changed") || has("etcdserver: no leader") {
        return rec(Class::ApiserverEtcdLeader);
    }
    if has("Timeout or abort while handling") {
        return rec(Class::ApiserverTimeout);
    }
    if has("code = Unavailable") && (has("etcd") || has(":2379")) {
        return rec(Class::ApiserverEtcdUnavailable);
    }
    None
}

/// A message reduced to its template for counting unknown messages: member
/// IDs and other hex words as `<id>`, digits as `#`, quoted values as `"…"`,
/// at most 80 characters.
pub fn template(m: &str) -> String {
    let mut out = String::with_capacity(m.len().min(96));
    let mut in_quote = false;
    for (i, word) in m.split(' ').enumerate() {
        if out.len() >= 80 {
            out.push('…');
            break;
        }
        if i > 0 {
            out.push(' ');
        }
        let core = word.trim_matches(|c: char| !c.is_ascii_alphanumeric());
        let hex = core.len() >= 8
            && core.bytes().all(|c| c.is_ascii_hexdigit())
            && core.bytes().any(|c| c.is_ascii_digit());
        if hex && !in_quote {
            out.push_str(&word.replace(core, "<id>"));
            continue;
        }
        let mut last_hash = false;
        for c in word.chars() {
            if c == '"' {
                in_quote = !in_quote;
                if in_quote {
                    out.push_str("\"…\"");
                }
                continue;
            }
            if in_quote {
                continue;
            }
            if c.is_ascii_digit() {
                if !last_hash {
                    out.push('#');
                }
                last_hash = true;
                continue;
            }
            last_hash = false;
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::line::parse;
    use super::*;

    fn class_of(line: &str) -> Option<Recognised> {
        etcd(&parse(line).unwrap())
    }

    #[test]
    fn etcd_messages_in_both_spellings() {
        let z = class_of(r#"{"level":"warn","ts":"2026-12-06T04:01:50.123Z","caller":"wal/wal.go:805","msg":"slow fdatasync","took":"1.527s","expected-duration":"1s"}"#).unwrap();
        assert_eq!((z.class, z.took), (Class::SlowFdatasync, Some(1.527)));
        let c =
            class_of("2026-12-06 04:01:50.123456 W | wal: sync duration of 1.527s, expected less than 1s")
                .unwrap();
        assert_eq!((c.class, c.took), (Class::SlowFdatasync, Some(1.527)));
        let h = class_of("2026-12-06 04:01:50.123456 W | etcdserver: failed to send out heartbeat on time (exceeded the 100ms timeout for 213.4ms, to 8e9e05c52164694d)").unwrap();
        assert_eq!((h.class, h.took), (Class::HeartbeatLate, Some(0.2134)));
        let a = class_of(r#"2026-12-06 04:01:50.123456 W | etcdserver: read-only range request "key:\"/x\" " with result "range_response_count:1 size:9" took too long (312.1ms) to execute"#).unwrap();
        assert_eq!(a.class, Class::SlowApply);
        assert!((a.took.unwrap() - 0.3121).abs() < 1e-12, "{:?}", a.took);
        let l = class_of("raft2026/12/06 04:01:50 INFO: raft.node: bdae9bbc11dd390d lost leader 8e9e05c52164694d at term 3").unwrap();
        assert_eq!(
            (l.class, l.peer.as_deref()),
            (Class::LeaderLost, Some("8e9e05c52164694d"))
        );
        let p = class_of(r#"{"level":"warn","ts":"2026-12-06T04:01:50.123Z","msg":"prober detected unhealthy status","round-tripper-name":"ROUND_TRIPPER_RAFT_MESSAGE","remote-peer-id":"8e9e05c52164694d","rtt":"1.2ms","error":"dial tcp: connection refused"}"#).unwrap();
        assert_eq!(
            (p.class, p.peer.as_deref()),
            (Class::PeerUnhealthy, Some("8e9e05c52164694d"))
        );
        let c = class_of("2026-12-06 04:30:14.850055 W | etcdserver: failed to reach the peerURL(http://127.0.0.1:39887) of member cb1bfb17e6a3fb23 (Get \"http://127.0.0.1:39887/version\": connection refused)").unwrap();
        assert_eq!(
            (c.class, c.peer.as_deref()),
            (Class::PeerInactive, Some("cb1bfb17e6a3fb23"))
        );
        let n = class_of(r#"{"level":"warn","ts":"2026-12-06T04:01:50.123Z","msg":"alarm raised","alarm":"NOSPACE","from":"8e9e05c52164694d"}"#).unwrap();
        assert_eq!(n.class, Class::Nospace);
        assert!(class_of(
            r#"{"level":"info","ts":"2026-12-06T04:01:50.123Z","msg":"alarm raised","alarm":"NONE"}"#
        )
        .is_none());
        assert_eq!(
            raft_self_id("bdae9bbc11dd390d became follower at term 1"),
            Some("bdae9bbc11dd390d")
        );
    }

    #[test]
    fn unknown_messages_fold_into_templates() {
        assert_eq!(
            template("sent 42 bytes to \"x\" in 3ms"),
            "sent # bytes to \"…\" in #ms"
        );
    }
}

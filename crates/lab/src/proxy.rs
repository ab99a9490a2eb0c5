//! Added latency on one member's peer traffic: `tc netem` on the loopback
//! where the kernel has it, else a small delaying TCP proxy on 127.0.0.1.
//!
//! The proxy sits in front of a member's peer listener: the member listens on
//! its real peer port and advertises the proxy's (`--initial-advertise-peer-urls`
//! and its entry in `--initial-cluster`), so its peers reach it through the
//! proxy. It forwards without delay until the fault starts, then holds every
//! chunk it reads for the delay, in each direction, in order (a timestamped
//! queue per direction: a reader stamps and queues, a writer waits for each
//! chunk's time and writes it; neither direction blocks the other), and
//! forwards without delay again once the fault is cleared.
//!
//! Bounded: every loop ends when the proxy is dropped or its lifetime has
//! passed, each blocking call times out within 100 ms, and dropping the proxy
//! joins every thread it started.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::faults::Watchdog;
use crate::util::LabError;

/// How long a blocking call waits before it looks at the stop flag again.
const TICK: Duration = Duration::from_millis(100);

/// What every thread of one proxy shares.
struct Shared {
    /// The delay added to each chunk, µs (0: transparent).
    delay_us: AtomicU64,
    stop: AtomicBool,
    /// The proxy ends by itself then, whatever happens to the lab.
    deadline: Instant,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Shared {
    fn done(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || Instant::now() >= self.deadline
    }

    fn spawn(self: &Arc<Self>, f: impl FnOnce(Arc<Shared>) + Send + 'static) {
        let me = Arc::clone(self);
        let h = std::thread::spawn(move || f(me));
        if let Ok(mut t) = self.threads.lock() {
            t.push(h);
        }
    }
}

/// A delaying TCP proxy from `127.0.0.1:port` to `127.0.0.1:target`.
pub(crate) struct DelayProxy {
    pub port: u16,
    pub target: u16,
    shared: Arc<Shared>,
}

impl DelayProxy {
    /// Listens on a free port of 127.0.0.1 and forwards to `target`,
    /// transparent until [`DelayProxy::set_delay`]; ends after `life` at the latest.
    pub(crate) fn start(target: u16, life: Duration) -> Result<DelayProxy, LabError> {
        let l = TcpListener::bind("127.0.0.1:0")?;
        l.set_nonblocking(true)?;
        let port = l.local_addr()?.port();
        let shared = Arc::new(Shared {
            delay_us: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            deadline: Instant::now() + life,
            threads: Mutex::new(Vec::new()),
        });
        shared.spawn(move |s| accept_loop(&l, target, &s));
        Ok(DelayProxy { port, target, shared })
    }

    /// Delays every chunk read from now on by `d` in each direction (zero:
    /// none; chunks already queued keep their time).
    pub(crate) fn set_delay(&self, d: Duration) {
        self.shared
            .delay_us
            .store(d.as_micros() as u64, Ordering::Relaxed);
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        // Threads add connection threads while they run: join until none is left.
        for _ in 0..10_000 {
            let h = self.shared.threads.lock().ok().and_then(|mut t| t.pop());
            match h {
                Some(h) => {
                    let _ = h.join();
                }
                None => break,
            }
        }
    }
}

fn accept_loop(l: &TcpListener, target: u16, s: &Arc<Shared>) {
    while !s.done() {
        match l.accept() {
            Ok((client, _)) => {
                // On failure the client sees its connection closed, as when
                // the member is down (refused while it starts: not reported).
                if let Err(e) = connect(client, target, s) {
                    if e.kind() != ErrorKind::ConnectionRefused {
                        eprintln!("lab proxy to :{target}: {e}");
                    }
                }
            }
            // Nothing to accept yet (or a failed accept): look again shortly.
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// Connects `client` to the target and starts both directions.
fn connect(client: TcpStream, target: u16, s: &Arc<Shared>) -> std::io::Result<()> {
    client.set_nonblocking(false)?;
    let server = TcpStream::connect_timeout(&([127, 0, 0, 1], target).into(), Duration::from_secs(2))?;
    for c in [&client, &server] {
        c.set_nodelay(true)?;
        c.set_read_timeout(Some(TICK))?;
        c.set_write_timeout(Some(Duration::from_secs(5)))?;
    }
    direction(client.try_clone()?, server.try_clone()?, s);
    direction(server, client, s);
    Ok(())
}

/// A chunk and the time it may be written.
type Chunk = (Instant, Vec<u8>);

/// Forwards what `from` sends to `to`, each chunk held for the delay in
/// force when it was read.
fn direction(from: TcpStream, to: TcpStream, s: &Arc<Shared>) {
    let (tx, rx) = mpsc::channel::<Chunk>();
    s.spawn(move |s| read_side(from, &tx, &s));
    s.spawn(move |s| write_side(to, &rx, &s));
}

fn read_side(mut from: TcpStream, tx: &Sender<Chunk>, s: &Shared) {
    let mut buf = vec![0u8; 64 << 10];
    while !s.done() {
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let due = Instant::now() + Duration::from_micros(s.delay_us.load(Ordering::Relaxed));
                if tx.send((due, buf[..n].to_vec())).is_err() {
                    break;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(_) => break,
        }
    }
    // No more from this side: the writer flushes what is queued, then closes.
    let _ = from.shutdown(Shutdown::Read);
}

fn write_side(mut to: TcpStream, rx: &Receiver<Chunk>, s: &Shared) {
    loop {
        if s.done() {
            break;
        }
        match rx.recv_timeout(TICK) {
            Ok((due, data)) => {
                if !wait_until(due, s) || to.write_all(&data).is_err() {
                    break;
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    let _ = to.shutdown(if s.done() { Shutdown::Both } else { Shutdown::Write });
}

/// Sleeps until `t` (false when the proxy stops first).
fn wait_until(t: Instant, s: &Shared) -> bool {
    loop {
        if s.done() {
            return false;
        }
        let now = Instant::now();
        if now >= t {
            return true;
        }
        std::thread::sleep((t - now).min(TICK));
    }
}

/// Whether this kernel has netem: a 1 ms delay on the loopback is added and
/// removed at once.
pub(crate) fn netem_available() -> bool {
    let tc = |args: &[&str]| {
        Command::new("timeout")
            .arg("5")
            .arg("tc")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let ok = tc(&["qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"]);
    if ok {
        tc(&["qdisc", "del", "dev", "lo", "root"]);
    }
    ok
}

/// `tc netem` delaying every packet to and from one port on the loopback (so
/// both directions of every connection to that member's peer listener, as the
/// proxy does); removed on drop, or by a detached watchdog after `life`.
pub(crate) struct Netem {
    pub commands: String,
    active: bool,
    watchdog: Watchdog,
}

/// The `tc` commands adding the delay: a prio qdisc whose 4th band (no
/// priority maps to it) holds netem, and filters sending the port's packets there.
pub(crate) fn netem_commands(port: u16, delay: Duration) -> Vec<String> {
    let us = delay.as_micros();
    vec![
        "qdisc add dev lo root handle 1: prio bands 4".into(),
        format!("qdisc add dev lo parent 1:4 handle 40: netem delay {us}us"),
        format!("filter add dev lo parent 1: protocol ip prio 1 u32 match ip sport {port} 0xffff flowid 1:4"),
        format!("filter add dev lo parent 1: protocol ip prio 1 u32 match ip dport {port} 0xffff flowid 1:4"),
    ]
}

fn tc_line(line: &str) -> Result<(), LabError> {
    let out = Command::new("timeout")
        .arg("10")
        .arg("tc")
        .args(line.split_whitespace())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(LabError::msg(format!(
            "`tc {line}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

impl Netem {
    pub(crate) fn start(port: u16, delay: Duration, life: Duration) -> Result<Netem, LabError> {
        let cmds = netem_commands(port, delay);
        let mut n = Netem {
            commands: cmds
                .iter()
                .map(|c| format!("tc {c}"))
                .collect::<Vec<_>>()
                .join("\n"),
            active: true,
            watchdog: Watchdog::none(),
        };
        for c in &cmds {
            // On failure, drop removes whatever was added.
            tc_line(c)?;
        }
        n.watchdog = Watchdog::spawn(life, "tc qdisc del dev lo root 2>/dev/null");
        Ok(n)
    }

    pub(crate) fn remove(&mut self) -> Result<(), LabError> {
        if !self.active {
            return Ok(());
        }
        self.active = false;
        let res = tc_line("qdisc del dev lo root");
        self.watchdog.disarm();
        res
    }
}

impl Drop for Netem {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server on 127.0.0.1 (bounded: ends with its first client).
    fn echo() -> (u16, JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let h = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut buf = [0u8; 1024];
            while let Ok(n) = c.read(&mut buf) {
                if n == 0 || c.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        });
        (port, h)
    }

    fn round_trip(c: &mut TcpStream, msg: &[u8]) -> Duration {
        let t = Instant::now();
        c.write_all(msg).unwrap();
        let mut got = vec![0u8; msg.len()];
        c.read_exact(&mut got).unwrap();
        assert_eq!(got, msg);
        t.elapsed()
    }

    #[test]
    fn the_proxy_is_transparent_then_delays_each_direction_in_order_then_not() {
        let (port, server) = echo();
        let p = DelayProxy::start(port, Duration::from_secs(30)).unwrap();
        let mut c = TcpStream::connect(("127.0.0.1", p.port)).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        assert!(round_trip(&mut c, b"before") < Duration::from_millis(50));
        p.set_delay(Duration::from_millis(80));
        // Out and back: held once each way.
        let rtt = round_trip(&mut c, b"during");
        assert!(rtt >= Duration::from_millis(160), "{rtt:?}");
        // Many chunks in flight come back whole and in order.
        let msg: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        for part in msg.chunks(1000) {
            c.write_all(part).unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut got = vec![0u8; msg.len()];
        c.read_exact(&mut got).unwrap();
        assert_eq!(got, msg);
        p.set_delay(Duration::ZERO);
        assert!(round_trip(&mut c, b"after") < Duration::from_millis(50));
        drop(c);
        drop(p);
        server.join().unwrap();
    }

    #[test]
    fn netem_filters_send_both_directions_of_the_port_to_the_delayed_band() {
        let c = netem_commands(2381, Duration::from_millis(100));
        assert!(c[1].ends_with("netem delay 100000us"), "{c:?}");
        assert!(c[2].contains("match ip sport 2381 0xffff flowid 1:4"), "{c:?}");
        assert!(c[3].contains("match ip dport 2381 0xffff flowid 1:4"), "{c:?}");
    }
}

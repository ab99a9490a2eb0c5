//! `diagnose -o html` rendered by a real browser: shipped scenarios (generated
//! from the real captures exactly as `tests/scenario_verdicts.rs` does) are
//! diagnosed, rendered to HTML and opened in headless Chromium (Debian
//! package `chromium`; `scripts/test` installs it, and these tests fail when
//! it is missing). A probe script added to a copy of the page reads what the
//! browser laid out: the rendered text of the verdict, the position of every
//! onset marker on the time axis, the lit runs of the bands, and the plotted
//! series per instance of each deciding signal; the test compares them with
//! the report. A screenshot of the page as shipped (no probe) must be a real
//! picture with the verdict's colours in it. The file itself must fetch
//! nothing: no script, no `src`/`href`, no `url(`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::scenarios;

use cptriage::report::html;
use cptriage::rules::load::RuleSet;
use cptriage::rules::report::{Availability, Report, Status};
use cptriage_testkit::scenario;
use serde_json::Value;

fn diagnose(name: &str) -> (scenario::Validated, Report) {
    let rules = RuleSet::default_rules().expect("shipped rules load");
    let spec_path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/scenarios")
        .join(format!("{name}.yaml"));
    scenarios::diagnose(&spec_path, &rules)
}

/// The Chromium binary: `CPTRIAGE_CHROMIUM`, or `chromium` on the PATH. A
/// missing browser fails the test (as a missing etcd does), never skips it.
pub(crate) fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("CPTRIAGE_CHROMIUM") {
        return PathBuf::from(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser"] {
            let p = dir.join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "headless Chromium is needed to check the HTML report: install the Debian package `chromium` \
         (scripts/test does), or set CPTRIAGE_CHROMIUM to its path"
    );
}

/// Runs headless Chromium on `page` with `args`, killed after 120 s; its stdout.
pub(crate) fn run_chromium(page: &Path, args: &[&str]) -> String {
    let profile = tempfile::tempdir().expect("profile dir");
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            "--disable-extensions",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait chromium") {
            break st;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 120 s on {}", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = reader.join().unwrap();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    assert!(status.success(), "chromium failed ({status}): {err}");
    out
}

/// What the probe reads from the laid-out page.
const PROBE: &str = r#"<script>
(function () {
  const out = {};
  out.status = document.querySelector('main').dataset.status;
  out.h1 = document.querySelector('h1').innerText;
  out.facts = document.querySelector('dl.facts').innerText;
  out.text = document.body.innerText;
  out.scripts = document.querySelectorAll('script').length;
  const svg = document.querySelector('svg.timeline');
  if (svg) {
    const r = svg.getBoundingClientRect();
    const sx = r.width / svg.viewBox.baseVal.width;
    const d = svg.dataset;
    const from = +d.from, to = +d.to, x0 = +d.x0, x1 = +d.x1;
    const at = (t) => (x0 + (t - from) / (to - from) * (x1 - x0)) * sx;
    out.svg = { width: r.width, height: r.height };
    out.markers = [...svg.querySelectorAll('g.onset, g.recovery')].map((g) => {
      const l = g.querySelector('line').getBoundingClientRect();
      const t = +g.dataset.t;
      return { kind: g.getAttribute('class'), axis: g.dataset.axis, role: g.dataset.role, t,
               x: l.left - r.left, expected: at(t), label: g.querySelector('text').textContent,
               height: l.height };
    });
    out.bands = [...svg.querySelectorAll('g.band')].map((g) => ({
      axis: g.dataset.axis, role: g.dataset.role,
      lit: [...g.querySelectorAll('rect.lit')].map((b) => {
        const bb = b.getBoundingClientRect();
        return { from: +b.dataset.from, left: bb.left - r.left, right: bb.right - r.left };
      }) }));
    out.panels = [...svg.querySelectorAll('g.signal')].map((g) => ({
      signal: g.dataset.signal, axis: g.dataset.axis,
      series: [...g.querySelectorAll('path.series')].map((p) => ({
        instance: p.dataset.instance, length: p.getTotalLength(),
        width: p.getBoundingClientRect().width })),
      lit: [...g.querySelectorAll('path.lit-run')].map((p) => p.dataset.instance),
      thresholds: [...g.querySelectorAll('line.threshold')].map((l) => ({
        value: +l.dataset.value, instance: l.dataset.instance || null,
        width: l.getBoundingClientRect().width })) }));
  }
  const pre = document.createElement('pre');
  pre.id = 'cptriage-probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"#;

/// Opens the page with the probe in Chromium and returns what it measured.
fn probe(dir: &Path, name: &str, page: &str) -> Value {
    let probed = page.replace("</body>", &format!("{PROBE}\n</body>"));
    assert_ne!(probed, page, "{name}: no </body>");
    let p = dir.join(format!("{name}.probe.html"));
    std::fs::write(&p, probed).unwrap();
    let dom = run_chromium(&p, &["--dump-dom", "--virtual-time-budget=2000"]);
    let start = dom.find("<pre id=\"cptriage-probe\">").unwrap_or_else(|| {
        panic!(
            "{name}: the probe did not run; DOM:\n{}",
            &dom[..dom.len().min(2000)]
        )
    });
    let rest = &dom[start + "<pre id=\"cptriage-probe\">".len()..];
    let json = &rest[..rest.find("</pre>").expect("end of probe")];
    let json = json
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{name}: probe output: {e}: {json}"))
}

/// Decodes an 8-bit RGB/RGBA PNG (what Chromium writes) to RGB pixels.
fn decode_png(bytes: &[u8]) -> (u32, u32, Vec<[u8; 3]>) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let mut i = 8;
    let (mut w, mut h, mut ctype) = (0u32, 0u32, 0u8);
    let mut idat = Vec::new();
    while i + 8 <= bytes.len() {
        let len = u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap()) as usize;
        let kind = &bytes[i + 4..i + 8];
        let data = &bytes[i + 8..i + 8 + len];
        match kind {
            b"IHDR" => {
                w = u32::from_be_bytes(data[0..4].try_into().unwrap());
                h = u32::from_be_bytes(data[4..8].try_into().unwrap());
                assert_eq!(data[8], 8, "bit depth");
                ctype = data[9];
                assert_eq!(data[12], 0, "interlaced");
            }
            b"IDAT" => idat.extend_from_slice(data),
            b"IEND" => break,
            _ => {}
        }
        i += 12 + len;
    }
    let bpp = match ctype {
        2 => 3,
        6 => 4,
        c => panic!("PNG colour type {c}"),
    };
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(&idat[..])
        .read_to_end(&mut raw)
        .expect("inflate PNG");
    let stride = w as usize * bpp;
    assert_eq!(raw.len(), (stride + 1) * h as usize, "PNG data length");
    let mut prev = vec![0u8; stride];
    let mut px = Vec::with_capacity((w * h) as usize);
    for row in raw.chunks(stride + 1) {
        let f = row[0];
        let mut cur = row[1..].to_vec();
        for k in 0..stride {
            let a = if k >= bpp { cur[k - bpp] as i32 } else { 0 };
            let b = prev[k] as i32;
            let c = if k >= bpp { prev[k - bpp] as i32 } else { 0 };
            let add = match f {
                0 => 0,
                1 => a,
                2 => b,
                3 => (a + b) / 2,
                4 => {
                    let p = a + b - c;
                    let (pa, pb, pc) = ((p - a).abs(), (p - b).abs(), (p - c).abs());
                    if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        b
                    } else {
                        c
                    }
                }
                f => panic!("PNG filter {f}"),
            };
            cur[k] = (cur[k] as i32 + add) as u8;
        }
        for p in cur.chunks(bpp) {
            px.push([p[0], p[1], p[2]]);
        }
        prev = cur;
    }
    (w, h, px)
}

/// Screenshots the page as shipped; returns the pixels.
fn screenshot(dir: &Path, name: &str, page: &str) -> Vec<[u8; 3]> {
    let p = dir.join(format!("{name}.html"));
    std::fs::write(&p, page).unwrap();
    let png = dir.join(format!("{name}.png"));
    run_chromium(
        &p,
        &[
            &format!("--screenshot={}", png.display()),
            "--window-size=1280,2000",
        ],
    );
    let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("{name}: no screenshot: {e}"));
    if let Some(keep) = std::env::var_os("CPTRIAGE_KEEP_SCREENSHOTS") {
        let _ = std::fs::copy(&png, Path::new(&keep).join(format!("{name}.png")));
    }
    let (w, h, px) = decode_png(&bytes);
    assert_eq!((w, h), (1280, 2000), "{name}: screenshot size");
    px
}

/// The file fetches nothing and runs nothing.
fn assert_self_contained(name: &str, page: &str) {
    let lower = page.to_ascii_lowercase();
    for bad in [
        "<script", "<link", "<img", "<iframe", "<object", "<embed", " src=", " href=", "url(", "@import",
        "http://", "https://",
    ] {
        assert!(!lower.contains(bad), "{name}: the page contains `{bad}`");
    }
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// The onset markers the browser drew sit where their time is on the axis,
/// and match the report's onsets.
fn check_markers(name: &str, r: &Report, got: &Value) {
    let markers = got["markers"].as_array().expect("markers");
    for m in markers {
        let (x, e) = (f(&m["x"]), f(&m["expected"]));
        assert!(
            (x - e).abs() <= 1.0,
            "{name}: marker {m} drawn at x={x}, its time is at x={e}"
        );
        assert!(
            f(&m["height"]) > 50.0,
            "{name}: marker {m} does not cross the plot"
        );
    }
    let onset = |role: &str, axis: &str| -> Vec<i64> {
        markers
            .iter()
            .filter(|m| m["kind"] == "onset" && m["role"] == role && m["axis"] == axis)
            .map(|m| m["t"].as_i64().unwrap())
            .collect()
    };
    if let Some(rc) = &r.verdict.root_cause {
        let axis = match &rc.sub_axis {
            Some(s) => format!("{}/{s}", rc.axis),
            None => rc.axis.clone(),
        };
        assert_eq!(
            onset("root-cause", &axis),
            rc.onset.into_iter().collect::<Vec<_>>(),
            "{name}: root-cause marker"
        );
        // The root cause's band starts its lit run at the marker.
        let band = got["bands"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["role"] == "root-cause")
            .unwrap_or_else(|| panic!("{name}: no root-cause band"));
        assert_eq!(band["axis"], axis.as_str());
        let o = rc.onset.unwrap();
        let run = band["lit"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["from"].as_i64() == Some(o))
            .unwrap_or_else(|| {
                panic!("{name}: no lit run of the root cause's band starts at its onset: {band}")
            });
        let mx = markers
            .iter()
            .find(|m| m["role"] == "root-cause" && m["kind"] == "onset")
            .map(|m| f(&m["x"]))
            .unwrap();
        assert!(
            f(&run["left"]) <= mx + 0.5 && mx <= f(&run["right"]),
            "{name}: the onset marker (x={mx}) is not within the band's first lit cell {run}"
        );
        for d in &r.verdict.downstream {
            let a = match &d.sub_axis {
                Some(s) => format!("{}/{s}", d.axis),
                None => d.axis.clone(),
            };
            assert_eq!(
                onset("downstream", &a),
                vec![d.onset],
                "{name}: downstream marker of {a}"
            );
        }
    }
}

/// One plotted series per instance with data, for every deciding signal drawn;
/// the axes of the verdict have their deciding signals plotted.
fn check_panels(name: &str, r: &Report, got: &Value) -> Vec<Value> {
    let panels = got["panels"].as_array().expect("panels").clone();
    for p in &panels {
        let sig = p["signal"].as_str().unwrap();
        let ev = r
            .axes
            .iter()
            .flat_map(|a| a.evidence.iter())
            .find(|e| e.signal == sig && e.availability == Availability::Evaluated)
            .unwrap_or_else(|| panic!("{name}: panel {sig} is not evaluated evidence"));
        let mut want: Vec<&str> = ev
            .instance_series
            .iter()
            .filter(|(_, v)| v.iter().flatten().any(|x| x.is_finite()))
            .map(|(k, _)| k.as_str())
            .collect();
        want.sort();
        let mut drawn: Vec<&str> = p["series"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                assert!(
                    f(&s["length"]) > 100.0 && f(&s["width"]) > 100.0,
                    "{name}: {sig}: series {s} is not drawn across the plot"
                );
                s["instance"].as_str().unwrap()
            })
            .collect();
        drawn.sort();
        assert_eq!(drawn, want, "{name}: {sig}: one series per instance");
        for t in p["thresholds"].as_array().unwrap() {
            assert!(f(&t["width"]) > 500.0, "{name}: {sig}: threshold {t} not drawn");
        }
        assert_eq!(
            p["thresholds"].as_array().unwrap().len(),
            ev.threshold_lines.len(),
            "{name}: {sig}: thresholds"
        );
    }
    panels
}

fn render(name: &str) -> (scenario::Validated, Report, String) {
    let (spec, r) = diagnose(name);
    let page = html::document(&r);
    assert_self_contained(name, &page);
    (spec, r, page)
}

fn count(px: &[[u8; 3]], rgb: [u8; 3]) -> usize {
    px.iter().filter(|p| **p == rgb).count()
}

fn non_trivial(name: &str, px: &[[u8; 3]]) {
    let mut colours: Vec<[u8; 3]> = px.to_vec();
    colours.sort();
    colours.dedup();
    let ink = px.iter().filter(|p| **p != [255, 255, 255]).count();
    assert!(
        colours.len() > 100,
        "{name}: only {} colours in the screenshot",
        colours.len()
    );
    assert!(
        ink * 100 > px.len() * 3,
        "{name}: only {ink} of {} pixels are not white",
        px.len()
    );
}

const RED: [u8; 3] = [0xc6, 0x28, 0x28];
const GREEN: [u8; 3] = [0x2e, 0x7d, 0x32];

#[test]
fn etcd_disk_slow_one_member_in_a_browser() {
    let name = "etcd-disk-slow-one-member";
    let (spec, r, page) = render(name);
    let exp = spec.spec.expect.clone().unwrap();
    assert_eq!(r.status, Status::Degraded);
    let dir = tempfile::tempdir().unwrap();
    let got = probe(dir.path(), name, &page);
    assert_eq!(got["status"], "degraded");
    assert_eq!(got["scripts"], 1, "only the probe runs");
    let h1 = got["h1"].as_str().unwrap();
    assert!(h1.starts_with("DEGRADED"), "{h1}");
    assert!(h1.contains("etcd/disk"), "{h1}");
    let facts = got["facts"].as_str().unwrap();
    for inst in &exp.instances {
        assert!(
            facts.contains(inst.as_str()),
            "{name}: where does not name {inst}: {facts}"
        );
    }
    let rc = r.verdict.root_cause.as_ref().unwrap();
    assert!(
        facts.contains(&cptriage::timefmt::format_time(rc.onset.unwrap())),
        "{facts}"
    );
    let recovered = facts.split("Recovered").nth(1).unwrap_or("");
    assert!(recovered.trim_start().starts_with("no"), "{facts}");
    check_markers(name, &r, &got);
    let panels = check_panels(name, &r, &got);
    // The deciding disk signals of etcd are plotted for the three members, and
    // only the slow member has lit stretches.
    let etcd_signal = |sig: &str| {
        r.axes
            .iter()
            .flat_map(|a| a.evidence.iter())
            .any(|e| e.signal == sig && e.role == "etcd")
    };
    let disk: Vec<&Value> = panels
        .iter()
        .filter(|p| p["axis"] == "etcd/disk" && etcd_signal(p["signal"].as_str().unwrap()))
        .collect();
    assert!(
        !disk.is_empty(),
        "{name}: no etcd signal of etcd/disk plotted: {panels:?}"
    );
    for p in &disk {
        assert_eq!(p["series"].as_array().unwrap().len(), 3, "{p}");
        let lit: Vec<&str> = p["lit"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(
            lit,
            exp.instances.iter().map(String::as_str).collect::<Vec<_>>(),
            "{p}"
        );
    }
    for section in ["Tree walk", "Evidence", "Sources", "Every axis"] {
        assert!(
            got["text"].as_str().unwrap().contains(section),
            "{name}: no {section}"
        );
    }
    // The measured falsifier: what the verdict rests on, and the ADR sentence.
    let fz = r
        .falsification
        .as_ref()
        .expect("a falsification with a root cause");
    let text = got["text"].as_str().unwrap();
    for m in &fz.deciding {
        assert!(text.contains(&m.text()), "{name}: not shown: {}", m.text());
    }
    assert!(text.contains(&fz.adr), "{name}: no ADR sentence");
    let px = screenshot(dir.path(), name, &page);
    non_trivial(name, &px);
    assert!(
        count(&px, RED) > 2000,
        "{name}: the lit root-cause band is not painted"
    );
}

#[test]
fn bitter_zone_shows_the_root_cause_before_the_downstream_axis() {
    let name = "bitter-zone-etcd-first";
    let (_, r, page) = render(name);
    assert!(
        !r.verdict.downstream.is_empty(),
        "{name}: expected a downstream axis"
    );
    let dir = tempfile::tempdir().unwrap();
    let got = probe(dir.path(), name, &page);
    check_markers(name, &r, &got);
    check_panels(name, &r, &got);
    // Each downstream axis has a band and its marker is right of the root cause's.
    let markers = got["markers"].as_array().unwrap();
    let root_x = markers
        .iter()
        .find(|m| m["role"] == "root-cause" && m["kind"] == "onset")
        .map(|m| f(&m["x"]))
        .unwrap();
    for d in &r.verdict.downstream {
        let m = markers
            .iter()
            .find(|m| m["role"] == "downstream" && m["t"].as_i64() == Some(d.onset))
            .unwrap();
        assert!(
            f(&m["x"]) > root_x + 10.0,
            "{name}: downstream {m} not after the root cause"
        );
        assert!(
            got["bands"]
                .as_array()
                .unwrap()
                .iter()
                .any(|b| b["role"] == "downstream"),
            "{name}: no downstream band"
        );
        assert!(got["facts"].as_str().unwrap().contains("Downstream"));
    }
    // Who contributes to the lit signals (the breakdown) is named.
    let text = got["text"].as_str().unwrap();
    let mut named = 0;
    for a in r
        .axes
        .iter()
        .filter(|a| a.state == cptriage::rules::report::AxisState::Lit)
    {
        for e in a.evidence.iter().filter(|e| e.lit == Some(true)) {
            if let Some(c) = e.contributors.first() {
                assert!(
                    text.contains(&c.text()),
                    "{name}: {}: contributor not shown: {}",
                    e.signal,
                    c.text()
                );
                named += 1;
            }
        }
    }
    assert!(named > 0, "{name}: expected contributors on a lit signal");
    // The walk's warning (it stops elsewhere) is shown.
    for w in &r.warnings {
        assert!(
            got["text"].as_str().unwrap().contains(w.as_str()),
            "{name}: warning not shown: {w}"
        );
    }
    let px = screenshot(dir.path(), name, &page);
    non_trivial(name, &px);
    assert!(count(&px, RED) > 2000);
}

#[test]
fn healthy_shows_no_root_cause() {
    let name = "healthy";
    let (_, r, page) = render(name);
    assert_eq!(r.status, Status::Healthy);
    let dir = tempfile::tempdir().unwrap();
    let got = probe(dir.path(), name, &page);
    assert_eq!(got["status"], "healthy");
    assert!(got["h1"].as_str().unwrap().starts_with("HEALTHY"));
    assert!(
        got["markers"].as_array().unwrap().is_empty(),
        "{name}: markers on a healthy report"
    );
    check_panels(name, &r, &got);
    assert!(
        got["bands"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["lit"].as_array().unwrap().is_empty()),
        "{name}: a lit band"
    );
    let px = screenshot(dir.path(), name, &page);
    non_trivial(name, &px);
    assert!(
        count(&px, GREEN) > 200,
        "{name}: the healthy badge is not painted"
    );
    assert_eq!(count(&px, RED), 0, "{name}: red on a healthy report");
}

#[test]
fn label_values_are_text_not_markup() {
    let name = "etcd-disk-slow-one-member";
    let (_, mut r, _) = render(name);
    let evil = "etcd-2\"><script>alert(1)</script><img src=x onerror=alert(2)>";
    let rename = |s: &mut String| {
        if s == "etcd-2" {
            *s = evil.to_string();
        }
    };
    for a in &mut r.axes {
        a.instances.iter_mut().for_each(rename);
        for e in &mut a.evidence {
            if let Some(v) = e.instance_series.remove("etcd-2") {
                e.instance_series.insert(evil.into(), v);
            }
            if let Some(v) = e.instance_lit.remove("etcd-2") {
                e.instance_lit.insert(evil.into(), v);
            }
            e.instances.iter_mut().for_each(|i| rename(&mut i.instance));
        }
    }
    if let Some(rc) = &mut r.verdict.root_cause {
        rc.instances.iter_mut().for_each(rename);
    }
    r.sources.iter_mut().for_each(|s| rename(&mut s.target));
    let page = html::document(&r);
    assert!(!page.contains("<script>alert"), "unescaped label value");
    assert!(!page.contains("<img"), "unescaped label value");
    let dir = tempfile::tempdir().unwrap();
    let got = probe(dir.path(), "evil", &page);
    assert_eq!(got["scripts"], 1, "only the probe runs");
    assert!(
        got["facts"].as_str().unwrap().contains(evil),
        "the name is shown as text"
    );
    let panels = check_panels("evil", &r, &got);
    assert!(panels.iter().any(|p| p["series"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["instance"] == evil)));
}

#[test]
fn diagnose_writes_html_to_stdout() {
    let cap = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/captures/bitter-zone-etcd-first");
    let out = Command::new(env!("CARGO_BIN_EXE_cptriage"))
        .args(["diagnose", "--dump", cap.to_str().unwrap(), "-o", "html"])
        .env("HOME", "/nonexistent")
        .output()
        .expect("run cptriage");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.trim_end().ends_with("</html>"));
    assert_self_contained("cli", &page);
    assert!(page.contains("data-status=\"degraded\""));
    assert!(page.contains("class=\"onset\""));
}

#[test]
fn a_recovered_incident_marks_its_recovery() {
    let name = "etcd-raft-member-down";
    let (_, r, page) = render(name);
    assert_eq!(r.status, Status::Recovered);
    let rc = r.verdict.root_cause.clone().unwrap();
    let rec = rc.recovered.expect("recovered root cause");
    let dir = tempfile::tempdir().unwrap();
    let got = probe(dir.path(), name, &page);
    assert!(got["h1"].as_str().unwrap().starts_with("RECOVERED"));
    check_markers(name, &r, &got);
    check_panels(name, &r, &got);
    let markers = got["markers"].as_array().unwrap();
    assert!(
        markers
            .iter()
            .any(|m| m["kind"] == "recovery" && m["role"] == "root-cause" && m["t"].as_i64() == Some(rec)),
        "{name}: no recovery marker at {rec}: {markers:?}"
    );
    let facts = got["facts"].as_str().unwrap();
    let recovered = facts.split("Recovered").nth(1).unwrap_or("");
    assert!(recovered.trim_start().starts_with("yes"), "{facts}");
    assert!(
        !rc.unreachable.is_empty(),
        "{name}: the member that stopped is named"
    );
    for u in &rc.unreachable {
        let band = got["bands"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| {
                b["role"] == "unreachable" && b["axis"] == format!("{} not answering", u.target).as_str()
            })
            .unwrap_or_else(|| panic!("{name}: no band for {}", u.target));
        assert_eq!(band["lit"][0]["from"].as_i64(), Some(u.from), "{band}");
        assert!(
            f(&band["lit"][0]["right"]) > f(&band["lit"][0]["left"]) + 20.0,
            "{name}: {} not drawn: {band}",
            u.target
        );
        assert!(
            facts.contains(&format!("{} stopped answering", u.target)),
            "{name}: {} not named: {facts}",
            u.target
        );
    }
    let px = screenshot(dir.path(), name, &page);
    non_trivial(name, &px);
}

#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/seeds/<target>/ from
small pieces of testdata/, real captures included (run from the repository root).
The committed, minimised corpora are in fuzz/corpus/<target>/."""
import gzip, os, re, shutil, sys

root = os.getcwd()
shared = os.path.join(root, "testdata", "realdata")
out = os.path.join(root, "fuzz", "seeds")
shutil.rmtree(out, ignore_errors=True)

def put(target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())

def families(path, wanted, limit=60):
    """The lines (HELP/TYPE and samples) of the wanted families, at most `limit` samples each."""
    keep, counts, cur = [], {}, None
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        for line in f:
            s = line.decode("utf-8", "replace")
            m = re.match(r"# (?:HELP|TYPE) (\S+)", s)
            name = m.group(1) if m else re.split(r"[{ ]", s, 1)[0]
            fam = next((w for w in wanted if name == w or name.startswith(w + "_")), None)
            if fam is None:
                continue
            if not s.startswith("#"):
                counts[fam] = counts.get(fam, 0) + 1
                if counts[fam] > limit:
                    continue
            keep.append(s)
    return "".join(keep)

API = ["apiserver_request_total", "apiserver_flowcontrol_rejected_requests_total",
       "process_start_time_seconds", "kubernetes_build_info", "apiserver_storage_objects"]
ETCD = ["etcd_server_has_leader", "etcd_disk_wal_fsync_duration_seconds",
        "etcd_mvcc_db_total_size_in_bytes", "process_start_time_seconds", "etcd_server_version"]

# expfmt: the parser's own test files plus slices of real captures.
for f in sorted(os.listdir(os.path.join(root, "testdata", "expfmt"))):
    put("expfmt", f, open(os.path.join(root, "testdata", "expfmt", f), "rb").read())
api = {}
etcd = {}
for gz in sorted(os.listdir(shared)):
    if not gz.endswith(".prom.gz"):
        continue
    p = os.path.join(shared, gz)
    f = gz[: -len(".gz")]
    if f.startswith("apiserver_nri_v1.2") or f in ("apiserver_nri_v1.33.0.prom", "apiserver_datadog_v1.10.11.prom"):
        api[f] = families(p, API, 20)
        put("expfmt", "real-" + f, api[f])
    if f.startswith("etcd_nri_v3.") and ("3.3" in f or "3.5.21" in f or "3.6.6" in f):
        etcd[f] = families(p, ETCD, 20)
        put("expfmt", "real-" + f, etcd[f])

# capture: manifest + snapshots, split by "\n~~~ " (see cptriage::fuzzing::capture).
SEP = "\n~~~ "
a = api["apiserver_nri_v1.33.0.prom"]
e = etcd["etcd_nri_v3.5.21_k8s1.33.prom"]
def bump(text, k):
    return re.sub(r"^(apiserver_request_total\{[^}]*\} )(\d+)", lambda m: m.group(1) + str(int(m.group(2)) + 100 * k), text, flags=re.M)
manifest = ("format: cptriage/capture/v1\ninterval: 15s\ntargets:\n"
            "- name: apiserver-0\n  role: apiserver\n- name: etcd-0\n  role: etcd\n")
parts = [manifest]
for k in range(3):
    t = 1767225600000 + 15000 * k
    parts.append(f"apiserver-0/{t}.prom\n" + bump(a, k))
    parts.append(f"etcd-0/{t}.prom\n" + e)
put("capture", "api-etcd-3-rounds", SEP.join(parts))
put("capture", "single-snapshot", SEP.join([manifest, "etcd-0/1767225600000.prom\n" + e]))
put("capture", "failures", SEP.join([manifest + "failures:\n- {target: etcd-0, time: 1767225615000, error: refused}\n",
                                     "etcd-0/1767225600000.prom\n" + e, "etcd-0/1767225630000.prom\n" + e]))
put("capture", "adhoc-names", SEP.join(["format: cptriage/capture/v1\ntargets: []\n",
                                        "x/2026-01-01T00:00:00Z.prom\n" + e, "x/1767225615.5.prom\n" + e, "junk.txt\nhello"]))
put("capture", "timestamps", SEP.join([manifest, "apiserver-0/a.prom\nx 1 1767225600000\n", "apiserver-0/b.prom\nx 2 1767225615000\n"]))
put("capture", "gzip", SEP.join([manifest]).encode() + SEP.encode() + b"etcd-0/1767225600000.prom.gz\n" + gzip.compress(e.encode()))

# rules: the shipped tree and the test rule files.
put("rules", "default.yaml", open(os.path.join(root, "rules", "default.yaml"), "rb").read())
for sub in ("good", "bad", "unit"):
    d = os.path.join(root, "testdata", "rules", sub)
    for f in sorted(os.listdir(d)):
        if os.path.isfile(os.path.join(d, f)):
            put("rules", f"{sub}-{f}", open(os.path.join(d, f), "rb").read())

# kubeconfig: hand-written shapes.
K = {
 "token": "apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n    insecure-skip-tls-verify: true\ncontexts:\n- name: t\n  context: {cluster: c, user: u}\n- name: fuzz\n  context: {cluster: c, user: u}\nusers:\n- name: u\n  user: {token: abc}\n",
 "ca-data": "current-context: t\nclusters:\n- name: c\n  cluster:\n    server: https://[::1]:6443/\n    certificate-authority-data: aGVsbG8=\n    tls-server-name: kubernetes\ncontexts:\n- name: t\n  context: {cluster: c, user: u}\nusers:\n- name: u\n  user:\n    client-certificate-data: aGVsbG8=\n    client-key-data: aGVsbG8=\n",
 "files": "current-context: t\nclusters:\n- name: c\n  cluster:\n    server: https://localhost\n    certificate-authority: ca.crt\ncontexts:\n- name: t\n  context: {cluster: c, user: u}\nusers:\n- name: u\n  user:\n    tokenFile: token\n",
 "basic": "current-context: t\nclusters:\n- name: c\n  cluster: {server: 'https://h:1'}\ncontexts:\n- name: t\n  context: {cluster: c, user: u}\nusers:\n- name: u\n  user: {username: a, password: b}\n",
 "provider": "current-context: t\nclusters:\n- name: c\n  cluster: {server: 'https://h:1', proxy-url: 'http://p:3128'}\ncontexts:\n- name: t\n  context: {cluster: c, user: u}\nusers:\n- name: u\n  user: {auth-provider: {name: gcp}}\n",
 "missing": "current-context: nope\nclusters: []\ncontexts: []\nusers: []\n",
 "no-user": "current-context: t\nclusters:\n- name: c\n  cluster: {server: 'not a url'}\ncontexts:\n- name: t\n  context: {cluster: c}\n",
 "empty": "",
}
for k, v in K.items():
    put("kubeconfig", k, v)
print("seeds written to", out)

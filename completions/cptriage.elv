
use builtin;
use str;

set edit:completion:arg-completer[cptriage] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'cptriage'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'cptriage'= {
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
            cand diagnose 'Diagnose the control plane from captured metrics: name the failing axis, its evidence, the root cause by onset time, and what to do next'
            cand tree 'Print the exclusion tree of a rule file'
            cand rules 'Check, test and export rule files'
            cand query 'Evaluate a PromQL expression over captured metrics'
            cand record 'Scrape live targets and write a capture directory'
            cand completions 'Print shell completions for SHELL to stdout'
            cand serve 'Receive Alertmanager notifications and attach a verdict to each alert'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'cptriage;diagnose'= {
            cand --dump 'Captured metrics: a capture directory, a directory of `<target>/<time>.prom[.gz]` files, or single files, each optionally prefixed `NAME=` or `role:NAME=` (role: apiserver, etcd, controller). Repeatable'
            cand --audit 'kube-apiserver audit logs (`audit.k8s.io/v1` events, one JSON object per line, plain or gzip): files or directories of them. Alone, or beside `--dump`, `--live` or `--prometheus`: the latency of slow requests split by layer, and who gets 401/403/429, become evidence over the same steps as the metrics. Repeatable'
            cand --logs 'etcd and kube-apiserver logs: files, or directories in a must-gather, a node''s `/var/log/pods` (sosreport, tarball) or of `<name>.log[.gz]` files, each optionally `NAME=PATH` to name the member. etcd''s zap JSON and capnslog text, klog, the container runtime''s prefix and `kubectl logs --timestamps`, plain or gzip. Alone, or beside `--dump`, `--live` or `--audit`: what the members log (slow fdatasync, late heartbeats, elections, lost peers, NOSPACE, …) becomes evidence over the same steps as the metrics, dated to the line. Repeatable'
            cand --by 'With `--prometheus`: fleet mode. Judge every value of this label (e.g. `cluster`) as its own control plane, from the same queries: one row per cluster, sick first (`-o json`: an array of verdicts, each with its `cluster`; `-o html`/`-o markdown`: the fleet table linking to each cluster''s report). The exit code is the worst of the fleet'
            cand --clusters 'With `--by`: only the clusters whose label value matches this regular expression (anchored, as in PromQL)'
            cand --prometheus-max-samples 'With `--by`: most samples one query may select, the clusters'' largest metric times the steps of a query. A fleet over it is judged in shards of clusters, one query set per shard, so that no query passes the server''s limit (Prometheus''s `--query.max-samples` is 50,000,000) and memory follows one shard. 0: the whole fleet in one query set'
            cand --prometheus-recorded 'With `--prometheus`: read the signals that `rules export` records (`cptriage:<signal>` series of compatible rules, docs/prometheus.md) instead of their raw expressions (`auto`), or always evaluate the raw expressions (`off`)'
            cand --save 'With `--live`: also write the rounds as a capture directory (as `record` does), to diagnose the same rounds again later with `--dump DIR`'
            cand --kubeconfig 'Kubeconfig file (default: `KUBECONFIG`, a colon-separated list, else `~/.kube/config`, else the in-cluster service account)'
            cand --context 'Kubeconfig context (default: the current context)'
            cand --etcd 'An etcd member: `[NAME=]URL`, the client URL (e.g. `https://10.0.0.1:2379`, with `--etcd-cacert/--etcd-cert/--etcd-key`) or a plain metrics port (kubeadm: `http://127.0.0.1:2381`); `HOST:PORT` as etcdctl takes it (https when TLS files are given). Named `etcd-<host>` by default. Repeatable, or comma-separated (`--endpoints`, as etcdctl). When no member is given, live scraping reads `ETCDCTL_ENDPOINTS` (and `ETCDCTL_CACERT`, `ETCDCTL_CERT`, `ETCDCTL_KEY`), as etcdctl does'
            cand --etcd-cacert 'CA that signed the etcd server certificates (kubeadm: /etc/kubernetes/pki/etcd/ca.crt). Also `--cacert`, as etcdctl'
            cand --etcd-cert 'etcd client certificate (kubeadm: /etc/kubernetes/pki/etcd/healthcheck-client.crt). Also `--cert`, as etcdctl'
            cand --etcd-key 'etcd client key (kubeadm: /etc/kubernetes/pki/etcd/healthcheck-client.key). Also `--key`, as etcdctl'
            cand --controller 'A kube-controller-manager: `[NAME=]URL` (e.g. `https://127.0.0.1:10257`), scraped with the kubeconfig''s credentials. Repeatable'
            cand --node 'A node''s metrics, optional evidence beside etcd: a node-exporter (`http://10.0.0.1:9100`) or a cAdvisor endpoint, scraped without credentials. Mapped to the etcd members on the same host (or named by its `nodename`). Repeatable'
            cand --interval 'Time between scrape rounds'
            cand --duration 'How long to scrape (at least two rounds are taken). Default: 30s; with `--watch`, until Ctrl-C'
            cand --timeout 'Timeout of each request, including reading its whole body'
            cand --max-body-total 'Most memory the scrapes of one round may hold together (response text being parsed and the families kept); a scrape that would go over it fails as too large and the others go on'
            cand --prometheus 'Query a Prometheus-compatible HTTP API (Prometheus, Thanos Query, Mimir at `…/prometheus`) instead of reading dumps'
            cand --selector 'Label matchers added to every selector, e.g. `{cluster="prod"}`'
            cand --apiserver-selector 'The series of the apiserver role'
            cand --etcd-selector 'The series of the etcd role'
            cand --controller-selector 'The series of the controller role'
            cand --node-selector 'The series of node metrics (node-exporter, cAdvisor), optional evidence'
            cand --instance-label 'The label that tells instances apart (e.g. `pod`)'
            cand --prometheus-token-file 'File holding a bearer token'
            cand --prometheus-user 'Basic-auth user (with `--prometheus-password-file`)'
            cand --prometheus-password-file 'File holding the basic-auth password'
            cand --prometheus-ca 'CA that signed the server certificate (default: the system roots)'
            cand --prometheus-cert 'Client certificate (with `--prometheus-key`)'
            cand --prometheus-key 'Client key (with `--prometheus-cert`)'
            cand --prometheus-header 'An extra request header, `NAME: VALUE` (e.g. `X-Scope-OrgID: team`). Repeatable'
            cand --prometheus-max-response 'Largest API answer read (after gzip decoding); answers are decoded as they arrive, so memory follows the samples kept, not this size'
            cand --prometheus-timeout 'Timeout of each API request (also sent as the query `timeout`)'
            cand --prometheus-concurrency 'Range queries in flight at once (1–32)'
            cand --prometheus-max-points 'Most points per series of one range query: longer ranges are split into chunks (Prometheus refuses more than 11,000), and a chunk the server refuses as too much (samples, timeout, size) is halved'
            cand --max-body 'Largest metrics text read from one place: one `/metrics` response or one snapshot file, after gzip decoding (`512MiB`, `64MiB`, `1GiB`). Bigger is a per-target error, reported with the rest analysed'
            cand --rules 'Rule file (default: the shipped `rules/default.yaml`)'
            cand --at 'Assess at this time (RFC 3339, unix seconds, `now`, `now-10m`): the tree walk and "lit now". Default: the end of the window'
            cand --from 'Start of the analysed window (RFC 3339, unix seconds, `now-30m`). Default: the first snapshot; with `--prometheus`, one hour before `--to`'
            cand --since 'Analyse only the last DURATION of the window (`--since 30m`): the last 30 minutes of a capture, or up to now with `--prometheus`'
            cand --to 'End of the analysed window (default: the last snapshot; with `--prometheus`, now)'
            cand --step 'Evaluation step (default: the typical snapshot interval)'
            cand --baseline-from 'Baseline from this time of the same data (with `--baseline-to`). Default baseline: the first quarter of the window'
            cand --baseline-to 'End of the explicit baseline range'
            cand --baseline-dump 'A separate healthy capture to take the baseline from. Repeatable'
            cand --debounce 'Consecutive lit steps that make an onset'
            cand -o 'Output format: `table` is the first page (fits the terminal), `wide` every table and the tree walk'
            cand --output 'Output format: `table` is the first page (fits the terminal), `wide` every table and the tree walk'
            cand --color 'Colour the terminal report: `auto` colours a terminal unless `NO_COLOR` is set (or `TERM=dumb`), never a pipe'
            cand --live 'Scrape the live control plane now (apiserver replicas from the kubeconfig, `--etcd` members, `--controller`s) for `--duration`, then diagnose'
            cand --watch 'With `--live`: keep scraping every `--interval` and redraw the verdict after each round, as `top` does, until Ctrl-C (or `--duration`); then print the final report (and keep the `--save` capture)'
            cand --no-apiserver 'Do not scrape the apiserver (only `--etcd`/`--controller`)'
            cand --no-discovery 'Scrape only the kubeconfig''s server address instead of every replica listed by the default/kubernetes EndpointSlice'
            cand --insecure-skip-tls-verify 'Do not verify the apiserver''s certificate (reported loudly)'
            cand --prometheus-insecure-skip-tls-verify 'Do not verify the server certificate (reported loudly)'
            cand --wide 'Every table and the tree walk (the same as `-o wide`)'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'cptriage;tree'= {
            cand --rules 'Rule file (default: the shipped `rules/default.yaml`)'
            cand -o 'Output format'
            cand --output 'Output format'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'cptriage;rules'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
            cand check 'Lint rule files: schema, PromQL subset, metric names unknown to the catalog, unreachable nodes. Exit 0 clean (warnings allowed), 2 on errors'
            cand test 'Run promtool-style unit tests of rule files: input series in expanding notation per target, an evaluation time, the expected verdict. Exit 0 all pass, 1 a test failed, 2 a test file is invalid'
            cand export 'Export the tree as a Prometheus rule file: a recording rule per signal (`cptriage:<signal>`), per question and per leaf, and an alert per leaf with severity, question, falsifier and runbook (docs/export.md)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'cptriage;rules;check'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'cptriage;rules;test'= {
            cand -v 'Print what each passing test concluded, too'
            cand --verbose 'Print what each passing test concluded, too'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'cptriage;rules;export'= {
            cand --format 'Output format'
            cand --rules 'Rule file (default: the shipped `rules/default.yaml`)'
            cand --window 'What `$window` (the range of rate() and co.) becomes'
            cand --for 'How long a leaf must hold before its alert fires'
            cand --baseline-window 'Relative thresholds compare with the median over this range…'
            cand --baseline-offset '…ending this long before the evaluation time'
            cand --apiserver-selector 'Series selector of kube-apiserver targets'
            cand --etcd-selector 'Series selector of etcd members'
            cand --controller-selector 'Series selector of controllers'
            cand --group 'Name of the rule group'
            cand --by 'Keep this label (e.g. `cluster`) through every aggregation and vector match, so one rule file judges every cluster of a shared Prometheus and each alert carries its cluster'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'cptriage;rules;help'= {
            cand check 'Lint rule files: schema, PromQL subset, metric names unknown to the catalog, unreachable nodes. Exit 0 clean (warnings allowed), 2 on errors'
            cand test 'Run promtool-style unit tests of rule files: input series in expanding notation per target, an evaluation time, the expected verdict. Exit 0 all pass, 1 a test failed, 2 a test file is invalid'
            cand export 'Export the tree as a Prometheus rule file: a recording rule per signal (`cptriage:<signal>`), per question and per leaf, and an alert per leaf with severity, question, falsifier and runbook (docs/export.md)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'cptriage;rules;help;check'= {
        }
        &'cptriage;rules;help;test'= {
        }
        &'cptriage;rules;help;export'= {
        }
        &'cptriage;rules;help;help'= {
        }
        &'cptriage;query'= {
            cand --dump 'Captured metrics: a capture directory, a directory of `<target>/<time>.prom[.gz]` files, or single files, each optionally prefixed `NAME=` or `role:NAME=` (role: apiserver, etcd, controller). Repeatable'
            cand --prometheus 'Query a Prometheus-compatible HTTP API (Prometheus, Thanos Query, Mimir at `…/prometheus`) instead of reading dumps'
            cand --selector 'Label matchers added to every selector, e.g. `{cluster="prod"}`'
            cand --apiserver-selector 'The series of the apiserver role'
            cand --etcd-selector 'The series of the etcd role'
            cand --controller-selector 'The series of the controller role'
            cand --node-selector 'The series of node metrics (node-exporter, cAdvisor), optional evidence'
            cand --instance-label 'The label that tells instances apart (e.g. `pod`)'
            cand --prometheus-token-file 'File holding a bearer token'
            cand --prometheus-user 'Basic-auth user (with `--prometheus-password-file`)'
            cand --prometheus-password-file 'File holding the basic-auth password'
            cand --prometheus-ca 'CA that signed the server certificate (default: the system roots)'
            cand --prometheus-cert 'Client certificate (with `--prometheus-key`)'
            cand --prometheus-key 'Client key (with `--prometheus-cert`)'
            cand --prometheus-header 'An extra request header, `NAME: VALUE` (e.g. `X-Scope-OrgID: team`). Repeatable'
            cand --prometheus-max-response 'Largest API answer read (after gzip decoding); answers are decoded as they arrive, so memory follows the samples kept, not this size'
            cand --prometheus-timeout 'Timeout of each API request (also sent as the query `timeout`)'
            cand --prometheus-concurrency 'Range queries in flight at once (1–32)'
            cand --prometheus-max-points 'Most points per series of one range query: longer ranges are split into chunks (Prometheus refuses more than 11,000), and a chunk the server refuses as too much (samples, timeout, size) is halved'
            cand --at 'Evaluate at this time (RFC 3339, unix seconds, `now`, `now-10m`). Default: the last snapshot'
            cand --from 'Start of a range evaluation (RFC 3339, unix seconds, `now-30m`)'
            cand --to 'End of a range evaluation (RFC 3339, unix seconds, `now`)'
            cand --step 'Step of a range evaluation, a Prometheus duration (`5s`, `1m`). Default: the capture''s scrape interval'
            cand --max-body 'Largest metrics text read from one place: one `/metrics` response or one snapshot file, after gzip decoding (`512MiB`, `64MiB`, `1GiB`). Bigger is a per-target error, reported with the rest analysed'
            cand -o 'Output format'
            cand --output 'Output format'
            cand --prometheus-insecure-skip-tls-verify 'Do not verify the server certificate (reported loudly)'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'cptriage;record'= {
            cand --out 'The capture directory to create (must not exist or be empty)'
            cand --kubeconfig 'Kubeconfig file (default: `KUBECONFIG`, a colon-separated list, else `~/.kube/config`, else the in-cluster service account)'
            cand --context 'Kubeconfig context (default: the current context)'
            cand --etcd 'An etcd member: `[NAME=]URL`, the client URL (e.g. `https://10.0.0.1:2379`, with `--etcd-cacert/--etcd-cert/--etcd-key`) or a plain metrics port (kubeadm: `http://127.0.0.1:2381`); `HOST:PORT` as etcdctl takes it (https when TLS files are given). Named `etcd-<host>` by default. Repeatable, or comma-separated (`--endpoints`, as etcdctl). When no member is given, live scraping reads `ETCDCTL_ENDPOINTS` (and `ETCDCTL_CACERT`, `ETCDCTL_CERT`, `ETCDCTL_KEY`), as etcdctl does'
            cand --etcd-cacert 'CA that signed the etcd server certificates (kubeadm: /etc/kubernetes/pki/etcd/ca.crt). Also `--cacert`, as etcdctl'
            cand --etcd-cert 'etcd client certificate (kubeadm: /etc/kubernetes/pki/etcd/healthcheck-client.crt). Also `--cert`, as etcdctl'
            cand --etcd-key 'etcd client key (kubeadm: /etc/kubernetes/pki/etcd/healthcheck-client.key). Also `--key`, as etcdctl'
            cand --controller 'A kube-controller-manager: `[NAME=]URL` (e.g. `https://127.0.0.1:10257`), scraped with the kubeconfig''s credentials. Repeatable'
            cand --node 'A node''s metrics, optional evidence beside etcd: a node-exporter (`http://10.0.0.1:9100`) or a cAdvisor endpoint, scraped without credentials. Mapped to the etcd members on the same host (or named by its `nodename`). Repeatable'
            cand --interval 'Time between scrape rounds'
            cand --duration 'How long to scrape (at least two rounds are taken). Default: 30s; with `--watch`, until Ctrl-C'
            cand --timeout 'Timeout of each request, including reading its whole body'
            cand --max-body-total 'Most memory the scrapes of one round may hold together (response text being parsed and the families kept); a scrape that would go over it fails as too large and the others go on'
            cand --max-body 'Largest metrics text read from one place: one `/metrics` response or one snapshot file, after gzip decoding (`512MiB`, `64MiB`, `1GiB`). Bigger is a per-target error, reported with the rest analysed'
            cand --no-apiserver 'Do not scrape the apiserver (only `--etcd`/`--controller`)'
            cand --no-discovery 'Scrape only the kubeconfig''s server address instead of every replica listed by the default/kubernetes EndpointSlice'
            cand --insecure-skip-tls-verify 'Do not verify the apiserver''s certificate (reported loudly)'
            cand --all 'Keep every metric family as received (default: the apiserver, etcd, process and Go families cptriage knows)'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'cptriage;completions'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'cptriage;serve'= {
            cand --listen 'The address to listen on, `IP:PORT`. Any address other than loopback needs `--token-file`'
            cand --token-file 'File holding the bearer token every request must carry (`Authorization: Bearer TOKEN`)'
            cand --by 'Judge each value of this alert label (e.g. `cluster`) as its own control plane, selected by that label in Prometheus; alerts without it are judged over the whole Prometheus'
            cand --lookback 'How long before the earliest `startsAt` of a notification''s alerts the window starts (the baseline is its first quarter)'
            cand --reuse 'A repeated notification of the same group and `--by` value within this long of its triage''s end reuses that triage (unless new alerts joined)'
            cand --reports 'Write each finished triage as `ID.json` and `ID.html` into this directory (created if missing; files are never overwritten)'
            cand --keep 'How many triages to keep, in memory and in `--reports`: a count (`500`) or an age (`7d`, `12h`)'
            cand --concurrency 'Diagnoses running at once (one per `--by` value at a time)'
            cand --queue 'Triages waiting for a worker; a notification that does not fit is answered 503 with `Retry-After` (Alertmanager retries)'
            cand --notify-url 'POST each finished triage (headline, root cause, where, since, link) to this chat incoming-webhook URL as `{"text": …}`; retried a few times, never fatal'
            cand --external-url 'The URL this service is reached at, for the links in notifications (default: the `--listen` address)'
            cand --grace 'On SIGTERM, how long running diagnoses may take to finish before they are abandoned'
            cand --rules 'Rule file (default: the shipped `rules/default.yaml`)'
            cand --step 'Evaluation step (default: the typical scrape interval)'
            cand --debounce 'Consecutive lit steps that make an onset'
            cand --prometheus 'Query a Prometheus-compatible HTTP API (Prometheus, Thanos Query, Mimir at `…/prometheus`) instead of reading dumps'
            cand --selector 'Label matchers added to every selector, e.g. `{cluster="prod"}`'
            cand --apiserver-selector 'The series of the apiserver role'
            cand --etcd-selector 'The series of the etcd role'
            cand --controller-selector 'The series of the controller role'
            cand --node-selector 'The series of node metrics (node-exporter, cAdvisor), optional evidence'
            cand --instance-label 'The label that tells instances apart (e.g. `pod`)'
            cand --prometheus-token-file 'File holding a bearer token'
            cand --prometheus-user 'Basic-auth user (with `--prometheus-password-file`)'
            cand --prometheus-password-file 'File holding the basic-auth password'
            cand --prometheus-ca 'CA that signed the server certificate (default: the system roots)'
            cand --prometheus-cert 'Client certificate (with `--prometheus-key`)'
            cand --prometheus-key 'Client key (with `--prometheus-cert`)'
            cand --prometheus-header 'An extra request header, `NAME: VALUE` (e.g. `X-Scope-OrgID: team`). Repeatable'
            cand --prometheus-max-response 'Largest API answer read (after gzip decoding); answers are decoded as they arrive, so memory follows the samples kept, not this size'
            cand --prometheus-timeout 'Timeout of each API request (also sent as the query `timeout`)'
            cand --prometheus-concurrency 'Range queries in flight at once (1–32)'
            cand --prometheus-max-points 'Most points per series of one range query: longer ranges are split into chunks (Prometheus refuses more than 11,000), and a chunk the server refuses as too much (samples, timeout, size) is halved'
            cand --prometheus-insecure-skip-tls-verify 'Do not verify the server certificate (reported loudly)'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'cptriage;help'= {
            cand diagnose 'Diagnose the control plane from captured metrics: name the failing axis, its evidence, the root cause by onset time, and what to do next'
            cand tree 'Print the exclusion tree of a rule file'
            cand rules 'Check, test and export rule files'
            cand query 'Evaluate a PromQL expression over captured metrics'
            cand record 'Scrape live targets and write a capture directory'
            cand completions 'Print shell completions for SHELL to stdout'
            cand serve 'Receive Alertmanager notifications and attach a verdict to each alert'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'cptriage;help;diagnose'= {
        }
        &'cptriage;help;tree'= {
        }
        &'cptriage;help;rules'= {
            cand check 'Lint rule files: schema, PromQL subset, metric names unknown to the catalog, unreachable nodes. Exit 0 clean (warnings allowed), 2 on errors'
            cand test 'Run promtool-style unit tests of rule files: input series in expanding notation per target, an evaluation time, the expected verdict. Exit 0 all pass, 1 a test failed, 2 a test file is invalid'
            cand export 'Export the tree as a Prometheus rule file: a recording rule per signal (`cptriage:<signal>`), per question and per leaf, and an alert per leaf with severity, question, falsifier and runbook (docs/export.md)'
        }
        &'cptriage;help;rules;check'= {
        }
        &'cptriage;help;rules;test'= {
        }
        &'cptriage;help;rules;export'= {
        }
        &'cptriage;help;query'= {
        }
        &'cptriage;help;record'= {
        }
        &'cptriage;help;completions'= {
        }
        &'cptriage;help;serve'= {
        }
        &'cptriage;help;help'= {
        }
    ]
    $completions[$command]
}

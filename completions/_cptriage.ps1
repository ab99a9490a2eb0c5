
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'cptriage' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'cptriage'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'cptriage' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('diagnose', 'diagnose', [CompletionResultType]::ParameterValue, 'Diagnose the control plane from captured metrics: name the failing axis, its evidence, the root cause by onset time, and what to do next')
            [CompletionResult]::new('tree', 'tree', [CompletionResultType]::ParameterValue, 'Print the exclusion tree of a rule file')
            [CompletionResult]::new('rules', 'rules', [CompletionResultType]::ParameterValue, 'Check, test and export rule files')
            [CompletionResult]::new('query', 'query', [CompletionResultType]::ParameterValue, 'Evaluate a PromQL expression over captured metrics')
            [CompletionResult]::new('record', 'record', [CompletionResultType]::ParameterValue, 'Scrape live targets and write a capture directory')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print shell completions for SHELL to stdout')
            [CompletionResult]::new('serve', 'serve', [CompletionResultType]::ParameterValue, 'Receive Alertmanager notifications and attach a verdict to each alert')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'cptriage;diagnose' {
            [CompletionResult]::new('--dump', '--dump', [CompletionResultType]::ParameterName, 'Captured metrics: a capture directory, a directory of `<target>/<time>.prom[.gz]` files, or single files, each optionally prefixed `NAME=` or `role:NAME=` (role: apiserver, etcd, controller). Repeatable')
            [CompletionResult]::new('--audit', '--audit', [CompletionResultType]::ParameterName, 'kube-apiserver audit logs (`audit.k8s.io/v1` events, one JSON object per line, plain or gzip): files or directories of them. Alone, or beside `--dump`, `--live` or `--prometheus`: the latency of slow requests split by layer, and who gets 401/403/429, become evidence over the same steps as the metrics. Repeatable')
            [CompletionResult]::new('--logs', '--logs', [CompletionResultType]::ParameterName, 'etcd and kube-apiserver logs: files, or directories in a must-gather, a node''s `/var/log/pods` (sosreport, tarball) or of `<name>.log[.gz]` files, each optionally `NAME=PATH` to name the member. etcd''s zap JSON and capnslog text, klog, the container runtime''s prefix and `kubectl logs --timestamps`, plain or gzip. Alone, or beside `--dump`, `--live` or `--audit`: what the members log (slow fdatasync, late heartbeats, elections, lost peers, NOSPACE, …) becomes evidence over the same steps as the metrics, dated to the line. Repeatable')
            [CompletionResult]::new('--by', '--by', [CompletionResultType]::ParameterName, 'With `--prometheus`: fleet mode. Judge every value of this label (e.g. `cluster`) as its own control plane, from the same queries: one row per cluster, sick first (`-o json`: an array of verdicts, each with its `cluster`; `-o html`/`-o markdown`: the fleet table linking to each cluster''s report). The exit code is the worst of the fleet')
            [CompletionResult]::new('--clusters', '--clusters', [CompletionResultType]::ParameterName, 'With `--by`: only the clusters whose label value matches this regular expression (anchored, as in PromQL)')
            [CompletionResult]::new('--prometheus-max-samples', '--prometheus-max-samples', [CompletionResultType]::ParameterName, 'With `--by`: most samples one query may select, the clusters'' largest metric times the steps of a query. A fleet over it is judged in shards of clusters, one query set per shard, so that no query passes the server''s limit (Prometheus''s `--query.max-samples` is 50,000,000) and memory follows one shard. 0: the whole fleet in one query set')
            [CompletionResult]::new('--prometheus-recorded', '--prometheus-recorded', [CompletionResultType]::ParameterName, 'With `--prometheus`: read the signals that `rules export` records (`cptriage:<signal>` series of compatible rules, docs/prometheus.md) instead of their raw expressions (`auto`), or always evaluate the raw expressions (`off`)')
            [CompletionResult]::new('--save', '--save', [CompletionResultType]::ParameterName, 'With `--live`: also write the rounds as a capture directory (as `record` does), to diagnose the same rounds again later with `--dump DIR`')
            [CompletionResult]::new('--kubeconfig', '--kubeconfig', [CompletionResultType]::ParameterName, 'Kubeconfig file (default: `KUBECONFIG`, a colon-separated list, else `~/.kube/config`, else the in-cluster service account)')
            [CompletionResult]::new('--context', '--context', [CompletionResultType]::ParameterName, 'Kubeconfig context (default: the current context)')
            [CompletionResult]::new('--etcd', '--etcd', [CompletionResultType]::ParameterName, 'An etcd member: `[NAME=]URL`, the client URL (e.g. `https://10.0.0.1:2379`, with `--etcd-cacert/--etcd-cert/--etcd-key`) or a plain metrics port (kubeadm: `http://127.0.0.1:2381`); `HOST:PORT` as etcdctl takes it (https when TLS files are given). Named `etcd-<host>` by default. Repeatable, or comma-separated (`--endpoints`, as etcdctl). When no member is given, live scraping reads `ETCDCTL_ENDPOINTS` (and `ETCDCTL_CACERT`, `ETCDCTL_CERT`, `ETCDCTL_KEY`), as etcdctl does')
            [CompletionResult]::new('--etcd-cacert', '--etcd-cacert', [CompletionResultType]::ParameterName, 'CA that signed the etcd server certificates (kubeadm: /etc/kubernetes/pki/etcd/ca.crt). Also `--cacert`, as etcdctl')
            [CompletionResult]::new('--etcd-cert', '--etcd-cert', [CompletionResultType]::ParameterName, 'etcd client certificate (kubeadm: /etc/kubernetes/pki/etcd/healthcheck-client.crt). Also `--cert`, as etcdctl')
            [CompletionResult]::new('--etcd-key', '--etcd-key', [CompletionResultType]::ParameterName, 'etcd client key (kubeadm: /etc/kubernetes/pki/etcd/healthcheck-client.key). Also `--key`, as etcdctl')
            [CompletionResult]::new('--controller', '--controller', [CompletionResultType]::ParameterName, 'A kube-controller-manager: `[NAME=]URL` (e.g. `https://127.0.0.1:10257`), scraped with the kubeconfig''s credentials. Repeatable')
            [CompletionResult]::new('--node', '--node', [CompletionResultType]::ParameterName, 'A node''s metrics, optional evidence beside etcd: a node-exporter (`http://10.0.0.1:9100`) or a cAdvisor endpoint, scraped without credentials. Mapped to the etcd members on the same host (or named by its `nodename`). Repeatable')
            [CompletionResult]::new('--interval', '--interval', [CompletionResultType]::ParameterName, 'Time between scrape rounds')
            [CompletionResult]::new('--duration', '--duration', [CompletionResultType]::ParameterName, 'How long to scrape (at least two rounds are taken). Default: 30s; with `--watch`, until Ctrl-C')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Timeout of each request, including reading its whole body')
            [CompletionResult]::new('--max-body-total', '--max-body-total', [CompletionResultType]::ParameterName, 'Most memory the scrapes of one round may hold together (response text being parsed and the families kept); a scrape that would go over it fails as too large and the others go on')
            [CompletionResult]::new('--prometheus', '--prometheus', [CompletionResultType]::ParameterName, 'Query a Prometheus-compatible HTTP API (Prometheus, Thanos Query, Mimir at `…/prometheus`) instead of reading dumps')
            [CompletionResult]::new('--selector', '--selector', [CompletionResultType]::ParameterName, 'Label matchers added to every selector, e.g. `{cluster="prod"}`')
            [CompletionResult]::new('--apiserver-selector', '--apiserver-selector', [CompletionResultType]::ParameterName, 'The series of the apiserver role')
            [CompletionResult]::new('--etcd-selector', '--etcd-selector', [CompletionResultType]::ParameterName, 'The series of the etcd role')
            [CompletionResult]::new('--controller-selector', '--controller-selector', [CompletionResultType]::ParameterName, 'The series of the controller role')
            [CompletionResult]::new('--node-selector', '--node-selector', [CompletionResultType]::ParameterName, 'The series of node metrics (node-exporter, cAdvisor), optional evidence')
            [CompletionResult]::new('--instance-label', '--instance-label', [CompletionResultType]::ParameterName, 'The label that tells instances apart (e.g. `pod`)')
            [CompletionResult]::new('--prometheus-token-file', '--prometheus-token-file', [CompletionResultType]::ParameterName, 'File holding a bearer token')
            [CompletionResult]::new('--prometheus-user', '--prometheus-user', [CompletionResultType]::ParameterName, 'Basic-auth user (with `--prometheus-password-file`)')
            [CompletionResult]::new('--prometheus-password-file', '--prometheus-password-file', [CompletionResultType]::ParameterName, 'File holding the basic-auth password')
            [CompletionResult]::new('--prometheus-ca', '--prometheus-ca', [CompletionResultType]::ParameterName, 'CA that signed the server certificate (default: the system roots)')
            [CompletionResult]::new('--prometheus-cert', '--prometheus-cert', [CompletionResultType]::ParameterName, 'Client certificate (with `--prometheus-key`)')
            [CompletionResult]::new('--prometheus-key', '--prometheus-key', [CompletionResultType]::ParameterName, 'Client key (with `--prometheus-cert`)')
            [CompletionResult]::new('--prometheus-header', '--prometheus-header', [CompletionResultType]::ParameterName, 'An extra request header, `NAME: VALUE` (e.g. `X-Scope-OrgID: team`). Repeatable')
            [CompletionResult]::new('--prometheus-max-response', '--prometheus-max-response', [CompletionResultType]::ParameterName, 'Largest API answer read (after gzip decoding); answers are decoded as they arrive, so memory follows the samples kept, not this size')
            [CompletionResult]::new('--prometheus-timeout', '--prometheus-timeout', [CompletionResultType]::ParameterName, 'Timeout of each API request (also sent as the query `timeout`)')
            [CompletionResult]::new('--prometheus-concurrency', '--prometheus-concurrency', [CompletionResultType]::ParameterName, 'Range queries in flight at once (1–32)')
            [CompletionResult]::new('--prometheus-max-points', '--prometheus-max-points', [CompletionResultType]::ParameterName, 'Most points per series of one range query: longer ranges are split into chunks (Prometheus refuses more than 11,000), and a chunk the server refuses as too much (samples, timeout, size) is halved')
            [CompletionResult]::new('--max-body', '--max-body', [CompletionResultType]::ParameterName, 'Largest metrics text read from one place: one `/metrics` response or one snapshot file, after gzip decoding (`512MiB`, `64MiB`, `1GiB`). Bigger is a per-target error, reported with the rest analysed')
            [CompletionResult]::new('--rules', '--rules', [CompletionResultType]::ParameterName, 'Rule file (default: the shipped `rules/default.yaml`)')
            [CompletionResult]::new('--at', '--at', [CompletionResultType]::ParameterName, 'Assess at this time (RFC 3339, unix seconds, `now`, `now-10m`): the tree walk and "lit now". Default: the end of the window')
            [CompletionResult]::new('--from', '--from', [CompletionResultType]::ParameterName, 'Start of the analysed window (RFC 3339, unix seconds, `now-30m`). Default: the first snapshot; with `--prometheus`, one hour before `--to`')
            [CompletionResult]::new('--since', '--since', [CompletionResultType]::ParameterName, 'Analyse only the last DURATION of the window (`--since 30m`): the last 30 minutes of a capture, or up to now with `--prometheus`')
            [CompletionResult]::new('--to', '--to', [CompletionResultType]::ParameterName, 'End of the analysed window (default: the last snapshot; with `--prometheus`, now)')
            [CompletionResult]::new('--step', '--step', [CompletionResultType]::ParameterName, 'Evaluation step (default: the typical snapshot interval)')
            [CompletionResult]::new('--baseline-from', '--baseline-from', [CompletionResultType]::ParameterName, 'Baseline from this time of the same data (with `--baseline-to`). Default baseline: the first quarter of the window')
            [CompletionResult]::new('--baseline-to', '--baseline-to', [CompletionResultType]::ParameterName, 'End of the explicit baseline range')
            [CompletionResult]::new('--baseline-dump', '--baseline-dump', [CompletionResultType]::ParameterName, 'A separate healthy capture to take the baseline from. Repeatable')
            [CompletionResult]::new('--debounce', '--debounce', [CompletionResultType]::ParameterName, 'Consecutive lit steps that make an onset')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format: `table` is the first page (fits the terminal), `wide` every table and the tree walk')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format: `table` is the first page (fits the terminal), `wide` every table and the tree walk')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'Colour the terminal report: `auto` colours a terminal unless `NO_COLOR` is set (or `TERM=dumb`), never a pipe')
            [CompletionResult]::new('--live', '--live', [CompletionResultType]::ParameterName, 'Scrape the live control plane now (apiserver replicas from the kubeconfig, `--etcd` members, `--controller`s) for `--duration`, then diagnose')
            [CompletionResult]::new('--watch', '--watch', [CompletionResultType]::ParameterName, 'With `--live`: keep scraping every `--interval` and redraw the verdict after each round, as `top` does, until Ctrl-C (or `--duration`); then print the final report (and keep the `--save` capture)')
            [CompletionResult]::new('--no-apiserver', '--no-apiserver', [CompletionResultType]::ParameterName, 'Do not scrape the apiserver (only `--etcd`/`--controller`)')
            [CompletionResult]::new('--no-discovery', '--no-discovery', [CompletionResultType]::ParameterName, 'Scrape only the kubeconfig''s server address instead of every replica listed by the default/kubernetes EndpointSlice')
            [CompletionResult]::new('--insecure-skip-tls-verify', '--insecure-skip-tls-verify', [CompletionResultType]::ParameterName, 'Do not verify the apiserver''s certificate (reported loudly)')
            [CompletionResult]::new('--prometheus-insecure-skip-tls-verify', '--prometheus-insecure-skip-tls-verify', [CompletionResultType]::ParameterName, 'Do not verify the server certificate (reported loudly)')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Every table and the tree walk (the same as `-o wide`)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'cptriage;tree' {
            [CompletionResult]::new('--rules', '--rules', [CompletionResultType]::ParameterName, 'Rule file (default: the shipped `rules/default.yaml`)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'cptriage;rules' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('check', 'check', [CompletionResultType]::ParameterValue, 'Lint rule files: schema, PromQL subset, metric names unknown to the catalog, unreachable nodes. Exit 0 clean (warnings allowed), 2 on errors')
            [CompletionResult]::new('test', 'test', [CompletionResultType]::ParameterValue, 'Run promtool-style unit tests of rule files: input series in expanding notation per target, an evaluation time, the expected verdict. Exit 0 all pass, 1 a test failed, 2 a test file is invalid')
            [CompletionResult]::new('export', 'export', [CompletionResultType]::ParameterValue, 'Export the tree as a Prometheus rule file: a recording rule per signal (`cptriage:<signal>`), per question and per leaf, and an alert per leaf with severity, question, falsifier and runbook (docs/export.md)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'cptriage;rules;check' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'cptriage;rules;test' {
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print what each passing test concluded, too')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print what each passing test concluded, too')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'cptriage;rules;export' {
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--rules', '--rules', [CompletionResultType]::ParameterName, 'Rule file (default: the shipped `rules/default.yaml`)')
            [CompletionResult]::new('--window', '--window', [CompletionResultType]::ParameterName, 'What `$window` (the range of rate() and co.) becomes')
            [CompletionResult]::new('--for', '--for', [CompletionResultType]::ParameterName, 'How long a leaf must hold before its alert fires')
            [CompletionResult]::new('--baseline-window', '--baseline-window', [CompletionResultType]::ParameterName, 'Relative thresholds compare with the median over this range…')
            [CompletionResult]::new('--baseline-offset', '--baseline-offset', [CompletionResultType]::ParameterName, '…ending this long before the evaluation time')
            [CompletionResult]::new('--apiserver-selector', '--apiserver-selector', [CompletionResultType]::ParameterName, 'Series selector of kube-apiserver targets')
            [CompletionResult]::new('--etcd-selector', '--etcd-selector', [CompletionResultType]::ParameterName, 'Series selector of etcd members')
            [CompletionResult]::new('--controller-selector', '--controller-selector', [CompletionResultType]::ParameterName, 'Series selector of controllers')
            [CompletionResult]::new('--group', '--group', [CompletionResultType]::ParameterName, 'Name of the rule group')
            [CompletionResult]::new('--by', '--by', [CompletionResultType]::ParameterName, 'Keep this label (e.g. `cluster`) through every aggregation and vector match, so one rule file judges every cluster of a shared Prometheus and each alert carries its cluster')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'cptriage;rules;help' {
            [CompletionResult]::new('check', 'check', [CompletionResultType]::ParameterValue, 'Lint rule files: schema, PromQL subset, metric names unknown to the catalog, unreachable nodes. Exit 0 clean (warnings allowed), 2 on errors')
            [CompletionResult]::new('test', 'test', [CompletionResultType]::ParameterValue, 'Run promtool-style unit tests of rule files: input series in expanding notation per target, an evaluation time, the expected verdict. Exit 0 all pass, 1 a test failed, 2 a test file is invalid')
            [CompletionResult]::new('export', 'export', [CompletionResultType]::ParameterValue, 'Export the tree as a Prometheus rule file: a recording rule per signal (`cptriage:<signal>`), per question and per leaf, and an alert per leaf with severity, question, falsifier and runbook (docs/export.md)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'cptriage;rules;help;check' {
            break
        }
        'cptriage;rules;help;test' {
            break
        }
        'cptriage;rules;help;export' {
            break
        }
        'cptriage;rules;help;help' {
            break
        }
        'cptriage;query' {
            [CompletionResult]::new('--dump', '--dump', [CompletionResultType]::ParameterName, 'Captured metrics: a capture directory, a directory of `<target>/<time>.prom[.gz]` files, or single files, each optionally prefixed `NAME=` or `role:NAME=` (role: apiserver, etcd, controller). Repeatable')
            [CompletionResult]::new('--prometheus', '--prometheus', [CompletionResultType]::ParameterName, 'Query a Prometheus-compatible HTTP API (Prometheus, Thanos Query, Mimir at `…/prometheus`) instead of reading dumps')
            [CompletionResult]::new('--selector', '--selector', [CompletionResultType]::ParameterName, 'Label matchers added to every selector, e.g. `{cluster="prod"}`')
            [CompletionResult]::new('--apiserver-selector', '--apiserver-selector', [CompletionResultType]::ParameterName, 'The series of the apiserver role')
            [CompletionResult]::new('--etcd-selector', '--etcd-selector', [CompletionResultType]::ParameterName, 'The series of the etcd role')
            [CompletionResult]::new('--controller-selector', '--controller-selector', [CompletionResultType]::ParameterName, 'The series of the controller role')
            [CompletionResult]::new('--node-selector', '--node-selector', [CompletionResultType]::ParameterName, 'The series of node metrics (node-exporter, cAdvisor), optional evidence')
            [CompletionResult]::new('--instance-label', '--instance-label', [CompletionResultType]::ParameterName, 'The label that tells instances apart (e.g. `pod`)')
            [CompletionResult]::new('--prometheus-token-file', '--prometheus-token-file', [CompletionResultType]::ParameterName, 'File holding a bearer token')
            [CompletionResult]::new('--prometheus-user', '--prometheus-user', [CompletionResultType]::ParameterName, 'Basic-auth user (with `--prometheus-password-file`)')
            [CompletionResult]::new('--prometheus-password-file', '--prometheus-password-file', [CompletionResultType]::ParameterName, 'File holding the basic-auth password')
            [CompletionResult]::new('--prometheus-ca', '--prometheus-ca', [CompletionResultType]::ParameterName, 'CA that signed the server certificate (default: the system roots)')
            [CompletionResult]::new('--prometheus-cert', '--prometheus-cert', [CompletionResultType]::ParameterName, 'Client certificate (with `--prometheus-key`)')
            [CompletionResult]::new('--prometheus-key', '--prometheus-key', [CompletionResultType]::ParameterName, 'Client key (with `--prometheus-cert`)')
            [CompletionResult]::new('--prometheus-header', '--prometheus-header', [CompletionResultType]::ParameterName, 'An extra request header, `NAME: VALUE` (e.g. `X-Scope-OrgID: team`). Repeatable')
            [CompletionResult]::new('--prometheus-max-response', '--prometheus-max-response', [CompletionResultType]::ParameterName, 'Largest API answer read (after gzip decoding); answers are decoded as they arrive, so memory follows the samples kept, not this size')
            [CompletionResult]::new('--prometheus-timeout', '--prometheus-timeout', [CompletionResultType]::ParameterName, 'Timeout of each API request (also sent as the query `timeout`)')
            [CompletionResult]::new('--prometheus-concurrency', '--prometheus-concurrency', [CompletionResultType]::ParameterName, 'Range queries in flight at once (1–32)')
            [CompletionResult]::new('--prometheus-max-points', '--prometheus-max-points', [CompletionResultType]::ParameterName, 'Most points per series of one range query: longer ranges are split into chunks (Prometheus refuses more than 11,000), and a chunk the server refuses as too much (samples, timeout, size) is halved')
            [CompletionResult]::new('--at', '--at', [CompletionResultType]::ParameterName, 'Evaluate at this time (RFC 3339, unix seconds, `now`, `now-10m`). Default: the last snapshot')
            [CompletionResult]::new('--from', '--from', [CompletionResultType]::ParameterName, 'Start of a range evaluation (RFC 3339, unix seconds, `now-30m`)')
            [CompletionResult]::new('--to', '--to', [CompletionResultType]::ParameterName, 'End of a range evaluation (RFC 3339, unix seconds, `now`)')
            [CompletionResult]::new('--step', '--step', [CompletionResultType]::ParameterName, 'Step of a range evaluation, a Prometheus duration (`5s`, `1m`). Default: the capture''s scrape interval')
            [CompletionResult]::new('--max-body', '--max-body', [CompletionResultType]::ParameterName, 'Largest metrics text read from one place: one `/metrics` response or one snapshot file, after gzip decoding (`512MiB`, `64MiB`, `1GiB`). Bigger is a per-target error, reported with the rest analysed')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--prometheus-insecure-skip-tls-verify', '--prometheus-insecure-skip-tls-verify', [CompletionResultType]::ParameterName, 'Do not verify the server certificate (reported loudly)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'cptriage;record' {
            [CompletionResult]::new('--out', '--out', [CompletionResultType]::ParameterName, 'The capture directory to create (must not exist or be empty)')
            [CompletionResult]::new('--kubeconfig', '--kubeconfig', [CompletionResultType]::ParameterName, 'Kubeconfig file (default: `KUBECONFIG`, a colon-separated list, else `~/.kube/config`, else the in-cluster service account)')
            [CompletionResult]::new('--context', '--context', [CompletionResultType]::ParameterName, 'Kubeconfig context (default: the current context)')
            [CompletionResult]::new('--etcd', '--etcd', [CompletionResultType]::ParameterName, 'An etcd member: `[NAME=]URL`, the client URL (e.g. `https://10.0.0.1:2379`, with `--etcd-cacert/--etcd-cert/--etcd-key`) or a plain metrics port (kubeadm: `http://127.0.0.1:2381`); `HOST:PORT` as etcdctl takes it (https when TLS files are given). Named `etcd-<host>` by default. Repeatable, or comma-separated (`--endpoints`, as etcdctl). When no member is given, live scraping reads `ETCDCTL_ENDPOINTS` (and `ETCDCTL_CACERT`, `ETCDCTL_CERT`, `ETCDCTL_KEY`), as etcdctl does')
            [CompletionResult]::new('--etcd-cacert', '--etcd-cacert', [CompletionResultType]::ParameterName, 'CA that signed the etcd server certificates (kubeadm: /etc/kubernetes/pki/etcd/ca.crt). Also `--cacert`, as etcdctl')
            [CompletionResult]::new('--etcd-cert', '--etcd-cert', [CompletionResultType]::ParameterName, 'etcd client certificate (kubeadm: /etc/kubernetes/pki/etcd/healthcheck-client.crt). Also `--cert`, as etcdctl')
            [CompletionResult]::new('--etcd-key', '--etcd-key', [CompletionResultType]::ParameterName, 'etcd client key (kubeadm: /etc/kubernetes/pki/etcd/healthcheck-client.key). Also `--key`, as etcdctl')
            [CompletionResult]::new('--controller', '--controller', [CompletionResultType]::ParameterName, 'A kube-controller-manager: `[NAME=]URL` (e.g. `https://127.0.0.1:10257`), scraped with the kubeconfig''s credentials. Repeatable')
            [CompletionResult]::new('--node', '--node', [CompletionResultType]::ParameterName, 'A node''s metrics, optional evidence beside etcd: a node-exporter (`http://10.0.0.1:9100`) or a cAdvisor endpoint, scraped without credentials. Mapped to the etcd members on the same host (or named by its `nodename`). Repeatable')
            [CompletionResult]::new('--interval', '--interval', [CompletionResultType]::ParameterName, 'Time between scrape rounds')
            [CompletionResult]::new('--duration', '--duration', [CompletionResultType]::ParameterName, 'How long to scrape (at least two rounds are taken). Default: 30s; with `--watch`, until Ctrl-C')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Timeout of each request, including reading its whole body')
            [CompletionResult]::new('--max-body-total', '--max-body-total', [CompletionResultType]::ParameterName, 'Most memory the scrapes of one round may hold together (response text being parsed and the families kept); a scrape that would go over it fails as too large and the others go on')
            [CompletionResult]::new('--max-body', '--max-body', [CompletionResultType]::ParameterName, 'Largest metrics text read from one place: one `/metrics` response or one snapshot file, after gzip decoding (`512MiB`, `64MiB`, `1GiB`). Bigger is a per-target error, reported with the rest analysed')
            [CompletionResult]::new('--no-apiserver', '--no-apiserver', [CompletionResultType]::ParameterName, 'Do not scrape the apiserver (only `--etcd`/`--controller`)')
            [CompletionResult]::new('--no-discovery', '--no-discovery', [CompletionResultType]::ParameterName, 'Scrape only the kubeconfig''s server address instead of every replica listed by the default/kubernetes EndpointSlice')
            [CompletionResult]::new('--insecure-skip-tls-verify', '--insecure-skip-tls-verify', [CompletionResultType]::ParameterName, 'Do not verify the apiserver''s certificate (reported loudly)')
            [CompletionResult]::new('--all', '--all', [CompletionResultType]::ParameterName, 'Keep every metric family as received (default: the apiserver, etcd, process and Go families cptriage knows)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'cptriage;completions' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'cptriage;serve' {
            [CompletionResult]::new('--listen', '--listen', [CompletionResultType]::ParameterName, 'The address to listen on, `IP:PORT`. Any address other than loopback needs `--token-file`')
            [CompletionResult]::new('--token-file', '--token-file', [CompletionResultType]::ParameterName, 'File holding the bearer token every request must carry (`Authorization: Bearer TOKEN`)')
            [CompletionResult]::new('--by', '--by', [CompletionResultType]::ParameterName, 'Judge each value of this alert label (e.g. `cluster`) as its own control plane, selected by that label in Prometheus; alerts without it are judged over the whole Prometheus')
            [CompletionResult]::new('--lookback', '--lookback', [CompletionResultType]::ParameterName, 'How long before the earliest `startsAt` of a notification''s alerts the window starts (the baseline is its first quarter)')
            [CompletionResult]::new('--reuse', '--reuse', [CompletionResultType]::ParameterName, 'A repeated notification of the same group and `--by` value within this long of its triage''s end reuses that triage (unless new alerts joined)')
            [CompletionResult]::new('--reports', '--reports', [CompletionResultType]::ParameterName, 'Write each finished triage as `ID.json` and `ID.html` into this directory (created if missing; files are never overwritten)')
            [CompletionResult]::new('--keep', '--keep', [CompletionResultType]::ParameterName, 'How many triages to keep, in memory and in `--reports`: a count (`500`) or an age (`7d`, `12h`)')
            [CompletionResult]::new('--concurrency', '--concurrency', [CompletionResultType]::ParameterName, 'Diagnoses running at once (one per `--by` value at a time)')
            [CompletionResult]::new('--queue', '--queue', [CompletionResultType]::ParameterName, 'Triages waiting for a worker; a notification that does not fit is answered 503 with `Retry-After` (Alertmanager retries)')
            [CompletionResult]::new('--notify-url', '--notify-url', [CompletionResultType]::ParameterName, 'POST each finished triage (headline, root cause, where, since, link) to this chat incoming-webhook URL as `{"text": …}`; retried a few times, never fatal')
            [CompletionResult]::new('--external-url', '--external-url', [CompletionResultType]::ParameterName, 'The URL this service is reached at, for the links in notifications (default: the `--listen` address)')
            [CompletionResult]::new('--grace', '--grace', [CompletionResultType]::ParameterName, 'On SIGTERM, how long running diagnoses may take to finish before they are abandoned')
            [CompletionResult]::new('--rules', '--rules', [CompletionResultType]::ParameterName, 'Rule file (default: the shipped `rules/default.yaml`)')
            [CompletionResult]::new('--step', '--step', [CompletionResultType]::ParameterName, 'Evaluation step (default: the typical scrape interval)')
            [CompletionResult]::new('--debounce', '--debounce', [CompletionResultType]::ParameterName, 'Consecutive lit steps that make an onset')
            [CompletionResult]::new('--prometheus', '--prometheus', [CompletionResultType]::ParameterName, 'Query a Prometheus-compatible HTTP API (Prometheus, Thanos Query, Mimir at `…/prometheus`) instead of reading dumps')
            [CompletionResult]::new('--selector', '--selector', [CompletionResultType]::ParameterName, 'Label matchers added to every selector, e.g. `{cluster="prod"}`')
            [CompletionResult]::new('--apiserver-selector', '--apiserver-selector', [CompletionResultType]::ParameterName, 'The series of the apiserver role')
            [CompletionResult]::new('--etcd-selector', '--etcd-selector', [CompletionResultType]::ParameterName, 'The series of the etcd role')
            [CompletionResult]::new('--controller-selector', '--controller-selector', [CompletionResultType]::ParameterName, 'The series of the controller role')
            [CompletionResult]::new('--node-selector', '--node-selector', [CompletionResultType]::ParameterName, 'The series of node metrics (node-exporter, cAdvisor), optional evidence')
            [CompletionResult]::new('--instance-label', '--instance-label', [CompletionResultType]::ParameterName, 'The label that tells instances apart (e.g. `pod`)')
            [CompletionResult]::new('--prometheus-token-file', '--prometheus-token-file', [CompletionResultType]::ParameterName, 'File holding a bearer token')
            [CompletionResult]::new('--prometheus-user', '--prometheus-user', [CompletionResultType]::ParameterName, 'Basic-auth user (with `--prometheus-password-file`)')
            [CompletionResult]::new('--prometheus-password-file', '--prometheus-password-file', [CompletionResultType]::ParameterName, 'File holding the basic-auth password')
            [CompletionResult]::new('--prometheus-ca', '--prometheus-ca', [CompletionResultType]::ParameterName, 'CA that signed the server certificate (default: the system roots)')
            [CompletionResult]::new('--prometheus-cert', '--prometheus-cert', [CompletionResultType]::ParameterName, 'Client certificate (with `--prometheus-key`)')
            [CompletionResult]::new('--prometheus-key', '--prometheus-key', [CompletionResultType]::ParameterName, 'Client key (with `--prometheus-cert`)')
            [CompletionResult]::new('--prometheus-header', '--prometheus-header', [CompletionResultType]::ParameterName, 'An extra request header, `NAME: VALUE` (e.g. `X-Scope-OrgID: team`). Repeatable')
            [CompletionResult]::new('--prometheus-max-response', '--prometheus-max-response', [CompletionResultType]::ParameterName, 'Largest API answer read (after gzip decoding); answers are decoded as they arrive, so memory follows the samples kept, not this size')
            [CompletionResult]::new('--prometheus-timeout', '--prometheus-timeout', [CompletionResultType]::ParameterName, 'Timeout of each API request (also sent as the query `timeout`)')
            [CompletionResult]::new('--prometheus-concurrency', '--prometheus-concurrency', [CompletionResultType]::ParameterName, 'Range queries in flight at once (1–32)')
            [CompletionResult]::new('--prometheus-max-points', '--prometheus-max-points', [CompletionResultType]::ParameterName, 'Most points per series of one range query: longer ranges are split into chunks (Prometheus refuses more than 11,000), and a chunk the server refuses as too much (samples, timeout, size) is halved')
            [CompletionResult]::new('--prometheus-insecure-skip-tls-verify', '--prometheus-insecure-skip-tls-verify', [CompletionResultType]::ParameterName, 'Do not verify the server certificate (reported loudly)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'cptriage;help' {
            [CompletionResult]::new('diagnose', 'diagnose', [CompletionResultType]::ParameterValue, 'Diagnose the control plane from captured metrics: name the failing axis, its evidence, the root cause by onset time, and what to do next')
            [CompletionResult]::new('tree', 'tree', [CompletionResultType]::ParameterValue, 'Print the exclusion tree of a rule file')
            [CompletionResult]::new('rules', 'rules', [CompletionResultType]::ParameterValue, 'Check, test and export rule files')
            [CompletionResult]::new('query', 'query', [CompletionResultType]::ParameterValue, 'Evaluate a PromQL expression over captured metrics')
            [CompletionResult]::new('record', 'record', [CompletionResultType]::ParameterValue, 'Scrape live targets and write a capture directory')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print shell completions for SHELL to stdout')
            [CompletionResult]::new('serve', 'serve', [CompletionResultType]::ParameterValue, 'Receive Alertmanager notifications and attach a verdict to each alert')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'cptriage;help;diagnose' {
            break
        }
        'cptriage;help;tree' {
            break
        }
        'cptriage;help;rules' {
            [CompletionResult]::new('check', 'check', [CompletionResultType]::ParameterValue, 'Lint rule files: schema, PromQL subset, metric names unknown to the catalog, unreachable nodes. Exit 0 clean (warnings allowed), 2 on errors')
            [CompletionResult]::new('test', 'test', [CompletionResultType]::ParameterValue, 'Run promtool-style unit tests of rule files: input series in expanding notation per target, an evaluation time, the expected verdict. Exit 0 all pass, 1 a test failed, 2 a test file is invalid')
            [CompletionResult]::new('export', 'export', [CompletionResultType]::ParameterValue, 'Export the tree as a Prometheus rule file: a recording rule per signal (`cptriage:<signal>`), per question and per leaf, and an alert per leaf with severity, question, falsifier and runbook (docs/export.md)')
            break
        }
        'cptriage;help;rules;check' {
            break
        }
        'cptriage;help;rules;test' {
            break
        }
        'cptriage;help;rules;export' {
            break
        }
        'cptriage;help;query' {
            break
        }
        'cptriage;help;record' {
            break
        }
        'cptriage;help;completions' {
            break
        }
        'cptriage;help;serve' {
            break
        }
        'cptriage;help;help' {
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}

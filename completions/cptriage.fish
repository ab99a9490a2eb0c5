# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_cptriage_global_optspecs
    string join \n h/help V/version
end

function __fish_cptriage_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_cptriage_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_cptriage_using_subcommand
    set -l cmd (__fish_cptriage_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c cptriage -n "__fish_cptriage_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cptriage -n "__fish_cptriage_needs_command" -s V -l version -d 'Print version'
complete -c cptriage -n "__fish_cptriage_needs_command" -f -a "diagnose" -d 'Diagnose the control plane from captured metrics: name the failing axis, its evidence, the root cause by onset time, and what to do next'
complete -c cptriage -n "__fish_cptriage_needs_command" -f -a "tree" -d 'Print the exclusion tree of a rule file'
complete -c cptriage -n "__fish_cptriage_needs_command" -f -a "rules" -d 'Check, test and export rule files'
complete -c cptriage -n "__fish_cptriage_needs_command" -f -a "query" -d 'Evaluate a PromQL expression over captured metrics'
complete -c cptriage -n "__fish_cptriage_needs_command" -f -a "record" -d 'Scrape live targets and write a capture directory'
complete -c cptriage -n "__fish_cptriage_needs_command" -f -a "completions" -d 'Print shell completions for SHELL to stdout'
complete -c cptriage -n "__fish_cptriage_needs_command" -f -a "serve" -d 'Receive Alertmanager notifications and attach a verdict to each alert'
complete -c cptriage -n "__fish_cptriage_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l dump -d 'Captured metrics: a capture directory, a directory of `<target>/<time>.prom[.gz]` files, or single files, each optionally prefixed `NAME=` or `role:NAME=` (role: apiserver, etcd, controller). Repeatable' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l audit -d 'kube-apiserver audit logs (`audit.k8s.io/v1` events, one JSON object per line, plain or gzip): files or directories of them. Alone, or beside `--dump`, `--live` or `--prometheus`: the latency of slow requests split by layer, and who gets 401/403/429, become evidence over the same steps as the metrics. Repeatable' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l logs -d 'etcd and kube-apiserver logs: files, or directories in a must-gather, a node\'s `/var/log/pods` (sosreport, tarball) or of `<name>.log[.gz]` files, each optionally `NAME=PATH` to name the member. etcd\'s zap JSON and capnslog text, klog, the container runtime\'s prefix and `kubectl logs --timestamps`, plain or gzip. Alone, or beside `--dump`, `--live` or `--audit`: what the members log (slow fdatasync, late heartbeats, elections, lost peers, NOSPACE, …) becomes evidence over the same steps as the metrics, dated to the line. Repeatable' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l by -d 'With `--prometheus`: fleet mode. Judge every value of this label (e.g. `cluster`) as its own control plane, from the same queries: one row per cluster, sick first (`-o json`: an array of verdicts, each with its `cluster`; `-o html`/`-o markdown`: the fleet table linking to each cluster\'s report). The exit code is the worst of the fleet' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l clusters -d 'With `--by`: only the clusters whose label value matches this regular expression (anchored, as in PromQL)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l prometheus-max-samples -d 'With `--by`: most samples one query may select, the clusters\' largest metric times the steps of a query. A fleet over it is judged in shards of clusters, one query set per shard, so that no query passes the server\'s limit (Prometheus\'s `--query.max-samples` is 50,000,000) and memory follows one shard. 0: the whole fleet in one query set' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l prometheus-recorded -d 'With `--prometheus`: read the signals that `rules export` records (`cptriage:<signal>` series of compatible rules, docs/prometheus.md) instead of their raw expressions (`auto`), or always evaluate the raw expressions (`off`)' -r -f -a "auto\t'When the server holds compatible recordings'
off\t'Never: every signal from its raw expression'"
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l save -d 'With `--live`: also write the rounds as a capture directory (as `record` does), to diagnose the same rounds again later with `--dump DIR`' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l kubeconfig -d 'Kubeconfig file (default: `KUBECONFIG`, a colon-separated list, else `~/.kube/config`, else the in-cluster service account)' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l context -d 'Kubeconfig context (default: the current context)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l etcd -d 'An etcd member: `[NAME=]URL`, the client URL (e.g. `https://10.0.0.1:2379`, with `--etcd-cacert/--etcd-cert/--etcd-key`) or a plain metrics port (kubeadm: `http://127.0.0.1:2381`); `HOST:PORT` as etcdctl takes it (https when TLS files are given). Named `etcd-<host>` by default. Repeatable, or comma-separated (`--endpoints`, as etcdctl). When no member is given, live scraping reads `ETCDCTL_ENDPOINTS` (and `ETCDCTL_CACERT`, `ETCDCTL_CERT`, `ETCDCTL_KEY`), as etcdctl does' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l etcd-cacert -d 'CA that signed the etcd server certificates (kubeadm: /etc/kubernetes/pki/etcd/ca.crt). Also `--cacert`, as etcdctl' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l etcd-cert -d 'etcd client certificate (kubeadm: /etc/kubernetes/pki/etcd/healthcheck-client.crt). Also `--cert`, as etcdctl' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l etcd-key -d 'etcd client key (kubeadm: /etc/kubernetes/pki/etcd/healthcheck-client.key). Also `--key`, as etcdctl' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l controller -d 'A kube-controller-manager: `[NAME=]URL` (e.g. `https://127.0.0.1:10257`), scraped with the kubeconfig\'s credentials. Repeatable' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l node -d 'A node\'s metrics, optional evidence beside etcd: a node-exporter (`http://10.0.0.1:9100`) or a cAdvisor endpoint, scraped without credentials. Mapped to the etcd members on the same host (or named by its `nodename`). Repeatable' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l interval -d 'Time between scrape rounds' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l duration -d 'How long to scrape (at least two rounds are taken). Default: 30s; with `--watch`, until Ctrl-C' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l timeout -d 'Timeout of each request, including reading its whole body' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l max-body-total -d 'Most memory the scrapes of one round may hold together (response text being parsed and the families kept); a scrape that would go over it fails as too large and the others go on' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l prometheus -d 'Query a Prometheus-compatible HTTP API (Prometheus, Thanos Query, Mimir at `…/prometheus`) instead of reading dumps' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l selector -d 'Label matchers added to every selector, e.g. `{cluster="prod"}`' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l apiserver-selector -d 'The series of the apiserver role' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l etcd-selector -d 'The series of the etcd role' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l controller-selector -d 'The series of the controller role' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l node-selector -d 'The series of node metrics (node-exporter, cAdvisor), optional evidence' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l instance-label -d 'The label that tells instances apart (e.g. `pod`)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l prometheus-token-file -d 'File holding a bearer token' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l prometheus-user -d 'Basic-auth user (with `--prometheus-password-file`)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l prometheus-password-file -d 'File holding the basic-auth password' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l prometheus-ca -d 'CA that signed the server certificate (default: the system roots)' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l prometheus-cert -d 'Client certificate (with `--prometheus-key`)' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l prometheus-key -d 'Client key (with `--prometheus-cert`)' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l prometheus-header -d 'An extra request header, `NAME: VALUE` (e.g. `X-Scope-OrgID: team`). Repeatable' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l prometheus-max-response -d 'Largest API answer read (after gzip decoding); answers are decoded as they arrive, so memory follows the samples kept, not this size' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l prometheus-timeout -d 'Timeout of each API request (also sent as the query `timeout`)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l prometheus-concurrency -d 'Range queries in flight at once (1–32)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l prometheus-max-points -d 'Most points per series of one range query: longer ranges are split into chunks (Prometheus refuses more than 11,000), and a chunk the server refuses as too much (samples, timeout, size) is halved' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l max-body -d 'Largest metrics text read from one place: one `/metrics` response or one snapshot file, after gzip decoding (`512MiB`, `64MiB`, `1GiB`). Bigger is a per-target error, reported with the rest analysed' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l rules -d 'Rule file (default: the shipped `rules/default.yaml`)' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l at -d 'Assess at this time (RFC 3339, unix seconds, `now`, `now-10m`): the tree walk and "lit now". Default: the end of the window' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l from -d 'Start of the analysed window (RFC 3339, unix seconds, `now-30m`). Default: the first snapshot; with `--prometheus`, one hour before `--to`' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l since -d 'Analyse only the last DURATION of the window (`--since 30m`): the last 30 minutes of a capture, or up to now with `--prometheus`' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l to -d 'End of the analysed window (default: the last snapshot; with `--prometheus`, now)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l step -d 'Evaluation step (default: the typical snapshot interval)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l baseline-from -d 'Baseline from this time of the same data (with `--baseline-to`). Default baseline: the first quarter of the window' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l baseline-to -d 'End of the explicit baseline range' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l baseline-dump -d 'A separate healthy capture to take the baseline from. Repeatable' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l debounce -d 'Consecutive lit steps that make an onset' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -s o -l output -d 'Output format: `table` is the first page (fits the terminal), `wide` every table and the tree walk' -r -f -a "table\t'The first page for a terminal: verdict, cause, what followed, deciding signals, next steps (fits the terminal\'s width)'
wide\t'Every table for a terminal: axes, evidence, the tree walk, sources'
json\t'The `cptriage/verdict/v1` JSON document for scripts'
markdown\t'Markdown for incident documents'
html\t'One self-contained HTML page (inline CSS and SVG, nothing fetched) with the verdict and a timeline plot, for an incident channel: `-o html > incident.html`'"
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l color -d 'Colour the terminal report: `auto` colours a terminal unless `NO_COLOR` is set (or `TERM=dumb`), never a pipe' -r -f -a "auto\t'On a terminal, unless `NO_COLOR` is set or `TERM=dumb`'
always\t'Always, even into a pipe'
never\t'Never'"
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l live -d 'Scrape the live control plane now (apiserver replicas from the kubeconfig, `--etcd` members, `--controller`s) for `--duration`, then diagnose'
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l watch -d 'With `--live`: keep scraping every `--interval` and redraw the verdict after each round, as `top` does, until Ctrl-C (or `--duration`); then print the final report (and keep the `--save` capture)'
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l no-apiserver -d 'Do not scrape the apiserver (only `--etcd`/`--controller`)'
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l no-discovery -d 'Scrape only the kubeconfig\'s server address instead of every replica listed by the default/kubernetes EndpointSlice'
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l insecure-skip-tls-verify -d 'Do not verify the apiserver\'s certificate (reported loudly)'
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l prometheus-insecure-skip-tls-verify -d 'Do not verify the server certificate (reported loudly)'
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -l wide -d 'Every table and the tree walk (the same as `-o wide`)'
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cptriage -n "__fish_cptriage_using_subcommand diagnose" -s V -l version -d 'Print version'
complete -c cptriage -n "__fish_cptriage_using_subcommand tree" -l rules -d 'Rule file (default: the shipped `rules/default.yaml`)' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand tree" -s o -l output -d 'Output format' -r -f -a "text\t'An indented tree'
mermaid\t'A mermaid flowchart'"
complete -c cptriage -n "__fish_cptriage_using_subcommand tree" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cptriage -n "__fish_cptriage_using_subcommand tree" -s V -l version -d 'Print version'
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and not __fish_seen_subcommand_from check test export help" -s h -l help -d 'Print help'
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and not __fish_seen_subcommand_from check test export help" -s V -l version -d 'Print version'
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and not __fish_seen_subcommand_from check test export help" -f -a "check" -d 'Lint rule files: schema, PromQL subset, metric names unknown to the catalog, unreachable nodes. Exit 0 clean (warnings allowed), 2 on errors'
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and not __fish_seen_subcommand_from check test export help" -f -a "test" -d 'Run promtool-style unit tests of rule files: input series in expanding notation per target, an evaluation time, the expected verdict. Exit 0 all pass, 1 a test failed, 2 a test file is invalid'
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and not __fish_seen_subcommand_from check test export help" -f -a "export" -d 'Export the tree as a Prometheus rule file: a recording rule per signal (`cptriage:<signal>`), per question and per leaf, and an alert per leaf with severity, question, falsifier and runbook (docs/export.md)'
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and not __fish_seen_subcommand_from check test export help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and __fish_seen_subcommand_from check" -s h -l help -d 'Print help'
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and __fish_seen_subcommand_from check" -s V -l version -d 'Print version'
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and __fish_seen_subcommand_from test" -s v -l verbose -d 'Print what each passing test concluded, too'
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and __fish_seen_subcommand_from test" -s h -l help -d 'Print help'
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and __fish_seen_subcommand_from test" -s V -l version -d 'Print version'
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and __fish_seen_subcommand_from export" -l format -d 'Output format' -r -f -a "prometheus\t'A Prometheus rule file (recording and alerting rules, YAML)'"
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and __fish_seen_subcommand_from export" -l rules -d 'Rule file (default: the shipped `rules/default.yaml`)' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and __fish_seen_subcommand_from export" -l window -d 'What `$window` (the range of rate() and co.) becomes' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and __fish_seen_subcommand_from export" -l for -d 'How long a leaf must hold before its alert fires' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and __fish_seen_subcommand_from export" -l baseline-window -d 'Relative thresholds compare with the median over this range…' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and __fish_seen_subcommand_from export" -l baseline-offset -d '…ending this long before the evaluation time' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and __fish_seen_subcommand_from export" -l apiserver-selector -d 'Series selector of kube-apiserver targets' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and __fish_seen_subcommand_from export" -l etcd-selector -d 'Series selector of etcd members' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and __fish_seen_subcommand_from export" -l controller-selector -d 'Series selector of controllers' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and __fish_seen_subcommand_from export" -l group -d 'Name of the rule group' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and __fish_seen_subcommand_from export" -l by -d 'Keep this label (e.g. `cluster`) through every aggregation and vector match, so one rule file judges every cluster of a shared Prometheus and each alert carries its cluster' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and __fish_seen_subcommand_from export" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and __fish_seen_subcommand_from export" -s V -l version -d 'Print version'
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and __fish_seen_subcommand_from help" -f -a "check" -d 'Lint rule files: schema, PromQL subset, metric names unknown to the catalog, unreachable nodes. Exit 0 clean (warnings allowed), 2 on errors'
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and __fish_seen_subcommand_from help" -f -a "test" -d 'Run promtool-style unit tests of rule files: input series in expanding notation per target, an evaluation time, the expected verdict. Exit 0 all pass, 1 a test failed, 2 a test file is invalid'
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and __fish_seen_subcommand_from help" -f -a "export" -d 'Export the tree as a Prometheus rule file: a recording rule per signal (`cptriage:<signal>`), per question and per leaf, and an alert per leaf with severity, question, falsifier and runbook (docs/export.md)'
complete -c cptriage -n "__fish_cptriage_using_subcommand rules; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l dump -d 'Captured metrics: a capture directory, a directory of `<target>/<time>.prom[.gz]` files, or single files, each optionally prefixed `NAME=` or `role:NAME=` (role: apiserver, etcd, controller). Repeatable' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l prometheus -d 'Query a Prometheus-compatible HTTP API (Prometheus, Thanos Query, Mimir at `…/prometheus`) instead of reading dumps' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l selector -d 'Label matchers added to every selector, e.g. `{cluster="prod"}`' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l apiserver-selector -d 'The series of the apiserver role' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l etcd-selector -d 'The series of the etcd role' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l controller-selector -d 'The series of the controller role' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l node-selector -d 'The series of node metrics (node-exporter, cAdvisor), optional evidence' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l instance-label -d 'The label that tells instances apart (e.g. `pod`)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l prometheus-token-file -d 'File holding a bearer token' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l prometheus-user -d 'Basic-auth user (with `--prometheus-password-file`)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l prometheus-password-file -d 'File holding the basic-auth password' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l prometheus-ca -d 'CA that signed the server certificate (default: the system roots)' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l prometheus-cert -d 'Client certificate (with `--prometheus-key`)' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l prometheus-key -d 'Client key (with `--prometheus-cert`)' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l prometheus-header -d 'An extra request header, `NAME: VALUE` (e.g. `X-Scope-OrgID: team`). Repeatable' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l prometheus-max-response -d 'Largest API answer read (after gzip decoding); answers are decoded as they arrive, so memory follows the samples kept, not this size' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l prometheus-timeout -d 'Timeout of each API request (also sent as the query `timeout`)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l prometheus-concurrency -d 'Range queries in flight at once (1–32)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l prometheus-max-points -d 'Most points per series of one range query: longer ranges are split into chunks (Prometheus refuses more than 11,000), and a chunk the server refuses as too much (samples, timeout, size) is halved' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l at -d 'Evaluate at this time (RFC 3339, unix seconds, `now`, `now-10m`). Default: the last snapshot' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l from -d 'Start of a range evaluation (RFC 3339, unix seconds, `now-30m`)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l to -d 'End of a range evaluation (RFC 3339, unix seconds, `now`)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l step -d 'Step of a range evaluation, a Prometheus duration (`5s`, `1m`). Default: the capture\'s scrape interval' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l max-body -d 'Largest metrics text read from one place: one `/metrics` response or one snapshot file, after gzip decoding (`512MiB`, `64MiB`, `1GiB`). Bigger is a per-target error, reported with the rest analysed' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -s o -l output -d 'Output format' -r -f -a "table\t'A table for people'
json\t'The Prometheus HTTP API response shape'"
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -l prometheus-insecure-skip-tls-verify -d 'Do not verify the server certificate (reported loudly)'
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cptriage -n "__fish_cptriage_using_subcommand query" -s V -l version -d 'Print version'
complete -c cptriage -n "__fish_cptriage_using_subcommand record" -l out -d 'The capture directory to create (must not exist or be empty)' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand record" -l kubeconfig -d 'Kubeconfig file (default: `KUBECONFIG`, a colon-separated list, else `~/.kube/config`, else the in-cluster service account)' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand record" -l context -d 'Kubeconfig context (default: the current context)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand record" -l etcd -d 'An etcd member: `[NAME=]URL`, the client URL (e.g. `https://10.0.0.1:2379`, with `--etcd-cacert/--etcd-cert/--etcd-key`) or a plain metrics port (kubeadm: `http://127.0.0.1:2381`); `HOST:PORT` as etcdctl takes it (https when TLS files are given). Named `etcd-<host>` by default. Repeatable, or comma-separated (`--endpoints`, as etcdctl). When no member is given, live scraping reads `ETCDCTL_ENDPOINTS` (and `ETCDCTL_CACERT`, `ETCDCTL_CERT`, `ETCDCTL_KEY`), as etcdctl does' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand record" -l etcd-cacert -d 'CA that signed the etcd server certificates (kubeadm: /etc/kubernetes/pki/etcd/ca.crt). Also `--cacert`, as etcdctl' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand record" -l etcd-cert -d 'etcd client certificate (kubeadm: /etc/kubernetes/pki/etcd/healthcheck-client.crt). Also `--cert`, as etcdctl' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand record" -l etcd-key -d 'etcd client key (kubeadm: /etc/kubernetes/pki/etcd/healthcheck-client.key). Also `--key`, as etcdctl' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand record" -l controller -d 'A kube-controller-manager: `[NAME=]URL` (e.g. `https://127.0.0.1:10257`), scraped with the kubeconfig\'s credentials. Repeatable' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand record" -l node -d 'A node\'s metrics, optional evidence beside etcd: a node-exporter (`http://10.0.0.1:9100`) or a cAdvisor endpoint, scraped without credentials. Mapped to the etcd members on the same host (or named by its `nodename`). Repeatable' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand record" -l interval -d 'Time between scrape rounds' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand record" -l duration -d 'How long to scrape (at least two rounds are taken). Default: 30s; with `--watch`, until Ctrl-C' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand record" -l timeout -d 'Timeout of each request, including reading its whole body' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand record" -l max-body-total -d 'Most memory the scrapes of one round may hold together (response text being parsed and the families kept); a scrape that would go over it fails as too large and the others go on' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand record" -l max-body -d 'Largest metrics text read from one place: one `/metrics` response or one snapshot file, after gzip decoding (`512MiB`, `64MiB`, `1GiB`). Bigger is a per-target error, reported with the rest analysed' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand record" -l no-apiserver -d 'Do not scrape the apiserver (only `--etcd`/`--controller`)'
complete -c cptriage -n "__fish_cptriage_using_subcommand record" -l no-discovery -d 'Scrape only the kubeconfig\'s server address instead of every replica listed by the default/kubernetes EndpointSlice'
complete -c cptriage -n "__fish_cptriage_using_subcommand record" -l insecure-skip-tls-verify -d 'Do not verify the apiserver\'s certificate (reported loudly)'
complete -c cptriage -n "__fish_cptriage_using_subcommand record" -l all -d 'Keep every metric family as received (default: the apiserver, etcd, process and Go families cptriage knows)'
complete -c cptriage -n "__fish_cptriage_using_subcommand record" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cptriage -n "__fish_cptriage_using_subcommand record" -s V -l version -d 'Print version'
complete -c cptriage -n "__fish_cptriage_using_subcommand completions" -s h -l help -d 'Print help'
complete -c cptriage -n "__fish_cptriage_using_subcommand completions" -s V -l version -d 'Print version'
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l listen -d 'The address to listen on, `IP:PORT`. Any address other than loopback needs `--token-file`' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l token-file -d 'File holding the bearer token every request must carry (`Authorization: Bearer TOKEN`)' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l by -d 'Judge each value of this alert label (e.g. `cluster`) as its own control plane, selected by that label in Prometheus; alerts without it are judged over the whole Prometheus' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l lookback -d 'How long before the earliest `startsAt` of a notification\'s alerts the window starts (the baseline is its first quarter)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l reuse -d 'A repeated notification of the same group and `--by` value within this long of its triage\'s end reuses that triage (unless new alerts joined)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l reports -d 'Write each finished triage as `ID.json` and `ID.html` into this directory (created if missing; files are never overwritten)' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l keep -d 'How many triages to keep, in memory and in `--reports`: a count (`500`) or an age (`7d`, `12h`)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l concurrency -d 'Diagnoses running at once (one per `--by` value at a time)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l queue -d 'Triages waiting for a worker; a notification that does not fit is answered 503 with `Retry-After` (Alertmanager retries)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l notify-url -d 'POST each finished triage (headline, root cause, where, since, link) to this chat incoming-webhook URL as `{"text": …}`; retried a few times, never fatal' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l external-url -d 'The URL this service is reached at, for the links in notifications (default: the `--listen` address)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l grace -d 'On SIGTERM, how long running diagnoses may take to finish before they are abandoned' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l rules -d 'Rule file (default: the shipped `rules/default.yaml`)' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l step -d 'Evaluation step (default: the typical scrape interval)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l debounce -d 'Consecutive lit steps that make an onset' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l prometheus -d 'Query a Prometheus-compatible HTTP API (Prometheus, Thanos Query, Mimir at `…/prometheus`) instead of reading dumps' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l selector -d 'Label matchers added to every selector, e.g. `{cluster="prod"}`' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l apiserver-selector -d 'The series of the apiserver role' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l etcd-selector -d 'The series of the etcd role' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l controller-selector -d 'The series of the controller role' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l node-selector -d 'The series of node metrics (node-exporter, cAdvisor), optional evidence' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l instance-label -d 'The label that tells instances apart (e.g. `pod`)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l prometheus-token-file -d 'File holding a bearer token' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l prometheus-user -d 'Basic-auth user (with `--prometheus-password-file`)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l prometheus-password-file -d 'File holding the basic-auth password' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l prometheus-ca -d 'CA that signed the server certificate (default: the system roots)' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l prometheus-cert -d 'Client certificate (with `--prometheus-key`)' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l prometheus-key -d 'Client key (with `--prometheus-cert`)' -r -F
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l prometheus-header -d 'An extra request header, `NAME: VALUE` (e.g. `X-Scope-OrgID: team`). Repeatable' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l prometheus-max-response -d 'Largest API answer read (after gzip decoding); answers are decoded as they arrive, so memory follows the samples kept, not this size' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l prometheus-timeout -d 'Timeout of each API request (also sent as the query `timeout`)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l prometheus-concurrency -d 'Range queries in flight at once (1–32)' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l prometheus-max-points -d 'Most points per series of one range query: longer ranges are split into chunks (Prometheus refuses more than 11,000), and a chunk the server refuses as too much (samples, timeout, size) is halved' -r
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -l prometheus-insecure-skip-tls-verify -d 'Do not verify the server certificate (reported loudly)'
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c cptriage -n "__fish_cptriage_using_subcommand serve" -s V -l version -d 'Print version'
complete -c cptriage -n "__fish_cptriage_using_subcommand help; and not __fish_seen_subcommand_from diagnose tree rules query record completions serve help" -f -a "diagnose" -d 'Diagnose the control plane from captured metrics: name the failing axis, its evidence, the root cause by onset time, and what to do next'
complete -c cptriage -n "__fish_cptriage_using_subcommand help; and not __fish_seen_subcommand_from diagnose tree rules query record completions serve help" -f -a "tree" -d 'Print the exclusion tree of a rule file'
complete -c cptriage -n "__fish_cptriage_using_subcommand help; and not __fish_seen_subcommand_from diagnose tree rules query record completions serve help" -f -a "rules" -d 'Check, test and export rule files'
complete -c cptriage -n "__fish_cptriage_using_subcommand help; and not __fish_seen_subcommand_from diagnose tree rules query record completions serve help" -f -a "query" -d 'Evaluate a PromQL expression over captured metrics'
complete -c cptriage -n "__fish_cptriage_using_subcommand help; and not __fish_seen_subcommand_from diagnose tree rules query record completions serve help" -f -a "record" -d 'Scrape live targets and write a capture directory'
complete -c cptriage -n "__fish_cptriage_using_subcommand help; and not __fish_seen_subcommand_from diagnose tree rules query record completions serve help" -f -a "completions" -d 'Print shell completions for SHELL to stdout'
complete -c cptriage -n "__fish_cptriage_using_subcommand help; and not __fish_seen_subcommand_from diagnose tree rules query record completions serve help" -f -a "serve" -d 'Receive Alertmanager notifications and attach a verdict to each alert'
complete -c cptriage -n "__fish_cptriage_using_subcommand help; and not __fish_seen_subcommand_from diagnose tree rules query record completions serve help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c cptriage -n "__fish_cptriage_using_subcommand help; and __fish_seen_subcommand_from rules" -f -a "check" -d 'Lint rule files: schema, PromQL subset, metric names unknown to the catalog, unreachable nodes. Exit 0 clean (warnings allowed), 2 on errors'
complete -c cptriage -n "__fish_cptriage_using_subcommand help; and __fish_seen_subcommand_from rules" -f -a "test" -d 'Run promtool-style unit tests of rule files: input series in expanding notation per target, an evaluation time, the expected verdict. Exit 0 all pass, 1 a test failed, 2 a test file is invalid'
complete -c cptriage -n "__fish_cptriage_using_subcommand help; and __fish_seen_subcommand_from rules" -f -a "export" -d 'Export the tree as a Prometheus rule file: a recording rule per signal (`cptriage:<signal>`), per question and per leaf, and an alert per leaf with severity, question, falsifier and runbook (docs/export.md)'

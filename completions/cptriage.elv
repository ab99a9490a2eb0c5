
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
            cand rules 'Check rule files'
            cand query 'Evaluate a PromQL expression over captured metrics'
            cand completions 'Print shell completions for SHELL to stdout'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'cptriage;diagnose'= {
            cand --dump 'Captured metrics: a capture directory, a directory of `<target>/<time>.prom[.gz]` files, or single files, each optionally prefixed `NAME=` or `role:NAME=` (role: apiserver, etcd, controller). Repeatable'
            cand --rules 'Rule file (default: the shipped `rules/default.yaml`)'
            cand --at 'Assess at this time (RFC 3339 or unix seconds): the tree walk and "lit now". Default: the end of the window'
            cand --from 'Start of the analysed window (default: the first snapshot)'
            cand --to 'End of the analysed window (default: the last snapshot)'
            cand --step 'Evaluation step (default: the typical snapshot interval)'
            cand --baseline-from 'Baseline from this time of the same data (with `--baseline-to`). Default baseline: the first quarter of the window'
            cand --baseline-to 'End of the explicit baseline range'
            cand --baseline-dump 'A separate healthy capture to take the baseline from. Repeatable'
            cand --debounce 'Consecutive lit steps that make an onset'
            cand -o 'Output format'
            cand --output 'Output format'
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
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'cptriage;rules;check'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'cptriage;rules;help'= {
            cand check 'Lint rule files: schema, PromQL subset, metric names unknown to the catalog, unreachable nodes. Exit 0 clean (warnings allowed), 2 on errors'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'cptriage;rules;help;check'= {
        }
        &'cptriage;rules;help;help'= {
        }
        &'cptriage;query'= {
            cand --dump 'Captured metrics: a capture directory, a directory of `<target>/<time>.prom[.gz]` files, or single files, each optionally prefixed `NAME=` or `role:NAME=` (role: apiserver, etcd, controller). Repeatable'
            cand --at 'Evaluate at this time (RFC 3339 or unix seconds). Default: the last snapshot'
            cand --from 'Start of a range evaluation (RFC 3339 or unix seconds)'
            cand --to 'End of a range evaluation (RFC 3339 or unix seconds)'
            cand --step 'Step of a range evaluation, a Prometheus duration (`5s`, `1m`). Default: the capture''s scrape interval'
            cand -o 'Output format'
            cand --output 'Output format'
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
        &'cptriage;help'= {
            cand diagnose 'Diagnose the control plane from captured metrics: name the failing axis, its evidence, the root cause by onset time, and what to do next'
            cand tree 'Print the exclusion tree of a rule file'
            cand rules 'Check rule files'
            cand query 'Evaluate a PromQL expression over captured metrics'
            cand completions 'Print shell completions for SHELL to stdout'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'cptriage;help;diagnose'= {
        }
        &'cptriage;help;tree'= {
        }
        &'cptriage;help;rules'= {
            cand check 'Lint rule files: schema, PromQL subset, metric names unknown to the catalog, unreachable nodes. Exit 0 clean (warnings allowed), 2 on errors'
        }
        &'cptriage;help;rules;check'= {
        }
        &'cptriage;help;query'= {
        }
        &'cptriage;help;completions'= {
        }
        &'cptriage;help;help'= {
        }
    ]
    $completions[$command]
}

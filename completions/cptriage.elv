
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
            cand query 'Evaluate a PromQL expression over captured metrics'
            cand completions 'Print shell completions for SHELL to stdout'
            cand help 'Print this message or the help of the given subcommand(s)'
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
            cand query 'Evaluate a PromQL expression over captured metrics'
            cand completions 'Print shell completions for SHELL to stdout'
            cand help 'Print this message or the help of the given subcommand(s)'
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

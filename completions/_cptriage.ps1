
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
            [CompletionResult]::new('query', 'query', [CompletionResultType]::ParameterValue, 'Evaluate a PromQL expression over captured metrics')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print shell completions for SHELL to stdout')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'cptriage;query' {
            [CompletionResult]::new('--dump', '--dump', [CompletionResultType]::ParameterName, 'Captured metrics: a capture directory, a directory of `<target>/<time>.prom[.gz]` files, or single files, each optionally prefixed `NAME=` or `role:NAME=` (role: apiserver, etcd, controller). Repeatable')
            [CompletionResult]::new('--at', '--at', [CompletionResultType]::ParameterName, 'Evaluate at this time (RFC 3339 or unix seconds). Default: the last snapshot')
            [CompletionResult]::new('--from', '--from', [CompletionResultType]::ParameterName, 'Start of a range evaluation (RFC 3339 or unix seconds)')
            [CompletionResult]::new('--to', '--to', [CompletionResultType]::ParameterName, 'End of a range evaluation (RFC 3339 or unix seconds)')
            [CompletionResult]::new('--step', '--step', [CompletionResultType]::ParameterName, 'Step of a range evaluation, a Prometheus duration (`5s`, `1m`). Default: the capture''s scrape interval')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format')
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
        'cptriage;help' {
            [CompletionResult]::new('query', 'query', [CompletionResultType]::ParameterValue, 'Evaluate a PromQL expression over captured metrics')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print shell completions for SHELL to stdout')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'cptriage;help;query' {
            break
        }
        'cptriage;help;completions' {
            break
        }
        'cptriage;help;help' {
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}

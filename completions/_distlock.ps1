
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'distlock' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'distlock'
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
        'distlock' {
            [CompletionResult]::new('--redis', '--redis', [CompletionResultType]::ParameterName, 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Redlock only: each node''s time to answer one request (default: 5% of the TTL, 50-500ms)')
            [CompletionResult]::new('--replicas', '--replicas', [CompletionResultType]::ParameterName, 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)')
            [CompletionResult]::new('--replicas-timeout', '--replicas-timeout', [CompletionResultType]::ParameterName, 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Prefix of every Redis key distlock writes')
            [CompletionResult]::new('--redis-timeout', '--redis-timeout', [CompletionResultType]::ParameterName, 'Timeout for connecting to Redis and for each command')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'CA certificate bundle (PEM) to trust for rediss:// instead of the system''s roots')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'Private key (PEM) of --tls-cert')
            [CompletionResult]::new('--history', '--history', [CompletionResultType]::ParameterName, 'Keep a history of each lock taken (who held it, how long, who waited) for DUR')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'How messages on stderr are written: text (distlock: ...) or json (one object a line)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('run', 'run', [CompletionResultType]::ParameterValue, 'Run a command while holding a lock')
            [CompletionResult]::new('status', 'status', [CompletionResultType]::ParameterValue, 'Show whether a lock is held, by whom, since when, until when, and who waits for it')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List the locks under the prefix, with holders, age, time left and waiters')
            [CompletionResult]::new('break', 'break', [CompletionResultType]::ParameterValue, 'Break a lock whoever holds it (every holder of a semaphore, or one), after showing who')
            [CompletionResult]::new('force-release', 'force-release', [CompletionResultType]::ParameterValue, 'Break a lock whoever holds it (every holder of a semaphore, or one), after showing who')
            [CompletionResult]::new('acquire', 'acquire', [CompletionResultType]::ParameterValue, 'Acquire a lock and print its token, for locks that span several CI steps or scripts')
            [CompletionResult]::new('renew', 'renew', [CompletionResultType]::ParameterValue, 'Extend a lock acquired with distlock acquire')
            [CompletionResult]::new('release', 'release', [CompletionResultType]::ParameterValue, 'Release a lock acquired with distlock acquire')
            [CompletionResult]::new('log', 'log', [CompletionResultType]::ParameterValue, 'Show a lock''s history: who held it, for how long, who waited, who broke it')
            [CompletionResult]::new('stats', 'stats', [CompletionResultType]::ParameterValue, 'Count a lock''s events and summarise how long holders waited and held it')
            [CompletionResult]::new('check', 'check', [CompletionResultType]::ParameterValue, 'Check a lock for a monitoring system: one line, exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN')
            [CompletionResult]::new('metrics', 'metrics', [CompletionResultType]::ParameterValue, 'Print the state of every lock as Prometheus metrics, for node_exporter or a Pushgateway')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'distlock;run' {
            [CompletionResult]::new('-k', '-k', [CompletionResultType]::ParameterName, 'Name of the lock; repeat for several keys (up to 32), all taken before the command starts')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'Name of the lock; repeat for several keys (up to 32), all taken before the command starts')
            [CompletionResult]::new('-t', '-t', [CompletionResultType]::ParameterName, 'Lifetime of the lock in Redis without renewal (from 1s to 24h)')
            [CompletionResult]::new('--ttl', '--ttl', [CompletionResultType]::ParameterName, 'Lifetime of the lock in Redis without renewal (from 1s to 24h)')
            [CompletionResult]::new('-w', '-w', [CompletionResultType]::ParameterName, 'Wait at most this long for the lock (default: wait forever)')
            [CompletionResult]::new('--wait', '--wait', [CompletionResultType]::ParameterName, 'Wait at most this long for the lock (default: wait forever)')
            [CompletionResult]::new('-E', '-E ', [CompletionResultType]::ParameterName, 'Exit code when busy, superseded or replaced (not acquired), e.g. `-n -E 0` to skip quietly')
            [CompletionResult]::new('--conflict-exit-code', '--conflict-exit-code', [CompletionResultType]::ParameterName, 'Exit code when busy, superseded or replaced (not acquired), e.g. `-n -E 0` to skip quietly')
            [CompletionResult]::new('--wait-mode', '--wait-mode', [CompletionResultType]::ParameterName, 'How to wait for a busy lock')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'Let up to N holders in at once (a counting semaphore); 1, the default, is a mutex')
            [CompletionResult]::new('--shared-key', '--shared-key', [CompletionResultType]::ParameterName, 'Hold this one key shared (a reader), the other keys exclusive; repeatable')
            [CompletionResult]::new('--note', '--note', [CompletionResultType]::ParameterName, 'A reason, stored with the lock and shown to whoever waits for it or asks about it')
            [CompletionResult]::new('--report-every', '--report-every', [CompletionResultType]::ParameterName, 'Without a terminal, print a "still waiting" line this often while waiting')
            [CompletionResult]::new('--min-interval', '--min-interval', [CompletionResultType]::ParameterName, 'At most one run per period: keep the lock taken this long after a good run started')
            [CompletionResult]::new('--cooldown', '--cooldown', [CompletionResultType]::ParameterName, 'After a run that succeeded, keep the lock taken this long after the run ended')
            [CompletionResult]::new('--unreachable-after', '--unreachable-after', [CompletionResultType]::ParameterName, 'Give up (exit 69) on a Redis that has not answered once within this long')
            [CompletionResult]::new('--renew-every', '--renew-every', [CompletionResultType]::ParameterName, 'Renew the lock this often while the command runs (default: a third of --ttl)')
            [CompletionResult]::new('--kill-signal', '--kill-signal', [CompletionResultType]::ParameterName, 'Signal that stops the command (lock lost, --timeout, --replace) (name or number)')
            [CompletionResult]::new('--kill-grace', '--kill-grace', [CompletionResultType]::ParameterName, 'Time between --kill-signal and SIGKILL (default: 5s, or a fifth of --ttl if shorter)')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Stop the command if it runs longer than this, release the lock, and exit 79')
            [CompletionResult]::new('--warn-after', '--warn-after', [CompletionResultType]::ParameterName, 'Warn once the command has held the lock this long (held-too-long; stored with the lock)')
            [CompletionResult]::new('--warn-wait', '--warn-wait', [CompletionResultType]::ParameterName, 'Warn once the wait for the lock has lasted this long, naming the holder (long-wait)')
            [CompletionResult]::new('--hook', '--hook', [CompletionResultType]::ParameterName, 'Run CMD with /bin/sh -c on the events of --hook-events, the event''s JSON line on stdin')
            [CompletionResult]::new('--hook-events', '--hook-events', [CompletionResultType]::ParameterName, 'The events that run --hook, comma-separated; all adds acquired, released, superseded, replaced')
            [CompletionResult]::new('--hook-timeout', '--hook-timeout', [CompletionResultType]::ParameterName, 'How long distlock waits for a running --hook before it exits (0s: not at all)')
            [CompletionResult]::new('--redis', '--redis', [CompletionResultType]::ParameterName, 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Redlock only: each node''s time to answer one request (default: 5% of the TTL, 50-500ms)')
            [CompletionResult]::new('--replicas', '--replicas', [CompletionResultType]::ParameterName, 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)')
            [CompletionResult]::new('--replicas-timeout', '--replicas-timeout', [CompletionResultType]::ParameterName, 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Prefix of every Redis key distlock writes')
            [CompletionResult]::new('--redis-timeout', '--redis-timeout', [CompletionResultType]::ParameterName, 'Timeout for connecting to Redis and for each command')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'CA certificate bundle (PEM) to trust for rediss:// instead of the system''s roots')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'Private key (PEM) of --tls-cert')
            [CompletionResult]::new('--history', '--history', [CompletionResultType]::ParameterName, 'Keep a history of each lock taken (who held it, how long, who waited) for DUR')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'How messages on stderr are written: text (distlock: ...) or json (one object a line)')
            [CompletionResult]::new('-n', '-n', [CompletionResultType]::ParameterName, 'Try once; do not wait if the lock is busy (wins over --wait and DISTLOCK_WAIT)')
            [CompletionResult]::new('--no-wait', '--no-wait', [CompletionResultType]::ParameterName, 'Try once; do not wait if the lock is busy (wins over --wait and DISTLOCK_WAIT)')
            [CompletionResult]::new('--shared', '--shared', [CompletionResultType]::ParameterName, 'Hold KEY shared (a reader): shared holders hold it together, an exclusive one alone')
            [CompletionResult]::new('--supersede', '--supersede', [CompletionResultType]::ParameterName, 'Newest wins: join the line and cancel every waiter that joined before (not the holder)')
            [CompletionResult]::new('--replace', '--replace', [CompletionResultType]::ParameterName, 'Newest replaces the running one: stop the holder''s command, then take the lock')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'distlock;status' {
            [CompletionResult]::new('-k', '-k', [CompletionResultType]::ParameterName, 'Name of the lock')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'Name of the lock')
            [CompletionResult]::new('--redis', '--redis', [CompletionResultType]::ParameterName, 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Redlock only: each node''s time to answer one request (default: 5% of the TTL, 50-500ms)')
            [CompletionResult]::new('--replicas', '--replicas', [CompletionResultType]::ParameterName, 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)')
            [CompletionResult]::new('--replicas-timeout', '--replicas-timeout', [CompletionResultType]::ParameterName, 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Prefix of every Redis key distlock writes')
            [CompletionResult]::new('--redis-timeout', '--redis-timeout', [CompletionResultType]::ParameterName, 'Timeout for connecting to Redis and for each command')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'CA certificate bundle (PEM) to trust for rediss:// instead of the system''s roots')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'Private key (PEM) of --tls-cert')
            [CompletionResult]::new('--history', '--history', [CompletionResultType]::ParameterName, 'Keep a history of each lock taken (who held it, how long, who waited) for DUR')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'How messages on stderr are written: text (distlock: ...) or json (one object a line)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (one object) instead of text')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'distlock;list' {
            [CompletionResult]::new('--redis', '--redis', [CompletionResultType]::ParameterName, 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Redlock only: each node''s time to answer one request (default: 5% of the TTL, 50-500ms)')
            [CompletionResult]::new('--replicas', '--replicas', [CompletionResultType]::ParameterName, 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)')
            [CompletionResult]::new('--replicas-timeout', '--replicas-timeout', [CompletionResultType]::ParameterName, 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Prefix of every Redis key distlock writes')
            [CompletionResult]::new('--redis-timeout', '--redis-timeout', [CompletionResultType]::ParameterName, 'Timeout for connecting to Redis and for each command')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'CA certificate bundle (PEM) to trust for rediss:// instead of the system''s roots')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'Private key (PEM) of --tls-cert')
            [CompletionResult]::new('--history', '--history', [CompletionResultType]::ParameterName, 'Keep a history of each lock taken (who held it, how long, who waited) for DUR')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'How messages on stderr are written: text (distlock: ...) or json (one object a line)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (an array of what status --json prints) instead of a table')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'distlock;break' {
            [CompletionResult]::new('-k', '-k', [CompletionResultType]::ParameterName, 'Name of the lock')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'Name of the lock')
            [CompletionResult]::new('--holder', '--holder', [CompletionResultType]::ParameterName, 'Break only the holder with this id (as distlock status shows it; 4 characters or more)')
            [CompletionResult]::new('--redis', '--redis', [CompletionResultType]::ParameterName, 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Redlock only: each node''s time to answer one request (default: 5% of the TTL, 50-500ms)')
            [CompletionResult]::new('--replicas', '--replicas', [CompletionResultType]::ParameterName, 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)')
            [CompletionResult]::new('--replicas-timeout', '--replicas-timeout', [CompletionResultType]::ParameterName, 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Prefix of every Redis key distlock writes')
            [CompletionResult]::new('--redis-timeout', '--redis-timeout', [CompletionResultType]::ParameterName, 'Timeout for connecting to Redis and for each command')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'CA certificate bundle (PEM) to trust for rediss:// instead of the system''s roots')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'Private key (PEM) of --tls-cert')
            [CompletionResult]::new('--history', '--history', [CompletionResultType]::ParameterName, 'Keep a history of each lock taken (who held it, how long, who waited) for DUR')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'How messages on stderr are written: text (distlock: ...) or json (one object a line)')
            [CompletionResult]::new('-y', '-y', [CompletionResultType]::ParameterName, 'Do not ask for confirmation (required when stdin is not a terminal)')
            [CompletionResult]::new('--yes', '--yes', [CompletionResultType]::ParameterName, 'Do not ask for confirmation (required when stdin is not a terminal)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'distlock;force-release' {
            [CompletionResult]::new('-k', '-k', [CompletionResultType]::ParameterName, 'Name of the lock')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'Name of the lock')
            [CompletionResult]::new('--holder', '--holder', [CompletionResultType]::ParameterName, 'Break only the holder with this id (as distlock status shows it; 4 characters or more)')
            [CompletionResult]::new('--redis', '--redis', [CompletionResultType]::ParameterName, 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Redlock only: each node''s time to answer one request (default: 5% of the TTL, 50-500ms)')
            [CompletionResult]::new('--replicas', '--replicas', [CompletionResultType]::ParameterName, 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)')
            [CompletionResult]::new('--replicas-timeout', '--replicas-timeout', [CompletionResultType]::ParameterName, 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Prefix of every Redis key distlock writes')
            [CompletionResult]::new('--redis-timeout', '--redis-timeout', [CompletionResultType]::ParameterName, 'Timeout for connecting to Redis and for each command')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'CA certificate bundle (PEM) to trust for rediss:// instead of the system''s roots')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'Private key (PEM) of --tls-cert')
            [CompletionResult]::new('--history', '--history', [CompletionResultType]::ParameterName, 'Keep a history of each lock taken (who held it, how long, who waited) for DUR')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'How messages on stderr are written: text (distlock: ...) or json (one object a line)')
            [CompletionResult]::new('-y', '-y', [CompletionResultType]::ParameterName, 'Do not ask for confirmation (required when stdin is not a terminal)')
            [CompletionResult]::new('--yes', '--yes', [CompletionResultType]::ParameterName, 'Do not ask for confirmation (required when stdin is not a terminal)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'distlock;acquire' {
            [CompletionResult]::new('-k', '-k', [CompletionResultType]::ParameterName, 'Name of the lock; repeat for several keys (up to 32), all taken before the command starts')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'Name of the lock; repeat for several keys (up to 32), all taken before the command starts')
            [CompletionResult]::new('-t', '-t', [CompletionResultType]::ParameterName, 'Lifetime of the lock in Redis without renewal (from 1s to 24h)')
            [CompletionResult]::new('--ttl', '--ttl', [CompletionResultType]::ParameterName, 'Lifetime of the lock in Redis without renewal (from 1s to 24h)')
            [CompletionResult]::new('-w', '-w', [CompletionResultType]::ParameterName, 'Wait at most this long for the lock (default: wait forever)')
            [CompletionResult]::new('--wait', '--wait', [CompletionResultType]::ParameterName, 'Wait at most this long for the lock (default: wait forever)')
            [CompletionResult]::new('-E', '-E ', [CompletionResultType]::ParameterName, 'Exit code when busy, superseded or replaced (not acquired), e.g. `-n -E 0` to skip quietly')
            [CompletionResult]::new('--conflict-exit-code', '--conflict-exit-code', [CompletionResultType]::ParameterName, 'Exit code when busy, superseded or replaced (not acquired), e.g. `-n -E 0` to skip quietly')
            [CompletionResult]::new('--wait-mode', '--wait-mode', [CompletionResultType]::ParameterName, 'How to wait for a busy lock')
            [CompletionResult]::new('--limit', '--limit', [CompletionResultType]::ParameterName, 'Let up to N holders in at once (a counting semaphore); 1, the default, is a mutex')
            [CompletionResult]::new('--shared-key', '--shared-key', [CompletionResultType]::ParameterName, 'Hold this one key shared (a reader), the other keys exclusive; repeatable')
            [CompletionResult]::new('--note', '--note', [CompletionResultType]::ParameterName, 'A reason, stored with the lock and shown to whoever waits for it or asks about it')
            [CompletionResult]::new('--report-every', '--report-every', [CompletionResultType]::ParameterName, 'Without a terminal, print a "still waiting" line this often while waiting')
            [CompletionResult]::new('--min-interval', '--min-interval', [CompletionResultType]::ParameterName, 'At most one run per period: keep the lock taken this long after a good run started')
            [CompletionResult]::new('--cooldown', '--cooldown', [CompletionResultType]::ParameterName, 'After a run that succeeded, keep the lock taken this long after the run ended')
            [CompletionResult]::new('--unreachable-after', '--unreachable-after', [CompletionResultType]::ParameterName, 'Give up (exit 69) on a Redis that has not answered once within this long')
            [CompletionResult]::new('--env-file', '--env-file', [CompletionResultType]::ParameterName, 'Append the lock''s DISTLOCK_KEY, DISTLOCK_FENCE and DISTLOCK_TOKEN to FILE; print nothing')
            [CompletionResult]::new('--redis', '--redis', [CompletionResultType]::ParameterName, 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Redlock only: each node''s time to answer one request (default: 5% of the TTL, 50-500ms)')
            [CompletionResult]::new('--replicas', '--replicas', [CompletionResultType]::ParameterName, 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)')
            [CompletionResult]::new('--replicas-timeout', '--replicas-timeout', [CompletionResultType]::ParameterName, 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Prefix of every Redis key distlock writes')
            [CompletionResult]::new('--redis-timeout', '--redis-timeout', [CompletionResultType]::ParameterName, 'Timeout for connecting to Redis and for each command')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'CA certificate bundle (PEM) to trust for rediss:// instead of the system''s roots')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'Private key (PEM) of --tls-cert')
            [CompletionResult]::new('--history', '--history', [CompletionResultType]::ParameterName, 'Keep a history of each lock taken (who held it, how long, who waited) for DUR')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'How messages on stderr are written: text (distlock: ...) or json (one object a line)')
            [CompletionResult]::new('-n', '-n', [CompletionResultType]::ParameterName, 'Try once; do not wait if the lock is busy (wins over --wait and DISTLOCK_WAIT)')
            [CompletionResult]::new('--no-wait', '--no-wait', [CompletionResultType]::ParameterName, 'Try once; do not wait if the lock is busy (wins over --wait and DISTLOCK_WAIT)')
            [CompletionResult]::new('--shared', '--shared', [CompletionResultType]::ParameterName, 'Hold KEY shared (a reader): shared holders hold it together, an exclusive one alone')
            [CompletionResult]::new('--supersede', '--supersede', [CompletionResultType]::ParameterName, 'Newest wins: join the line and cancel every waiter that joined before (not the holder)')
            [CompletionResult]::new('--replace', '--replace', [CompletionResultType]::ParameterName, 'Newest replaces the running one: stop the holder''s command, then take the lock')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON object instead of the bare token: key, token, fence, TTL and limit')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'distlock;renew' {
            [CompletionResult]::new('-k', '-k', [CompletionResultType]::ParameterName, 'Name of the lock')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'Name of the lock')
            [CompletionResult]::new('--token', '--token', [CompletionResultType]::ParameterName, 'The token printed by distlock acquire (or written to its --env-file as DISTLOCK_TOKEN)')
            [CompletionResult]::new('-t', '-t', [CompletionResultType]::ParameterName, 'New lifetime from now (default: the TTL the lock was acquired with)')
            [CompletionResult]::new('--ttl', '--ttl', [CompletionResultType]::ParameterName, 'New lifetime from now (default: the TTL the lock was acquired with)')
            [CompletionResult]::new('--redis', '--redis', [CompletionResultType]::ParameterName, 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Redlock only: each node''s time to answer one request (default: 5% of the TTL, 50-500ms)')
            [CompletionResult]::new('--replicas', '--replicas', [CompletionResultType]::ParameterName, 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)')
            [CompletionResult]::new('--replicas-timeout', '--replicas-timeout', [CompletionResultType]::ParameterName, 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Prefix of every Redis key distlock writes')
            [CompletionResult]::new('--redis-timeout', '--redis-timeout', [CompletionResultType]::ParameterName, 'Timeout for connecting to Redis and for each command')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'CA certificate bundle (PEM) to trust for rediss:// instead of the system''s roots')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'Private key (PEM) of --tls-cert')
            [CompletionResult]::new('--history', '--history', [CompletionResultType]::ParameterName, 'Keep a history of each lock taken (who held it, how long, who waited) for DUR')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'How messages on stderr are written: text (distlock: ...) or json (one object a line)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'distlock;release' {
            [CompletionResult]::new('-k', '-k', [CompletionResultType]::ParameterName, 'Name of the lock')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'Name of the lock')
            [CompletionResult]::new('--token', '--token', [CompletionResultType]::ParameterName, 'The token printed by distlock acquire (or written to its --env-file as DISTLOCK_TOKEN)')
            [CompletionResult]::new('--redis', '--redis', [CompletionResultType]::ParameterName, 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Redlock only: each node''s time to answer one request (default: 5% of the TTL, 50-500ms)')
            [CompletionResult]::new('--replicas', '--replicas', [CompletionResultType]::ParameterName, 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)')
            [CompletionResult]::new('--replicas-timeout', '--replicas-timeout', [CompletionResultType]::ParameterName, 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Prefix of every Redis key distlock writes')
            [CompletionResult]::new('--redis-timeout', '--redis-timeout', [CompletionResultType]::ParameterName, 'Timeout for connecting to Redis and for each command')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'CA certificate bundle (PEM) to trust for rediss:// instead of the system''s roots')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'Private key (PEM) of --tls-cert')
            [CompletionResult]::new('--history', '--history', [CompletionResultType]::ParameterName, 'Keep a history of each lock taken (who held it, how long, who waited) for DUR')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'How messages on stderr are written: text (distlock: ...) or json (one object a line)')
            [CompletionResult]::new('--failed', '--failed', [CompletionResultType]::ParameterName, 'The work under the lock failed: free it at once (no --min-interval or --cooldown)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'distlock;log' {
            [CompletionResult]::new('-k', '-k', [CompletionResultType]::ParameterName, 'Only this lock''s events (default: every lock under the prefix, merged by time)')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'Only this lock''s events (default: every lock under the prefix, merged by time)')
            [CompletionResult]::new('--since', '--since', [CompletionResultType]::ParameterName, 'Only events since this long ago (30m, 2h) or since this time (2026-11-25T03:00:00Z)')
            [CompletionResult]::new('-n', '-n', [CompletionResultType]::ParameterName, 'Only the newest N events')
            [CompletionResult]::new('--lines', '--lines', [CompletionResultType]::ParameterName, 'Only the newest N events')
            [CompletionResult]::new('--redis', '--redis', [CompletionResultType]::ParameterName, 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Redlock only: each node''s time to answer one request (default: 5% of the TTL, 50-500ms)')
            [CompletionResult]::new('--replicas', '--replicas', [CompletionResultType]::ParameterName, 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)')
            [CompletionResult]::new('--replicas-timeout', '--replicas-timeout', [CompletionResultType]::ParameterName, 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Prefix of every Redis key distlock writes')
            [CompletionResult]::new('--redis-timeout', '--redis-timeout', [CompletionResultType]::ParameterName, 'Timeout for connecting to Redis and for each command')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'CA certificate bundle (PEM) to trust for rediss:// instead of the system''s roots')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'Private key (PEM) of --tls-cert')
            [CompletionResult]::new('--history', '--history', [CompletionResultType]::ParameterName, 'Keep a history of each lock taken (who held it, how long, who waited) for DUR')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'How messages on stderr are written: text (distlock: ...) or json (one object a line)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON object per line instead of text')
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'Keep printing new events (within a second of happening) until interrupted')
            [CompletionResult]::new('--follow', '--follow', [CompletionResultType]::ParameterName, 'Keep printing new events (within a second of happening) until interrupted')
            [CompletionResult]::new('--clear', '--clear', [CompletionResultType]::ParameterName, 'Delete the lock''s history (needs --key), which turns the history off')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'distlock;stats' {
            [CompletionResult]::new('-k', '-k', [CompletionResultType]::ParameterName, 'Only this lock (default: every lock under the prefix, one after the other)')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'Only this lock (default: every lock under the prefix, one after the other)')
            [CompletionResult]::new('--since', '--since', [CompletionResultType]::ParameterName, 'Only events since this long ago (30m, 2h) or since this time (2026-11-25T03:00:00Z)')
            [CompletionResult]::new('--width', '--width', [CompletionResultType]::ParameterName, 'The width of the --timeline chart in characters (at least 40), instead of the terminal''s')
            [CompletionResult]::new('--redis', '--redis', [CompletionResultType]::ParameterName, 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Redlock only: each node''s time to answer one request (default: 5% of the TTL, 50-500ms)')
            [CompletionResult]::new('--replicas', '--replicas', [CompletionResultType]::ParameterName, 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)')
            [CompletionResult]::new('--replicas-timeout', '--replicas-timeout', [CompletionResultType]::ParameterName, 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Prefix of every Redis key distlock writes')
            [CompletionResult]::new('--redis-timeout', '--redis-timeout', [CompletionResultType]::ParameterName, 'Timeout for connecting to Redis and for each command')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'CA certificate bundle (PEM) to trust for rediss:// instead of the system''s roots')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'Private key (PEM) of --tls-cert')
            [CompletionResult]::new('--history', '--history', [CompletionResultType]::ParameterName, 'Keep a history of each lock taken (who held it, how long, who waited) for DUR')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'How messages on stderr are written: text (distlock: ...) or json (one object a line)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON object per lock instead of text')
            [CompletionResult]::new('--timeline', '--timeline', [CompletionResultType]::ParameterName, 'Draw the lock''s holds and waits as a text chart (needs --key)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'distlock;check' {
            [CompletionResult]::new('-k', '-k', [CompletionResultType]::ParameterName, 'Name of the lock')
            [CompletionResult]::new('--key', '--key', [CompletionResultType]::ParameterName, 'Name of the lock')
            [CompletionResult]::new('-w', '-w', [CompletionResultType]::ParameterName, 'WARNING when a holder has held the lock longer than this (its oldest holder''s hold)')
            [CompletionResult]::new('--warning', '--warning', [CompletionResultType]::ParameterName, 'WARNING when a holder has held the lock longer than this (its oldest holder''s hold)')
            [CompletionResult]::new('-c', '-c', [CompletionResultType]::ParameterName, 'CRITICAL when a holder has held the lock longer than this')
            [CompletionResult]::new('--critical', '--critical', [CompletionResultType]::ParameterName, 'CRITICAL when a holder has held the lock longer than this')
            [CompletionResult]::new('--warn-wait', '--warn-wait', [CompletionResultType]::ParameterName, 'WARNING when the first waiter in line has waited longer than this')
            [CompletionResult]::new('--crit-wait', '--crit-wait', [CompletionResultType]::ParameterName, 'CRITICAL when the first waiter in line has waited longer than this')
            [CompletionResult]::new('--crit-since-success', '--crit-since-success', [CompletionResultType]::ParameterName, 'CRITICAL when the lock''s history records no successful run within this long')
            [CompletionResult]::new('--redis', '--redis', [CompletionResultType]::ParameterName, 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Redlock only: each node''s time to answer one request (default: 5% of the TTL, 50-500ms)')
            [CompletionResult]::new('--replicas', '--replicas', [CompletionResultType]::ParameterName, 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)')
            [CompletionResult]::new('--replicas-timeout', '--replicas-timeout', [CompletionResultType]::ParameterName, 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Prefix of every Redis key distlock writes')
            [CompletionResult]::new('--redis-timeout', '--redis-timeout', [CompletionResultType]::ParameterName, 'Timeout for connecting to Redis and for each command')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'CA certificate bundle (PEM) to trust for rediss:// instead of the system''s roots')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'Private key (PEM) of --tls-cert')
            [CompletionResult]::new('--history', '--history', [CompletionResultType]::ParameterName, 'Keep a history of each lock taken (who held it, how long, who waited) for DUR')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'How messages on stderr are written: text (distlock: ...) or json (one object a line)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'distlock;metrics' {
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Write the metrics to FILE instead of stdout, atomically, mode 0644')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Write the metrics to FILE instead of stdout, atomically, mode 0644')
            [CompletionResult]::new('--label', '--label', [CompletionResultType]::ParameterName, 'Add the label NAME="VALUE" to every series (repeat for more)')
            [CompletionResult]::new('--redis', '--redis', [CompletionResultType]::ParameterName, 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL')
            [CompletionResult]::new('--node-timeout', '--node-timeout', [CompletionResultType]::ParameterName, 'Redlock only: each node''s time to answer one request (default: 5% of the TTL, 50-500ms)')
            [CompletionResult]::new('--replicas', '--replicas', [CompletionResultType]::ParameterName, 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)')
            [CompletionResult]::new('--replicas-timeout', '--replicas-timeout', [CompletionResultType]::ParameterName, 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)')
            [CompletionResult]::new('--prefix', '--prefix', [CompletionResultType]::ParameterName, 'Prefix of every Redis key distlock writes')
            [CompletionResult]::new('--redis-timeout', '--redis-timeout', [CompletionResultType]::ParameterName, 'Timeout for connecting to Redis and for each command')
            [CompletionResult]::new('--tls-ca', '--tls-ca', [CompletionResultType]::ParameterName, 'CA certificate bundle (PEM) to trust for rediss:// instead of the system''s roots')
            [CompletionResult]::new('--tls-cert', '--tls-cert', [CompletionResultType]::ParameterName, 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key')
            [CompletionResult]::new('--tls-key', '--tls-key', [CompletionResultType]::ParameterName, 'Private key (PEM) of --tls-cert')
            [CompletionResult]::new('--history', '--history', [CompletionResultType]::ParameterName, 'Keep a history of each lock taken (who held it, how long, who waited) for DUR')
            [CompletionResult]::new('--log-format', '--log-format', [CompletionResultType]::ParameterName, 'How messages on stderr are written: text (distlock: ...) or json (one object a line)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing but errors that explain a failing exit of distlock''s own')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'distlock;help' {
            [CompletionResult]::new('run', 'run', [CompletionResultType]::ParameterValue, 'Run a command while holding a lock')
            [CompletionResult]::new('status', 'status', [CompletionResultType]::ParameterValue, 'Show whether a lock is held, by whom, since when, until when, and who waits for it')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List the locks under the prefix, with holders, age, time left and waiters')
            [CompletionResult]::new('break', 'break', [CompletionResultType]::ParameterValue, 'Break a lock whoever holds it (every holder of a semaphore, or one), after showing who')
            [CompletionResult]::new('acquire', 'acquire', [CompletionResultType]::ParameterValue, 'Acquire a lock and print its token, for locks that span several CI steps or scripts')
            [CompletionResult]::new('renew', 'renew', [CompletionResultType]::ParameterValue, 'Extend a lock acquired with distlock acquire')
            [CompletionResult]::new('release', 'release', [CompletionResultType]::ParameterValue, 'Release a lock acquired with distlock acquire')
            [CompletionResult]::new('log', 'log', [CompletionResultType]::ParameterValue, 'Show a lock''s history: who held it, for how long, who waited, who broke it')
            [CompletionResult]::new('stats', 'stats', [CompletionResultType]::ParameterValue, 'Count a lock''s events and summarise how long holders waited and held it')
            [CompletionResult]::new('check', 'check', [CompletionResultType]::ParameterValue, 'Check a lock for a monitoring system: one line, exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN')
            [CompletionResult]::new('metrics', 'metrics', [CompletionResultType]::ParameterValue, 'Print the state of every lock as Prometheus metrics, for node_exporter or a Pushgateway')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'distlock;help;run' {
            break
        }
        'distlock;help;status' {
            break
        }
        'distlock;help;list' {
            break
        }
        'distlock;help;break' {
            break
        }
        'distlock;help;acquire' {
            break
        }
        'distlock;help;renew' {
            break
        }
        'distlock;help;release' {
            break
        }
        'distlock;help;log' {
            break
        }
        'distlock;help;stats' {
            break
        }
        'distlock;help;check' {
            break
        }
        'distlock;help;metrics' {
            break
        }
        'distlock;help;help' {
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}

# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_distlock_global_optspecs
    string join \n redis= node-timeout= replicas= replicas-timeout= prefix= redis-timeout= tls-ca= tls-cert= tls-key= v/verbose q/quiet history= log-format= h/help V/version
end

function __fish_distlock_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_distlock_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_distlock_using_subcommand
    set -l cmd (__fish_distlock_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c distlock -n "__fish_distlock_needs_command" -l redis -d 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL' -r
complete -c distlock -n "__fish_distlock_needs_command" -l node-timeout -d 'Redlock only: each node\'s time to answer one request (default: 5% of the TTL, 50-500ms)' -r
complete -c distlock -n "__fish_distlock_needs_command" -l replicas -d 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)' -r
complete -c distlock -n "__fish_distlock_needs_command" -l replicas-timeout -d 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)' -r
complete -c distlock -n "__fish_distlock_needs_command" -l prefix -d 'Prefix of every Redis key distlock writes' -r
complete -c distlock -n "__fish_distlock_needs_command" -l redis-timeout -d 'Timeout for connecting to Redis and for each command' -r
complete -c distlock -n "__fish_distlock_needs_command" -l tls-ca -d 'CA certificate bundle (PEM) to trust for rediss:// instead of the system\'s roots' -r -F
complete -c distlock -n "__fish_distlock_needs_command" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key' -r -F
complete -c distlock -n "__fish_distlock_needs_command" -l tls-key -d 'Private key (PEM) of --tls-cert' -r -F
complete -c distlock -n "__fish_distlock_needs_command" -l history -d 'Keep a history of each lock taken (who held it, how long, who waited) for DUR' -r
complete -c distlock -n "__fish_distlock_needs_command" -l log-format -d 'How messages on stderr are written: text (distlock: ...) or json (one object a line)' -r -f -a "text\t'One line per message, prefixed "distlock: "'
json\t'One JSON object per line'"
complete -c distlock -n "__fish_distlock_needs_command" -s v -l verbose -d 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
complete -c distlock -n "__fish_distlock_needs_command" -s q -l quiet -d 'Print nothing but errors that explain a failing exit of distlock\'s own'
complete -c distlock -n "__fish_distlock_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c distlock -n "__fish_distlock_needs_command" -s V -l version -d 'Print version'
complete -c distlock -n "__fish_distlock_needs_command" -f -a "run" -d 'Run a command while holding a lock'
complete -c distlock -n "__fish_distlock_needs_command" -f -a "status" -d 'Show whether a lock is held, by whom, since when, until when, and who waits for it'
complete -c distlock -n "__fish_distlock_needs_command" -f -a "list" -d 'List the locks under the prefix, with holders, age, time left and waiters'
complete -c distlock -n "__fish_distlock_needs_command" -f -a "break" -d 'Break a lock whoever holds it (every holder of a semaphore, or one), after showing who'
complete -c distlock -n "__fish_distlock_needs_command" -f -a "force-release" -d 'Break a lock whoever holds it (every holder of a semaphore, or one), after showing who'
complete -c distlock -n "__fish_distlock_needs_command" -f -a "acquire" -d 'Acquire a lock and print its token, for locks that span several CI steps or scripts'
complete -c distlock -n "__fish_distlock_needs_command" -f -a "renew" -d 'Extend a lock acquired with distlock acquire'
complete -c distlock -n "__fish_distlock_needs_command" -f -a "release" -d 'Release a lock acquired with distlock acquire'
complete -c distlock -n "__fish_distlock_needs_command" -f -a "log" -d 'Show a lock\'s history: who held it, for how long, who waited, who broke it'
complete -c distlock -n "__fish_distlock_needs_command" -f -a "stats" -d 'Count a lock\'s events and summarise how long holders waited and held it'
complete -c distlock -n "__fish_distlock_needs_command" -f -a "check" -d 'Check a lock for a monitoring system: one line, exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN'
complete -c distlock -n "__fish_distlock_needs_command" -f -a "metrics" -d 'Print the state of every lock as Prometheus metrics, for node_exporter or a Pushgateway'
complete -c distlock -n "__fish_distlock_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c distlock -n "__fish_distlock_using_subcommand run" -s k -l key -d 'Name of the lock; repeat for several keys (up to 32), all taken before the command starts' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -s t -l ttl -d 'Lifetime of the lock in Redis without renewal (from 1s to 24h)' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -s w -l wait -d 'Wait at most this long for the lock (default: wait forever)' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -s E -l conflict-exit-code -d 'Exit code when busy, superseded or replaced (not acquired), e.g. `-n -E 0` to skip quietly' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l wait-mode -d 'How to wait for a busy lock' -r -f -a "notify\t'Sleep until the holder\'s release is published, or its lock expires'
spin\t'Poll with capped, jittered exponential backoff'"
complete -c distlock -n "__fish_distlock_using_subcommand run" -l limit -d 'Let up to N holders in at once (a counting semaphore); 1, the default, is a mutex' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l shared-key -d 'Hold this one key shared (a reader), the other keys exclusive; repeatable' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l note -d 'A reason, stored with the lock and shown to whoever waits for it or asks about it' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l report-every -d 'Without a terminal, print a "still waiting" line this often while waiting' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l min-interval -d 'At most one run per period: keep the lock taken this long after a good run started' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l cooldown -d 'After a run that succeeded, keep the lock taken this long after the run ended' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l unreachable-after -d 'Give up (exit 69) on a Redis that has not answered once within this long' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l renew-every -d 'Renew the lock this often while the command runs (default: a third of --ttl)' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l kill-signal -d 'Signal that stops the command (lock lost, --timeout, --replace) (name or number)' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l kill-grace -d 'Time between --kill-signal and SIGKILL (default: 5s, or a fifth of --ttl if shorter)' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l timeout -d 'Stop the command if it runs longer than this, release the lock, and exit 79' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l warn-after -d 'Warn once the command has held the lock this long (held-too-long; stored with the lock)' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l warn-wait -d 'Warn once the wait for the lock has lasted this long, naming the holder (long-wait)' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l hook -d 'Run CMD with /bin/sh -c on the events of --hook-events, the event\'s JSON line on stdin' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l hook-events -d 'The events that run --hook, comma-separated; all adds acquired, released, superseded, replaced' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l hook-timeout -d 'How long distlock waits for a running --hook before it exits (0s: not at all)' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l redis -d 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l node-timeout -d 'Redlock only: each node\'s time to answer one request (default: 5% of the TTL, 50-500ms)' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l replicas -d 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l replicas-timeout -d 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l prefix -d 'Prefix of every Redis key distlock writes' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l redis-timeout -d 'Timeout for connecting to Redis and for each command' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l tls-ca -d 'CA certificate bundle (PEM) to trust for rediss:// instead of the system\'s roots' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand run" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand run" -l tls-key -d 'Private key (PEM) of --tls-cert' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand run" -l history -d 'Keep a history of each lock taken (who held it, how long, who waited) for DUR' -r
complete -c distlock -n "__fish_distlock_using_subcommand run" -l log-format -d 'How messages on stderr are written: text (distlock: ...) or json (one object a line)' -r -f -a "text\t'One line per message, prefixed "distlock: "'
json\t'One JSON object per line'"
complete -c distlock -n "__fish_distlock_using_subcommand run" -s n -l no-wait -d 'Try once; do not wait if the lock is busy (wins over --wait and DISTLOCK_WAIT)'
complete -c distlock -n "__fish_distlock_using_subcommand run" -l shared -d 'Hold KEY shared (a reader): shared holders hold it together, an exclusive one alone'
complete -c distlock -n "__fish_distlock_using_subcommand run" -l supersede -d 'Newest wins: join the line and cancel every waiter that joined before (not the holder)'
complete -c distlock -n "__fish_distlock_using_subcommand run" -l replace -d 'Newest replaces the running one: stop the holder\'s command, then take the lock'
complete -c distlock -n "__fish_distlock_using_subcommand run" -s v -l verbose -d 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
complete -c distlock -n "__fish_distlock_using_subcommand run" -s q -l quiet -d 'Print nothing but errors that explain a failing exit of distlock\'s own'
complete -c distlock -n "__fish_distlock_using_subcommand run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c distlock -n "__fish_distlock_using_subcommand run" -s V -l version -d 'Print version'
complete -c distlock -n "__fish_distlock_using_subcommand status" -s k -l key -d 'Name of the lock' -r
complete -c distlock -n "__fish_distlock_using_subcommand status" -l redis -d 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL' -r
complete -c distlock -n "__fish_distlock_using_subcommand status" -l node-timeout -d 'Redlock only: each node\'s time to answer one request (default: 5% of the TTL, 50-500ms)' -r
complete -c distlock -n "__fish_distlock_using_subcommand status" -l replicas -d 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)' -r
complete -c distlock -n "__fish_distlock_using_subcommand status" -l replicas-timeout -d 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)' -r
complete -c distlock -n "__fish_distlock_using_subcommand status" -l prefix -d 'Prefix of every Redis key distlock writes' -r
complete -c distlock -n "__fish_distlock_using_subcommand status" -l redis-timeout -d 'Timeout for connecting to Redis and for each command' -r
complete -c distlock -n "__fish_distlock_using_subcommand status" -l tls-ca -d 'CA certificate bundle (PEM) to trust for rediss:// instead of the system\'s roots' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand status" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand status" -l tls-key -d 'Private key (PEM) of --tls-cert' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand status" -l history -d 'Keep a history of each lock taken (who held it, how long, who waited) for DUR' -r
complete -c distlock -n "__fish_distlock_using_subcommand status" -l log-format -d 'How messages on stderr are written: text (distlock: ...) or json (one object a line)' -r -f -a "text\t'One line per message, prefixed "distlock: "'
json\t'One JSON object per line'"
complete -c distlock -n "__fish_distlock_using_subcommand status" -l json -d 'Print JSON (one object) instead of text'
complete -c distlock -n "__fish_distlock_using_subcommand status" -s v -l verbose -d 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
complete -c distlock -n "__fish_distlock_using_subcommand status" -s q -l quiet -d 'Print nothing but errors that explain a failing exit of distlock\'s own'
complete -c distlock -n "__fish_distlock_using_subcommand status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c distlock -n "__fish_distlock_using_subcommand status" -s V -l version -d 'Print version'
complete -c distlock -n "__fish_distlock_using_subcommand list" -l redis -d 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL' -r
complete -c distlock -n "__fish_distlock_using_subcommand list" -l node-timeout -d 'Redlock only: each node\'s time to answer one request (default: 5% of the TTL, 50-500ms)' -r
complete -c distlock -n "__fish_distlock_using_subcommand list" -l replicas -d 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)' -r
complete -c distlock -n "__fish_distlock_using_subcommand list" -l replicas-timeout -d 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)' -r
complete -c distlock -n "__fish_distlock_using_subcommand list" -l prefix -d 'Prefix of every Redis key distlock writes' -r
complete -c distlock -n "__fish_distlock_using_subcommand list" -l redis-timeout -d 'Timeout for connecting to Redis and for each command' -r
complete -c distlock -n "__fish_distlock_using_subcommand list" -l tls-ca -d 'CA certificate bundle (PEM) to trust for rediss:// instead of the system\'s roots' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand list" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand list" -l tls-key -d 'Private key (PEM) of --tls-cert' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand list" -l history -d 'Keep a history of each lock taken (who held it, how long, who waited) for DUR' -r
complete -c distlock -n "__fish_distlock_using_subcommand list" -l log-format -d 'How messages on stderr are written: text (distlock: ...) or json (one object a line)' -r -f -a "text\t'One line per message, prefixed "distlock: "'
json\t'One JSON object per line'"
complete -c distlock -n "__fish_distlock_using_subcommand list" -l json -d 'Print JSON (an array of what status --json prints) instead of a table'
complete -c distlock -n "__fish_distlock_using_subcommand list" -s v -l verbose -d 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
complete -c distlock -n "__fish_distlock_using_subcommand list" -s q -l quiet -d 'Print nothing but errors that explain a failing exit of distlock\'s own'
complete -c distlock -n "__fish_distlock_using_subcommand list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c distlock -n "__fish_distlock_using_subcommand list" -s V -l version -d 'Print version'
complete -c distlock -n "__fish_distlock_using_subcommand break" -s k -l key -d 'Name of the lock' -r
complete -c distlock -n "__fish_distlock_using_subcommand break" -l holder -d 'Break only the holder with this id (as distlock status shows it; 4 characters or more)' -r
complete -c distlock -n "__fish_distlock_using_subcommand break" -l redis -d 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL' -r
complete -c distlock -n "__fish_distlock_using_subcommand break" -l node-timeout -d 'Redlock only: each node\'s time to answer one request (default: 5% of the TTL, 50-500ms)' -r
complete -c distlock -n "__fish_distlock_using_subcommand break" -l replicas -d 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)' -r
complete -c distlock -n "__fish_distlock_using_subcommand break" -l replicas-timeout -d 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)' -r
complete -c distlock -n "__fish_distlock_using_subcommand break" -l prefix -d 'Prefix of every Redis key distlock writes' -r
complete -c distlock -n "__fish_distlock_using_subcommand break" -l redis-timeout -d 'Timeout for connecting to Redis and for each command' -r
complete -c distlock -n "__fish_distlock_using_subcommand break" -l tls-ca -d 'CA certificate bundle (PEM) to trust for rediss:// instead of the system\'s roots' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand break" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand break" -l tls-key -d 'Private key (PEM) of --tls-cert' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand break" -l history -d 'Keep a history of each lock taken (who held it, how long, who waited) for DUR' -r
complete -c distlock -n "__fish_distlock_using_subcommand break" -l log-format -d 'How messages on stderr are written: text (distlock: ...) or json (one object a line)' -r -f -a "text\t'One line per message, prefixed "distlock: "'
json\t'One JSON object per line'"
complete -c distlock -n "__fish_distlock_using_subcommand break" -s y -l yes -d 'Do not ask for confirmation (required when stdin is not a terminal)'
complete -c distlock -n "__fish_distlock_using_subcommand break" -s v -l verbose -d 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
complete -c distlock -n "__fish_distlock_using_subcommand break" -s q -l quiet -d 'Print nothing but errors that explain a failing exit of distlock\'s own'
complete -c distlock -n "__fish_distlock_using_subcommand break" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c distlock -n "__fish_distlock_using_subcommand break" -s V -l version -d 'Print version'
complete -c distlock -n "__fish_distlock_using_subcommand force-release" -s k -l key -d 'Name of the lock' -r
complete -c distlock -n "__fish_distlock_using_subcommand force-release" -l holder -d 'Break only the holder with this id (as distlock status shows it; 4 characters or more)' -r
complete -c distlock -n "__fish_distlock_using_subcommand force-release" -l redis -d 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL' -r
complete -c distlock -n "__fish_distlock_using_subcommand force-release" -l node-timeout -d 'Redlock only: each node\'s time to answer one request (default: 5% of the TTL, 50-500ms)' -r
complete -c distlock -n "__fish_distlock_using_subcommand force-release" -l replicas -d 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)' -r
complete -c distlock -n "__fish_distlock_using_subcommand force-release" -l replicas-timeout -d 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)' -r
complete -c distlock -n "__fish_distlock_using_subcommand force-release" -l prefix -d 'Prefix of every Redis key distlock writes' -r
complete -c distlock -n "__fish_distlock_using_subcommand force-release" -l redis-timeout -d 'Timeout for connecting to Redis and for each command' -r
complete -c distlock -n "__fish_distlock_using_subcommand force-release" -l tls-ca -d 'CA certificate bundle (PEM) to trust for rediss:// instead of the system\'s roots' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand force-release" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand force-release" -l tls-key -d 'Private key (PEM) of --tls-cert' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand force-release" -l history -d 'Keep a history of each lock taken (who held it, how long, who waited) for DUR' -r
complete -c distlock -n "__fish_distlock_using_subcommand force-release" -l log-format -d 'How messages on stderr are written: text (distlock: ...) or json (one object a line)' -r -f -a "text\t'One line per message, prefixed "distlock: "'
json\t'One JSON object per line'"
complete -c distlock -n "__fish_distlock_using_subcommand force-release" -s y -l yes -d 'Do not ask for confirmation (required when stdin is not a terminal)'
complete -c distlock -n "__fish_distlock_using_subcommand force-release" -s v -l verbose -d 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
complete -c distlock -n "__fish_distlock_using_subcommand force-release" -s q -l quiet -d 'Print nothing but errors that explain a failing exit of distlock\'s own'
complete -c distlock -n "__fish_distlock_using_subcommand force-release" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c distlock -n "__fish_distlock_using_subcommand force-release" -s V -l version -d 'Print version'
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -s k -l key -d 'Name of the lock; repeat for several keys (up to 32), all taken before the command starts' -r
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -s t -l ttl -d 'Lifetime of the lock in Redis without renewal (from 1s to 24h)' -r
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -s w -l wait -d 'Wait at most this long for the lock (default: wait forever)' -r
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -s E -l conflict-exit-code -d 'Exit code when busy, superseded or replaced (not acquired), e.g. `-n -E 0` to skip quietly' -r
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l wait-mode -d 'How to wait for a busy lock' -r -f -a "notify\t'Sleep until the holder\'s release is published, or its lock expires'
spin\t'Poll with capped, jittered exponential backoff'"
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l limit -d 'Let up to N holders in at once (a counting semaphore); 1, the default, is a mutex' -r
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l shared-key -d 'Hold this one key shared (a reader), the other keys exclusive; repeatable' -r
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l note -d 'A reason, stored with the lock and shown to whoever waits for it or asks about it' -r
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l report-every -d 'Without a terminal, print a "still waiting" line this often while waiting' -r
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l min-interval -d 'At most one run per period: keep the lock taken this long after a good run started' -r
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l cooldown -d 'After a run that succeeded, keep the lock taken this long after the run ended' -r
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l unreachable-after -d 'Give up (exit 69) on a Redis that has not answered once within this long' -r
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l env-file -d 'Append the lock\'s DISTLOCK_KEY, DISTLOCK_FENCE and DISTLOCK_TOKEN to FILE; print nothing' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l redis -d 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL' -r
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l node-timeout -d 'Redlock only: each node\'s time to answer one request (default: 5% of the TTL, 50-500ms)' -r
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l replicas -d 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)' -r
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l replicas-timeout -d 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)' -r
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l prefix -d 'Prefix of every Redis key distlock writes' -r
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l redis-timeout -d 'Timeout for connecting to Redis and for each command' -r
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l tls-ca -d 'CA certificate bundle (PEM) to trust for rediss:// instead of the system\'s roots' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l tls-key -d 'Private key (PEM) of --tls-cert' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l history -d 'Keep a history of each lock taken (who held it, how long, who waited) for DUR' -r
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l log-format -d 'How messages on stderr are written: text (distlock: ...) or json (one object a line)' -r -f -a "text\t'One line per message, prefixed "distlock: "'
json\t'One JSON object per line'"
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -s n -l no-wait -d 'Try once; do not wait if the lock is busy (wins over --wait and DISTLOCK_WAIT)'
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l shared -d 'Hold KEY shared (a reader): shared holders hold it together, an exclusive one alone'
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l supersede -d 'Newest wins: join the line and cancel every waiter that joined before (not the holder)'
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l replace -d 'Newest replaces the running one: stop the holder\'s command, then take the lock'
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -l json -d 'Print one JSON object instead of the bare token: key, token, fence, TTL and limit'
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -s v -l verbose -d 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -s q -l quiet -d 'Print nothing but errors that explain a failing exit of distlock\'s own'
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c distlock -n "__fish_distlock_using_subcommand acquire" -s V -l version -d 'Print version'
complete -c distlock -n "__fish_distlock_using_subcommand renew" -s k -l key -d 'Name of the lock' -r
complete -c distlock -n "__fish_distlock_using_subcommand renew" -l token -d 'The token printed by distlock acquire (or written to its --env-file as DISTLOCK_TOKEN)' -r
complete -c distlock -n "__fish_distlock_using_subcommand renew" -s t -l ttl -d 'New lifetime from now (default: the TTL the lock was acquired with)' -r
complete -c distlock -n "__fish_distlock_using_subcommand renew" -l redis -d 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL' -r
complete -c distlock -n "__fish_distlock_using_subcommand renew" -l node-timeout -d 'Redlock only: each node\'s time to answer one request (default: 5% of the TTL, 50-500ms)' -r
complete -c distlock -n "__fish_distlock_using_subcommand renew" -l replicas -d 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)' -r
complete -c distlock -n "__fish_distlock_using_subcommand renew" -l replicas-timeout -d 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)' -r
complete -c distlock -n "__fish_distlock_using_subcommand renew" -l prefix -d 'Prefix of every Redis key distlock writes' -r
complete -c distlock -n "__fish_distlock_using_subcommand renew" -l redis-timeout -d 'Timeout for connecting to Redis and for each command' -r
complete -c distlock -n "__fish_distlock_using_subcommand renew" -l tls-ca -d 'CA certificate bundle (PEM) to trust for rediss:// instead of the system\'s roots' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand renew" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand renew" -l tls-key -d 'Private key (PEM) of --tls-cert' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand renew" -l history -d 'Keep a history of each lock taken (who held it, how long, who waited) for DUR' -r
complete -c distlock -n "__fish_distlock_using_subcommand renew" -l log-format -d 'How messages on stderr are written: text (distlock: ...) or json (one object a line)' -r -f -a "text\t'One line per message, prefixed "distlock: "'
json\t'One JSON object per line'"
complete -c distlock -n "__fish_distlock_using_subcommand renew" -s v -l verbose -d 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
complete -c distlock -n "__fish_distlock_using_subcommand renew" -s q -l quiet -d 'Print nothing but errors that explain a failing exit of distlock\'s own'
complete -c distlock -n "__fish_distlock_using_subcommand renew" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c distlock -n "__fish_distlock_using_subcommand renew" -s V -l version -d 'Print version'
complete -c distlock -n "__fish_distlock_using_subcommand release" -s k -l key -d 'Name of the lock' -r
complete -c distlock -n "__fish_distlock_using_subcommand release" -l token -d 'The token printed by distlock acquire (or written to its --env-file as DISTLOCK_TOKEN)' -r
complete -c distlock -n "__fish_distlock_using_subcommand release" -l redis -d 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL' -r
complete -c distlock -n "__fish_distlock_using_subcommand release" -l node-timeout -d 'Redlock only: each node\'s time to answer one request (default: 5% of the TTL, 50-500ms)' -r
complete -c distlock -n "__fish_distlock_using_subcommand release" -l replicas -d 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)' -r
complete -c distlock -n "__fish_distlock_using_subcommand release" -l replicas-timeout -d 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)' -r
complete -c distlock -n "__fish_distlock_using_subcommand release" -l prefix -d 'Prefix of every Redis key distlock writes' -r
complete -c distlock -n "__fish_distlock_using_subcommand release" -l redis-timeout -d 'Timeout for connecting to Redis and for each command' -r
complete -c distlock -n "__fish_distlock_using_subcommand release" -l tls-ca -d 'CA certificate bundle (PEM) to trust for rediss:// instead of the system\'s roots' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand release" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand release" -l tls-key -d 'Private key (PEM) of --tls-cert' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand release" -l history -d 'Keep a history of each lock taken (who held it, how long, who waited) for DUR' -r
complete -c distlock -n "__fish_distlock_using_subcommand release" -l log-format -d 'How messages on stderr are written: text (distlock: ...) or json (one object a line)' -r -f -a "text\t'One line per message, prefixed "distlock: "'
json\t'One JSON object per line'"
complete -c distlock -n "__fish_distlock_using_subcommand release" -l failed -d 'The work under the lock failed: free it at once (no --min-interval or --cooldown)'
complete -c distlock -n "__fish_distlock_using_subcommand release" -s v -l verbose -d 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
complete -c distlock -n "__fish_distlock_using_subcommand release" -s q -l quiet -d 'Print nothing but errors that explain a failing exit of distlock\'s own'
complete -c distlock -n "__fish_distlock_using_subcommand release" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c distlock -n "__fish_distlock_using_subcommand release" -s V -l version -d 'Print version'
complete -c distlock -n "__fish_distlock_using_subcommand log" -s k -l key -d 'Only this lock\'s events (default: every lock under the prefix, merged by time)' -r
complete -c distlock -n "__fish_distlock_using_subcommand log" -l since -d 'Only events since this long ago (30m, 2h) or since this time (2026-11-25T03:00:00Z)' -r
complete -c distlock -n "__fish_distlock_using_subcommand log" -s n -l lines -d 'Only the newest N events' -r
complete -c distlock -n "__fish_distlock_using_subcommand log" -l redis -d 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL' -r
complete -c distlock -n "__fish_distlock_using_subcommand log" -l node-timeout -d 'Redlock only: each node\'s time to answer one request (default: 5% of the TTL, 50-500ms)' -r
complete -c distlock -n "__fish_distlock_using_subcommand log" -l replicas -d 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)' -r
complete -c distlock -n "__fish_distlock_using_subcommand log" -l replicas-timeout -d 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)' -r
complete -c distlock -n "__fish_distlock_using_subcommand log" -l prefix -d 'Prefix of every Redis key distlock writes' -r
complete -c distlock -n "__fish_distlock_using_subcommand log" -l redis-timeout -d 'Timeout for connecting to Redis and for each command' -r
complete -c distlock -n "__fish_distlock_using_subcommand log" -l tls-ca -d 'CA certificate bundle (PEM) to trust for rediss:// instead of the system\'s roots' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand log" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand log" -l tls-key -d 'Private key (PEM) of --tls-cert' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand log" -l history -d 'Keep a history of each lock taken (who held it, how long, who waited) for DUR' -r
complete -c distlock -n "__fish_distlock_using_subcommand log" -l log-format -d 'How messages on stderr are written: text (distlock: ...) or json (one object a line)' -r -f -a "text\t'One line per message, prefixed "distlock: "'
json\t'One JSON object per line'"
complete -c distlock -n "__fish_distlock_using_subcommand log" -l json -d 'Print one JSON object per line instead of text'
complete -c distlock -n "__fish_distlock_using_subcommand log" -s f -l follow -d 'Keep printing new events (within a second of happening) until interrupted'
complete -c distlock -n "__fish_distlock_using_subcommand log" -l clear -d 'Delete the lock\'s history (needs --key), which turns the history off'
complete -c distlock -n "__fish_distlock_using_subcommand log" -s v -l verbose -d 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
complete -c distlock -n "__fish_distlock_using_subcommand log" -s q -l quiet -d 'Print nothing but errors that explain a failing exit of distlock\'s own'
complete -c distlock -n "__fish_distlock_using_subcommand log" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c distlock -n "__fish_distlock_using_subcommand log" -s V -l version -d 'Print version'
complete -c distlock -n "__fish_distlock_using_subcommand stats" -s k -l key -d 'Only this lock (default: every lock under the prefix, one after the other)' -r
complete -c distlock -n "__fish_distlock_using_subcommand stats" -l since -d 'Only events since this long ago (30m, 2h) or since this time (2026-11-25T03:00:00Z)' -r
complete -c distlock -n "__fish_distlock_using_subcommand stats" -l width -d 'The width of the --timeline chart in characters (at least 40), instead of the terminal\'s' -r
complete -c distlock -n "__fish_distlock_using_subcommand stats" -l redis -d 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL' -r
complete -c distlock -n "__fish_distlock_using_subcommand stats" -l node-timeout -d 'Redlock only: each node\'s time to answer one request (default: 5% of the TTL, 50-500ms)' -r
complete -c distlock -n "__fish_distlock_using_subcommand stats" -l replicas -d 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)' -r
complete -c distlock -n "__fish_distlock_using_subcommand stats" -l replicas-timeout -d 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)' -r
complete -c distlock -n "__fish_distlock_using_subcommand stats" -l prefix -d 'Prefix of every Redis key distlock writes' -r
complete -c distlock -n "__fish_distlock_using_subcommand stats" -l redis-timeout -d 'Timeout for connecting to Redis and for each command' -r
complete -c distlock -n "__fish_distlock_using_subcommand stats" -l tls-ca -d 'CA certificate bundle (PEM) to trust for rediss:// instead of the system\'s roots' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand stats" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand stats" -l tls-key -d 'Private key (PEM) of --tls-cert' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand stats" -l history -d 'Keep a history of each lock taken (who held it, how long, who waited) for DUR' -r
complete -c distlock -n "__fish_distlock_using_subcommand stats" -l log-format -d 'How messages on stderr are written: text (distlock: ...) or json (one object a line)' -r -f -a "text\t'One line per message, prefixed "distlock: "'
json\t'One JSON object per line'"
complete -c distlock -n "__fish_distlock_using_subcommand stats" -l json -d 'Print one JSON object per lock instead of text'
complete -c distlock -n "__fish_distlock_using_subcommand stats" -l timeline -d 'Draw the lock\'s holds and waits as a text chart (needs --key)'
complete -c distlock -n "__fish_distlock_using_subcommand stats" -s v -l verbose -d 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
complete -c distlock -n "__fish_distlock_using_subcommand stats" -s q -l quiet -d 'Print nothing but errors that explain a failing exit of distlock\'s own'
complete -c distlock -n "__fish_distlock_using_subcommand stats" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c distlock -n "__fish_distlock_using_subcommand stats" -s V -l version -d 'Print version'
complete -c distlock -n "__fish_distlock_using_subcommand check" -s k -l key -d 'Name of the lock' -r
complete -c distlock -n "__fish_distlock_using_subcommand check" -s w -l warning -d 'WARNING when a holder has held the lock longer than this (its oldest holder\'s hold)' -r
complete -c distlock -n "__fish_distlock_using_subcommand check" -s c -l critical -d 'CRITICAL when a holder has held the lock longer than this' -r
complete -c distlock -n "__fish_distlock_using_subcommand check" -l warn-wait -d 'WARNING when the first waiter in line has waited longer than this' -r
complete -c distlock -n "__fish_distlock_using_subcommand check" -l crit-wait -d 'CRITICAL when the first waiter in line has waited longer than this' -r
complete -c distlock -n "__fish_distlock_using_subcommand check" -l crit-since-success -d 'CRITICAL when the lock\'s history records no successful run within this long' -r
complete -c distlock -n "__fish_distlock_using_subcommand check" -l redis -d 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL' -r
complete -c distlock -n "__fish_distlock_using_subcommand check" -l node-timeout -d 'Redlock only: each node\'s time to answer one request (default: 5% of the TTL, 50-500ms)' -r
complete -c distlock -n "__fish_distlock_using_subcommand check" -l replicas -d 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)' -r
complete -c distlock -n "__fish_distlock_using_subcommand check" -l replicas-timeout -d 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)' -r
complete -c distlock -n "__fish_distlock_using_subcommand check" -l prefix -d 'Prefix of every Redis key distlock writes' -r
complete -c distlock -n "__fish_distlock_using_subcommand check" -l redis-timeout -d 'Timeout for connecting to Redis and for each command' -r
complete -c distlock -n "__fish_distlock_using_subcommand check" -l tls-ca -d 'CA certificate bundle (PEM) to trust for rediss:// instead of the system\'s roots' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand check" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand check" -l tls-key -d 'Private key (PEM) of --tls-cert' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand check" -l history -d 'Keep a history of each lock taken (who held it, how long, who waited) for DUR' -r
complete -c distlock -n "__fish_distlock_using_subcommand check" -l log-format -d 'How messages on stderr are written: text (distlock: ...) or json (one object a line)' -r -f -a "text\t'One line per message, prefixed "distlock: "'
json\t'One JSON object per line'"
complete -c distlock -n "__fish_distlock_using_subcommand check" -s v -l verbose -d 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
complete -c distlock -n "__fish_distlock_using_subcommand check" -s q -l quiet -d 'Print nothing but errors that explain a failing exit of distlock\'s own'
complete -c distlock -n "__fish_distlock_using_subcommand check" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c distlock -n "__fish_distlock_using_subcommand check" -s V -l version -d 'Print version'
complete -c distlock -n "__fish_distlock_using_subcommand metrics" -s o -l output -d 'Write the metrics to FILE instead of stdout, atomically, mode 0644' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand metrics" -l label -d 'Add the label NAME="VALUE" to every series (repeat for more)' -r
complete -c distlock -n "__fish_distlock_using_subcommand metrics" -l redis -d 'Where the lock lives: a Redis URL; several for a Redlock; or a Sentinel or Cluster URL' -r
complete -c distlock -n "__fish_distlock_using_subcommand metrics" -l node-timeout -d 'Redlock only: each node\'s time to answer one request (default: 5% of the TTL, 50-500ms)' -r
complete -c distlock -n "__fish_distlock_using_subcommand metrics" -l replicas -d 'After acquiring and after each renewal, wait until N replicas have the write (WAIT)' -r
complete -c distlock -n "__fish_distlock_using_subcommand metrics" -l replicas-timeout -d 'How long --replicas waits for the acknowledgements, per write (at most --redis-timeout)' -r
complete -c distlock -n "__fish_distlock_using_subcommand metrics" -l prefix -d 'Prefix of every Redis key distlock writes' -r
complete -c distlock -n "__fish_distlock_using_subcommand metrics" -l redis-timeout -d 'Timeout for connecting to Redis and for each command' -r
complete -c distlock -n "__fish_distlock_using_subcommand metrics" -l tls-ca -d 'CA certificate bundle (PEM) to trust for rediss:// instead of the system\'s roots' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand metrics" -l tls-cert -d 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand metrics" -l tls-key -d 'Private key (PEM) of --tls-cert' -r -F
complete -c distlock -n "__fish_distlock_using_subcommand metrics" -l history -d 'Keep a history of each lock taken (who held it, how long, who waited) for DUR' -r
complete -c distlock -n "__fish_distlock_using_subcommand metrics" -l log-format -d 'How messages on stderr are written: text (distlock: ...) or json (one object a line)' -r -f -a "text\t'One line per message, prefixed "distlock: "'
json\t'One JSON object per line'"
complete -c distlock -n "__fish_distlock_using_subcommand metrics" -s v -l verbose -d 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
complete -c distlock -n "__fish_distlock_using_subcommand metrics" -s q -l quiet -d 'Print nothing but errors that explain a failing exit of distlock\'s own'
complete -c distlock -n "__fish_distlock_using_subcommand metrics" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c distlock -n "__fish_distlock_using_subcommand metrics" -s V -l version -d 'Print version'
complete -c distlock -n "__fish_distlock_using_subcommand help; and not __fish_seen_subcommand_from run status list break acquire renew release log stats check metrics help" -f -a "run" -d 'Run a command while holding a lock'
complete -c distlock -n "__fish_distlock_using_subcommand help; and not __fish_seen_subcommand_from run status list break acquire renew release log stats check metrics help" -f -a "status" -d 'Show whether a lock is held, by whom, since when, until when, and who waits for it'
complete -c distlock -n "__fish_distlock_using_subcommand help; and not __fish_seen_subcommand_from run status list break acquire renew release log stats check metrics help" -f -a "list" -d 'List the locks under the prefix, with holders, age, time left and waiters'
complete -c distlock -n "__fish_distlock_using_subcommand help; and not __fish_seen_subcommand_from run status list break acquire renew release log stats check metrics help" -f -a "break" -d 'Break a lock whoever holds it (every holder of a semaphore, or one), after showing who'
complete -c distlock -n "__fish_distlock_using_subcommand help; and not __fish_seen_subcommand_from run status list break acquire renew release log stats check metrics help" -f -a "acquire" -d 'Acquire a lock and print its token, for locks that span several CI steps or scripts'
complete -c distlock -n "__fish_distlock_using_subcommand help; and not __fish_seen_subcommand_from run status list break acquire renew release log stats check metrics help" -f -a "renew" -d 'Extend a lock acquired with distlock acquire'
complete -c distlock -n "__fish_distlock_using_subcommand help; and not __fish_seen_subcommand_from run status list break acquire renew release log stats check metrics help" -f -a "release" -d 'Release a lock acquired with distlock acquire'
complete -c distlock -n "__fish_distlock_using_subcommand help; and not __fish_seen_subcommand_from run status list break acquire renew release log stats check metrics help" -f -a "log" -d 'Show a lock\'s history: who held it, for how long, who waited, who broke it'
complete -c distlock -n "__fish_distlock_using_subcommand help; and not __fish_seen_subcommand_from run status list break acquire renew release log stats check metrics help" -f -a "stats" -d 'Count a lock\'s events and summarise how long holders waited and held it'
complete -c distlock -n "__fish_distlock_using_subcommand help; and not __fish_seen_subcommand_from run status list break acquire renew release log stats check metrics help" -f -a "check" -d 'Check a lock for a monitoring system: one line, exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN'
complete -c distlock -n "__fish_distlock_using_subcommand help; and not __fish_seen_subcommand_from run status list break acquire renew release log stats check metrics help" -f -a "metrics" -d 'Print the state of every lock as Prometheus metrics, for node_exporter or a Pushgateway'
complete -c distlock -n "__fish_distlock_using_subcommand help; and not __fish_seen_subcommand_from run status list break acquire renew release log stats check metrics help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'


use builtin;
use str;

set edit:completion:arg-completer[distlock] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'distlock'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'distlock'= {
            cand --redis 'Redis server URL: redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss://... or unix:///PATH'
            cand --prefix 'Prefix of every Redis key distlock writes'
            cand --redis-timeout 'Timeout for connecting to Redis and for each command'
            cand --tls-ca 'CA certificate bundle (PEM) to trust for rediss:// instead of the system''s roots'
            cand --tls-cert 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key'
            cand --tls-key 'Private key (PEM) of --tls-cert'
            cand -v 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
            cand --verbose 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
            cand -q 'Print nothing but errors that explain a failing exit of distlock''s own'
            cand --quiet 'Print nothing but errors that explain a failing exit of distlock''s own'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
            cand run 'Run a command while holding a lock'
            cand status 'Show whether a lock is held, by whom, since when, and until when'
            cand list 'List the locks under the prefix, with holder, age and time left'
            cand break 'Delete a lock whoever holds it, after showing who does'
            cand force-release 'Delete a lock whoever holds it, after showing who does'
            cand acquire 'Acquire a lock and print its token, for locks that span several CI steps or scripts'
            cand renew 'Extend a lock acquired with distlock acquire'
            cand release 'Release a lock acquired with distlock acquire'
            cand generate 'Write the shell completions or the man pages (for packagers)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'distlock;run'= {
            cand -k 'Name of the lock'
            cand --key 'Name of the lock'
            cand -t 'Lifetime of the lock in Redis without renewal (from 1s to 24h)'
            cand --ttl 'Lifetime of the lock in Redis without renewal (from 1s to 24h)'
            cand -w 'Wait at most this long for the lock (default: wait forever)'
            cand --wait 'Wait at most this long for the lock (default: wait forever)'
            cand -E 'Exit code when the lock was not acquired (busy), e.g. `-n -E 0` to skip quietly'
            cand --conflict-exit-code 'Exit code when the lock was not acquired (busy), e.g. `-n -E 0` to skip quietly'
            cand --wait-mode 'How to wait for a busy lock'
            cand --note 'A reason, stored with the lock and shown to whoever waits for it or asks about it'
            cand --report-every 'Without a terminal, print a "still waiting" line this often while waiting'
            cand --renew-every 'Renew the lock this often while the command runs (default: a third of --ttl)'
            cand --kill-signal 'Signal that stops the command when the lock is lost (name or number)'
            cand --kill-grace 'Time between --kill-signal and SIGKILL (default: 5s, or a fifth of --ttl if shorter)'
            cand --redis 'Redis server URL: redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss://... or unix:///PATH'
            cand --prefix 'Prefix of every Redis key distlock writes'
            cand --redis-timeout 'Timeout for connecting to Redis and for each command'
            cand --tls-ca 'CA certificate bundle (PEM) to trust for rediss:// instead of the system''s roots'
            cand --tls-cert 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key'
            cand --tls-key 'Private key (PEM) of --tls-cert'
            cand -n 'Try once; do not wait if the lock is busy (wins over --wait and DISTLOCK_WAIT)'
            cand --no-wait 'Try once; do not wait if the lock is busy (wins over --wait and DISTLOCK_WAIT)'
            cand -v 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
            cand --verbose 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
            cand -q 'Print nothing but errors that explain a failing exit of distlock''s own'
            cand --quiet 'Print nothing but errors that explain a failing exit of distlock''s own'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'distlock;status'= {
            cand -k 'Name of the lock'
            cand --key 'Name of the lock'
            cand --redis 'Redis server URL: redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss://... or unix:///PATH'
            cand --prefix 'Prefix of every Redis key distlock writes'
            cand --redis-timeout 'Timeout for connecting to Redis and for each command'
            cand --tls-ca 'CA certificate bundle (PEM) to trust for rediss:// instead of the system''s roots'
            cand --tls-cert 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key'
            cand --tls-key 'Private key (PEM) of --tls-cert'
            cand --json 'Print JSON (one object) instead of text'
            cand -v 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
            cand --verbose 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
            cand -q 'Print nothing but errors that explain a failing exit of distlock''s own'
            cand --quiet 'Print nothing but errors that explain a failing exit of distlock''s own'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'distlock;list'= {
            cand --redis 'Redis server URL: redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss://... or unix:///PATH'
            cand --prefix 'Prefix of every Redis key distlock writes'
            cand --redis-timeout 'Timeout for connecting to Redis and for each command'
            cand --tls-ca 'CA certificate bundle (PEM) to trust for rediss:// instead of the system''s roots'
            cand --tls-cert 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key'
            cand --tls-key 'Private key (PEM) of --tls-cert'
            cand --json 'Print JSON (an array) instead of a table'
            cand -v 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
            cand --verbose 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
            cand -q 'Print nothing but errors that explain a failing exit of distlock''s own'
            cand --quiet 'Print nothing but errors that explain a failing exit of distlock''s own'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'distlock;break'= {
            cand -k 'Name of the lock'
            cand --key 'Name of the lock'
            cand --redis 'Redis server URL: redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss://... or unix:///PATH'
            cand --prefix 'Prefix of every Redis key distlock writes'
            cand --redis-timeout 'Timeout for connecting to Redis and for each command'
            cand --tls-ca 'CA certificate bundle (PEM) to trust for rediss:// instead of the system''s roots'
            cand --tls-cert 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key'
            cand --tls-key 'Private key (PEM) of --tls-cert'
            cand -y 'Do not ask for confirmation (required when stdin is not a terminal)'
            cand --yes 'Do not ask for confirmation (required when stdin is not a terminal)'
            cand -v 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
            cand --verbose 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
            cand -q 'Print nothing but errors that explain a failing exit of distlock''s own'
            cand --quiet 'Print nothing but errors that explain a failing exit of distlock''s own'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'distlock;force-release'= {
            cand -k 'Name of the lock'
            cand --key 'Name of the lock'
            cand --redis 'Redis server URL: redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss://... or unix:///PATH'
            cand --prefix 'Prefix of every Redis key distlock writes'
            cand --redis-timeout 'Timeout for connecting to Redis and for each command'
            cand --tls-ca 'CA certificate bundle (PEM) to trust for rediss:// instead of the system''s roots'
            cand --tls-cert 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key'
            cand --tls-key 'Private key (PEM) of --tls-cert'
            cand -y 'Do not ask for confirmation (required when stdin is not a terminal)'
            cand --yes 'Do not ask for confirmation (required when stdin is not a terminal)'
            cand -v 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
            cand --verbose 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
            cand -q 'Print nothing but errors that explain a failing exit of distlock''s own'
            cand --quiet 'Print nothing but errors that explain a failing exit of distlock''s own'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'distlock;acquire'= {
            cand -k 'Name of the lock'
            cand --key 'Name of the lock'
            cand -t 'Lifetime of the lock in Redis without renewal (from 1s to 24h)'
            cand --ttl 'Lifetime of the lock in Redis without renewal (from 1s to 24h)'
            cand -w 'Wait at most this long for the lock (default: wait forever)'
            cand --wait 'Wait at most this long for the lock (default: wait forever)'
            cand -E 'Exit code when the lock was not acquired (busy), e.g. `-n -E 0` to skip quietly'
            cand --conflict-exit-code 'Exit code when the lock was not acquired (busy), e.g. `-n -E 0` to skip quietly'
            cand --wait-mode 'How to wait for a busy lock'
            cand --note 'A reason, stored with the lock and shown to whoever waits for it or asks about it'
            cand --report-every 'Without a terminal, print a "still waiting" line this often while waiting'
            cand --redis 'Redis server URL: redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss://... or unix:///PATH'
            cand --prefix 'Prefix of every Redis key distlock writes'
            cand --redis-timeout 'Timeout for connecting to Redis and for each command'
            cand --tls-ca 'CA certificate bundle (PEM) to trust for rediss:// instead of the system''s roots'
            cand --tls-cert 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key'
            cand --tls-key 'Private key (PEM) of --tls-cert'
            cand -n 'Try once; do not wait if the lock is busy (wins over --wait and DISTLOCK_WAIT)'
            cand --no-wait 'Try once; do not wait if the lock is busy (wins over --wait and DISTLOCK_WAIT)'
            cand -v 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
            cand --verbose 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
            cand -q 'Print nothing but errors that explain a failing exit of distlock''s own'
            cand --quiet 'Print nothing but errors that explain a failing exit of distlock''s own'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'distlock;renew'= {
            cand -k 'Name of the lock'
            cand --key 'Name of the lock'
            cand --token 'The token printed by distlock acquire'
            cand -t 'New lifetime from now (default: the TTL the lock was acquired with)'
            cand --ttl 'New lifetime from now (default: the TTL the lock was acquired with)'
            cand --redis 'Redis server URL: redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss://... or unix:///PATH'
            cand --prefix 'Prefix of every Redis key distlock writes'
            cand --redis-timeout 'Timeout for connecting to Redis and for each command'
            cand --tls-ca 'CA certificate bundle (PEM) to trust for rediss:// instead of the system''s roots'
            cand --tls-cert 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key'
            cand --tls-key 'Private key (PEM) of --tls-cert'
            cand -v 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
            cand --verbose 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
            cand -q 'Print nothing but errors that explain a failing exit of distlock''s own'
            cand --quiet 'Print nothing but errors that explain a failing exit of distlock''s own'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'distlock;release'= {
            cand -k 'Name of the lock'
            cand --key 'Name of the lock'
            cand --token 'The token printed by distlock acquire'
            cand --redis 'Redis server URL: redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss://... or unix:///PATH'
            cand --prefix 'Prefix of every Redis key distlock writes'
            cand --redis-timeout 'Timeout for connecting to Redis and for each command'
            cand --tls-ca 'CA certificate bundle (PEM) to trust for rediss:// instead of the system''s roots'
            cand --tls-cert 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key'
            cand --tls-key 'Private key (PEM) of --tls-cert'
            cand -v 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
            cand --verbose 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
            cand -q 'Print nothing but errors that explain a failing exit of distlock''s own'
            cand --quiet 'Print nothing but errors that explain a failing exit of distlock''s own'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'distlock;generate'= {
            cand --out 'Directory that holds completions/ and man/ (default: the current one)'
            cand --redis 'Redis server URL: redis://[USER:PASSWORD@]HOST[:PORT][/DB], rediss://... or unix:///PATH'
            cand --prefix 'Prefix of every Redis key distlock writes'
            cand --redis-timeout 'Timeout for connecting to Redis and for each command'
            cand --tls-ca 'CA certificate bundle (PEM) to trust for rediss:// instead of the system''s roots'
            cand --tls-cert 'Client certificate (PEM) for rediss:// servers that require mutual TLS; needs --tls-key'
            cand --tls-key 'Private key (PEM) of --tls-cert'
            cand -v 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
            cand --verbose 'Explain each step on stderr (connection, acquire, renewals, release). Wins over -q'
            cand -q 'Print nothing but errors that explain a failing exit of distlock''s own'
            cand --quiet 'Print nothing but errors that explain a failing exit of distlock''s own'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'distlock;help'= {
            cand run 'Run a command while holding a lock'
            cand status 'Show whether a lock is held, by whom, since when, and until when'
            cand list 'List the locks under the prefix, with holder, age and time left'
            cand break 'Delete a lock whoever holds it, after showing who does'
            cand acquire 'Acquire a lock and print its token, for locks that span several CI steps or scripts'
            cand renew 'Extend a lock acquired with distlock acquire'
            cand release 'Release a lock acquired with distlock acquire'
            cand generate 'Write the shell completions or the man pages (for packagers)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'distlock;help;run'= {
        }
        &'distlock;help;status'= {
        }
        &'distlock;help;list'= {
        }
        &'distlock;help;break'= {
        }
        &'distlock;help;acquire'= {
        }
        &'distlock;help;renew'= {
        }
        &'distlock;help;release'= {
        }
        &'distlock;help;generate'= {
        }
        &'distlock;help;help'= {
        }
    ]
    $completions[$command]
}

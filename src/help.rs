//! Text shared by `--help` and the man pages: exit codes (from [`crate::exit`]) and examples.
//! One source, so that the two can never disagree.

use crate::exit::{self, Row};

/// An example: what it does, and the command line.
pub struct Example {
    /// One line saying what it does.
    pub what: &'static str,
    /// The command line.
    pub command: &'static str,
}

/// The examples of a subcommand (by name); `""` is the top-level page.
pub fn examples(command: &str) -> &'static [Example] {
    match command {
        "" | "run" => &[
            Example {
                what: "Deploy, never twice at once; wait for a running deploy to finish",
                command: "distlock run --key deploy-prod --ttl 30s -- ./deploy.sh v42",
            },
            Example {
                what: "A cron job that skips quietly when another run is active",
                command: "distlock run -k nightly-report -n -E 0 -- /opt/report/run.sh",
            },
            Example {
                what: "Wait at most 10 minutes, and say why the lock is taken",
                command: "distlock run -k backup --wait 10m --note 'weekly backup' -- pg_dump -f /backup/db.sql mydb",
            },
            Example {
                what: "Two keys at once, in any order, without deadlock (both or neither)",
                command: "distlock run -k test-db -k deploy-staging --wait 30m -- ./deploy-and-test.sh",
            },
        ],
        "status" => &[
            Example {
                what: "Who holds the lock, since when, until when",
                command: "distlock status --key deploy-prod",
            },
            Example {
                what: "Branch on it in a script",
                command: "if distlock status -q -k deploy-prod; then echo 'a deploy is running'; fi",
            },
            Example {
                what: "Machine-readable",
                command: "distlock status -k deploy-prod --json | jq -r .holder.host",
            },
            Example {
                what: "Who waits, first in line first",
                command: "distlock status -k deploy-prod --json | jq -r '.waiting[] | \"\\(.position) \\(.holder.host) \\(.holder.note)\"'",
            },
            Example {
                what: "The ids of a semaphore's holders (for break --holder)",
                command: "distlock status -k build-pool --json | jq -r '.holders[].id'",
            },
        ],
        "log" => &[
            Example {
                what: "Keep a week of history for a lock, then read the last two hours of it",
                command: "distlock --history 7d run -k deploy-prod -- ./deploy.sh && distlock log -k deploy-prod --since 2h",
            },
            Example {
                what: "Every lock's events as they happen",
                command: "distlock log --follow",
            },
            Example {
                what: "Who broke a lock, as JSON",
                command: "distlock log -k deploy-prod --json | jq -r 'select(.event == \"broken\") | \"\\(.ts) \\(.by_host) \\(.by_user)\"'",
            },
            Example {
                what: "Turn a lock's history off (delete it)",
                command: "distlock log -k deploy-prod --clear",
            },
        ],
        "stats" => &[
            Example {
                what: "How long holders waited and held the lock this week",
                command: "distlock stats -k deploy-prod --since 7d",
            },
            Example {
                what: "The p95 wait of every lock, as JSON",
                command: "distlock stats --json | jq -r '\"\\(.key) \\(.wait_ms.p95)\"'",
            },
            Example {
                what: "Who held and waited for it today, as a chart (one lane per host)",
                command: "distlock stats -k deploy-prod --since 24h --timeline",
            },
        ],
        "check" => &[
            Example {
                what: "A Nagios/Icinga check: warn after 30 minutes held, critical after an hour",
                command: "distlock check -k deploy-prod -w 30m -c 1h --warn-wait 10m",
            },
            Example {
                what: "Critical when the nightly job has not succeeded for 26 hours (needs --history)",
                command: "distlock check -k nightly-report --crit-since-success 26h",
            },
        ],
        "metrics" => &[
            Example {
                what: "For node_exporter's textfile collector (every minute, from a timer)",
                command: "distlock metrics -o /var/lib/prometheus/node-exporter/distlock.prom",
            },
            Example {
                what: "To a Pushgateway",
                command: "distlock metrics --label redis=prod | curl -fsS --data-binary @- http://pushgateway:9091/metrics/job/distlock",
            },
        ],
        "list" => &[
            Example {
                what: "Every lock under the prefix",
                command: "distlock list",
            },
            Example {
                what: "Only some, as JSON",
                command: "distlock list 'deploy-*' --json",
            },
            Example {
                what: "The locks that someone waits for",
                command: "distlock list --json | jq -r '.[] | select(.waiting != []) | .key'",
            },
        ],
        "break" => &[
            Example {
                what: "Show the holder and ask before breaking",
                command: "distlock break --key deploy-prod",
            },
            Example {
                what: "In a script (no terminal to ask on)",
                command: "distlock break --key deploy-prod --yes",
            },
            Example {
                what: "Break one holder of a semaphore, by the id distlock status shows",
                command: "distlock break --key build-pool --holder 3f2a9c1e",
            },
        ],
        "acquire" => &[
            Example {
                what: "Hold a lock across the steps of a GitHub Actions job (the step fails unless acquired)",
                command: "distlock acquire -k release-train --ttl 30m --env-file \"$GITHUB_ENV\"",
            },
            Example {
                what: "In a script: keep the token, and stop unless acquired",
                command: "TOKEN=$(distlock acquire -k release-train --ttl 30m --note \"release $VERSION\") || exit",
            },
        ],
        "renew" => &[
            Example {
                what: "Extend it by 30 minutes from now, in a later step (DISTLOCK_KEY and DISTLOCK_TOKEN set)",
                command: "distlock renew --ttl 30m",
            },
            Example {
                what: "The same in a script",
                command: "distlock renew -k release-train --token \"$TOKEN\" --ttl 30m",
            },
        ],
        "release" => &[
            Example {
                what: "Release it in the job's last step (DISTLOCK_KEY and DISTLOCK_TOKEN set)",
                command: "distlock release",
            },
            Example {
                what: "The same in a script",
                command: "distlock release -k release-train --token \"$TOKEN\"",
            },
        ],
        _ => &[],
    }
}

/// The text after a subcommand's `--help` (`""`: the top level's): its exit codes and examples.
/// The top level lists the codes of `run`, the main job, and says where the others are.
pub fn after_help(command: &str) -> String {
    let mut text = String::new();
    let (heading, table) = if command.is_empty() {
        (
            "Exit status of distlock run (other commands: see 'distlock COMMAND --help'):\n",
            exit::RUN_TABLE,
        )
    } else {
        ("Exit status:\n", exit::table(command))
    };
    if !table.is_empty() {
        text.push_str(heading);
        text.push_str(&table_text(table));
    }
    let examples = examples(command);
    if !examples.is_empty() {
        text.push_str("\nExamples:\n");
        for example in examples {
            text.push_str(&format!("  # {}\n  {}\n", example.what, example.command));
        }
    }
    text
}

/// A table as plain text, wrapped with a hanging indent.
pub fn table_text(rows: &[Row]) -> String {
    const WIDTH: usize = 96;
    const INDENT: usize = 16;
    let mut text = String::new();
    for row in rows {
        let mut line = format!("  {:<13} ", row.code);
        for word in row.meaning.split_whitespace() {
            if line.len() + word.len() + 1 > WIDTH && line.trim().len() > row.code.len() {
                text.push_str(line.trim_end());
                text.push('\n');
                line = " ".repeat(INDENT);
            }
            line.push_str(word);
            line.push(' ');
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_help_lists_every_code() {
        let text = after_help("run");
        for code in ["64", "65", "69", "70", "75", "124", "126", "127", "128+N"] {
            assert!(
                text.contains(&format!("  {code} ")),
                "{code} missing from\n{text}"
            );
        }
        assert!(text.lines().all(|l| l.len() <= 100), "{text}");
    }

    #[test]
    fn top_level_help_lists_the_codes_of_run_and_points_to_the_others() {
        let text = after_help("");
        for row in exit::RUN_TABLE {
            assert!(text.contains(&format!("  {} ", row.code)), "{}", row.code);
        }
        assert!(text.contains("distlock COMMAND --help"), "{text}");
        assert!(text.lines().all(|l| l.len() <= 100), "{text}");
    }

    #[test]
    fn no_example_loses_the_exit_status_of_acquire() {
        // `export T=$(distlock acquire ...)` and `echo "T=$(...)" >> FILE` exit 0 when acquire
        // fails, and the job goes on without the lock.
        for command in ["", "run", "acquire", "renew", "release"] {
            for example in examples(command) {
                if example.command.contains("$(distlock acquire") {
                    assert!(
                        example.command.starts_with("TOKEN=$(")
                            && example.command.ends_with(") || exit"),
                        "{}",
                        example.command
                    );
                }
            }
        }
    }

    #[test]
    fn every_documented_command_has_examples() {
        for command in [
            "run", "status", "list", "break", "acquire", "renew", "release", "log", "stats",
            "check", "metrics",
        ] {
            assert!(!examples(command).is_empty(), "{command}");
            assert!(!exit::table(command).is_empty(), "{command}");
        }
    }
}

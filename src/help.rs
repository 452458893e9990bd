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
        ],
        "acquire" => &[Example {
            what: "Hold a lock across several CI steps",
            command: "TOKEN=$(distlock acquire -k release-train --ttl 30m --note \"release $VERSION\")",
        }],
        "renew" => &[Example {
            what: "Extend it by another 30 minutes from now",
            command: "distlock renew -k release-train --token \"$TOKEN\" --ttl 30m",
        }],
        "release" => &[Example {
            what: "Release it (the token may also come from DISTLOCK_TOKEN)",
            command: "distlock release -k release-train --token \"$TOKEN\"",
        }],
        _ => &[],
    }
}

/// The text after a subcommand's `--help`: its exit codes and examples.
pub fn after_help(command: &str) -> String {
    let mut text = String::new();
    let table = exit::table(command);
    if !table.is_empty() {
        text.push_str("Exit status:\n");
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
    fn every_documented_command_has_examples() {
        for command in [
            "run", "status", "list", "break", "acquire", "renew", "release",
        ] {
            assert!(!examples(command).is_empty(), "{command}");
            assert!(!exit::table(command).is_empty(), "{command}");
        }
    }
}

//! The shell completions and man pages, generated from the one clap definition (with the exit
//! codes and examples of [`crate::help`]) by `cargo run --example generate` (for packagers and
//! after a change to the command line). The committed copies in `completions/` and `man/` are
//! checked against this by a test (below). Not a subcommand of the shipped binary: clap_complete
//! and clap_mangen would be about 100 KB of it (2%), for files every package already carries.

use std::path::{Path, PathBuf};

use clap_complete::Shell;
use clap_mangen::Man;
use clap_mangen::roff::{Roff, bold, italic, roman};

use crate::cli::{self, Generated};
use crate::exit;

/// The command that regenerates the committed files (named by the stale-file test).
pub const REGENERATE: &str = "cargo run -q --example generate";

/// Write completions and/or man pages under `root`; returns the files written.
pub fn write_all(what: Option<Generated>, root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    if what.is_none_or(|w| w == Generated::Completions) {
        let dir = root.join("completions");
        std::fs::create_dir_all(&dir)?;
        written.extend(completions(&dir)?);
    }
    if what.is_none_or(|w| w == Generated::Man) {
        let dir = root.join("man");
        std::fs::create_dir_all(&dir)?;
        written.extend(man_pages(&dir)?);
    }
    Ok(written)
}

/// bash, zsh, fish, elvish and PowerShell completions.
pub fn completions(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for shell in [
        Shell::Bash,
        Shell::Zsh,
        Shell::Fish,
        Shell::Elvish,
        Shell::PowerShell,
    ] {
        let mut command = cli::documented_command();
        written.push(clap_complete::generate_to(
            shell,
            &mut command,
            "distlock",
            dir,
        )?);
    }
    Ok(written)
}

/// `distlock.1` and `distlock-SUBCOMMAND.1` for each visible subcommand.
pub fn man_pages(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut root = cli::documented_command().disable_help_subcommand(true);
    root.build();
    let mut written = Vec::new();
    let mut pages: Vec<(clap::Command, String)> = vec![(root.clone(), String::new())];
    for sub in root.get_subcommands().filter(|s| !s.is_hide_set()) {
        pages.push((sub.clone(), sub.get_name().to_owned()));
    }
    for (command, name) in pages {
        // The plain version: the committed pages must not change with every commit.
        let command = command.version(env!("CARGO_PKG_VERSION"));
        let man = Man::new(command.clone()).manual("distlock manual");
        let path = dir.join(man.get_filename());
        let mut page = Vec::new();
        man.render_title(&mut page)?;
        man.render_name_section(&mut page)?;
        man.render_synopsis_section(&mut page)?;
        man.render_description_section(&mut page)?;
        if command.get_arguments().any(|a| !a.is_hide_set()) {
            man.render_options_section(&mut page)?;
        }
        if command.has_subcommands() {
            man.render_subcommands_section(&mut page)?;
        }
        extra_sections(&command, &name).to_writer(&mut page)?;
        man.render_version_section(&mut page)?;
        std::fs::write(&path, page)?;
        written.push(path);
    }
    Ok(written)
}

/// EXIT STATUS, ENVIRONMENT, EXAMPLES and SEE ALSO, from the same sources as `--help`.
fn extra_sections(command: &clap::Command, name: &str) -> Roff {
    let mut roff = Roff::default();
    let table = exit::table(name);
    if !table.is_empty() {
        roff.control("SH", ["EXIT STATUS"]);
        for row in table {
            roff.control("TP", []);
            roff.text([bold(row.code)]);
            roff.text([roman(row.meaning)]);
        }
    } else if name.is_empty() {
        // The top-level page: the codes of run, the main job, and where the others are.
        roff.control("SH", ["EXIT STATUS"]);
        roff.text([roman("The exit status of distlock run:")]);
        for row in exit::RUN_TABLE {
            roff.control("TP", []);
            roff.text([bold(row.code)]);
            roff.text([roman(row.meaning)]);
        }
        let others: Vec<String> = command
            .get_subcommands()
            .filter(|s| !s.is_hide_set() && s.get_name() != "run")
            .map(|s| format!("distlock-{}(1)", s.get_name()))
            .collect();
        roff.control("PP", []);
        roff.text([roman(format!(
            "The other commands document their exit codes in their own pages: {}.",
            others.join(", ")
        ))]);
    }
    let mut env: Vec<(String, String)> = command
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| {
            let var = a.get_env()?.to_string_lossy().into_owned();
            let flag = a.get_long().map(|l| format!("--{l}")).unwrap_or_default();
            let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
            Some((var, format!("Same as {flag}: {help}")))
        })
        .collect();
    if command
        .get_arguments()
        .any(|a| a.get_long() == Some("redis"))
    {
        env.push((
            "REDIS_URL".into(),
            "Used as the Redis URL when neither --redis nor DISTLOCK_REDIS_URL is set.".into(),
        ));
    }
    if name == "run" {
        env.push((
            "DISTLOCK_KEY, DISTLOCK_TOKEN, DISTLOCK_FENCE, DISTLOCK_TTL_MS, DISTLOCK_MODE, \
             DISTLOCK_SLOT"
                .into(),
            "Set by distlock in the environment of COMMAND: the key as given, this holder's token, \
             its fencing token, the TTL in milliseconds, shared (--shared) or exclusive, and with \
             --limit N the slot it holds (0 to N-1; no two holders at once have the same)."
                .into(),
        ));
        env.push((
            "DISTLOCK_KEYS, DISTLOCK_KEY<i>, DISTLOCK_FENCE<i>, DISTLOCK_TOKEN<i>, DISTLOCK_MODE<i>"
                .into(),
            "Set by distlock in the environment of COMMAND, for every run: the keys as typed \
             (space-separated) and, per key i from 0 in that order, the key, its fencing token, \
             its token and its mode (shared with --shared or --shared-key KEY, exclusive \
             otherwise). A run of several keys gets no DISTLOCK_KEY, DISTLOCK_TOKEN or \
             DISTLOCK_FENCE."
                .into(),
        ));
    }
    if !env.is_empty() {
        roff.control("SH", ["ENVIRONMENT"]);
        for (var, text) in env {
            roff.control("TP", []);
            roff.text([bold(var)]);
            roff.text([roman(text)]);
        }
    }
    let examples = crate::help::examples(name);
    if !examples.is_empty() {
        roff.control("SH", ["EXAMPLES"]);
        for example in examples {
            roff.control("TP", []);
            roff.text([roman(example.what)]);
            roff.control("EX", []);
            roff.text([roman(example.command)]);
            roff.control("EE", []);
        }
    }
    roff.control("SH", ["SEE ALSO"]);
    let mut see: Vec<String> = [
        "distlock",
        "distlock-run",
        "distlock-status",
        "distlock-list",
        "distlock-break",
        "distlock-acquire",
        "distlock-renew",
        "distlock-release",
    ]
    .iter()
    .filter(|p| {
        let this = if name.is_empty() {
            "distlock".to_owned()
        } else {
            format!("distlock-{name}")
        };
        **p != this
    })
    .map(|p| format!("{p}(1)"))
    .collect();
    see.push("flock(1)".into());
    see.push("redis-server(1)".into());
    roff.text([italic(see.join(", "))]);
    roff
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// Files under `completions/` and `man/` that differ between `committed` and `fresh`
    /// (missing, extra or changed), as paths relative to the root.
    fn stale(committed: &Path, fresh: &Path) -> Vec<String> {
        let mut names = std::collections::BTreeSet::new();
        for root in [committed, fresh] {
            for dir in ["completions", "man"] {
                if let Ok(entries) = std::fs::read_dir(root.join(dir)) {
                    for entry in entries.flatten() {
                        names.insert(format!("{dir}/{}", entry.file_name().to_string_lossy()));
                    }
                }
            }
        }
        names
            .into_iter()
            .filter(|name| {
                std::fs::read(committed.join(name)).ok() != std::fs::read(fresh.join(name)).ok()
            })
            .collect()
    }

    fn generated() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        write_all(None, dir.path()).unwrap();
        dir
    }

    #[test]
    fn committed_completions_and_man_pages_are_current() {
        let fresh = generated();
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        let stale = stale(repo, fresh.path());
        assert!(
            stale.is_empty(),
            "generated files are stale: {}; regenerate them with `{REGENERATE}` and commit them",
            stale.join(", ")
        );
        for shell in [
            "distlock.bash",
            "_distlock",
            "distlock.fish",
            "distlock.elv",
            "_distlock.ps1",
        ] {
            assert!(repo.join("completions").join(shell).exists(), "{shell}");
        }
        for page in [
            "distlock",
            "distlock-run",
            "distlock-status",
            "distlock-list",
            "distlock-break",
            "distlock-acquire",
            "distlock-renew",
            "distlock-release",
        ] {
            assert!(
                repo.join("man").join(format!("{page}.1")).exists(),
                "{page}"
            );
        }
    }

    #[test]
    fn a_stale_file_is_caught() {
        let fresh = generated();
        let committed = generated();
        assert!(stale(committed.path(), fresh.path()).is_empty());
        let page = committed.path().join("man/distlock-run.1");
        let text = std::fs::read_to_string(&page)
            .unwrap()
            .replace("124", "123");
        std::fs::write(&page, text).unwrap();
        std::fs::remove_file(committed.path().join("completions/_distlock")).unwrap();
        std::fs::write(committed.path().join("man/distlock-old.1"), "gone\n").unwrap();
        assert_eq!(
            stale(committed.path(), fresh.path()),
            [
                "completions/_distlock",
                "man/distlock-old.1",
                "man/distlock-run.1"
            ]
        );
    }
}

//! The committed completions and man pages (generated from the clap definition by `cargo run
//! --example generate`; `src/commands/generate.rs` tests that they are current): they render,
//! they document every exit code, and the version names its commit.

use std::path::Path;

use crate::fixtures::*;

#[test]
fn man_pages_render_cleanly_and_have_the_sections() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    for entry in std::fs::read_dir(repo.join("man")).unwrap().flatten() {
        let path = entry.path();
        let text = std::fs::read_to_string(&path).unwrap();
        for section in [
            "NAME",
            "SYNOPSIS",
            "DESCRIPTION",
            "ENVIRONMENT",
            "EXAMPLES",
            "EXIT STATUS",
        ] {
            assert!(
                text.contains(&format!(".SH \"{section}\""))
                    || text.contains(&format!(".SH {section}")),
                "{}: no {section}",
                path.display()
            );
        }
        // groff -ww warns about anything malformed; it is part of man-db's dependencies.
        let out = std::process::Command::new("groff")
            .args(["-man", "-ww", "-z"])
            .arg(&path)
            .output()
            .expect("groff (apt-get install groff-base) to check the man pages");
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `man distlock` is where most people look first: it lists the codes of run (the main job) and
/// names the page of every other command for theirs.
#[test]
fn top_level_man_page_lists_the_exit_codes_of_run() {
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("man/distlock.1"))
            .unwrap();
    let start = page
        .find(".SH \"EXIT STATUS\"")
        .expect("an EXIT STATUS section");
    let end = page[start + 1..]
        .find(".SH ")
        .map_or(page.len(), |e| start + 1 + e);
    let section = &page[start..end];
    for row in distlock::exit::RUN_TABLE {
        if row.code != "child's code" {
            assert!(
                section.contains(&format!("\\fB{}\\fR", row.code)),
                "{}: {section}",
                row.code
            );
        }
    }
    for command in ["status", "list", "break", "acquire", "renew", "release"] {
        assert!(
            section.contains(&format!("distlock\\-{command}(1)")),
            "{command}: {section}"
        );
    }
}

#[test]
fn the_guide_documents_every_exit_code() {
    let guide =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/guide.md"))
            .unwrap();
    let start = guide
        .find("\n## Exit codes\n")
        .expect("an exit-code section")
        + 1;
    let section = &guide[start
        ..guide[start + 3..]
            .find("\n## ")
            .map_or(guide.len(), |e| start + 3 + e)];
    let words: std::collections::HashSet<&str> = section
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '+'))
        .collect();
    for command in [
        "run", "acquire", "status", "list", "break", "renew", "release", "check",
    ] {
        for row in distlock::exit::table(command) {
            if row.code == "child's code" {
                assert!(section.contains("the command's code"));
                continue;
            }
            assert!(
                words.contains(row.code),
                "docs/guide.md's exit codes lack {} of {command}",
                row.code
            );
        }
    }
}

/// `distlock --version` (and `-V`) names the commit and its date when distlock was built from a
/// git checkout of this repository, and only the version otherwise (a crate tarball); the man
/// pages and the holder metadata stored in Redis keep the plain version.
#[test]
fn version_names_the_commit_of_a_checkout_and_metadata_keeps_the_plain_version() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8(out.stdout).unwrap().trim().to_owned())
    };
    let plain = env!("CARGO_PKG_VERSION");
    let checkout = git(&["rev-parse", "--show-toplevel"]).is_some_and(|top| {
        std::fs::canonicalize(top).unwrap() == std::fs::canonicalize(root).unwrap()
    });
    let expected = if checkout {
        format!(
            "distlock {plain} ({})\n",
            git(&["log", "-1", "--format=%h %cs"]).unwrap()
        )
    } else {
        format!("distlock {plain}\n")
    };
    for flag in ["--version", "-V"] {
        let out = run(bare_distlock().arg(flag));
        assert_eq!(String::from_utf8(out.stdout).unwrap(), expected, "{flag}");
    }
    let page = std::fs::read_to_string(root.join("man/distlock.1")).unwrap();
    assert!(
        page.contains(&format!("\"distlock {plain}\"")),
        "the man page's title"
    );

    let redis = Redis::start();
    let out = run(distlock(&redis).args(["acquire", "-k", "v", "--ttl", "1m"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(distlock(&redis).args(["status", "-k", "v", "--json"]));
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["holder"]["version"], plain, "{status}");
}

//! Build script: the git commit and date that `distlock --version` names when distlock is built
//! from a git checkout of its own repository (nothing is added for a build from a crate
//! tarball, whatever directory it is unpacked in). The holder metadata stored in Redis keeps
//! the plain version (`CARGO_PKG_VERSION`).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let info = match checkout(&dir) {
        Some((commit, date)) => format!(" ({commit} {date})"),
        None => {
            // Not a checkout: watch a path that does not exist, so that cargo runs this again at
            // every build. `cargo package` verifies the crate in the workspace's target
            // directory, where its build-script output takes the checkout's place (same unit
            // hash); without this, the checkout's next build would keep that plain version.
            println!("cargo:rerun-if-changed={}", dir.join(".git").display());
            String::new()
        }
    };
    println!("cargo:rustc-env=DISTLOCK_BUILD_INFO={info}");
}

/// The short commit and its date (`YYYY-MM-DD`, the committer's), when `dir` is the top of a
/// git work tree; also asks cargo to run this again when the checked-out commit changes.
fn checkout(dir: &Path) -> Option<(String, String)> {
    let top = git(dir, &["rev-parse", "--show-toplevel"])?;
    if std::fs::canonicalize(&top).ok()? != std::fs::canonicalize(dir).ok()? {
        return None;
    }
    // HEAD, the branch it names, and the packed refs: a new commit or checkout touches one.
    let mut watched = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        if let Some(path) = git(dir, &["rev-parse", "--git-path", &name]) {
            let path = dir.join(path);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
    let line = git(dir, &["log", "-1", "--format=%h %cs"])?;
    let (commit, date) = line.split_once(' ')?;
    Some((commit.to_owned(), date.to_owned()))
}

/// `git ARGS` in `dir`: its first line of output, if it succeeded.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let line = text.lines().next()?.trim();
    (out.status.success() && !line.is_empty()).then(|| line.to_owned())
}

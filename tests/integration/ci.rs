//! Locks across CI steps: `acquire --env-file` writes the lock's values only once it holds the
//! lock, and a later step that loads them can renew and release it; and the CI recipes of the
//! documentation (docs/guide.md, and the one the README shows), run line for line as GitHub Actions and GitLab CI run them, stop the job when the
//! lock is not acquired (busy, Redis unreachable, distlock interrupted while waiting).

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::fixtures::*;

/// Run `script` with `sh -ec` in `dir`, with distlock on the PATH and pointed at `redis`.
fn sh(redis: &Redis, dir: &Scratch, script: &str) -> Output {
    let mut cmd = Command::new("sh");
    cmd.args(["-ec", script]);
    in_a_job(&mut cmd, &redis.url(), dir.0.path());
    run(&mut cmd)
}

/// What a CI job's shell gets: none of the test's own distlock variables, the binary first on
/// the PATH, Redis at `url`, `dir` as the working directory.
fn in_a_job(cmd: &mut Command, url: &str, dir: &Path) {
    for (key, _) in std::env::vars() {
        if key.starts_with("DISTLOCK_") || key == "REDIS_URL" {
            cmd.env_remove(key);
        }
    }
    cmd.env("PATH", path_with_distlock())
        .env("DISTLOCK_REDIS_URL", url)
        .current_dir(dir)
        .stdin(Stdio::null());
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn env_file_gets_the_values_once_the_lock_is_held() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let file = dir.path("lock.env");
    std::fs::write(&file, "EARLIER=1\n").unwrap();
    let out = run(distlock(&redis)
        .args(["acquire", "-k", "train", "--ttl", "20s", "--env-file"])
        .arg(&file));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stdout.is_empty(), "nothing on stdout: {}", stdout(&out));
    let token = redis.get(&lock_key("train")).unwrap();
    let fence: String = redis.cmd(&["HGET", &format!("{}:owner", lock_key("train")), "fence"]);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        format!(
            "EARLIER=1\nDISTLOCK_KEY=train\nDISTLOCK_TTL_MS=20000\nDISTLOCK_FENCE={fence}\nDISTLOCK_TOKEN={token}\n"
        )
    );
    assert!(
        !stderr(&out).contains(&token),
        "the token stays out of logs"
    );

    // A later step that loads the file needs neither --key nor --token.
    let out = sh(
        &redis,
        &dir,
        "set -a; . ./lock.env; set +a; distlock renew --ttl 30s; distlock release",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!redis.exists(&lock_key("train")));
}

#[test]
fn env_file_is_untouched_when_the_lock_is_not_acquired() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let held = run(distlock(&redis).args(["acquire", "-k", "busy", "--ttl", "60s"]));
    assert_eq!(held.status.code(), Some(0), "{}", stderr(&held));
    let file = dir.path("lock.env");
    std::fs::write(&file, "EARLIER=1\n").unwrap();
    let before = std::fs::metadata(&file).unwrap().modified().unwrap();

    let out = run(distlock(&redis)
        .args(["acquire", "-k", "busy", "--wait", "200ms", "--env-file"])
        .arg(&file));
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let out = run(bare_distlock()
        .env("DISTLOCK_REDIS_URL", "redis://127.0.0.1:1")
        .args(["acquire", "-k", "other", "--env-file"])
        .arg(&file));
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "EARLIER=1\n");
    assert_eq!(
        std::fs::metadata(&file).unwrap().modified().unwrap(),
        before
    );
    // A file that does not exist yet is not created either.
    let out = run(distlock(&redis)
        .args(["acquire", "-k", "busy", "-n", "--env-file"])
        .arg(dir.path("new.env")));
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    assert!(!dir.path("new.env").exists());
    assert!(out.stdout.is_empty());
}

#[test]
fn env_file_names_a_prefix_that_is_not_the_default() {
    let redis = Redis::start();
    let dir = Scratch::new();
    let out = run(distlock(&redis)
        .args(["--prefix", "ci:", "acquire", "-k", "train", "--env-file"])
        .arg(dir.path("lock.env")));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = std::fs::read_to_string(dir.path("lock.env")).unwrap();
    assert!(text.contains("\nDISTLOCK_PREFIX=ci:\n"), "{text}");
    assert!(!text.contains("redis://"), "never the Redis URL: {text}");
    let out = sh(
        &redis,
        &dir,
        "set -a; . ./lock.env; set +a; distlock release",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!redis.exists("ci:{train}"));
}

#[test]
fn a_token_that_cannot_be_handed_over_is_released() {
    let redis = Redis::start();
    // Writing fails after the lock was taken: it must not stay behind.
    let out = run(distlock(&redis).args(["acquire", "-k", "full", "--env-file", "/dev/full"]));
    assert_eq!(out.status.code(), Some(74), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("cannot write to --env-file \"/dev/full\"")
            && err.contains("lock \"full\" was released"),
        "{err}"
    );
    assert!(!redis.exists(&lock_key("full")));
    assert!(out.stdout.is_empty());

    // The token on a stdout that is closed (`>&-`), on a full disk, or on a pipe nobody reads.
    let (read_end, write_end) = nix::unistd::pipe().unwrap();
    drop(read_end);
    type Opener = Box<dyn Fn() -> Stdio>;
    let stdouts: [(&str, Opener, &str); 3] = [
        ("closed", Box::new(Stdio::null), "stdout is closed"),
        (
            "full",
            Box::new(|| Stdio::from(std::fs::File::create("/dev/full").unwrap())),
            "No space left on device",
        ),
        (
            "broken",
            Box::new(move || Stdio::from(write_end.try_clone().unwrap())),
            "Broken pipe",
        ),
    ];
    for (how, stdout, said) in stdouts {
        let key = format!("stdout-{how}");
        let mut cmd = distlock(&redis);
        cmd.args(["acquire", "-k", &key]).stdout(stdout());
        if how == "closed" {
            // SAFETY: close(2) between fork and exec, on the child's own descriptor table.
            unsafe {
                cmd.pre_exec(|| {
                    libc::close(1);
                    Ok(())
                });
            }
        }
        let out = cmd.stderr(Stdio::piped()).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(74), "{how}: {err}");
        assert!(
            err.contains("cannot print the token")
                && err.contains(said)
                && err.contains(&format!("lock \"{key}\" was released")),
            "{how}: {err}"
        );
        assert!(!redis.exists(&lock_key(&key)), "{how}: the lock stayed");
    }
    // A token thrown away on purpose (`>/dev/null`) is the user's choice.
    let out = distlock(&redis)
        .args(["acquire", "-k", "devnull", "--ttl", "5s"])
        .stdout(Stdio::from(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/null")
                .unwrap(),
        ))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(redis.exists(&lock_key("devnull")));

    // What can be known before waiting is refused before waiting, and nothing is acquired.
    let dir = Scratch::new();
    let out = run(distlock(&redis)
        .args(["acquire", "-k", "typo", "--env-file"])
        .arg(dir.path("no-such-dir/lock.env")));
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("nothing was acquired"),
        "{}",
        stderr(&out)
    );
    let out = run(distlock(&redis).args(["acquire", "-k", "a$(reboot)", "--env-file", "x.env"]));
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(stderr(&out).contains("--env-file"), "{}", stderr(&out));
    // Refused before the first attempt: Redis never heard of these locks.
    let keys: Vec<String> = redis.cmd(&["KEYS", "*"]);
    assert!(
        !keys
            .iter()
            .any(|k| k.contains("{typo}") || k.contains("reboot")),
        "{keys:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// The documentation's CI recipes. These constants are its YAML blocks, verbatim (a test checks
// that the guide shows exactly them, and that every YAML block of the README and docs/ is one
// of them): the lines run below are the lines users copy.

const GITHUB_ONE_STEP: &str = r#"```yaml
- name: migrate
  env:
    DISTLOCK_REDIS_URL: ${{ secrets.LOCK_REDIS_URL }}
  run: distlock run --key "migrate-${{ github.repository }}" --wait 15m -- ./migrate.sh
```
"#;

const GITHUB_STEPS: &str = r#"```yaml
jobs:
  release:
    runs-on: ubuntu-latest
    env:
      DISTLOCK_REDIS_URL: ${{ secrets.LOCK_REDIS_URL }}
    steps:
      - name: take the release lock
        run: distlock acquire -k release-train --ttl 45m --wait 30m --note "release ${{ github.ref_name }}" --env-file "$GITHUB_ENV"
      - run: ./build.sh
      - run: ./publish.sh
      - name: release the lock
        if: always() && env.DISTLOCK_TOKEN != ''
        run: distlock release
```
"#;

const GITLAB_JOB: &str = r#"```yaml
release:
  variables:
    DISTLOCK_REDIS_URL: $LOCK_REDIS_URL
  script:
    - distlock acquire -k release-train --ttl 45m --wait 30m --note "release $CI_COMMIT_TAG" --env-file distlock.env
    - ./build.sh
    - ./publish.sh
  after_script:
    - if [ -f distlock.env ]; then set -a; . ./distlock.env; set +a; distlock release; fi
```
"#;

const GITHUB_SUPERSEDE: &str = r#"```yaml
- name: deploy
  run: distlock run -k deploy-prod --supersede -E 0 --note "deploy ${{ github.sha }}" -- ./deploy.sh
```
"#;

/// How the GitLab example loads the values back in a new shell (also how the guide says to
/// renew from a `script`).
const GITLAB_LOAD: &str = "set -a; . ./distlock.env; set +a";

/// The lock the multi-step examples take.
const KEY: &str = "release-train";

/// The pages that show CI recipes: the guide (all of them) and the README (one).
fn pages() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec!["README.md".to_owned()];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") {
            pages.push(format!("docs/{name}"));
        }
    }
    pages
        .into_iter()
        .map(|page| {
            let text = std::fs::read_to_string(root.join(&page)).unwrap();
            (page, text)
        })
        .collect()
}

/// The YAML blocks of `text`, each with its fences and a final newline, as the constants hold
/// them.
fn yaml_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match &mut current {
            None if line == "```yaml" => current = Some("```yaml\n".to_owned()),
            None => {}
            Some(block) => {
                block.push_str(line);
                block.push('\n');
                if line == "```" {
                    blocks.push(std::mem::take(block));
                    current = None;
                }
            }
        }
    }
    blocks
}

#[test]
fn the_docs_show_exactly_the_tested_ci_examples() {
    let tested = [GITHUB_ONE_STEP, GITHUB_STEPS, GITLAB_JOB, GITHUB_SUPERSEDE];
    let pages = pages();
    let guide = &pages.iter().find(|(p, _)| p == "docs/guide.md").unwrap().1;
    for block in tested {
        assert!(
            guide.contains(block),
            "docs/guide.md no longer shows this example verbatim; copy the new one into \
             tests/integration/ci.rs:\n{block}"
        );
    }
    for (page, text) in &pages {
        // (Prometheus alert rules are YAML too: metrics.rs checks them with promtool.)
        for block in yaml_blocks(text)
            .into_iter()
            .filter(|b| !b.starts_with("```yaml\ngroups:"))
        {
            assert!(
                tested.contains(&block.as_str()),
                "every CI example of the documentation is run here: {page} shows one that is \
                 not; add it to tests/integration/ci.rs:\n{block}"
            );
        }
        // `export T=$(distlock acquire ...)` and `echo "T=$(...)" >> FILE` lose acquire's status.
        for line in text.lines().filter(|l| l.contains("$(distlock acquire")) {
            assert!(
                line.contains("$(distlock acquire ...) || exit"),
                "{page}: {line}"
            );
        }
    }
    assert!(GITLAB_JOB.contains(GITLAB_LOAD) && guide.contains(&format!("`{GITLAB_LOAD}`")));
    let readme = &pages[0].1;
    assert!(
        yaml_blocks(readme).iter().any(|b| b == GITHUB_ONE_STEP),
        "the README shows the one-step GitHub Actions recipe"
    );
}

/// The one change made to the documentation's lines: a long `--wait` becomes 1s, so that a busy lock
/// fails the step in a second instead of half an hour. (Not when distlock is to be interrupted
/// while it waits: that wait must not end on its own first.)
fn short_wait(line: &str) -> String {
    let Some(at) = line.find("--wait ") else {
        return line.to_owned();
    };
    let value = at + "--wait ".len();
    let end = line[value..].find(' ').map_or(line.len(), |e| value + e);
    assert!(line[value..end].ends_with('m'), "{line}");
    format!("{}1s{}", &line[..value], &line[end..])
}

/// A YAML plain scalar, which YAML takes literally as long as it starts with no indicator and
/// holds no ": " or " #" (the examples use nothing else; anything fancier fails here).
fn plain_scalar(text: &str) -> String {
    assert!(
        !text.starts_with(['"', '\'', '|', '>', '&', '*', '!', '%', '@', '`', '{', '[']),
        "not a plain scalar: {text}"
    );
    assert!(
        !text.contains(": ") && !text.contains(" #"),
        "not a plain scalar: {text}"
    );
    text.trim_end().to_owned()
}

/// A job's working directory, with stub scripts that record that they started (first thing),
/// then do `body`.
struct Workspace {
    dir: Scratch,
    /// The runner's own files ($GITHUB_ENV), outside the checkout.
    runner: Scratch,
}

impl Workspace {
    fn new(stubs: &[(&str, &str)]) -> Workspace {
        let ws = Workspace {
            dir: Scratch::new(),
            runner: Scratch::new(),
        };
        for (name, body) in stubs {
            let path = ws.dir.path(name);
            std::fs::write(
                &path,
                format!("#!/bin/sh\nset -e\necho started > {name}.started\n{body}\n"),
            )
            .unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        ws
    }

    fn started(&self, name: &str) -> bool {
        self.dir.path(&format!("{name}.started")).exists()
    }

    fn path(&self) -> &Path {
        self.dir.0.path()
    }
}

/// How an example's `distlock` fails to get the lock.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Failure {
    /// Someone else holds it; `--wait` runs out (exit 75).
    Busy,
    /// Nothing listens at the Redis URL (exit 69).
    Unreachable,
    /// Someone else holds it, and distlock is sent SIGTERM while it waits (as when a job is
    /// cancelled). Only distlock: the shell must stop on distlock's status alone.
    Interrupted,
}

const FAILURES: [Failure; 3] = [Failure::Busy, Failure::Unreachable, Failure::Interrupted];

/// The situation `failure` needs: the Redis URL the job gets, and the holder's token.
fn arrange(redis: &Redis, key: &str, failure: Failure) -> (String, Option<String>) {
    if failure == Failure::Unreachable {
        return ("redis://127.0.0.1:1".into(), None);
    }
    let out = run(distlock(redis).args(["acquire", "-k", key, "--ttl", "60s"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    (redis.url(), Some(stdout(&out).trim().to_owned()))
}

/// Which distlock to interrupt: the one waiting in line for this key on this server.
type Interrupt<'a> = Option<(&'a Redis, &'a str)>;

/// Run a step, SIGTERMing its distlock once it waits in line for the lock when `interrupt`
/// says so.
fn run_step(cmd: &mut Command, interrupt: Interrupt) -> Output {
    let Some((redis, key)) = interrupt else {
        return run(cmd);
    };
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let shell = child.id();
    let mut waiting = None;
    wait_until("the step's distlock to wait for the lock", || {
        waiting = child_named(shell, "distlock");
        waiting.is_some() && redis.in_line(key) >= 1
    });
    kill(waiting.unwrap(), Signal::SIGTERM).unwrap();
    finish(child)
}

/// A child of `parent` whose command name is `name`.
fn child_named(parent: u32, name: &str) -> Option<Pid> {
    let parent = parent.to_string();
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let field = |key: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(key))
                    .map(str::trim)
            };
            (field("Name:") == Some(name) && field("PPid:") == Some(parent.as_str()))
                .then(|| Pid::from_raw(pid))
        })
}

// --- GitHub Actions ---------------------------------------------------------------------------

/// One `steps:` entry.
struct GithubStep {
    condition: Option<String>,
    run: String,
}

/// The steps of a GitHub Actions example (a step starts at each `- ` item).
fn github_steps(yaml: &str) -> Vec<GithubStep> {
    let mut steps: Vec<GithubStep> = Vec::new();
    for line in yaml.lines() {
        let mut text = line.trim_start();
        if let Some(item) = text.strip_prefix("- ") {
            steps.push(GithubStep {
                condition: None,
                run: String::new(),
            });
            text = item;
        }
        let Some(step) = steps.last_mut() else {
            continue;
        };
        if let Some(run) = text.strip_prefix("run: ") {
            step.run = plain_scalar(run);
        } else if let Some(condition) = text.strip_prefix("if: ") {
            step.condition = Some(plain_scalar(condition));
        }
    }
    assert!(!steps.is_empty() && steps.iter().all(|s| !s.run.is_empty()));
    steps
}

/// `${{ ... }}` expressions, which the runner replaces before the shell sees the script.
fn github_expressions(run: &str) -> String {
    let text = run
        .replace("${{ github.ref_name }}", "v7")
        .replace("${{ github.repository }}", "acme/shop")
        .replace("${{ github.sha }}", "0123abc");
    assert!(!text.contains("${{"), "unknown expression in {run}");
    text
}

/// Whether a step runs: `if:` conditions the examples use, evaluated as GitHub does.
fn github_runs(condition: Option<&str>, failed: bool, env: &HashMap<String, String>) -> bool {
    match condition {
        None => !failed,
        Some("always() && env.DISTLOCK_TOKEN != ''") => env
            .get("DISTLOCK_TOKEN")
            .is_some_and(|token| !token.is_empty()),
        Some(other) => panic!("teach the test the condition {other}"),
    }
}

/// `NAME=value` lines of a $GITHUB_ENV file, as the runner reads them.
fn github_env_lines(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let (name, value) = line
                .split_once('=')
                .unwrap_or_else(|| panic!("not NAME=value: {line:?}"));
            assert!(!name.contains("<<"), "heredoc syntax: {line}");
            (name.to_owned(), value.to_owned())
        })
        .collect()
}

/// One step's run: `None` when skipped.
struct StepRun {
    output: Option<Output>,
    /// Its $GITHUB_ENV file afterwards.
    env_file: String,
}

/// Run a job's steps as the runner does: each `run:` goes to a script file run with
/// `bash --noprofile --norc -eo pipefail {0}`, with a fresh, empty $GITHUB_ENV file whose
/// `NAME=value` lines the later steps get in their environment; after a failed step, only
/// the steps whose `if:` says so run.
fn run_github_job(
    steps: &[GithubStep],
    ws: &Workspace,
    url: &str,
    interrupt: Interrupt,
) -> Vec<StepRun> {
    let mut env = HashMap::new();
    let mut failed = false;
    let mut runs = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        if !github_runs(step.condition.as_deref(), failed, &env) {
            runs.push(StepRun {
                output: None,
                env_file: String::new(),
            });
            continue;
        }
        let script = ws.runner.path(&format!("step-{i}.sh"));
        let env_file = ws.runner.path(&format!("github-env-{i}"));
        let line = match interrupt {
            Some(_) => step.run.clone(),
            None => short_wait(&step.run),
        };
        std::fs::write(&script, github_expressions(&line) + "\n").unwrap();
        std::fs::write(&env_file, "").unwrap();
        let mut cmd = Command::new("bash");
        cmd.args(["--noprofile", "--norc", "-eo", "pipefail"])
            .arg(&script);
        in_a_job(&mut cmd, url, ws.path());
        cmd.env("GITHUB_ENV", &env_file).envs(&env);
        let takes = step.run.contains("distlock acquire") || step.run.contains("distlock run");
        let output = run_step(&mut cmd, interrupt.filter(|_| takes));
        let written = std::fs::read_to_string(&env_file).unwrap();
        env.extend(github_env_lines(&written));
        failed |= !output.status.success();
        runs.push(StepRun {
            output: Some(output),
            env_file: written,
        });
    }
    runs
}

fn code(run: &StepRun) -> Option<i32> {
    run.output.as_ref().expect("the step ran").status.code()
}

fn expected_code(failure: Failure) -> i32 {
    match failure {
        Failure::Busy => 75,
        Failure::Unreachable => 69,
        // bash -e exits with the status of the command that failed: 128 + SIGTERM.
        Failure::Interrupted => 128 + 15,
    }
}

#[test]
fn github_one_step_example_runs_the_command_only_with_the_lock() {
    let steps = github_steps(GITHUB_ONE_STEP);
    assert_eq!(steps.len(), 1);
    assert!(GITHUB_ONE_STEP.contains("DISTLOCK_REDIS_URL: ${{ secrets.LOCK_REDIS_URL }}"));
    let key = "migrate-acme/shop";
    for failure in [Failure::Busy, Failure::Unreachable] {
        let redis = Redis::start();
        let (url, holder) = arrange(&redis, key, failure);
        let ws = Workspace::new(&[("migrate.sh", "")]);
        let runs = run_github_job(&steps, &ws, &url, None);
        assert_eq!(code(&runs[0]), Some(expected_code(failure)), "{failure:?}");
        assert!(
            !ws.started("migrate.sh"),
            "{failure:?}: ran without the lock"
        );
        assert_eq!(redis.get(&lock_key(key)), holder, "{failure:?}");
    }
    let redis = Redis::start();
    let ws = Workspace::new(&[("migrate.sh", "")]);
    let runs = run_github_job(&steps, &ws, &redis.url(), None);
    assert_eq!(
        code(&runs[0]),
        Some(0),
        "{}",
        stderr(runs[0].output.as_ref().unwrap())
    );
    assert!(ws.started("migrate.sh"));
    assert!(!redis.exists(&lock_key(key)));
}

#[test]
fn github_steps_example_fails_the_job_without_the_lock() {
    let steps = github_steps(GITHUB_STEPS);
    assert_eq!(steps.len(), 4);
    assert!(GITHUB_STEPS.contains("DISTLOCK_REDIS_URL: ${{ secrets.LOCK_REDIS_URL }}"));
    for failure in FAILURES {
        let redis = Redis::start();
        let (url, holder) = arrange(&redis, KEY, failure);
        let ws = Workspace::new(&[("build.sh", ""), ("publish.sh", "")]);
        let interrupt = (failure == Failure::Interrupted).then_some((&redis, KEY));
        let runs = run_github_job(&steps, &ws, &url, interrupt);
        let acquire = &runs[0];
        assert_eq!(
            code(acquire),
            Some(expected_code(failure)),
            "{failure:?}: {}",
            stderr(acquire.output.as_ref().unwrap())
        );
        assert_eq!(
            acquire.env_file, "",
            "{failure:?}: $GITHUB_ENV must be untouched"
        );
        assert!(
            runs[1..].iter().all(|r| r.output.is_none()),
            "{failure:?}: no later step runs, not even the release"
        );
        assert!(!ws.started("build.sh") && !ws.started("publish.sh"));
        assert_eq!(
            redis.get(&lock_key(KEY)),
            holder,
            "{failure:?}: the holder keeps it"
        );
    }
}

#[test]
fn github_steps_example_hands_the_lock_to_the_later_steps() {
    let steps = github_steps(GITHUB_STEPS);
    // build.sh renews with what the runner loaded from $GITHUB_ENV (with the token, so renew
    // exits 0 only if the lock is ours); publish.sh checks that it is still held.
    let redis = Redis::start();
    let ws = Workspace::new(&[
        ("build.sh", "distlock renew --ttl 40m"),
        ("publish.sh", "distlock status -q -k \"$DISTLOCK_KEY\""),
    ]);
    let runs = run_github_job(&steps, &ws, &redis.url(), None);
    for (i, run) in runs.iter().enumerate() {
        let output = run.output.as_ref().expect("every step runs");
        assert_eq!(
            output.status.code(),
            Some(0),
            "step {i}: {}",
            stderr(output)
        );
    }
    let acquire = runs[0].output.as_ref().unwrap();
    assert!(acquire.stdout.is_empty(), "the token stays out of the log");
    let lines = github_env_lines(&runs[0].env_file);
    let names: Vec<&str> = lines.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "DISTLOCK_KEY",
            "DISTLOCK_TTL_MS",
            "DISTLOCK_FENCE",
            "DISTLOCK_TOKEN"
        ]
    );
    assert_eq!(lines[0].1, KEY);
    assert_eq!(lines[1].1, "2700000");
    assert!(ws.started("build.sh") && ws.started("publish.sh"));
    assert!(!redis.exists(&lock_key(KEY)), "the last step released it");

    // A step that fails after the lock was taken: the release step still runs.
    let redis = Redis::start();
    let ws = Workspace::new(&[("build.sh", "exit 1"), ("publish.sh", "")]);
    let runs = run_github_job(&steps, &ws, &redis.url(), None);
    assert_eq!(code(&runs[1]), Some(1));
    assert!(runs[2].output.is_none() && !ws.started("publish.sh"));
    assert_eq!(code(&runs[3]), Some(0));
    assert!(!redis.exists(&lock_key(KEY)));
}

#[test]
fn github_supersede_example_deploys_only_with_the_lock_and_only_the_newest() {
    let steps = github_steps(GITHUB_SUPERSEDE);
    assert_eq!(steps.len(), 1);
    let key = "deploy-prod";
    // It waits as long as it takes (no --wait): without the lock, deploy.sh never starts.
    for failure in [Failure::Unreachable, Failure::Interrupted] {
        let redis = Redis::start();
        let (url, holder) = arrange(&redis, key, failure);
        let ws = Workspace::new(&[("deploy.sh", "")]);
        let interrupt = (failure == Failure::Interrupted).then_some((&redis, key));
        let runs = run_github_job(&steps, &ws, &url, interrupt);
        assert_eq!(code(&runs[0]), Some(expected_code(failure)), "{failure:?}");
        assert!(
            !ws.started("deploy.sh"),
            "{failure:?}: ran without the lock"
        );
        assert_eq!(redis.get(&lock_key(key)), holder, "{failure:?}");
    }
    // An older deploy waits in line; a newer one supersedes it: the older step ends quietly
    // (-E 0) without deploying, the newer one deploys once the holder is done.
    let redis = Redis::start();
    let (url, holder) = arrange(&redis, key, Failure::Busy);
    let (older, newer) = (
        Workspace::new(&[("deploy.sh", "")]),
        Workspace::new(&[("deploy.sh", "")]),
    );
    std::thread::scope(|scope| {
        let older_job = scope.spawn(|| run_github_job(&steps, &older, &url, None));
        wait_until("the older deploy to wait in line", || {
            redis.in_line(key) == 1
        });
        let newer_job = scope.spawn(|| run_github_job(&steps, &newer, &url, None));
        let runs = older_job.join().unwrap();
        let output = runs[0].output.as_ref().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", stderr(output));
        assert!(stderr(output).contains("supersede"), "{}", stderr(output));
        assert!(!older.started("deploy.sh"));
        // The newer one is in line now (it cancelled the older when it joined).
        let out = run(distlock(&redis)
            .args(["release", "-k", key, "--token"])
            .arg(holder.unwrap()));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let runs = newer_job.join().unwrap();
        let output = runs[0].output.as_ref().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", stderr(output));
        assert!(newer.started("deploy.sh"));
    });
    assert!(!redis.exists(&lock_key(key)));
}

// --- GitLab CI --------------------------------------------------------------------------------

/// The `script` and `after_script` lines of a GitLab example.
struct GitlabJob {
    script: Vec<String>,
    after_script: Vec<String>,
}

fn gitlab_job(yaml: &str) -> GitlabJob {
    let mut job = GitlabJob {
        script: Vec::new(),
        after_script: Vec::new(),
    };
    let mut section = None;
    for line in yaml.lines() {
        let text = line.trim_start();
        if let Some(item) = text.strip_prefix("- ") {
            match section {
                Some("script") => job.script.push(plain_scalar(item)),
                Some("after_script") => job.after_script.push(plain_scalar(item)),
                _ => panic!("a list item outside script/after_script: {line}"),
            }
        } else if let Some(key) = text.strip_suffix(':') {
            section = Some(key);
        }
    }
    assert!(!job.script.is_empty() && !job.after_script.is_empty());
    assert!(yaml.contains("DISTLOCK_REDIS_URL: $LOCK_REDIS_URL"));
    job
}

/// Run a list of lines as the runner does: one bash script with `set -eo pipefail` first.
fn gitlab_shell(
    lines: &[String],
    ws: &Workspace,
    url: &str,
    name: &str,
    interrupt: Interrupt,
) -> Command {
    let script = ws.runner.path(name);
    let mut text = String::from("set -eo pipefail\n");
    for line in lines {
        match interrupt {
            Some(_) => text.push_str(line),
            None => text.push_str(&short_wait(line)),
        }
        text.push('\n');
    }
    std::fs::write(&script, text).unwrap();
    let mut cmd = Command::new("bash");
    cmd.arg(&script);
    in_a_job(&mut cmd, url, ws.path());
    cmd.env("LOCK_REDIS_URL", url).env("CI_COMMIT_TAG", "v7");
    cmd
}

/// The job's `script`, then its `after_script` (which runs whatever the script did).
fn run_gitlab_job(
    job: &GitlabJob,
    ws: &Workspace,
    url: &str,
    interrupt: Interrupt,
) -> (Output, Output) {
    let script = run_step(
        &mut gitlab_shell(&job.script, ws, url, "script.sh", interrupt),
        interrupt,
    );
    let after = run(&mut gitlab_shell(
        &job.after_script,
        ws,
        url,
        "after_script.sh",
        None,
    ));
    (script, after)
}

#[test]
fn gitlab_example_fails_the_job_without_the_lock() {
    let job = gitlab_job(GITLAB_JOB);
    for failure in FAILURES {
        let redis = Redis::start();
        let (url, holder) = arrange(&redis, KEY, failure);
        let ws = Workspace::new(&[("build.sh", ""), ("publish.sh", "")]);
        let interrupt = (failure == Failure::Interrupted).then_some((&redis, KEY));
        let (script, after) = run_gitlab_job(&job, &ws, &url, interrupt);
        assert_eq!(
            script.status.code(),
            Some(expected_code(failure)),
            "{failure:?}: {}",
            stderr(&script)
        );
        assert!(
            !ws.started("build.sh") && !ws.started("publish.sh"),
            "{failure:?}"
        );
        assert!(
            !ws.dir.path("distlock.env").exists(),
            "{failure:?}: no env file"
        );
        assert_eq!(
            after.status.code(),
            Some(0),
            "{failure:?}: {}",
            stderr(&after)
        );
        assert_eq!(
            redis.get(&lock_key(KEY)),
            holder,
            "{failure:?}: the holder keeps it"
        );
    }
}

#[test]
fn gitlab_example_hands_the_lock_to_after_script() {
    let job = gitlab_job(GITLAB_JOB);
    // build.sh (run by sh, not bash) loads the file as the guide says and renews.
    let renew = format!("{GITLAB_LOAD}; distlock renew --ttl 40m");
    let redis = Redis::start();
    let ws = Workspace::new(&[("build.sh", &renew), ("publish.sh", "")]);
    let (script, after) = run_gitlab_job(&job, &ws, &redis.url(), None);
    assert_eq!(script.status.code(), Some(0), "{}", stderr(&script));
    assert!(script.stdout.is_empty(), "the token stays out of the log");
    assert!(ws.started("build.sh") && ws.started("publish.sh"));
    let text = std::fs::read_to_string(ws.dir.path("distlock.env")).unwrap();
    let names: Vec<&str> = text.lines().map(|l| l.split('=').next().unwrap()).collect();
    assert_eq!(
        names,
        [
            "DISTLOCK_KEY",
            "DISTLOCK_TTL_MS",
            "DISTLOCK_FENCE",
            "DISTLOCK_TOKEN"
        ],
        "{text}"
    );
    assert_eq!(after.status.code(), Some(0), "{}", stderr(&after));
    assert!(!redis.exists(&lock_key(KEY)), "after_script released it");

    // The job fails after taking the lock: after_script still releases it.
    let redis = Redis::start();
    let ws = Workspace::new(&[("build.sh", "exit 1"), ("publish.sh", "")]);
    let (script, after) = run_gitlab_job(&job, &ws, &redis.url(), None);
    assert_eq!(script.status.code(), Some(1));
    assert!(!ws.started("publish.sh"));
    assert_eq!(after.status.code(), Some(0), "{}", stderr(&after));
    assert!(!redis.exists(&lock_key(KEY)));
}

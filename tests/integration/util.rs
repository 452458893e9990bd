//! Test fixtures: real `redis-server` processes on free loopback ports, a builder for the
//! distlock binary, and bounded waits. Nothing here sleeps as synchronisation: every wait polls
//! a condition and fails the test when its bound passes.

use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The longest any single wait in a test may take before the test fails.
pub const BOUND: Duration = Duration::from_secs(20);

/// A redis-server of our own, killed when dropped.
pub struct Redis {
    child: Option<Child>,
    port: u16,
    args: Vec<String>,
    /// Listens with TLS only (the port is the TLS port).
    tls: bool,
    pub dir: tempfile::TempDir,
}

/// A free port below the kernel's ephemeral range (32768+), so that no client connection's
/// local port can take it between our check and the server's bind.
fn free_port() -> u16 {
    loop {
        let port = fastrand::u16(20_000..32_000);
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

impl Redis {
    /// Start a server with default settings (no persistence, DEBUG allowed).
    pub fn start() -> Redis {
        Redis::start_with(&[])
    }

    /// Start a server with extra arguments (e.g. `--requirepass`).
    pub fn start_with(extra: &[&str]) -> Redis {
        Redis::launch(extra, false)
    }

    /// Start a server that speaks only TLS, with `extra` naming its certificates.
    pub fn start_tls(extra: &[&str]) -> Redis {
        Redis::launch(extra, true)
    }

    fn launch(extra: &[&str], tls: bool) -> Redis {
        for _ in 0..5 {
            let mut redis = Redis {
                child: None,
                port: free_port(),
                args: extra.iter().map(|s| s.to_string()).collect(),
                tls,
                dir: tempfile::tempdir().expect("tempdir"),
            };
            if redis.spawn() {
                return redis;
            }
        }
        panic!("could not start redis-server on a free port");
    }

    fn spawn(&mut self) -> bool {
        let port = self.port.to_string();
        let ports: [&str; 4] = if self.tls {
            ["--port", "0", "--tls-port", &port]
        } else {
            ["--port", &port, "--port", &port]
        };
        let child = Command::new("redis-server")
            .args(ports)
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--enable-debug-command", "local"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (apt-get install redis-server)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(child) = &mut self.child {
                if let Ok(Some(_)) = child.try_wait() {
                    self.child = None;
                    return false; // port taken, most likely
                }
            }
            // Ready when *our* server answers: another test's server may hold the port we
            // picked for a moment (ours then fails to bind and exits).
            if self.answers_as_our_process() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    fn answers_as_our_process(&self) -> bool {
        let Some(child) = &self.child else {
            return false;
        };
        if self.tls {
            // No TLS client here: a TCP accept from our own live process will do.
            return std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok();
        }
        let Ok(client) = redis::Client::open(self.url()) else {
            return false;
        };
        let Ok(mut con) = client.get_connection_with_timeout(Duration::from_millis(200)) else {
            return false;
        };
        let _ = con.set_read_timeout(Some(Duration::from_secs(2)));
        let info: String = match redis::cmd("INFO").arg("server").query(&mut con) {
            Ok(info) => info,
            // A server started with --requirepass refuses INFO before AUTH: it is ours if our
            // process is still alive and something answered on the port.
            Err(e) if e.code() == Some("NOAUTH") => return true,
            Err(_) => return false,
        };
        info.lines()
            .any(|l| l.trim() == format!("process_id:{}", child.id()))
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.as_ref().expect("redis running").id() as i32)
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A fresh client connection (with timeouts, so a paused server cannot hang a test).
    pub fn client(&self) -> redis::Connection {
        let client = redis::Client::open(self.url()).expect("client");
        let con = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("connect to the test redis");
        con.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        con.set_write_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        con
    }

    /// Run a command and return its reply.
    pub fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut self.client())
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    pub fn get(&self, key: &str) -> Option<String> {
        self.cmd(&["GET", key])
    }

    pub fn pttl(&self, key: &str) -> i64 {
        self.cmd(&["PTTL", key])
    }

    pub fn exists(&self, key: &str) -> bool {
        self.cmd::<i64>(&["EXISTS", key]) == 1
    }

    /// Number of subscribers of a channel (a waiter in notify mode subscribes before waiting).
    pub fn subscribers(&self, channel: &str) -> i64 {
        let reply: Vec<redis::Value> = self.cmd(&["PUBSUB", "NUMSUB", channel]);
        match reply.get(1) {
            Some(redis::Value::Int(n)) => *n,
            _ => 0,
        }
    }

    /// How many calls of `command` succeeded so far (INFO commandstats: calls minus failed and
    /// rejected ones, so that a NOSCRIPT answer does not count as an attempt).
    pub fn successful_calls(&self, command: &str) -> u64 {
        let stats: String = self.cmd(&["INFO", "commandstats"]);
        let prefix = format!("cmdstat_{command}:");
        let Some(line) = stats.lines().find(|l| l.starts_with(&prefix)) else {
            return 0;
        };
        let field = |name: &str| -> u64 {
            line[prefix.len()..]
                .split(',')
                .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        field("calls") - field("failed_calls") - field("rejected_calls")
    }

    pub fn signal(&self, signal: Signal) {
        kill(self.pid(), signal).expect("signal redis-server");
    }

    /// SIGKILL the server and reap it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start the server again on the same port (after `kill`).
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + BOUND;
        while !self.spawn() {
            assert!(Instant::now() < deadline, "redis-server did not restart");
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGCONT);
        }
        self.kill();
    }
}

/// The distlock binary, with an environment cleared of every variable that could change its
/// behaviour, pointed at `redis`.
pub fn distlock(redis: &Redis) -> Command {
    let mut cmd = bare_distlock();
    cmd.env("DISTLOCK_REDIS_URL", redis.url());
    cmd
}

/// The distlock binary with a clean environment and no Redis URL.
pub fn bare_distlock() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_distlock"));
    for (key, _) in std::env::vars() {
        if key.starts_with("DISTLOCK_") || key == "REDIS_URL" {
            cmd.env_remove(key);
        }
    }
    cmd.stdin(Stdio::null());
    cmd
}

/// Run to completion, with a bound: kill it and fail if it takes longer than `BOUND`.
pub fn run(cmd: &mut Command) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn distlock");
    finish(child)
}

/// Wait for a spawned child with a bound, collecting its output.
pub fn finish(child: Child) -> Output {
    let pid = Pid::from_raw(child.id() as i32);
    let watchdog = std::thread::spawn(move || {
        let deadline = Instant::now() + BOUND * 2;
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            if kill(pid, None).is_err() {
                return;
            }
        }
        let _ = kill(pid, Signal::SIGKILL);
    });
    let output = child.wait_with_output().expect("wait for distlock");
    drop(watchdog);
    output
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Poll `condition` every few milliseconds until it holds; panic with `what` after `BOUND`.
pub fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + BOUND;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Wait until a file exists and is non-empty; return its contents.
pub fn wait_for_file(path: &Path) -> String {
    let mut contents = String::new();
    wait_until(&format!("{}", path.display()), || {
        contents = std::fs::read_to_string(path).unwrap_or_default();
        contents.ends_with('\n')
    });
    contents
}

/// Read a pid written by a child (`echo $$ > file`).
pub fn read_pid(path: &Path) -> Pid {
    let text = wait_for_file(path);
    Pid::from_raw(text.trim().parse().expect("pid in file"))
}

/// Whether `pid` is a live (not zombie) process.
pub fn alive(pid: Pid) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|s| s.split_whitespace().next());
            !matches!(state, Some("Z") | Some("X") | None)
        }
        Err(_) => false,
    }
}

/// Poll until `pid` is dead; return when it was first seen dead.
pub fn wait_dead(pid: Pid) -> Instant {
    wait_until(&format!("process {pid} to die"), || !alive(pid));
    Instant::now()
}

/// A scratch directory with a helper to name files in it.
pub struct Scratch(pub tempfile::TempDir);

impl Scratch {
    pub fn new() -> Scratch {
        Scratch(tempfile::tempdir().expect("tempdir"))
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }
    pub fn str(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }
}

/// The lock's Redis key for `key` under the default prefix.
pub fn lock_key(key: &str) -> String {
    format!("distlock:{{{key}}}")
}

/// The exit signal of a process that died of a signal.
pub fn signal_of(output: &Output) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    output.status.signal()
}

/// Spawn distlock as the session leader of a new pseudo-terminal (like a login shell would run
/// it), with the terminal on stdin. Returns the process and the terminal's master side.
pub fn on_a_terminal(cmd: &mut std::process::Command) -> (std::process::Child, std::fs::File) {
    let pty = nix::pty::openpty(None, None).unwrap();
    let slave = std::fs::File::from(pty.slave);
    cmd.stdin(Stdio::from(slave.try_clone().unwrap()));
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: setsid and ioctl are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().unwrap();
    drop(slave);
    (child, std::fs::File::from(pty.master))
}

pub fn foreground_group(master: &std::fs::File) -> i32 {
    // SAFETY: TIOCGPGRP writes one pid_t into the pointer we pass.
    unsafe {
        let mut pgrp: libc::pid_t = 0;
        libc::ioctl(master.as_raw_fd(), libc::TIOCGPGRP, &mut pgrp);
        pgrp
    }
}

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
    /// The cluster bus port of a cluster node (kept across restarts, like `port`).
    bus_port: Option<u16>,
    options: RedisOptions,
    /// SIGSTOPped by `stop` and not yet continued.
    stopped: bool,
    pub dir: tempfile::TempDir,
}

/// How to start a redis-server beyond the defaults (no persistence, DEBUG allowed, a free port):
/// `Redis::options().persistent().args(&[..]).start()`.
#[derive(Clone, Default)]
pub struct RedisOptions {
    args: Vec<String>,
    /// Listens with TLS only (the port is the TLS port), with the certificates of this
    /// directory (a `Pki`'s), copied into the server's own directory when it is created, so that
    /// a restart does not depend on the `Pki` still being there.
    tls: Option<PathBuf>,
    /// ACL users besides `default`, each `NAME on >PASSWORD RULES...`. The `default` user stays
    /// as Redis makes it (no password, every right): the fixtures' own connections use it.
    users: Vec<Vec<String>>,
    /// `appendonly yes` + `appendfsync always`: every acknowledged write survives a SIGKILL.
    persistent: bool,
    /// `cluster-enabled yes`, `nodes.conf` in the server's directory, a free bus port.
    cluster: bool,
    /// Run as a Sentinel with this configuration (written to `sentinel.conf` in the server's
    /// directory, which Sentinel rewrites as it learns).
    sentinel: Option<String>,
}

/// The files of a `Pki` that a TLS server keeps in its directory.
const TLS_FILES: [&str; 5] = [
    "ca.crt",
    "server.crt",
    "server.key",
    "client.crt",
    "client.key",
];

/// A free port below the kernel's ephemeral range (32768+), so that no client connection's
/// local port can take it between our check and the server's bind.
pub fn free_port() -> u16 {
    loop {
        let port = fastrand::u16(20_000..32_000);
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

impl RedisOptions {
    /// Extra command-line arguments, after (and so overriding) the fixture's own.
    pub fn args(mut self, extra: &[&str]) -> RedisOptions {
        self.args.extend(extra.iter().map(|s| s.to_string()));
        self
    }

    pub fn persistent(mut self) -> RedisOptions {
        self.persistent = true;
        self
    }

    pub fn cluster_node(mut self) -> RedisOptions {
        self.cluster = true;
        self
    }

    pub fn sentinel(mut self, conf: &str) -> RedisOptions {
        self.sentinel = Some(conf.to_string());
        self
    }

    /// TLS only, with `pki`'s server certificate (for localhost and 127.0.0.1): the port is
    /// the TLS port, clients need no certificate (`--tls-auth-clients no`; a later `args` may
    /// say `yes`), and what the server connects to itself speaks TLS too: a replica to its
    /// primary and a sentinel to everything (`tls-replication yes`), a cluster node to its
    /// peers (`tls-cluster yes`).
    pub fn tls(mut self, pki: &crate::tls::Pki) -> RedisOptions {
        self.tls = Some(pki.dir.0.path().to_path_buf());
        self
    }

    /// An ACL user `name` with `password` and `rules` (ACL SETUSER syntax, separated by
    /// spaces), from the server's start on (and again on each restart; except for a sentinel,
    /// which writes its users into the configuration it rewrites, and then refuses to start
    /// with the same user given twice).
    pub fn user(mut self, name: &str, password: &str, rules: &str) -> RedisOptions {
        let mut user = vec![name.to_string(), "on".into(), format!(">{password}")];
        user.extend(rules.split_whitespace().map(String::from));
        self.users.push(user);
        self
    }

    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Start on a free port (retrying another port if ours is taken before the server binds).
    pub fn start(self) -> Redis {
        for _ in 0..5 {
            if let Some(redis) = self.clone().start_on(free_port()) {
                return redis;
            }
        }
        panic!("could not start redis-server on a free port");
    }

    /// One attempt on a port chosen by the caller (who must choose another when this fails:
    /// some process took the port first).
    pub fn start_on(self, port: u16) -> Option<Redis> {
        let bus_port = self.cluster.then(|| {
            loop {
                let bus = free_port();
                if bus != port {
                    break bus;
                }
            }
        });
        let mut redis = Redis {
            child: None,
            port,
            bus_port,
            options: self,
            stopped: false,
            dir: tempfile::tempdir().expect("tempdir"),
        };
        if let Some(conf) = &redis.options.sentinel {
            std::fs::write(redis.sentinel_conf(), conf).expect("write sentinel.conf");
        }
        if let Some(pki) = &redis.options.tls {
            for file in TLS_FILES {
                std::fs::copy(pki.join(file), redis.dir.path().join(file))
                    .unwrap_or_else(|e| panic!("copy {file} into the server's directory: {e}"));
            }
        }
        redis.spawn().then_some(redis)
    }
}

impl Redis {
    /// Start a server with default settings (no persistence, DEBUG allowed).
    pub fn start() -> Redis {
        Redis::start_with(&[])
    }

    /// Start a server with extra arguments (e.g. `--requirepass`).
    pub fn start_with(extra: &[&str]) -> Redis {
        Redis::options().args(extra).start()
    }

    pub fn options() -> RedisOptions {
        RedisOptions::default()
    }

    fn log_file(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    /// The last `lines` lines of the server's log (all its runs), for a failing test's report.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = std::fs::read_to_string(self.log_file()).unwrap_or_default();
        let all: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    fn sentinel_conf(&self) -> PathBuf {
        self.dir.path().join("sentinel.conf")
    }

    fn spawn(&mut self) -> bool {
        let options = &self.options;
        let port = self.port.to_string();
        let ports: [&str; 4] = if options.tls.is_some() {
            ["--port", "0", "--tls-port", &port]
        } else {
            ["--port", &port, "--port", &port]
        };
        let mut command = Command::new("redis-server");
        if options.sentinel.is_some() {
            // The configuration file must come first; Sentinel refuses to run without one.
            command.arg(self.sentinel_conf()).arg("--sentinel");
        }
        command
            .args(ports)
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--enable-debug-command", "local"])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(self.log_file());
        if options.persistent {
            command.args(["--appendonly", "yes", "--appendfsync", "always"]);
        } else {
            command.args(["--appendonly", "no"]);
        }
        if options.tls.is_some() {
            let file = |name: &str| self.dir.path().join(name);
            command
                .arg("--tls-cert-file")
                .arg(file("server.crt"))
                .arg("--tls-key-file")
                .arg(file("server.key"))
                .arg("--tls-ca-cert-file")
                .arg(file("ca.crt"))
                .args(["--tls-auth-clients", "no"])
                .args(["--tls-replication", "yes"]);
            if options.cluster {
                command.args(["--tls-cluster", "yes"]);
            }
        }
        for user in &options.users {
            command.arg("--user").args(user);
        }
        if let Some(bus_port) = self.bus_port {
            // An explicit bus port: the default (port + 10000) may lie in the ephemeral range
            // or on another test's server.
            command
                .args(["--cluster-enabled", "yes"])
                .args(["--cluster-config-file", "nodes.conf"])
                .args(["--cluster-port", &bus_port.to_string()]);
        }
        let child = command
            .args(&options.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (apt-get install redis-server)");
        self.child = Some(child);
        self.stopped = false;
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
        let Ok(client) = self.admin_client() else {
            return false;
        };
        let Ok(mut con) = client.get_connection_with_timeout(Duration::from_millis(200)) else {
            return false;
        };
        let _ = con.set_read_timeout(Some(Duration::from_secs(2)));
        // The default sections: `server` names the process, `persistence` says whether a
        // restarted server is still loading its append-only file (it answers INFO meanwhile,
        // and LOADING to everything else).
        let info: String = match redis::cmd("INFO").query(&mut con) {
            Ok(info) => info,
            // A server started with --requirepass refuses INFO before AUTH: it is ours if our
            // process is still alive and something answered on the port.
            Err(e) if e.code() == Some("NOAUTH") => return true,
            Err(_) => return false,
        };
        let ours = info
            .lines()
            .any(|l| l.trim() == format!("process_id:{}", child.id()));
        ours && !info.lines().any(|l| l.trim() == "loading:1")
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.as_ref().expect("redis running").id() as i32)
    }

    /// `redis://127.0.0.1:PORT`, or `rediss://127.0.0.1:PORT` for a TLS server (whose
    /// certificate the `Pki`'s CA signed).
    pub fn url(&self) -> String {
        let scheme = if self.is_tls() { "rediss" } else { "redis" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    pub fn is_tls(&self) -> bool {
        self.options.is_tls()
    }

    /// What `redis-cli` needs to talk to this server: nothing, or its TLS options (with the
    /// client certificate, for a server that asks for one).
    pub fn cli_tls_args(&self) -> Vec<String> {
        if !self.is_tls() {
            return Vec::new();
        }
        let file = |name: &str| self.dir.path().join(name).display().to_string();
        vec![
            "--tls".into(),
            "--cacert".into(),
            file("ca.crt"),
            "--cert".into(),
            file("client.crt"),
            "--key".into(),
            file("client.key"),
        ]
    }

    /// A client for the fixtures' own commands, as the `default` user; over TLS for a TLS
    /// server (trusting its CA, showing the client certificate in case it asks for one).
    fn admin_client(&self) -> redis::RedisResult<redis::Client> {
        if !self.is_tls() {
            return redis::Client::open(self.url());
        }
        // rustls needs a process-wide crypto provider; installing it twice is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let read = |name: &str| std::fs::read(self.dir.path().join(name));
        let certificates = redis::TlsCertificates {
            client_tls: Some(redis::ClientTlsConfig {
                client_cert: read("client.crt")?,
                client_key: read("client.key")?,
            }),
            root_cert: Some(read("ca.crt")?),
        };
        redis::Client::build_with_tls(self.url(), certificates)
    }

    /// A fresh client connection (with timeouts, so a paused server cannot hang a test).
    pub fn client(&self) -> redis::Connection {
        let client = self.admin_client().expect("client");
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

    /// How many waiters are in line for `key` (a waiter in notify mode subscribes to its own
    /// wake-ups before it takes its place: once it is in line, a hand-off reaches it).
    pub fn in_line(&self, key: &str) -> i64 {
        self.cmd(&["ZCARD", &format!("{}:queue", lock_key(key))])
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

    /// SIGSTOP: the server keeps its port and its connections and answers nothing.
    pub fn stop(&mut self) {
        self.signal(Signal::SIGSTOP);
        self.stopped = true;
    }

    /// SIGCONT after `stop`.
    pub fn cont(&mut self) {
        self.signal(Signal::SIGCONT);
        self.stopped = false;
    }

    /// Running and not stopped: worth asking something.
    pub fn is_up(&self) -> bool {
        self.child.is_some() && !self.stopped
    }

    /// SIGKILL the server and reap it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.stopped = false;
    }

    /// Start the server again on the same port, in the same directory (after `kill`, or
    /// instead of it): a persistent server comes back with every acknowledged write.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + BOUND;
        while !self.spawn() {
            assert!(Instant::now() < deadline, "redis-server did not restart");
        }
    }

    /// Restart without the data (the append-only files and any RDB), as a server that lost its
    /// disk would; a cluster node keeps its identity (`nodes.conf`), a Sentinel its state.
    pub fn restart_empty(&mut self) {
        self.kill();
        for data in ["appendonlydir", "dump.rdb"] {
            let path = self.dir.path().join(data);
            if path.is_dir() {
                std::fs::remove_dir_all(&path).expect("remove the append-only files");
            } else if path.exists() {
                std::fs::remove_file(&path).expect("remove the RDB file");
            }
        }
        self.restart();
    }

    /// Run a command with short timeouts and return the reply or the error: for polling a
    /// server that may be down, loading, or mid-failover.
    pub fn try_cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        let client = self.admin_client()?;
        let mut con = client.get_connection_with_timeout(Duration::from_secs(1))?;
        con.set_read_timeout(Some(Duration::from_secs(2)))?;
        con.set_write_timeout(Some(Duration::from_secs(2)))?;
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut con)
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

/// PATH with the directory of the distlock binary under test first: for commands that run
/// `distlock` by name (nested runs, scripts).
pub fn path_with_distlock() -> std::ffi::OsString {
    let bin = Path::new(env!("CARGO_BIN_EXE_distlock"))
        .parent()
        .expect("the binary's directory")
        .to_owned();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::iter::once(bin).chain(std::env::split_paths(&path));
    std::env::join_paths(dirs).expect("a PATH")
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

/// Wait for a spawned child with a bound, collecting its output. Bounded twice: the child is
/// SIGKILLed if it runs past `BOUND * 2`, and once it has exited, its pipes are read for at most
/// a few more seconds (a leftover process that inherited them would otherwise keep a test
/// waiting forever; the test then fails, saying so).
pub fn finish(mut child: Child) -> Output {
    use std::io::Read;
    let pid = Pid::from_raw(child.id() as i32);
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            let _ = tx.send(bytes);
        });
        rx
    };
    let out = reader(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = reader(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + BOUND * 2;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for distlock") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = kill(pid, Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let collect = |rx: std::sync::mpsc::Receiver<Vec<u8>>, what: &str| {
        rx.recv_timeout(Duration::from_secs(5)).unwrap_or_else(|_| {
            panic!("the {what} pipe of process {pid} stayed open after it exited: a process it left behind holds it")
        })
    };
    Output {
        status,
        stdout: collect(out, "stdout"),
        stderr: collect(err, "stderr"),
    }
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

/// [`wait_until`] while `process` runs: if it exits first, fail at once with its exit status
/// and stderr (what a test needs to tell why), not after `BOUND` with only `what`.
pub fn wait_while_running(what: &str, process: &mut Child, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + BOUND;
    while !condition() {
        if let Ok(Some(status)) = process.try_wait() {
            let mut err = String::new();
            if let Some(mut pipe) = process.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut pipe, &mut err);
            }
            panic!("while waiting for {what}, the process exited with {status}: {err}");
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Wait until a renewal raises the expiry of `key` (a Redis key) on `node`, failing at once if
/// `holder` ends first: proof that renewals reach that node, however loaded the machine.
pub fn wait_renewed_on(node: &Redis, key: &str, holder: &mut Child) {
    // Against the previous sample, not the first: a first sample taken just as a renewal landed
    // is the full TTL, which no later renewal to the same TTL exceeds.
    let mut before = node.pttl(key);
    wait_while_running(&format!("a renewal on :{}", node.port()), holder, || {
        let now = node.pttl(key);
        let rose = now > before;
        before = now;
        rose
    });
}

/// `cmd run -k KEY EXTRA -- sh -c ...`: a holder whose command writes `held` in `dir` once it
/// holds the lock, then waits until [`release`] lets it go. Returns once it holds.
pub fn hold_until_released(mut cmd: Command, dir: &Scratch, key: &str, extra: &[&str]) -> Child {
    let fifo = dir.path("go");
    let _ = nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU);
    let child = cmd
        .args(["run", "-k", key])
        .args(extra)
        .args(["--", "sh", "-c"])
        .arg(format!(
            "echo held > {}; read _ < {}",
            dir.str("held"),
            fifo.display()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_file(&dir.path("held"));
    child
}

/// Let the holder of [`hold_until_released`] in `dir` end its command.
pub fn release(dir: &Scratch) {
    std::fs::write(dir.path("go"), "go\n").unwrap();
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

/// A TCP listener that never accepts: the kernel completes connections into its backlog, so
/// clients connect, send, and never hear anything (a blackholed or frozen server).
pub struct Silent {
    _listener: TcpListener,
    port: u16,
}

impl Silent {
    pub fn start() -> Silent {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a silent listener");
        let port = listener.local_addr().expect("its address").port();
        Silent {
            _listener: listener,
            port,
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

/// Bytes that clients sent to the server listening on `port` and that it has not read yet (a
/// stopped or silent server): the sum of the receive queues of its side of every connection,
/// from /proc/net/tcp. A readiness handshake for "the request has arrived and is waiting".
pub fn unread_bytes(port: u16) -> u64 {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let mut unread = 0;
    for line in table.lines().skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(local), Some(state), Some(queues)) =
            (fields.get(1), fields.get(3), fields.get(4))
        else {
            continue;
        };
        let local_port = local
            .rsplit(':')
            .next()
            .and_then(|p| u16::from_str_radix(p, 16).ok());
        if local_port != Some(port) || *state != "01" {
            continue;
        }
        let rx = queues
            .split(':')
            .nth(1)
            .and_then(|q| u64::from_str_radix(q, 16).ok())
            .unwrap_or(0);
        unread += rx;
    }
    unread
}

/// How many connections to the server on `port` carry bytes it has not read yet (requests
/// queued in a stopped server, one per connection that sent one).
pub fn connections_with_unread_bytes(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port = fields
                .get(1)
                .and_then(|l| l.rsplit(':').next())
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            let rx = fields
                .get(4)
                .and_then(|q| q.split(':').nth(1))
                .and_then(|q| u64::from_str_radix(q, 16).ok())
                .unwrap_or(0);
            local_port == Some(port) && fields.get(3) == Some(&"01") && rx > 0
        })
        .count()
}

/// Spawn `cmd` with stderr piped, for tests that watch a process while it runs.
pub fn spawn(cmd: &mut Command) -> Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn distlock")
}

//! The guard: a dead-man's switch on the command's process group. It kills the group when
//! distlock dies without a chance to do it (SIGKILL, a crash), and when distlock lives but fails
//! to act in time: no confirmed renewal moved the kill deadline before it passed (distlock
//! stopped by SIGSTOP, held by a debugger or a tracer, its threads starved or wedged).
//!
//! # Why a process of its own
//!
//! PR_SET_PDEATHSIG kills only the direct child; the processes it started (the common case:
//! `sh -c '...'` runs the real work in a grandchild) would run on without the lock, and once the
//! lock expires, beside the next holder. And a distlock that is stopped, not dead, kills nothing
//! at all: its command runs on past the lock. So beside the command distlock starts a minimal
//! process, the guard, in a session of its own (out of reach of the terminal and of signals to
//! distlock's job, `kill -STOP` of distlock included), with every signal blocked, holding the
//! read end of a pipe whose only writers are distlock's threads. When distlock is done it writes
//! "disarmed" and the guard exits. When distlock dies instead, the kernel closes the pipe, the
//! guard reads end-of-file, and sends SIGKILL to the group.
//!
//! The command names its own group to the guard, between clone and exec (see
//! [`super::spawn`]): the guard knows the group before the command runs its first instruction.
//! (When distlock sent that message after the spawn, a loaded machine could run the command
//! for milliseconds before distlock was scheduled again; a distlock SIGKILLed then left the
//! command's background processes running, which the test suite caught under load.) It names
//! it in memory the three share (the guard's mailbox, see below), not on the guard's pipe: a
//! message there woke the guard, which then preempted the command's exec on a busy machine, on
//! the way from a hand-off to the command's start. The guard reads the group when it needs it:
//! at a deadline, or when distlock's death closes its pipe (after the command's exec, which
//! closes the command's copy).
//!
//! # The deadline
//!
//! The guard holds distlock's own kill deadlines ([`crate::renew::Deadlines`]: `--kill-signal`
//! at T + ttl − grace − margin, SIGKILL at T + ttl − margin, T the send time of the last
//! confirmed renewal), as absolute times on CLOCK_BOOTTIME (see [`crate::clock`]):
//!
//! * the grant's deadlines are in the pipe before the command is spawned, so the guard never
//!   watches a group without a deadline;
//! * every confirmed renewal moves them: the thread that confirms it (the renewer) writes the new
//!   deadlines to the pipe *before* it tells distlock's main thread, so the guard's deadline is
//!   never earlier than distlock's own (and the guard takes the later of what it has and what it
//!   reads: it never moves a deadline earlier);
//! * when a deadline passes without a move, the guard does what distlock would have done: the
//!   kill signal (and SIGCONT, so that stopped members handle it) to the group, SIGKILL at the
//!   second deadline (at once, if that has passed too), and then it exits with [`FIRED`]. It
//!   also raises a flag at the bottom of its own stack as it fires (see [`Guard::has_fired`]),
//!   for a distlock that runs again before the guard is done. distlock, once it runs again, ends
//!   the run with the lock-lost exit code, saying that the guard ended the command;
//! * when distlock starts a kill sequence itself (a lost lock, processes left behind), it says so
//!   first: the guard then sends no kill signal of its own (the command would get two) and only
//!   backs up the SIGKILL at its deadline. To keep the two from crossing when both are awake
//!   (their timers fire at the same instant, on two CPUs), distlock gets a head start on the
//!   kill signal ([`head_start`]: a quarter of the grace, at most 50ms); the guard's SIGKILL
//!   deadline is distlock's, to the nanosecond.
//!
//! The guard waits in `ppoll` on its pipe and on a timerfd on CLOCK_BOOTTIME armed at its next
//! deadline (absolute), so that a deadline that passed while the machine was suspended fires as
//! soon as it resumes. It reads everything waiting in its pipe before it looks at the clock: a
//! guard that was stopped and continued acts on the latest deadline, never on one that a renewal
//! has moved meanwhile. Every message is shorter than PIPE_BUF, so each `write` arrives whole
//! whichever thread makes it; the pipe is non-blocking, so that a guard that does not read (it
//! is stopped) never blocks a renewal: once its pipe is full, after thousands of renewals, the
//! supervisor replaces it (see [`Line::take_clogged`]). A replacement (for a guard that died or
//! clogged) finds the latest deadline in its pipe, and the group in its mailbox, before it runs.
//!
//! # How it is started
//!
//! Every `distlock run` pays for it: re-executing distlock as the guard cost about 0.7 ms of
//! CPU; a `fork()` cost a page-table copy and then a copy-on-write fault for every page distlock
//! wrote afterwards (224 page faults per run instead of 174; 1.57x flock instead of 1.46x). So
//! the guard is a `clone(CLONE_VM)`: a process of its own (its own pid, session, fd table and
//! signal mask) that shares distlock's memory, like a thread that is not one. It runs on a
//! small stack of its own, touches no memory but that stack, and makes its few system calls
//! directly (`syscall` instruction), so that it never touches libc's thread-local state (errno)
//! — which it shares with distlock's main thread. Measured: 162 page faults per run, 1.41x
//! flock. When distlock dies, the guard keeps the address space alive for the microseconds it
//! needs.
//!
//! The group id cannot be recycled under the guard while the command runs: a process-group id
//! stays taken while any member lives. Once distlock has seen the group empty it tells the guard
//! to forget it ([`Guard::group_gone`]), so that a deadline passing later (distlock stopped
//! during the release) cannot reach a new group that took the same id.
//!
//! # Limits
//!
//! Sharing distlock's memory has one cost: the OOM killer kills every process that shares its
//! victim's memory, so a distlock chosen by the OOM killer takes its guard along (the command
//! itself still dies of PR_SET_PDEATHSIG; its own children do not). A guard killed on its own
//! (`pkill distlock` matches `distlock-guard`) is reaped by distlock, which starts another (see
//! `supervise`); both killed within the same moment leave the command's children to themselves.
//! A guard stopped on its own is covered by distlock, which keeps its deadlines as before. A
//! distlock and its guard *both* stopped (`pkill -STOP distlock` matches both) leave the command
//! unwatched until one of them runs again; the first to run kills it at once, its deadline
//! having passed.
//!
//! # Files
//!
//! distlock's side: [`Line`] (the shared way to the current guard, in `line.rs`) and
//! [`Guard`] (one running guard: its start by `clone`, its mailbox, in `handle.rs`). Between
//! the two sides: the messages on the pipe (`message.rs`). The guard's side: its whole life
//! from its first instruction (`process.rs`), on the raw system calls of `syscall.rs`.

mod handle;
mod line;
mod message;
mod process;
mod syscall;
#[cfg(test)]
mod tests;

pub use handle::Guard;
pub use line::{Line, head_start};

/// The guard's process name (what `ps` and /proc/PID/comm show).
pub const NAME: &[u8] = b"distlock-guard\0";

/// The guard's exit status when distlock disarmed it.
pub const DISARMED: i32 = 0;
/// The guard's exit status when it found its pipe in a state it cannot reason about (it then
/// does nothing, rather than kill a healthy command).
pub const CONFUSED: i32 = 1;
/// The guard's exit status when distlock died (its pipe closed) and it killed the group.
pub const ORPHANED: i32 = 2;
/// The guard's exit status when a kill deadline passed without a confirmed renewal and the
/// guard ended the command itself (kill signal, then SIGKILL).
pub const FIRED: i32 = 3;
/// The guard's exit status when distlock had started killing the group itself, and the guard
/// sent SIGKILL at its deadline as a backup.
pub const BACKED_UP: i32 = 4;

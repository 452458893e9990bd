//! Handing the controlling terminal to the child's process group, the way a shell does for
//! every job, so that an interactive child (`bash -i`, `psql`, `vim`) reads the terminal and
//! gets Ctrl-C/Ctrl-Z exactly once, while distlock keeps the child in a group of its own that it
//! can kill as a whole.
//!
//! Only when stdin is a terminal *and* distlock is its foreground process group; otherwise
//! (cron, CI, pipes, a background job) there is nothing to hand over.

use std::os::fd::BorrowedFd;

use nix::sys::termios::{self, SetArg, Termios};
use nix::unistd::{self, Pid};

/// The controlling terminal on stdin, while distlock may hand it over.
pub struct Terminal {
    our_group: Pid,
    /// Our terminal settings, restored whenever we take the terminal back.
    ours: Option<Termios>,
    /// The child's settings when it stopped (restored when it resumes, like a shell does).
    childs: Option<Termios>,
}

fn stdin() -> BorrowedFd<'static> {
    // SAFETY: fd 0 stays open for the life of the process; we never close it.
    unsafe { BorrowedFd::borrow_raw(0) }
}

impl Terminal {
    /// The terminal, if stdin is one and distlock is in its foreground process group.
    pub fn detect() -> Option<Terminal> {
        if !unistd::isatty(stdin()).unwrap_or(false) {
            return None;
        }
        let our_group = unistd::getpgrp();
        if unistd::tcgetpgrp(stdin()).ok()? != our_group {
            return None;
        }
        Some(Terminal {
            our_group,
            ours: termios::tcgetattr(stdin()).ok(),
            childs: None,
        })
    }

    /// Make `group` the terminal's foreground group. (SIGTTOU is ignored by distlock, so this
    /// works from the background too.)
    pub fn give_to(&self, group: Pid) {
        let _ = unistd::tcsetpgrp(stdin(), group);
    }

    /// Whether distlock's group is the terminal's foreground group right now.
    pub fn we_are_foreground(&self) -> bool {
        unistd::tcgetpgrp(stdin()).ok() == Some(self.our_group)
    }

    /// Take the terminal back (the child exited or stopped), saving the child's settings and
    /// restoring ours.
    pub fn take_back(&mut self) {
        self.childs = termios::tcgetattr(stdin()).ok();
        let _ = unistd::tcsetpgrp(stdin(), self.our_group);
        if let Some(ours) = &self.ours {
            let _ = termios::tcsetattr(stdin(), SetArg::TCSADRAIN, ours);
        }
    }

    /// Hand the terminal back to a resuming child, with the settings it had when it stopped.
    pub fn resume(&mut self, group: Pid) {
        if let Some(childs) = self.childs.take() {
            let _ = termios::tcsetattr(stdin(), SetArg::TCSADRAIN, &childs);
        }
        self.give_to(group);
    }
}

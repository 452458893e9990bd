//! The child: how it is started ([`spawn`]), the guard that kills its group if distlock dies
//! or does not act in time ([`guard`]: a dead-man's switch on the kill deadlines), the terminal
//! hand-off ([`terminal`]), and the event loop that supervises it until it and its process group
//! are gone ([`supervise`]). Which signals distlock catches is
//! process-wide policy, in [`crate::signals`].
//!
//! Nothing here talks to Redis; the supervisor learns about the lock through events.

pub mod guard;
pub mod spawn;
pub mod supervise;
pub mod terminal;

/// Make distlock the reaper of the child's orphaned descendants, so that processes the child
/// leaves behind are reaped by us (and a group that has emptied is seen as empty).
pub fn become_subreaper() {
    // SAFETY: PR_SET_CHILD_SUBREAPER takes an integer flag and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

//! Transparent huge pages only where they pay.
//!
//! The core plugin's allocator (mimalloc) asks the kernel for transparent huge pages on its
//! arenas. On a large capture that is a big win (tens of thousands of 4 KB page faults become
//! a few thousand), but the first touch of a huge page zeroes 2 MB, and a one-shot CLI call on
//! a small capture touches a few such pages for a heap of a few hundred KB: measured, ~9 % of
//! the whole process's CPU time on the 1 MB seed capture went to `folio_zero_user`.
//!
//! So a plugin that uses such an allocator calls [`defer_huge_pages`] when it is loaded
//! (before its first allocation), and [`crate::session`] calls [`allow_huge_pages`] as soon as
//! it knows the call is not a small CLI one (a large capture, or a long-lived MCP server). Only
//! a setting this module made is undone: a process started with huge pages disabled keeps
//! them disabled. The kernel checks the setting at each page fault, so it applies from then
//! on. Both are no-ops outside Linux.

use std::sync::atomic::{AtomicBool, Ordering};

/// Did [`defer_huge_pages`] turn transparent huge pages off for this process?
static DEFERRED: AtomicBool = AtomicBool::new(false);

/// Turn transparent huge pages off for this process until [`allow_huge_pages`], unless they
/// are off already.
pub fn defer_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with these options reads and sets a flag of the calling process; it
    // touches no memory of ours.
    unsafe {
        if libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) == 0
            && libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0
        {
            DEFERRED.store(true, Ordering::Relaxed);
        }
    }
}

/// Undo [`defer_huge_pages`] (nothing if it did not turn them off).
pub fn allow_huge_pages() {
    if !DEFERRED.swap(false, Ordering::Relaxed) {
        return;
    }
    #[cfg(target_os = "linux")]
    // SAFETY: as above.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 0, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether huge pages are off for this process (`None`: not known on this system).
    fn huge_pages_disabled() -> Option<bool> {
        #[cfg(target_os = "linux")]
        // SAFETY: as above.
        unsafe {
            return match libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) {
                r if r < 0 => None,
                r => Some(r == 1),
            };
        }
        #[allow(unreachable_code)]
        None
    }

    #[test]
    fn deferring_turns_huge_pages_off_and_allowing_restores_only_what_it_turned_off() {
        let _settings = crate::tests::PROCESS_SETTINGS
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let Some(before) = huge_pages_disabled() else {
            return; // not Linux
        };
        defer_huge_pages();
        assert_eq!(huge_pages_disabled(), Some(true));
        allow_huge_pages();
        assert_eq!(huge_pages_disabled(), Some(before));
        allow_huge_pages(); // a second call changes nothing
        assert_eq!(huge_pages_disabled(), Some(before));
    }
}

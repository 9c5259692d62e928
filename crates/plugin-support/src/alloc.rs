//! The allocator of the capture plugins: the C library's for a small CLI call, mimalloc for
//! everything else.
//!
//! mimalloc pays on large captures (see [`crate::capture_plugin_allocator`]), but it keeps each
//! size class on pages of its own and writes its free lists into fresh pages as it hands them
//! out, so a call that allocates a few hundred KB in many sizes touches many more pages than
//! the C allocator, which packs them together. A small call spends most of its time on page
//! faults: on the benchmark VM, seed `aggregate_xplane_events` (60 interleaved runs) had 342
//! page faults and took 3.26 ms with mimalloc throughout, 275 and 3.13 ms with the C allocator
//! throughout (`get_overview` 3.71 → 3.58 ms).
//!
//! So [`PluginAllocator`] allocates from the C allocator until [`use_mimalloc`] is called, and
//! from mimalloc afterwards; [`crate::session`] calls it as soon as a call is known not to be a
//! small CLI one (as it allows huge pages, [`crate::pages`]). Each block is freed or resized by
//! the allocator that owns it, whatever the mode is by then: mimalloc answers whether an
//! address is in its heap (`mi_is_in_heap_region`, an arena range check or a bit in its
//! segment map), and until the switch no block can be mimalloc's.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

use mimalloc::MiMalloc;

/// Set once by [`use_mimalloc`], never cleared: from then on new blocks are mimalloc's. A block
/// mimalloc handed out was allocated after the store, so any thread freeing it (having got it
/// through some synchronisation) sees the flag set.
static MIMALLOC: AtomicBool = AtomicBool::new(false);

/// Allocate from mimalloc from now on. Idempotent.
pub fn use_mimalloc() {
    MIMALLOC.store(true, Ordering::Release);
}

/// Does new memory come from mimalloc?
pub fn uses_mimalloc() -> bool {
    MIMALLOC.load(Ordering::Acquire)
}

/// Is `ptr` a block of mimalloc's heap?
#[inline]
fn mimalloc_owns(ptr: *mut u8) -> bool {
    // SAFETY: a query on an address; mimalloc reads its own arena table and segment map only
    // (it reads a segment header only for addresses its map says it allocated).
    uses_mimalloc() && unsafe { libmimalloc_sys::mi_is_in_heap_region(ptr.cast()) }
}

/// The C library's allocator, then mimalloc (module docs).
pub struct PluginAllocator;

// SAFETY: every block comes from `System` or `MiMalloc`, both sound `GlobalAlloc`s, and is
// returned (freed or resized) to the one that handed it out, which `mimalloc_owns` tells apart.
unsafe impl GlobalAlloc for PluginAllocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            if uses_mimalloc() {
                MiMalloc.alloc(layout)
            } else {
                System.alloc(layout)
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            if uses_mimalloc() {
                MiMalloc.alloc_zeroed(layout)
            } else {
                System.alloc_zeroed(layout)
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` is a live block of ours with this layout; it goes back to its owner.
        unsafe {
            if mimalloc_owns(ptr) {
                MiMalloc.dealloc(ptr, layout)
            } else {
                System.dealloc(ptr, layout)
            }
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract (live block, this layout, valid new size), passed on to
        // the block's owner; a C-library block resized after the switch moves to mimalloc with
        // the same alignment, and the old block is freed only once copied.
        unsafe {
            if mimalloc_owns(ptr) {
                return MiMalloc.realloc(ptr, layout, new_size);
            }
            if !uses_mimalloc() {
                return System.realloc(ptr, layout, new_size);
            }
            let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
            let moved = MiMalloc.alloc(new_layout);
            if !moved.is_null() {
                std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                System.dealloc(ptr, layout);
            }
            moved
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Blocks made through [`PluginAllocator`] before the switch (the test binary itself runs
    /// on the system allocator).
    pub struct Before {
        small: *mut u8,
        wide: *mut u8,
        kept: *mut u8,
    }

    const SMALL: Layout = Layout::new::<[u64; 3]>();
    const WIDE: (usize, usize) = (100, 64);

    pub fn before_the_switch() -> Before {
        assert!(!uses_mimalloc());
        let a = PluginAllocator;
        let wide = Layout::from_size_align(WIDE.0, WIDE.1).unwrap();
        // SAFETY: fresh blocks, written within their sizes.
        unsafe {
            let b = Before {
                small: a.alloc(SMALL),
                wide: a.alloc_zeroed(wide),
                kept: a.alloc(SMALL),
            };
            assert!(!b.small.is_null() && !b.wide.is_null() && !b.kept.is_null());
            b.small.write_bytes(7, SMALL.size());
            b.kept.write_bytes(9, SMALL.size());
            assert!(
                std::slice::from_raw_parts(b.wide, WIDE.0)
                    .iter()
                    .all(|&x| x == 0)
            );
            b
        }
    }

    /// After the switch: the C library's blocks go back to it, a resized one moves to
    /// mimalloc with its bytes, new blocks are mimalloc's with their alignment.
    pub fn after_the_switch(b: Before) {
        assert!(uses_mimalloc());
        let a = PluginAllocator;
        let wide = Layout::from_size_align(WIDE.0, WIDE.1).unwrap();
        // SAFETY: every block is returned once, with the layout it has.
        unsafe {
            assert!(!mimalloc_owns(b.small) && !mimalloc_owns(b.wide));
            a.dealloc(b.small, SMALL);
            let grown = a.realloc(b.kept, SMALL, 4096);
            assert!(mimalloc_owns(grown));
            assert!(
                std::slice::from_raw_parts(grown, SMALL.size())
                    .iter()
                    .all(|&x| x == 9)
            );
            let after = a.alloc(wide);
            assert!(mimalloc_owns(after));
            assert_eq!(after as usize % WIDE.1, 0);
            let shrunk = a.realloc(grown, Layout::from_size_align(4096, 8).unwrap(), 64);
            assert!(mimalloc_owns(shrunk));
            assert!(
                std::slice::from_raw_parts(shrunk, SMALL.size())
                    .iter()
                    .all(|&x| x == 9)
            );
            a.dealloc(shrunk, Layout::from_size_align(64, 8).unwrap());
            a.dealloc(after, wide);
            a.dealloc(b.wide, wide);
        }
    }
}

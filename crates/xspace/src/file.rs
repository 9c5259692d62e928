//! Reading capture files without trusting them to hold still or to be what they say.
//!
//! Every reader of the capture plugins' inputs goes through here (issue 30, cases 2 and 3):
//! - Only regular files are read: a FIFO, a device or a socket is refused with an error that
//!   names it, before any byte is read (a FIFO would block, `/dev/zero` would never end).
//! - A read is bounded by the size the file had when it was opened: a file whose size reads as
//!   0 but streams data (`/proc/self/pagemap`) gives 0 bytes, not gigabytes.
//! - A memory-mapped file truncated by another process while it is read raises `SIGBUS` on the
//!   next access to a page past its new end. [`MappedRegion`] registers the mapping; the
//!   process's `SIGBUS` handler, when the fault is inside a registered mapping, writes the
//!   usual one-line JSON error naming the file ("changed while being read", `invalid_value`)
//!   to stderr and exits with code 4. A fault anywhere else keeps the signal's previous
//!   behaviour (the handler puts it back and returns, so the access faults again).

use std::io::{self, Read};
use std::path::Path;

/// Open `path` for reading, refusing anything but a regular file (directories included).
/// The type is checked before the open (opening a FIFO blocks until a writer comes) and
/// again on what was opened.
pub fn open_regular(path: &Path) -> io::Result<(std::fs::File, std::fs::Metadata)> {
    check_regular(&std::fs::metadata(path)?)?;
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    check_regular(&meta)?;
    Ok((file, meta))
}

fn check_regular(meta: &std::fs::Metadata) -> io::Result<()> {
    if meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            "is a directory, not a file",
        ));
    }
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "is not a regular file (a FIFO, device or socket); pass the capture file itself",
        ));
    }
    Ok(())
}

/// The whole of a regular file, as many bytes as its size when opened and no more. A file
/// that shrank meanwhile is an error saying so.
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    let (file, meta) = open_regular(path)?;
    read_opened(file, meta.len())
}

/// [`read`] as text (UTF-8, lossy: dumps are text, and a stray byte must not lose the file).
pub fn read_text(path: &Path) -> io::Result<String> {
    let bytes = read(path)?;
    Ok(match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// Read `len` bytes of an opened file, at most.
pub(crate) fn read_opened(file: std::fs::File, len: u64) -> io::Result<Vec<u8>> {
    let cap = usize::try_from(len).map_err(|_| io::Error::other("the file is too large"))?;
    let mut buf = Vec::with_capacity(cap);
    file.take(len).read_to_end(&mut buf)?;
    if (buf.len() as u64) < len {
        return Err(changed());
    }
    Ok(buf)
}

fn changed() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, CHANGED)
}

/// What a file that changed under a call is said to have done.
pub const CHANGED: &str =
    "the file changed while being read (truncated or rewritten by another process)";

/// What to do about it.
pub const CHANGED_HINT: &str = "wait until whatever writes the capture has finished (or copy it somewhere stable), then run the call again";

/// A memory mapping of a file, registered with the `SIGBUS` handler while it lives.
pub(crate) struct MappedRegion {
    map: memmap2::Mmap,
    _guard: sigbus::Registration,
}

impl MappedRegion {
    /// Map `file` (opened from `path`) read-only.
    ///
    /// # Safety
    /// As `memmap2::Mmap::map`: the bytes may change under the map; a truncation is caught by
    /// the `SIGBUS` handler (module docs) and ends the process with an error naming `path`.
    pub(crate) unsafe fn map(file: &std::fs::File, path: &Path) -> io::Result<MappedRegion> {
        // SAFETY: the caller's contract, passed on.
        let map = unsafe { memmap2::MmapOptions::new().map(file)? };
        let guard = sigbus::register(map.as_ptr() as usize, map.len(), path);
        // A failpoint for the end-to-end tests that a capture truncated under its map is one
        // failed call (exit 4, the JSON error), over MCP too. Debug builds only.
        #[cfg(debug_assertions)]
        if std::env::var_os("XPROF_FAILPOINT_TRUNCATE_MAPPED")
            .is_some_and(|name| path.file_name() == Some(name.as_os_str()))
        {
            std::fs::OpenOptions::new()
                .write(true)
                .open(path)?
                .set_len(0)?;
        }
        Ok(MappedRegion { map, _guard: guard })
    }
}

impl std::ops::Deref for MappedRegion {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map
    }
}

/// The one-line JSON error the handler prints for a file that changed (CONVENTIONS.md: one
/// object on stderr, `tool` unknown at that depth).
fn changed_report(path: &Path) -> Vec<u8> {
    let error = serde_json::json!({
        "error": {
            "kind": "invalid_value",
            "message": format!("{}: {CHANGED}", path.display()),
            "hint": CHANGED_HINT,
        },
        "tool": null,
    });
    let mut line = error.to_string().into_bytes();
    line.push(b'\n');
    line
}

#[cfg(target_os = "linux")]
mod sigbus {
    use std::path::Path;
    use std::ptr::null_mut;
    use std::sync::Once;
    use std::sync::atomic::{AtomicPtr, Ordering};

    /// Mappings live at once that the handler can name; more are mapped unregistered (a
    /// truncation of one of those is a plain `SIGBUS`, as before).
    const SLOTS: usize = 256;

    struct Region {
        start: usize,
        end: usize,
        report: Box<[u8]>,
    }

    static REGIONS: [AtomicPtr<Region>; SLOTS] = [const { AtomicPtr::new(null_mut()) }; SLOTS];
    static INSTALL: Once = Once::new();
    /// The action before ours, put back for a fault outside every registered mapping.
    static PREVIOUS: AtomicPtr<libc::sigaction> = AtomicPtr::new(null_mut());

    pub(crate) struct Registration(Option<usize>);

    impl Drop for Registration {
        fn drop(&mut self) {
            // The region is leaked, not freed: the handler may be reading the slot on another
            // thread, and a few bytes per mapping is nothing next to the mapping itself.
            if let Some(i) = self.0 {
                REGIONS[i].store(null_mut(), Ordering::Release);
            }
        }
    }

    pub(crate) fn register(start: usize, len: usize, path: &Path) -> Registration {
        INSTALL.call_once(install);
        let region = Box::into_raw(Box::new(Region {
            start,
            end: start.saturating_add(len),
            report: super::changed_report(path).into_boxed_slice(),
        }));
        for (i, slot) in REGIONS.iter().enumerate() {
            if slot
                .compare_exchange(null_mut(), region, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return Registration(Some(i));
            }
        }
        // SAFETY: not published to any slot, so this is its only owner.
        drop(unsafe { Box::from_raw(region) });
        Registration(None)
    }

    fn install() {
        // SAFETY: plain sigaction calls on zeroed structs; the handler only reads atomics and
        // calls async-signal-safe functions (write, _exit, sigaction).
        unsafe {
            let mut ours: libc::sigaction = std::mem::zeroed();
            ours.sa_sigaction = on_sigbus as *const () as usize;
            ours.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut ours.sa_mask);
            let previous = Box::into_raw(Box::new(std::mem::zeroed::<libc::sigaction>()));
            if libc::sigaction(libc::SIGBUS, &ours, previous) == 0 {
                PREVIOUS.store(previous, Ordering::Release);
            }
        }
    }

    extern "C" fn on_sigbus(
        _sig: libc::c_int,
        info: *mut libc::siginfo_t,
        _ctx: *mut libc::c_void,
    ) {
        // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers; the regions are
        // never freed once published (see `Registration::drop`).
        unsafe {
            let addr = (*info).si_addr() as usize;
            for slot in &REGIONS {
                let r = slot.load(Ordering::Acquire);
                if !r.is_null() && (*r).start <= addr && addr < (*r).end {
                    let report = &(*r).report;
                    libc::write(2, report.as_ptr().cast(), report.len());
                    libc::_exit(4);
                }
            }
            let previous = PREVIOUS.load(Ordering::Acquire);
            if !previous.is_null() {
                libc::sigaction(libc::SIGBUS, previous, null_mut());
            } else {
                libc::signal(libc::SIGBUS, libc::SIG_DFL);
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod sigbus {
    pub(crate) struct Registration;
    pub(crate) fn register(_: usize, _: usize, _: &std::path::Path) -> Registration {
        Registration
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_refused_before_any_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("host0.xplane.pb");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a path string that lives across the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // No writer ever comes: an open of the FIFO would block this test forever.
        let e = read(&fifo).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }

    #[test]
    fn a_file_whose_size_reads_as_zero_gives_no_bytes() {
        // /proc files report size 0 and stream data; pagemap would stream gigabytes.
        assert_eq!(read(Path::new("/proc/self/pagemap")).unwrap().len(), 0);
    }

    const CHILD: &str = "XPROF_TEST_TRUNCATE_UNDER_THE_MAP";

    /// Issue 30, case 2: a mapped capture truncated by another process raised SIGBUS (exit
    /// 135, no JSON). The test runs itself again as a child that maps a file, truncates it and
    /// reads past the new end; the child must end with exit 4 and the JSON error naming it.
    #[test]
    fn a_mapped_file_truncated_while_read_is_exit_4_with_a_json_error_not_sigbus() {
        if let Some(p) = std::env::var_os(CHILD) {
            let p = std::path::PathBuf::from(p);
            let f = std::fs::File::open(&p).unwrap();
            // SAFETY: the test truncates the file on purpose; the handler must catch it.
            let m = unsafe { MappedRegion::map(&f, &p).unwrap() };
            std::fs::OpenOptions::new()
                .write(true)
                .open(&p)
                .unwrap()
                .set_len(0)
                .unwrap();
            let byte = std::hint::black_box(m[m.len() / 2]);
            panic!("read {byte} past the end of a truncated file without a SIGBUS");
        }
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("host0.xplane.pb");
        std::fs::write(&p, vec![7u8; 1 << 20]).unwrap();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "file::tests::a_mapped_file_truncated_while_read_is_exit_4_with_a_json_error_not_sigbus",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, &p)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{:?}: {stderr}", out.status);
        let line = stderr
            .lines()
            .find(|l| l.starts_with("{\"error\""))
            .unwrap_or_else(|| panic!("no JSON error line: {stderr}"));
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["error"]["kind"], "invalid_value", "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(&format!(
                "{}: the file changed while being read",
                p.display()
            )),
            "{v}"
        );
    }

    #[test]
    fn the_report_is_one_json_line_naming_the_file() {
        let line = changed_report(Path::new("/tmp/a \"b\".xplane.pb"));
        assert_eq!(line.last(), Some(&b'\n'));
        let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v["error"]["kind"], "invalid_value");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("/tmp/a \"b\".xplane.pb: the file changed")
        );
    }
}

//! Input manifests: what a call read, as it was, so a hit can be revalidated against the disk.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// An input changed less than this before the call started is "racy": the call may have read
/// bytes older than what the manifest would record, so the result is not stored. Linux stamps
/// files from a coarse clock that lags the real one by at most a tick (1-10 ms), so a change
/// made after the call started can carry a stamp slightly before it; 100 ms covers that.
pub const RACY_MARGIN: Duration = Duration::from_millis(100);

/// The margin on filesystems that keep whole seconds only (ctime without nanoseconds: FAT,
/// ext3, some network filesystems), where a later change can carry a stamp up to 2 s earlier.
pub const RACY_MARGIN_COARSE: Duration = Duration::from_secs(2);

pub(super) fn ns(secs: i64, nsec: i64) -> i128 {
    i128::from(secs) * 1_000_000_000 + i128::from(nsec)
}

/// The state of one input now: `None` if it does not exist (a tool may probe for a file; its
/// later appearance must invalidate the result), else identity and timestamps, plus the size of
/// a file and a digest of the sorted entry names of a directory a tool listed (`"dir"`).
///
/// A plugin directory (`"plugin_dir"`, what the registry index and snapshot depend on) is not
/// listed. The executable's directory is one, and installed that is `<prefix>/bin`, which can
/// hold thousands of entries: measured, 1,500 of them added 1 ms to every call. Its stamps say
/// enough: adding, removing or renaming an entry sets a directory's mtime and ctime, and a
/// stored state is at least [`RACY_MARGIN`] old (see [`manifest`]), so such a change after it
/// was stored carries a later stamp (and ctime cannot be set back). A capture directory keeps
/// its listing: it is small, and some filesystems a logdir lives on (object-store mounts such as
/// gcsfuse) give directories no stamps that change with their entries.
fn input_state(path: &Path, kind: &str) -> Option<(Value, i128, bool)> {
    let m = fs::metadata(path).ok()?;
    let changed = ns(m.mtime(), m.mtime_nsec()).max(ns(m.ctime(), m.ctime_nsec()));
    // The kernel sets ctime itself, so whole seconds there mean a whole-second filesystem.
    let coarse = m.ctime_nsec() == 0;
    let mut st = json!({
        "ino": m.ino(),
        "dev": m.dev(),
        "mtime_ns": ns(m.mtime(), m.mtime_nsec()).to_string(),
        "ctime_ns": ns(m.ctime(), m.ctime_nsec()).to_string(),
    });
    match kind {
        "dir" => {
            let mut names: Vec<String> = fs::read_dir(path)
                .ok()?
                .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect();
            names.sort();
            let mut h = Sha256::new();
            for n in &names {
                h.update(n.as_bytes());
                h.update([0]);
            }
            st["listing"] = Value::from(format!("{:x}", h.finalize()));
        }
        "plugin_dir" => {}
        _ => st["size"] = Value::from(m.size()),
    }
    Some((st, changed, coarse))
}

/// The manifest of `inputs` (the envelope's list), or `None` when the result must not be
/// stored: no inputs, or an input changed too close to `started`.
pub fn manifest(inputs: &[Value], started: SystemTime) -> Option<Value> {
    if inputs.is_empty() {
        return None;
    }
    let since_epoch = started.duration_since(UNIX_EPOCH).ok()?;
    let racy_after = |margin: Duration| {
        i128::try_from(since_epoch.saturating_sub(margin).as_nanos()).unwrap_or(i128::MAX)
    };
    let mut out = Vec::with_capacity(inputs.len());
    for i in inputs {
        let path = i["path"].as_str()?;
        let kind = match i["kind"].as_str() {
            Some("dir") => "dir",
            Some("plugin_dir") => "plugin_dir",
            _ => "file",
        };
        let state = match input_state(Path::new(path), kind) {
            Some((st, changed, coarse)) => {
                let margin = if coarse {
                    RACY_MARGIN_COARSE
                } else {
                    RACY_MARGIN
                };
                if changed >= racy_after(margin) {
                    return None;
                }
                st
            }
            None => Value::Null,
        };
        out.push(json!({"path": path, "kind": kind, "state": state}));
    }
    Some(Value::Array(out))
}

/// The first file among `inputs` whose modification time falls inside the call, from `started`
/// to `finished`: another process wrote it while the tool read it. A rewrite of the same size in
/// place changes no length (the reader's own checks see truncation only), so only the stamp
/// tells. A stamp past `finished` is not counted: on a network filesystem a writer's clock may
/// run ahead, and such a file was not necessarily written during the call. Directories are
/// skipped (a capture directory gains entries while a profiler writes beside it). Linux stamps
/// files from a clock that lags by up to a tick, so a write in the call's first milliseconds
/// can go unseen; a rewrite of a capture takes longer than that, and a window opened earlier
/// would refuse every call made right after a capture was written.
pub fn modified_during(
    inputs: &[Value],
    started: SystemTime,
    finished: SystemTime,
) -> Option<&str> {
    let at = |t: SystemTime| {
        t.duration_since(UNIX_EPOCH)
            .ok()
            .and_then(|d| i128::try_from(d.as_nanos()).ok())
    };
    let (from, to) = (at(started)?, at(finished)?);
    inputs
        .iter()
        .filter(|i| !matches!(i["kind"].as_str(), Some("dir" | "plugin_dir")))
        .filter_map(|i| i["path"].as_str())
        .find(|path| {
            fs::metadata(path).is_ok_and(|m| {
                let mtime = ns(m.mtime(), m.mtime_nsec());
                from < mtime && mtime <= to
            })
        })
}

/// Does the stored manifest still describe the disk?
pub fn manifest_matches(stored: &Value) -> bool {
    let Some(items) = stored.as_array() else {
        return false;
    };
    items.iter().all(|i| {
        let (Some(path), Some(kind)) = (i["path"].as_str(), i["kind"].as_str()) else {
            return false;
        };
        let now = input_state(Path::new(path), kind)
            .map(|(s, _, _)| s)
            .unwrap_or(Value::Null);
        now == i["state"]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn manifests_detect_changes_and_new_directory_entries() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.xplane.pb");
        fs::write(&f, b"abc").unwrap();
        let inputs = vec![
            json!({"path": f.display().to_string(), "kind": "file"}),
            json!({"path": dir.path().display().to_string(), "kind": "dir"}),
        ];
        // Just written: racy, so not storable.
        assert!(manifest(&inputs, SystemTime::now()).is_none());
        // As if the call had started well after the writes.
        let later = SystemTime::now() + RACY_MARGIN_COARSE + Duration::from_secs(1);
        let m = manifest(&inputs, later).unwrap();
        assert!(manifest_matches(&m));
        fs::write(dir.path().join("b.xplane.pb"), b"").unwrap();
        assert!(
            !manifest_matches(&m),
            "a new file in a listed dir invalidates"
        );
        let m = manifest(&inputs, later + RACY_MARGIN_COARSE).unwrap();
        fs::write(&f, b"abd").unwrap();
        assert!(!manifest_matches(&m), "rewriting a read file invalidates");
        assert!(manifest(&[], later).is_none(), "no inputs: not cached");
    }

    /// Set a path's mtime ten seconds back (its ctime becomes now: the kernel sets it).
    fn age(path: &Path) {
        let back = SystemTime::now() - Duration::from_secs(10);
        fs::File::open(path)
            .unwrap()
            .set_times(fs::FileTimes::new().set_modified(back).set_accessed(back))
            .unwrap();
    }

    #[test]
    fn removing_or_renaming_an_entry_of_a_listed_dir_invalidates() {
        for kind in ["dir", "plugin_dir"] {
            entry_changes_invalidate(kind);
        }
    }

    /// The stamps alone see a directory's entries change: a plugin directory is not listed.
    fn entry_changes_invalidate(kind: &str) {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.xplane.pb"), b"abc").unwrap();
        fs::write(dir.path().join("b.xplane.pb"), b"abc").unwrap();
        let inputs = vec![json!({"path": dir.path().display().to_string(), "kind": kind})];
        let later = SystemTime::now() + RACY_MARGIN_COARSE + Duration::from_secs(1);

        age(dir.path());
        let m = manifest(&inputs, later).unwrap();
        assert!(manifest_matches(&m));
        fs::rename(
            dir.path().join("a.xplane.pb"),
            dir.path().join("c.xplane.pb"),
        )
        .unwrap();
        assert!(!manifest_matches(&m), "{kind}: a renamed entry invalidates");

        age(dir.path());
        let m = manifest(&inputs, later).unwrap();
        fs::remove_file(dir.path().join("b.xplane.pb")).unwrap();
        assert!(!manifest_matches(&m), "{kind}: a removed entry invalidates");

        age(dir.path());
        let m = manifest(&inputs, later).unwrap();
        fs::write(dir.path().join("c.xplane.pb"), b"abcd").unwrap();
        assert!(
            manifest_matches(&m),
            "{kind}: rewriting an entry changes the entry, not the directory"
        );
    }

    /// A capture directory's state names its entries (its stamps may not follow them on an
    /// object-store mount); a plugin directory's does not (it may be a `bin/` of thousands).
    #[test]
    fn only_a_capture_directory_is_listed() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.xplane.pb"), b"abc").unwrap();
        let state = |kind| input_state(dir.path(), kind).unwrap().0;
        let listed = state("dir")["listing"].as_str().unwrap().to_string();
        assert_eq!(listed.len(), 64);
        assert!(state("plugin_dir").get("listing").is_none());
        fs::write(dir.path().join("b.xplane.pb"), b"abc").unwrap();
        assert_ne!(state("dir")["listing"].as_str().unwrap(), listed);
    }

    #[test]
    fn absent_inputs_are_recorded_and_their_appearance_invalidates() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("later.pb");
        let inputs = vec![json!({"path": f.display().to_string(), "kind": "file"})];
        let m = manifest(&inputs, SystemTime::now()).unwrap();
        assert!(manifest_matches(&m));
        fs::write(&f, b"x").unwrap();
        assert!(!manifest_matches(&m));
    }
}

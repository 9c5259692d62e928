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
/// later appearance must invalidate the result), else identity and timestamps, plus a digest of
/// the sorted entry names for a directory.
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
    if kind == "dir" {
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
    } else {
        st["size"] = Value::from(m.size());
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
        let kind = if i["kind"].as_str() == Some("dir") {
            "dir"
        } else {
            "file"
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

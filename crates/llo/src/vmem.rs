//! VMEM allocations from the `#allocation<id> [shape = …, space=vmem, size = 0x…, …]` header
//! of an LLO IR pass.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use crate::dump::{DumpIndex, Instance, PassFile};
use crate::{Result, read_head, read_text};

/// `size = 0xFFFFFFFFFFFFFFFF` means the size was not resolved at this pass.
pub const UNRESOLVED_SIZE: u64 = u64::MAX;
pub const SCOPED_DEFAULT_BYTES: u64 = 32 * 1024 * 1024;
pub const HARDWARE_BYTES: u64 = 128 * 1024 * 1024;

static ALLOC_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"#allocation(\d+)\s*\[shape = '([^']*)',\s*space=(\w+),\s*size = (0x[0-9a-fA-F]+)([^\]]*)\]",
    )
    .unwrap()
});
static TAG_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"tag = '([^']*)'").unwrap());

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Allocation {
    pub id: u64,
    pub shape: String,
    pub size_bytes: u64,
    pub scoped: bool,
    pub tag: String,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Allocations {
    /// Sorted by size, descending (ties by id).
    pub allocations: Vec<Allocation>,
    pub unresolved: usize,
}

impl Allocations {
    pub fn total(&self) -> u64 {
        self.allocations.iter().map(|a| a.size_bytes).sum()
    }
    pub fn scoped(&self) -> u64 {
        self.allocations
            .iter()
            .filter(|a| a.scoped)
            .map(|a| a.size_bytes)
            .sum()
    }
}

/// VMEM allocations of one IR text, deduplicated by id.
pub fn extract(text: &str) -> Allocations {
    let mut seen: BTreeMap<u64, Allocation> = BTreeMap::new();
    let mut unresolved_ids: Vec<u64> = Vec::new();
    for line in text.lines() {
        if !line.contains("#allocation") || !line.contains("[shape") {
            continue;
        }
        let Some(c) = ALLOC_RE.captures(line) else {
            continue;
        };
        let Ok(id) = c[1].parse::<u64>() else {
            continue;
        };
        if &c[3] != "vmem" || seen.contains_key(&id) || unresolved_ids.contains(&id) {
            continue;
        }
        let Ok(size) = u64::from_str_radix(&c[4][2..], 16) else {
            continue;
        };
        if size == UNRESOLVED_SIZE {
            unresolved_ids.push(id);
            continue;
        }
        let attrs = &c[5];
        seen.insert(
            id,
            Allocation {
                id,
                shape: c[2].to_string(),
                size_bytes: size,
                scoped: attrs.split(',').any(|a| a.trim() == "scoped"),
                tag: TAG_RE
                    .captures(attrs)
                    .map(|t| t[1].to_string())
                    .unwrap_or_default(),
            },
        );
    }
    let mut allocations: Vec<Allocation> = seen.into_values().collect();
    allocations.sort_by(|a, b| b.size_bytes.cmp(&a.size_bytes).then(a.id.cmp(&b.id)));
    Allocations {
        allocations,
        unresolved: unresolved_ids.len(),
    }
}

/// The allocation-bearing pass: labels equal to, then containing, `post-ra`, then
/// `pre-finalize-registers-and-allocations`, then `original`, then every other label; the
/// first whose head holds a well-formed allocation line wins (bundle listings mention
/// `#allocation` too, without the header form).
pub fn find_alloc_pass<'a>(idx: &DumpIndex, inst: &'a Instance) -> Result<Option<&'a PassFile>> {
    let mut order: Vec<&PassFile> = Vec::new();
    for want in [
        "post-ra",
        "pre-finalize-registers-and-allocations",
        "original",
    ] {
        order.extend(inst.passes.values().filter(|p| p.label == want));
        order.extend(
            inst.passes
                .values()
                .filter(|p| p.label != want && p.label.contains(want)),
        );
    }
    order.extend(inst.passes.values());
    let mut tried: Vec<&str> = Vec::new();
    for p in order {
        if tried.contains(&p.label.as_str()) {
            continue;
        }
        tried.push(&p.label);
        let head = match read_head(&idx.path_of(p), 64 * 1024) {
            Ok(h) => h,
            Err(_) => continue,
        };
        if ALLOC_RE.is_match(&head) {
            return Ok(Some(p));
        }
    }
    Ok(None)
}

pub fn extract_file(path: &Path) -> Result<Allocations> {
    Ok(extract(&read_text(path)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_vmem_only_dedup_and_unresolved() {
        let t = "$region0: #{k}\n  #allocation0 [shape = 'u32[]', space=smem, size = 0x4, offset = 0x4, fixed_abs, tag = 'smem constant']\n  #allocation1 [shape = 'u32[144,128]{1,0:T(1,128)}', space=vmem, size = 0x12000, scoped, tag = 'internal scratch']\n    #allocation2 [shape = 'u8[3145728]{0}', space=vmem, size = 0x300000, scoped, tag = 'scoped memory for k']\n  #allocation2 [shape = 'u8[3145728]{0}', space=vmem, size = 0x300000, scoped, tag = 'dup']\n  #allocation9 [shape = 'u8[1]{0}', space=vmem, size = 0xFFFFFFFFFFFFFFFF]\n  #allocation5 [shape = 'u8[16]{0}', space=vmem, size = 0x10]\n";
        let a = extract(t);
        assert_eq!(a.allocations.len(), 3);
        assert_eq!(a.allocations[0].id, 2);
        assert_eq!(a.allocations[0].tag, "scoped memory for k");
        assert_eq!(a.unresolved, 1);
        assert_eq!(a.total(), 0x300000 + 0x12000 + 0x10);
        assert_eq!(a.scoped(), 0x300000 + 0x12000);
        assert!(!a.allocations[2].scoped);
    }
}

static LIMIT_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"xla_tpu_scoped_vmem_limit_kib["']?\s*[:=]\s*["']?(\d+)"#).unwrap()
});

/// The operative `--xla_tpu_scoped_vmem_limit_kib` from an XLA dump directory's `*.flagfile`
/// or `*tpu_comp_env*` files: `(bytes, file)`, or `None` when no file records it.
pub fn scoped_limit_from_hlo_dump(dir: &Path) -> Result<Option<(u64, String)>> {
    let mut names = crate::dump_file_names(dir)?;
    names.retain(|n| n.ends_with(".flagfile") || n.contains("tpu_comp_env"));
    for n in names {
        // Unreadable is a path error: skipping it would report the default limit as if the
        // dump had set none.
        let t = read_text(&dir.join(&n))?;
        if let Some(c) = LIMIT_RE.captures(&t)
            && let Ok(kib) = c[1].parse::<u64>()
        {
            return Ok(Some((kib.saturating_mul(1024), n)));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod limit_tests {
    use super::*;

    #[test]
    fn operative_limit_from_flagfile() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(scoped_limit_from_hlo_dump(t.path()).unwrap(), None);
        std::fs::write(
            t.path().join("module_0001.jit_f.tpu_comp_env.txt"),
            "xla_tpu_scoped_vmem_limit_kib: 65536\n",
        )
        .unwrap();
        assert_eq!(
            scoped_limit_from_hlo_dump(t.path()).unwrap(),
            Some((
                64 * 1024 * 1024,
                "module_0001.jit_f.tpu_comp_env.txt".to_string()
            ))
        );
        std::fs::write(
            t.path().join("a.flagfile"),
            "--xla_tpu_scoped_vmem_limit_kib=16384\n",
        )
        .unwrap();
        assert_eq!(
            scoped_limit_from_hlo_dump(t.path()).unwrap().unwrap().0,
            16 * 1024 * 1024
        );
    }
}

//! Unified diffs between two HLO texts (Python `difflib.unified_diff` style hunks).

use similar::{Algorithm, TextDiff};

/// The result of diffing two stage texts.
#[derive(Clone, Debug)]
pub struct StageDiff {
    pub before_lines: usize,
    pub after_lines: usize,
    /// The unified diff (`--- a`, `+++ b`, `@@ ... @@` hunks); empty when the texts are equal.
    pub diff: String,
    pub added: usize,
    pub removed: usize,
}

/// Line diff of `a` and `b` with `context` lines around each change. Patience diff keeps
/// hunks anchored on unique lines (instruction definitions), which reads like difflib.
pub fn unified(a: &str, b: &str, name_a: &str, name_b: &str, context: usize) -> StageDiff {
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Patience)
        .diff_lines(a, b);
    let mut added = 0;
    let mut removed = 0;
    for change in diff.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Insert => added += 1,
            similar::ChangeTag::Delete => removed += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    let text = if added == 0 && removed == 0 {
        String::new()
    } else {
        diff.unified_diff()
            .context_radius(context)
            .header(name_a, name_b)
            .to_string()
    };
    StageDiff {
        before_lines: a.lines().count(),
        after_lines: b.lines().count(),
        diff: text,
        added,
        removed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hunks_and_equality() {
        let d = unified("a\nb\nc\n", "a\nx\nc\n", "A", "B", 1);
        assert!(
            d.diff
                .starts_with("--- A\n+++ B\n@@ -1,3 +1,3 @@\n a\n-b\n+x\n c\n"),
            "{}",
            d.diff
        );
        assert_eq!((d.added, d.removed), (1, 1));
        let d = unified("a\n", "a\n", "A", "B", 3);
        assert!(d.diff.is_empty());
    }
}

/// Text for a rename-insensitive diff: `metadata={...}` dropped and every `name.N` suffix
/// replaced by `name.#`, so renumbered instructions and moved source locations do not count
/// as changes.
pub fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let line = strip_attr(line, ", metadata={");
        let b = line.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            let starts_name = (c.is_ascii_alphabetic() || c == b'_')
                && (i == 0
                    || !(b[i - 1].is_ascii_alphanumeric()
                        || matches!(b[i - 1], b'_' | b'.' | b'-')));
            if !starts_name {
                out.push(c as char);
                i += 1;
                continue;
            }
            let start = i;
            while i < b.len()
                && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'_' | b'-' | b'.'))
            {
                i += 1;
            }
            let tok = &line[start..i];
            // Strip trailing `.digits` groups (`add.5`, `x.1.clone.2` keeps `x.#.clone.#`).
            let mut norm = String::with_capacity(tok.len());
            for (k, part) in tok.split('.').enumerate() {
                if k > 0 {
                    norm.push('.');
                }
                if k > 0 && !part.is_empty() && part.bytes().all(|d| d.is_ascii_digit()) {
                    norm.push('#');
                } else {
                    norm.push_str(part);
                }
            }
            out.push_str(&norm);
        }
        out.push('\n');
    }
    out
}

/// Remove one balanced `{...}` attribute introduced by `head` (e.g. `, metadata={`).
fn strip_attr(line: &str, head: &str) -> String {
    let Some(start) = line.find(head) else {
        return line.to_string();
    };
    let b = line.as_bytes();
    let mut depth = 0usize;
    let mut j = start + head.len() - 1;
    let mut in_str = false;
    while j < b.len() {
        match b[j] {
            b'\\' if in_str => j += 1,
            b'"' => in_str = !in_str,
            b'{' if !in_str => depth += 1,
            b'}' if !in_str => {
                depth -= 1;
                if depth == 0 {
                    return format!("{}{}", &line[..start], &line[j + 1..]);
                }
            }
            _ => {}
        }
        j += 1;
    }
    line.to_string()
}

/// Per-opcode instruction counts before and after, for the opcodes whose count changed.
pub fn opcode_changes(
    before: &crate::Module,
    after: &crate::Module,
) -> Vec<(String, usize, usize)> {
    use std::collections::BTreeMap;
    let mut m: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for c in &before.computations {
        for i in &c.instructions {
            m.entry(&i.opcode).or_default().0 += 1;
        }
    }
    for c in &after.computations {
        for i in &c.instructions {
            m.entry(&i.opcode).or_default().1 += 1;
        }
    }
    m.into_iter()
        .filter(|(_, (a, b))| a != b)
        .map(|(k, (a, b))| (k.to_string(), a, b))
        .collect()
}

#[cfg(test)]
mod normalize_tests {
    use super::*;

    #[test]
    fn renames_and_metadata_do_not_count() {
        let a = "  %add.5 = f32[2]{0} add(%p.1, %p.2), metadata={op_name=\"a{b}\" source_line=3}\n";
        let b = "  %add.9 = f32[2]{0} add(%p.3, %p.4), metadata={op_name=\"c\"}\n";
        assert_eq!(normalize(a), normalize(b));
        assert_eq!(normalize(a), "  %add.# = f32[2]{0} add(%p.#, %p.#)\n");
        assert_eq!(
            normalize("  c = f32[] constant(0.5)\n"),
            "  c = f32[] constant(0.5)\n"
        );
        let d = unified(&normalize(a), &normalize(b), "A", "B", 3);
        assert!(d.diff.is_empty());
    }
}

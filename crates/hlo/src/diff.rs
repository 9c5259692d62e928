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

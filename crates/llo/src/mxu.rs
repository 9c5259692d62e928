//! MXU mnemonics in a bundle listing and the three-valued operand lane-width inference.
//!
//! Only positive evidence yields a width: a push index other than 1 means full 256-lane
//! tile staging, pushes with index 1 alone mean 128-lane staging, anything else (no push,
//! or an MXU-looking mnemonic the model does not know) is `null` with the reason.

use serde_json::{Value, json};
use std::collections::BTreeMap;

use crate::bundles::strip_comments;

// The leading `v` is required: listings spell these `vmat…`, while HLO names in comments
// (`matmul.3`) and prose ("materialized") must not count.
const DTYPES: &[&str] = &[
    "bf16", "f32", "f16", "s8", "u8", "s16", "s32", "f8e4m3", "f8e5m2", "x8", "hf8", "qf8",
];
const UNITS: &[&str] = &["mxu0", "mxu1", "mxu2", "mxu3"];

#[derive(Clone, Debug, Default, PartialEq)]
pub struct MxuScan {
    pub op_counts: BTreeMap<String, u64>,
    pub dtypes: BTreeMap<String, u64>,
    pub mxus_used: Vec<String>,
    pub unmodeled: BTreeMap<String, u64>,
    /// Modeled op counts per MXU unit.
    pub per_unit: BTreeMap<String, BTreeMap<String, u64>>,
    /// `vpop….mrf.mxuN`: result pops from the MXU result FIFO, per unit.
    pub result_pops: BTreeMap<String, u64>,
    pub push_kinds: Vec<String>,
}

impl MxuScan {
    pub fn matmul_count(&self) -> u64 {
        self.op_counts
            .iter()
            .filter(|(k, _)| k.starts_with("matmul"))
            .map(|(_, v)| v)
            .sum()
    }

    /// `(lanes, basis)`: 256 / 128 from positive evidence, else `None` with the reason.
    pub fn lanes(&self) -> (Option<u32>, String) {
        if !self.unmodeled.is_empty() {
            let names: Vec<&str> = self.unmodeled.keys().map(String::as_str).collect();
            return (
                None,
                format!(
                    "unmodeled MXU mnemonic(s) {} -> operand lane width indeterminate",
                    names.join(", ")
                ),
            );
        }
        if self.op_counts.is_empty() {
            return (None, String::new());
        }
        let mut higher: Vec<&String> = self
            .push_kinds
            .iter()
            .filter(|p| p.as_str() != "1")
            .collect();
        higher.sort();
        if let Some(h) = higher.first() {
            (
                Some(256),
                format!("matpush1+matpush{h} present -> full 256-lane tile staging"),
            )
        } else if self.push_kinds.iter().any(|p| p == "1") {
            (
                Some(128),
                "only matpush1 present -> 128-lane (half-width) staging".into(),
            )
        } else {
            (
                None,
                "no matpush mnemonic observed -> operand lane width indeterminate".into(),
            )
        }
    }

    /// The seed's `mxu` object plus the per-unit split and result pops.
    pub fn to_json(&self) -> Value {
        let (lanes, basis) = self.lanes();
        json!({
            "matmul_count": self.matmul_count(),
            "op_counts": self.op_counts,
            "dtypes": self.dtypes,
            "mxus_used": self.mxus_used,
            "unmodeled_mnemonics": self.unmodeled,
            "inferred_operand_lanes": lanes,
            "lane_inference": basis,
            "per_mxu_op_counts": self.per_unit,
            "mxu_result_pops": self.result_pops,
            "scope": "instruction text only (/* comments */ excluded)",
        })
    }
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// `.seg.seg…` modifiers after a mnemonic: lowercase/digit segments, each ending at a word
/// boundary (the `(?:\.[a-z0-9]+)*\b` of the mnemonic grammar).
fn modifiers(b: &[u8], mut i: usize) -> (usize, Vec<&str>) {
    let mut mods = Vec::new();
    while i < b.len() && b[i] == b'.' {
        let s = i + 1;
        let mut e = s;
        while e < b.len() && (b[e].is_ascii_lowercase() || b[e].is_ascii_digit()) {
            e += 1;
        }
        if e == s || (e < b.len() && is_word(b[e])) {
            break;
        }
        mods.push(std::str::from_utf8(&b[s..e]).unwrap_or(""));
        i = e;
    }
    (i, mods)
}

/// Count MXU mnemonics in listing text, outside `/* … */` comments. Hand-scanned (this runs
/// over multi-megabyte listings): a mnemonic is `v` + `mat<letters><digits>` at a word
/// boundary; `matmul`, `matprep`, `matpop`, `matres` and `matpush<N>` are modeled, any other
/// is recorded as unmodeled.
pub fn scan_mxu_mnemonics(text: &str) -> MxuScan {
    let code = strip_comments(text);
    let b = code.as_bytes();
    let mut s = MxuScan::default();
    let mut push: Vec<String> = Vec::new();
    let mut units: Vec<String> = Vec::new();
    // Candidate positions of `vmat` and `vpop.` (substring search is far cheaper than
    // visiting every `v`: register names are full of them), in text order.
    let mut starts: Vec<usize> = code.match_indices("vmat").map(|(i, _)| i).collect();
    starts.extend(code.match_indices("vpop.").map(|(i, _)| i));
    starts.sort_unstable();
    let mut i = 0;
    for at in starts {
        if at < i || (at > 0 && is_word(b[at - 1])) {
            continue;
        }
        i = at + 1;
        let rest = &b[at + 1..];
        if rest.starts_with(b"mat") {
            let mut e = at + 1;
            while e < b.len() && b[e].is_ascii_lowercase() {
                e += 1;
            }
            let letters_end = e;
            while e < b.len() && b[e].is_ascii_digit() {
                e += 1;
            }
            if e < b.len() && is_word(b[e]) {
                continue;
            }
            let base = &code[at + 1..e];
            let letters = &code[at + 1..letters_end];
            let digits = &code[letters_end..e];
            let modeled = match letters {
                "matmul" | "matprep" | "matpop" | "matres" => digits.is_empty(),
                "matpush" => !digits.is_empty(),
                _ => false,
            };
            if !modeled {
                *s.unmodeled.entry(format!("v{base}")).or_default() += 1;
                i = e;
                continue;
            }
            let (end, mods) = modifiers(b, e);
            i = end;
            let op = base.to_string();
            *s.op_counts.entry(op.clone()).or_default() += 1;
            if letters == "matpush" && !push.iter().any(|x| x == digits) {
                push.push(digits.to_string());
            }
            if letters == "matmul" || letters == "matpush" {
                let mut seen: Vec<&str> = Vec::new();
                for d in mods.iter().filter(|m| DTYPES.contains(m)) {
                    if !seen.contains(d) {
                        seen.push(d);
                        *s.dtypes.entry(d.to_string()).or_default() += 1;
                    }
                }
            }
            for u in mods.iter().filter(|m| UNITS.contains(m)) {
                if !units.iter().any(|x| x == u) {
                    units.push(u.to_string());
                }
                *s.per_unit
                    .entry(u.to_string())
                    .or_default()
                    .entry(op.clone())
                    .or_default() += 1;
            }
        } else if rest.starts_with(b"pop.") {
            let (end, mods) = modifiers(b, at + 4);
            i = end;
            if (end >= b.len() || !is_word(b[end]))
                && mods.contains(&"mrf")
                && let Some(u) = mods.iter().find(|m| UNITS.contains(m))
            {
                *s.result_pops.entry(u.to_string()).or_default() += 1;
            }
        }
    }
    units.sort();
    push.sort();
    s.mxus_used = units;
    s.push_kinds = push;
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex::Regex;

    /// The mnemonic grammar as regexes: the oracle the hand scanner is checked against.
    fn regex_scan(text: &str) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
        let modeled =
            Regex::new(r"\bv(matmul|matpush(\d+)|matprep|matpop|matres)((?:\.[a-z0-9]+)*)\b")
                .unwrap();
        let any = Regex::new(r"\bvmat[a-z]+\d*\b").unwrap();
        let code = strip_comments(text);
        let (mut ops, mut unmodeled) = (BTreeMap::new(), BTreeMap::new());
        for line in code.lines() {
            let mut spans = Vec::new();
            for c in modeled.captures_iter(line) {
                let m = c.get(0).unwrap();
                spans.push((m.start(), m.end()));
                *ops.entry(c[1].to_string()).or_default() += 1;
            }
            for m in any.find_iter(line) {
                if !spans.iter().any(|(a, b)| m.start() >= *a && m.end() <= *b) {
                    *unmodeled.entry(m.as_str().to_string()).or_default() += 1;
                }
            }
        }
        (ops, unmodeled)
    }

    #[test]
    fn hand_scanner_agrees_with_the_regex_grammar() {
        let samples = [
            "vmatmul.mubr.f32.mxu0 vmatpush1.bf16.msra.mxu1 xvmatmul vmatmul2 vmatpush vmatfoo.x",
            "a.vmatprep.subr.mxu0;vmatres.mxu3 vmatpop.f32.mxu2 _vmatmul vmatmul_x",
            "%1 = vmatpush12.bf16 /* vmatmul in comment */ vpop.f32.mrf.mxu0",
        ];
        for t in samples {
            let s = scan_mxu_mnemonics(t);
            let (ops, un) = regex_scan(t);
            assert_eq!(s.op_counts, ops, "{t}");
            assert_eq!(s.unmodeled, un, "{t}");
        }
        if let Some(f) = crate::testutil::fixtures() {
            let t = std::fs::read_to_string(
                f.join("jf_dump/1783579467107688879-matmul_optimized.1-124-final_bundles.txt"),
            )
            .unwrap();
            let s = scan_mxu_mnemonics(&t);
            let (ops, un) = regex_scan(&t);
            assert_eq!(s.op_counts, ops);
            assert_eq!(s.unmodeled, un);
            assert_eq!(s.result_pops.values().sum::<u64>(), 2048);
        }
    }

    #[test]
    fn row30_matpush3_is_full_width() {
        let s = scan_mxu_mnemonics(
            "{ vmatpush1.bf16.msra.mxu0 %v1 ;; vmatpush3.bf16.msra.mxu0 %v2 ;; vmatmul.mubr.f32.mxu0 %v3 }",
        );
        assert_eq!(s.op_counts["matpush3"], 1);
        let (lanes, basis) = s.lanes();
        assert_eq!(lanes, Some(256));
        assert!(basis.contains("full 256-lane"));
    }

    #[test]
    fn row31_only_matpush1_is_half_width() {
        let s = scan_mxu_mnemonics("vmatpush1.bf16.msra.mxu0 %v1\nvmatmul.mubr.bf16.mxu0 %v3\n");
        let (lanes, basis) = s.lanes();
        assert_eq!(lanes, Some(128));
        assert!(basis.contains("half-width"));
    }

    #[test]
    fn row32_unmodeled_mnemonic_makes_lanes_null() {
        let s = scan_mxu_mnemonics(
            "vmatpush1.bf16.msra.mxu0 %v1\nvmatfoo.bf16.mxu0 %v2\nvmatmul.mubr.bf16.mxu0 %v3\n",
        );
        assert_eq!(s.unmodeled.get("vmatfoo"), Some(&1));
        assert_eq!(s.unmodeled.len(), 1);
        let (lanes, basis) = s.lanes();
        assert_eq!(lanes, None);
        assert!(basis.contains("indeterminate"));
    }

    #[test]
    fn row33_prose_is_not_a_mnemonic() {
        let s = scan_mxu_mnemonics(
            "# buffer was materialized here\nvmatpush1.bf16.msra.mxu0 %v1\nvmatpush2.bf16.msra.mxu0 %v1\nvmatmul.mubr.bf16.mxu0 %v3\n",
        );
        assert!(s.unmodeled.is_empty());
        assert_eq!(s.lanes().0, Some(256));
    }

    #[test]
    fn comments_and_result_pops() {
        let s = scan_mxu_mnemonics(
            "{ %1 = vpop.f32.mrf.mxu1 ;; %2 = vmatmul.f32.mxu1 %v /* vmatmul.f32.mxu0 in a comment */ }",
        );
        assert_eq!(s.matmul_count(), 1);
        assert_eq!(s.mxus_used, vec!["mxu1"]);
        assert_eq!(s.result_pops.get("mxu1"), Some(&1));
        assert_eq!(
            s.lanes().0,
            None,
            "no push observed: indeterminate, never 128"
        );
    }
}

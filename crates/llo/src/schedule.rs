//! Schedule analysis (`*-schedule-analysis_*.txt`): bundle totals and the bundles owned by
//! each HLO instruction and opcode.

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

/// Attribution text is cut here: the raw HLO carries megabyte-sized backend configs.
pub const ATTRIBUTION_MAX_CHARS: usize = 300;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Totals {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_bundles: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub empty_bundles: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub non_empty_bundles: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub bundles: f64,
    pub pct: f64,
    pub attribution: String,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScheduleAnalysis {
    pub totals: Totals,
    pub per_hlo: Vec<Row>,
    pub per_opcode: Vec<Row>,
}

static ROW_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*(\[opcode\]\s*)?([\d.]+)\s+scheduled bundles\s+\(\s*([\d.]+)%\):\s+(.*)$")
        .unwrap()
});

fn total(line: &str, key: &str) -> Option<u64> {
    let rest = line.trim_start().strip_prefix(key)?;
    rest.split_whitespace().next()?.parse().ok()
}

pub fn parse(text: &str) -> ScheduleAnalysis {
    let mut out = ScheduleAnalysis::default();
    for line in text.lines() {
        if out.totals.total_bundles.is_none() {
            out.totals.total_bundles = total(line, "total scheduled bundles:");
        }
        if out.totals.empty_bundles.is_none() {
            out.totals.empty_bundles = total(line, "empty scheduled bundles:");
        }
        if out.totals.non_empty_bundles.is_none() {
            out.totals.non_empty_bundles = total(line, "non empty scheduled bundles:");
        }
        let Some(c) = ROW_RE.captures(line) else {
            continue;
        };
        let (Ok(bundles), Ok(pct)) = (c[2].parse::<f64>(), c[3].parse::<f64>()) else {
            continue;
        };
        let row = Row {
            bundles,
            pct,
            attribution: c[4].chars().take(ATTRIBUTION_MAX_CHARS).collect(),
        };
        if c.get(1).is_some() {
            out.per_opcode.push(row);
        } else {
            out.per_hlo.push(row);
        }
    }
    out
}

impl ScheduleAnalysis {
    /// Evidence for a custom call (a Pallas/Mosaic kernel) in this program.
    pub fn has_custom_call(&self) -> bool {
        self.per_opcode
            .iter()
            .any(|r| r.attribution.split_whitespace().next() == Some("custom-call"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_totals() {
        let t = "Schedule analysis:\n\ttotal scheduled bundles:    10\n\tempty scheduled bundles:    1\n\tnon empty scheduled bundles: 9\n\t9.00 scheduled bundles (100.00%): %k = custom-call(%x)\n\t[opcode]    9 scheduled bundles (100.00%): custom-call          (1 instances, 9.00 avg)\n";
        let s = parse(t);
        assert_eq!(s.totals.total_bundles, Some(10));
        assert_eq!(s.totals.empty_bundles, Some(1));
        assert_eq!(s.totals.non_empty_bundles, Some(9));
        assert_eq!(s.per_hlo.len(), 1);
        assert_eq!(s.per_opcode[0].pct, 100.0);
        assert!(s.has_custom_call());
    }
}

//! The per-bundle static utilization matrix (`*-hlo-static-per-bundle-utilization.txt`):
//! unit names, per-unit issue-slot capacity, then one row of used slots per bundle.

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::{LloError, Result, hex, round_to};

/// Unit columns this analysis knows the meaning of. Others are listed as unmodeled.
pub const KNOWN_UNITS: &[&str] = &[
    "MXU",
    "XLU",
    "VALU",
    "VPOP",
    "EUP",
    "VLOAD",
    "VLOAD:FILL",
    "VSTORE",
    "VSTORE:SPILL",
    "SALU",
];

#[derive(Clone, Debug, Default)]
pub struct Matrix {
    pub units: Vec<String>,
    pub capacity: Vec<u32>,
    /// Every integer row, in address order (row i ↔ bundle i), malformed ones included.
    pub rows: Vec<Vec<u32>>,
}

impl Matrix {
    pub fn is_well_formed(&self, r: &[u32]) -> bool {
        r.len() == self.units.len()
    }
    pub fn well_formed_rows(&self) -> impl Iterator<Item = &Vec<u32>> {
        self.rows.iter().filter(|r| self.is_well_formed(r))
    }
    pub fn malformed_rows(&self) -> usize {
        self.rows.len() - self.well_formed_rows().count()
    }
    pub fn col(&self, unit: &str) -> Option<usize> {
        self.units.iter().position(|u| u == unit)
    }
    /// Capacity with 0 read as 1 (the seed's divisor rule).
    pub fn cap(&self, i: usize) -> u32 {
        self.capacity[i].max(1)
    }
    pub fn unmodeled_units(&self) -> Vec<String> {
        self.units
            .iter()
            .filter(|u| !KNOWN_UNITS.contains(&u.as_str()))
            .cloned()
            .collect()
    }
}

/// Parse the matrix. Rows that are not all integers are skipped (as the format's own
/// trailing lines are); a missing header, a non-integer capacity row or a capacity row whose
/// width differs from the unit list is malformed (file and line named).
pub fn parse(text: &str, path: &Path) -> Result<Matrix> {
    #[derive(PartialEq)]
    enum Mode {
        None,
        Capacity,
        Util,
    }
    let mut mode = Mode::None;
    let mut m = Matrix::default();
    let mut capacity_line = 0;
    let malformed = |line: usize, message: String| LloError::Malformed {
        path: path.to_path_buf(),
        line: Some(line),
        message,
    };
    for (i, line) in text.lines().enumerate() {
        let head = line.trim_start();
        if let Some(rest) = head.strip_prefix("==") {
            let rest = rest.trim_start();
            if rest.starts_with("CAPAC") {
                mode = Mode::Capacity;
                continue;
            }
            if rest.starts_with("UTILIZATION") {
                mode = Mode::Util;
                continue;
            }
        }
        let s = line.trim();
        if s.is_empty() {
            continue;
        }
        match mode {
            Mode::None => {}
            Mode::Capacity => {
                if s.starts_with(|c: char| c.is_ascii_uppercase()) {
                    m.units = s.split(',').map(|u| u.trim().to_string()).collect();
                } else {
                    m.capacity = s
                        .split_whitespace()
                        .map(|x| x.parse::<u32>())
                        .collect::<std::result::Result<_, _>>()
                        .map_err(|_| {
                            malformed(i + 1, format!("capacity row is not integers: {s:?}"))
                        })?;
                    capacity_line = i + 1;
                }
            }
            Mode::Util => {
                if let Ok(r) = s.split_whitespace().map(str::parse::<u32>).collect() {
                    m.rows.push(r);
                }
            }
        }
    }
    if m.units.is_empty() || m.capacity.is_empty() || m.rows.is_empty() {
        return Err(LloError::Malformed {
            path: path.to_path_buf(),
            line: None,
            message: format!(
                "Could not parse utilization matrix from '{}' (units={}, capacity={}, rows={}).",
                path.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                m.units.len(),
                m.capacity.len(),
                m.rows.len()
            ),
        });
    }
    if m.units.len() != m.capacity.len() {
        return Err(malformed(
            capacity_line,
            format!(
                "{} units but {} capacities",
                m.units.len(),
                m.capacity.len()
            ),
        ));
    }
    Ok(m)
}

/// Per-unit statistics over well-formed rows.
#[derive(Clone, Debug, PartialEq)]
pub struct UnitStats {
    pub capacity: u32,
    pub occupancy_pct: Option<f64>,
    pub nonzero_bundle_pct: f64,
    pub saturated_bundle_pct: f64,
    pub slots_total: u64,
}

pub fn unit_stats(m: &Matrix) -> Vec<(String, UnitStats)> {
    let good: Vec<&Vec<u32>> = m.well_formed_rows().collect();
    let n = good.len();
    m.units
        .iter()
        .enumerate()
        .map(|(i, u)| {
            let cap = m.cap(i);
            let sum_frac: f64 = good.iter().map(|r| r[i] as f64 / cap as f64).sum();
            let nonzero = good.iter().filter(|r| r[i] > 0).count();
            let sat = good.iter().filter(|r| r[i] >= cap).count();
            let denom = n.max(1) as f64;
            (
                u.clone(),
                UnitStats {
                    capacity: m.capacity[i],
                    occupancy_pct: (n > 0).then(|| round_to(100.0 * sum_frac / n as f64, 2)),
                    nonzero_bundle_pct: round_to(100.0 * nonzero as f64 / denom, 2),
                    saturated_bundle_pct: round_to(100.0 * sat as f64 / denom, 2),
                    slots_total: good.iter().map(|r| r[i] as u64).sum(),
                },
            )
        })
        .collect()
}

/// A maximal run of consecutive rows sharing one dominant unit.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    pub start: usize,
    pub end: usize,
    pub unit: String,
    /// Units tied for dominance (occupancy ranking only).
    pub tied: Vec<String>,
}

impl Run {
    pub fn len(&self) -> usize {
        self.end - self.start + 1
    }
    pub fn is_empty(&self) -> bool {
        false
    }
}

fn runs_of(dom: &[Option<String>]) -> Vec<Run> {
    let mut runs = Vec::new();
    let mut i = 0;
    while i < dom.len() {
        let Some(u) = &dom[i] else {
            i += 1;
            continue;
        };
        let mut j = i;
        while j + 1 < dom.len() && dom[j + 1].as_ref() == Some(u) {
            j += 1;
        }
        runs.push(Run {
            start: i,
            end: j,
            unit: u.clone(),
            tied: Vec::new(),
        });
        i = j + 1;
    }
    runs
}

/// The seed's hot ranges: dominance by *raw* slot count, ties to the earliest column, runs
/// sorted by length (stable). Kept for its pinned values.
pub fn hot_ranges_raw(m: &Matrix, k: usize) -> Vec<Run> {
    let dom: Vec<Option<String>> = m
        .rows
        .iter()
        .map(|r| {
            if !m.is_well_formed(r) || r.iter().all(|v| *v == 0) {
                return None;
            }
            let mut best = 0;
            for (i, v) in r.iter().enumerate() {
                if *v > r[best] {
                    best = i;
                }
            }
            Some(m.units[best].clone())
        })
        .collect();
    let mut runs = runs_of(&dom);
    runs.sort_by_key(|r| std::cmp::Reverse(r.len()));
    runs.truncate(k);
    runs
}

/// Hot ranges by occupancy relative to capacity (a saturated MXU at 2/2 beats VLOAD at 2/3),
/// ties reported as `tie`. Runs separated by at most `merge_gap` all-zero bundles are merged.
pub fn hot_ranges_by_occupancy(m: &Matrix, k: usize, merge_gap: usize) -> Vec<Run> {
    let mut ties: Vec<Vec<String>> = Vec::with_capacity(m.rows.len());
    let dom: Vec<Option<String>> = m
        .rows
        .iter()
        .map(|r| {
            ties.push(Vec::new());
            if !m.is_well_formed(r) || r.iter().all(|v| *v == 0) {
                return None;
            }
            // Compare v_i/cap_i exactly by cross-multiplying.
            let frac = |i: usize| (r[i] as u64, m.cap(i) as u64);
            let mut best = vec![0usize];
            for i in 1..r.len() {
                let (a, ca) = frac(i);
                let (b, cb) = frac(best[0]);
                match (a * cb).cmp(&(b * ca)) {
                    std::cmp::Ordering::Greater => best = vec![i],
                    std::cmp::Ordering::Equal => best.push(i),
                    std::cmp::Ordering::Less => {}
                }
            }
            if best.len() > 1 {
                *ties.last_mut().unwrap() = best.iter().map(|i| m.units[*i].clone()).collect();
                Some(format!("tie:{}", ties.last().unwrap().join("+")))
            } else {
                Some(m.units[best[0]].clone())
            }
        })
        .collect();
    let mut runs = runs_of(&dom);
    if merge_gap > 0 {
        let mut merged: Vec<Run> = Vec::new();
        for r in runs {
            if let Some(last) = merged.last_mut()
                && last.unit == r.unit
                && r.start - last.end - 1 <= merge_gap
                && (last.end + 1..r.start).all(|i| dom[i].is_none())
            {
                last.end = r.end;
                continue;
            }
            merged.push(r);
        }
        runs = merged;
    }
    for r in &mut runs {
        if let Some(t) = r.unit.strip_prefix("tie:") {
            r.tied = t.split('+').map(String::from).collect();
            r.unit = "tie".into();
        }
    }
    runs.sort_by_key(|r| std::cmp::Reverse(r.len()));
    runs.truncate(k);
    runs
}

/// `get_llo_static_utilization`'s unit table and hot ranges as JSON. `aligned` says whether
/// row i is known to be bundle address i (only then are address ranges printed).
pub fn static_utilization_json(
    m: &Matrix,
    hot: usize,
    merge_gap: usize,
    aligned: bool,
) -> Map<String, Value> {
    let mut units = Map::new();
    for (u, s) in unit_stats(m) {
        units.insert(
            u,
            json!({
                "capacity": s.capacity,
                "occupancy_pct": s.occupancy_pct,
                "nonzero_bundle_pct": s.nonzero_bundle_pct,
                "saturated_bundle_pct": s.saturated_bundle_pct,
            }),
        );
    }
    let run_json = |r: &Run, by_occ: bool| {
        let mut o = Map::new();
        o.insert("bundle_range".into(), json!([r.start, r.end]));
        if aligned {
            o.insert(
                "address_range".into(),
                json!([hex(r.start as u64), hex(r.end as u64)]),
            );
        }
        o.insert("length".into(), json!(r.len()));
        o.insert("dominant_unit".into(), json!(r.unit));
        if by_occ && !r.tied.is_empty() {
            o.insert("tied_units".into(), json!(r.tied));
        }
        Value::Object(o)
    };
    let mut out = Map::new();
    out.insert("num_bundles".into(), json!(m.rows.len()));
    out.insert("units".into(), Value::Object(units));
    out.insert(
        "hot_ranges".into(),
        Value::Array(
            hot_ranges_raw(m, hot)
                .iter()
                .map(|r| run_json(r, false))
                .collect(),
        ),
    );
    out.insert(
        "hot_ranges_by_occupancy".into(),
        Value::Array(
            hot_ranges_by_occupancy(m, hot, merge_gap)
                .iter()
                .map(|r| run_json(r, true))
                .collect(),
        ),
    );
    out.insert(
        "hot_ranges_note".into(),
        json!("hot_ranges ranks a bundle's unit by raw slot count (seed-compatible; ties to the first column); hot_ranges_by_occupancy ranks by slots used / capacity and reports ties as `tie`"),
    );
    out.insert("malformed_rows".into(), json!(m.malformed_rows()));
    out.insert("unmodeled_units".into(), json!(m.unmodeled_units()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: &str = "== CAPACTIY:\nMXU, VLOAD, SALU\n    2     3     2\n== UTILIZATION:\n0 0 0\n0 0 1\n2 2 0\n2 2 0\n0 3 0\n1 2\nfoo bar\n0 0 0\n0 3 0\n";

    #[test]
    fn parses_and_counts() {
        let m = parse(M, Path::new("u.txt")).unwrap();
        assert_eq!(m.units, vec!["MXU", "VLOAD", "SALU"]);
        assert_eq!(m.rows.len(), 8);
        assert_eq!(m.malformed_rows(), 1);
        let s = unit_stats(&m);
        assert_eq!(s[0].1.occupancy_pct, Some(round_to(100.0 * 2.0 / 7.0, 2)));
        assert_eq!(s[1].1.saturated_bundle_pct, round_to(100.0 * 2.0 / 7.0, 2));
    }

    #[test]
    fn raw_dominance_vs_occupancy_dominance() {
        let m = parse(M, Path::new("u.txt")).unwrap();
        // Rows 2-3: raw counts tie 2/2 → first column (MXU); by occupancy MXU 2/2 > VLOAD 2/3.
        let raw = hot_ranges_raw(&m, 5);
        assert_eq!(
            (raw[0].start, raw[0].end, raw[0].unit.as_str()),
            (2, 3, "MXU")
        );
        let occ = hot_ranges_by_occupancy(&m, 5, 0);
        assert_eq!(occ[0].unit, "MXU");
        // VLOAD runs at rows 4 and 7 are separated by a malformed row and an all-zero row
        // (neither has a dominant unit), so a merge gap of 2 joins them.
        let merged = hot_ranges_by_occupancy(&m, 5, 2);
        assert!(
            merged
                .iter()
                .any(|r| r.unit == "VLOAD" && r.start == 4 && r.end == 7)
        );
    }

    #[test]
    fn malformed_capacity_names_the_line() {
        let e = parse(
            "== CAPACITY:\nMXU, XLU\n2 x\n== UTILIZATION:\n0 0\n",
            Path::new("u.txt"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("u.txt:3"), "{e}");
        let e = parse(
            "== CAPACITY:\nMXU, XLU\n2\n== UTILIZATION:\n0 0\n",
            Path::new("u.txt"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("1 capacities"), "{e}");
        let e = parse("hello\n", Path::new("u.txt")).unwrap_err();
        assert!(
            e.to_string().contains("Could not parse utilization matrix"),
            "{e}"
        );
    }

    #[test]
    fn ties_reported() {
        let m = parse(
            "== CAPACITY:\nA, B\n2 2\n== UTILIZATION:\n1 1\n1 1\n",
            Path::new("u"),
        )
        .unwrap();
        let occ = hot_ranges_by_occupancy(&m, 5, 0);
        assert_eq!(occ[0].unit, "tie");
        assert_eq!(occ[0].tied, vec!["A", "B"]);
    }
}

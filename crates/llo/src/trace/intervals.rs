//! Sets of `[start, end)` picosecond intervals: overlap tests, disjoint unions, clipping.

/// Intervals sorted by start, with the running maximum end for O(log n) overlap tests.
#[derive(Clone, Debug, Default)]
pub struct Windows {
    spans: Vec<(i64, i64)>,
    max_end: Vec<i64>,
}

impl Windows {
    pub fn new(mut spans: Vec<(i64, i64)>) -> Self {
        spans.sort_unstable();
        let mut m = i64::MIN;
        let max_end = spans
            .iter()
            .map(|(_, e)| {
                m = m.max(*e);
                m
            })
            .collect();
        Windows { spans, max_end }
    }
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
    pub fn spans(&self) -> &[(i64, i64)] {
        &self.spans
    }
    /// Some window with `ws < e && we > s` (strict overlap, the seed's rule).
    pub fn overlaps(&self, (s, e): (i64, i64)) -> bool {
        let k = self.spans.partition_point(|(ws, _)| *ws < e);
        k > 0 && self.max_end[k - 1] > s
    }
    /// Strict overlap, or (for an instant event) lying inside a window.
    pub fn contains_point_or_overlaps(&self, (s, e): (i64, i64)) -> bool {
        if e > s {
            return self.overlaps((s, e));
        }
        let k = self.spans.partition_point(|(ws, _)| *ws <= s);
        k > 0 && self.max_end[k - 1] >= s
    }
    /// The disjoint union (touching intervals merged).
    pub fn union(&self) -> Vec<(i64, i64)> {
        let mut out: Vec<(i64, i64)> = Vec::new();
        for &(s, e) in &self.spans {
            match out.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => out.push((s, e)),
            }
        }
        out
    }
}

/// Length of `[s, e)` covered by a disjoint sorted union.
pub fn covered(union: &[(i64, i64)], (s, e): (i64, i64)) -> i64 {
    if e <= s {
        return 0;
    }
    let mut k = union.partition_point(|(_, we)| *we <= s);
    let mut total: i64 = 0;
    while k < union.len() && union[k].0 < e {
        total = total.saturating_add(union[k].1.min(e).saturating_sub(union[k].0.max(s)));
        k += 1;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_union_cover() {
        let w = Windows::new(vec![(10, 20), (0, 5), (15, 30)]);
        assert!(w.overlaps((4, 6)));
        assert!(!w.overlaps((5, 10)));
        assert!(w.overlaps((29, 40)));
        assert!(w.contains_point_or_overlaps((5, 5)));
        assert!(!w.contains_point_or_overlaps((7, 7)));
        assert_eq!(w.union(), vec![(0, 5), (10, 30)]);
        assert_eq!(covered(&w.union(), (3, 12)), 4);
        assert_eq!(covered(&w.union(), (40, 50)), 0);
    }
}

//! Nesting → self time: XProf's `AncestorStack` (`xla/tsl/profiler/utils/xplane_utils.h`).
//!
//! Spans of one line are visited in (begin asc, duration desc) order. A span's direct parent is
//! the innermost open span that fully contains it; self time = duration − Σ direct children.
//! Partial overlaps are siblings (the earlier span is closed first).

/// Length of `[begin, end]` in ps: 0 when empty, computed without overflow.
pub fn span_len(begin: i64, end: i64) -> u64 {
    (end as i128 - begin as i128).clamp(0, u64::MAX as i128) as u64
}

/// One span to nest: `[begin, begin+dur]`, and a caller index to report back.
#[derive(Clone, Copy, Debug)]
pub struct Span {
    pub begin: i64,
    pub dur: i64,
    pub index: usize,
}

impl Span {
    fn end(&self) -> i64 {
        self.begin.saturating_add(self.dur)
    }
    fn includes(&self, o: &Span) -> bool {
        self.begin <= o.begin && o.end() <= self.end()
    }
}

/// Nest `spans` (sorted here) and call `emit(index, duration, children_duration, depth)` for
/// each span when it is closed. Depth 0 = a top-level span.
pub fn nest(spans: &mut [Span], mut emit: impl FnMut(usize, u64, u64, usize)) {
    let order = |a: &Span, b: &Span| a.begin.cmp(&b.begin).then(b.dur.cmp(&a.dur));
    // Trace lines are usually stored in this order already: check before sorting (the check
    // reads the spans once; the stable sort allocates a scratch buffer).
    if !spans.is_sorted_by(|a, b| order(a, b) != std::cmp::Ordering::Greater) {
        spans.sort_by(order);
    }
    // (span, children duration)
    let mut stack: Vec<(Span, u64)> = Vec::new();
    for s in spans.iter() {
        while let Some((top, _)) = stack.last() {
            if top.includes(s) {
                break;
            }
            let (t, c) = stack.pop().expect("non-empty");
            emit(t.index, t.dur.max(0) as u64, c, stack.len());
        }
        if let Some((_, c)) = stack.last_mut() {
            *c = c.saturating_add(s.dur.max(0) as u64);
        }
        stack.push((*s, 0));
    }
    while let Some((t, c)) = stack.pop() {
        emit(t.index, t.dur.max(0) as u64, c, stack.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(spans: &[(i64, i64)]) -> Vec<(usize, u64, u64, usize)> {
        let mut v: Vec<Span> = spans
            .iter()
            .enumerate()
            .map(|(i, &(b, d))| Span {
                begin: b,
                dur: d,
                index: i,
            })
            .collect();
        let mut out = Vec::new();
        nest(&mut v, |i, d, c, depth| out.push((i, d, c, depth)));
        out.sort();
        out
    }

    #[test]
    fn direct_children_only_are_subtracted() {
        // 0: [0,100] contains 1: [10,60] which contains 2: [20,30]; 3: [70,90] in 0.
        let out = run(&[(0, 100), (10, 50), (20, 10), (70, 20)]);
        assert_eq!(
            out,
            vec![
                (0, 100, 70, 0),
                (1, 50, 10, 1),
                (2, 10, 0, 2),
                (3, 20, 0, 1)
            ]
        );
    }

    #[test]
    fn partial_overlap_is_a_sibling_and_order_is_restored() {
        // Unsorted input; 1 starts inside 0 but ends after it.
        let out = run(&[(50, 100), (0, 80)]);
        assert_eq!(out, vec![(0, 100, 0, 0), (1, 80, 0, 0)]);
    }
}

//! Nesting → self time: XProf's AncestorStack (spec §1.5, `tsl::profiler::AncestorStack` and
//! `xprof/convert/xplane_to_op_metrics_db.cc`), over any timed spans.

/// A span with its time and self time, as emitted by [`self_times`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NestedEvent<T> {
    /// The caller's item.
    pub item: T,
    /// Start, as given.
    pub start_ps: i64,
    /// Duration, as given (the inclusive time).
    pub duration_ps: i64,
    /// `duration_ps` minus the durations of *direct* children, saturating at 0.
    pub self_time_ps: i64,
    /// How many enclosing spans were open when this one started.
    pub depth: usize,
}

/// Self times of `(item, start_ps, duration_ps)` spans of one line. Input is sorted by
/// `(start asc, duration desc)` first (stable), so already-sorted lines keep their order. A span
/// that only partially overlaps the open one is treated as its sibling (the open one is closed),
/// as XProf does. Output is in emission order (children before their parent).
pub fn self_times<T: Copy>(spans: impl IntoIterator<Item = (T, i64, i64)>) -> Vec<NestedEvent<T>> {
    let mut v: Vec<(T, i64, i64)> = spans.into_iter().collect();
    v.sort_by(|a, b| a.1.cmp(&b.1).then(b.2.cmp(&a.2)));
    let mut out = Vec::with_capacity(v.len());
    // (item, start, dur, children_ps, depth)
    let mut stack: Vec<(T, i64, i64, i64, usize)> = Vec::new();
    let emit = |(item, start, dur, children, depth): (T, i64, i64, i64, usize),
                out: &mut Vec<NestedEvent<T>>| {
        out.push(NestedEvent {
            item,
            start_ps: start,
            duration_ps: dur,
            self_time_ps: (dur - children).max(0),
            depth,
        })
    };
    for (item, start, dur) in v {
        let end = start.saturating_add(dur);
        while let Some(top) = stack.last() {
            let top_end = top.1.saturating_add(top.2);
            if top.1 <= start && end <= top_end {
                break;
            }
            let t = stack.pop().unwrap();
            emit(t, &mut out);
        }
        if let Some(top) = stack.last_mut() {
            top.3 = top.3.saturating_add(dur);
        }
        let depth = stack.len();
        stack.push((item, start, dur, 0, depth));
    }
    while let Some(t) = stack.pop() {
        emit(t, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_children_only_and_partial_overlap_is_a_sibling() {
        // a [0,100) ⊃ b [10,60) ⊃ c [20,30); d [90,120) partially overlaps a.
        let r = self_times([("a", 0, 100), ("c", 20, 10), ("b", 10, 50), ("d", 90, 30)]);
        let by: std::collections::HashMap<_, _> = r.iter().map(|e| (e.item, *e)).collect();
        assert_eq!(by["a"].self_time_ps, 50); // only b's 50 is subtracted
        assert_eq!(by["b"].self_time_ps, 40);
        assert_eq!(by["c"].self_time_ps, 10);
        assert_eq!(by["d"].self_time_ps, 30);
        assert_eq!(by["d"].depth, 0);
        assert_eq!(by["c"].depth, 2);
        let order: Vec<_> = r.iter().map(|e| e.item).collect();
        assert_eq!(order, ["c", "b", "a", "d"]);
    }

    #[test]
    fn identical_spans_nest_and_self_time_saturates() {
        let r = self_times([(1, 0, 10), (2, 0, 10)]);
        assert_eq!(r[0].item, 2);
        assert_eq!(r[0].self_time_ps, 10);
        assert_eq!(r[1].self_time_ps, 0);
    }
}

//! Which steps of several hosts are the same steps: XProf's `StepIntersection`, which the
//! combined views of a multi-host run are built on. Hosts number their steps on their own, so
//! XProf matches them by time: each host's step sequence is shifted against the chief's (the
//! host whose steps span the least time) to the offset where the steps overlap most, and only
//! the run of steps every host covers is kept.

use crate::steps::Step;

/// A step's time span in ps, `[begin, end)`; empty (`begin == end`) when it has no core.
pub type Span = (i128, i128);

/// A step's span across its cores (XProf `StepTimespan`): from the earliest core's begin to
/// the latest core's end.
pub fn step_span(s: &Step) -> Span {
    let mut cores = s.per_core.values();
    let (Some(first), rest) = (cores.next(), cores) else {
        return (0, 0);
    };
    let span = |c: &crate::steps::CoreStep| {
        let b = i128::from(c.begin_ps);
        (b, b + i128::from(c.duration_ps))
    };
    let (mut lo, mut hi) = span(first);
    for c in rest {
        let (b, e) = span(c);
        lo = lo.min(b);
        hi = hi.max(e);
    }
    if lo < hi { (lo, hi) } else { (0, 0) }
}

fn len((b, e): Span) -> i128 {
    e - b
}

/// Where the kept steps are in each host's sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepIntersection {
    /// Position of the chief in the hosts given.
    pub chief: usize,
    /// Per host (in the order given): the index of its first kept step.
    pub first_index: Vec<usize>,
    /// How many steps every host keeps.
    pub num_steps: usize,
    /// The hosts' aligned stretches do not meet (XProf's `empty_intersect`; not set when the
    /// chief has no step, nor when the stretches only touch).
    pub empty_intersect: bool,
}

/// One host's steps against the chief's: `sub`'s step `sub_begin + i` is the chief's step
/// `chief_begin + i`, for `i < len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Alignment {
    sub_begin: usize,
    chief_begin: usize,
    len: usize,
}

impl StepIntersection {
    /// `hosts`: each worker host's step spans, in step order. `None` without hosts. No step is
    /// kept when the chief has none or when the hosts' steps do not meet.
    pub fn new(hosts: &[Vec<Span>]) -> Option<StepIntersection> {
        // The chief: the least total span (over steps that last); the first host on ties.
        let total = |spans: &[Span]| {
            let live = spans.iter().filter(|s| len(**s) > 0);
            let lo = live.clone().map(|s| s.0).min();
            let hi = live.map(|s| s.1).max();
            match (lo, hi) {
                (Some(lo), Some(hi)) if lo < hi => hi - lo,
                _ => 0,
            }
        };
        let chief = (0..hosts.len()).min_by_key(|&i| (total(&hosts[i]), i))?;
        let none = |empty_intersect| StepIntersection {
            chief,
            first_index: vec![0; hosts.len()],
            num_steps: 0,
            empty_intersect,
        };
        if hosts[chief].is_empty() {
            return Some(none(false));
        }
        let alignments: Vec<Alignment> = hosts
            .iter()
            .enumerate()
            .map(|(i, spans)| {
                if i == chief {
                    Alignment {
                        sub_begin: 0,
                        chief_begin: 0,
                        len: spans.len(),
                    }
                } else {
                    align(spans, &hosts[chief])
                }
            })
            .collect();
        let begin = alignments.iter().map(|a| a.chief_begin).max()?;
        let end = alignments.iter().map(|a| a.chief_begin + a.len).min()?;
        if begin >= end {
            return Some(none(begin > end));
        }
        Some(StepIntersection {
            chief,
            first_index: alignments
                .iter()
                .map(|a| a.sub_begin + (begin - a.chief_begin))
                .collect(),
            num_steps: end - begin,
            empty_intersect: false,
        })
    }
}

/// The shift of `sub` against `chief` (chief index − sub index) under which their steps
/// overlap longest; on ties the first of 0, 1, …, then −1, −2, … (XProf's order).
fn align(sub: &[Span], chief: &[Span]) -> Alignment {
    let (n, m) = (sub.len(), chief.len());
    if n == 0 || m == 0 {
        return Alignment {
            sub_begin: 0,
            chief_begin: 0,
            len: 0,
        };
    }
    // overlap[k + n - 1]: total overlap of the pairs (i, i + k) met walking both sequences in
    // time, as XProf sums it.
    let mut overlap = vec![0i128; n + m - 1];
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        if len(sub[i]) <= 0 {
            i += 1;
            continue;
        }
        if len(chief[j]) <= 0 {
            j += 1;
            continue;
        }
        let ((sb, se), (cb, ce)) = (sub[i], chief[j]);
        overlap[j + n - 1 - i] += (se.min(ce) - sb.max(cb)).max(0);
        if se < ce {
            i += 1;
        } else if ce < se {
            j += 1;
        } else {
            i += 1;
            j += 1;
        }
    }
    let shifts = (0..m as isize).chain((1..n as isize).map(|x| -x));
    let mut best: Option<(i128, isize)> = None;
    for k in shifts {
        let v = overlap[(k + n as isize - 1) as usize];
        if best.is_none_or(|(b, _)| v > b) {
            best = Some((v, k));
        }
    }
    let k = best.map_or(0, |b| b.1);
    let (sub_begin, chief_begin) = if k >= 0 {
        (0, k as usize)
    } else {
        ((-k) as usize, 0)
    };
    Alignment {
        sub_begin,
        chief_begin,
        len: (n - sub_begin).min(m - chief_begin),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(starts: &[i128], len: i128) -> Vec<Span> {
        starts.iter().map(|&b| (b, b + len)).collect()
    }

    #[test]
    fn hosts_offset_by_a_step_keep_the_steps_they_share() {
        // Host 0: [1,12) [13,24) [25,36); host 1: [16,27) [28,39) [40,51). Host 1's first
        // step overlaps host 0's second most (8 of 11): shift 1, two steps in common.
        let x =
            StepIntersection::new(&[steps(&[1, 13, 25], 11), steps(&[16, 28, 40], 11)]).unwrap();
        assert_eq!(x.chief, 0);
        assert_eq!((x.first_index.clone(), x.num_steps), (vec![1, 0], 2));
    }

    #[test]
    fn the_chief_is_the_host_with_the_shortest_span() {
        // Host 1 spans less (two steps): it is the chief, and host 0 starts one step earlier.
        let x = StepIntersection::new(&[steps(&[0, 10, 20], 10), steps(&[11, 21], 9)]).unwrap();
        assert_eq!(x.chief, 1);
        assert_eq!((x.first_index.clone(), x.num_steps), (vec![1, 0], 2));
    }

    #[test]
    fn hosts_that_never_overlap_keep_what_the_tie_rule_gives() {
        // No overlap at any shift: shift 0 wins the tie, so step i matches step i.
        let x = StepIntersection::new(&[steps(&[0, 10], 5), steps(&[100, 110, 120], 5)]).unwrap();
        assert_eq!((x.first_index.clone(), x.num_steps), (vec![0, 0], 2));
    }

    #[test]
    fn a_host_without_steps_leaves_no_step_and_no_empty_intersection() {
        // The host without steps spans 0: it is the chief, and XProf stops there.
        let x = StepIntersection::new(&[steps(&[0, 10], 5), vec![]]).unwrap();
        assert_eq!((x.chief, x.num_steps, x.empty_intersect), (1, 0, false));
        assert_eq!(StepIntersection::new(&[]), None);
    }

    #[test]
    fn aligned_stretches_that_do_not_meet_are_an_empty_intersection() {
        // Host 2 (the chief, one step) meets host 0's last step and host 1's first: one step.
        let x = StepIntersection::new(&[
            steps(&[0, 10, 20], 10),
            steps(&[20, 30, 40], 10),
            steps(&[20], 10),
        ])
        .unwrap();
        assert_eq!((x.first_index.clone(), x.num_steps), (vec![2, 0, 0], 1));
        assert!(!x.empty_intersect);
        // Stretches that only touch ([0,1) and [1,2) of a two-step chief) keep no step, but
        // XProf does not call that an empty intersection.
        let x = StepIntersection::new(&[
            steps(&[0, 10, 100], 10),
            steps(&[100, 110], 10),
            steps(&[110, 200], 10),
        ])
        .unwrap();
        assert_eq!((x.num_steps, x.empty_intersect), (0, false));
        // Host 1 is the chief ([100,110) [110,120) [120,130)). Host 0's [0,10) [10,20)
        // [100,110) fits best at shift −2 (its step 2 on the chief's 0): chief range [0,1).
        // Host 2's [120,130) [200,210) fits at shift 2: chief range [2,3). They do not meet.
        let x = StepIntersection::new(&[
            steps(&[0, 10, 100], 10),
            steps(&[100, 110, 120], 10),
            steps(&[120, 200], 10),
        ])
        .unwrap();
        assert_eq!(x.chief, 1);
        assert_eq!(x.num_steps, 0);
        assert!(x.empty_intersect);
    }

    #[test]
    fn zero_length_steps_count_no_overlap() {
        // Host 1's first step lasts 0: it neither spans time (host 1 is the chief, 5 ps
        // against 15) nor overlaps; its second step meets host 0's [10,15) at shift 0.
        let x = StepIntersection::new(&[steps(&[0, 10], 5), vec![(3, 3), (10, 15)]]).unwrap();
        assert_eq!(x.chief, 1);
        assert_eq!((x.first_index.clone(), x.num_steps), (vec![0, 0], 2));
    }
}

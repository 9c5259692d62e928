//! Host flows linked for the step grouping: each producer (`_pt`, `_p`) gets the consumers
//! (`_ct`, `_c`) with the same context, which a group follows from the producer's event.
//!
//! A capture can hold hundreds of thousands of flows on each side. They are linked by sorting
//! both sides by context and merging the two sorted lists (not by a binary search or a hash
//! lookup per producer). The contexts are packed into 64-bit keys first where they fit, so
//! the sort is a radix sort of 16-byte elements over the key bits that vary.

/// A flow context: (type, id).
pub(crate) type Context = (u64, u64);

/// XProf does not link a context with this many producers and as many consumers: an id reused
/// by unrelated events.
const REUSED_CONTEXT: usize = 64;

/// Producers linked to consumers.
pub(crate) struct Flows {
    /// The consumers as (line, event), sorted by context; within a context in line order,
    /// then in the order the line lists them.
    pub consumers: Vec<(u32, u32)>,
    /// Per producer (numbered line by line, in the order each line lists them): the range of
    /// `consumers` it links to.
    pub ranges: Vec<(u32, u32)>,
}

/// Link the producers to the consumers. Per line: its consumers (context, event), taken so
/// that each line's list is freed once copied, and its producers.
pub(crate) fn link(consumers: Vec<Vec<(Context, u32)>>, producers: &[&[(Context, u32)]]) -> Flows {
    let contexts = consumers
        .iter()
        .flatten()
        .chain(producers.iter().copied().flatten())
        .map(|x| x.0);
    match KeyPacking::of(contexts) {
        Some(p) => link_by(consumers, producers, |c| p.key(c)),
        None => link_by(consumers, producers, |c| c),
    }
}

fn link_by<K: FlowKey>(
    consumers: Vec<Vec<(Context, u32)>>,
    producers: &[&[(Context, u32)]],
    key: impl Fn(Context) -> K,
) -> Flows {
    let mut c: Vec<(K, (u32, u32))> = Vec::with_capacity(consumers.iter().map(Vec::len).sum());
    for (li, line) in consumers.into_iter().enumerate() {
        c.extend(line.into_iter().map(|(k, ei)| (key(k), (li as u32, ei))));
    }
    let mut p: Vec<(K, u32)> = Vec::with_capacity(producers.iter().map(|l| l.len()).sum());
    p.extend(
        producers
            .iter()
            .copied()
            .flatten()
            .enumerate()
            .map(|(i, &(k, _))| (key(k), i as u32)),
    );
    rayon::join(|| K::sort(&mut c), || K::sort(&mut p));
    let mut ranges = vec![(0, 0); p.len()];
    let mut at = 0usize;
    for run in p.chunk_by(|a, b| a.0 == b.0) {
        let k = run[0].0;
        while at < c.len() && c[at].0 < k {
            at += 1;
        }
        let from = at;
        while at < c.len() && c[at].0 == k {
            at += 1;
        }
        let r = if at - from >= REUSED_CONTEXT && run.len() >= REUSED_CONTEXT {
            (0, 0)
        } else {
            (from as u32, at as u32)
        };
        for &(_, i) in run {
            ranges[i as usize] = r;
        }
    }
    Flows {
        consumers: c.into_iter().map(|x| x.1).collect(),
        ranges,
    }
}

/// A sort key for contexts, with its own stable sort.
trait FlowKey: Ord + Copy + Send {
    /// Sort by key, stably.
    fn sort<P: Copy + Send>(v: &mut Vec<(Self, P)>);
}

/// Contexts that do not pack into 64 bits: a comparison sort.
impl FlowKey for Context {
    fn sort<P: Copy + Send>(v: &mut Vec<(Self, P)>) {
        v.sort_by_key(|x| x.0);
    }
}

/// Packed contexts: LSD radix passes over the bits that vary (linear; a comparison sort of
/// 100 000s of flows was a quarter of the step database).
impl FlowKey for u64 {
    fn sort<P: Copy + Send>(v: &mut Vec<(Self, P)>) {
        const MAX_DIGIT: u32 = 11;
        let (Some(lo), Some(hi)) = (v.iter().map(|x| x.0).min(), v.iter().map(|x| x.0).max())
        else {
            return;
        };
        let bits = u64::BITS - (hi - lo).leading_zeros();
        if v.len() < 1024 || bits == 0 {
            v.sort_by_key(|x| x.0);
            return;
        }
        // Equal digits per pass: 27 bits are three passes of 9 (fewer buckets to scatter to)
        // rather than 11 + 11 + 5.
        let passes = bits.div_ceil(MAX_DIGIT);
        let width = bits.div_ceil(passes);
        let mask = (1u64 << width) - 1;
        let mut buf = v.clone();
        let mut offsets = vec![0usize; 1 << width];
        for pass in 0..passes {
            let shift = pass * width;
            let digit = |x: &(u64, P)| (((x.0 - lo) >> shift) & mask) as usize;
            offsets.fill(0);
            for x in v.iter() {
                offsets[digit(x)] += 1;
            }
            let mut sum = 0;
            for o in offsets.iter_mut() {
                let n = *o;
                *o = sum;
                sum += n;
            }
            for x in v.iter() {
                let d = digit(x);
                buf[offsets[d]] = *x;
                offsets[d] += 1;
            }
            std::mem::swap(v, &mut buf);
        }
    }
}

/// Contexts packed into one order-preserving 64-bit key: of each of type and id, only the bits
/// in which some context differs from the first are kept (the type's above the id's). All
/// contexts agree on the bits left out, so two contexts compare as their keys do, and equal
/// contexts have equal keys.
struct KeyPacking {
    ty: BitRuns,
    id: BitRuns,
}

impl KeyPacking {
    /// `None` when there are no contexts, or the varying bits do not fit in 64.
    fn of(mut contexts: impl Iterator<Item = Context>) -> Option<Self> {
        let first = contexts.next()?;
        let (ty, id) = contexts.fold((0, 0), |(t, i), c| {
            (t | (c.0 ^ first.0), i | (c.1 ^ first.1))
        });
        let (ty, id) = (BitRuns::of(ty), BitRuns::of(id));
        (ty.bits + id.bits <= u64::BITS).then_some(KeyPacking { ty, id })
    }

    #[inline]
    fn key(&self, (t, i): Context) -> u64 {
        // `checked_shl`: with no varying id bits the type's bits are the whole key, and with
        // 64 of them the id has none.
        let t = self.ty.gather(t).checked_shl(self.id.bits).unwrap_or(0);
        t | self.id.gather(i)
    }
}

/// The runs of set bits of a mask, to gather them into the low bits of a key in their order
/// (a portable `pext`).
struct BitRuns {
    /// (shift, mask of the run after the shift, position in the key).
    runs: Vec<(u32, u64, u32)>,
    /// Bits gathered.
    bits: u32,
}

impl BitRuns {
    /// A mask with more runs than this is gathered as one run from its lowest set bit to its
    /// highest: still order-preserving, a few bits longer, and a bounded cost per key.
    const MAX_RUNS: usize = 4;

    fn of(mask: u64) -> Self {
        let mut runs = Vec::new();
        let (mut m, mut out) = (mask, 0);
        while m != 0 {
            let shift = m.trailing_zeros();
            let width = (m >> shift).trailing_ones();
            let run = u64::MAX >> (u64::BITS - width);
            runs.push((shift, run, out));
            out += width;
            m &= !(run << shift);
        }
        if runs.len() > Self::MAX_RUNS {
            let shift = mask.trailing_zeros();
            let width = u64::BITS - mask.leading_zeros() - shift;
            let run = u64::MAX >> (u64::BITS - width);
            return BitRuns {
                runs: vec![(shift, run, 0)],
                bits: width,
            };
        }
        BitRuns { runs, bits: out }
    }

    #[inline]
    fn gather(&self, x: u64) -> u64 {
        self.runs
            .iter()
            .fold(0, |k, &(shift, run, out)| k | (((x >> shift) & run) << out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lcg(mut seed: u64) -> impl FnMut() -> u64 {
        move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 11
        }
    }

    /// Producers and consumers over two lines, with contexts drawn by `context`.
    type Lines = (Vec<Vec<(Context, u32)>>, Vec<Vec<(Context, u32)>>);

    /// A context from two random numbers.
    type ContextOf = fn(u64, u64) -> Context;

    fn random_flows(n: usize, seed: u64, context: ContextOf) -> Lines {
        let mut r = lcg(seed);
        let mut line = |n: usize| -> Vec<(Context, u32)> {
            (0..n as u32)
                .map(|ei| (context(r(), r()), ei * 2))
                .collect()
        };
        let consumers = vec![line(n), line(n / 2)];
        let producers = vec![line(n / 2), line(n)];
        (consumers, producers)
    }

    /// The links computed the obvious way: per producer, every consumer with its context in
    /// (line, stored) order, unless the context is reused by 64+ on each side.
    fn naive(
        consumers: &[Vec<(Context, u32)>],
        producers: &[Vec<(Context, u32)>],
    ) -> Vec<Vec<(u32, u32)>> {
        let mut by_context: HashMap<Context, Vec<(u32, u32)>> = HashMap::new();
        for (li, l) in consumers.iter().enumerate() {
            for &(k, ei) in l {
                by_context.entry(k).or_default().push((li as u32, ei));
            }
        }
        let mut producers_of: HashMap<Context, usize> = HashMap::new();
        for &(k, _) in producers.iter().flatten() {
            *producers_of.entry(k).or_default() += 1;
        }
        producers
            .iter()
            .flatten()
            .map(|(k, _)| {
                let linked = by_context.get(k).cloned().unwrap_or_default();
                if linked.len() >= REUSED_CONTEXT && producers_of[k] >= REUSED_CONTEXT {
                    Vec::new()
                } else {
                    linked
                }
            })
            .collect()
    }

    #[test]
    fn flows_link_as_the_obvious_lookup_does() {
        // (flows per line, context from two random numbers): small ranges; an id with a high
        // and a low part (packed to the bits that vary); ids varying in many separate bits;
        // full 64-bit types and ids (no packing: comparison sort); a context reused 100+
        // times on both sides; few flows.
        let cases: [(usize, ContextOf); 6] = [
            (5000, |a, b| (60 + a % 3, 1000 + b % 4000)),
            (5000, |a, b| ((a >> 20) % 2, ((a % 6) << 32) | (b % 3000))),
            (5000, |a, b| (7 + a % 2, b & 0x5555_5555_5555_5555)),
            (5000, |a, b| (a << 11 ^ b, b << 11 ^ a)),
            (3000, |_, b| (1, b % 8)),
            (40, |a, b| (a % 2, b % 9)),
        ];
        for (k, (n, context)) in cases.into_iter().enumerate() {
            let (consumers, producers) = random_flows(n + k, k as u64, context);
            let want = naive(&consumers, &producers);
            let plist: Vec<&[(Context, u32)]> = producers.iter().map(Vec::as_slice).collect();
            let flows = link(consumers.clone(), &plist);
            let got: Vec<Vec<(u32, u32)>> = flows
                .ranges
                .iter()
                .map(|&(a, b)| flows.consumers[a as usize..b as usize].to_vec())
                .collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn packed_keys_order_contexts_as_they_compare() {
        let mut r = lcg(11);
        let contexts: Vec<Context> = (0..2000)
            .map(|_| {
                (
                    ((r() % 4) << 40) | 3,
                    ((r() % 6) << 32) | ((r() % 3000) << 3) | 5,
                )
            })
            .collect();
        let p = KeyPacking::of(contexts.iter().copied()).unwrap();
        assert!(p.ty.bits + p.id.bits <= 2 + 3 + 12);
        for w in contexts.windows(2) {
            assert_eq!(w[0].cmp(&w[1]), p.key(w[0]).cmp(&p.key(w[1])));
        }
        assert!(KeyPacking::of(std::iter::empty()).is_none());
        assert!(KeyPacking::of([(0, 0), (u64::MAX, u64::MAX)].into_iter()).is_none());
    }
}

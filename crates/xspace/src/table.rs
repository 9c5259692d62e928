//! Lookup of metadata by 64-bit id: a dense vector when ids are small and packed (the usual
//! case: 1, 2, 3 …), a hash map when they are sparse (`/host:metadata` is keyed by 64-bit
//! program fingerprints in real captures — a reader that assumes dense ids rejects those).

use std::collections::HashMap;

pub(crate) enum IdIndex {
    /// `slots[id]` = position + 1 (0 = absent).
    Dense(Vec<u32>),
    Sparse(HashMap<i64, usize>),
}

impl IdIndex {
    /// Build from the keys, in the order of the table being indexed (keys are unique).
    pub(crate) fn build(keys: impl Iterator<Item = i64> + Clone) -> IdIndex {
        let n = keys.clone().count();
        let max = keys.clone().max().unwrap_or(0);
        let min = keys.clone().min().unwrap_or(0);
        // Dense only when it costs at most a few slots per entry.
        let dense = min >= 0 && (max as u64) < 4 * n as u64 + 64 && n < u32::MAX as usize;
        if dense {
            let mut slots = vec![0u32; max as usize + 1];
            for (pos, k) in keys.enumerate() {
                slots[k as usize] = pos as u32 + 1;
            }
            IdIndex::Dense(slots)
        } else {
            IdIndex::Sparse(keys.enumerate().map(|(pos, k)| (k, pos)).collect())
        }
    }

    #[inline]
    pub(crate) fn get(&self, id: i64) -> Option<usize> {
        match self {
            IdIndex::Dense(slots) => {
                let s = *slots.get(usize::try_from(id).ok()?)?;
                (s != 0).then(|| s as usize - 1)
            }
            IdIndex::Sparse(m) => m.get(&id).copied(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::IdIndex;

    #[test]
    fn dense_and_sparse() {
        let d = IdIndex::build([1i64, 2, 5].into_iter());
        assert!(matches!(d, IdIndex::Dense(_)));
        assert_eq!(d.get(5), Some(2));
        assert_eq!(d.get(3), None);
        assert_eq!(d.get(-1), None);
        assert_eq!(d.get(1 << 40), None);
        let fp = -1_103_875_109_021_905_671i64; // a u64 fingerprint read as int64
        let s = IdIndex::build([7i64, fp, i64::MAX].into_iter());
        assert!(matches!(s, IdIndex::Sparse(_)));
        assert_eq!(s.get(fp), Some(1));
        assert_eq!(s.get(i64::MAX), Some(2));
        assert_eq!(s.get(8), None);
        let empty = IdIndex::build(std::iter::empty());
        assert_eq!(empty.get(0), None);
    }
}

//! The first few data errors of a run (`corrupt`, `short`): where they are, so a failed
//! verification names the objects or blocks to look at.
//!
//! At most [`MAX_DATA_ERRORS`] are kept per op, the smallest by (kind, key, offset) rather
//! than the first in time: the smallest of a union are the smallest of each part's smallest,
//! so tasks' and workers' lists merge exactly, in any order.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How many data errors an op keeps.
pub const MAX_DATA_ERRORS: usize = 8;

/// One data error: what and where.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataError {
    /// `corrupt` (the bytes differ from what benchrun wrote) or `short` (an object shorter
    /// than its size, or a block read that returned fewer bytes than asked).
    pub kind: String,
    /// The object's key, or the block file or device.
    pub key: String,
    /// `corrupt`: the first byte that differs; `short`: where the data ends (an object's
    /// bytes read; a block read's offset plus its bytes read).
    pub offset: u64,
}

/// Add `e` to `list` (kept sorted, at most [`MAX_DATA_ERRORS`]).
pub fn add(list: &mut Vec<DataError>, e: DataError) {
    if list.len() >= MAX_DATA_ERRORS && list.last().is_some_and(|l| *l <= e) {
        return;
    }
    if let Err(at) = list.binary_search(&e) {
        list.insert(at, e);
        list.truncate(MAX_DATA_ERRORS);
    }
}

/// Fold `other` into `list`.
pub fn merge(list: &mut Vec<DataError>, other: &[DataError]) {
    for e in other {
        add(list, e.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(key: &str, offset: u64) -> DataError {
        DataError {
            kind: "corrupt".into(),
            key: key.into(),
            offset,
        }
    }

    #[test]
    fn the_smallest_are_kept_whatever_the_order_of_merges() {
        let all: Vec<DataError> = (0..30)
            .map(|i| e(&format!("k{:02}", (i * 7) % 30), i))
            .collect();
        let mut want = all.clone();
        want.sort();
        want.truncate(MAX_DATA_ERRORS);
        let mut one = Vec::new();
        for x in &all {
            add(&mut one, x.clone());
        }
        assert_eq!(one, want);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for (i, x) in all.iter().enumerate() {
            add(if i % 3 == 0 { &mut a } else { &mut b }, x.clone());
        }
        let mut ba = b.clone();
        merge(&mut a, &b);
        merge(&mut ba, &a);
        assert_eq!(a, want);
        assert_eq!(ba, want);
        // The same error twice is kept once.
        add(&mut a, want[0].clone());
        assert_eq!(a, want);
    }
}

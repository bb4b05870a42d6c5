//! The dataset's objects as a run reads them, in as little memory as each kind allows.
//!
//! A dataset the prepare stage wrote is named by index (`{prefix}obj-{i:08}`), so it keeps
//! only each object's size: 8 bytes an object (100 million objects: 800 MB), where its keys
//! as strings, held twice during the prepare stage, cost 160-190 bytes an object (measured:
//! BENCHMARKS.md). A listed
//! dataset (`prepare: false`) keeps what the listing returned: its keys are arbitrary. Both
//! are behind an `Arc`, shared by every task of the run, never copied. The price: a read of a
//! generated object formats its key (one small allocation, well under a microsecond, against
//! an operation's tens of microseconds at least).

use std::borrow::Cow;
use std::sync::Arc;

use crate::targets::ObjectInfo;

/// The objects of a dataset, by index `0..len()`.
#[derive(Clone, Debug)]
pub enum Objects {
    /// Written by the prepare stage: object `i` is `{prefix}obj-{i:08}` of size `sizes[i]`.
    Generated {
        /// `dataset.prefix`.
        prefix: Arc<str>,
        /// Each object's size, by index.
        sizes: Arc<[u64]>,
    },
    /// Listed from the target.
    Listed(Arc<[ObjectInfo]>),
}

/// One object: its key (borrowed when the dataset holds it) and size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object<'a> {
    /// Key relative to the target root.
    pub key: Cow<'a, str>,
    /// Size in bytes.
    pub size: u64,
}

impl Default for Objects {
    fn default() -> Self {
        Objects::Listed(Arc::from(Vec::new()))
    }
}

impl From<Vec<ObjectInfo>> for Objects {
    fn from(v: Vec<ObjectInfo>) -> Self {
        Objects::Listed(v.into())
    }
}

impl Objects {
    /// The key of generated object `i` under `prefix`: one definition, shared by the prepare
    /// stage that writes it and the reads that visit it.
    pub fn generated_key(prefix: &str, i: u64) -> String {
        format!("{prefix}obj-{i:08}")
    }

    /// How many objects.
    pub fn len(&self) -> usize {
        match self {
            Objects::Generated { sizes, .. } => sizes.len(),
            Objects::Listed(l) => l.len(),
        }
    }

    /// No objects at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Object `i`, or `None` past the end.
    pub fn get(&self, i: usize) -> Option<Object<'_>> {
        match self {
            Objects::Generated { prefix, sizes } => sizes.get(i).map(|&size| Object {
                key: Cow::Owned(Self::generated_key(prefix, i as u64)),
                size,
            }),
            Objects::Listed(l) => l.get(i).map(|o| Object {
                key: Cow::Borrowed(&o.key),
                size: o.size,
            }),
        }
    }

    /// Every object, in index order (generated keys made one at a time).
    pub fn iter(&self) -> impl Iterator<Item = Object<'_>> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    /// The same objects with new sizes (the pre-stat's answers), in index order.
    pub fn with_sizes(&self, sizes: Vec<u64>) -> Objects {
        debug_assert_eq!(sizes.len(), self.len());
        match self {
            Objects::Generated { prefix, .. } => Objects::Generated {
                prefix: prefix.clone(),
                sizes: sizes.into(),
            },
            Objects::Listed(l) => Objects::Listed(
                l.iter()
                    .zip(sizes)
                    .map(|(o, size)| ObjectInfo {
                        key: o.key.clone(),
                        size,
                    })
                    .collect(),
            ),
        }
    }

    /// Every object's size, in index order.
    pub fn sizes(&self) -> Vec<u64> {
        match self {
            Objects::Generated { sizes, .. } => sizes.to_vec(),
            Objects::Listed(l) => l.iter().map(|o| o.size).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_objects_are_named_by_index_and_keep_their_sizes() {
        let o = Objects::Generated {
            prefix: "d/".into(),
            sizes: vec![3, 5].into(),
        };
        assert_eq!(o.len(), 2);
        assert_eq!(
            o.get(1),
            Some(Object {
                key: "d/obj-00000001".into(),
                size: 5
            })
        );
        assert_eq!(o.get(2), None);
        let keys: Vec<_> = o.iter().map(|o| o.key).collect();
        assert_eq!(keys, ["d/obj-00000000", "d/obj-00000001"]);
        let resized = o.with_sizes(vec![7, 9]);
        assert_eq!(resized.sizes(), [7, 9]);
        assert_eq!(resized.get(0).unwrap().key, "d/obj-00000000");
    }

    #[test]
    fn listed_objects_keep_their_keys() {
        let o: Objects = vec![ObjectInfo {
            key: "x/a".into(),
            size: 4,
        }]
        .into();
        assert_eq!(o.get(0).unwrap().key, "x/a");
        assert_eq!(o.with_sizes(vec![6]).get(0).unwrap().size, 6);
        assert!(Objects::default().is_empty());
    }
}

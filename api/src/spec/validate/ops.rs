//! The op mix: weights, repeats, and what one op needs of the others and of the dataset.

use super::*;

impl Workload {
    /// Some op has a weight, and each op is listed at most once.
    pub(super) fn check_op_mix(&self, bad: &mut impl FnMut(&str, String)) {
        if self.ops.iter().map(|w| w.weight as u64).sum::<u64>() == 0 {
            bad(
                "ops",
                "at least one operation needs a weight above 0".into(),
            );
        }
        if self.ops.len() > OpKind::ALL.len() {
            // Every further entry would repeat an op: say so once, not once per entry.
            bad(
                "ops",
                format!(
                    "has {} entries; list each operation at most once (at most {})",
                    self.ops.len(),
                    OpKind::ALL.len()
                ),
            );
        } else {
            let mut seen = [false; OpKind::ALL.len()];
            for (i, w) in self.ops.iter().enumerate() {
                if std::mem::replace(&mut seen[w.op.index()], true) {
                    bad(
                        &format!("ops[{i}].op"),
                        format!("`{}` is listed twice", w.op),
                    );
                }
            }
        }
    }

    /// `delete` has objects to remove (from `put`), and reads have a dataset to read.
    pub(super) fn check_op_needs(&self, bad: &mut impl FnMut(&str, String)) {
        if self.weight_of(OpKind::Delete) > 0 && self.weight_of(OpKind::Put) == 0 {
            bad("ops", "`delete` removes objects written by `put`, so it needs `put` with a weight above 0".into());
        }
        let reads = self.weight_of(OpKind::Get) + self.weight_of(OpKind::Stat);
        if reads > 0 && self.dataset.objects == 0 {
            bad(
                "dataset.objects",
                "`get` and `stat` need a dataset of at least 1 object".into(),
            );
        }
    }
}

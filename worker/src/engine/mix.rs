//! Weighted choice of the next operation.

use rand::Rng;

use crate::spec::{OpKind, OpWeight};

/// Cumulative weights; picking is one random number and a short scan.
#[derive(Clone, Debug)]
pub struct OpMix {
    cumulative: Vec<(u64, OpKind)>,
    total: u64,
}

impl OpMix {
    /// The mix of `ops`, leaving out any op `exclude` returns true for.
    pub fn new(ops: &[OpWeight], exclude: impl Fn(OpKind) -> bool) -> Option<Self> {
        let mut total = 0;
        let mut cumulative = Vec::new();
        for w in ops.iter().filter(|w| w.weight > 0 && !exclude(w.op)) {
            total += w.weight as u64;
            cumulative.push((total, w.op));
        }
        (total > 0).then_some(Self { cumulative, total })
    }

    /// Draw one op by weight.
    pub fn pick(&self, rng: &mut impl Rng) -> OpKind {
        let x = rng.random_range(0..self.total);
        self.cumulative
            .iter()
            .find(|(c, _)| x < *c)
            .map(|(_, op)| *op)
            .unwrap_or(self.cumulative[0].1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn picks_follow_weights() {
        let ops = vec![
            OpWeight {
                op: OpKind::Get,
                weight: 60,
            },
            OpWeight {
                op: OpKind::Put,
                weight: 30,
            },
            OpWeight {
                op: OpKind::Stat,
                weight: 10,
            },
            OpWeight {
                op: OpKind::List,
                weight: 0,
            },
        ];
        let mix = OpMix::new(&ops, |_| false).unwrap();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let mut counts = [0u32; OpKind::ALL.len()];
        for _ in 0..100_000 {
            counts[mix.pick(&mut rng).index()] += 1;
        }
        assert!(
            (59_000..61_000).contains(&counts[OpKind::Get.index()]),
            "{counts:?}"
        );
        assert!(
            (29_000..31_000).contains(&counts[OpKind::Put.index()]),
            "{counts:?}"
        );
        assert!(
            (9_500..10_500).contains(&counts[OpKind::Stat.index()]),
            "{counts:?}"
        );
        assert_eq!(counts[OpKind::List.index()], 0);
        assert!(
            OpMix::new(&ops, |op| op != OpKind::List).is_none(),
            "only zero weights left"
        );
    }
}

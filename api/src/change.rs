//! Comparing figures: the relative change between two values and the median repeat, one
//! definition for every table (`compare`, sweep tables, the operator's matrix rows and
//! baseline deltas).

/// `(now - base) / base`, or `None` when `base` is 0 (nothing to be relative to).
pub fn relative(base: f64, now: f64) -> Option<f64> {
    (base != 0.0).then(|| (now - base) / base)
}

/// The relative change in percent, rounded to 0.1 (`None` when `base` is 0).
pub fn percent(base: f64, now: f64) -> Option<f64> {
    relative(base, now).map(|r| (r * 1000.0).round() / 10.0)
}

/// A relative change as the reports write it: `+39.0%`, `-26.1%`, `0.0%`.
pub fn percent_text(rel: f64) -> String {
    let p = rel * 100.0;
    if p.abs() < 0.05 {
        "0.0%".into()
    } else {
        format!("{p:+.1}%")
    }
}

/// Index of the median of `items` by `key` (the lower of the two middle ones for an even
/// count): the repeat that stands for a combination of a sweep. `None` when empty.
pub fn median_by<T>(items: &[T], key: impl Fn(&T) -> f64) -> Option<usize> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&a, &b| key(&items[a]).total_cmp(&key(&items[b])));
    order.get(order.len().saturating_sub(1) / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_changes_are_written_like_the_reports() {
        assert_eq!(
            relative(2635.0, 1947.0).map(percent_text).unwrap(),
            "-26.1%"
        );
        assert_eq!(relative(23.6, 32.9).map(percent_text).unwrap(), "+39.4%");
        assert_eq!(relative(5.0, 5.0).map(percent_text).unwrap(), "0.0%");
        assert_eq!(relative(0.0, 3.0), None);
        assert_eq!(percent(200.0, 150.0), Some(-25.0));
        assert_eq!(percent(3.0, 4.0), Some(33.3));
    }

    #[test]
    fn the_median_is_the_lower_middle() {
        assert_eq!(median_by(&[5.0, 1.0, 3.0], |x| *x), Some(2));
        assert_eq!(median_by(&[4.0, 1.0, 3.0, 2.0], |x| *x), Some(3));
        assert_eq!(median_by::<f64>(&[], |x| *x), None);
    }
}

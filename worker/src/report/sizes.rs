//! Per-size tables: one row per object-size bucket of an op (report 000's tables are per
//! size), for a run whose sizes varied. Shown only when an op has more than one bucket.

use crate::figures::Units;
use crate::spec::OpKind;
use crate::stats::Summary;

use super::tables::Table;

/// One table per op of `s` with more than one size bucket, titled `PREFIX OP by object
/// size`: the bucket's sizes, its operations, rates and latency percentiles (from the
/// bucket's own histogram, merged exactly across workers).
pub fn tables(s: &Summary, prefix: &str, units: Units) -> Vec<Table> {
    s.sizes
        .iter()
        .filter(|(_, b)| b.len() > 1)
        .map(|(op, buckets)| table(s, *op, buckets, prefix, units))
        .collect()
}

fn table(
    s: &Summary,
    op: OpKind,
    buckets: &crate::size_buckets::SizeBuckets,
    prefix: &str,
    units: Units,
) -> Table {
    let header = [
        "size",
        "count",
        "ops/s",
        units.rate_label(),
        "p50 ms",
        "p90 ms",
        "p95 ms",
        "p99 ms",
        "max ms",
    ]
    .map(String::from)
    .to_vec();
    let rate_decimals = units.rate_metric().decimals();
    let rows = buckets
        .values()
        .map(|b| {
            let r = b.op_stats().report(s.elapsed_seconds);
            vec![
                b.label(),
                r.count.to_string(),
                format!("{:.1}", r.ops_per_sec),
                format!("{:.*}", rate_decimals, units.rate(r.mib_per_sec)),
                format!("{:.3}", r.p50_ms),
                format!("{:.3}", r.p90_ms),
                format!("{:.3}", r.p95_ms),
                format!("{:.3}", r.p99_ms),
                format!("{:.3}", r.max_ms),
            ]
        })
        .collect();
    Table {
        title: format!("{prefix}{op} by object size (successful ops)"),
        header,
        rows,
    }
}

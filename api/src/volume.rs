//! What a block workload's summary says about the volume: which I/O engine ran, how deep,
//! and how much of the dataset the page cache held (so a read figure served from RAM shows
//! as such). A leaf: `stats` holds it in the summary and merges it.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A block workload's volume figures (one worker, or several merged).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeStats {
    /// Workers per I/O engine that ran (`io_uring`, `sync`).
    pub engines: BTreeMap<String, u32>,
    /// Why `sync` ran under `engine: auto` (io_uring refused: kernel, seccomp profile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_reason: Option<String>,
    /// I/Os in flight per task (`block.queueDepth`).
    pub queue_depth: u32,
    /// O_DIRECT (`direct://`): the page cache is not in the data path.
    pub direct: bool,
    /// Bytes the measured stage addresses: files x file size, or the device range (summed
    /// over workers).
    pub dataset_bytes: u64,
    /// Workers that reused a dataset already laid out (a volume kept between runs).
    #[serde(default)]
    pub reused: u32,
    /// Seconds spent laying the dataset out (summed over workers).
    #[serde(default)]
    pub layout_seconds: f64,
    /// Seconds of random overwrites before the measured stage (`block.precondition`).
    #[serde(default)]
    pub precondition_seconds: f64,
    /// The page cache, for files (a device is not measured: `mincore` needs a mapping).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheResidency>,
}

/// How much of the dataset was in the page cache, from `mincore` over every file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CacheResidency {
    /// Bytes examined (the files' sizes).
    pub bytes: u64,
    /// Bytes resident when the measured stage started (after `dropCache`, when it ran).
    pub resident_at_start: u64,
    /// Bytes resident when it ended.
    pub resident_at_end: u64,
    /// Workers that dropped the dataset from the cache before the start (`block.dropCache`).
    pub dropped: u32,
}

impl CacheResidency {
    /// Fraction of the dataset resident at the start (0 when nothing was examined).
    pub fn start_fraction(&self) -> f64 {
        if self.bytes == 0 {
            0.0
        } else {
            self.resident_at_start as f64 / self.bytes as f64
        }
    }

    /// Fraction resident at the end.
    pub fn end_fraction(&self) -> f64 {
        if self.bytes == 0 {
            0.0
        } else {
            self.resident_at_end as f64 / self.bytes as f64
        }
    }
}

impl VolumeStats {
    /// Add another worker's figures: counts and bytes add, the depth is the largest, `direct`
    /// holds only when it held for every worker.
    pub fn merge(&mut self, o: &VolumeStats) {
        let first = self.engines.is_empty();
        for (k, v) in &o.engines {
            *self.engines.entry(k.clone()).or_default() += v;
        }
        if self.fallback_reason.is_none() {
            self.fallback_reason = o.fallback_reason.clone();
        }
        self.queue_depth = self.queue_depth.max(o.queue_depth);
        self.direct = if first {
            o.direct
        } else {
            self.direct && o.direct
        };
        self.dataset_bytes = self.dataset_bytes.saturating_add(o.dataset_bytes);
        self.reused = self.reused.saturating_add(o.reused);
        self.layout_seconds += o.layout_seconds;
        self.precondition_seconds += o.precondition_seconds;
        if let Some(c) = &o.cache {
            let m = self.cache.get_or_insert_with(Default::default);
            m.bytes = m.bytes.saturating_add(c.bytes);
            m.resident_at_start = m.resident_at_start.saturating_add(c.resident_at_start);
            m.resident_at_end = m.resident_at_end.saturating_add(c.resident_at_end);
            m.dropped = m.dropped.saturating_add(c.dropped);
        }
    }

    /// The engines, as `io_uring` or `io_uring x3, sync x1`.
    pub fn engine_label(&self) -> String {
        if self.engines.len() == 1 {
            return self.engines.keys().next().cloned().unwrap_or_default();
        }
        self.engines
            .iter()
            .map(|(k, v)| format!("{k} x{v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(engine: &str, resident: u64) -> VolumeStats {
        VolumeStats {
            engines: BTreeMap::from([(engine.to_string(), 1)]),
            queue_depth: 16,
            direct: false,
            dataset_bytes: 1 << 30,
            cache: Some(CacheResidency {
                bytes: 1 << 30,
                resident_at_start: resident,
                resident_at_end: 1 << 30,
                dropped: 1,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn merged_workers_add_up_and_name_every_engine() {
        let mut m = VolumeStats::default();
        m.merge(&one("io_uring", 0));
        m.merge(&one("io_uring", 1 << 29));
        m.merge(&one("sync", 0));
        assert_eq!(m.engine_label(), "io_uring x2, sync x1");
        assert_eq!(m.dataset_bytes, 3 << 30);
        let c = m.cache.expect("cache figures kept");
        assert_eq!(c.resident_at_start, 1 << 29);
        assert!((c.start_fraction() - 1.0 / 6.0).abs() < 1e-9);
        assert_eq!(c.end_fraction(), 1.0);
        assert_eq!(c.dropped, 3);
    }
}

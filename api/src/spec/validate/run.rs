//! How long and how hard a run goes: its length, concurrency, rate, warm-up, early stop
//! and error budget.

use super::*;

impl Workload {
    /// Exactly one of `duration` and `totalOps`, and neither of them zero.
    pub(super) fn check_run_length(&self, bad: &mut impl FnMut(&str, String)) {
        if self.checkpoint.is_some() {
            // Repeats set the length (`checkpoint::validate` refuses duration and totalOps).
            return;
        }
        if self.training.is_some() {
            // Epochs set the length (`training::validate` refuses totalOps).
            if self.duration.is_some_and(|d| d.0.is_zero()) {
                bad("duration", "must be greater than 0".into());
            }
            return;
        }
        match (self.duration, self.total_ops) {
            (Some(_), Some(_)) => bad(
                "duration",
                "give either duration or totalOps, not both".into(),
            ),
            (None, None) => bad("duration", "give a duration (e.g. 30s) or totalOps".into()),
            (Some(d), None) if d.0.is_zero() => bad("duration", "must be greater than 0".into()),
            (None, Some(0)) => bad("totalOps", "must be at least 1".into()),
            _ => {}
        }
    }

    /// At least one task issues operations.
    pub(super) fn check_concurrency(&self, bad: &mut impl FnMut(&str, String)) {
        if self.concurrency == 0 {
            bad("concurrency", "must be at least 1 (got 0)".into());
        }
    }

    /// `rateLimit` is a positive, finite rate (its range is a bound, checked with the others).
    pub(super) fn check_rate_limit(&self, bad: &mut impl FnMut(&str, String)) {
        if let Some(r) = self.rate_limit {
            if !(r.is_finite() && r > 0.0) {
                bad(
                    "rateLimit",
                    format!("must be a positive number of operations per second (got {r})"),
                );
            }
        }
    }

    /// `warmup`: whole seconds from 1s to 10m (each of its seconds has its own entry in the
    /// summary's timeline: 10 minutes of them are 54 KB of the 1 MiB a summary may take), with
    /// a `duration` at least as long (a warm-up is a preamble to a measured stage of a known
    /// length, and one longer than it is most likely a slip; with `totalOps` it would eat into
    /// the op count).
    pub(super) fn check_warmup(&self, bad: &mut impl FnMut(&str, String)) {
        let Some(w) = self.warmup else { return };
        let d = w.0;
        if d < std::time::Duration::from_secs(1)
            || d > std::time::Duration::from_secs(600)
            || d.subsec_nanos() != 0
        {
            bad(
                "warmup",
                format!("must be whole seconds from 1s to 10m (got {w})"),
            );
        }
        match self.duration {
            None => bad(
                "warmup",
                "needs duration (the measured stage after the warm-up), not totalOps".into(),
            ),
            Some(m) if d > m.0 => bad(
                "warmup",
                format!("must not be longer than duration (got warmup {w}, duration {m})"),
            ),
            Some(_) => {}
        }
    }

    /// `stopWhenStable`: a window of whole seconds, a sane band, and a `duration` to cap the
    /// run should it never settle.
    pub(super) fn check_stop_when_stable(&self, bad: &mut impl FnMut(&str, String)) {
        let Some(st) = &self.stop_when_stable else {
            return;
        };
        let w = st.window.0;
        let (min, max) = (
            std::time::Duration::from_secs(2),
            std::time::Duration::from_secs(3600),
        );
        if w < min || w > max || w.subsec_nanos() != 0 {
            bad(
                "stopWhenStable.window",
                format!("must be whole seconds from 2s to 1h (got {})", st.window),
            );
        }
        if !(0.1..=100.0).contains(&st.band_percent) {
            bad(
                "stopWhenStable.bandPercent",
                format!("must be from 0.1 to 100 (got {})", st.band_percent),
            );
        }
        match self.duration {
            None => bad(
                "stopWhenStable",
                "needs duration (the longest the run may take), not totalOps".into(),
            ),
            // Steadiness is judged on a full window of the measured stage, so a window as
            // long as it could only be judged as the run ends anyway.
            Some(d) if w >= d.0 => bad(
                "stopWhenStable.window",
                format!(
                    "{} is not shorter than duration ({d}): the run would end before a full window could be judged steady",
                    st.window
                ),
            ),
            Some(_) => {}
        }
    }

    /// `errorBudget`: at least one limit, and a ratio that is one.
    pub(super) fn check_error_budget(&self, bad: &mut impl FnMut(&str, String)) {
        let Some(b) = &self.error_budget else { return };
        if b.max_errors.is_none() && b.max_error_ratio.is_none() {
            bad(
                "errorBudget",
                "give maxErrors, maxErrorRatio or both".into(),
            );
        }
        if let Some(r) = b.max_error_ratio {
            if !(0.0..=1.0).contains(&r) {
                bad(
                    "errorBudget.maxErrorRatio",
                    format!("must be between 0 and 1 (got {r})"),
                );
            }
        }
    }
}

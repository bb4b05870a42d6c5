//! The comparison of a finished run with `spec.baselineRef`, into its status (the comparison
//! itself is in [`crate::baseline`]).

use kube::runtime::events::EventType;

use super::Reconciler;
use crate::baseline;
use crate::run_rules::{self, cond};

impl Reconciler<'_> {
    /// Compare with `spec.baselineRef` into the status and `Regressed`. A baseline that cannot
    /// be read leaves `Regressed=Unknown` with the reason; it never fails the run.
    pub(crate) async fn compare_with_baseline(&mut self, merged: &benchrun_api::Summary) {
        let Some(r) = self.run.spec.baseline_ref.clone() else {
            return;
        };
        let g = self.generation();
        match baseline::load(&r, &self.api(), &self.api()).await {
            Ok(base) => {
                let mut b = baseline::compare_figures(
                    &baseline::figures(merged),
                    &base.figures,
                    &benchrun_api::verdict::Evidence::of("this run", merged),
                    &base.samples,
                    r.tolerance(),
                );
                b.source = base.source;
                let regressed = !b.regressions.is_empty();
                let (reason, msg) = verdict_message(&b);
                if !regressed && !b.not_significant.is_empty() {
                    self.draft
                        .event(EventType::Normal, "NotSignificant", msg.clone());
                }
                self.draft
                    .condition(cond::REGRESSED, regressed, reason, msg.clone());
                if regressed {
                    self.draft.event(EventType::Warning, "Regressed", msg);
                }
                self.draft.status.baseline = Some(b);
            }
            Err(e) => {
                run_rules::set_condition_status(
                    &mut self.draft.status.conditions,
                    cond::REGRESSED,
                    "Unknown",
                    "BaselineUnavailable",
                    format!("cannot compare: {e}"),
                    g,
                    self.draft.now,
                );
                self.draft.event(
                    EventType::Warning,
                    "BaselineUnavailable",
                    format!("cannot compare with the baseline: {e}"),
                );
            }
        }
    }
}

/// The `Regressed` condition's reason and message.
fn verdict_message(b: &crate::crd::baseline::BaselineStatus) -> (&'static str, String) {
    let noise = if b.not_significant.is_empty() {
        String::new()
    } else {
        format!(
            "; beyond the tolerance but not significant (noise): {}",
            b.not_significant.join("; ")
        )
    };
    if !b.regressions.is_empty() {
        let msg = format!(
            "against {} (tolerance {}%, significance p < 0.01): {}{noise}",
            b.source,
            b.tolerance_percent,
            b.regressions.join("; ")
        );
        ("Regressed", msg)
    } else if !b.not_significant.is_empty() {
        let msg = format!(
            "against {} (tolerance {}%): beyond the tolerance but not significant (p >= 0.01, noise): {}",
            b.source,
            b.tolerance_percent,
            b.not_significant.join("; ")
        );
        ("NotSignificant", msg)
    } else {
        let msg = format!(
            "within {}% of {} on every op",
            b.tolerance_percent, b.source
        );
        ("WithinTolerance", msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_p99_four_times_slower_behind_a_faster_median_sets_regressed() {
        let (now, base) = crate::baseline::tests::firmware();
        let mut b = baseline::compare(&now, &base, "run old", 10.0);
        b.source = "run old".into();
        let (reason, msg) = verdict_message(&b);
        assert_eq!(reason, "Regressed", "{msg}");
        assert!(
            msg.starts_with("against run old (tolerance 10%, significance p < 0.01): all p99 20.")
                && msg.contains("; get p99 20."),
            "{msg}"
        );
    }
}

//! The pass of a matrix run: its combinations run one at a time as child runs; the table
//! fills as they finish (the planning is in [`crate::sweep`]).

use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};

use super::Reconciler;
use crate::children::create_if_absent;
use crate::context::POLL;
use crate::crd::matrix::{CombinationRow, MatrixStatus};
use crate::crd::{BenchmarkRun, Phase};
use crate::state::cond;
use crate::{resources, sweep, Result};

impl Reconciler<'_> {
    /// One pass of a matrix run: start the next combination's child run once the one before
    /// it finished, fill the table, and finish when every combination has.
    pub(crate) async fn sweep(&mut self, m: &benchrun_api::matrix::Matrix) -> Result<Action> {
        let (planned, baseline) = match sweep::plan(&self.run.spec, m) {
            Ok(p) => p,
            Err(errs) => {
                let msg = errs.join("; ");
                self.draft
                    .condition(cond::VALID, false, "InvalidWorkload", msg.clone());
                self.draft.fail("InvalidWorkload", msg);
                return Ok(Action::requeue(POLL));
            }
        };
        let n = planned.len();
        let mut ms = self
            .draft
            .status
            .matrix
            .clone()
            .unwrap_or_else(|| MatrixStatus {
                progress: String::new(),
                total: n as u32,
                baseline: baseline as u32 + 1,
                combinations: planned
                    .iter()
                    .enumerate()
                    .map(|(k, p)| CombinationRow {
                        name: p.combination.to_string(),
                        run: sweep::child_name(&self.name, k),
                        ..Default::default()
                    })
                    .collect(),
            });
        if self.draft.status.phase == Phase::Pending {
            self.draft.set_phase(
                Phase::Running,
                "Sweeping",
                format!("{n} combinations, one at a time"),
            );
        }
        let uid = self.run.uid().unwrap_or_default();
        let runs: Api<BenchmarkRun> = self.api();
        let mut current = None;
        'combos: for (k, p) in planned.iter().enumerate() {
            if ms.combinations[k].phase.is_finished() {
                continue;
            }
            // The combination's children in order (warm-up, repeats): start the first that
            // does not exist, wait for the first that has not finished.
            let mut repeats = vec![];
            for (name, slot) in sweep::slots(&self.name, k, m) {
                let Some(child) = runs.get_opt(&name).await? else {
                    let spec = match (slot, m.warmup) {
                        (sweep::Slot::Warmup, Some(w)) => sweep::warmup_spec(&self.run.spec, p, w),
                        _ => sweep::child_spec(&self.run.spec, p),
                    };
                    let mut child = BenchmarkRun::new(&name, spec);
                    child.metadata.namespace = Some(self.ns.clone());
                    child.metadata.owner_references =
                        self.run.controller_owner_ref(&()).map(|o| vec![o]);
                    child.metadata.labels =
                        Some([(sweep::MATRIX_LABEL.to_string(), self.name.clone())].into());
                    create_if_absent(&runs, &child, self.run).await?;
                    let what = match slot {
                        sweep::Slot::Warmup => "warm-up".to_string(),
                        sweep::Slot::Repeat(j) => {
                            format!("repeat {} of {}", j + 1, m.repeats.max(1))
                        }
                    };
                    self.draft.event(
                        EventType::Normal,
                        "CombinationStarted",
                        format!(
                            "combination {} of {n} ({}), {what}, as run {name}",
                            k + 1,
                            ms.combinations[k].name
                        ),
                    );
                    current = Some(k);
                    break 'combos;
                };
                let ours = child
                    .owner_references()
                    .iter()
                    .any(|o| o.uid == uid && o.controller == Some(true));
                if !ours {
                    let msg = format!(
                        "run {name} exists and is not this run's combination {}: delete or rename it",
                        k + 1
                    );
                    self.draft.fail("NameTaken", msg);
                    return Ok(Action::requeue(POLL));
                }
                let phase = child.status.as_ref().map(|s| s.phase).unwrap_or_default();
                if !phase.is_finished() {
                    ms.combinations[k].phase = if phase == Phase::Pending {
                        Phase::Preparing
                    } else {
                        phase
                    };
                    current = Some(k);
                    break 'combos;
                }
                // A warm-up is not measured: how it ended does not count.
                if let sweep::Slot::Repeat(_) = slot {
                    repeats.push(child);
                }
            }
            // Every child of the combination finished: the median repeat stands for it.
            ms.combinations[k].runs = repeats.iter().map(|r| r.name_any()).collect();
            let failed = repeats
                .iter()
                .find(|r| r.status.as_ref().map(|s| s.phase) != Some(Phase::Succeeded));
            let Some(i) = sweep::representative(&repeats) else {
                continue;
            };
            let child = failed.unwrap_or(&repeats[i]).clone();
            let name = child.name_any();
            ms.combinations[k].run = name.clone();
            let phase = child.status.as_ref().map(|s| s.phase).unwrap_or_default();
            let merged = self
                .api::<ConfigMap>()
                .get_opt(&resources::result_cm_name(&name))
                .await?
                .and_then(|cm| cm.data?.remove(crate::crd::MERGED_KEY))
                .and_then(|t| serde_json::from_str::<benchrun_api::Summary>(&t).ok());
            sweep::fill_row(&mut ms.combinations[k], &child, merged.as_ref());
            self.draft.event(
                EventType::Normal,
                "CombinationFinished",
                format!(
                    "combination {} of {n} ({}): {}",
                    k + 1,
                    ms.combinations[k].name,
                    phase.as_str()
                ),
            );
        }
        sweep::compare_rows(&mut ms.combinations, baseline);
        match current {
            Some(k) => {
                ms.progress = format!("combination {} of {n}", k + 1);
                self.draft.status.workers_summary = Some(format!("{k}/{n} combinations"));
            }
            None => {
                ms.progress = format!("{n} combinations done");
                self.draft.status.workers_summary = Some(format!("{n}/{n} combinations"));
                let failed: Vec<String> = ms
                    .combinations
                    .iter()
                    .filter(|c| c.phase != Phase::Succeeded)
                    .map(|c| format!("{} ({})", c.run, c.name))
                    .collect();
                if failed.is_empty() {
                    let msg = format!("{n} combinations finished; the table is in status.matrix");
                    self.draft
                        .condition(cond::COMPLETE, true, "Succeeded", msg.clone());
                    self.draft.status.finish_time = Some(self.draft.now.to_rfc3339());
                    self.draft.set_phase(Phase::Succeeded, "Succeeded", msg);
                } else {
                    self.draft.fail(
                        "CombinationsFailed",
                        format!(
                            "{} of {n} combinations did not succeed: {}",
                            failed.len(),
                            failed.join(", ")
                        ),
                    );
                }
            }
        }
        self.draft.status.matrix = Some(ms);
        Ok(Action::requeue(POLL))
    }
}

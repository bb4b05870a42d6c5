//! The pass of a matrix run: its combinations run one at a time as child runs; the table
//! fills as they finish (the planning and the table's rules are in [`crate::sweep`]).

use benchrun_api::matrix::{Matrix, Planned};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ListParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};

use super::Reconciler;
use crate::children::{create_if_absent, delete_owned, Deleted};
use crate::context::POLL;
use crate::crd::matrix::{CombinationRow, MatrixStatus};
use crate::crd::{BenchmarkRun, Phase};
use crate::run_rules::cond;
use crate::sweep::{self, Slot};
use crate::{resources, Result};

/// Where one combination is.
enum Combination {
    /// Every child finished; its row is filled.
    Finished,
    /// A child was started, or is running: the sweep waits for it.
    Current,
    /// A run of the child's name exists and is not ours: the sweep failed.
    NameTaken,
}

impl Reconciler<'_> {
    /// One pass of a matrix run: start the next combination's child run once the one before
    /// it finished, fill the table, and finish when every combination has.
    pub(crate) async fn sweep(&mut self, m: &Matrix) -> Result<Action> {
        let (planned, baseline) = match sweep::plan(&self.run.spec, m) {
            Ok(p) => p,
            Err(errs) => {
                let msg = errs.join("; ");
                let d = &mut self.draft;
                d.condition(cond::VALID, false, "InvalidWorkload", msg.clone());
                d.fail("InvalidWorkload", msg);
                return Ok(Action::requeue(POLL));
            }
        };
        let n = planned.len();
        let mut table = self
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
            let note = format!("{n} combinations, one at a time");
            self.draft.set_phase(Phase::Running, "Sweeping", note);
        }
        let mut current = None;
        for (k, p) in planned.iter().enumerate() {
            if table.combinations[k].phase.is_finished() {
                continue;
            }
            match self.combination(m, k, p, &mut table).await? {
                Combination::Finished => {}
                Combination::Current => {
                    current = Some(k);
                    break;
                }
                Combination::NameTaken => return Ok(Action::requeue(POLL)),
            }
        }
        sweep::compare_rows(&mut table.combinations, baseline);
        sweep::progress(&mut self.draft, &mut table, current);
        self.draft.status.matrix = Some(table);
        Ok(Action::requeue(POLL))
    }

    /// Combination `k`'s children in order (warm-up, repeats): start the first that does not
    /// exist, wait for the first that has not finished; when all have, fill its row from the
    /// median repeat.
    async fn combination(
        &mut self,
        m: &Matrix,
        k: usize,
        p: &Planned,
        table: &mut MatrixStatus,
    ) -> Result<Combination> {
        let n = table.combinations.len();
        let runs: Api<BenchmarkRun> = self.api();
        let mut repeats = vec![];
        for (name, slot) in sweep::slots(&self.name, k, m) {
            let Some(child) = runs.get_opt(&name).await? else {
                self.start_child(m, p, &name, slot).await?;
                let what = match slot {
                    Slot::Warmup => "warm-up".to_string(),
                    Slot::Repeat(j) => format!("repeat {} of {}", j + 1, m.repeats.max(1)),
                };
                let row = &table.combinations[k].name;
                let note = format!(
                    "combination {} of {n} ({row}), {what}, as run {name}",
                    k + 1
                );
                self.draft
                    .event(EventType::Normal, "CombinationStarted", note);
                return Ok(Combination::Current);
            };
            if !crate::children::owned_by(self.run, child.owner_references()) {
                let msg = format!(
                    "run {name} exists and is not this run's combination {}: delete or rename it",
                    k + 1
                );
                self.draft.fail("NameTaken", msg);
                return Ok(Combination::NameTaken);
            }
            let phase = child.status.as_ref().map(|s| s.phase).unwrap_or_default();
            if !phase.is_finished() {
                table.combinations[k].phase = match phase {
                    Phase::Pending => Phase::Preparing,
                    other => other,
                };
                return Ok(Combination::Current);
            }
            // A warm-up is not measured: how it ended does not count.
            if let Slot::Repeat(_) = slot {
                repeats.push(child);
            }
        }
        self.fill_row(&mut table.combinations[k], &repeats, k, n)
            .await?;
        Ok(Combination::Finished)
    }

    /// A finished matrix run's (or search's) children still in flight, found by `label`, are
    /// deleted, each as listed, by its UID (their
    /// finalizer stops their workers, which remove what they created within the cleanup
    /// bound): a sweep that failed (its deadline, a spec made invalid) measures no further
    /// on the nodes. Which ones is [`sweep::children_to_stop`]'s decision.
    pub(crate) async fn stop_children(&mut self, label: &str) -> Result<()> {
        let api: Api<BenchmarkRun> = self.api();
        let lp = ListParams::default().labels(&format!("{label}={}", self.name));
        let children = api.list(&lp).await?.items;
        let phase = self.draft.status.phase;
        for (name, uid) in sweep::children_to_stop(self.run, phase, &children) {
            let Some(child) = children.iter().find(|c| c.uid().as_deref() == Some(&uid)) else {
                continue;
            };
            let dp = DeleteParams::background();
            if delete_owned(&api, child, self.run, dp).await? == Deleted::Yes {
                let note = format!(
                    "deleted run {name}, in flight when this matrix run became {}: its workers stop and remove what they created",
                    phase.as_str()
                );
                self.draft
                    .event(EventType::Warning, "StoppedCombination", note);
            }
        }
        Ok(())
    }

    /// Create the child run of this slot of a combination.
    async fn start_child(&self, m: &Matrix, p: &Planned, name: &str, slot: Slot) -> Result<()> {
        let spec = match (slot, m.warmup) {
            (Slot::Warmup, Some(w)) => sweep::warmup_spec(&self.run.spec, p, w),
            _ => sweep::child_spec(&self.run.spec, p),
        };
        let child = crate::resources::child_run(self.run, name, spec, sweep::MATRIX_LABEL)?;
        create_if_absent(&self.api(), &child, self.run).await?;
        Ok(())
    }

    /// Every child of combination `k` finished: the median repeat stands for it (a failed
    /// repeat, if any, makes the row fail).
    async fn fill_row(
        &mut self,
        row: &mut CombinationRow,
        repeats: &[BenchmarkRun],
        k: usize,
        n: usize,
    ) -> Result<()> {
        row.runs = repeats.iter().map(|r| r.name_any()).collect();
        let failed = repeats
            .iter()
            .find(|r| r.status.as_ref().map(|s| s.phase) != Some(Phase::Succeeded));
        let Some(i) = sweep::representative(repeats) else {
            return Ok(());
        };
        let child = failed.unwrap_or(&repeats[i]);
        let name = child.name_any();
        row.run = name.clone();
        let phase = child.status.as_ref().map(|s| s.phase).unwrap_or_default();
        let merged = self
            .api::<ConfigMap>()
            .get_opt(&resources::result_cm_name(&name))
            .await?
            .and_then(|cm| cm.data?.remove(crate::crd::MERGED_KEY))
            .and_then(|t| benchrun_api::summary_read::read(&t).ok());
        sweep::fill_row(row, child, merged.as_ref());
        let note = format!(
            "combination {} of {n} ({}): {}",
            k + 1,
            row.name,
            phase.as_str()
        );
        self.draft
            .event(EventType::Normal, "CombinationFinished", note);
        Ok(())
    }
}

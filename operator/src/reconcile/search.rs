//! The pass of a maximum-accelerators search: its probes run one at a time as child runs; each
//! finished probe is judged on its merged result and decides the next (the planning and the
//! judging are in [`crate::search`]).

use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};

use super::{decide, Reconciler};
use crate::children::create_if_absent;
use crate::context::POLL;
use crate::crd::training::{ProbeRow, SearchStatus};
use crate::crd::{BenchmarkRun, Phase};
use crate::run_rules::cond;
use crate::search::{self, Judged, Plan};
use crate::{resources, results, Result};

impl Reconciler<'_> {
    /// One pass of a searching run: judge the probe in flight once it finished, start the
    /// next one the search asks for, and finish with the answer when it asks for none.
    pub(crate) async fn search(&mut self, plan: Result<Plan, String>) -> Result<Action> {
        let plan = match plan {
            Ok(p) => p,
            Err(msg) => {
                let d = &mut self.draft;
                d.condition(cond::VALID, false, "InvalidWorkload", msg.clone());
                d.fail("InvalidWorkload", msg);
                return Ok(Action::requeue(POLL));
            }
        };
        let mut st = self
            .draft
            .status
            .search
            .clone()
            .unwrap_or_else(|| SearchStatus {
                mark: plan.mark,
                cap: plan.cap,
                ..Default::default()
            });
        if self.draft.status.phase == Phase::Pending {
            let note = format!(
                "probes of 1, 2, 4, ... accelerators per worker (up to {}), one at a time, each a run of every worker",
                plan.cap
            );
            self.draft.set_phase(Phase::Running, "Searching", note);
        }
        let in_flight = st.probes.iter().position(|r| r.result.is_none());
        if let Some(k) = in_flight {
            let judged = self.probe(&mut st.probes[k], k + 1, plan).await?;
            if let Some(msg) = judged {
                self.draft.status.search = Some(st);
                self.draft.fail("ProbeFailed", msg);
                return Ok(Action::requeue(POLL));
            }
            if st.probes[k].result.is_none() {
                self.draft.status.search = Some(st);
                return Ok(Action::requeue(POLL));
            }
        }
        let bracket = search::bracket(plan.cap, &st.probes);
        match bracket.next() {
            Some(n) => {
                let k = st.probes.len() + 1;
                let name = search::child_name(&self.name, k);
                self.start_probe(&name, n, plan.epochs).await?;
                st.progress = format!("probe {k}: {n} accelerators per worker (run {name})");
                self.draft.status.workers_summary = Some(format!("probe {k}"));
                self.draft.event(
                    EventType::Normal,
                    "ProbeStarted",
                    format!("probe {k}: {n} accelerators per worker, as run {name}"),
                );
                st.probes.push(ProbeRow {
                    run: name,
                    accelerators: n,
                    phase: Phase::Pending,
                    result: None,
                });
                self.draft.status.search = Some(st);
            }
            None => self.search_done(st, &bracket).await?,
        }
        Ok(Action::requeue(POLL))
    }

    /// The probe in flight: (re)create its child when it is missing, follow its phase, and
    /// judge it once finished (into `row.result`). `Some(why)` when the search must fail.
    async fn probe(&mut self, row: &mut ProbeRow, k: usize, plan: Plan) -> Result<Option<String>> {
        let runs: Api<BenchmarkRun> = self.api();
        let Some(child) = runs.get_opt(&row.run).await? else {
            // Created in a pass whose status write was lost, or deleted by hand: again.
            self.start_probe(&row.run, row.accelerators, plan.epochs)
                .await?;
            return Ok(None);
        };
        if !crate::children::owned_by(self.run, child.owner_references()) {
            return Ok(Some(format!(
                "run {} exists and is not this run's probe {k}: delete or rename it",
                row.run
            )));
        }
        let phase = child.status.as_ref().map(|s| s.phase).unwrap_or_default();
        row.phase = phase;
        if !phase.is_finished() {
            return Ok(None);
        }
        let merged = results::load_merged(&self.api(), &row.run).await?;
        match search::judge(&child, merged.as_ref(), row.accelerators, plan.mark) {
            Judged::Probe(p) => {
                let note = format!(
                    "probe {k}: {} accelerators per worker, lowest AU {:.1}% against the {:.1}% mark: {}",
                    p.accelerators,
                    p.au_min_percent,
                    plan.mark,
                    if p.passed { "pass" } else { "FAIL" }
                );
                self.draft.event(EventType::Normal, "ProbeFinished", note);
                row.result = Some(p);
                Ok(None)
            }
            Judged::Failed(why) => Ok(Some(why)),
        }
    }

    /// Create probe child `name` with `n` accelerators per worker.
    async fn start_probe(&self, name: &str, n: u32, epochs: u32) -> Result<()> {
        let spec = search::probe_spec(&self.run.spec, n, epochs);
        let child = crate::resources::child_run(self.run, name, spec, search::SEARCH_LABEL)?;
        create_if_absent(&self.api(), &child, self.run).await?;
        Ok(())
    }

    /// The search has its answer: the result of the probe at the answer (of the first probe
    /// when none passed) with `training.search` set becomes this run's merged result, in its
    /// own result ConfigMap, and is judged as any run's (baseline, thresholds).
    async fn search_done(
        &mut self,
        mut st: SearchStatus,
        bracket: &benchrun_api::training_search::Bracket,
    ) -> Result<()> {
        let figures = search::figures(&st, bracket);
        st.max_accelerators = Some(figures.max_accelerators);
        st.at_cap = figures.at_cap;
        let answer = search::answer_text(&figures);
        st.progress = format!("done: {answer}");
        let n = st.probes.len();
        self.draft.status.workers_summary = Some(format!("{n} probes"));
        let row = search::representative(&st.probes, figures.max_accelerators)
            .and_then(|i| st.probes.get(i))
            .map(|r| r.run.clone());
        self.draft.status.search = Some(st);
        let cms: Api<ConfigMap> = self.api();
        let merged = match &row {
            Some(r) => results::load_merged(&cms, r).await?,
            None => None,
        };
        let Some(mut merged) = merged else {
            let msg = format!(
                "{answer}, but the result of its probe ({}) cannot be read",
                row.as_deref().unwrap_or("none")
            );
            self.draft.fail("ProbeFailed", msg);
            return Ok(());
        };
        if let Some(t) = merged.training.as_mut() {
            t.search = Some(figures);
        }
        create_if_absent(&cms, &resources::result_config_map(self.run)?, self.run).await?;
        let text = serde_json::to_string(&merged)?;
        results::persist_merged(&cms, &self.name, &text).await?;
        let cm = resources::result_cm_name(&self.name);
        decide::merged(&mut self.draft, &merged, &cm);
        let msg = format!(
            "{answer} after {n} probes; the probes are in status.search, the result of run {} in configmap {cm}",
            row.unwrap_or_default()
        );
        self.compare_with_baseline(&merged).await;
        decide::verdict(
            &mut self.draft,
            &self.run.spec.thresholds,
            &merged,
            msg,
            decide::Beside::default(),
        );
        Ok(())
    }
}

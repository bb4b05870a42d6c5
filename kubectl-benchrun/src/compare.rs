//! `compare` and `report`: the stored merged summaries read from the cluster and handed to the
//! worker's own `compare` and `report` (one implementation, the same output as
//! `benchrun-worker compare`/`report` on the same summaries). Two control-plane runs have no
//! summaries: their `status.controlPlane` is compared by [`crate::cpcompare`], and reported
//! as `result` prints it.

use anyhow::{Context, Result};
use benchrun_api::verdict::{Outcome, Verdict};
use benchrun_worker::compare;
use benchrun_worker::report::{self, Run};

use benchrun_operator::crd::BenchmarkRun;

use crate::cli::{CompareArgs, ReportArgs};
use crate::connect::{self, Target};
use crate::cpcompare;
use crate::exit::{bad_input, OK, SLOWER};
use crate::fetch;

/// The one summary of run `name` (a matrix run has several: refused, naming its children).
async fn single(t: &Target, name: &str) -> Result<Run> {
    let mut runs = fetch::report_runs(t, name).await?;
    if runs.len() != 1 {
        return Err(bad_input(format!(
            "run {name} is a matrix of {} combinations: compare two of its child runs ({name}-0, {name}-1, ...), or use report",
            runs.len()
        )));
    }
    Ok(runs.remove(0))
}

/// `kubectl benchrun compare A B`.
pub async fn main(t: &Target, args: &CompareArgs) -> Result<u8> {
    if let Some((a, b)) = control_plane_pair(t, args).await? {
        return control_plane(a, b, args);
    }
    let a = single(t, &args.a).await?;
    let b = single(t, &args.b).await?;
    let c = compare::compare_in(&a.label, &a.summary, &b.label, &b.summary, args.units);
    print!("{}", compare::render::render(&c, args.format));
    match args.fail_if_slower {
        Some(pct) => Ok(gate(&args.b, pct, "", c.slower_than(pct), &c.verdicts(pct))),
        None => Ok(OK),
    }
}

/// `--fail-if-slower`: SLOWER with the figures named when the rule says B is slower, and a
/// note of the changes beyond the tolerance that the tests call noise (so a gate that passes,
/// or fails on fewer figures than moved, says why).
fn gate(b: &str, pct: f64, on: &str, slower: Vec<String>, verdicts: &[Verdict]) -> u8 {
    let noise: Vec<String> = verdicts
        .iter()
        .filter(|v| v.outcome == Outcome::NotSignificant)
        .map(Verdict::describe)
        .collect();
    if !noise.is_empty() {
        eprintln!(
            "note: beyond {pct}% but not significant (p >= 0.01, noise): {}",
            noise.join("; ")
        );
    }
    if slower.is_empty() {
        return OK;
    }
    eprintln!(
        "error: {b} is slower than allowed ({pct}%{on}): {}",
        slower.join("; ")
    );
    SLOWER
}

/// Both runs, when either is a control-plane run (then both must be, and finished); `None`
/// for two data-plane runs (or a missing one: the summaries' path says so).
async fn control_plane_pair(
    t: &Target,
    args: &CompareArgs,
) -> Result<Option<(cpcompare::Side, cpcompare::Side)>> {
    let api = t.api::<BenchmarkRun>();
    let mut runs = vec![];
    for name in [&args.a, &args.b] {
        match api
            .get_opt(name)
            .await
            .map_err(|e| connect::explain(e, &format!("reading run {name}")))?
        {
            Some(r) => runs.push(r),
            None => return Ok(None),
        }
    }
    let is_cp = |r: &BenchmarkRun| r.spec.control_plane.is_some();
    if !runs.iter().any(is_cp) {
        return Ok(None);
    }
    let mut sides = vec![];
    for (name, r) in [&args.a, &args.b].into_iter().zip(&runs) {
        let Some(cp) = &r.spec.control_plane else {
            return Err(bad_input(format!(
                "run {name} is a data-plane run: a control-plane run compares only with another control-plane run"
            )));
        };
        let Some(status) = r.status.as_ref().and_then(|s| s.control_plane.clone()) else {
            return Err(bad_input(format!(
                "run {name} has no control-plane result yet (wait for it: kubectl benchrun watch {name})"
            )));
        };
        sides.push(cpcompare::Side {
            run: name.clone(),
            storage_class: cp
                .storage_class_name
                .clone()
                .unwrap_or_else(|| "default".into()),
            status,
        });
    }
    let b = sides.pop();
    let a = sides.pop();
    Ok(a.zip(b))
}

/// Two control-plane runs compared: the table, and `--fail-if-slower` on each operation's p99
/// (the rule's ops/s needs a rate, which lifecycles do not have).
fn control_plane(a: cpcompare::Side, b: cpcompare::Side, args: &CompareArgs) -> Result<u8> {
    let c = cpcompare::compare(a, b);
    print!("{}", cpcompare::render(&c, args.format));
    match args.fail_if_slower {
        Some(pct) => Ok(gate(
            &args.b,
            pct,
            " on p99",
            c.slower_than(pct),
            &c.verdicts(pct),
        )),
        None => Ok(OK),
    }
}

/// `kubectl benchrun report NAME... [--out DIR]`.
pub async fn report(t: &Target, args: &ReportArgs) -> Result<u8> {
    let mut runs = vec![];
    let mut control_planes = vec![];
    for name in &args.names {
        let run = fetch::run(t, name).await?;
        let only_cp = benchrun_operator::crd::is_control_plane_only(&run.spec.workload);
        match run.status.as_ref().and_then(|s| s.control_plane.clone()) {
            Some(cp) => control_planes.push((name.clone(), cp)),
            None if only_cp => {
                let phase = run.status.as_ref().map(|s| s.phase).unwrap_or_default();
                return Err(bad_input(format!(
                    "run {name} has no control-plane result yet (phase {})",
                    phase.as_str()
                )));
            }
            None => {}
        }
        // A control-plane run without a workload has no data-plane summary to report.
        if !only_cp {
            runs.extend(fetch::report_runs_of(t, &run).await?);
        }
    }
    if !runs.is_empty() {
        report::write_or_print(&runs, args.out.as_deref(), args.units)?;
    }
    if control_planes.is_empty() {
        return Ok(OK);
    }
    let text = control_plane_sections(&control_planes);
    match &args.out {
        None => print!("{}{text}", if runs.is_empty() { "" } else { "\n" }),
        Some(dir) => {
            // Beside the data plane's report.md (appended), or as the whole of it.
            use std::io::Write as _;
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let path = dir.join("report.md");
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .with_context(|| format!("opening {}", path.display()))?;
            f.write_all(format!("\n{text}").as_bytes())
                .with_context(|| format!("writing {}", path.display()))?;
            if runs.is_empty() {
                println!("{}", path.display());
            }
        }
    }
    Ok(OK)
}

/// Each run's control-plane table (as `result` prints it) under a heading of its name, in
/// Markdown (the tables as preformatted text: their columns line up as on a terminal).
fn control_plane_sections(
    runs: &[(
        String,
        benchrun_operator::crd::control_plane::ControlPlaneStatus,
    )],
) -> String {
    runs.iter()
        .map(|(name, cp)| {
            format!(
                "## Control plane: {name}\n\n```text\n{}```\n",
                crate::show::control_plane(cp)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_control_plane_gets_a_section_with_its_table() {
        let cp: benchrun_operator::crd::control_plane::ControlPlaneStatus =
            serde_json::from_value(serde_json::json!({
                "requested": 2, "completed": 2, "failed": 0, "elapsedMs": 1500.0,
                "operations": {"provision": {"count": 2, "errors": 0, "p50Ms": 40.0, "p95Ms": 50.0, "p99Ms": 50.0, "maxMs": 50.0}}
            }))
            .expect("status");
        let text = super::control_plane_sections(&[("a".into(), cp.clone()), ("b".into(), cp)]);
        let heads: Vec<&str> = text.lines().filter(|l| l.starts_with("## ")).collect();
        assert_eq!(
            heads,
            ["## Control plane: a", "## Control plane: b"],
            "{text}"
        );
        assert_eq!(text.matches("```text\n").count(), 2, "{text}");
        assert!(text.contains("2 of 2 lifecycles completed"), "{text}");
        assert!(
            text.lines()
                .any(|l| l.starts_with("provision") && l.contains("40.000")),
            "{text}"
        );
    }
}
